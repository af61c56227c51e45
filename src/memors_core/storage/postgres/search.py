"""Full-text search on PostgreSQL: BM25 over term postings kept by triggers.

What SQLite's FTS5 ``porter unicode61`` index gives the other engine is
built here from plain tables, so no extension is needed. A row's text is
cut into runs of letters and digits (the rule of
:func:`memors_core.domain.text.words`), and each run is stemmed by
PostgreSQL's English Snowball stemmer with no stop-word list
(``memors_english``), so ``attended`` meets ``attend`` and a question made
only of function words still finds them, as on SQLite.

Triggers keep, per kind of row (passage, page, fact, entity) and per
namespace:

- ``search_postings``: for each stemmed term (as a 64-bit hash), the
  live rows holding it, with the term's count in the row and the row's
  length (one index holds it all, so a query reads the postings of its
  terms and nothing else);
- ``search_docs``: each indexed row's length and terms (what removing it
  takes away);
- ``search_stats``: the namespace's row count and total length.

A row is indexed when it is inserted (a passage when its transaction
commits: the transaction's new passages go in together, their postings
in term order, so a bulk load touches each index page once rather than
once per passage), and taken out when a tombstone names it (forgotten or
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
parts to those only, looked up by ``(term, rowid)``.

Why postings rather than a GIN index over a stored ``tsvector`` with a
BM25 rerank of its candidates: the rerank has to read every candidate
row and pick its terms' counts out of it, which measured 3x SQLite's
latency at 100,000 passages, where postings read in index order answer
at SQLite's speed or better (``benchmarks/search_engines.py``). The
price is paid when writing: one index entry per distinct word of a row
(about half of PostgreSQL's remember time at 100,000 passages).
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
"""

from __future__ import annotations

from collections.abc import Iterable

from memors_core.domain import search as rank
from memors_core.storage.sql.repo import live_alias
from memors_core.storage.sql.search import SqlSearch

# The kinds of indexed rows, as stored in the index's ``kind`` column
# (memors_core.storage.sql.search names them).

