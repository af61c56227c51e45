"""The PostgreSQL engine's transaction object: the shared SQL repositories
with PostgreSQL's search, purge and transfer, and its clocks."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import psycopg

from memors_core.domain.rows import (
    Document,
    DocumentVersion,
    LatestDocument,
    NewPassage,
    Passage,
    ScanMark,
    Tombstone,
)
from memors_core.storage.postgres.locks import ENTITY_SPACE, URI_SPACE, namespace_key, uri_key
from memors_core.storage.postgres.purge import PgPurges
from memors_core.storage.postgres.search import PgSearch
from memors_core.storage.postgres.terms import Ahead, Staging, TermCache
from memors_core.storage.postgres.transfer import PgTransfer
from memors_core.storage.postgres.vectors import PgVectors
from memors_core.storage.sql.queue import (
    CLOCKED,
    ITEM_COLS,
    SqlChangeLog,
    SqlCounters,
    SqlItems,
)
from memors_core.storage.sql.records import (
    PASSAGE_COLS,
    TOMBSTONE_COLS,
    SqlDocuments,
    SqlEntities,
    SqlPassages,
    dumps,
)
from memors_core.storage.sql.repo import Repo
from memors_core.storage.sql.tx import SqlTx

# The change log's clock is its highest number or the mark recorded when
# entries were dropped, whichever is higher: both read in the transaction's
# own snapshot (a sequence's last value would count a writer not yet committed).
_CHANGE_HEAD = (
    "SELECT GREATEST(COALESCE((SELECT MAX(seq) FROM changes), 0), "
    "COALESCE((SELECT value FROM clock WHERE name = 'changes'), 0))"
)


class PgChangeLog(SqlChangeLog):
    def settled_heads(self, namespace: str) -> ScanMark:
        statement = self.heads_sql()
        for table in CLOCKED:  # (its parameters written in: it goes in a script)
            statement = statement.replace("?", f"'{table}'", 1)
        row = self.db.settled_row(namespace, statement)
        return self.heads() if row is None else self.scan_mark(row)

    def prune(self, namespace: str) -> None:
        # The newest entry of the log stays (whichever namespace's): the
        # log's clock is its highest number, and keeping it spares holding
        # that number in the store's one ``clock`` row, which writers of
        # other namespaces would wait for.
        # (one statement, one round trip; no mark: nothing is at or below NULL)
        self.run(
            "DELETE FROM changes WHERE namespace = ?1 AND seq <= "
            "(SELECT MIN(change_seq) FROM compact_marks WHERE namespace = ?1) "
            "AND seq < (SELECT MAX(seq) FROM changes)",
            (namespace,),
        )


# One statement per call, whatever the number of rows: the rows reach the
# server as arrays bound in binary (not quoted into the text: 15x less time
# to send 4,000 passages), and the tables' statement triggers check, log and
# queue them for the search index together (migration 13, schema.py). A
# passage's number is drawn from its clock's sequence in the statement, in
# the list's order.
_INSERT_PASSAGES = (
    "INSERT INTO passages(rowid, id, namespace, document, version, position, text, hash, "
    "shingles, created_at) "
    "SELECT nextval('passages_clock'), u.id, %b, u.document, u.version, u.position, u.text, "
    "u.hash, u.shingles, %b "
    "FROM unnest(%b::text[], %b::text[], %b::int[], %b::int[], %b::text[], %b::text[], "
    "%b::bytea[]) AS u(id, document, version, position, text, hash, shingles) "
    "RETURNING id, rowid"
)
_INSERT_DOCUMENTS = (
    "INSERT INTO documents(id, namespace, uri, created_at) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[])"
)
_INSERT_VERSIONS = (
    "INSERT INTO document_versions(document, version, text_hash, title, metadata, created_at) "
    "SELECT * FROM unnest(%b::text[], %b::int[], %b::text[], %b::text[], %b::text[], %b::text[])"
)
_LINK_PASSAGES = (
    "INSERT INTO version_passages(document, version, position, passage) "
    "SELECT * FROM unnest(%b::text[], %b::int[], %b::int[], %b::text[])"
)
_INSERT_MENTIONS = (
    "INSERT INTO mentions(passage, entity) SELECT * FROM unnest(%b::text[], %b::text[]) "
    "ON CONFLICT DO NOTHING"
)
_INSERT_PROFILES = (
    "INSERT INTO passage_profiles(passage, data) SELECT * FROM unnest(%b::text[], %b::text[]) "
    "ON CONFLICT DO NOTHING"
)


class _Bound(Repo):
    def _bound(self, sql: str, params: Sequence[Any]) -> psycopg.Cursor[Any]:
        # The store's cursors quote parameters into the text (ClientCursor);
        # thousands of rows go as bound arrays instead.
        cur = psycopg.Cursor(self.db.conn)
        cur.execute(sql, params)
        return cur


class PgDocuments(_Bound, SqlDocuments):
    """Documents and versions inserted in one statement per call; in an
    ``add`` write, a uri claimed before it is looked up."""

    def latest_by_uri(self, namespace: str, uri: str) -> LatestDocument | None:
        self._claim(namespace, [uri])
        return super().latest_by_uri(namespace, uri)

    def latest_by_uris(self, namespace: str, uris: Iterable[str]) -> dict[str, LatestDocument]:
        uris = list(uris)
        self._claim(namespace, uris)
        return super().latest_by_uris(namespace, uris)

    def _claim(self, namespace: str, uris: Sequence[str]) -> None:
        """An ``add`` write runs beside the namespace's others: a uri it
        looks up is claimed first, until it ends, so two writes never both
        find it new and make two first versions of it (the second finds
        the first once that commits). In key order: two claiming the same
        uris never wait for each other both."""
        if self.db._session.role == "add":
            for key in sorted({uri_key(namespace, uri) for uri in uris}):
                cast("PgTx", self.tx).claim(URI_SPACE, key)

    def insert_many(self, documents: Sequence[Document]) -> None:
        if documents:
            self._bound(
                _INSERT_DOCUMENTS,
                (
                    [d.id for d in documents],
                    [d.namespace for d in documents],
                    [d.uri for d in documents],
                    [d.created_at for d in documents],
                ),
            ).close()

    def link_passages(self, links: Sequence[tuple[str, int, int, str]]) -> None:
        if links:
            self._bound(
                _LINK_PASSAGES, [list(column) for column in zip(*links, strict=True)]
            ).close()

    def add_versions(self, versions: Sequence[DocumentVersion]) -> None:
        if versions:
            self._bound(
                _INSERT_VERSIONS,
                (
                    [v.document for v in versions],
                    [v.version for v in versions],
                    [v.text_hash for v in versions],
                    [v.title for v in versions],
                    [dumps(v.metadata) for v in versions],
                    [v.created_at for v in versions],
                ),
            ).close()


class PgEntities(SqlEntities):
    """Entities; in an ``add`` write, one made under the namespace's lock
    of new entities."""

    def _found_once_claimed(self, name: str, namespace: str) -> str | None:
        """An ``add`` write runs beside the namespace's others: a name it
        finds new is looked up again once it holds the namespace's lock of
        new entities (until it ends), so two writes never make one entity
        twice (the second finds the first's once that commits). One lock a
        namespace: two writes making entities in different orders would
        otherwise each wait for the other's."""
        if self.db._session.role != "add":
            return None
        cast("PgTx", self.tx).claim(ENTITY_SPACE, namespace_key(namespace))
        return self.find(name, namespace)


# What ``get`` shows of a passage, in one round trip where three look-ups
# took three: the row, its tombstone (NULLs while it is live) and the
# canonical entities of its mentions, in the order of the entities' rows
# (each kept once, at its first, in Python: grouping them in the statement
# doubled its planning time). Prepared on each connection: planning it
# took longer than running it.
_PASSAGE_SHOWN = (
    f"SELECT {PASSAGE_COLS}, {', '.join(f't.{c}' for c in TOMBSTONE_COLS.split(', '))}, "
    "ARRAY(SELECT e.canonical FROM mentions m JOIN entities e ON e.id = m.entity "
    "WHERE m.passage = p.id ORDER BY e.rowid) "
    "FROM passages p LEFT JOIN tombstones t ON t.target = p.id "
    "WHERE p.id = ? AND p.namespace = ?"
)
_PASSAGE_WIDTH = PASSAGE_COLS.count(",") + 1


class PgPassages(_Bound, SqlPassages):
    """Passages, their mentions and profiles inserted in one statement each."""

    tx: PgTx

    def get_shown(
        self, ident: str, namespace: str
    ) -> tuple[Passage, Tombstone | None, list[str]] | None:
        row = self.db.prepared(_PASSAGE_SHOWN, (ident, namespace)).fetchone()
        if row is None:
            return None
        stone = row[_PASSAGE_WIDTH:-1]
        return (
            Passage(*row[:_PASSAGE_WIDTH]),
            None if stone[0] is None else Tombstone(*stone),
            list(dict.fromkeys(row[-1])),
        )

    def insert_many(
        self, namespace: str, passages: Iterable[NewPassage], created_at: str
    ) -> list[int]:
        passages = list(passages)
        if not passages:
            return []
        numbers = dict(self._send(namespace, passages, created_at).fetchall())
        out = [numbers[p.id] for p in passages]
        self.tx.drew("passages", max(out))
        return out

    def add_many(self, namespace: str, passages: Iterable[NewPassage], created_at: str) -> None:
        passages = list(passages)
        if not passages:
            return
        self._send(namespace, passages, created_at).close()
        # (its numbers are not read: the clock reads them from the table if asked)
        self.tx.forget_clock("passages")

    def coming(self, namespace: str, texts: Sequence[str], ahead: object = None) -> None:
        if self.db.terms is not None:
            known = ahead if isinstance(ahead, Ahead) else None
            self.db.terms.expect(self.db.conn, namespace, texts, self.tx.staging, known)

    def _send(
        self, namespace: str, passages: list[NewPassage], created_at: str
    ) -> psycopg.Cursor[Any]:
        """The passages' insert sent (its answer, the rows' numbers, on the
        cursor), their search terms counted and staged meanwhile."""

        def insert() -> psycopg.Cursor[Any]:
            return self._bound(
                _INSERT_PASSAGES,
                (
                    namespace,
                    created_at,
                    [p.id for p in passages],
                    [p.document for p in passages],
                    [p.version for p in passages],
                    [p.position for p in passages],
                    [p.text for p in passages],
                    [p.hash for p in passages],
                    [p.shingles for p in passages],
                ),
            )

        terms: TermCache | None = self.db.terms
        if terms is None:
            return insert()
        return terms.stage(self.db.conn, namespace, passages, insert, self.tx.staging)

    def mention_many(self, pairs: Iterable[tuple[str, str]]) -> None:
        rows = list(pairs)
        if rows:
            self._bound(_INSERT_MENTIONS, ([r[0] for r in rows], [r[1] for r in rows])).close()

    def add_profiles(self, rows: Sequence[tuple[str, str]]) -> None:
        rows = list(rows)
        if rows:
            self._bound(_INSERT_PROFILES, ([r[0] for r in rows], [r[1] for r in rows])).close()


class PgItems(SqlItems):
    """Work items: a batch of keys' last items read, and a compaction's new items
    written, in one statement each."""

    # The keys as an array, which PostgreSQL hashes: a key list read as rows
    # becomes a semi-join, planned as a nested loop over every item of the
    # kind while the statistics still say the table is empty (a first
    # compaction fills it in the same transaction): quadratic.
    LAST_FOR_KEYS = (
        f"SELECT DISTINCT ON (key) {ITEM_COLS} FROM work_items "
        "WHERE namespace = ? AND kind = ? AND key = ANY(CAST(? AS text[])) ORDER BY key, id DESC"
    )

    def _keys(self, keys: Sequence[str]) -> Any:
        return list(keys)

    def create_many(
        self, namespace: str, kind: str, rows: Sequence[tuple[str, str, Any]], at: str
    ) -> dict[str, int]:
        # One multi-row VALUES: each payload a plain literal. (Arrays or JSON
        # of the payloads cost the server 3-10x more to take apart: a page
        # item's payload holds every passage's text.)
        if not rows:
            return {}
        values = ", ".join(["(?, ?, ?, 'open', ?, ?, ?, ?)"] * len(rows))
        params = [
            x
            for key, fingerprint, payload in rows
            for x in (namespace, kind, key, fingerprint, dumps(payload), at, at)
        ]
        return {
            key: ident
            for ident, key in self.all(
                "INSERT INTO work_items(namespace, kind, key, status, fingerprint, payload, "
                f"created_at, updated_at) VALUES {values} RETURNING id, key",
                params,
            )
        }


#: Every counter row: the store-wide ones and the namespaces' shards.
COUNTER_ROWS = (
    "SELECT name, kind, event, value FROM counters "
    "UNION ALL SELECT name, kind, event, value FROM counter_shards"
)


class PgCounters(SqlCounters):
    """Counters bumped in the row of the namespace being written
    (``counter_shards``), so writers of different namespaces never wait for
    one row; read as the sum of those rows and ``counters``."""

    rows = f"({COUNTER_ROWS})"

    def bump(self, name: str, kind: str = "", event: str = "", by: int = 1) -> None:
        if by:
            scope = self.db._session.scope
            shard = min(scope) if scope else ""
            self.run(
                "INSERT INTO counter_shards(name, kind, event, shard, value) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name, kind, event, shard) "
                "DO UPDATE SET value = counter_shards.value + excluded.value",
                (name, kind, event, shard, by),
            )


class PgTx(SqlTx):
    """The repositories of one PostgreSQL connection; ``native("postgres")``
    is the ``psycopg.Connection`` (in autocommit mode, inside this transaction)."""

    engine = "postgres"
    clock_sql = (
        "SELECT GREATEST(COALESCE((SELECT MAX(rowid) FROM {table}), 0), "
        "COALESCE((SELECT value FROM clock WHERE name = ?), 0))"
    )
    hold_clock_sql = (
        "INSERT INTO clock(name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = GREATEST(clock.value, excluded.value)"
    )
    change_head_sql = _CHANGE_HEAD
    # (as an array: the planner counts a list read from JSON as 100 rows
    # and may then read a mid-sized table whole rather than look 100 keys
    # up; an array it counts as 10: 7 ms against 0.2 for a page view's
    # 50 tombstones among 17,000, docs/performance.md)
    keys_in = "= ANY(ARRAY(SELECT json_array_elements_text(CAST(? AS json))))"

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        # (the shared repositories this engine writes its own way, in one
        # statement per call: replaced before any is used)
        self.documents = PgDocuments(self)
        self.entities = PgEntities(self)
        self.passages = PgPassages(self)
        self.changes = PgChangeLog(self)
        self.counters = PgCounters(self)
        self.items = PgItems(self)
        self.search = PgSearch(self)
        self.vectors = PgVectors(self)
        self.purges = PgPurges(self)
        self.transfer = PgTransfer(self)
        #: Numbers drawn from each clock's sequence, not ticked yet.
        self._drawn: dict[str, deque[int]] = {}
        #: What this transaction's inserts know of their search terms.
        self.staging = Staging()

    def together(self, *reads: Callable[[], Any]) -> list[Any]:
        answers: list[Any] = self.db.together(reads)
        return answers

    @contextlib.contextmanager
    def later(self) -> Iterator[None]:
        """The block's statements held back (:meth:`PgStore.execute`) until
        the transaction's next statement or its commit, sent with it."""
        session = self.db._session
        session.later += 1
        try:
            yield
        finally:
            session.later -= 1

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        """psycopg's pipeline mode: the block's statements are sent without
        waiting for each other's answers (one round trip where each took
        one), a read's answer waiting for those before it."""
        conn = self.db.conn
        if conn.pgconn.pipeline_status:  # (already in one: it goes on)
            yield
            return
        with conn.pipeline():
            yield

    def claim(self, space: int, key: int) -> None:
        """Take the advisory lock ``(space, key)`` until the transaction
        ends (held back: it goes with the next statement)."""
        with self.later():
            self.db.run(f"SELECT pg_advisory_xact_lock({int(space)}, {int(key)})")

    def reserve(self, name: str, count: int) -> None:
        """Draw ``count`` numbers of ``name``'s sequence in one round trip.

        A sequence makes no writer wait for another (as ``MAX(rowid) + 1``
        would, on the unique key); its numbers need not follow the commits
        (writers run together), so a scan reads its clocks settled
        (:meth:`PgStore.settled_row`)."""
        if count > 0:
            drawn = self.db.all(
                "SELECT nextval(?::regclass) FROM generate_series(1, ?)", (f"{name}_clock", count)
            )
            self._drawn.setdefault(name, deque()).extend(sorted(r[0] for r in drawn))

    def drew(self, name: str, value: int) -> None:
        """Say that a statement drew ``name``'s numbers up to ``value`` itself."""
        self._ticks[name] = max(value, self._ticks.get(name, 0))

    def tick(self, name: str) -> int:
        drawn = self._drawn.get(name)
        if not drawn:
            self.reserve(name, 1)
            drawn = self._drawn[name]
        value = drawn.popleft()
        self._ticks[name] = value
        return value

    def reset_clocks(self) -> None:
        super().reset_clocks()
        self._drawn.clear()  # (numbers drawn and never used are simply skipped)
        self.staging.clear()

    def forget_clock(self, name: str) -> None:
        """Say that a statement drew ``name``'s numbers without reading them:
        the clock is read from the table again when asked."""
        self._ticks.pop(name, None)

    def hold_change_clock(self) -> None:
        """Record the change log's high-water mark (before entries are dropped)."""
        self.db.run(self.hold_clock_sql, ("changes", self.db.scalar(_CHANGE_HEAD)))

    def hold_clocks(self) -> None:
        super().hold_clocks()
        self.hold_change_clock()
