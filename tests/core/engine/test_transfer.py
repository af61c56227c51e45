"""Backup and move: export, import, backup through the real CLI.

A store with every kind of row (two namespaces, document versions, forgotten
and superseded rows, resolved conflicts, an accepted merge, a dropped
duplicate, page versions, skipped and obsolete items, a purge) is exported
and imported into an empty store; the two are then compared table by table,
row by row, and behave identically: search (scores included), get, compact,
lint, metrics. ``backup`` copies a store while another process writes to it:
the copy is whole and holds a prefix of the writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from export_files import body, seal
from memors_core import Memory
from memors_core.storage.sqlite.schema import EXPORT_SCHEMA
from memors_core.testing import CLIResult, passages_about, run_cli
from memors_core.wire import to_json
from store_checks import connect, is_postgres, rows_of, store_problems, value_of

DUPLICATE = (
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer "
    "watches from the old wooden fence."
)
#: Derived state that is rebuilt rather than carried (see
#: memors_core.storage.sqlite.transfer); ``kind_schema`` is each store's own
#: record of the kind migrations it applied when it was opened.
NOT_CARRIED = {"changes", "compact_marks", "sqlite_sequence", "kind_schema", "dup_prefix",
               "dup_recent", "dup_folded", "dup_members", "dup_indexed", "dup_settled",
               "passage_profiles"}  # fmt: skip
#: And on PostgreSQL: its migrations' record and its search index (rebuilt on import).
#: PostgreSQL's counters as SQLite keeps them: one row each, the shards summed.
SUMMED_COUNTERS = (
    "SELECT name, kind, event, SUM(value)::bigint FROM (SELECT name, kind, event, value "
    "FROM counters UNION ALL SELECT name, kind, event, value FROM counter_shards) c "
    "GROUP BY name, kind, event"
)
PG_NOT_CARRIED = {
    "schema_migrations",
    "search_docs",
    "search_postings",
    "search_packs",
    "search_stats",
    "search_df",
}
QUERIES = ["raft leader", "fox river", "paxos ballot", "n1", "replication round", "nothing-here"]


def cli(
    db: Path | str, *args: str, ok: tuple[int, ...] = (0,), input: str | None = None
) -> CLIResult:
    r = run_cli(*args, db=db, input=input, cwd=db.parent if isinstance(db, Path) else None)
    assert r.code in ok, r
    return r


def page_content(payload: dict) -> str:
    lines = [p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"]]
    lines += [f"{f['predicate']} {f['value']}." for f in payload["facts"]]
    return "\n".join(lines)


def populate(memory: Memory, ns: str) -> None:
    """Every kind of row the store holds."""
    for i, text in enumerate(passages_about("Raft", 4)):
        memory.remember(text, uri=f"raft-{i}", title=f"Raft {i}", metadata={"n": i, "ü": [ns]},
                        namespace=ns)  # fmt: skip
    # a second version of a document: one passage kept, one superseded, one new
    memory.remember(
        "Kept paragraph about [[Paxos]] ballots.\n\nOld paragraph.", uri="v", namespace=ns
    )
    memory.remember(
        "Kept paragraph about [[Paxos]] ballots.\n\nNew paragraph.", uri="v", namespace=ns
    )
    gone = memory.remember("A document that is forgotten.", namespace=ns)
    memory.forget(gone.document, reason="test", namespace=ns)
    for i in (1, 2):
        memory.remember(DUPLICATE, uri=f"copy-{i}", namespace=ns)
    memory.remember("A log replication protocol.", entities=["Raft consensus"], namespace=ns)
    memory.remember("Quorum systems. [[quorum-replication]]", namespace=ns)
    memory.remember("More on [[Quorum Replication]].", namespace=ns)
    memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01", namespace=ns)
    memory.record_fact("Raft", "leader", "n2", valid_from="2024-06-01T12:00:00+02:00",
                       namespace=ns)  # fmt: skip
    memory.record_fact("Raft", "license", "MIT", valid_to="2020-01-01", namespace=ns)
    memory.propose_merge(["Raft", "Raft consensus"], namespace=ns)
    kinds = {i.kind: i for i in memory.compact(namespace=ns).items}
    page = kinds["page"]
    assert memory.submit(page.id, content=page_content(page.payload), title="Raft", force=True,
                         namespace=ns).stored  # fmt: skip
    for item in memory.compact(kinds=["conflict"], namespace=ns).items:
        memory.submit(item.id, keep=item.payload["facts"][0]["address"], namespace=ns)
    for item in memory.compact(kinds=["duplicate"], namespace=ns).items:
        memory.submit(item.id, keep=[item.payload["passages"][0]["address"]], namespace=ns)
    for item in memory.compact(kinds=["merge"], namespace=ns).items:
        if "Raft consensus" in json.dumps(item.payload):
            memory.submit(item.id, accept=True, namespace=ns)
        else:
            memory.submit(item.id, skip=True, reason="not the same", namespace=ns)
    for item in memory.compact(namespace=ns).items:  # a second page version
        if item.kind == "stale":
            memory.submit(item.id, content=page_content(item.payload), title="Raft v2",
                          force=True, namespace=ns)  # fmt: skip
    extra = memory.remember("\n\n".join(passages_about("Zab", 3)), namespace=ns)
    memory.compact(namespace=ns)
    memory.forget(extra.passages[0], namespace=ns)  # the Zab page item becomes obsolete
    memory.compact(namespace=ns)
    memory.remember("Ephemeral text to purge.", uri="purge-me", namespace=ns)


def build(db: Path) -> None:
    with Memory.open(db) as memory:
        populate(memory, "alpha")
        populate(memory, "beta")
        doc = value_of(memory, "SELECT id FROM documents WHERE uri = 'purge-me' LIMIT 1")
        ns = value_of(memory, "SELECT namespace FROM documents WHERE id = ?", (doc,))
        memory.purge(f"memo://document/{doc}", namespace=ns)
        statuses = {r[0] for r in rows_of(memory, "SELECT DISTINCT status FROM work_items")}
        assert statuses == {"open", "done", "skipped", "obsolete"}, statuses


def tables(db: Path | str) -> dict[str, list[tuple]]:
    """Every table's rows (FTS shadow tables and rebuilt state aside), in a fixed order."""
    conn = connect(db)
    if is_postgres(db):
        try:
            names = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
            ).fetchall()
            out = {
                name: sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)
                for (name,) in names
                if name not in NOT_CARRIED | PG_NOT_CARRIED | {"counter_shards"}
            }
            # A counter is its store-wide row plus the namespaces' shards
            # (an import writes the sums as store-wide rows): compare the sums.
            out["counters"] = sorted(conn.execute(SUMMED_COUNTERS).fetchall(), key=repr)
            return out
        finally:
            conn.close()
    try:
        out = {}
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ).fetchall():
            if name in NOT_CARRIED or name.startswith("search_"):
                continue  # (the search indexes: rebuilt, numbered as they are made)
            cols = "rowid, *" if "WITHOUT ROWID" not in (sql or "") else "*"
            out[name] = sorted(conn.execute(f"SELECT {cols} FROM {name}").fetchall(), key=repr)
        return out
    finally:
        conn.close()


