"""Full-text search on SQLite: one FTS5 index per kind of row and namespace,
ranked by memors' BM25 (:mod:`memors_core.domain.search`).

Each index is a contentless FTS5 table ``search_<id>`` (``porter
unicode61``, ``contentless_delete``) named in ``search_indexes`` and made
the first time its namespace gets a row of its kind, so a namespace's
statistics, and the cost of searching it, are its own. It holds the live
rows only: a row's words (a page's title and content, a fact's subject,
predicate and value, an entity's name and aliases) and the entity term
(:func:`memors_core.domain.search.entity_term`) of each canonical entity the
row is about. Triggers note changed rows in ``search_queue``; :func:`flush`
indexes them inside the write transaction, just before it commits, so a
search never sees half a write (and a search inside a write transaction
does not see that transaction's rows, as on PostgreSQL).

Ranking reads FTS5's own numbers. BM25 as FTS5 computes it for a query of
one term is that term's weight (``ln((N - n + 0.5) / (n + 0.5))``, or 1e-6
for a term in half the rows or more) times the row's term part, so scaling
each term's ``bm25()`` by memors' weight over FTS5's gives memors' score
exactly; ``N`` and the average length come from the index's averages
record and ``n`` from its ``fts5vocab`` table. The rare terms gather
candidates in one statement; the common ones add their parts to the best
candidates only, read by a small auxiliary function (``memors_terms``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import apsw

from memors_core.domain import search as rank
from memors_core.storage.sql.repo import json_list, live_alias
from memors_core.storage.sql.search import PASSAGE, SqlSearch
from memors_core.storage.sqlite.indexing import index_table, register

TYPE_CHECKING = False  # (not typing's: this module is on ``memors-mcp search``'s lean path)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


def _varints(blob: bytes) -> list[int]:
    """FTS5's (SQLite's) big-endian varints."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def fts_idf(rows: int, holding: int) -> float:
    """The weight FTS5's ``bm25()`` gives a one-term query (fts5_aux.c)."""
    weight = math.log((rows - holding + 0.5) / (holding + 0.5))
    return weight if weight > 0 else 1e-6