MIGRATION = r"""
CREATE TEXT SEARCH DICTIONARY memors_english_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION memors_english (COPY = english);
ALTER TEXT SEARCH CONFIGURATION memors_english
    ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword,
        hword_asciipart, hword_part, hword_numpart, int, uint, float, sfloat, version
    WITH memors_english_stem;

-- A text's stemmed terms with their positions: runs of letters and digits
-- only (every other character separates words, as memors' own word rule
-- says), each stemmed, none dropped.
CREATE FUNCTION memors_search_vector(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT to_tsvector('memors_english'::regconfig,
                             regexp_replace(body, '[^[:alnum:]]+', ' ', 'g')) $$;

CREATE TABLE search_stats(
    id INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind "char" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    docs BIGINT NOT NULL,
    length BIGINT NOT NULL,
    UNIQUE (kind, namespace)
);

-- A term is its stemmed word's 64-bit hash, seeded with its index's number
-- (kind and namespace): narrow fixed-width keys are the cheapest to insert
-- into, and no word of a row's text is copied here.
CREATE TABLE search_postings(
    term BIGINT NOT NULL,
    rowid BIGINT NOT NULL,
    tf SMALLINT NOT NULL,
    length INTEGER NOT NULL
);
CREATE INDEX search_postings_term ON search_postings(term, rowid) INCLUDE (tf, length);
ALTER TABLE search_postings SET (autovacuum_vacuum_insert_scale_factor = 0.02);

CREATE TABLE search_docs(
    kind "char" NOT NULL,
    rowid BIGINT NOT NULL,
    ix INTEGER NOT NULL,
    length INTEGER NOT NULL,
    terms BIGINT[] NOT NULL,
    PRIMARY KEY (kind, rowid)
);

CREATE FUNCTION memors_search_remove(k "char", rid bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d search_docs;
BEGIN
    DELETE FROM search_docs WHERE kind = k AND rowid = rid RETURNING * INTO d;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    DELETE FROM search_postings WHERE term = ANY (d.terms) AND rowid = rid;
    UPDATE search_stats SET docs = docs - 1, length = length - d.length WHERE id = d.ix;
END $$;

-- Index one row (not indexed yet) of kind k in namespace ns.
CREATE FUNCTION memors_search_add(k "char", ns text, rid bigint, body text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v tsvector := memors_search_vector(coalesce(body, ''));
    n integer;
    ix integer;
    hashes bigint[];
BEGIN
    SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0) INTO n FROM unnest(v);
    INSERT INTO search_stats(kind, namespace, docs, length) VALUES (k, ns, 1, n)
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + 1, length = search_stats.length + excluded.length
        RETURNING id INTO ix;
    WITH added AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, ix), rid, coalesce(array_length(u.positions, 1), 1), n
        FROM unnest(v) u
        RETURNING term
    )
    SELECT coalesce(array_agg(term), '{}') INTO hashes FROM added;
    INSERT INTO search_docs(kind, rowid, ix, length, terms) VALUES (k, rid, ix, n, hashes);
END $$;

-- New passages wait in search_queue until their transaction commits, and
-- are then indexed all at once, their postings inserted in term order: a
-- bulk load's thousands of rows touch each index page once, not once per
-- row. (The first of the deferred calls does the work, the others find it
-- done; a passage inserted later, after SET CONSTRAINTS … IMMEDIATE say,
-- asks for another flush.)
CREATE TABLE search_queue(rowid BIGINT NOT NULL);

CREATE FUNCTION memors_search_flush() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('memors.search_flushed', true) = 'yes' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('memors.search_flushed', 'yes', true);
    WITH queued AS MATERIALIZED (
        SELECT p.rowid, p.namespace, memors_search_vector(p.text) AS v
        FROM (SELECT DISTINCT rowid FROM search_queue) s JOIN passages p ON p.rowid = s.rowid
        WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = p.id)
          AND NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.kind = 'p' AND d.rowid = p.rowid)
    ),
    sized AS MATERIALIZED (
        SELECT q.rowid, q.namespace, q.v,
               (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                FROM unnest(q.v) u)::integer AS n
        FROM queued q
    ),
    stats AS (
        INSERT INTO search_stats(kind, namespace, docs, length)
        SELECT 'p', namespace, count(*), sum(n) FROM sized GROUP BY namespace
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + excluded.docs,
                      length = search_stats.length + excluded.length
        RETURNING id, namespace
    ),
    postings AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, st.id), sz.rowid,
               coalesce(array_length(u.positions, 1), 1), sz.n
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        ORDER BY 1, 2
    )
    INSERT INTO search_docs(kind, rowid, ix, length, terms)
    SELECT 'p', sz.rowid, st.id, sz.n,
           ARRAY(SELECT hashtextextended(u.lexeme, st.id) FROM unnest(sz.v) u)
    FROM sized sz JOIN stats st ON st.namespace = sz.namespace;
    DELETE FROM search_queue;
    RETURN NULL;
END $$;

-- (Re)index one row of a kind from the tables, or take it out when it is
-- gone or has a tombstone.
CREATE FUNCTION memors_search_refresh(k "char", ident text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns text;
    rid bigint;
    body text;
BEGIN
    IF k = 'p' THEN
        SELECT namespace, rowid, text INTO ns, rid, body FROM passages WHERE id = ident;
    ELSIF k = 'g' THEN
        SELECT namespace, rowid, title || E'\n' || content INTO ns, rid, body
        FROM pages WHERE id = ident;
    ELSIF k = 'f' THEN
        SELECT f.namespace, f.rowid, e.name || E'\n' || f.predicate || E'\n' || f.value
        INTO ns, rid, body
        FROM facts f JOIN entities e ON e.id = f.subject WHERE f.id = ident;
    ELSE
        SELECT e.namespace, e.rowid,
               e.name || coalesce(E'\n' || (SELECT string_agg(a.alias, E'\n' ORDER BY a.key)
                                           FROM aliases a WHERE a.entity = e.id), '')
        INTO ns, rid, body FROM entities e WHERE e.id = ident;
    END IF;
    IF rid IS NULL THEN
        RETURN;
    END IF;
    PERFORM memors_search_remove(k, rid);
    IF k = 'e' OR NOT EXISTS (SELECT 1 FROM tombstones WHERE target = ident) THEN
        PERFORM memors_search_add(k, ns, rid, body);
    END IF;
END $$;

CREATE FUNCTION memors_search_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k "char" := CASE TG_TABLE_NAME WHEN 'passages' THEN 'p' WHEN 'pages' THEN 'g'
                                   WHEN 'facts' THEN 'f' ELSE 'e' END;
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM memors_search_remove(k, OLD.rowid);
    ELSIF k = 'p' THEN  -- the hot path (remember): indexed at commit
        INSERT INTO search_queue(rowid) VALUES (NEW.rowid);
        PERFORM set_config('memors.search_flushed', 'no', true);
    ELSE
        PERFORM memors_search_refresh(k, NEW.id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memors_search_alias() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM memors_search_refresh('e', OLD.entity);
    ELSE
        PERFORM memors_search_refresh('e', NEW.entity);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION memors_search_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    t tombstones := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    k "char" := CASE t.type WHEN 'passage' THEN 'p' WHEN 'page' THEN 'g'
                            WHEN 'fact' THEN 'f' END;
BEGIN
    IF k IS NOT NULL THEN
        PERFORM memors_search_refresh(k, t.target);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER passages_search AFTER INSERT OR DELETE ON passages
    FOR EACH ROW EXECUTE FUNCTION memors_search_row();
CREATE CONSTRAINT TRIGGER passages_search_flush AFTER INSERT ON passages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_search_flush();
CREATE TRIGGER pages_search AFTER INSERT OR DELETE ON pages
    FOR EACH ROW EXECUTE FUNCTION memors_search_row();
CREATE TRIGGER facts_search AFTER INSERT OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION memors_search_row();
CREATE TRIGGER entities_search AFTER INSERT OR DELETE ON entities
    FOR EACH ROW EXECUTE FUNCTION memors_search_row();
CREATE TRIGGER aliases_search AFTER INSERT OR DELETE ON aliases
    FOR EACH ROW EXECUTE FUNCTION memors_search_alias();
CREATE TRIGGER tombstones_search AFTER INSERT OR DELETE ON tombstones
    FOR EACH ROW EXECUTE FUNCTION memors_search_tombstone();

-- The whole index again from the tables (after a restore that bypassed the triggers).
CREATE FUNCTION memors_search_rebuild() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    DELETE FROM search_postings;
    DELETE FROM search_docs;
    DELETE FROM search_stats;
    FOR r IN SELECT id FROM passages ORDER BY rowid LOOP
        PERFORM memors_search_refresh('p', r.id);
    END LOOP;
    FOR r IN SELECT id FROM pages ORDER BY rowid LOOP
        PERFORM memors_search_refresh('g', r.id);
    END LOOP;
    FOR r IN SELECT id FROM facts ORDER BY rowid LOOP
        PERFORM memors_search_refresh('f', r.id);
    END LOOP;
    FOR r IN SELECT id FROM entities ORDER BY rowid LOOP
        PERFORM memors_search_refresh('e', r.id);
    END LOOP;
END $$;
"""


