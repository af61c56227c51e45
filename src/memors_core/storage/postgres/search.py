"""Full-text search on PostgreSQL: BM25 over term postings kept by triggers.

What SQLite's FTS5 ``porter unicode61`` index gives the other engine is
built here from plain tables, so no extension is needed. A row's text is
cut into runs of letters and digits of any script, accents dropped (the
rule of :func:`memors_core.domain.text.words` and of ``unicode61``; since
migration 18), and each run is stemmed by
PostgreSQL's English Snowball stemmer with no stop-word list
(``memors_english``), so ``attended`` meets ``attend`` and a question made
only of function words still finds them, as on SQLite.

Triggers keep, per kind of row (passage, page, fact, entity) and per
namespace:

- ``search_postings``: for each stemmed term (as a 64-bit hash), the
  live rows holding it, with the term's count in the row and the row's
  length (one index holds it all, so a query reads the postings of its
  terms and nothing else);
- ``search_packs``: the same postings packed, one row per term and flush,
  the rows, counts and lengths as arrays: what a transaction that indexes
  64 passages or more writes (a bulk load's batch: ~13,000 rows where
  ~156,000 postings would be);
- ``search_docs``: each indexed row's length and terms, and for a passage
  the terms' counts and its pack (what removing it takes away, and where a
  common term's part is read). A passage of a small flush (a single
  remember's) is *pending*, its pack 0: its terms are in this row and
  nowhere else until its namespace has ``PENDING_ROWS`` (128) of them and
  a flush packs them (migration 21), so a remember writes one index row,
  not a row and a frequency update per word. A search counts the pending
  rows of its namespace into each term's frequency and scores them from
  their rows;
- ``search_stats``: the namespace's row count and total length.

A row is indexed when it is inserted (a passage when its transaction
commits: the transaction's new passages go in together, their postings
in term order or packed), and taken out when a tombstone names it (forgotten or
superseded) or purge deletes it (a passage, again, when its transaction
commits, all of them in one pass: a forgotten document's thousands of
passages leave the index in seconds), so the index holds live rows only and
its statistics are those of the live rows of the namespace searched: one
namespace's ranking never depends on another's content, and purge leaves
no word of erased text behind. A search inside a write transaction does
not see the passages that transaction added, and still sees those it
forgot (memors searches in read transactions only).

A query's words and entity terms are memors' (:mod:`memors_core.domain.search`);
they reach the database only as parameters, so no syntax in them can reach
a user. Ranking is SQLite's, in two statements: the first reads the
index's statistics and each term's document frequency (counted from the
postings index, exactly, and only up to the common-term cut unless the
term is common); the second scores the rare terms' postings by BM25 (k1 =
1.2, b = 0.75, IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``, positive however
common a term is), keeps the best candidates, and adds the common terms'
parts to those only, read from each candidate's ``search_docs`` row (by
``(term, rowid)`` in the postings for a row indexed before migration 15);
for passages, it reads their id and text too. A ranked passage's
neighbours, with their text and cosine, come in one more statement.
All three are prepared once per connection.

Why postings rather than a GIN index over a stored ``tsvector`` with a
BM25 rerank of its candidates: the rerank has to read every candidate
row and pick its terms' counts out of it, which measured 3x SQLite's
latency at 100,000 passages, where postings read in index order answer
at SQLite's speed or better (``benchmarks/search_engines.py``). The
price is paid when writing: one index entry per distinct word of a row
(about 40% of a bulk load's flush at 100,000 passages, which is why a bulk
load packs them; docs/performance.md).
``ts_rank`` ranks worse than BM25 (issue 15). Term hashes are PostgreSQL's
``hashtextextended``; should a server upgrade ever change it,
``SELECT memors_search_rebuild()`` builds the index again from the tables.
PostgreSQL's ``tsvector`` keeps at most 256 positions of a word and none
past the 16,383rd, so only texts longer than that (pages, never
passages) count their words a little differently from SQLite.

Queries read term counts from the postings index alone once the table's
visibility map says its pages are all-visible, which (auto)vacuum sets;
the postings table asks autovacuum to come after 2% new rows rather than
20%, so a bulk load is followed soon by fast searches.

The index's tables, functions and triggers are made by migrations V2, V4,
V5, V7, V13, V15, V16, V17, V19, V21, V22 and V23 of
:mod:`memors_core.storage.postgres.schema`, in the one list of the
engine's migrations (V16, V17: a bulk load's batch is stemmed,
its terms hashed and counted, by a query of its own, which the server may
run on parallel workers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from memors_core.domain import search as rank
from memors_core.storage.sql.repo import live_alias
from memors_core.storage.sql.search import LIVE, PASSAGE, SqlSearch

#: What work done alongside answers.
T = TypeVar("T")

# A query's statistics: its index's rows and length, each of its terms with
# the number of rows that hold it (0 for a term no row holds: the packed and
# posted rows' count kept in ``search_df``, plus the namespace's pending
# rows that hold it, counted here), and the index's number.
_STATS = """
    WITH stats AS (
        SELECT id, docs, length FROM search_stats WHERE kind = :kind AND namespace = :ns
    ),
    terms AS MATERIALIZED (
        SELECT DISTINCT hashtextextended(q.t, stats.id) AS term
        FROM stats CROSS JOIN (
            SELECT lexeme AS t FROM unnest(memors_search_vector(:words))
            UNION SELECT chr(57344) || e.rowid::text FROM entities e
            WHERE e.id = ANY (CAST(:entities AS text[]))
        ) q
    ),
    pending AS MATERIALIZED (
        SELECT d.terms FROM stats JOIN search_docs d
            ON d.kind = :kind AND d.ix = stats.id AND d.pack = 0
    )
    SELECT stats.docs, stats.length, terms.term, coalesce(df.n, 0) + (
               SELECT count(*) FROM pending p WHERE terms.term = ANY (p.terms)),
           stats.id
    FROM stats CROSS JOIN terms LEFT JOIN search_df df ON df.term = terms.term"""


# The rare terms' BM25 over their postings (rows of their own, or packed
# per term by a bulk load) gives the candidates; the common terms' parts
# are looked up for the candidates only: in the candidate's own index row
# (its terms and their counts), or by the postings index for a row indexed
# before those counts were kept. ``{{cols}}``/``{{join}}``: the ranked rows'
# own columns read in the same statement (a passage's id and text).
# Each posting's part is computed where it is read, the term's IDF joined
# to its few postings rows or packs rather than to every posting, and the
# parts summed by hashing: sorting some 8,500 postings of a 4-term
# question at 300,000 passages to group them took half the statement. A
# pack's arrays are unnested in the select list, which streams them (in
# step, as ``unnest(a, b, c)`` would), where ``unnest`` in FROM put each of
# the ~450 packs' postings into a tuple store first (5.5 -> 3.9 ms).
# (In float8, as SQLite computes: a bare 1.2 is a numeric to PostgreSQL,
# and numeric arithmetic took half of a query's time at 300,000 passages.)
def _part(p: str) -> str:
    """One posting's BM25 part, before its IDF (``p``: the row read)."""
    return (
        f"{p}.tf * float8 '{rank.K1 + 1}' / ({p}.tf + float8 '{rank.K1}' * "
        f"(float8 '{1 - rank.B}' + float8 '{rank.B}' * {p}.length / CAST(:avg AS float8)))"
    )


