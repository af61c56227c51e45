"""The duplicate kind's prefix index on PostgreSQL: its tables, their
migrations and what PostgreSQL does its own way (loading the prefix rows,
the fold, the probe); the statements both engines share are
:mod:`memors_kinds.duplicate.sql_index`'s.

The tables and their meaning are those of
:mod:`memors_kinds.duplicate.sqlite_index` (``dup_prefix`` and the small
``dup_recent`` folded into it once it reaches 1/``FOLD_RATIO`` of the
passages before it, ``dup_folded``, ``dup_members``, ``dup_indexed``, ``dup_settled``),
reached through ``tx.native("sql")``, whose ``conn`` is the store's psycopg connection,
inside its transaction, binding parameters client-side (``%s``). Nothing
here reads a core table, and nothing here imports psycopg: the connection
is handed in.

A round trip to the server costs far more than one to an embedded SQLite,
so every method is a fixed number of statements whatever the number of
passages: rows go in as whole arrays (``unnest``) or, for a full scan's
hundreds of thousands of prefix rows, as one binary ``COPY`` (built with
numpy, several times faster than row by row); the candidates of a whole
batch of new passages come from one query.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memors_kinds.duplicate.index import Prefix
from memors_kinds.duplicate.join import THRESHOLD
from memors_kinds.duplicate.sql_index import (
    FOLD_RATIO,
    PREFIX_TABLES,
    SET_INDEXED,
    SqlPrefixIndex,
    few_rows,
    many_rows,
)
from memors_kinds.duplicate.sql_index import (
    tokens as prefix_tokens,
)

if TYPE_CHECKING:
    import numpy as np

_PREFIX_COLUMNS = """(
    token BIGINT NOT NULL,
    size INTEGER NOT NULL,
    passage BIGINT NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (token, size, passage)
);"""

_T = 'TEXT COLLATE "C"'

#: The kind's migrations on PostgreSQL (``Kind.migrations("postgres")``):
#: append, never edit a shipped step.
MIGRATIONS: list[str] = [
    # 1: the index, as the SQLite engine's first step leaves it.
    f"""
CREATE TABLE dup_prefix{_PREFIX_COLUMNS}
CREATE TABLE dup_recent{_PREFIX_COLUMNS}
CREATE TABLE dup_folded(
    one INTEGER PRIMARY KEY CHECK (one = 1),
    passage_seq BIGINT NOT NULL
);
CREATE TABLE dup_members(
    namespace {_T} NOT NULL,
    passage {_T} NOT NULL,
    cluster {_T} NOT NULL,
    PRIMARY KEY (namespace, passage)
);
CREATE INDEX dup_members_cluster ON dup_members(namespace, cluster);
CREATE TABLE dup_indexed(
    namespace {_T} PRIMARY KEY,
    passage_seq BIGINT NOT NULL
);
""",
    # 2: which passages each settled item decided on (kept or released),
    # filled by the next scan of each namespace: a full one, as the
    # namespace is marked not indexed.
    f"""
