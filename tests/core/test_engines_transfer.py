"""Moving a store between engines: SQLite to PostgreSQL and back.

A store with every kind of row (two namespaces, document versions,
entities and facts, a written page and its next version, an accepted
merge then undone, a rename, a resolved conflict, forgotten rows, skipped
and obsolete items, a purge) is built on SQLite, exported with the real ``memors-mcp export`` and
imported with the real ``memors-mcp import --db postgresql://…``. The two
stores then hold the same rows, table by table, and show a user the same
things: ``get`` of every address, listings, lint findings, metrics, search
results, and the items the next ``compact`` creates. Then the other way:
the PostgreSQL store goes on (new documents, a page, a merge written on
PostgreSQL) and moves to a new SQLite file, again row for row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memors_core import Memory
from memors_core.errors import NotFound
from memors_core.storage.sql.transfer import TABLE_NAMES
from memors_core.testing import CLIResult, passages_about, postgres, run_cli
from memors_core.wire import to_json

NAMESPACES = ("alpha", "beta")
QUERIES = ["raft leader", "paxos ballots", "replication round", "n1", "zab epochs", "nothing-here"]
#: Queries whose hits' scores are far enough apart that both engines rank
#: them in one order. Each engine's BM25 reads its own index statistics
#: (SQLite's FTS5 every row it holds, every namespace's and the forgotten
#: ones too; PostgreSQL's the namespace's live rows), so hits of nearly
#: equal scores ("replication round": a dozen passages alike) may swap,
#: and ``all``, which ranks rows of every kind together, orders them by
#: scores each engine scales its own way: for those, the same hits.
RANKED = ("raft leader", "paxos ballots", "n1", "zab epochs", "nothing-here")
GRANULARITIES = ("passage", "page", "fact", "entity", "all")
#: Kinds of address and the table holding their rows.
ADDRESSED = (("documents", "document"), ("passages", "passage"), ("entities", "entity"),
             ("facts", "fact"), ("pages", "page"))  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _server() -> None:
    postgres.require_server()


def cli(db: str | Path, *args: str, ok: tuple[int, ...] = (0,), cwd: Path) -> CLIResult:
    """The real ``memors-mcp`` on the store ``db`` (named with ``--db`` too)."""
    r = run_cli(*args, "--db", str(db), db=db, cwd=cwd)
    assert r.code in ok, r
    return r


def page_content(payload: dict) -> str:
    lines = [p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"]]
    lines += [f"{f['predicate']} {f['value']}." for f in payload["facts"]]
    return "\n".join(lines)


def populate(memory: Memory, ns: str) -> None:
    """Every kind of row a store holds, written through the library."""
    for i, text in enumerate(passages_about("Raft", 4)):
        memory.remember(text, uri=f"raft-{i}", title=f"Raft {i}", metadata={"n": i, "ns": [ns]},
                        namespace=ns)  # fmt: skip
    # a second version of a document: one passage kept, one superseded, one new
    memory.remember("Kept paragraph on [[Paxos]] ballots.\n\nOld paragraph.", uri="v", namespace=ns)
    memory.remember("Kept paragraph on [[Paxos]] ballots.\n\nNew paragraph.", uri="v", namespace=ns)
    gone = memory.remember("A document that is forgotten.", namespace=ns)
    memory.forget(gone.document, reason="obsolete", namespace=ns)
    memory.remember("A log replication protocol.", entities=["Raft consensus"], namespace=ns)
    memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01", namespace=ns)
    memory.record_fact("Raft", "leader", "n2", valid_from="2024-06-01", namespace=ns)
    memory.record_fact("Raft", "license", "MIT", valid_to="2020-01-01", namespace=ns)
    memory.propose_merge(["Raft", "Raft consensus"], namespace=ns)
    page = next(i for i in memory.compact(namespace=ns).items if i.kind == "page")
    assert memory.submit(page.id, content=page_content(page.payload), title="Raft", force=True,
                         namespace=ns).stored  # fmt: skip
    for item in memory.compact(kinds=["conflict"], namespace=ns).items:
        memory.submit(item.id, keep=item.payload["facts"][0]["address"], namespace=ns)
    for item in memory.compact(kinds=["merge"], namespace=ns).items:
        if "Raft consensus" in json.dumps(item.payload):
            memory.submit(item.id, accept=True, namespace=ns)
        else:
            memory.submit(item.id, skip=True, reason="not the same", namespace=ns)
    for item in memory.compact(namespace=ns).items:  # the page's second version
        if item.kind == "stale":
            memory.submit(item.id, content=page_content(item.payload), title="Raft v2",
                          force=True, namespace=ns)  # fmt: skip
    # People's corrections: a rename, and the merge undone (its alias taken back).
    memory.rename_entity("Raft", "Raft protocol", namespace=ns)
    memory.undo_merge("Raft consensus", namespace=ns)
    extra = memory.remember("\n\n".join(passages_about("Zab", 3, "epochs")), namespace=ns)
    memory.compact(namespace=ns)
    memory.forget(extra.passages[0], namespace=ns)  # the Zab page item becomes obsolete
    memory.compact(namespace=ns)
    memory.remember("Ephemeral text to purge.", uri="purge-me", namespace=ns)


def build(db: Path) -> None:
    with Memory.open(db) as memory:
        for ns in NAMESPACES:
            populate(memory, ns)
        doc = memory.store.scalar("SELECT id FROM documents WHERE uri = 'purge-me' LIMIT 1")
        ns = memory.store.scalar("SELECT namespace FROM documents WHERE id = ?", (doc,))
        memory.purge(f"memo://document/{doc}", namespace=ns)


def exported(db: str | Path) -> list[dict[str, Any]]:
    """The store's export (header first), as the library gives it."""
    with Memory.open(db, readonly=True) as memory:
        return list(memory.export())


