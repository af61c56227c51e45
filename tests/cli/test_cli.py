"""The command line (SPEC §9, §10): the synopsis, store options after every
subcommand, JSON shapes, exit statuses, one-line errors; and docs/cli.md,
whose tour this file runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memors_cli.main import build_parser
from paths import ROOT

ROOT = ROOT
BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "cli.md"
SOME_FACT = "memo://fact/0199a000-0000-7000-8000-000000000000"


def one_line_error(r, code: int = 2) -> str:
    """The error contract: exit ``code``, one line on stderr, no traceback."""
    assert r.code == code, r
    assert "Traceback" not in r.err and "Traceback" not in r.out, r
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r
    assert lines[0].startswith("memors-mcp"), r
    return lines[0]


def leaf_parsers(parser: argparse.ArgumentParser, path=()):
    """(subcommand path, parser) for every parser that runs a command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from leaf_parsers(child, (*path, name))


# --- the synopsis ----------------------------------------------------------------------------

SYNOPSIS = {
    ("serve",): {"--http", "--host", "--port", "--allow-remote", "--behind-tls-proxy"},
    ("remember",): {"--jsonl", "--uri", "--title", "--entity"},
    ("search",): {"--granularity", "--limit", "--as-of"},
    ("get",): set(),
    ("forget",): {"--reason"},
    ("fact", "add"): {"--from", "--to", "--source"},
    ("fact", "list"): set(),
    ("entity", "list"): set(),
    ("entity", "show"): set(),
    ("entity", "propose-merge"): set(),
    ("compact",): {"--kinds", "--limit", "--full", "--executor", "--apply", "--allow-remote"},
    ("items",): {"--kind", "--status"},
    ("items", "show"): set(),
    ("submit",): {
        "--content-file",
        "--title",
        "--cite",
        "--keep",
        "--accept",
        "--reject",
        "--skip",
        "--reason",
        "--set",
        "--resolution-json",
        "--dry-run",
        "--force",
    },
    ("lint",): set(),
    ("corrections",): {"--action", "--target"},
    ("metrics",): set(),
    ("purge",): {"--yes"},
    ("export",): set(),
    ("import",): set(),
    ("backup",): set(),
}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_the_parser_has_the_synopsis_of_spec_9():
    found = {path: p for path, p in leaf_parsers(build_parser())}
    assert set(SYNOPSIS) <= set(found)
    for path, options in SYNOPSIS.items():
        assert options <= _options(found[path]), path


def _filled(parser: argparse.ArgumentParser) -> list[str]:
    """Dummy values for a parser's positional arguments."""
    out = []
    for a in parser._actions:
        if a.option_strings or isinstance(a, argparse._SubParsersAction):
            continue
        if a.nargs in ("?", "*"):
            continue
        out.extend(["memo://item/1"] * (a.nargs if isinstance(a.nargs, int) else 1))
    return out


@pytest.mark.parametrize("path", sorted(SYNOPSIS), ids=" ".join)
def test_every_subcommand_takes_db_ns_and_json_after_it(path):
    parser = build_parser()
    leaf = dict(leaf_parsers(parser))[path]
    args = parser.parse_args(
        [*path, *_filled(leaf), "--db", "/tmp/x.db", "--ns", "team-a", "--json"]
    )
    assert (args.db, args.ns, args.json) == ("/tmp/x.db", "team-a", True)
    defaults = parser.parse_args([*path, *_filled(leaf)])
    ns = None if path == ("export",) else "default"  # export without --ns: the whole store
    assert (defaults.db, defaults.ns, defaults.json) == (None, ns, False)


def test_store_options_between_a_command_and_its_subcommand_are_kept(cli):
    # `fact --ns X add …` once silently wrote to the default namespace.
    assert cli("fact", "--ns", "team-a", "add", "Raft", "leader", "n1").code == 0
    assert cli("fact", "list", "--ns", "team-a", "--json").json["facts"][0]["value"] == "n1"
    assert cli("fact", "list", "--json").json["facts"] == []
    listing = cli("entity", "--ns", "team-a", "--json", "list")
    assert [e["name"] for e in listing.json["entities"]] == ["Raft"]