# Entity terms (issue 17): every indexed row also carries the term of each
# canonical entity it is about (a passage's mentions, a fact's subject, a
# page's entity, an entity itself; see memors_core.domain.search), kept
# when mentions change and when a merge moves an entity to a new canonical;
# only canonical entities are indexed. The index is built again from the
# tables with the new terms.
ENTITY_TERMS_MIGRATION = r"""
CREATE FUNCTION memors_entity_terms(k "char", ident text) RETURNS tsvector
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_to_tsvector(array_agg(DISTINCT chr(57344) || ce.rowid::text)),
                    ''::tsvector)
    FROM entities e JOIN entities ce ON ce.id = e.canonical
    WHERE e.id IN (SELECT m.entity FROM mentions m WHERE k = 'p' AND m.passage = ident
                   UNION ALL SELECT f.subject FROM facts f WHERE k = 'f' AND f.id = ident
                   UNION ALL SELECT g.entity FROM pages g WHERE k = 'g' AND g.id = ident
                   UNION ALL SELECT ident WHERE k = 'e')
$$;

DROP FUNCTION memors_search_add(k "char", ns text, rid bigint, body text);
CREATE FUNCTION memors_search_add(k "char", ns text, rid bigint, body text, extra tsvector)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v tsvector := memors_search_vector(coalesce(body, '')) || extra;
    n integer;
    ix integer;
    hashes bigint[];
BEGIN
    SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0) INTO n FROM unnest(v);
    INSERT INTO search_stats(kind, namespace, docs, length) VALUES (k, ns, 1, n)
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + 1, length = search_stats.length + excluded.length
        RETURNING id INTO ix;
    WITH added AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, ix), rid, coalesce(array_length(u.positions, 1), 1), n
        FROM unnest(v) u
        RETURNING term
    )
    SELECT coalesce(array_agg(term), '{}') INTO hashes FROM added;
    INSERT INTO search_docs(kind, rowid, ix, length, terms) VALUES (k, rid, ix, n, hashes);
END $$;

CREATE OR REPLACE FUNCTION memors_search_refresh(k "char", ident text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    ns text;
    rid bigint;
    body text;
    belongs boolean;
BEGIN
    IF k = 'p' THEN
        SELECT namespace, rowid, text INTO ns, rid, body FROM passages WHERE id = ident;
    ELSIF k = 'g' THEN
        SELECT namespace, rowid, title || E'\n' || content INTO ns, rid, body
        FROM pages WHERE id = ident;
    ELSIF k = 'f' THEN
        SELECT f.namespace, f.rowid, e.name || E'\n' || f.predicate || E'\n' || f.value
        INTO ns, rid, body
        FROM facts f JOIN entities e ON e.id = f.subject WHERE f.id = ident;
    ELSE
        SELECT e.namespace, e.rowid,
               e.name || coalesce(E'\n' || (SELECT string_agg(a.alias, E'\n' ORDER BY a.key)
                                           FROM aliases a WHERE a.entity = e.id), '')
        INTO ns, rid, body FROM entities e WHERE e.id = ident;
    END IF;
    IF rid IS NULL THEN
        RETURN;
    END IF;
    PERFORM memors_search_remove(k, rid);
    IF k = 'e' THEN
        belongs := EXISTS (SELECT 1 FROM entities WHERE id = ident AND canonical = id);
    ELSE
        belongs := NOT EXISTS (SELECT 1 FROM tombstones WHERE target = ident);
    END IF;
    IF belongs THEN
        PERFORM memors_search_add(k, ns, rid, body, memors_entity_terms(k, ident));
    END IF;
END $$;

-- Queued passages are indexed at commit (taken out first if they were
-- indexed already: their mentions changed), their postings in term order.
CREATE OR REPLACE FUNCTION memors_search_flush() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF current_setting('memors.search_flushed', true) = 'yes' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('memors.search_flushed', 'yes', true);
    FOR r IN SELECT DISTINCT d.rowid FROM search_queue q
             JOIN search_docs d ON d.kind = 'p' AND d.rowid = q.rowid LOOP
        PERFORM memors_search_remove('p', r.rowid);
    END LOOP;
    WITH queued AS MATERIALIZED (
        SELECT p.rowid, p.namespace,
               memors_search_vector(p.text) || memors_entity_terms('p', p.id) AS v
        FROM (SELECT DISTINCT rowid FROM search_queue) s JOIN passages p ON p.rowid = s.rowid
        WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = p.id)
    ),
    sized AS MATERIALIZED (
        SELECT q.rowid, q.namespace, q.v,
               (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                FROM unnest(q.v) u)::integer AS n
        FROM queued q
    ),
    stats AS (
        INSERT INTO search_stats(kind, namespace, docs, length)
        SELECT 'p', namespace, count(*), sum(n) FROM sized GROUP BY namespace
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + excluded.docs,
                      length = search_stats.length + excluded.length
        RETURNING id, namespace
    ),
    postings AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, st.id), sz.rowid,
               coalesce(array_length(u.positions, 1), 1), sz.n
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        ORDER BY 1, 2
    )
    INSERT INTO search_docs(kind, rowid, ix, length, terms)
    SELECT 'p', sz.rowid, st.id, sz.n,
           ARRAY(SELECT hashtextextended(u.lexeme, st.id) FROM unnest(sz.v) u)
    FROM sized sz JOIN stats st ON st.namespace = sz.namespace;
    DELETE FROM search_queue;
    RETURN NULL;
END $$;

CREATE FUNCTION memors_search_mention() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m mentions := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
    INSERT INTO search_queue(rowid) SELECT rowid FROM passages WHERE id = m.passage;
    PERFORM set_config('memors.search_flushed', 'no', true);
    RETURN NULL;
END $$;

CREATE FUNCTION memors_search_merge() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    INSERT INTO search_queue(rowid)
    SELECT p.rowid FROM mentions m JOIN passages p ON p.id = m.passage WHERE m.entity = NEW.id;
    PERFORM set_config('memors.search_flushed', 'no', true);
    FOR r IN SELECT id FROM facts WHERE subject = NEW.id LOOP
        PERFORM memors_search_refresh('f', r.id);
    END LOOP;
    FOR r IN SELECT id FROM pages WHERE entity = NEW.id LOOP
        PERFORM memors_search_refresh('g', r.id);
    END LOOP;
    PERFORM memors_search_refresh('e', NEW.id);
    RETURN NULL;
END $$;

CREATE TRIGGER mentions_search AFTER INSERT OR DELETE ON mentions
    FOR EACH ROW EXECUTE FUNCTION memors_search_mention();
CREATE CONSTRAINT TRIGGER mentions_search_flush AFTER INSERT OR DELETE ON mentions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_search_flush();
CREATE CONSTRAINT TRIGGER entities_search_flush AFTER UPDATE OF canonical ON entities
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_search_flush();
CREATE TRIGGER entities_search_merge AFTER UPDATE OF canonical ON entities
    FOR EACH ROW WHEN (OLD.canonical IS DISTINCT FROM NEW.canonical)
    EXECUTE FUNCTION memors_search_merge();

SELECT memors_search_rebuild();
"""


