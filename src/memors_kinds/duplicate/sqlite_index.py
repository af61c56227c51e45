"""The duplicate kind's prefix index on SQLite: its tables, their
migrations and what SQLite does its own way (loading the prefix rows, the
fold, the probe); the statements both engines share are
:mod:`memors_kinds.duplicate.sql_index`'s.

The tables sit beside the store's own and are reached through the escape
hatch ``tx.native("sql")`` (its ``conn``: the apsw connection); nothing
here reads a core table.

``dup_prefix`` and ``dup_recent`` — each passage's prefix under the *fixed*
token order (token value: content-word 3-grams first, see
:func:`memors_core.domain.text.shingle_hashes`), keyed by token and size, so
a new passage finds every passage it can reach Jaccard >= 0.75 with by a
few index range look-ups. A full scan indexes into ``dup_prefix``; an
incremental one into the small ``dup_recent``, whose inserts touch few pages
(a token-ordered insert into the big index dirties most of its pages),
folded into ``dup_prefix`` once the passages since the last fold
(``dup_folded``) reach 1/``FOLD_RATIO`` of those before it. ``passage`` is
the passage's ``seq``. ``dup_members`` — the clusters of the last scan;
``dup_indexed`` — up to which passage ``seq`` each namespace is indexed;
``dup_settled`` — the passages each settled item kept or released.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from memors_kinds.duplicate.index import Prefix
from memors_kinds.duplicate.join import THRESHOLD
from memors_kinds.duplicate.sql_index import (
    FOLD_RATIO,
    PREFIX_TABLES,
    SqlPrefixIndex,
    few_rows,
    many_rows,
    tokens,
)

_PREFIX_COLUMNS = """(
    token INTEGER NOT NULL,
    size INTEGER NOT NULL,
    passage INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (token, size, passage)
) WITHOUT ROWID;"""

#: The kind's migrations on SQLite (``Kind.migrations("sqlite")``): append,
#: never edit a shipped step.
MIGRATIONS: list[str] = [
    # 1: the index afresh. A store indexed before migrations were recorded
    # (whichever layout its release used) drops it: the index is derived
    # state, and the next scan of each namespace, a full one, rebuilds it.
    f"""
DROP TABLE IF EXISTS dup_prefix;
DROP TABLE IF EXISTS dup_recent;
DROP TABLE IF EXISTS dup_folded;
DROP TABLE IF EXISTS dup_members;
DROP TABLE IF EXISTS dup_indexed;
CREATE TABLE dup_prefix{_PREFIX_COLUMNS}
CREATE TABLE dup_recent{_PREFIX_COLUMNS}
CREATE TABLE dup_folded(
    one INTEGER PRIMARY KEY CHECK (one = 1),
    passage_seq INTEGER NOT NULL
);
CREATE TABLE dup_members(
    namespace TEXT NOT NULL,
    passage TEXT NOT NULL,
    cluster TEXT NOT NULL,
    PRIMARY KEY (namespace, passage)
) WITHOUT ROWID;
CREATE INDEX dup_members_cluster ON dup_members(namespace, cluster);
CREATE TABLE dup_indexed(
    namespace TEXT PRIMARY KEY,
    passage_seq INTEGER NOT NULL
) WITHOUT ROWID;
""",
    # 2: which passages each settled item decided on (kept or released),
    # filled by the next scan of each namespace: a full one, as the
    # namespace is marked not indexed.
    """