DROP TABLE IF EXISTS dup_settled;
CREATE TABLE dup_settled(
    namespace {_T} NOT NULL,
    passage {_T} NOT NULL,
    item BIGINT NOT NULL,
    PRIMARY KEY (namespace, passage, item)
);
DELETE FROM dup_indexed;
""",
    # 3: the fold's one row exists from the start, so a scan that folds
    # locks it (and a scan of another namespace meanwhile skips its fold)
    # rather than inserting it (which makes the other wait for its commit).
    "INSERT INTO dup_folded(one, passage_seq) VALUES (1, 0) ON CONFLICT DO NOTHING;",
]


#: From this many prefix rows on, :meth:`PostgresPrefixIndex.add` sends them
#: by binary COPY rather than in one INSERT of arrays.
COPY_ROWS = 20_000

#: Prefix tokens per probing query (bounds the statement's size).
PROBE_TOKENS = 100_000

_INSERT = (
    "INSERT INTO {table}(token, size, passage, pos) "
    "SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::bigint[], %s::integer[]) "
    "ON CONFLICT DO NOTHING"
)

# A binary COPY stream: its signature, flags and header extension, then per
# row a field count and each field as its length and big-endian value.
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
_COPY_ROW = [
    ("fields", ">i2"),
    ("token_len", ">i4"),
    ("token", ">i8"),
    ("size_len", ">i4"),
    ("size", ">i4"),
    ("passage_len", ">i4"),
    ("passage", ">i8"),
    ("pos_len", ">i4"),
    ("pos", ">i4"),
]


def _probe_sql() -> str:
    """Candidates of a batch of new passages, from both prefix tables: a
    row per probing passage, its seq and its candidates' (an array, in
    order; one row a candidate cost more to read than to find).

    Parameters: the indexed prefix tokens of every probing passage, laid
    end to end (an array), then five arrays of one element per probing
    passage x: x's seq, |x|, the smallest size that can reach the
    threshold (ceil(t|x|)), and where its tokens begin and end in the
    first array (1-based, inclusive). The bounds are the SQLite probe's,
    term for term (its docstring derives them): a passage y is a candidate
    of x when two of x's prefix tokens (one when |x| = 1) meet, in y's
    prefix, the size range read off the index key and the position bound.

    Each token is looked up by its own index range scan (a LATERAL
    subquery that ``OFFSET 0`` keeps from being flattened): once the tables
    are analysed, the planner would otherwise hash the whole of
    ``dup_prefix`` for a few thousand look-ups, some thirty times slower.
    The rows found are counted passage by passage (a subquery per probing
    passage): a few thousand rows sorted at a time, where one sort of the
    whole batch's (600,000 rows for 128 passages of look-alike notes) took
    half the probe's time.
    """
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    rows = " UNION ALL ".join(
        f"""SELECT d.passage
            FROM unnest((SELECT tokens FROM t)[x.first:x.last]) WITH ORDINALITY AS q(token, at)
            CROSS JOIN LATERAL (
                SELECT passage FROM {table}
                WHERE token = q.token
                  AND size BETWEEN x.low AND ({den} * x.size - {num + den} * (q.at - 2)) / {num}
                  AND {den} * size - {num + den} * (pos - 1) >= {num} * x.size
                  AND passage <> x.seq
                OFFSET 0) d"""
        for table in PREFIX_TABLES
    )
    return (
        "WITH t(tokens) AS (SELECT %s::bigint[]) "
        f"SELECT x.seq, ARRAY(SELECT passage FROM ({rows}) u "
        "GROUP BY passage HAVING count(*) >= LEAST(2, x.size) ORDER BY passage) "
        "FROM unnest(%s::bigint[], %s::integer[], %s::integer[], %s::integer[], %s::integer[]"
        ") AS x(seq, size, low, first, last)"
    )


_PROBE = _probe_sql()

#: :data:`SET_INDEXED` with psycopg's placeholders (sent with the fold's look-up).
_INDEXED = SET_INDEXED.replace("?", "%s")
#: The last fold's clock, its row locked unless another writer holds it.
_FOLDED = "SELECT passage_seq FROM dup_folded WHERE one = 1 FOR UPDATE SKIP LOCKED"


def _array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers (cast in the statement)."""
    return "{" + ",".join(map(str, values)) + "}"


