"""Compaction through the real CLI, mirroring the seed page's own commands:

memors-mcp compact --ns default --kinds page,stale --json
memors-mcp submit 42 --content-file page.md --title "Quorum replication" --dry-run
memors-mcp submit 42 --content-file page.md --title "Quorum replication"
memors-mcp submit 43 --keep memo://fact/0199…
memors-mcp submit 44 --accept            # merge item
memors-mcp submit 45 --skip --reason "not worth a page"
"""

from __future__ import annotations

import pytest

from memors_core import Memory

QUORUM = [
    "[[Quorum replication]] sends every write to all replicas.",
    "A write under [[Quorum replication]] succeeds once a majority acknowledges it.",
    "[[Quorum replication]] reads from a read quorum to see the latest write.",
]
RAFT = [
    "[[Raft]] elects a leader with randomized election timeouts.",
    "Followers in [[Raft]] append log entries sent by the leader.",
    "[[Raft]] commits an entry once a majority has stored it.",
]
PAGE = """# Quorum replication

Quorum replication sends every write to all replicas.
A write succeeds once a majority acknowledges it.
Reads contact a read quorum to see the latest write.
The write quorum is 2 or 3 replicas.
"""


@pytest.fixture
def store(cli):
    """A store with two page items, a conflict and a merge candidate (built
    in-process to keep the CLI calls for what is under test)."""
    with Memory.open(cli.db) as memory:
        for i, text in enumerate(QUORUM + RAFT):
            memory.remember(text, uri=f"notes/{i}.md")
        memory.remember("Spelled [[quorum-replication]].", uri="odd")
        facts = [
            memory.record_fact("Quorum replication", "write quorum", q).fact for q in ("2", "3")
        ]
    (cli.tmp / "page.md").write_text(PAGE, encoding="utf-8")
    return cli, facts


def first_page_item(cli) -> str:
    with Memory.open(cli.db) as memory:
        return str(memory.compact(kinds=["page"]).items[0].id)