def behaviour(db: Path) -> dict[str, Any]:
    """What a user sees: search (with scores), get of every address, items, lint, metrics."""
    seen: dict[str, Any] = {}
    with Memory.open(db) as memory:
        for ns in ("alpha", "beta"):
            for q in QUERIES:
                for g in ("passage", "page", "fact", "entity", "all"):
                    hits = memory.search(q, g, limit=50, namespace=ns).results
                    seen[f"search {ns} {q} {g}"] = [
                        (h.address, h.text, round(h.score, 9)) for h in hits
                    ]
            seen[f"facts {ns}"] = to_json(memory.facts(namespace=ns))
            seen[f"facts as of {ns}"] = to_json(
                memory.search("leader", "fact", as_of="2024-03-01", namespace=ns)
            )
            seen[f"entities {ns}"] = to_json(memory.entities(namespace=ns))
            seen[f"items {ns}"] = to_json(memory.items(namespace=ns))
            seen[f"lint {ns}"] = to_json(memory.lint(namespace=ns))
            for table, kind in (("documents", "document"), ("passages", "passage"),
                                ("entities", "entity"), ("facts", "fact"), ("pages", "page")):  # fmt: skip
                for (ident,) in rows_of(
                    memory, f"SELECT id FROM {table} WHERE namespace = ?", (ns,)
                ):
                    seen[f"get {kind} {ident}"] = to_json(
                        memory.get(f"memo://{kind}/{ident}", namespace=ns)
                    )
        seen["metrics"] = memory.metrics()
    return seen