def by_table(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in rows[1:-1]:  # (the header, the closing line)
        out.setdefault(line["table"], []).append(line["row"])
    return out


def behaviour(db: str | Path) -> dict[str, Any]:
    """What a user sees, search aside: get of every address, listings, lint, metrics."""
    seen: dict[str, Any] = {}
    with Memory.open(db, readonly=True) as memory:
        for ns in NAMESPACES:
            seen[f"facts {ns}"] = to_json(memory.facts(namespace=ns))
            seen[f"entities {ns}"] = to_json(memory.entities(namespace=ns))
            seen[f"items {ns}"] = to_json(memory.items(namespace=ns))
            seen[f"lint {ns}"] = to_json(memory.lint(namespace=ns))
            for table, kind in ADDRESSED:
                with memory.store.read():
                    idents = memory.store.all(f"SELECT id FROM {table} WHERE namespace = ?", (ns,))
                for (ident,) in idents:
                    seen[f"get {kind} {ident}"] = to_json(
                        memory.get(f"memo://{kind}/{ident}", namespace=ns)
                    )
        # Counter families carry no creation times here; any timing line is left out.
        seen["metrics"] = [line for line in memory.metrics().splitlines() if "_created" not in line]
        seen["namespaces"] = memory.namespaces()
    return seen


def searched(db: str | Path) -> dict[str, Any]:
    """The addresses each search finds: in order where both engines rank
    alike (:data:`RANKED`, one granularity), else as a set."""
    with Memory.open(db, readonly=True) as memory:
        try:
            found = {
                (ns, q, g): [h.address for h in memory.search(q, g, 50, namespace=ns).results]
                for ns in NAMESPACES
                for q in QUERIES
                for g in GRANULARITIES
            }
        except NotImplementedError:
            pytest.skip("pending on PostgreSQL search (PgSearch is not written yet)")
    return {
        " ".join(key): hits if key[1] in RANKED and key[2] != "all" else sorted(hits)
        for key, hits in found.items()
    }


@dataclass
class Moved:
    original: Path  # the SQLite store
    dump: Path  # its export, by memors-mcp export
    postgres: str  # a new database it was imported into, by memors-mcp import
    imported: dict[str, Any]  # what import printed
    tmp: Path


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moved]:
    tmp = tmp_path_factory.mktemp("engines")
    original = tmp / "original.db"
    build(original)
    dump = tmp / "dump.jsonl"
    dump.write_text(cli(original, "export", cwd=tmp).out, encoding="utf-8")
    url = postgres.new_database()
    try:
        imported = cli(url, "import", str(dump), "--json", cwd=tmp).json
        yield Moved(original, dump, url, imported, tmp)
    finally:
        postgres.drop_database(url)


