"""Passages' vectors as both engines keep them (:class:`memors_core.storage.api.Vectors`).

``passage_vectors`` holds one row per live passage that has a vector (its
``passage`` is the passage's clock, the ``rowid``), and ``vector_stats``
counts each namespace's vectors. Triggers on both engines delete a vector
when a tombstone names its passage or purge erases the passage, and keep
the counts. An engine says in which columns a vector is stored
(:attr:`SqlVectors.COLUMNS`) and how (:meth:`SqlVectors._values`).
"""

from __future__ import annotations

from collections.abc import Iterable

from memors_core.errors import MemorsError
from memors_core.semantic import DIMENSIONS
from memors_core.storage.sql.records import live
from memors_core.storage.sql.repo import Repo

#: A vector's size in bytes: DIMENSIONS float32 numbers.
VECTOR_BYTES = 4 * DIMENSIONS

_MISSING = f"""FROM passages p
    WHERE p.namespace = ? AND {live("p")}
    AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage = p.rowid)"""


class SqlVectors(Repo):
    """:class:`memors_core.storage.api.Vectors`, given how an engine stores one vector."""

    #: The columns after ``(passage, namespace)`` that hold a vector.
    COLUMNS = ("vector",)
    #: Their values' placeholders (default: one ``?`` each).
    MARKS = ""

    def _values(self, vector: bytes) -> tuple:
        """The values of :attr:`COLUMNS` for one vector."""
        return (vector,)

    def add(self, namespace: str, vectors: Iterable[tuple[str, bytes]]) -> int:
        rows = []
        for ident, vector in vectors:
            if not isinstance(vector, bytes | bytearray) or len(vector) != VECTOR_BYTES:
                raise MemorsError(
                    f"a passage vector is {VECTOR_BYTES} bytes ({DIMENSIONS} float32 numbers)"
                )
            rows.append((*self._values(bytes(vector)), ident, namespace))
        if not rows:
            return 0
        before = self.count(namespace)
        marks = self.MARKS or ", ".join("?" for _ in self.COLUMNS)
        self.db.executemany(
            f"""INSERT OR IGNORE INTO passage_vectors(passage, namespace, {", ".join(self.COLUMNS)})
                SELECT p.rowid, p.namespace, {marks} FROM passages p
                WHERE p.id = ? AND p.namespace = ? AND {live("p")}""",
            rows,
        )
        return self.count(namespace) - before

    def missing(self, namespace: str, after: int, limit: int) -> list[tuple[int, str, str]]:
        return [
            (r[0], r[1], r[2])
            for r in self.all(
                f"SELECT p.rowid, p.id, p.text {_MISSING} AND p.rowid > ? ORDER BY p.rowid LIMIT ?",
                (namespace, after, limit),
            )
        ]

    def missing_count(self, namespace: str) -> int:
        return self.scalar(f"SELECT count(*) {_MISSING}", (namespace,))

    def any_waiting(self, namespace: str) -> bool:
        newest = self.scalar(
            "SELECT max(passage) FROM passage_vectors WHERE namespace = ?", (namespace,)
        )
        return (
            self.one(f"SELECT 1 {_MISSING} AND p.rowid > ? LIMIT 1", (namespace, newest or 0))
            is not None
        )

    def count(self, namespace: str) -> int:
        got = self.one("SELECT vectors FROM vector_stats WHERE namespace = ?", (namespace,))
        return got[0] if got else 0
