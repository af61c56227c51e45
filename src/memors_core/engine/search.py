"""BM25 full-text search over live rows, one query per granularity."""

from __future__ import annotations

from memors_core.domain.ids import address
from memors_core.domain.model import SearchHit
from memors_core.storage.sqlite.connection import Store
from memors_core.storage.sqlite.ops import live

SNIPPET_TOKENS = 40


def _passages(store: Store, ns: str, match: str, limit: int, _as_of: str | None) -> list[SearchHit]:
    rows = store.all(
        f"""SELECT p.id, p.text, bm25(passages_fts) AS r
            FROM passages_fts JOIN passages p ON p.rowid = passages_fts.rowid
            WHERE passages_fts MATCH ? AND p.namespace = ? AND {live("p")}
            ORDER BY r LIMIT ?""",
        (match, ns, limit),
    )
    return [SearchHit(address("passage", i), "passage", t, -r) for i, t, r in rows]


def _pages(store: Store, ns: str, match: str, limit: int, _as_of: str | None) -> list[SearchHit]:
    rows = store.all(
        f"""SELECT pg.id, pg.title,
                   snippet(pages_fts, 1, '', '', '…', {SNIPPET_TOKENS}), bm25(pages_fts) AS r
            FROM pages_fts JOIN pages pg ON pg.rowid = pages_fts.rowid
            WHERE pages_fts MATCH ? AND pg.namespace = ? AND {live("pg")}
            ORDER BY r LIMIT ?""",
        (match, ns, limit),
    )
    return [SearchHit(address("page", i), "page", f"{t}: {s}", -r) for i, t, s, r in rows]


def _facts(store: Store, ns: str, match: str, limit: int, as_of: str | None) -> list[SearchHit]:
    when = ""
    params: tuple = (match, ns)
    if as_of is not None:
        when = "AND (f.from_ts IS NULL OR f.from_ts <= ?) AND (f.to_ts IS NULL OR ? < f.to_ts)"
        params += (as_of, as_of)
    rows = store.all(
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
        span = ""
        if vf or vt:
            span = f" [{vf or '…'}, {vt or '…'})"
        hits.append(
            SearchHit(address("fact", i), "fact", f"{subject} {predicate} {value}{span}", -r)
        )
    return hits


def _entities(store: Store, ns: str, match: str, limit: int, _as_of: str | None) -> list[SearchHit]:
    rows = store.all(
        """SELECT e.id, e.name, entities_fts.aliases, bm25(entities_fts) AS r
           FROM entities_fts JOIN entities e ON e.rowid = entities_fts.rowid
           WHERE entities_fts MATCH ? AND e.namespace = ? AND e.canonical = e.id
           ORDER BY r LIMIT ?""",
        (match, ns, limit),
    )
    return [
        SearchHit(address("entity", i), "entity", f"{n} (also: {a})" if a else n, -r)
        for i, n, a, r in rows
    ]


SEARCHERS = {"passage": _passages, "page": _pages, "fact": _facts, "entity": _entities}


def run(
    store: Store, ns: str, match: str, granularity: str, limit: int, as_of: str | None
) -> list[SearchHit]:
    if granularity != "all":
        return SEARCHERS[granularity](store, ns, match, limit, as_of)
    hits: list[SearchHit] = []
    for search in SEARCHERS.values():
        hits.extend(search(store, ns, match, limit, as_of))
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]