def test_the_seed_workflow_end_to_end(store):
    cli, facts = store
    r = cli("compact", "--ns", "default", "--kinds", "page,stale", "--json")
    assert r.code == 0, r
    data = r.json
    assert set(data) == {"namespace", "created", "open", "items"}
    assert data["namespace"] == "default" and data["created"] == 2 and data["open"] == 2
    page_item, raft_item = data["items"]
    assert [i["kind"] for i in data["items"]] == ["page", "page"]
    assert page_item["payload"]["entity"]["name"] == "Quorum replication"
    assert [f["address"] for f in page_item["payload"]["facts"]] == facts
    pid = str(page_item["id"])

    # --dry-run: every check runs, nothing is stored.
    r = cli(
        "submit", pid, "--content-file", "page.md", "--title", "Quorum replication", "--dry-run"
    )
    assert r.code == 0, r
    assert "dry run" in r.out and "omission: passed" in r.out and "corruption: passed" in r.out
    assert "+The write quorum is 2 or 3 replicas." in r.out
    assert cli("items", "show", pid, "--json").json["status"] == "open"

    r = cli("submit", pid, "--content-file", "page.md", "--title", "Quorum replication", "--json")
    assert r.code == 0, r
    report = r.json
    assert set(report) == {
        "item",
        "kind",
        "status",
        "stored",
        "address",
        "diff",
        "checks",
        "message",
    }
    assert report["stored"] is True and report["status"] == "done"
    page = report["address"]
    shown = cli("get", page, "--json").json
    assert shown["is_inference"] == 1 and shown["content"] == PAGE
    assert len(shown["sources"]) == 3
    hits = cli("search", "read quorum", "--granularity", "page", "--json").json["results"]
    assert [h["address"] for h in hits] == [page]

    r = cli("compact", "--kinds", "conflict,merge", "--json")
    conflict, merge = r.json["items"]
    assert (conflict["kind"], merge["kind"]) == ("conflict", "merge")

    # submit 43 --keep memo://fact/…
    r = cli("submit", str(conflict["id"]), "--keep", facts[1])
    assert r.code == 0, r
    assert cli("get", facts[0], "--json").json["status"] == "superseded"

    # Settling the conflict changed the facts the merge item shows: refused
    # until compact refreshes it (same id).
    r = cli("submit", str(merge["id"]), "--accept")
    assert r.code == 1 and "run compact again" in r.err, r
    r = cli("compact", "--kinds", "merge", "--json")
    assert r.json["created"] == 0 and r.json["items"][0]["id"] == merge["id"]

    # submit 44 --accept (merge item)
    r = cli("submit", str(merge["id"]), "--accept", "--json")
    assert r.code == 0 and r.json["stored"] is True, r
    entity = cli("entity", "show", "quorum-replication", "--json").json
    assert entity["name"] == "Quorum replication" and entity["aliases"] == ["quorum-replication"]
    assert cli("get", page, "--json").json["stale"] is True

    # submit 45 --skip --reason "not worth a page"
    r = cli("submit", str(raft_item["id"]), "--skip", "--reason", "not worth a page")
    assert r.code == 0 and "skipped" in r.out, r

    r = cli("items", "--json")
    statuses = {i["id"]: i["status"] for i in r.json["items"]}
    assert statuses == {
        page_item["id"]: "done",
        raft_item["id"]: "skipped",
        conflict["id"]: "done",
        merge["id"]: "done",
    }
    r = cli("compact", "--ns", "default", "--kinds", "page,stale", "--json")
    (stale,) = r.json["items"]
    assert stale["kind"] == "stale" and stale["payload"]["page"]["address"] == page
    text = cli("items", "--status", "open")
    assert text.code == 0 and f"#{stale['id']}" in text.out and "stale" in text.out
    metrics = cli("metrics").out
    assert "memors_store_pages_marked_stale_total 1.0" in metrics
    assert 'memors_kb_work_items_open{kind="stale",namespace="default"} 1.0' in metrics


def test_a_refused_submission_exits_1_and_force_stores_with_flags(store):
    cli, _facts = store
    pid = first_page_item(cli)
    (cli.tmp / "bad.md").write_text(PAGE + "\nZebras juggle purple volcanoes.\n", encoding="utf-8")
    args = ("submit", pid, "--content-file", "bad.md", "--title", "Quorum replication")
    r = cli(*args)
    assert r.code == 1, r
    assert "refused by corruption" in r.out and "FLAGGED" in r.out
    # Readable: the sentence, how much of it its sources hold, and which words are missing.
    assert '- "Zebras juggle purple volcanoes."' in r.out
    assert "shares 0% of its content words with memo://passage/" in r.out
    assert "missing: zebras, juggle, purple, volcanoes" in r.out
    r = cli(*args, "--json")
    assert r.code == 1 and r.json["stored"] is False
    (flag,) = r.json["checks"]["corruption"]["flagged"]
    assert flag["sentence"] == "Zebras juggle purple volcanoes." and flag["overlap"] == 0.0
    assert flag["missing"] == ["zebras", "juggle", "purple", "volcanoes"]
    assert flag["best_source"].startswith("memo://passage/")
    r = cli(*args, "--dry-run")
    assert r.code == 1, r  # a dry run that would be refused says so
    r = cli(*args, "--force", "--json")
    assert r.code == 0 and r.json["stored"] is True, r
    page = cli("get", r.json["address"], "--json").json
    assert page["flags"] == {"corruption": [flag]}
    # Done now: submitting again is refused with a message saying what to do.
    r = cli(*args, "--force")
    assert r.code == 1 and "is done, not open" in r.err and "compact" in r.err, r