# Document frequencies (issue 17): how many rows of its index hold each term,
# kept by the functions that add and remove postings, so a search reads a
# query term's ``n`` (BM25's IDF) in one index lookup instead of counting the
# term's postings, a count that grew with the namespace for a common word.
# Writes are serialized by the store's write lock, so the counts never race.
DOC_FREQUENCY_MIGRATION = r"""
CREATE TABLE search_df(
    term BIGINT PRIMARY KEY,
    n INTEGER NOT NULL
);
INSERT INTO search_df(term, n) SELECT term, count(*) FROM search_postings GROUP BY term;

CREATE OR REPLACE FUNCTION memors_search_remove(k "char", rid bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d search_docs;
BEGIN
    DELETE FROM search_docs WHERE kind = k AND rowid = rid RETURNING * INTO d;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM search_postings WHERE term = ANY (d.terms) AND rowid = rid RETURNING term
    ),
    counted AS (SELECT term, count(*) AS n FROM gone GROUP BY term)
    UPDATE search_df f SET n = f.n - c.n FROM counted c WHERE f.term = c.term;
    DELETE FROM search_df WHERE term = ANY (d.terms) AND n <= 0;  -- (as a rebuild leaves it)
    UPDATE search_stats SET docs = docs - 1, length = length - d.length WHERE id = d.ix;
END $$;

CREATE OR REPLACE FUNCTION memors_search_add(
    k "char", ns text, rid bigint, body text, extra tsvector
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v tsvector := memors_search_vector(coalesce(body, '')) || extra;
    n integer;
    ix integer;
    hashes bigint[];
BEGIN
    SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0) INTO n FROM unnest(v);
    INSERT INTO search_stats(kind, namespace, docs, length) VALUES (k, ns, 1, n)
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + 1, length = search_stats.length + excluded.length
        RETURNING id INTO ix;
    WITH added AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, ix), rid, coalesce(array_length(u.positions, 1), 1), n
        FROM unnest(v) u
        RETURNING term
    )
    SELECT coalesce(array_agg(term), '{}') INTO hashes FROM added;
    INSERT INTO search_df(term, n) SELECT t, count(*) FROM unnest(hashes) t GROUP BY t
        ON CONFLICT (term) DO UPDATE SET n = search_df.n + excluded.n;
    INSERT INTO search_docs(kind, rowid, ix, length, terms) VALUES (k, rid, ix, n, hashes);
END $$;

CREATE OR REPLACE FUNCTION memors_search_flush() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF current_setting('memors.search_flushed', true) = 'yes' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('memors.search_flushed', 'yes', true);
    FOR r IN SELECT DISTINCT d.rowid FROM search_queue q
             JOIN search_docs d ON d.kind = 'p' AND d.rowid = q.rowid LOOP
        PERFORM memors_search_remove('p', r.rowid);
    END LOOP;
    WITH queued AS MATERIALIZED (
        SELECT p.rowid, p.namespace,
               memors_search_vector(p.text) || memors_entity_terms('p', p.id) AS v
        FROM (SELECT DISTINCT rowid FROM search_queue) s JOIN passages p ON p.rowid = s.rowid
        WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = p.id)
    ),
    sized AS MATERIALIZED (
        SELECT q.rowid, q.namespace, q.v,
               (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                FROM unnest(q.v) u)::integer AS n
        FROM queued q
    ),
    stats AS (
        INSERT INTO search_stats(kind, namespace, docs, length)
        SELECT 'p', namespace, count(*), sum(n) FROM sized GROUP BY namespace
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + excluded.docs,
                      length = search_stats.length + excluded.length
        RETURNING id, namespace
    ),
    postings AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, st.id), sz.rowid,
               coalesce(array_length(u.positions, 1), 1), sz.n
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        ORDER BY 1, 2
    ),
    df AS (
        INSERT INTO search_df(term, n)
        SELECT hashtextextended(u.lexeme, st.id), count(*)
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        GROUP BY 1
        ON CONFLICT (term) DO UPDATE SET n = search_df.n + excluded.n
    )
    INSERT INTO search_docs(kind, rowid, ix, length, terms)
    SELECT 'p', sz.rowid, st.id, sz.n,
           ARRAY(SELECT hashtextextended(u.lexeme, st.id) FROM unnest(sz.v) u)
    FROM sized sz JOIN stats st ON st.namespace = sz.namespace;
    DELETE FROM search_queue;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memors_search_rebuild() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    DELETE FROM search_postings;
    DELETE FROM search_docs;
    DELETE FROM search_stats;
    DELETE FROM search_df;
    FOR r IN SELECT id FROM passages ORDER BY rowid LOOP
        PERFORM memors_search_refresh('p', r.id);
    END LOOP;
    FOR r IN SELECT id FROM pages ORDER BY rowid LOOP
        PERFORM memors_search_refresh('g', r.id);
    END LOOP;
    FOR r IN SELECT id FROM facts ORDER BY rowid LOOP
        PERFORM memors_search_refresh('f', r.id);
    END LOOP;
    FOR r IN SELECT id FROM entities ORDER BY rowid LOOP
        PERFORM memors_search_refresh('e', r.id);
    END LOOP;
END $$;
"""