def _probe_params(batch: Sequence[Prefix]) -> tuple[str, ...]:
    """:data:`_PROBE`'s parameters for a batch of passages: their prefix
    tokens end to end, and each passage's number, size, least partner size
    and the span of its tokens."""
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    tokens = array("q")
    seqs: list[int] = []
    sizes: list[int] = []
    lows: list[int] = []
    firsts: list[int] = []
    lasts: list[int] = []
    for seq, size, piece in batch:
        seqs.append(seq)
        sizes.append(size)
        lows.append(-((-num * size) // den))  # ceil(t * size)
        firsts.append(len(tokens) + 1)
        tokens.extend(prefix_tokens(piece))
        lasts.append(len(tokens))
    return tuple(_array(p) for p in (tokens, seqs, sizes, lows, firsts, lasts))


class PostgresPrefixIndex(SqlPrefixIndex):
    """:class:`memors_kinds.duplicate.index.PrefixIndex` on the store's SQL
    handle (``tx.native("sql")``; ``conn``: its psycopg connection, in
    autocommit mode, inside the store's transaction)."""

    # --- the prefix rows ------------------------------------------------------------

    def add(self, prefixes: Sequence[Prefix], *, recent: bool) -> None:
        """Prefix rows for ``(seq, size, prefix bytes)`` passages: an
        incremental scan's few in one INSERT; a full scan's batch by binary
        COPY, in a savepoint so that a row indexed already (which COPY
        cannot skip) only sends the batch again as an INSERT that skips it."""
        if not prefixes:
            return
        table = "dup_recent" if recent else "dup_prefix"
        if sum(len(piece) // 8 for _r, _s, piece in prefixes) < COPY_ROWS:
            self._insert(table, [list(c) for c in zip(*few_rows(prefixes), strict=True)])
            return
        columns = many_rows(prefixes)
        self.conn.execute("SAVEPOINT dup_copy")
        try:
            self._copy(table, columns)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != "23505":  # unique_violation
                raise
            self.conn.execute("ROLLBACK TO SAVEPOINT dup_copy")
            self.conn.execute("RELEASE SAVEPOINT dup_copy")
            step = 200_000  # bounded statements
            for a in range(0, len(columns[0]), step):
                self._insert(table, [c[a : a + step].tolist() for c in columns])
        else:
            self.conn.execute("RELEASE SAVEPOINT dup_copy")

    def _insert(self, table: str, columns: Sequence[list[int]]) -> None:
        self.conn.execute(_INSERT.format(table=table), tuple(_array(c) for c in columns))

    def _copy(self, table: str, columns: tuple[np.ndarray, ...]) -> None:
        import numpy as np

        tokens, sizes, owners, positions = columns
        row = np.dtype(_COPY_ROW)
        step = 200_000  # bounded memory: the stream is built a slice at a time
        with (
            self.conn.cursor() as cur,
            cur.copy(f"COPY {table}(token, size, passage, pos) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.write(_COPY_HEADER)
            for a in range(0, len(tokens), step):
                part = slice(a, a + step)
                rows = np.empty(len(tokens[part]), dtype=row)
                rows["fields"] = 4
                rows["token_len"], rows["token"] = 8, tokens[part]
                rows["size_len"], rows["size"] = 4, sizes[part]
                rows["passage_len"], rows["passage"] = 8, owners[part]
                rows["pos_len"], rows["pos"] = 4, positions[part]
                copy.write(rows.tobytes())
            copy.write(_COPY_TRAILER)

    def fold(self, head: int, *, force: bool) -> None:
        """Move ``dup_recent`` into ``dup_prefix`` (in key order) and note
        where the fold happened; unless ``force``, only once the passages
        since the last fold reach 1/FOLD_RATIO of those before it (clock
        values stand in for counts). A fold only makes look-ups faster:
        while a writer of another namespace folds (its transaction holds
        the row), this one skips it rather than wait."""
        self._fold(head, force, self.conn.execute(_FOLDED))

    def advance(self, namespace: str, head: int) -> None:
        """The namespace's clock noted with the fold's look-up, in one message."""
        cur = self.conn.execute(f"{_INDEXED}; {_FOLDED}", (namespace, head))
        cur.nextset()  # (past the clock's)
        self._fold(head, False, cur)

    def _fold(self, head: int, force: bool, folded: Any) -> None:
        """The fold, given the cursor on :data:`_FOLDED`'s answer; its three
        statements in one message."""
        row = folded.fetchone()
        if row is None:
            return
        if not force and (head - row[0]) * FOLD_RATIO <= row[0]:
            return
        self.conn.execute(
            "INSERT INTO dup_prefix(token, size, passage, pos) "
            "SELECT token, size, passage, pos FROM dup_recent ORDER BY token, size, passage "
            "ON CONFLICT DO NOTHING; "
            "DELETE FROM dup_recent; "
            "INSERT INTO dup_folded(one, passage_seq) VALUES (1, %s) "
            "ON CONFLICT(one) DO UPDATE SET passage_seq = excluded.passage_seq",
            (head,),
        )

    def candidates(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        """One query per batch of up to PROBE_TOKENS prefix tokens (an
        incremental scan's passages are usually one batch)."""
        out: dict[int, list[int]] = {}
        batch: list[Prefix] = []
        tokens = 0
        for prefix in prefixes:
            batch.append(prefix)
            tokens += len(prefix[2]) // 8
            if tokens >= PROBE_TOKENS:
                self._probe(batch, out)
                batch, tokens = [], 0
        if batch:
            self._probe(batch, out)
        return out

    def add_and_find(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        """An incremental scan's few passages inserted and probed in one
        message (the probe, after the insert, finds them too): a round trip
        less a compaction; many go as :meth:`add` and :meth:`candidates` do."""
        rows = sum(len(piece) // 8 for _r, _s, piece in prefixes)
        if not rows or rows >= min(COPY_ROWS, PROBE_TOKENS):
            self.add(prefixes, recent=True)
            return self.candidates(prefixes)
        columns = [list(c) for c in zip(*few_rows(prefixes), strict=True)]
        cur = self.conn.execute(
            f"{_INSERT.format(table='dup_recent')}; {_PROBE}",
            (*(_array(c) for c in columns), *_probe_params(prefixes)),
        )
        cur.nextset()  # (past the insert's)
        return {seq: passages for seq, passages in cur if passages}

    def _probe(self, batch: Sequence[Prefix], out: dict[int, list[int]]) -> None:
        for seq, passages in self.conn.execute(_PROBE, _probe_params(batch)):
            if passages:
                out[seq] = passages

    def remember_clusters(self, namespace: str, clusters: Iterable[Sequence[str]]) -> None:
        """One statement per 100,000 members; a passage named twice keeps
        its last cluster, as a replacing insert would."""
        rows = {member: members[0] for members in clusters for member in members}
        items = sorted(rows.items())
        for a in range(0, len(items), 100_000):
            part = items[a : a + 100_000]
            self.conn.execute(
                "INSERT INTO dup_members(namespace, passage, cluster) "
                "SELECT %s, * FROM unnest(%s::text[], %s::text[]) "
                "ON CONFLICT(namespace, passage) DO UPDATE SET cluster = excluded.cluster",
                (namespace, [p for p, _c in part], [c for _p, c in part]),
            )