def test_export_import_round_trip_is_row_for_row_and_behaves_identically(
    fresh_store, tmp_path: Path
):
    original = fresh_store("original.db")
    build(original)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli(original, "export").out, encoding="utf-8")
    header = json.loads(dump.read_text().splitlines()[0])
    assert header["namespace"] is None and header["namespaces"] == ["alpha", "beta"]
    copy = fresh_store("copy.db")
    out = json.loads(cli(copy, "import", str(dump), "--json").out)
    assert out["rows"]["passages"] == len(tables(original)["passages"])

    # row for row, every table
    before, after = tables(original), tables(copy)
    assert set(before) == set(after)
    for name in before:
        assert after[name] == before[name], f"table {name} differs after the round trip"
    assert store_problems(copy) == []
    # exporting the copy gives the same file, line for line
    assert cli(copy, "export").out == dump.read_text(encoding="utf-8")
    # and what a user sees
    assert behaviour(copy) == behaviour(original)

    # compaction goes on identically (the copy's first compact is a full scan)
    for ns in ("alpha", "beta"):
        a = json.loads(cli(original, "compact", "--ns", ns, "--json").out)
        b = json.loads(cli(copy, "compact", "--ns", ns, "--json").out)
        assert a == b
    assert tables(copy) == tables(original)
    # and keeps going: the same new document, the same queue
    for db in (original, copy):
        cli(db, "remember", "-", "--ns", "alpha", input="\n\n".join(passages_about("Zab", 5)))
    a = json.loads(cli(original, "compact", "--ns", "alpha", "--json").out)
    b = json.loads(cli(copy, "compact", "--ns", "alpha", "--json").out)
    strip = lambda q: [(i["id"], i["kind"], sorted(i["payload"])) for i in q["items"]]  # noqa: E731
    assert (a["created"], a["open"], strip(a)) == (b["created"], b["open"], strip(b))


def test_a_namespace_export_carries_that_namespace_only(fresh_store, tmp_path: Path):
    original = fresh_store("original.db")
    build(original)
    dump = tmp_path / "alpha.jsonl"
    dump.write_text(cli(original, "export", "--ns", "alpha").out, encoding="utf-8")
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    assert lines[0]["namespace"] == "alpha"
    assert not [x for x in lines[1:-1] if x["table"] == "counters"]  # they count the whole store
    copy = fresh_store("alpha.db")
    cli(copy, "import", str(dump))
    with Memory.open(copy) as memory:
        assert memory.namespaces() == ["alpha"]
    conn = connect(original)
    for table in ("documents", "passages", "facts", "pages", "work_items", "tombstones"):
        want = conn.execute(
            f"SELECT * FROM {table} WHERE namespace = 'alpha' ORDER BY 1, 2"
        ).fetchall()
        other = connect(copy)
        assert other.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall() == want, table
        other.close()
    conn.close()

    # BM25 scores count every row of the store's index, every namespace's: alone,
    # alpha finds the same rows with other scores (docs/reliability.md)
    def alpha_only(seen: dict[str, Any]) -> dict[str, Any]:
        return {
            k: sorted((a, t) for a, t, _score in v) if k.startswith("search") else v
            for k, v in seen.items()
            if "alpha" in k
        }

    assert alpha_only(behaviour(copy)) == alpha_only(behaviour(original))