# Set-based removal (issue 29): forgetting a document of 8,171 passages held
# the write lock 378 s, taking them out one by one, each passage's removal
# updating search_df once per term and scanning what the earlier ones left
# (a common term's row had thousands of versions by the end). Passages are
# now taken out at commit with the ones added: a tombstone or an erasure
# queues the passage, and the flush removes every queued passage in one
# pass (postings deleted by (term, rowid) pairs, each term's frequency and
# each index's statistics changed by one grouped UPDATE), then indexes
# those that are still live. Pages, facts and entities (a few rows per
# write) are refreshed at once as before, through the same removal.
SET_REMOVAL_MIGRATION = r"""
CREATE FUNCTION memors_search_remove_many(k "char", rids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    gone_rows bigint[];
    gone_terms bigint[];
    emptied bigint[];
BEGIN
    WITH gone AS (
        DELETE FROM search_docs WHERE kind = k AND rowid = ANY (rids)
        RETURNING rowid, ix, length, terms
    ),
    stats AS (
        UPDATE search_stats s SET docs = s.docs - g.docs, length = s.length - g.length
        FROM (SELECT ix, count(*) AS docs, sum(length) AS length FROM gone GROUP BY ix) g
        WHERE s.id = g.ix
    )
    SELECT array_agg(g.rowid), array_agg(t.term) INTO gone_rows, gone_terms
    FROM gone g CROSS JOIN LATERAL unnest(g.terms) AS t(term);
    IF gone_terms IS NULL THEN
        RETURN;
    END IF;
    -- Planned with the pairs in hand (EXECUTE), so the planner knows how
    -- many there are: a few are looked up by the postings index, a whole
    -- document's are merged with it in one ordered pass.
    EXECUTE $q$
        WITH postings AS (
            DELETE FROM search_postings p USING unnest($1, $2) AS x(term, rowid)
            WHERE p.term = x.term AND p.rowid = x.rowid
            RETURNING p.term
        ),
        df AS (
            UPDATE search_df f SET n = f.n - c.n
            FROM (SELECT term, count(*) AS n FROM postings GROUP BY term) c
            WHERE f.term = c.term
            RETURNING f.term, f.n
        )
        SELECT coalesce(array_agg(term), '{}') FROM df WHERE n <= 0
    $q$ INTO emptied USING gone_terms, gone_rows;
    DELETE FROM search_df WHERE term = ANY (emptied);  -- (as a rebuild leaves it)
END $$;

CREATE OR REPLACE FUNCTION memors_search_remove(k "char", rid bigint) RETURNS void
LANGUAGE sql AS $$ SELECT memors_search_remove_many(k, ARRAY[rid]) $$;

CREATE OR REPLACE FUNCTION memors_search_flush() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('memors.search_flushed', true) = 'yes' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('memors.search_flushed', 'yes', true);
    PERFORM memors_search_remove_many('p', ARRAY(SELECT DISTINCT rowid FROM search_queue));
    WITH queued AS MATERIALIZED (
        SELECT p.rowid, p.namespace,
               memors_search_vector(p.text) || memors_entity_terms('p', p.id) AS v
        FROM (SELECT DISTINCT rowid FROM search_queue) s JOIN passages p ON p.rowid = s.rowid
        WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = p.id)
    ),
    sized AS MATERIALIZED (
        SELECT q.rowid, q.namespace, q.v,
               (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                FROM unnest(q.v) u)::integer AS n
        FROM queued q
    ),
    stats AS (
        INSERT INTO search_stats(kind, namespace, docs, length)
        SELECT 'p', namespace, count(*), sum(n) FROM sized GROUP BY namespace
        ON CONFLICT (kind, namespace)
        DO UPDATE SET docs = search_stats.docs + excluded.docs,
                      length = search_stats.length + excluded.length
        RETURNING id, namespace
    ),
    postings AS (
        INSERT INTO search_postings(term, rowid, tf, length)
        SELECT hashtextextended(u.lexeme, st.id), sz.rowid,
               coalesce(array_length(u.positions, 1), 1), sz.n
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        ORDER BY 1, 2
    ),
    df AS (
        INSERT INTO search_df(term, n)
        SELECT hashtextextended(u.lexeme, st.id), count(*)
        FROM sized sz JOIN stats st ON st.namespace = sz.namespace
        CROSS JOIN LATERAL unnest(sz.v) u
        GROUP BY 1
        ON CONFLICT (term) DO UPDATE SET n = search_df.n + excluded.n
    )
    INSERT INTO search_docs(kind, rowid, ix, length, terms)
    SELECT 'p', sz.rowid, st.id, sz.n,
           ARRAY(SELECT hashtextextended(u.lexeme, st.id) FROM unnest(sz.v) u)
    FROM sized sz JOIN stats st ON st.namespace = sz.namespace;
    DELETE FROM search_queue;
    RETURN NULL;
END $$;

-- A passage's tombstone or erasure queues it for the flush at commit.
CREATE OR REPLACE FUNCTION memors_search_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k "char" := CASE TG_TABLE_NAME WHEN 'passages' THEN 'p' WHEN 'pages' THEN 'g'
                                   WHEN 'facts' THEN 'f' ELSE 'e' END;
BEGIN
    IF k = 'p' THEN  -- indexed, and taken out, at commit
        INSERT INTO search_queue(rowid)
        VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.rowid ELSE NEW.rowid END);
        PERFORM set_config('memors.search_flushed', 'no', true);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM memors_search_remove(k, OLD.rowid);
    ELSE
        PERFORM memors_search_refresh(k, NEW.id);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memors_search_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    t tombstones := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    k "char" := CASE t.type WHEN 'passage' THEN 'p' WHEN 'page' THEN 'g'
                            WHEN 'fact' THEN 'f' END;
BEGIN
    IF k = 'p' THEN
        INSERT INTO search_queue(rowid) SELECT rowid FROM passages WHERE id = t.target;
        PERFORM set_config('memors.search_flushed', 'no', true);
    ELSIF k IS NOT NULL THEN
        PERFORM memors_search_refresh(k, t.target);
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER passages_search_flush_removed AFTER DELETE ON passages
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_search_flush();
CREATE CONSTRAINT TRIGGER tombstones_search_flush AFTER INSERT OR DELETE ON tombstones
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_search_flush();
"""


