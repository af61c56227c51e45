"""Consistency checks on a store, shared by the reliability tests.

:func:`store_problems` opens the store the way a fresh process would (so a
killed writer's WAL is recovered first) and returns every broken invariant
as a line of text: an empty list is a healthy store. It takes a SQLite file
or a ``postgresql://`` address; :func:`connect` likewise gives a plain
connection to either (on PostgreSQL one that reads SQLite's spelling of the
shared SQL, ``?`` placeholders included, through the engine's own renderer).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

if TYPE_CHECKING:
    import pytest

    from memors_core import Memory

WORK_ITEMS_TOTAL = "memors_store_work_items_total"
PAGES_MARKED_STALE = "memors_store_pages_marked_stale_total"
# Per kind of search index: the rows of a namespace that belong in it.
INDEXED = {
    "p": "SELECT count(*) FROM passages r WHERE r.namespace = ? AND {live}",
    "g": "SELECT count(*) FROM pages r WHERE r.namespace = ? AND {live}",
    "f": "SELECT count(*) FROM facts r WHERE r.namespace = ? AND {live}",
    "e": "SELECT count(*) FROM entities r WHERE r.namespace = ? AND r.canonical = r.id",
}
LIVE = "NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = r.id)"

# (what, SQL that returns offending rows)
ORPHANS: list[tuple[str, str]] = [
    (
        "a document without a version",
        "SELECT d.id FROM documents d WHERE NOT EXISTS "
        "(SELECT 1 FROM document_versions v WHERE v.document = d.id)",
    ),
    (
        "a first version without its passages",
        "SELECT v.document FROM document_versions v WHERE v.version = 1 AND NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.document = v.document AND p.version = 1) "
        "AND NOT EXISTS (SELECT 1 FROM purges)",  # (a purge may erase every passage)
    ),
    (
        "a later version without its passage list",
        "SELECT v.document, v.version FROM document_versions v WHERE v.version > 1 "
        "AND NOT EXISTS (SELECT 1 FROM version_passages vp WHERE vp.document = v.document "
        "AND vp.version = v.version)",
    ),
    (
        "a first version with a gap in its passages",
        "SELECT document FROM passages WHERE version = 1 "
        "AND NOT EXISTS (SELECT 1 FROM purges) "  # (purging a passage leaves its gap)
        "GROUP BY document HAVING MAX(position) + 1 <> COUNT(*) OR MIN(position) <> 0",
    ),
    (
        "a later version's passage list with a gap",
        "SELECT document, version FROM version_passages "
        "WHERE NOT EXISTS (SELECT 1 FROM purges) "
        "GROUP BY document, version HAVING MAX(position) + 1 <> COUNT(*)",
    ),
    (
        "a version's passage list naming a missing passage",
        "SELECT vp.passage FROM version_passages vp WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = vp.passage)",
    ),
    (
        "a passage of a version that does not exist",
        "SELECT p.id FROM passages p WHERE NOT EXISTS (SELECT 1 FROM document_versions v "
        "WHERE v.document = p.document AND v.version = p.version)",
    ),
    (
        "an orphan passage (in no version's passage list)",
        "SELECT p.id FROM passages p WHERE p.version > 1 AND NOT EXISTS "
        "(SELECT 1 FROM version_passages vp WHERE vp.passage = p.id "
        "AND vp.document = p.document AND vp.version = p.version)",
    ),
    (
        "a passage of a missing document",
        "SELECT p.id FROM passages p WHERE NOT EXISTS "
        "(SELECT 1 FROM documents d WHERE d.id = p.document)",
    ),
    (
        "a mention of a missing passage or entity",
        "SELECT m.passage FROM mentions m WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = m.passage) OR NOT EXISTS "
        "(SELECT 1 FROM entities e WHERE e.id = m.entity)",
    ),
    (
        "a page citing a missing passage",
        "SELECT s.page FROM page_sources s WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = s.passage)",
    ),
    (
        "a page made by an item that is not done",
        "SELECT pg.id FROM pages pg JOIN work_items w ON w.id = pg.item WHERE w.status <> 'done'",
    ),
    (
        "an item that made two pages",
        "SELECT item FROM pages WHERE item IS NOT NULL GROUP BY item HAVING COUNT(*) > 1",
    ),
    (
        "a done page/stale item without its page",
        "SELECT w.id FROM work_items w WHERE w.kind IN ('page', 'stale') AND w.status = 'done' "
        "AND NOT EXISTS (SELECT 1 FROM pages pg WHERE pg.item = w.id) "
        "AND NOT EXISTS (SELECT 1 FROM purges)",  # (purge erases pages)
    ),
    (
        "a tombstone left by an item that is not done",
        "SELECT t.target FROM tombstones t JOIN work_items w ON w.id = t.item "
        "WHERE w.status <> 'done'",
    ),
    (
        "two open items with one key",
        "SELECT namespace, kind, key FROM work_items WHERE status = 'open' "
        "GROUP BY namespace, kind, key HAVING COUNT(*) > 1",
    ),
]


def rows_of(memory: Any, sql: str, params: Any = ()) -> list[tuple]:
    """The rows of one query (SQLite's spelling) on an open Memory's store, in a
    read transaction of its own (or the one open): a PostgreSQL store runs SQL
    inside a transaction only."""
    with memory.store.read():
        return memory.store.all(sql, params)


def value_of(memory: Any, sql: str, params: Any = ()) -> Any:
    """The first column of the first row of one query (None: no row), as :func:`rows_of`."""
    with memory.store.read():
        return memory.store.scalar(sql, params)


def is_postgres(path: Path | str) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


class PgConnection:
    """A plain psycopg connection (autocommit) taking SQL in SQLite's spelling,
    like :func:`connect`'s apsw one: ``execute(sql, params)`` gives a cursor."""

    def __init__(self, url: str | None = None, *, conn: Any = None) -> None:
        import psycopg

        self.conn = conn if conn is not None else psycopg.connect(url, autocommit=True)
        self.owned = conn is None

    def execute(self, sql: str, params: Any = ()) -> Any:
        from memors_core.storage.postgres.dialect import render

        rendered = render(sql)
        return self.conn.execute(rendered.sql, list(rendered.params(params)))

    def close(self) -> None:
        if self.owned:
            self.conn.close()


def connect(path: Path | str) -> Any:
    """A plain connection, as a fresh process would open the store: apsw for a
    SQLite file, :class:`PgConnection` for a ``postgresql://`` address."""
    if is_postgres(path):
        return PgConnection(str(path))
    conn = apsw.Connection(str(path))
    conn.setbusytimeout(15_000)
    return conn


def store_problems(path: Path | str) -> list[str]:
    """Every broken invariant of the store at ``path`` (empty when healthy)."""
    conn = connect(path)
    try:
        if isinstance(conn, PgConnection):
            return list(_pg_problems(conn))
        return list(_problems(conn))
    finally:
        conn.close()


def open_store_problems(memory: Any) -> list[str]:
    """:func:`store_problems` of an open :class:`Memory`, through its own
    connection (on SQLite: a fresh connection to its file)."""
    if memory.store.engine == "sqlite":
        return store_problems(memory.store.path)
    with memory.store.read():
        return list(_pg_problems(PgConnection(conn=memory.store.conn)))


def _pg_problems(conn: PgConnection) -> Iterator[str]:
    """The engine-neutral checks: orphans and counters. (PostgreSQL keeps its
    own pages and indexes consistent; its search index is its engine's own.)"""
    for what, sql in ORPHANS:
        rows = conn.execute(sql).fetchall()
        if rows:
            yield f"{what}: {rows[:3]} ({len(rows)} in all)"
    yield from _counter_problems(conn)


def _problems(conn: apsw.Connection) -> Iterator[str]:
    result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if result != ["ok"]:
        yield f"integrity_check: {result[:5]}"
    fk = conn.execute("PRAGMA foreign_key_check").fetchall()
    if fk:
        yield f"foreign_key_check: {fk[:5]}"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "passages" not in tables:
        return  # killed before the schema was created: an empty file is a healthy store
    indexes = conn.execute("SELECT id, kind, namespace FROM search_indexes").fetchall()
    for ix, kind, namespace in indexes:
        fts = f"search_{ix}"
        try:
            conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")
        except apsw.Error as exc:
            yield f"{fts} integrity-check: {exc}"
        n_fts = conn.execute(f"SELECT COUNT(*) FROM {fts}").fetchone()[0]
        n_rows = conn.execute(INDEXED[kind].format(live=LIVE), (namespace,)).fetchone()[0]
        if n_fts != n_rows:
            yield f"{fts} ({kind} of {namespace!r}) holds {n_fts} rows for {n_rows}"
    queued = conn.execute("SELECT COUNT(*) FROM search_queue").fetchone()[0]
    if queued:
        yield f"search_queue holds {queued} rows after a commit"
    for what, sql in ORPHANS:
        rows = conn.execute(sql).fetchall()
        if rows:
            yield f"{what}: {rows[:3]} ({len(rows)} in all)"
    yield from _counter_problems(conn)


def _counter_rows(conn: Any) -> str:
    """Every counter row: on PostgreSQL also the namespaces' shards (summed when read)."""
    if isinstance(conn, apsw.Connection):
        return "counters"
    return (
        "(SELECT name, kind, event, value FROM counters UNION ALL "
        "SELECT name, kind, event, value FROM counter_shards)"
    )


def counters(conn: Any) -> dict[tuple[str, str], int]:
    return {
        (kind, event): int(value)
        for kind, event, value in conn.execute(
            f"SELECT kind, event, SUM(value) FROM {_counter_rows(conn)} c WHERE name = ? "
            "GROUP BY kind, event",
            (WORK_ITEMS_TOTAL,),
        )
    }


def _counter_problems(conn: Any) -> Iterator[str]:
    """Persisted counters equal the rows they count.

    Items are never deleted and leave ``open`` once, so ``created`` counts
    every item of a kind and ``done``/``skipped``/``obsolete`` count the
    items in that state; a page is counted as marked stale the first time.
    """
    counted = counters(conn)
    rows = conn.execute("SELECT kind, status, COUNT(*) FROM work_items GROUP BY kind, status")
    by_kind: dict[str, dict[str, int]] = {}
    for kind, status, n in rows:
        by_kind.setdefault(kind, {})[status] = n
    for kind in set(by_kind) | {k for k, _e in counted}:
        states = by_kind.get(kind, {})
        if counted.get((kind, "created"), 0) != sum(states.values()):
            yield (
                f"{WORK_ITEMS_TOTAL}{{kind={kind},event=created}} is "
                f"{counted.get((kind, 'created'), 0)} for {sum(states.values())} items"
            )
        for event in ("done", "skipped", "obsolete"):
            if counted.get((kind, event), 0) != states.get(event, 0):
                yield (
                    f"{WORK_ITEMS_TOTAL}{{kind={kind},event={event}}} is "
                    f"{counted.get((kind, event), 0)} for {states.get(event, 0)} {event} items"
                )
    marked = conn.execute(
        f"SELECT COALESCE(SUM(value), 0) FROM {_counter_rows(conn)} c WHERE name = ?",
        (PAGES_MARKED_STALE,),
    ).fetchone()[0]
    distinct = conn.execute("SELECT COUNT(DISTINCT page) FROM page_stale").fetchone()[0]
    # A counter never goes down: a purge that erases a page once marked stale
    # (with its marks) leaves the count above what is left to see.
    purged = conn.execute("SELECT COUNT(*) FROM purges").fetchone()[0]
    if marked != distinct and not (purged and marked > distinct):
        yield f"{PAGES_MARKED_STALE} is {marked} for {distinct} pages marked stale"


# --- a corpus big enough to kill a load mid-way ---------------------------------------------

VOCABULARY = [
    "replica", "quorum", "leader", "lease", "snapshot", "epoch", "vote", "term", "commit",
    "shard", "partition", "gossip", "clock", "vector", "merkle", "hint", "handoff", "repair",
    "compaction", "tombstone", "segment", "index", "cursor", "batch", "fence", "witness",
]  # fmt: skip


def corpus(documents: int, *, seed: int = 7, topics: int = 40) -> list[dict]:
    """``documents`` JSONL records (uri, entities, three or four passages);
    every tenth repeats a paragraph of an earlier one (duplicate items)."""
    rng = random.Random(seed)
    words = VOCABULARY + [f"term{i}" for i in range(3000)]
    paragraphs: list[str] = []
    out = []
    for i in range(documents):
        paras = [
            " ".join(rng.choice(words) for _ in range(30)) + f". Record {i}, part {p}."
            for p in range(3)
        ]
        if i % 10 == 9:
            paras.append(rng.choice(paragraphs))
        paragraphs.extend(paras[:3])
        paras.append(f"Filed under [[Subject {i % (topics * 3)}]].")
        out.append(
            {
                "text": "\n\n".join(paras),
                "uri": f"record://{i}",
                "entities": [f"Topic {i % topics}"],
            }
        )
    return out


def write_jsonl(path: Path, records: list[dict]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


#: A prepared statement's ``EXECUTE`` in a message, with its parameters' placeholders.
_EXECUTED = re.compile(r"EXECUTE (memors_[0-9a-f]+)(?:\((?:%s(?:, )?)*\))?")


@contextmanager
def statements(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement the store's driver runs inside the block (SQLite's
    trace hook; on PostgreSQL every psycopg cursor's ``execute``, a
    prepared statement's ``EXECUTE`` as the query it runs)."""
    seen: list[str] = []
    if memory.store.tx.engine == "sqlite":

        def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
            seen.append(sql)
            return True

        memory.store.conn.exec_trace = trace
        try:
            yield seen
        finally:
            memory.store.conn.exec_trace = None
        return
    import psycopg

    from memors_core.storage.postgres import connection

    execute = psycopg.Cursor.execute
    preparation = connection._preparation
    bodies: dict[str, str] = {}  # a prepared statement's name: what it runs

    def named(rendered: str) -> tuple[str, str]:
        name, statement = preparation(rendered)
        bodies[name] = statement.split(" AS ", 1)[1]
        return name, statement

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        # (a prepared statement's EXECUTE, alone or after the statements
        # that begin its transaction: the query it runs)
        text = _EXECUTED.sub(lambda m: bodies.get(m.group(1), m.group(0)), str(query))
        seen.append(text)
        return execute(self, query, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        patch.setattr(connection, "_preparation", named)
        yield seen
