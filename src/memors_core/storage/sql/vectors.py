"""Passages' vectors as both engines keep them (:class:`memors_core.storage.api.Vectors`).

``passage_vectors`` holds one row per live passage that has a vector (its
``passage`` is the passage's clock, the ``rowid``), and ``vector_stats``
counts each namespace's vectors. Triggers on both engines delete a vector
when a tombstone names its passage or purge erases the passage, and keep
the counts. An engine says in which columns a vector is stored
(:attr:`SqlVectors.COLUMNS`) and how (:meth:`SqlVectors._values`). Each
vector records its ``kind`` (:data:`memors_core.semantic.KIND`: the model
and the form of its input); a passage whose vector is of another kind
counts as missing one, and its new vector replaces the old in place
(:meth:`SqlVectors._replace`), which search uses meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memors_core.errors import MemorsError
from memors_core.semantic import DIMENSIONS, KIND
from memors_core.storage.sql.records import live
from memors_core.storage.sql.repo import Repo, json_list

#: A vector's size in bytes: DIMENSIONS float32 numbers.
VECTOR_BYTES = 4 * DIMENSIONS

_MISSING = f"""FROM passages p
    WHERE p.namespace = ? AND {live("p")}
    AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage = p.rowid AND v.kind = ?)"""
_NO_VECTOR = f"""FROM passages p
    WHERE p.namespace = ? AND {live("p")}
    AND NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.passage = p.rowid)"""
#: The live passage a vector to store is for.
_PASSAGE = f"FROM passages p WHERE p.id = ? AND p.namespace = ? AND {live('p')}"


class SqlVectors(Repo):
    """:class:`memors_core.storage.api.Vectors`, given how an engine stores one vector."""

    #: The columns after ``(passage, namespace)`` that hold a vector.
    COLUMNS: tuple[str, ...] = ("vector",)
    #: Their values' placeholders (default: one ``?`` each).
    MARKS = ""

    def _values(self, vector: bytes) -> tuple[Any, ...]:
        """The values of :attr:`COLUMNS` for one vector."""
        return (vector,)

    def add(self, namespace: str, vectors: Iterable[tuple[str, bytes]], kind: str = KIND) -> int:
        rows = []
        for ident, vector in vectors:
            if not isinstance(vector, bytes | bytearray) or len(vector) != VECTOR_BYTES:
                raise MemorsError(
                    f"a passage vector is {VECTOR_BYTES} bytes ({DIMENSIONS} float32 numbers)"
                )
            rows.append((*self._values(bytes(vector)), kind, ident, namespace))
        if not rows:
            return 0
        idents = json_list(r[-2] for r in rows)
        before = self._of_kind(idents, kind)
        marks = self.MARKS or ", ".join("?" for _ in self.COLUMNS)
        self.db.executemany(
            f"""INSERT OR IGNORE INTO passage_vectors(passage, namespace, {", ".join(self.COLUMNS)},
                                                      kind)
                SELECT p.rowid, p.namespace, {marks}, ? {_PASSAGE}""",
            rows,
        )
        self._replace(rows)
        return self._of_kind(idents, kind) - before

    def _replace(self, rows: list[tuple[Any, ...]]) -> None:
        """Give the passages of ``rows`` (``(*values, kind, passage id,
        namespace)``, as :meth:`add` binds them) that have a vector of
        another kind the new one, in place."""
        marks = (self.MARKS or ", ".join("?" for _ in self.COLUMNS)).split(",")
        sets = ", ".join(f"{c} = {m.strip()}" for c, m in zip(self.COLUMNS, marks, strict=True))
        self.db.executemany(
            f"""UPDATE passage_vectors SET {sets}, kind = ?
                WHERE kind <> ? AND passage = (SELECT p.rowid {_PASSAGE})""",
            [(*r[:-3], r[-3], r[-3], r[-2], r[-1]) for r in rows],
        )

    def _of_kind(self, idents: str, kind: str) -> int:
        """How many of the passages ``idents`` (a JSON list) have a vector of ``kind``."""
        return self.number(
            "SELECT count(*) FROM passage_vectors v JOIN passages p ON p.rowid = v.passage "
            "WHERE p.id IN (SELECT value FROM json_each(?)) AND v.kind = ?",
            (idents, kind),
        )

    def missing(
        self, namespace: str, after: int, limit: int, kind: str = KIND
    ) -> list[tuple[int, str, str]]:
        return [
            (r[0], r[1], r[2])
            for r in self.all(
                f"SELECT p.rowid, p.id, p.text {_MISSING} AND p.rowid > ? ORDER BY p.rowid LIMIT ?",
                (namespace, kind, after, limit),
            )
        ]

    def missing_count(self, namespace: str, kind: str = KIND) -> int:
        return self.number(f"SELECT count(*) {_MISSING}", (namespace, kind))

    def any_waiting(self, namespace: str) -> bool:
        # (one statement, planned once per connection: a hybrid search asks
        # on every call, and its two look-ups took two round trips)
        return (
            self.planned_one(
                f"SELECT 1 {_NO_VECTOR} AND p.rowid > coalesce((SELECT max(v.passage) "
                "FROM passage_vectors v WHERE v.namespace = ?), 0) LIMIT 1",
                (namespace, namespace),
            )
            is not None
        )

    def count(self, namespace: str) -> int:
        got = self.planned_one("SELECT vectors FROM vector_stats WHERE namespace = ?", (namespace,))
        return got[0] if got else 0