# A query's statistics: its index's rows and length, and each of its terms
# with the number of rows that hold it (0 for a term no row holds).
_STATS = """
    WITH stats AS (
        SELECT id, docs, length FROM search_stats WHERE kind = :kind AND namespace = :ns
    ),
    terms AS (
        SELECT DISTINCT hashtextextended(q.t, stats.id) AS term
        FROM stats CROSS JOIN (
            SELECT lexeme AS t FROM unnest(memors_search_vector(:words))
            UNION SELECT unnest(CAST(:entities AS text[]))
        ) q
    )
    SELECT stats.docs, stats.length, terms.term, coalesce(df.n, 0)
    FROM stats CROSS JOIN terms LEFT JOIN search_df df ON df.term = terms.term"""

# The rare terms' BM25 over their postings gives the candidates; the common
# terms' parts are looked up for the candidates only (by the postings index).
_PART = f"p.tf * {rank.K1 + 1} / (p.tf + {rank.K1} * ({1 - rank.B} + {rank.B} * p.length / :avg))"
_RANK = f"""
    WITH w AS (
        SELECT unnest(CAST(:terms AS bigint[])) AS term, unnest(CAST(:idfs AS float8[])) AS idf
    ),
    cand AS (
        SELECT p.rowid, sum(w.idf * {_PART}) AS score
        FROM search_postings p JOIN w ON w.term = p.term
        WHERE p.term = ANY (CAST(:rare AS bigint[])) {{keep}}
        GROUP BY p.rowid ORDER BY score DESC, p.rowid LIMIT :depth
    ),
    extra AS (
        SELECT cand.rowid, sum(w.idf * {_PART}) AS score
        FROM cand CROSS JOIN unnest(CAST(:common AS bigint[])) c(term)
        JOIN search_postings p ON p.term = c.term AND p.rowid = cand.rowid
        JOIN w ON w.term = c.term
        GROUP BY cand.rowid
    )
    SELECT cand.rowid, cand.score + coalesce(extra.score, 0) AS score
    FROM cand LEFT JOIN extra ON extra.rowid = cand.rowid
    ORDER BY score DESC, cand.rowid LIMIT :limit"""