def test_import_is_all_or_nothing_and_needs_an_empty_store(fresh_store, tmp_path: Path):
    original = fresh_store("original.db")
    build(original)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli(original, "export").out, encoding="utf-8")
    lines = dump.read_text().splitlines()

    r = cli(original, "import", str(dump), ok=(2,))
    assert "import needs an empty store" in r.err and len(r.err.splitlines()) == 1

    rows = body(lines)
    broken = tmp_path / "broken.jsonl"
    for bad, message in (
        ([*lines[:50], "{not json", *lines[50:]], "broken.jsonl:51: not valid JSON"),
        (seal([*rows[:50], '{"table": "sqlite_master", "row": {"x": 1}}']), "known table"),
        (lines[1:], "not a memors export"),
        (
            [lines[0].replace(f'"schema": {EXPORT_SCHEMA}', '"schema": 99'), *lines[1:]],
            "schema 99",
        ),
        (seal([*rows, rows[40]]), "cannot restore"),  # a row twice
        (seal([*rows[:30], '{"table": "documents", "row": {"id); DROP": 1}}']), "bad column"),
    ):
        broken.write_text("\n".join(bad) + "\n", encoding="utf-8")
        target = tmp_path / f"fresh-{len(message)}.db"
        r = cli(target, "import", str(broken), ok=(2,))
        assert message in r.err and len(r.err.splitlines()) == 1, r.err
        conn = connect(target)
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 0  # nothing kept
        conn.close()


def test_older_exports_import_and_a_newer_schema_is_refused(fresh_store, tmp_path: Path):
    """Schema 4 only added the clock table, 5 the pages' sentences and facts,
    8 the sentences' flags: an export of an older schema (without those
    rows, or that column) is the same rows, and its pages simply record no
    sentences and no facts (no flags)."""
    original = fresh_store("original.db")
    with Memory.open(original) as memory:
        kept = memory.remember("[[Raft]] elects a leader.\n\n[[Raft]] replicates a log.", uri="r")
        fact = memory.record_fact("Raft", "leader", "n1")
        gone = memory.remember("Text about [[Paxos]] to purge.", uri="gone")
        memory.purge(gone.document)
        with memory.store.write() as tx:
            raft = tx.entities.resolve("Raft", "default")
            page = tx.pages.write("default", raft, "Raft", "Raft elects a leader n1.",
                                  kept.passages, None, None, {},
                                  sentences=[("Raft elects a leader n1.", [kept.passages[0],
                                                                           fact.fact])],
                                  facts=[fact.fact])  # fmt: skip
    lines = cli(original, "export").out.splitlines()
    header = json.loads(lines[0])
    assert header["schema"] == EXPORT_SCHEMA == 8
    shown = json.loads(cli(original, "get", page, "--json").out)
    assert shown["facts"] == [fact.fact]
    assert shown["sentences"] == [
        {"text": "Raft elects a leader n1.", "sources": [kept.passages[0], fact.fact], "flags": []}
    ]
    newer = {3: {"clock", "page_sentences", "page_facts"}, 4: {"page_sentences", "page_facts"}}
    # An older memors wrote no version in the header and no closing line.
    old_header = {k: v for k, v in header.items() if k != "version"}
    for schema, left_out in newer.items():
        rows = [line for line in body(lines)[1:] if json.loads(line)["table"] not in left_out]
        assert len(rows) < len(lines) - 2  # the purge left a clock row, the page its records
        dump = tmp_path / f"v{schema}.jsonl"
        dump.write_text("\n".join([json.dumps({**old_header, "schema": schema}), *rows]) + "\n")
        copy = fresh_store(f"copy-{schema}.db")
        # it cannot be told from a file cut short: refused unless the user says so
        r = cli(copy, "import", str(dump), ok=(2,))
        assert "written by an older memors" in r.err and "--allow-unverified" in r.err, r.err
        assert len(r.err.splitlines()) == 1
        cut = tmp_path / f"v{schema}-cut.jsonl"
        cut.write_text("\n".join([json.dumps({**old_header, "schema": schema}), *rows[:3]]))
        assert cli(copy, "import", str(cut), ok=(2,)).err == r.err.replace(dump.name, cut.name)
        assert json.loads(cli(copy, "export").out.splitlines()[-1])["rows"] == {}  # nothing
        out = json.loads(cli(copy, "import", str(dump), "--allow-unverified", "--json").out)
        assert out["verified"] is False and sum(out["rows"].values()) == len(rows)
        for addr in (kept.document, *kept.passages):
            assert cli(copy, "get", addr, "--json").out == cli(original, "get", addr, "--json").out
        for query in ("leader", "raft log"):
            found = cli(copy, "search", query, "--granularity", "all", "--json").out
            assert json.loads(found)["results"]
            assert found == cli(original, "search", query, "--granularity", "all", "--json").out
        cli(copy, "get", gone.document, ok=(2,))
        old_page = json.loads(cli(copy, "get", page, "--json").out)
        assert {**old_page, "facts": shown["facts"], "sentences": shown["sentences"]} == shown
        assert (old_page["facts"], old_page["sentences"]) == ([], [])

    # Schema 8 added the sentences' flags: a schema 5 export's sentences record none.
    five = []
    for line in body(lines)[1:]:
        row = json.loads(line)
        if row["table"] == "page_sentences":
            row["row"].pop("flags")
        five.append(json.dumps(row))
    dump = tmp_path / "v5.jsonl"
    dump.write_text("\n".join([json.dumps({**old_header, "schema": 5}), *five]) + "\n")
    copy = fresh_store("copy-5.db")
    cli(copy, "import", str(dump), "--allow-unverified", "--json")
    assert json.loads(cli(copy, "get", page, "--json").out) == shown

    newer_schema = EXPORT_SCHEMA + 1
    dump = tmp_path / "newer.jsonl"
    newer = seal([json.dumps({**header, "schema": newer_schema}), *body(lines)[1:]])
    dump.write_text("\n".join(newer) + "\n")
    r = cli(fresh_store("fresh.db"), "import", str(dump), ok=(2,))
    assert f"exported with schema {newer_schema}" in r.err and len(r.err.splitlines()) == 1, r.err


