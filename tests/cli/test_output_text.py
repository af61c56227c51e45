"""What the CLI prints for people (no --json), through the real command line:
no JSON where text is due, no blank fields, no section that silently vanishes,
every address a submission touched, sizes in bytes, how a bulk load fared —
and help that says where the options go and how each submission is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_cli import leaf_parsers

from memors_cli.main import build_parser

RAFT = "Raft elects a leader by majority vote and the leader sends heartbeats to followers."


def _item(cli, kind: str) -> dict:
    r = cli("compact", "--json")
    assert r.code == 0, r
    items = [i for i in r.json["items"] if i["kind"] == kind]
    assert items, r.json
    return items[0]


def _blank_fields(text: str) -> list[str]:
    """``key:`` lines with no value after them and nothing indented under them."""
    lines = text.splitlines()
    blank = []
    for n, line in enumerate(lines):
        m = re.fullmatch(r"( *)[\w-]+: ?", line)
        if m:
            after = lines[n + 1] if n + 1 < len(lines) else ""
            if len(after) - len(after.lstrip(" ")) <= len(m.group(1)) or line.endswith(" "):
                blank.append(line)
    return blank


# --- items show, get ------------------------------------------------------------------------


def test_items_show_is_text_unless_json(cli):
    cli("fact", "add", "Raft", "timeout", "150 ms", "--from", "2024-01-01")
    cli("fact", "add", "Raft", "timeout", "300 ms", "--from", "2024-01-01")
    item = _item(cli, "conflict")
    r = cli("items", "show", str(item["id"]))
    assert r.code == 0, r
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.out)
    assert r.out.startswith(f"item {item['id']} (conflict): open\n"), r.out
    for fact in item["payload"]["facts"]:
        assert f"{fact['address']}  Raft | timeout | {fact['value']}  [2024-01-01, …)" in r.out
    assert f"memors-mcp submit {item['id']} --keep FACT-ADDR" in r.out
    assert f"--fingerprint {item['fingerprint']}" in r.out
    assert not _blank_fields(r.out), r.out
    assert cli("items", "show", str(item["id"]), "--json").json["id"] == item["id"]


def test_get_leaves_empty_fields_out_and_says_what_absence_means(cli):
    fact = cli("fact", "add", "Raft", "timeout", "150 ms", "--json").json["fact"]
    r = cli("get", fact)
    assert r.code == 0, r
    assert not _blank_fields(r.out), r.out
    assert "valid_to: none (open-ended)" in r.out
    assert "valid_from: none (valid since always)" in r.out
    assert "\nsource:" not in r.out  # no source passage: left out
    assert "expired: no" in r.out
    doc = cli("remember", "-", "--json", input="An untitled note without a uri.\n").json
    r = cli("get", doc["document"])
    assert not _blank_fields(r.out), r.out
    assert "\ntitle:" not in r.out and "\nuri:" not in r.out


# --- submit ------------------------------------------------------------------------------------


def test_a_conflict_submission_names_the_fact_it_superseded(cli):
    cli("fact", "add", "Raft", "timeout", "150 ms", "--from", "2024-01-01")
    cli("fact", "add", "Raft", "timeout", "300 ms", "--from", "2024-01-01")
    item = _item(cli, "conflict")
    old, new = item["payload"]["facts"]
    r = cli("submit", str(item["id"]), "--keep", new["address"], "--dry-run")
    assert f"would be kept {new['address']}: Raft | timeout | 300 ms" in r.out, r.out
    assert f"would be superseded {old['address']}: Raft | timeout | 150 ms" in r.out, r.out
    r = cli("submit", str(item["id"]), "--keep", new["address"])
    assert r.code == 0, r
    assert f"kept {new['address']}: Raft | timeout | 300 ms" in r.out, r.out
    assert f"superseded {old['address']}: Raft | timeout | 150 ms" in r.out, r.out


def test_bound_says_what_would_change_and_shows_the_new_range(cli):
    cli("fact", "add", "Paxos", "status", "draft", "--from", "1989-01-01")
    cli("fact", "add", "Paxos", "status", "published", "--from", "1998-01-01")
    item = _item(cli, "conflict")
    old, new = item["payload"]["facts"]
    args = ("submit", str(item["id"]), "--bound", old["address"], "--to", "1998-01-01")
    r = cli(*args, "--dry-run")
    assert r.code == 0, r
    assert r.out.splitlines() == [
        f"item {item['id']} (conflict): dry run: every check ran, nothing stored",
        f"would bound {old['address']} to [1989-01-01, 1998-01-01): a copy would replace it",
        f"would be superseded {old['address']}: Paxos | status | draft  [1989-01-01, …)",
        f"would stay live {new['address']}: Paxos | status | published  [1998-01-01, …)",
    ]
    dry = cli(*args, "--dry-run", "--json").json
    assert dry["bound"] == {
        "fact": old["address"],
        "valid_from": "1989-01-01",
        "valid_to": "1998-01-01",
    }
    assert dry["message"] == "dry run: every check ran, nothing stored"
    r = cli(*args)
    assert r.code == 0, r
    copy = cli("get", old["address"], "--json").json["superseded"]["by"]
    assert r.out.splitlines()[:2] == [
        f"item {item['id']} (conflict): stored",
        f"bounded {old['address']} to [1989-01-01, 1998-01-01) as {copy}",
    ]
    assert f"live {new['address']}: Paxos | status | published" in r.out


def test_accept_says_what_would_change(cli):
    cli("remember", "-", input="[[Quorum Replication]] keeps a majority of copies.\n")
    cli("remember", "-", input="[[quorum-replication]] writes to W replicas.\n")
    item = _item(cli, "merge")
    first, second = (e["address"] for e in item["payload"]["entities"])
    names = {e["address"]: e["name"] for e in item["payload"]["entities"]}
    r = cli("submit", str(item["id"]), "--accept", "--dry-run")
    assert r.code == 0, r
    assert r.out.splitlines()[1] == (
        f"would merge {names[second]!r} ({second}) into {names[first]!r} ({first}): "
        f"{names[second]!r} would become an alias, its passages and facts would follow, "
        "and a page about either would be marked stale"
    ), r.out
    assert cli("items", "show", str(item["id"]), "--json").json["status"] == "open"
    r = cli("submit", str(item["id"]), "--accept")
    assert r.code == 0, r
    assert r.out.splitlines()[1].startswith(f"merged {names[second]!r} ({second}) into"), r.out


def test_submit_json_has_the_message_the_docs_list(cli):
    cli("fact", "add", "Raft", "leader", "n1")
    cli("fact", "add", "Raft", "leader", "n2")
    item = _item(cli, "conflict")
    keep = item["payload"]["facts"][0]["address"]
    dry = cli("submit", str(item["id"]), "--keep", keep, "--dry-run", "--json").json
    assert dry["message"] == "dry run: every check ran, nothing stored"
    done = cli("submit", str(item["id"]), "--keep", keep, "--json").json
    assert done["message"] == "stored"
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert (
        '| `submit` | `{"item", "kind", "status", "stored", "address", "diff", "checks": {…}, "message"}`'
        in docs
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("fact", "add", "A", "b", "c", "--from", "yesterday"), "--from 'yesterday' is not"),
        (("fact", "add", "A", "b", "c", "--to", "2020-13-01"), "--to '2020-13-01' is not"),
        (
            ("fact", "add", "A", "b", "c", "--from", "2021-01-01", "--to", "2020-01-01"),
            "--from (2021-01-01) must be before --to (2020-01-01)",
        ),
        (("search", "x", "--as-of", "nope"), "--as-of 'nope' is not an ISO 8601 date"),
    ],
)
def test_date_errors_name_the_options(cli, args, error):
    r = cli(*args)
    assert r.code == 2 and r.err.startswith(f"memors-mcp: {error}"), r
    assert "valid_" not in r.err and "as_of" not in r.err


def test_a_bad_bound_date_names_the_option(cli):
    cli("fact", "add", "Raft", "leader", "n1")
    cli("fact", "add", "Raft", "leader", "n2")
    item = _item(cli, "conflict")
    fact = item["payload"]["facts"][0]["address"]
    r = cli("submit", str(item["id"]), "--bound", fact, "--to", "soon")
    assert r.code == 2 and r.err.startswith("memors-mcp: --to 'soon' is not an ISO 8601"), r
    spelled = json.dumps({"bound": {"fact": fact, "valid_to": "soon"}})
    r = cli("submit", str(item["id"]), "--resolution-json", spelled)
    assert r.code == 2 and r.err.startswith("memors-mcp: valid_to 'soon' is not"), r


def test_a_duplicate_submission_lists_every_kept_forgotten_and_left_address(cli):
    for n in range(3):
        (cli.tmp / f"copy{n}.md").write_text(RAFT + "\n")
    cli("remember", *(f"copy{n}.md" for n in range(3)))
    item = _item(cli, "duplicate")
    members = [p["address"] for p in item["payload"]["passages"]]
    assert len(members) == 3
    report = cli("submit", str(item["id"]), "--keep", members[0], "--dry-run", "--json").json
    r = cli("submit", str(item["id"]), "--keep", members[0])
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert "stored memo://passage" not in r.out, "one kept address shown as if it were all"
    for field, label in (("kept", "kept"), ("forgotten", "forgotten"), ("left", "left live")):
        addresses = report[field]
        header = f"{label} ({len(addresses)}):"
        assert header in lines, r.out
        at = lines.index(header)
        assert lines[at + 1 : at + 1 + len(addresses)] == [f"  {a}" for a in addresses]
    assert sorted(report["kept"] + report["forgotten"] + report["left"]) == sorted(members)


def test_an_unchanged_page_says_its_diff_is_empty(cli):
    (cli.tmp / "paxos.md").write_text(
        "# Paxos\n\n[[Paxos]] is a consensus protocol.\n\n"
        "[[Paxos]] uses proposers and acceptors.\n\n[[Paxos]] needs a majority quorum.\n"
    )
    cli("remember", "paxos.md")
    item = _item(cli, "page")
    page = cli.tmp / "page.md"
    page.write_text(
        "# Paxos\n\nPaxos is a consensus protocol. Paxos uses proposers and acceptors.\n"
    )
    r = cli("submit", str(item["id"]), "--content-file", "page.md", "--title", "Paxos")
    assert r.code == 0 and "diff:\n--- previous" in r.out, r
    cli("forget", item["payload"]["passages"][2]["address"])  # the page is stale now
    stale = _item(cli, "stale")
    r = cli(
        "submit", str(stale["id"]), "--content-file", "page.md", "--title", "Paxos", "--dry-run"
    )
    assert r.code == 0, r
    assert "diff: none (the submitted content is the same as the current page's)" in r.out, r.out


# --- backup, remember ---------------------------------------------------------------------------


@pytest.mark.sqlite_only("a SQLite backup file and its page count")
def test_backup_reports_bytes_not_database_pages(cli):
    cli("remember", "-", input=RAFT + "\n")
    r = cli("backup", "copy.db")
    assert r.code == 0, r
    size = (cli.tmp / "copy.db").stat().st_size
    match = re.search(r": copied ([\d.]+) (kB|MB) \((\d+) SQLite pages\)$", r.out.strip())
    assert match, r.out
    assert "database pages" not in r.out
    shown = float(match.group(1)) * {"kB": 1e3, "MB": 1e6}[match.group(2)]
    assert abs(shown - size) <= 0.05 * size + 100, (shown, size)


def test_a_rerun_of_a_bulk_load_says_what_was_new(cli, memory):
    notes = cli.tmp / "notes"
    notes.mkdir()
    for name in ("a", "b", "c"):
        (notes / f"{name}.md").write_text(f"Note {name} about [[Raft]].\n")
    first = cli("remember", "notes", "--json").json
    assert (first["documents"], first["new"], first["new_versions"], first["unchanged"]) == (
        3,
        3,
        0,
        0,
    )
    (notes / "b.md").write_text("Note b, changed, about [[Raft]].\n")
    (notes / "d.md").write_text("Note d about [[Raft]].\n")
    r = cli("remember", "notes")
    assert r.code == 0, r
    assert r.out.startswith("remembered 4 document(s): 1 new, 1 new version(s), 2 unchanged; "), (
        r.out
    )
    again = cli("remember", "notes", "--json").json
    assert {k: again[k] for k in ("documents", "new", "new_versions", "unchanged")} == {
        "documents": 4,
        "new": 0,
        "new_versions": 0,
        "unchanged": 4,
    }
    # The library returns the same counts.
    docs = [{"text": "one", "uri": "u1"}, {"text": "two", "uri": "u2"}]
    memory.remember_many(docs)
    result = memory.remember_many([*docs[:1], {"text": "two, changed", "uri": "u2"}])
    assert (result.new, result.new_versions, result.unchanged) == (0, 1, 1)


def test_remembering_a_file_again_does_not_list_its_forgotten_passages(cli):
    (cli.tmp / "raft.md").write_text("[[Raft]] one.\n\n[[Raft]] two.\n\n[[Raft]] three.\n")
    first = cli("remember", "raft.md", "--json").json
    gone = first["passages"][1]
    cli("forget", gone)
    again = cli("remember", "raft.md", "--json").json
    assert again["document"] == first["document"]
    assert again["passages"] == [first["passages"][0], first["passages"][2]]
    r = cli("remember", "raft.md")
    assert r.out.startswith(f"remembered {first['document']}: 2 passage(s), 1 entity; "), r.out
    assert "1 forgotten passage(s) not listed" in r.out


# --- help ------------------------------------------------------------------------------------------


def test_store_options_may_come_before_the_subcommand(cli):
    cli("remember", "-", "--ns", "team", input=RAFT + "\n")
    other = str(cli.tmp / "other.db")
    r = cli("--db", str(cli.db), "--ns", "team", "search", "raft", "--json")
    assert r.code == 0, r
    assert len(r.json["results"]) == 1
    # Given in both places, the one after the subcommand wins (even when it is the default).
    assert cli("--ns", "team", "search", "raft", "--ns", "default", "--json").json["results"] == []
    assert cli("--db", other, "search", "raft", "--db", str(cli.db), "--ns", "team").code == 0
    assert not Path(other).exists()
    assert cli("--ns", "team", "--json", "fact", "list").json["namespace"] == "team"
    assert cli("--ns", "team", "fact", "--ns", "x", "list", "--json").json["namespace"] == "x"
    r = cli("--log-level", "loud", "lint")
    assert r.code == 2 and "--log-level: invalid choice: 'loud'" in r.err, r


def test_every_positional_argument_is_described():
    for path, parser in leaf_parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings and action.nargs != "A...":
                assert action.help, f"memors-mcp {' '.join(path)} {action.metavar}: no help"


def test_help_describes_search_and_propose_merge_arguments(cli):
    r = cli("search", "--help")
    assert re.search(r"\n  QUERY +any text", r.out), r.out
    r = cli("entity", "propose-merge", "--help")
    assert re.search(r"\n  NAME +two entity names", r.out), r.out


def test_submit_help_shows_each_form(cli):
    r = cli("submit", "--help")
    assert r.code == 0, r
    examples = [line.strip() for line in r.out.splitlines() if "memors-mcp submit " in line]
    for form in (
        "--content-file",
        "--keep memo://fact/",
        "--keep memo://passage/",
        "--accept",
        "--reject",
        "--skip --reason",
        "--set ",
        "--resolution-json ",
        "--fingerprint ",
    ):
        assert any(form in e for e in examples), f"no example of {form!r}:\n{r.out}"