# --- SQLite -> PostgreSQL ---------------------------------------------------------------------


def test_a_sqlite_store_imports_into_postgresql_row_for_row(moved: Moved) -> None:
    lines = moved.dump.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["schema"] == 8 and rows[0]["namespaces"] == list(NAMESPACES)
    # the store has a row of every exported table (clock: the purge's high-water marks)
    assert {r["table"] for r in rows[1:-1]} == TABLE_NAMES
    assert moved.imported["rows"] == dict(Counter(r["table"] for r in rows[1:-1]))
    assert moved.imported["rows"] == rows[-1]["rows"] and moved.imported["verified"]

    sqlite_rows, pg_rows = by_table(exported(moved.original)), by_table(exported(moved.postgres))
    assert set(pg_rows) == set(sqlite_rows)
    for table in sqlite_rows:
        assert pg_rows[table] == sqlite_rows[table], f"table {table} differs on PostgreSQL"
    # exporting the PostgreSQL store gives the same file, line for line
    assert cli(moved.postgres, "export", cwd=moved.tmp).out.splitlines() == lines


def test_postgresql_shows_what_sqlite_showed(moved: Moved) -> None:
    want, got = behaviour(moved.original), behaviour(moved.postgres)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key
    # the purged document is gone from both
    with Memory.open(moved.postgres, readonly=True) as memory:
        with memory.store.read():
            purged = memory.store.all("SELECT namespace, target FROM purges")
        assert purged
        for ns, target in purged:
            with pytest.raises(NotFound):
                memory.get(target, namespace=ns)


def test_postgresql_search_finds_what_sqlite_found(moved: Moved) -> None:
    want = searched(moved.original)
    ranked = [hits for key, hits in want.items() if key.split(" ", 1)[1].startswith(RANKED)]
    assert max(len(hits) for hits in ranked) >= 3  # an order to compare
    assert searched(moved.postgres) == want


def test_compaction_goes_on_alike_after_the_move(moved: Moved, tmp_path: Path) -> None:
    # A copy of each (the shared stores stay as built): the SQLite store's
    # own backup, and a second PostgreSQL import of the export.
    reference = tmp_path / "reference.db"
    cli(moved.original, "backup", str(reference), cwd=tmp_path)
    url = postgres.new_database()
    try:
        with Memory.open(url) as memory:
            memory.import_(moved.dump.read_text(encoding="utf-8").splitlines(), "dump")
        for ns in NAMESPACES:
            a = cli(reference, "compact", "--ns", ns, "--json", cwd=tmp_path).json
            b = cli(url, "compact", "--ns", ns, "--json", cwd=tmp_path).json
            assert b == a
        # new writes get the next numbers on both: the same item ids, the same queue
        text = "\n\n".join(passages_about("Chubby", 5, "lock leases"))
        for db in (reference, url):
            with Memory.open(db) as memory:
                memory.remember(text, uri="chubby", namespace="alpha")
                memory.record_fact("Raft", "leader", "n7", valid_from="2025-01-01",
                                   namespace="alpha")  # fmt: skip
        a = cli(reference, "compact", "--ns", "alpha", "--json", cwd=tmp_path).json
        b = cli(url, "compact", "--ns", "alpha", "--json", cwd=tmp_path).json

        def queue(q: dict) -> list:
            return [(i["id"], i["kind"], sorted(i["payload"])) for i in q["items"]]

        assert a["created"] >= 1
        assert (b["created"], b["open"], queue(b)) == (a["created"], a["open"], queue(a))
        with Memory.open(reference, readonly=True) as ref, Memory.open(url, readonly=True) as pg:
            for table in ("documents", "pages", "work_items", "merge_candidates", "page_stale"):
                column = "id" if table in ("work_items", "merge_candidates") else "rowid"
                sql = f"SELECT MAX({column}) FROM {table}"
                with pg.store.read(), ref.store.read():
                    assert pg.store.scalar(sql) == ref.store.scalar(sql), table
    finally:
        postgres.drop_database(url)