_RANK = f"""
    WITH rare AS (
        SELECT unnest(CAST(:rare AS bigint[])) AS term, unnest(CAST(:rare_idfs AS float8[])) AS idf
    ),
    hits AS (
        SELECT s.rowid, q.idf * {_part("s")} AS part
        FROM rare q JOIN search_postings s ON s.term = q.term
        UNION ALL
        SELECT x.rowid, x.idf * {_part("x")}
        FROM (SELECT q.idf, unnest(k.rowids) AS rowid, unnest(k.tfs) AS tf,
                     unnest(k.lengths) AS length
              FROM rare q JOIN search_packs k ON k.term = q.term) x
        UNION ALL
        SELECT x.rowid, x.idf * {_part("x")}
        FROM (SELECT d.rowid, q.idf, d.tfs[array_position(d.terms, q.term)] AS tf, d.length
              FROM search_docs d JOIN rare q ON q.term = ANY (d.terms)
              WHERE d.kind = :kind AND d.ix = :ix AND d.pack = 0) x
    ),
    cand AS (
        SELECT p.rowid, sum(p.part) AS score FROM hits p
        WHERE TRUE {{keep}}
        GROUP BY p.rowid ORDER BY score DESC, p.rowid LIMIT :depth
    )"""
# ... then, with common terms, their parts added to the candidates'
_WITH_COMMON = f""",
    w AS (
        SELECT unnest(CAST(:common AS bigint[])) AS term,
               unnest(CAST(:common_idfs AS float8[])) AS idf
    ),
    extra AS (
        SELECT cand.rowid, sum(p.idf * {_part("p")}) AS score
        FROM cand JOIN search_docs d ON d.kind = :kind AND d.rowid = cand.rowid
        CROSS JOIN LATERAL (
            SELECT c.idf, d.tfs[array_position(d.terms, c.term)] AS tf, d.length
            FROM w c WHERE d.tfs IS NOT NULL
            UNION ALL
            SELECT c.idf, p.tf, p.length
            FROM w c JOIN search_postings p ON p.term = c.term AND p.rowid = cand.rowid
            WHERE d.tfs IS NULL
        ) p
        WHERE p.tf IS NOT NULL
        GROUP BY cand.rowid
    )
    SELECT r.rowid, r.score{{cols}} FROM (
        SELECT cand.rowid, cand.score + coalesce(extra.score, 0) AS score
        FROM cand LEFT JOIN extra ON extra.rowid = cand.rowid
        ORDER BY score DESC, cand.rowid LIMIT :limit
    ) r {{join}} ORDER BY r.score DESC, r.rowid"""
