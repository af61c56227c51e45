"""Full-text search on SQLite: FTS5 with BM25, one query per granularity."""

from __future__ import annotations

from memors_core.domain import text
from memors_core.domain.ids import address
from memors_core.domain.model import SearchHit
from memors_core.storage.sql.records import Repo, live

SNIPPET_TOKENS = 40


def fts_query(query: str, max_words: int = 64) -> str | None:
    """An FTS5 MATCH expression for any user text: its words, quoted, OR-ed.

    Stop words are dropped unless nothing else is left. Words are runs of
    letters and digits, so the quoting can never be broken and no FTS
    syntax error can reach a user. None when the text has no words.
    """
    ws = list(dict.fromkeys(text.words(query)))
    if not ws:
        return None
    stops = text.search_stop_words()
    content = [w for w in ws if w not in stops] or ws
    return " OR ".join(f'"{w}"' for w in content[:max_words])


class SqliteSearch(Repo):
    def passages(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []
        rows = self.all(
            f"""SELECT p.id, p.text, bm25(passages_fts) AS r
                FROM passages_fts JOIN passages p ON p.rowid = passages_fts.rowid
                WHERE passages_fts MATCH ? AND p.namespace = ? AND {live("p")}
                ORDER BY r LIMIT ?""",
            (match, namespace, limit),
        )
        return [SearchHit(address("passage", i), "passage", t, -r) for i, t, r in rows]

    def pages(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []
        rows = self.all(
            f"""SELECT pg.id, pg.title,
                       snippet(pages_fts, 1, '', '', '…', {SNIPPET_TOKENS}), bm25(pages_fts) AS r
                FROM pages_fts JOIN pages pg ON pg.rowid = pages_fts.rowid
                WHERE pages_fts MATCH ? AND pg.namespace = ? AND {live("pg")}
                ORDER BY r LIMIT ?""",
            (match, namespace, limit),
        )
        return [SearchHit(address("page", i), "page", f"{t}: {s}", -r) for i, t, s, r in rows]

    def facts(self, namespace: str, query: str, limit: int, as_of: str | None) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []
        when = ""
        params: tuple = (match, namespace)
        if as_of is not None:
            when = "AND (f.from_ts IS NULL OR f.from_ts <= ?) AND (f.to_ts IS NULL OR ? < f.to_ts)"
            params += (as_of, as_of)
        rows = self.all(
            f"""SELECT f.id, ce.name, f.predicate, f.value, f.valid_from, f.valid_to,
                       bm25(facts_fts) AS r
                FROM facts_fts JOIN facts f ON f.rowid = facts_fts.rowid
                JOIN entities e ON e.id = f.subject JOIN entities ce ON ce.id = e.canonical
                WHERE facts_fts MATCH ? AND f.namespace = ? AND {live("f")} {when}
                ORDER BY r LIMIT ?""",
            (*params, limit),
        )
        hits = []
        for i, subject, predicate, value, vf, vt, r in rows:
            span = f" [{vf or '…'}, {vt or '…'})" if vf or vt else ""
            hits.append(
                SearchHit(address("fact", i), "fact", f"{subject} {predicate} {value}{span}", -r)
            )
        return hits

    def entities(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        match = fts_query(query)
        if match is None:
            return []
        rows = self.all(
            """SELECT e.id, e.name, entities_fts.aliases, bm25(entities_fts) AS r
               FROM entities_fts JOIN entities e ON e.rowid = entities_fts.rowid
               WHERE entities_fts MATCH ? AND e.namespace = ? AND e.canonical = e.id
               ORDER BY r LIMIT ?""",
            (match, namespace, limit),
        )
        return [
            SearchHit(address("entity", i), "entity", f"{n} (also: {a})" if a else n, -r)
            for i, n, a, r in rows
        ]
