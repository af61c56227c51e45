"""The duplicate kind's prefix index on PostgreSQL: its tables, their
migrations and every statement over them (:class:`PrefixIndex`).

The tables and their meaning are those of
:mod:`memors_kinds.duplicate.sqlite_index` (``dup_prefix`` and the small
``dup_recent`` folded into it once it reaches 1/``FOLD_RATIO`` of the
passages before it, ``dup_folded``, ``dup_members``, ``dup_indexed``, ``dup_settled``),
reached through ``tx.native("postgres")``: the store's psycopg connection,
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

PREFIX_TABLES = ("dup_prefix", "dup_recent")
FOLD_RATIO = 8

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
    """Candidates of a batch of new passages, from both prefix tables, as
    ``(probing seq, candidate seq)`` rows.

    Parameters: five arrays, one element per indexed prefix token of each
    probing passage x: x's seq, |x|, the smallest size that can reach the
    threshold (ceil(t|x|)), the token, and its 0-based position in x's
    prefix. The bounds are the SQLite probe's, term for term (its docstring
    derives them): a passage y is a candidate of x when two of x's prefix
    tokens (one when |x| = 1) meet, in y's prefix, the size range read off
    the index key and the position bound.

    Each token is looked up by its own index range scan (a LATERAL
    subquery that ``OFFSET 0`` keeps from being flattened): once the tables
    are analysed, the planner would otherwise hash the whole of
    ``dup_prefix`` for a few thousand look-ups, some thirty times slower.
    """
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    rows = " UNION ALL ".join(
        f"""SELECT q.seq, q.size, d.passage FROM q CROSS JOIN LATERAL (
                SELECT passage FROM {table}
                WHERE token = q.token
                  AND size BETWEEN q.low AND ({den} * q.size - {num + den} * (q.pos - 1)) / {num}
                  AND {den} * size - {num + den} * (pos - 1) >= {num} * q.size
                  AND passage <> q.seq
                OFFSET 0) d"""
        for table in PREFIX_TABLES
    )
    return (
        "WITH q(seq, size, low, token, pos) AS (SELECT * FROM unnest("
        "%s::bigint[], %s::integer[], %s::integer[], %s::bigint[], %s::integer[])) "
        f"SELECT seq, passage FROM ({rows}) c GROUP BY seq, size, passage "
        "HAVING count(*) >= LEAST(2, size) ORDER BY seq, passage"
    )


_PROBE = _probe_sql()


def _array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers (cast in the statement)."""
    return "{" + ",".join(map(str, values)) + "}"


def _tokens(piece: bytes) -> array:
    """A prefix's uint64 tokens read as int64: exactly PostgreSQL's BIGINT values."""
    head = array("q")
    head.frombytes(piece)
    return head


def _few_rows(prefixes: Sequence[Prefix]) -> list[list[int]]:
    """The prefix rows of a few ``(seq, size, prefix bytes)`` passages as
    four columns (token, size, passage, pos), in key order (without numpy,
    whose import alone costs more than an incremental scan's few rows)."""
    rows = sorted(
        (tok, size, seq, pos)
        for seq, size, piece in prefixes
        for pos, tok in enumerate(_tokens(piece))
    )
    return [list(column) for column in zip(*rows, strict=True)]


