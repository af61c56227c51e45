"""What the duplicate kind's prefix index does the same on both SQL engines,
written once: the statements in SQLite's spelling, run through the
store's SQL handle (``tx.native("sql")``, which renders them for
PostgreSQL), and the rows a batch of prefixes makes.

Each engine's module (:mod:`.sqlite_index`, :mod:`.postgres_index`) adds
its tables' migrations and what it does its own way: loading the prefix
rows, the fold and the probe.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memors_kinds.duplicate.index import Prefix

if TYPE_CHECKING:
    import numpy as np

PREFIX_TABLES = ("dup_prefix", "dup_recent")
FOLD_RATIO = 8
#: How far a namespace is indexed, noted (:meth:`SqlPrefixIndex.set_indexed`).
SET_INDEXED = (
    "INSERT INTO dup_indexed(namespace, passage_seq) VALUES (?, ?) "
    "ON CONFLICT(namespace) DO UPDATE SET passage_seq = excluded.passage_seq"
)


def tokens(piece: bytes) -> array[int]:
    """A prefix's uint64 tokens read as int64: exactly SQLite's signed
    integers and PostgreSQL's BIGINT values."""
    head = array("q")
    head.frombytes(piece)
    return head


def few_rows(prefixes: Sequence[Prefix]) -> list[tuple[int, int, int, int]]:
    """The prefix rows ``(token, size, passage, pos)`` of a few ``(seq,
    size, prefix bytes)`` passages, in key order (without numpy, whose
    import alone costs more than an incremental scan's few rows)."""
    return sorted(
        (tok, size, seq, pos)
        for seq, size, piece in prefixes
        for pos, tok in enumerate(tokens(piece))
    )


def many_rows(prefixes: Sequence[Prefix]) -> tuple[np.ndarray, ...]:
    """The prefix rows of a full scan's batch, as :func:`few_rows` gives
    them, in four numpy columns: B-tree inserts in key order touch each
    page once."""
    import numpy as np

    counts = np.fromiter((len(piece) // 8 for _r, _s, piece in prefixes), dtype=np.int64)
    toks = np.frombuffer(b"".join(piece for _r, _s, piece in prefixes), dtype="<i8")
    owners = np.repeat(np.fromiter((r for r, _s, _p in prefixes), dtype=np.int64), counts)
    sizes = np.repeat(np.fromiter((s for _r, s, _p in prefixes), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.arange(len(toks), dtype=np.int64) - starts
    order = np.lexsort((owners, sizes, toks))
    return toks[order], sizes[order], owners[order], positions[order]


class SqlPrefixIndex:
    """The statements of :class:`memors_kinds.duplicate.index.PrefixIndex`
    both engines share, on the store's SQL handle (``tx.native("sql")``)."""

    def __init__(self, sql: Any) -> None:
        self.sql = sql
        #: The engine's own connection (what an engine does its own way).
        self.conn = sql.conn

    # --- how far each namespace is indexed ------------------------------------------

    def indexed(self, namespace: str) -> int | None:
        seq: int | None = self.sql.scalar(
            "SELECT passage_seq FROM dup_indexed WHERE namespace = ?", (namespace,)
        )
        return seq

    def set_indexed(self, namespace: str, seq: int) -> None:
        self.sql.execute(SET_INDEXED, (namespace, seq))

    # --- the clusters of the last scan ------------------------------------------------

    def clusters_holding(
        self, namespace: str, passages: Iterable[str]
    ) -> tuple[set[str], set[str]]:
        rows = self.sql.all(
            "SELECT cluster, passage FROM dup_members WHERE namespace = ?1 AND cluster IN "
            "(SELECT cluster FROM dup_members WHERE namespace = ?1 "
            "AND passage IN (SELECT value FROM json_each(?2)))",
            (namespace, json.dumps(sorted(passages))),
        )
        return {r[0] for r in rows}, {r[1] for r in rows}

    def forget_clusters(self, namespace: str, clusters: Iterable[str] | None = None) -> None:
        if clusters is None:
            self.sql.execute("DELETE FROM dup_members WHERE namespace = ?", (namespace,))
            return
        self.sql.execute(
            "DELETE FROM dup_members WHERE namespace = ? AND cluster IN "
            "(SELECT value FROM json_each(?))",
            (namespace, json.dumps(sorted(clusters))),
        )

    # --- what settled items decided on ---------------------------------------------

    def settle(self, namespace: str, item: int, passages: Iterable[str]) -> None:
        self.sql.execute(
            "INSERT OR IGNORE INTO dup_settled(namespace, passage, item) "
            "SELECT ?, value, ? FROM json_each(?)",
            (namespace, item, json.dumps(sorted(set(passages)))),
        )

    def settled(self, namespace: str, passages: Iterable[str]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for passage, item in self.sql.all(
            "SELECT passage, item FROM dup_settled WHERE namespace = ? "
            "AND passage IN (SELECT value FROM json_each(?))",
            (namespace, json.dumps(sorted(passages))),
        ):
            out.setdefault(passage, set()).add(item)
        return out

    def forget_settled(self, namespace: str) -> None:
        self.sql.execute("DELETE FROM dup_settled WHERE namespace = ?", (namespace,))

    # --- purge -----------------------------------------------------------------------

    def erase(self, passages: Sequence[tuple[int, str]]) -> None:
        """A purged passage's prefix tokens are hashes of its words: its rows
        go from both prefix tables (one pass over each: purge is rare, and
        the passage's shingles are not needed to find them), and it leaves
        its cluster and the settlements that named it."""
        if not passages:
            return
        seqs = json.dumps(sorted(seq for seq, _ident in passages))
        for table in PREFIX_TABLES:
            self.sql.execute(
                f"DELETE FROM {table} WHERE passage IN "
                "(SELECT CAST(value AS BIGINT) FROM json_each(?))",
                (seqs,),
            )
        idents = json.dumps(sorted(ident for _seq, ident in passages))
        for table in ("dup_members", "dup_settled"):
            self.sql.execute(
                f"DELETE FROM {table} WHERE passage IN (SELECT value FROM json_each(?))", (idents,)
            )
