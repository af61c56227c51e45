"""The four searches as both engines answer them; each engine ranks.

:class:`SqlSearch` turns an engine's ranking (``_rank``: the best rows of one
index, by :mod:`memors_core.domain.search`) into hits of each granularity.
An engine supplies ``_rank``, ``_rows`` (columns of the ranked rows),
``_stems`` (a page snippet's stems), ``_valid_at`` (the facts valid at a
time, as ``_rank``'s ``keep``), ``ALIASES`` (SQL: an entity ``e``'s
aliases, joined by `` ; ``) and, where it keeps vectors, ``_nearest``
(the passages closest to a vector).
"""

from __future__ import annotations

import functools

from memors_core.domain import search as rank
from memors_core.storage.sql.repo import Repo, json_list

TYPE_CHECKING = False  # (not typing's: this module is on ``memors-mcp search``'s lean path)
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    T = TypeVar("T")

# The kinds of indexed rows, as both engines' indexes name them.
PASSAGE, PAGE, FACT, ENTITY = "p", "g", "f", "e"
#: SQL: passage ``p`` has no tombstone (``records.live``, which this lean module does not import).
LIVE = "NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = p.id)"

#: The live passages just before and after each of a list of passages
#: (``json_each`` of their ids) in their namespace: id, before, after. The
#: passages read come first, each found by its id: ``s.id IN (…) AND
#: s.namespace = ?`` let SQLite walk the whole namespace instead (38 ms for
#: 50 passages of 20,000, against 0.2 ms).
BESIDE = f"""SELECT s.id,
       (SELECT p.id FROM passages p WHERE p.namespace = s.namespace
        AND p.rowid < s.rowid AND {LIVE} ORDER BY p.rowid DESC LIMIT 1),
       (SELECT p.id FROM passages p WHERE p.namespace = s.namespace
        AND p.rowid > s.rowid AND {LIVE} ORDER BY p.rowid LIMIT 1)
    FROM (SELECT DISTINCT value FROM json_each(?)) j
    CROSS JOIN passages s ON s.id = j.value
    WHERE s.namespace = ?"""


class SqlSearch(Repo):
    """:class:`memors_core.storage.api.Search`, given an engine's ranking."""

    ALIASES = ""

    def passages(self, namespace: str, query: str | rank.SearchQuery, limit: int) -> rank.Ranked:
        ranked = self._rank(PASSAGE, namespace, rank.as_query(query), limit)
        rows = self._rows("SELECT rowid, id, text FROM passages", ranked)
        return rank.hits(ranked, rows, "passage")

    def pages(self, namespace: str, query: str | rank.SearchQuery, limit: int) -> rank.Ranked:
        query = rank.as_query(query)
        ranked = self._rank(PAGE, namespace, query, limit)
        rows = self._rows("SELECT rowid, id, title, content FROM pages", ranked)
        stems = self._stems(query.words) if rows else set()
        texts = {r: (i, f"{t}: {rank.snippet(c, stems)}") for r, (i, t, c) in rows.items()}
        return rank.hits(ranked, texts, "page")

    def facts(
        self, namespace: str, query: str | rank.SearchQuery, limit: int, as_of: str | None
    ) -> rank.Ranked:
        keep = None if as_of is None else self._valid_at(as_of)
        ranked = self._rank(FACT, namespace, rank.as_query(query), limit, keep)
        rows = self._rows(
            """SELECT f.rowid, f.id, coalesce((SELECT n.name FROM entity_names n
                      WHERE n.entity = ce.id ORDER BY n.rowid DESC LIMIT 1), ce.name),
                      f.predicate, f.value, f.valid_from, f.valid_to
               FROM facts f JOIN entities e ON e.id = f.subject
               JOIN entities ce ON ce.id = e.canonical""",
            ranked,
            "f.rowid",
        )
        texts = {r: (i, rank.fact_line(*fact)) for r, (i, *fact) in rows.items()}
        return rank.hits(ranked, texts, "fact")

    def entities(self, namespace: str, query: str | rank.SearchQuery, limit: int) -> rank.Ranked:
        ranked = self._rank(ENTITY, namespace, rank.as_query(query), limit)
        rows = self._rows(
            "SELECT e.rowid, e.id, coalesce((SELECT n.name FROM entity_names n "
            f"WHERE n.entity = e.id ORDER BY n.rowid DESC LIMIT 1), e.name), {self.ALIASES} "
            "FROM entities e",
            ranked,
            "e.rowid",
        )
        texts = {r: (i, rank.entity_line(n, a)) for r, (i, n, a) in rows.items()}
        return rank.hits(ranked, texts, "entity")

    def passages_like(
        self, namespace: str, vector: bytes, limit: int, entities: Sequence[str] = ()
    ) -> rank.Ranked:
        ranked = rank.Ranked(self._nearest(namespace, vector, limit, tuple(entities)), 1.0)
        rows = self._rows("SELECT rowid, id, text FROM passages", ranked)
        return rank.hits(ranked, rows, "passage")

    def alongside(self, work: Callable[[Any], T]) -> Callable[[], T]:
        # (here: in this transaction, when the answer is asked for)
        return functools.partial(work, self)

    def passages_beside(
        self, namespace: str, ids: Sequence[str], vector: bytes | None = None
    ) -> dict[str, list[rank.Hit]]:
        if not ids:
            return {}
        pairs = self.all(
            BESIDE,
            (json_list(ids), namespace),
        )
        wanted = {n for _, *around in pairs for n in around if n is not None}
        texts = dict(
            self.all(
                "SELECT id, text FROM passages WHERE id IN (SELECT value FROM json_each(?))",
                (json_list(sorted(wanted)),),
            )
            if wanted
            else []
        )
        cosines = self._cosines(sorted(texts), vector) if vector is not None and texts else {}
        return {
            i: [
                rank.Hit(f"memo://passage/{n}", "passage", texts[n], cosines.get(n, 0.0))
                for n in around
                if n is not None and n in texts
            ]
            for i, *around in pairs
        }

    def _entity_terms(self, query: rank.SearchQuery) -> list[str]:
        """The index terms of the query's entities, in its order."""
        if not query.entities:
            return []
        rowids = dict(
            self.planned(
                "SELECT id, rowid FROM entities WHERE id IN (SELECT value FROM json_each(?))",
                (json_list(query.entities),),
            )
        )
        return [rank.entity_term(rowids[e]) for e in query.entities if e in rowids]

    # --- what an engine supplies -------------------------------------------------------

    def _rank(
        self, kind: str, namespace: str, query: rank.SearchQuery, limit: int, keep: Any = None
    ) -> rank.Ranked:
        raise NotImplementedError

    def _rows(
        self, select: str, ranked: rank.Ranked, rowid: str = "rowid"
    ) -> dict[int, tuple[Any, ...]]:
        raise NotImplementedError

    def _stems(self, words: Iterable[str]) -> set[str]:
        raise NotImplementedError

    def _valid_at(self, as_of: str) -> Any:
        raise NotImplementedError

    def _nearest(
        self, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
    ) -> list[tuple[int, float]]:
        """``(passage rowid, cosine)`` of the ``limit`` live passages (of
        ``entities``, when given) closest to ``vector``, best first."""
        return []

    def _cosines(self, ids: list[str], vector: bytes) -> dict[str, float]:
        """The cosine with ``vector`` of each passage of ``ids`` that has a vector."""
        return {}