class PgSearch(SqlSearch):
    """:class:`memors_core.storage.api.Search` on PostgreSQL."""

    ALIASES = (
        "(SELECT string_agg(a.alias, ' ; ' ORDER BY a.created_at, a.key) "
        f"FROM aliases a WHERE a.entity = e.id AND {live_alias('a')})"
    )

    def _valid_at(self, as_of: str) -> tuple[str, dict]:
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
        keep: tuple[str, dict] | None = None,
    ) -> rank.Ranked:
        """The best ``limit`` rows of one index for ``query`` (``keep``: an SQL
        condition on ``p.rowid`` with its parameters), as SQLite ranks them."""
        if limit <= 0 or not query:
            return rank.Ranked([], 0.0)
        entities = self._entity_terms(query)
        found = self.all(
            _STATS,
            {"kind": kind, "ns": namespace, "words": " ".join(query.words), "entities": entities},
        )
        if not found:
            return rank.Ranked([], 0.0)
        rows, length = found[0][0], found[0][1]
        holding = {term: n for _, _, term, n in found}
        top = rank.ceiling(rows, holding.values())
        rare, common = rank.split_common(rows, {str(t): n for t, n in holding.items()})
        if not rare or not rows:
            return rank.Ranked([], top)
        terms = [t for t in holding if holding[t]]
        params = {
            "terms": terms,
            "idfs": [rank.idf(rows, holding[t]) for t in terms],
            "rare": [int(t) for t in rare],
            "common": [int(t) for t in common],
            "avg": max(length / rows, 1e-9),
            "depth": rank.rerank_depth(limit) if common else limit,
            "limit": limit,
        }
        where = ""
        if keep is not None:
            where, extra = keep
            params.update(extra)
        return rank.Ranked(self.all(_RANK.format(keep=where), params), top)

    def _rows(self, select: str, ranked: rank.Ranked, rowid: str = "rowid") -> dict[int, tuple]:
        if not ranked.rows:
            return {}
        got = self.all(
            f"{select} WHERE {rowid} = ANY (CAST(:rows AS bigint[]))",
            {"rows": [r for r, _ in ranked.rows]},
        )
        return {r[0]: r[1:] for r in got}

    def _nearest(
        self, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
    ) -> list[tuple[int, float]]:
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