# --- PostgreSQL -> SQLite ---------------------------------------------------------------------


def go_on(memory: Memory) -> None:
    """Writes made on PostgreSQL after the move: documents, a page, a merge, a forget."""
    for ns in NAMESPACES:
        memory.remember("\n\n".join(passages_about("Spanner", 4, "true time")), uri="spanner",
                        namespace=ns)  # fmt: skip
        memory.remember("[[Spanner]] uses TrueTime.", entities=["Google Spanner"], namespace=ns)
        memory.record_fact("Spanner", "clock", "TrueTime", namespace=ns)
        memory.propose_merge(["Spanner", "Google Spanner"], namespace=ns)
        for item in memory.compact(namespace=ns).items:
            if item.kind == "page" and "Spanner" in json.dumps(item.payload["entity"]):
                memory.submit(item.id, content=page_content(item.payload), title="Spanner",
                              force=True, namespace=ns)  # fmt: skip
            elif item.kind == "merge" and "Google Spanner" in json.dumps(item.payload):
                memory.submit(item.id, accept=True, namespace=ns)
        latest = memory.remember("A passage written and then forgotten.", namespace=ns)
        memory.forget(latest.passages[0], reason="mistake", namespace=ns)
        memory.compact(namespace=ns)


@dataclass
class MovedBack:
    postgres: str  # the store, moved from SQLite and gone on with on PostgreSQL
    sqlite: Path  # where it moved back to (memors-mcp export | memors-mcp import)
    dump: Path
    tmp: Path


@pytest.fixture(scope="module")
def moved_back(moved: Moved) -> Iterator[MovedBack]:
    tmp = moved.tmp / "back"
    tmp.mkdir()
    url = postgres.new_database()
    try:
        with Memory.open(url) as memory:
            memory.import_(moved.dump.read_text(encoding="utf-8").splitlines(), "dump")
            go_on(memory)
        dump = tmp / "from-postgres.jsonl"
        dump.write_text(cli(url, "export", cwd=tmp).out, encoding="utf-8")
        copy = tmp / "copy.db"
        cli(copy, "import", str(dump), cwd=tmp)
        yield MovedBack(url, copy, dump, tmp)
    finally:
        postgres.drop_database(url)


def test_a_postgresql_store_moves_back_to_sqlite_row_for_row(moved_back: MovedBack) -> None:
    lines = moved_back.dump.read_text(encoding="utf-8").splitlines()
    pg_rows, sqlite_rows = (
        by_table(exported(moved_back.postgres)),
        by_table(exported(moved_back.sqlite)),
    )
    assert set(sqlite_rows) == set(pg_rows) == TABLE_NAMES
    for table in pg_rows:
        assert sqlite_rows[table] == pg_rows[table], f"table {table} differs on SQLite"
    # the rows written on PostgreSQL are there (shingles are BYTEA there, BLOB here)
    spanner = [p for p in pg_rows["passages"] if "Spanner" in p["text"]]
    assert spanner and all(set(p["shingles"]) == {"$b64"} for p in spanner)
    assert cli(moved_back.sqlite, "export", cwd=moved_back.tmp).out.splitlines() == lines


def test_sqlite_shows_what_postgresql_showed(moved_back: MovedBack) -> None:
    want, got = behaviour(moved_back.postgres), behaviour(moved_back.sqlite)
    assert got.keys() == want.keys()
    assert any(k.startswith("get page") for k in want)
    for key in want:
        assert got[key] == want[key], key


def test_sqlite_search_finds_what_postgresql_found(moved_back: MovedBack) -> None:
    want = searched(moved_back.postgres)
    assert searched(moved_back.sqlite) == want
