"""Passages' vectors on SQLite, and the nearest ones to a question.

A vector is stored in a plain table (``passage_vectors``, schema 7) beside
its *code*, the signs of its 384 numbers as 48 bytes. A search compares the
question's code with every code of the namespace (the number of differing
bits, in memory: about 6 ms for 100,000 passages), keeps the
:func:`shortlist` closest, and ranks those by their exact cosine, read from
the table. The codes of a namespace are held by the connection
(:class:`CodeCache`) and kept whole at one lookup per search: when
``vector_stats`` says the namespace's vectors changed, the passages added
since are read, or, after a deletion, all codes again.

Why not sqlite-vec's ``vec0`` index: measured here at 100,000 passages, its
exact search takes 106 ms (its binary index 50 ms; the PyPI build has no
SIMD), and a trigger that touches a ``vec0`` table fails on every
connection that has not loaded the extension, so forgetting a passage
could not take its vector with it on a store opened without the extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memors_core.errors import MemorsError
from memors_core.semantic import DIMENSIONS
from memors_core.storage.sql.vectors import VECTOR_BYTES, SqlVectors

#: The closest codes whose exact cosine is read: at least this many, and at
#: least SHORTLIST_FACTOR x the hits asked for.
SHORTLIST_MIN = 400
SHORTLIST_FACTOR = 8


def shortlist(limit: int) -> int:
    return max(SHORTLIST_MIN, SHORTLIST_FACTOR * limit)


def code(vector: bytes) -> bytes:
    """A vector's code: one bit per number, set where it is positive."""
    import numpy as np

    return np.packbits(np.frombuffer(vector, dtype="<f4") > 0).tobytes()


class SqliteVectors(SqlVectors):
    """:class:`memors_core.storage.api.Vectors` on SQLite: the vector and its code."""

    COLUMNS = ("code", "vector")

    def _values(self, vector: bytes) -> tuple[Any, ...]:
        return (code(vector), vector)


class CodeCache:
    """One namespace's codes in memory, in passage order, and the
    ``vector_stats`` change count they reflect."""

    __slots__ = ("changes", "codes", "rowids")

    def __init__(self) -> None:
        import numpy as np

        self.changes = -1
        self.rowids = np.empty(0, dtype=np.int64)
        self.codes = np.empty((0, DIMENSIONS // 64), dtype=np.uint64)

    def sync(self, db: Any, namespace: str, count: int, changes: int) -> None:
        """Bring the codes to the store's (inside the caller's read). Every
        vector added or deleted counts one change: when the only changes
        since are vectors of passages newer than the newest kept, they are
        read and appended; after anything else (a vector deleted, one of an
        older passage added by ``reindex``) every code is read again."""
        if changes == self.changes:
            return
        select = "SELECT passage, code FROM passage_vectors WHERE namespace = ? AND passage > ? "
        if self.changes >= 0:
            after = int(self.rowids[-1]) if len(self.rowids) else 0
            rows = db.all(select + "ORDER BY passage", (namespace, after))
            if changes - self.changes == len(rows) and len(self.rowids) + len(rows) == count:
                self._append(rows)
                self.changes = changes
                return
        self.rowids = self.rowids[:0]
        self.codes = self.codes[:0]
        self._append(db.all(select + "ORDER BY passage", (namespace, 0)))
        self.changes = changes

    def _append(self, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        import numpy as np

        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        packed = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.uint64)
        self.rowids = np.concatenate([self.rowids, ids])
        self.codes = np.concatenate([self.codes, packed.reshape(len(rows), -1)])


def nearest(
    db: Any,
    caches: dict[str, CodeCache] | None,
    namespace: str,
    vector: bytes,
    limit: int,
    among: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """The ``limit`` passages of ``namespace`` (or of ``among``, passage
    rowids) whose vectors are closest to ``vector``: ``(rowid, cosine)``,
    best first. ``caches`` keeps the codes between searches (None: read
    them for this search only, as inside a write that may roll back)."""
    import numpy as np

    if not isinstance(vector, bytes | bytearray) or len(vector) != VECTOR_BYTES:
        raise MemorsError(f"a question's vector is {VECTOR_BYTES} bytes")
    stats = db.one("SELECT vectors, changes FROM vector_stats WHERE namespace = ?", (namespace,))
    if limit <= 0 or stats is None or stats[0] <= 0:
        return []
    cache = CodeCache() if caches is None else caches.setdefault(namespace, CodeCache())
    cache.sync(db, namespace, stats[0], stats[1])
    rowids, codes = cache.rowids, cache.codes
    if among is not None:
        wanted = np.unique(np.asarray(among, dtype=np.int64))
        at = np.searchsorted(rowids, wanted)
        inside = at < len(rowids)
        at = at[inside][rowids[at[inside]] == wanted[inside]]
        rowids, codes = rowids[at], codes[at]
    room = shortlist(limit)
    if len(rowids) > room:
        query = np.packbits(np.frombuffer(vector, dtype="<f4") > 0).view(np.uint64)
        differ = np.bitwise_count(codes ^ query).sum(axis=1, dtype=np.int32)
        rowids = rowids[np.argpartition(differ, room)[:room]]
    if not len(rowids):
        return []
    from memors_core.storage.sql.repo import json_list

    got = db.all(
        "SELECT passage, vector FROM passage_vectors "
        "WHERE passage IN (SELECT value FROM json_each(?))",
        (json_list(int(r) for r in rowids),),
    )
    if not got:
        return []
    matrix = np.frombuffer(b"".join(r[1] for r in got), dtype="<f4").reshape(len(got), -1)
    cosines = matrix @ np.frombuffer(vector, dtype="<f4")
    scored = sorted(
        ((int(r[0]), float(c)) for r, c in zip(got, cosines, strict=True)),
        key=lambda rc: (-rc[1], rc[0]),
    )
    return scored[:limit]