def fts_query(query: str) -> str | None:
    """A plain FTS5 MATCH expression for any user text: its search words
    (:func:`memors_core.domain.search.query_words`), quoted, OR-ed; None when
    it has no words. (What a bare FTS5 search would run: the benchmarks'
    reference.)"""
    words = rank.query_words(query)
    return " OR ".join(_quoted(w) for w in words) if words else None


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class SqliteSearch(SqlSearch):
    """:class:`memors_core.storage.api.Search` on SQLite."""

    _tokenizer: Callable[..., Any] | None = None
    _registered = False

    ALIASES = (
        "(SELECT group_concat(a.alias, ' ; ') FROM aliases a WHERE a.entity = e.id "
        f"AND {live_alias('a')})"
    )

    def _valid_at(self, as_of: str) -> tuple[str, tuple[Any, ...]]:
        return (
            "(SELECT rowid FROM facts WHERE (from_ts IS NULL OR from_ts <= ?) "
            "AND (to_ts IS NULL OR ? < to_ts))",
            (as_of, as_of),
        )

    # --- ranking ---------------------------------------------------------------------

    def _rank(
        self,
        kind: str,
        namespace: str,
        query: rank.SearchQuery,
        limit: int,
        keep: tuple[str, tuple[Any, ...]] | None = None,
    ) -> rank.Ranked:
        """The best ``limit`` rows of one index for ``query`` (``keep``: an
        SQL subquery of the rowids allowed, with its parameters)."""
        got = self.one(
            "SELECT id FROM search_indexes WHERE kind = ? AND namespace = ?", (kind, namespace)
        )
        if got is None or limit <= 0:
            return rank.Ranked([], 0.0)
        table = index_table(got[0])
        block = self.one(f"SELECT block FROM {table}_data WHERE id = 1")
        rows, length = ([*_varints(block[0]), 0, 0])[:2] if block else (0, 0)
        terms = self._terms(query)
        if not rows or not terms:
            return rank.Ranked([], 0.0)
        average = length / rows
        holding = dict.fromkeys(terms, 0)
        sql = " UNION ALL ".join(
            f"SELECT term, doc FROM {table}_terms WHERE term = ?" for _ in terms
        )
        holding.update(self.all(sql, tuple(terms)))
        top = rank.ceiling(rows, holding.values())
        rare, common = rank.split_common(rows, holding)
        if not rare:
            return rank.Ranked([], top)
        depth = rank.rerank_depth(limit) if common else limit
        branches = " UNION ALL ".join(
            f"SELECT rowid, ? * bm25({table}) AS s FROM {table} WHERE {table} MATCH ?" for _ in rare
        )
        params: list[Any] = []
        for t in rare:
            params += [rank.idf(rows, holding[t]) / fts_idf(rows, holding[t]), _quoted(terms[t])]
        where = ""
        if keep is not None:
            where = f"WHERE rowid IN {keep[0]}"
            params += keep[1]
        found = self.all(
            f"""WITH hits AS MATERIALIZED ({branches})
                SELECT rowid, -sum(s) AS score FROM hits {where}
                GROUP BY rowid ORDER BY score DESC, rowid LIMIT ?""",
            (*params, depth),
        )
        if common and found:
            if not self._registered:
                register(self.db.conn)
                self._registered = True
            scores = dict(found)
            weights = [rank.idf(rows, holding[t]) for t in common]
            match = " OR ".join(_quoted(terms[t]) for t in common)
            for row, counts in self.all(
                f"""SELECT rowid, memors_terms({table}) FROM {table}
                    WHERE {table} MATCH ? AND rowid IN (SELECT value FROM json_each(?))""",
                (match, json_list(scores)),
            ):
                size, *tfs = map(int, counts.split())
                scores[row] += sum(
                    w * rank.term_part(tf, size, average)
                    for w, tf in zip(weights, tfs, strict=True)
                    if tf
                )
            found = sorted(scores.items(), key=lambda rs: (-rs[1], rs[0]))
        return rank.Ranked(found[:limit], top)

    def _nearest(
        self, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
    ) -> list[tuple[int, float]]:
        from memors_core.storage.sqlite.vectors import nearest

        among = self._entity_rows(namespace, entities) if entities else None
        # Inside a write the codes may be of rows that roll back: not kept.
        caches = None if self.db.in_write else self.db.vector_codes
        return nearest(self.db, caches, namespace, vector, limit, among)

    def _cosines(self, ids: list[str], vector: bytes) -> dict[str, float]:
        import numpy as np

        q = np.frombuffer(vector, dtype="<f4")
        rows = self.all(
            "SELECT p.id, v.vector FROM passages p JOIN passage_vectors v ON v.passage = p.rowid "
            "WHERE p.id IN (SELECT value FROM json_each(?))",
            (json_list(ids),),
        )
        return {i: float(np.frombuffer(v, dtype="<f4") @ q) for i, v in rows}

    def _entity_rows(self, namespace: str, entities: tuple[str, ...]) -> list[int]:
        """The live passages of ``namespace`` that carry one of the entities' terms."""
        got = self.one(
            "SELECT id FROM search_indexes WHERE kind = ? AND namespace = ?", (PASSAGE, namespace)
        )
        terms = self._entity_terms(rank.SearchQuery((), entities))
        if got is None or not terms:
            return []
        table = index_table(got[0])
        match = " OR ".join(_quoted(t) for t in terms)
        return [
            r[0] for r in self.all(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (match,))
        ]

    def _terms(self, query: rank.SearchQuery) -> dict[str, str]:
        """The index terms of a query, each with the text that matches it:
        its words' stems (by the index's own tokenizer, which stems the
        MATCH text again, so a word is matched by itself), then its
        entities' terms."""
        terms: dict[str, str] = {}
        for word in query.words:
            tokens = self._tokens(word)
            for token in tokens:
                terms.setdefault(token, word if len(tokens) == 1 else token)
        for term in self._entity_terms(query):
            terms[term] = term
        return terms

    def _stems(self, words: Iterable[str]) -> set[str]:
        return {t for w in words for t in self._tokens(w)}

    def _tokens(self, word: str) -> list[str]:
        tokenize = self._tokenizer
        if tokenize is None:
            tokenize = self._tokenizer = self.db.conn.fts5_tokenizer("porter", ["unicode61"])
        return [t[2] for t in tokenize(word.encode(), apsw.FTS5_TOKENIZE_QUERY, None) if len(t) > 2]

    def _rows(
        self, select: str, ranked: rank.Ranked, rowid: str = "rowid"
    ) -> dict[int, tuple[Any, ...]]:
        """The ranked rows' columns (after the rowid), by rowid."""
        if not ranked.rows:
            return {}
        got = self.all(
            f"{select} WHERE {rowid} IN (SELECT value FROM json_each(?))",
            (json_list(r for r, _ in ranked.rows),),
        )
        return {r[0]: r[1:] for r in got}