def test_python_dash_m_is_the_same_as_the_console_script(cli):
    env = {**os.environ, "MEMORS_DB": str(cli.db)}
    for args in (["--help"], ["--version"], ["search", "--help"], ["fact", "add", "--help"]):
        script = subprocess.run(
            [str(BIN / "memors-mcp"), *args], capture_output=True, text=True, env=env
        )
        module = cli(*args)
        assert (script.returncode, script.stdout, script.stderr) == (
            module.code,
            module.out,
            module.err,
        ), args
    assert re.fullmatch(r"memors-mcp \d+\.\d+\.\d+\S*\n", cli("--version").out)
    cli("remember", "-", input="Raft elects a leader.")
    script = subprocess.run(
        [str(BIN / "memors-mcp"), "search", "leader", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert json.loads(script.stdout) == cli("search", "leader", "--json").json


# --- the JSON contract (SPEC §10) ---------------------------------------------------------------


def test_json_shapes_of_remember_fact_search_get_forget(cli):
    r = cli("remember", "-", "--entity", "Raft", "--json", input="Raft elects a [[Leader]].")
    assert r.code == 0, r
    assert set(r.json) == {"document", "passages", "entities"} and len(r.json["entities"]) == 2
    passage = r.json["passages"][0]

    f = cli("fact", "add", "Raft", "leader", "n1", "--from", "2024-01-01", "--source", passage)
    assert f.code == 0 and f.out.startswith("recorded memo://fact/"), f
    f = cli("fact", "add", "Raft", "term", "7", "--json")
    assert set(f.json) == {"fact"}

    s = cli("search", "leader", "--json")
    assert set(s.json) == {"results", "mode"}
    assert [set(h) for h in s.json["results"]] == [{"address", "granularity", "text", "score"}]

    g = cli("get", passage, "--json").json
    assert (g["address"], g["type"], g["status"]) == (passage, "passage", "live")
    g = cli("get", f.json["fact"], "--json").json
    assert (g["type"], g["status"], g["value"]) == ("fact", "live", "7")

    facts = cli("fact", "list", "raft", "--json").json
    assert [x["predicate"] for x in facts["facts"]] == ["leader", "term"]
    assert set(facts["facts"][0]) == {
        "address",
        "subject",
        "predicate",
        "value",
        "valid_from",
        "valid_to",
    }
    show = cli("entity", "show", "RAFT", "--json").json
    assert (show["type"], show["name"], len(show["passages"]), len(show["facts"])) == (
        "entity",
        "Raft",
        1,
        2,
    )

    out = cli("forget", r.json["document"], "--reason", "test", "--json").json
    assert out["status"] == "forgotten" and passage in out["forgotten"]
    assert cli("get", passage, "--json").json["status"] == "forgotten"
    assert cli("search", "leader", "--json").json == {"results": [], "mode": "lexical"}


def test_entity_commands_and_merge_proposals(cli):
    cli("remember", "-", input="[[Raft]] and [[Raft Consensus]] are one.")
    r = cli("entity", "propose-merge", "raft", "Raft Consensus", "--json")
    assert r.code == 0 and r.json["status"] == "open", r
    r = cli("compact", "--kinds", "merge", "--json")
    assert [i["kind"] for i in r.json["items"]] == ["merge"]
    item = str(r.json["items"][0]["id"])
    assert cli("submit", item, "--reject").code == 0
    r = cli("entity", "propose-merge", "Raft", "Raft Consensus")
    assert "rejected before" in one_line_error(r, code=1)


# --- exit statuses and errors -------------------------------------------------------------------


BAD = [
    (["bogus"], "invalid choice: 'bogus'"),
    ([], "required: SUBCOMMAND"),
    (["get"], "required: ADDR"),
    (["get", "memo://foo/1"], "unknown address type 'foo'"),
    (["get", "memo://fact/abc"], "lowercase UUIDv7"),
    (["get", "not an address"], "malformed address"),
    (["get", SOME_FACT], "nothing at memo://fact/"),
    (["forget", "memo://entity/0199a000-0000-7000-8000-000000000001"], "not a entity"),
    (["search"], "required: QUERY"),
    (["search", "x", "--limit", "0"], "limit must be an integer from 1 to 1000"),
    (["search", "x", "--limit", "-1"], "limit must be an integer from 1 to 1000"),
    (["search", "x", "--limit", "ten"], "invalid int value: 'ten'"),
    (["search", "x", "--granularity", "sentence"], "invalid choice: 'sentence'"),
    (["search", "x", "--as-of", "yesterday"], "--as-of 'yesterday' is not an ISO 8601"),
    (["search", "x", "--ns", "bad ns"], "bad namespace 'bad ns'"),
    (["search", "x", "--ns", ""], "bad namespace ''"),
    (["search", "x", "--ns", "n" * 65], "bad namespace"),
    (["fact"], "required"),
    (["fact", "add", "Raft", "leader"], "required: VALUE"),
    (["fact", "add", "Raft", "leader", "n1", "--from", "2024-13-01"], "--from '2024-13-01'"),
    (["fact", "add", "R", "p", "v", "--from", "2024-02-01", "--to", "2024-01-01"], "before"),
    (["fact", "add", "R", "p", "v", "--source", SOME_FACT], "expected a passage address"),
    (["fact", "add", "R", "", "v"], "predicate must not be empty"),
    (["entity", "show", "Nobody"], "no entity named 'Nobody'"),
    (["entity", "propose-merge", "A"], "required: NAME"),
    (["entity"], "required"),
    (["purge", SOME_FACT], "add --yes to confirm"),
    (["submit", "999", "--accept"], "no work item 999"),
    (["submit", "1"], "submit needs a resolution"),
    (["submit", "1", "--skip"], "--skip needs --reason"),
    (["compact", "--kinds", "nope"], "unknown kind 'nope': registered kinds are"),
    (["compact", "--limit", "-1"], "--limit must be 0 or more"),
    (["items", "--kind", "nope"], "unknown kind 'nope'"),
    (["items", "show", "x"], "malformed address"),
    (["import", "missing.jsonl"], "missing.jsonl: no such file"),
    (["metrics", "--json"], "no --json form"),
    (["remember", "missing.md"], "missing.md: no such file or directory"),
    (["search", "x", "--db", "."], "is a directory, not a database file"),
    (["search", "x", "--log-level", "loud"], "invalid choice: 'loud'"),
    (["search", "x", "--db", "/dev/null"], "cannot use /dev/null as a database"),
    (["remember", "n" * 300 + ".md"], "File name too long"),
    (["backup", "n" * 300 + ".db"], "File name too long"),
    (["backup", "~no-such-user-here/b.db"], "is not a directory"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a)[:40] or "-" for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_and_a_json_error_with_json(cli, args, says):
    r = cli(*args, "--json") if args else cli("--json")
    line = one_line_error(r)
    assert says in line, r
    error = json.loads(r.out)["error"]
    assert set(error) == {"code", "message"} and error["code"] and says in error["message"]
    assert "\n" not in error["message"]


def test_without_json_an_error_prints_nothing_on_stdout(cli):
    r = cli("get", "memo://fact/abc")
    one_line_error(r)
    assert r.out == ""


def test_undecodable_bytes_in_arguments_are_bad_input(cli):
    env = {**os.environ, "MEMORS_DB": str(cli.db)}
    for args in (
        [b"fact", b"add", b"Caf\xe9", b"p", b"v"],
        [b"remember", b"-", b"--title", b"\xff"],
        [b"entity", b"show", b"\xfe"],
    ):
        proc = subprocess.run(
            [sys.executable.encode(), b"-m", b"memors_cli", *args],
            input=b"text",
            capture_output=True,
            env=env,
        )
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2, err
        assert "not valid text" in err and len(err.strip().splitlines()) == 1, err


def test_not_a_database_file_is_a_clear_error(cli):
    (cli.tmp / "notes.txt").write_text("just some notes " * 200)
    r = cli("search", "x", "--db", "notes.txt")
    assert "is not a memors database" in one_line_error(r)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'leader AND "quo',
        "NOT",
        "a OR",
        "NEAR(a b, 2)",
        "lead*",
        "^start",
        "text:leader",
        "(unbalanced",
        "'; DROP TABLE passages; --",
        "日本語 🙂",
        "-",
    ],
)
def test_fts_syntax_in_a_query_is_just_text(cli, query):
    r = cli("search", query, "--granularity", "all", "--json")
    assert r.code == 0 and "results" in r.json, r


def test_an_unknown_namespace_is_empty_not_an_error(cli):
    cli("remember", "-", "--entity", "Raft", input="Raft elects a leader.")
    for args in (
        ["search", "leader", "--granularity", "all"],
        ["entity", "list"],
        ["fact", "list"],
        ["items"],
        ["compact"],
    ):
        r = cli(*args, "--ns", "never-used", "--json")
        assert r.code == 0, r
        assert not any(v for k, v in r.json.items() if isinstance(v, list)), r.json
    r = cli("lint", "--ns", "never-used")
    assert r.code == 0 and "no findings" in r.out, r


def test_a_huge_limit_means_all(cli):
    cli("remember", "-", input="[[A]] one.\n\n[[A]] two.\n\n[[A]] three.")
    r = cli("compact", "--limit", "99999999999999999999", "--json")
    assert r.code == 0 and r.json["open"] == len(r.json["items"]) == 1, r


def test_exit_1_when_done_but_negative(cli):
    # lint found problems
    cli("fact", "add", "Raft", "leader", "n1")
    cli("fact", "add", "Raft", "leader", "n2")
    r = cli("lint", "--json")
    assert r.code == 1 and r.json["findings"][0]["rule"] == "contradiction", r
    # a submission refused by the checks
    for i in range(3):
        cli("remember", "-", input=f"[[Raft]] replicates log entry {i} to every follower.")
    item = cli("compact", "--kinds", "page", "--json").json["items"][0]["id"]
    (cli.tmp / "page.md").write_text("# Raft\n\nBananas are yellow and taste sweet.\n")
    r = cli("submit", str(item), "--content-file", "page.md", "--title", "Raft", "--json")
    assert r.code == 1 and r.json["stored"] is False, r
    assert not r.json["checks"]["corruption"]["passed"]


def test_disabled_plugins_are_gone_from_the_cli(cli):
    r = cli("compact", "--kinds", "duplicate", extra_env={"MEMORS_DISABLE_PLUGINS": "duplicate"})
    line = one_line_error(r)
    assert "unknown kind 'duplicate'" in line
    assert "registered kinds are conflict, merge, page, stale" in line
    assert cli("compact", "--kinds", "duplicate").code == 0


def test_a_plugin_that_fails_to_load_is_named_and_can_be_disabled(cli, tmp_path):
    site = tmp_path / "site"
    info = site / "memors_broken_kind-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: memors-broken-kind\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text("[memors.kinds]\nbroken = memors_broken_kind\n")
    (site / "memors_broken_kind.py").write_text("raise ImportError('needs a missing library')\n")
    env = {"PYTHONPATH": str(site)}
    r = cli("search", "x", extra_env=env)  # everything else works (issue 13, point 8)
    assert r.code == 0 and len(r.err.strip().splitlines()) == 1, r
    assert '"plugin": "broken", "entry_point": "memors_broken_kind"' in r.err
    assert "needs a missing library" in r.err
    r = cli("search", "x", extra_env={**env, "MEMORS_DISABLE_PLUGINS": "broken"})
    assert r.code == 0 and r.err == "", r


# --- docs/cli.md: a reference that cannot drift, and a tour that runs ------------------------------


def test_the_reference_documents_every_subcommand_and_option():
    doc = DOC.read_text(encoding="utf-8")
    for path, parser in leaf_parsers(build_parser()):
        heading = f"### `memors-mcp {' '.join(path)}"
        assert heading in doc, f"docs/cli.md has no section {heading}…`"
        section = doc.split(heading, 1)[1].split("\n### ", 1)[0]
        for option in _options(parser) - {"--help", "--db", "--ns", "--json", "--log-level"}:
            assert f"`{option}" in section, f"{' '.join(path)}: {option} is not documented"
    for option in ("--db", "--ns", "--json", "--log-level", "MEMORS_DB", "MEMORS_DISABLE_PLUGINS"):
        assert option in doc


def tour_script() -> str:
    doc = DOC.read_text(encoding="utf-8")
    tour = doc.split("## One-minute tour", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", tour, re.S)
    assert blocks, "the tour has no ```sh block"
    return "\n".join(blocks)


@pytest.mark.sqlite_only("the documented tour writes its own SQLite file, tour.db")
def test_the_one_minute_tour_runs(tmp_path):
    script = tour_script()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORS_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path)
    env.pop("XDG_DATA_HOME", None)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # What the tour promises in its comments is what happens.
    assert "elects a leader" in proc.stdout
    assert "election timeout" in proc.stdout
    assert (tmp_path / "tour.db").is_file()