WRITER = r"""
import sys, time
from memors_core import Memory
with Memory.open(sys.argv[1]) as memory:
    for i in range(int(sys.argv[2])):
        memory.remember(f"Write number {i} about [[Topic {i % 7}]] and its replicas.", uri=f"w/{i}")
        print(i, flush=True)
"""


def test_backup_while_another_process_writes_is_whole_and_a_prefix(fresh_store, tmp_path: Path):
    db = fresh_store("live.db")
    with Memory.open(db) as memory:
        memory.remember("\n\n".join(passages_about("Raft", 50)), uri="bulk")  # some pages to copy
    env = {**os.environ, "MEMORS_DB": str(db)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "1000000"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert writer.stdout is not None
    try:
        while int(writer.stdout.readline()) < 300:  # well under way
            pass
        copies = []
        for n in range(3):  # several copies while it writes
            target = tmp_path / f"copy-{n}.db"
            cli(db, "backup", str(target))
            copies.append(target)
            time.sleep(0.2)
        still_writing = writer.poll() is None
    finally:
        writer.kill()
        writer.wait()
    assert still_writing, "the writer finished before the backups"
    counts = []
    for target in copies:
        assert store_problems(target) == []  # integrity, FTS, no orphans, counters
        with Memory.open(target) as memory:
            seqs = sorted(
                int(r[0][2:])
                for r in rows_of(memory, "SELECT uri FROM documents WHERE uri LIKE 'w/%'")
            )
            assert seqs == list(range(len(seqs))), "the copy is not a prefix of the writes"
            assert memory.search("replicas").results
            counts.append(len(seqs))
    print(f"documents in the copies: {counts}")
    assert counts[0] >= 300 and counts == sorted(counts)
    r = cli(db, "backup", str(copies[0]), ok=(2,))
    assert "already exists" in r.err


@pytest.mark.parametrize("name", ["nowhere/deeper/x.db", "."])
def test_backup_to_a_bad_path_is_a_clear_error(fresh_store, tmp_path: Path, name: str):
    db = fresh_store("s.db")
    cli(db, "remember", "-", input="something")
    r = cli(db, "backup", str(tmp_path / name), ok=(2,))
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


@pytest.mark.parametrize("device", ["/dev/null", "fifo"])
def test_backup_to_a_device_or_a_fifo_is_refused_not_reported_done(
    fresh_store, tmp_path: Path, device: str
):
    db = fresh_store("s.db")
    cli(db, "remember", "-", input="something")
    if device == "fifo":
        device = str(tmp_path / "pipe")
        os.mkfifo(device)
    r = cli(db, "backup", device, ok=(2,))
    assert r.err.strip() == (
        f"memors-mcp: {device} is not a regular file; choose a new path for the backup"
    )
    assert r.out == ""