def test_an_outdated_item_is_refused_with_exit_1(store):
    cli, _facts = store
    pid = first_page_item(cli)
    assert cli("fact", "add", "Quorum replication", "read quorum", "2").code == 0
    r = cli("submit", pid, "--content-file", "page.md", "--title", "Quorum replication")
    assert r.code == 1, r
    assert "changed since its payload was handed out" in r.err
    assert "run compact again" in r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert cli("items", "show", pid, "--json").json["status"] == "open"


WRONG_FORMS = [
    (("--keep", "memo://fact/01990000-0000-7000-8000-000000000000"), "page item"),
    (("--accept",), "page item"),
    (("--title", "T"), "content"),
    (("--skip",), "--skip needs --reason"),
    (("--accept", "--reject"), "exclude each other"),
    ((), "submit needs a resolution"),
    (("--content-file", "missing.md", "--title", "T"), "missing.md"),
    (("--resolution-json", "[1]"), "JSON object"),
]


def test_a_resolution_of_the_wrong_form_exits_2_with_one_line(store):
    cli, _facts = store
    pid = first_page_item(cli)
    for args, message in WRONG_FORMS:
        r = cli("submit", pid, *args)
        assert r.code == 2, (args, r)
        assert message in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err, r
    assert cli("items", "show", pid, "--json").json["status"] == "open"


def test_usage_errors_of_compact_items_and_submit(cli):
    r = cli("compact", "--kinds", "page,nope", "--json")
    assert r.code == 2 and r.json["error"]["code"] == "bad-input"
    assert "unknown kind 'nope'" in r.json["error"]["message"]
    r = cli("submit", "42", "--skip", "--reason", "r")
    assert r.code == 2 and "no work item 42" in r.err
    r = cli("submit", "x", "--skip", "--reason", "r")
    assert r.code == 2
    r = cli("items", "--kind", "nope")
    assert r.code == 2 and "unknown kind" in r.err
    r = cli("items", "show", "7")
    assert r.code == 2 and "nothing at memo://item/7" in r.err


def test_items_show_and_resolution_flags_for_any_kind(store):
    cli, _facts = store
    items = cli("compact", "--json").json["items"]
    merge = next(i for i in items if i["kind"] == "merge")
    shown = cli("items", "show", f"memo://item/{merge['id']}", "--json").json
    assert shown["kind"] == "merge" and shown["payload"] == merge["payload"]
    assert shown["address"] == f"memo://item/{merge['id']}"
    r = cli("submit", str(merge["id"]), "--reject", "--json")
    assert r.code == 0 and r.json["stored"] is True, r
    assert cli("items", "show", str(merge["id"]), "--json").json["resolution"] == {"reject": True}
    raft = [i for i in items if i["kind"] == "page"][1]
    assert raft["payload"]["entity"]["name"] == "Raft"
    r = cli("submit", str(raft["id"]), "--set", "skip=true", "--set", "reason=later", "--json")
    assert r.code == 0 and r.json["status"] == "skipped", r
    shown = cli("items", "show", str(raft["id"]), "--json").json
    assert shown["resolution"] == {"skip": True, "reason": "later"}
    r = cli("entity", "propose-merge", "Quorum replication", "quorum-replication")
    assert r.code == 1 and "rejected before" in r.err
    page = next(i for i in items if i["kind"] == "page")
    r = cli(
        "submit",
        str(page["id"]),
        "--resolution-json",
        '{"content": "Quorum replication sends every write to all replicas.", "title": "Q"}',
        "--dry-run",
        "--json",
    )
    assert r.code == 1 and r.json["checks"]["omission"]["passed"] is False, r
    cite = page["payload"]["passages"][0]["address"]
    r = cli(
        "submit",
        str(page["id"]),
        "--content-file",
        "page.md",
        "--title",
        "Quorum replication",
        "--cite",
        cite,
        "--dry-run",
        "--json",
    )
    flagged = [f["sentence"] for f in r.json["checks"]["corruption"]["flagged"]]
    assert r.code == 1 and "Reads contact a read quorum to see the latest write." in flagged