DROP TABLE IF EXISTS dup_settled;
CREATE TABLE dup_settled(
    namespace TEXT NOT NULL,
    passage TEXT NOT NULL,
    item INTEGER NOT NULL,
    PRIMARY KEY (namespace, passage, item)
) WITHOUT ROWID;
DELETE FROM dup_indexed;
""",
]


def _probe_sql() -> str:
    """Candidates of one new passage x, from both prefix tables.

    Parameters: ?1 x's indexed prefix (a JSON array of signed tokens, in
    order), ?2 the smallest size that can reach the threshold, ceil(t|x|),
    ?3 |x|, ?4 x's seq.

    A pair (x, y) with Jaccard >= t = num/den shares at least
    a = t(|x| + |y|) / (1 + t) tokens. Take its first two common tokens in
    the fixed order, at positions i1 < i2 in x and j1 < j2 in y: every other
    common token comes after them, so a <= |x| - i2 + 1 and a <= |y| - j2 + 1.
    Both tokens therefore meet den|x| - (num+den)(i - 1) >= num|y| (a range of
    y's size per probing token, read straight off the index key) and
    den|y| - (num+den)(j - 1) >= num|x| (which keeps them inside y's indexed
    prefix of |y| - ceil(t|y|) + 2 tokens). A candidate is a passage with two
    such rows — one when |x| = 1, the only size where a = 1. Every qualifying
    pair passes, so none is missed; requiring two shared prefix tokens
    rather than one drops almost every chance match on one common 3-gram.
    """
    num, den = THRESHOLD.numerator, THRESHOLD.denominator
    rows = " UNION ALL ".join(
        f"""SELECT d.passage FROM json_each(?1) j CROSS JOIN {table} d
            ON d.token = j.value
               AND d.size BETWEEN ?2 AND ({den} * ?3 - {num + den} * (j.key - 1)) / {num}
            WHERE {den} * d.size - {num + den} * (d.pos - 1) >= {num} * ?3
              AND d.passage <> ?4"""
        for table in PREFIX_TABLES
    )
    return f"SELECT passage FROM ({rows}) GROUP BY passage HAVING count(*) >= min(2, ?3)"


_PROBE = _probe_sql()


class SqlitePrefixIndex(SqlPrefixIndex):
    """:class:`memors_kinds.duplicate.index.PrefixIndex` on the store's SQL
    handle (``tx.native("sql")``; ``conn``: its apsw connection, inside the
    store's transaction)."""

    # --- the prefix rows ------------------------------------------------------------

    def add(self, prefixes: Sequence[Prefix], *, recent: bool) -> None:
        """Prefix rows for ``(seq, size, prefix bytes)`` passages, in key order."""
        if not prefixes:
            return
        table = "dup_recent" if recent else "dup_prefix"
        insert = f"INSERT OR IGNORE INTO {table}(token, size, passage, pos) VALUES (?, ?, ?, ?)"
        if len(prefixes) < 20_000:  # an incremental scan's few: no need for numpy
            self.conn.executemany(insert, few_rows(prefixes))
            return
        columns = many_rows(prefixes)
        step = 200_000  # bounded memory: Python ints are made a slice at a time
        for a in range(0, len(columns[0]), step):
            self.conn.executemany(
                insert, zip(*(c[a : a + step].tolist() for c in columns), strict=True)
            )

    def fold(self, head: int, *, force: bool) -> None:
        """Move ``dup_recent`` into ``dup_prefix`` (in key order: each page of
        the big index is written once) and note where the fold happened; unless
        ``force``, only once the passages since the last fold reach
        1/FOLD_RATIO of those before it (clock values stand in for counts)."""
        if not force:
            folded = self.sql.scalar("SELECT passage_seq FROM dup_folded") or 0
            if (head - folded) * FOLD_RATIO <= folded:
                return
        self.conn.execute(
            "INSERT OR IGNORE INTO dup_prefix(token, size, passage, pos) "
            "SELECT token, size, passage, pos FROM dup_recent ORDER BY token, size, passage;"
            "DELETE FROM dup_recent;"
            "INSERT INTO dup_folded(one, passage_seq) VALUES (1, ?) "
            "ON CONFLICT(one) DO UPDATE SET passage_seq = excluded.passage_seq",
            (head,),
        )

    def add_and_find(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        self.add(prefixes, recent=True)
        return self.candidates(prefixes)

    def advance(self, namespace: str, head: int) -> None:
        self.set_indexed(namespace, head)
        self.fold(head, force=False)

    def candidates(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        num, den = THRESHOLD.numerator, THRESHOLD.denominator
        out: dict[int, list[int]] = {}
        for seq, size, piece in prefixes:
            head = tokens(piece)
            low = -((-num * size) // den)  # ceil(t * size)
            found = self.conn.execute(_PROBE, (json.dumps(head.tolist()), low, size, seq))
            got = [r[0] for r in found]
            if got:
                out[seq] = got
        return out

    def remember_clusters(self, namespace: str, clusters: Iterable[Sequence[str]]) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO dup_members(namespace, passage, cluster) VALUES (?, ?, ?)",
            [(namespace, member, members[0]) for members in clusters for member in members],
        )