# ... or, without, the candidates are the answer (``:depth`` is ``:limit``).
_RARE_ONLY = """
    SELECT r.rowid, r.score{cols} FROM cand r {join} ORDER BY r.score DESC, r.rowid"""
#: A ranked passage's id and text, read with its rank.
_PASSAGE_COLUMNS = (", x.id, x.text", "JOIN passages x ON x.rowid = r.rowid")


class PgSearch(SqlSearch):
    """:class:`memors_core.storage.api.Search` on PostgreSQL."""

    ALIASES = (
        "(SELECT string_agg(a.alias, ' ; ' ORDER BY a.created_at, a.key) "
        f"FROM aliases a WHERE a.entity = e.id AND {live_alias('a')})"
    )

    def _valid_at(self, as_of: str) -> tuple[str, dict[str, Any]]:
        return (
            "AND p.rowid IN (SELECT rowid FROM facts WHERE (from_ts IS NULL OR "
            "from_ts <= :as_of) AND (to_ts IS NULL OR :as_of < to_ts))",
            {"as_of": as_of},
        )

    # --- ranking ---------------------------------------------------------------------

    def _rank(
        self,
        kind: str,
        namespace: str,
        query: rank.SearchQuery,
        limit: int,
        keep: tuple[str, dict[str, Any]] | None = None,
        columns: tuple[str, str] = ("", ""),
    ) -> rank.Ranked:
        """The best ``limit`` rows of one index for ``query`` (``keep``: an SQL
        condition on ``p.rowid`` with its parameters), as SQLite ranks them;
        ``columns``: more columns of each row after its score (the select
        list's and the join that reads them, of ``r.rowid``)."""
        if limit <= 0 or not query:
            return rank.Ranked([], 0.0)
        # (the entities' terms made in the statement from their rows: a
        # round trip less than reading their numbers first)
        found = self.planned(
            _STATS,
            {
                "kind": kind,
                "ns": namespace,
                "words": " ".join(query.words),
                "entities": list(query.entities),
            },
        )
        if not found:
            return rank.Ranked([], 0.0)
        rows, length, index = found[0][0], found[0][1], found[0][4]
        holding = {term: n for _, _, term, n, _ in found}
        top = rank.ceiling(rows, holding.values())
        rare, common = rank.split_common(rows, {str(t): n for t, n in holding.items()})
        if not rare or not rows:
            return rank.Ranked([], top)
        rare_terms, common_terms = [int(t) for t in rare], [int(t) for t in common]
        params = {
            "rare": rare_terms,
            "rare_idfs": [rank.idf(rows, holding[t]) for t in rare_terms],
            "common": common_terms,
            "common_idfs": [rank.idf(rows, holding[t]) for t in common_terms],
            "avg": max(length / rows, 1e-9),
            "depth": rank.rerank_depth(limit) if common else limit,
            "limit": limit,
            "kind": kind,
            "ix": index,
        }
        where = ""
        if keep is not None:
            where, extra = keep
            params.update(extra)
        sql = (_RANK + (_WITH_COMMON if common else _RARE_ONLY)).format(
            keep=where, cols=columns[0], join=columns[1]
        )
        # (planned once per connection: whatever the terms, the plan reads
        # each rare term's postings and packs by its index and sums their
        # parts by hashing; planning it took 0.4 ms of a 5 ms statement)
        return rank.Ranked(self.planned(sql, params), top)

    def passages(self, namespace: str, query: str | rank.SearchQuery, limit: int) -> rank.Ranked:
        # (ranked and read in one statement: a round trip fewer than the shared code's)
        ranked = self._rank(PASSAGE, namespace, rank.as_query(query), limit, None, _PASSAGE_COLUMNS)
        texts = {r[0]: (r[2], r[3]) for r in ranked.rows}
        return rank.hits(
            rank.Ranked([r[:2] for r in ranked.rows], ranked.ceiling), texts, "passage"
        )

    def _rows(
        self, select: str, ranked: rank.Ranked, rowid: str = "rowid"
    ) -> dict[int, tuple[Any, ...]]:
        if not ranked.rows:
            return {}
        got = self.all(
            f"{select} WHERE {rowid} = ANY (CAST(:rows AS bigint[]))",
            {"rows": [r for r, _ in ranked.rows]},
        )
        return {r[0]: r[1:] for r in got}

    def alongside(self, work: Callable[[Any], T]) -> Callable[[], T]:
        # (on a second connection, in this read's snapshot, where one is free)
        answer: Callable[[], T] = self.db.alongside(lambda tx: work(tx.search))
        return answer

    def passages_beside(
        self, namespace: str, ids: Sequence[str], vector: bytes | None = None
    ) -> dict[str, list[rank.Hit]]:
        # (one statement, where the shared code's takes two or three round trips)
        if not ids:
            return {}
        cosine, join, params = "0", "", {"ids": list(ids), "ns": namespace}
        if vector is not None and self.db.capabilities.vectors:
            from memors_core.storage.postgres.vectors import literal

            cosine = "coalesce(1 - (v.vector <=> CAST(:q AS vector)), 0)"
            join = "LEFT JOIN passage_vectors v ON v.passage = b.rowid"
            params["q"] = literal(vector)
        side = """(SELECT {n} AS side, p.rowid, p.id, p.text FROM passages p
                   WHERE p.namespace = s.namespace AND p.rowid {op} s.rowid AND {live}
                   ORDER BY p.rowid {order} LIMIT 1)"""
        rows = self.planned(
            f"""SELECT s.id, b.id, b.text, {cosine} FROM passages s
                LEFT JOIN LATERAL (
                    {side.format(n=0, op="<", order="DESC", live=LIVE)}
                    UNION ALL {side.format(n=1, op=">", order="", live=LIVE)}
                ) b ON true {join}
                WHERE s.id = ANY (CAST(:ids AS text[])) AND s.namespace = :ns
                ORDER BY s.id, b.side""",
            params,
        )
        out: dict[str, list[rank.Hit]] = {}
        for i, near, text, score in rows:
            hits = out.setdefault(i, [])
            if near is not None:
                hits.append(rank.Hit(f"memo://passage/{near}", "passage", text, float(score)))
        return out

    def _cosines(self, ids: list[str], vector: bytes) -> dict[str, float]:
        if not self.db.capabilities.vectors:
            return {}
        from memors_core.storage.postgres.vectors import literal

        rows = self.all(
            "SELECT p.id, 1 - (v.vector <=> CAST(:q AS vector)) FROM passages p "
            "JOIN passage_vectors v ON v.passage = p.rowid WHERE p.id = ANY (CAST(:ids AS text[]))",
            {"q": literal(vector), "ids": ids},
        )
        return {r[0]: float(r[1]) for r in rows}

    def passages_like(
        self, namespace: str, vector: bytes, limit: int, entities: Sequence[str] = ()
    ) -> rank.Ranked:
        # (the passages' id and text read with their cosines: a round trip less)
        found = [
            rank.Hit(f"memo://passage/{ident}", "passage", text, cosine)
            for _, cosine, ident, text in self._near(namespace, vector, limit, tuple(entities))
            if ident is not None and text is not None  # (a vector without its passage)
        ]
        return rank.Ranked(found, 1.0)

    def _nearest(
        self, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
    ) -> list[tuple[int, float]]:
        return [(r[0], r[1]) for r in self._near(namespace, vector, limit, entities)]

    def _near(
        self, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
    ) -> list[tuple[int, float, str | None, str | None]]:
        if not self.db.capabilities.vectors:
            return []
        from memors_core.storage.postgres.vectors import nearest

        return nearest(self.db, namespace, vector, limit, entities)

    def _stems(self, words: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.all(
                "SELECT lexeme FROM unnest(memors_search_vector(?))", (" ".join(words),)
            )
        }