def _many_rows(prefixes: Sequence[Prefix]) -> tuple[np.ndarray, ...]:
    """The prefix rows of a full scan's batch, as :func:`_few_rows` gives
    them, in numpy arrays: B-tree inserts in key order touch each page once."""
    import numpy as np

    counts = np.fromiter((len(piece) // 8 for _r, _s, piece in prefixes), dtype=np.int64)
    tokens = np.frombuffer(b"".join(piece for _r, _s, piece in prefixes), dtype="<i8")
    owners = np.repeat(np.fromiter((r for r, _s, _p in prefixes), dtype=np.int64), counts)
    sizes = np.repeat(np.fromiter((s for _r, s, _p in prefixes), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.arange(len(tokens), dtype=np.int64) - starts
    order = np.lexsort((owners, sizes, tokens))
    return tokens[order], sizes[order], owners[order], positions[order]


class PostgresPrefixIndex:
    """:class:`memors_kinds.duplicate.index.PrefixIndex` on one psycopg
    connection (the store's, in autocommit mode, inside its transaction)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def _scalar(self, sql: str, params: tuple = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    # --- how far each namespace is indexed ------------------------------------------

    def indexed(self, namespace: str) -> int | None:
        return self._scalar(
            "SELECT passage_seq FROM dup_indexed WHERE namespace = %s", (namespace,)
        )

    def set_indexed(self, namespace: str, seq: int) -> None:
        self.conn.execute(
            "INSERT INTO dup_indexed(namespace, passage_seq) VALUES (%s, %s) "
            "ON CONFLICT(namespace) DO UPDATE SET passage_seq = excluded.passage_seq",
            (namespace, seq),
        )

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
            self._insert(table, _few_rows(prefixes))
            return
        columns = _many_rows(prefixes)
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
        row = self.conn.execute(
            "SELECT passage_seq FROM dup_folded WHERE one = 1 FOR UPDATE SKIP LOCKED"
        ).fetchone()
        if row is None:
            return
        if not force and (head - row[0]) * FOLD_RATIO <= row[0]:
            return
        self.conn.execute(
            "INSERT INTO dup_prefix(token, size, passage, pos) "
            "SELECT token, size, passage, pos FROM dup_recent ORDER BY token, size, passage "
            "ON CONFLICT DO NOTHING"
        )
        self.conn.execute("DELETE FROM dup_recent")
        self.conn.execute(
            "INSERT INTO dup_folded(one, passage_seq) VALUES (1, %s) "
            "ON CONFLICT(one) DO UPDATE SET passage_seq = excluded.passage_seq",
            (head,),
        )

    def candidates(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        """One query per batch of up to PROBE_TOKENS prefix tokens (an
        incremental scan's passages are usually one batch)."""
        num, den = THRESHOLD.numerator, THRESHOLD.denominator
        out: dict[int, list[int]] = {}
        batch: list[Prefix] = []
        tokens = 0
        for prefix in prefixes:
            batch.append(prefix)
            tokens += len(prefix[2]) // 8
            if tokens >= PROBE_TOKENS:
                self._probe(batch, num, den, out)
                batch, tokens = [], 0
        if batch:
            self._probe(batch, num, den, out)
        return out

    def _probe(
        self, batch: Sequence[Prefix], num: int, den: int, out: dict[int, list[int]]
    ) -> None:
        seqs: list[int] = []
        sizes: list[int] = []
        lows: list[int] = []
        tokens = array("q")
        positions: list[int] = []
        for seq, size, piece in batch:
            head = _tokens(piece)
            n = len(head)
            seqs += [seq] * n
            sizes += [size] * n
            lows += [-((-num * size) // den)] * n  # ceil(t * size)
            tokens.extend(head)
            positions.extend(range(n))
        params = (seqs, sizes, lows, tokens, positions)
        for seq, passage in self.conn.execute(_PROBE, tuple(_array(p) for p in params)):
            out.setdefault(seq, []).append(passage)

    # --- the clusters of the last scan ------------------------------------------------

    def clusters_of(self, namespace: str, passages: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.conn.execute(
                "SELECT DISTINCT cluster FROM dup_members "
                "WHERE namespace = %s AND passage = ANY(%s::text[])",
                (namespace, sorted(passages)),
            )
        }

    def members_of(self, namespace: str, clusters: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.conn.execute(
                "SELECT passage FROM dup_members WHERE namespace = %s AND cluster = ANY(%s::text[])",
                (namespace, sorted(clusters)),
            )
        }

    def forget_clusters(self, namespace: str, clusters: Iterable[str] | None = None) -> None:
        if clusters is None:
            self.conn.execute("DELETE FROM dup_members WHERE namespace = %s", (namespace,))
            return
        self.conn.execute(
            "DELETE FROM dup_members WHERE namespace = %s AND cluster = ANY(%s::text[])",
            (namespace, sorted(clusters)),
        )

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

    # --- what settled items decided on ---------------------------------------------

    def settle(self, namespace: str, item: int, passages: Iterable[str]) -> None:
        self.conn.execute(
            "INSERT INTO dup_settled(namespace, passage, item) "
            "SELECT %s, p, %s FROM unnest(%s::text[]) AS p ON CONFLICT DO NOTHING",
            (namespace, item, sorted(set(passages))),
        )

    def settled(self, namespace: str, passages: Iterable[str]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for passage, item in self.conn.execute(
            "SELECT passage, item FROM dup_settled WHERE namespace = %s AND passage = ANY(%s::text[])",
            (namespace, sorted(passages)),
        ):
            out.setdefault(passage, set()).add(item)
        return out

    def forget_settled(self, namespace: str) -> None:
        self.conn.execute("DELETE FROM dup_settled WHERE namespace = %s", (namespace,))

    # --- purge -----------------------------------------------------------------------

    def erase(self, passages: Sequence[tuple[int, str]]) -> None:
        """A purged passage's prefix tokens are hashes of its words: its rows
        go from both prefix tables (one pass over each: purge is rare, and
        the passage's shingles are not needed to find them), and it leaves
        its cluster and the settlements that named it."""
        if not passages:
            return
        seqs = sorted(seq for seq, _ident in passages)
        for table in PREFIX_TABLES:
            self.conn.execute(f"DELETE FROM {table} WHERE passage = ANY(%s::bigint[])", (seqs,))
        idents = sorted(ident for _seq, ident in passages)
        for table in ("dup_members", "dup_settled"):
            self.conn.execute(f"DELETE FROM {table} WHERE passage = ANY(%s::text[])", (idents,))
