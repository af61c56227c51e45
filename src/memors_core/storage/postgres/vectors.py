"""Passages' vectors on PostgreSQL, through the pgvector extension.

pgvector is a server extension: where the server has it, the first process
that opens the store with the ``semantic`` extra installed creates it in the
database (``CREATE EXTENSION vector``, which needs a role allowed to) and
the vector table (:data:`SETUP`): ``passage_vectors`` with a ``vector(384)``
column, and triggers that take a vector with its passage when a tombstone
names the passage or purge erases it, and keep ``vector_stats`` (migration
6), and an HNSW index over every vector (:data:`HNSW`). The nearest
passages of a large namespace are found through that index
(:func:`by_graph`), of a small one by an exact scan (:func:`exact`,
``<=>``: the cosine distance), and the named entities' passages by key,
exactly.

Where the server has no pgvector, or this role may not create it, the store
declares no vectors (:attr:`memors_core.storage.api.Capabilities.vectors`)
and says why in one line: search ranks by words, and nothing is embedded.
"""

from __future__ import annotations

import functools
from typing import Any

from memors_core.semantic import DIMENSIONS, KIND, TEXT_ONLY
from memors_core.storage.postgres.privileges import REMAKE, VECTOR_WRITERS, _definer
from memors_core.storage.sql.vectors import _PASSAGE, SqlVectors

#: How the HNSW graph is built: each vector linked to 24 others (pgvector's
#: ``m``; 16 by default), chosen among 128 candidates (``ef_construction``;
#: 64). A generated conversation repeats its turns, and a graph of many
#: equal vectors built with the defaults lost a fifth of the exact nearest
#: 50 in a walk of 200; this one keeps as much as SQLite's code pass for the
#: same walk, for a build about twice as long (docs/performance.md).
GRAPH = (("m", 24), ("ef_construction", 128))
#: The approximate index of every vector (pgvector's HNSW graph, by cosine distance).
HNSW = (
    "CREATE INDEX IF NOT EXISTS passage_vectors_hnsw "
    "ON passage_vectors USING hnsw (vector vector_cosine_ops) "
    f"WITH ({', '.join(f'{k} = {v}' for k, v in GRAPH)});"
)
#: The graph's options as the catalog lists them (``pg_class.reloptions``).
GRAPH_OPTIONS = sorted(f"{k}={v}" for k, v in GRAPH)
#: A namespace with fewer vectors than this is scanned exactly (a few ms).
EXACT_BELOW = 10_000
#: The HNSW graph is walked for this many candidates per passage asked, over
#: the namespace's share of all vectors (pgvector's ``hnsw.ef_search``).
BREADTH = 4
#: pgvector's largest ``hnsw.ef_search``: a namespace that would need more
#: (a small share of a large store) is scanned exactly.
MOST_BREADTH = 1000

#: What each vector is (issue 30, :data:`memors_core.semantic.KIND`), on a
#: vector table made before: the vectors there are of the passage's text
#: alone. An application role replaces a vector of an older kind through
#: ``memors_vectors_remake``, with the owner's rights, and only with one of
#: the kind this memors makes (it may not rewrite vectors otherwise).
KINDS = f"""
ALTER TABLE passage_vectors ADD COLUMN IF NOT EXISTS
    kind TEXT COLLATE "C" NOT NULL DEFAULT '{TEXT_ONLY}';
CREATE OR REPLACE FUNCTION memors_vectors_remake(p bigint, v vector, k text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF k = '{KIND}' THEN
        UPDATE passage_vectors SET vector = v, kind = k WHERE passage = p AND kind <> k;
    END IF;
END $$;
DO $$
BEGIN
{_definer(REMAKE)}\
    REVOKE EXECUTE ON FUNCTION {REMAKE} FROM PUBLIC;
END $$;
"""

#: The database objects vectors need beyond migration 6, made once pgvector is there.
SETUP = f"""
CREATE TABLE IF NOT EXISTS passage_vectors(
    passage BIGINT PRIMARY KEY,
    namespace TEXT COLLATE "C" NOT NULL,
    vector vector({DIMENSIONS}) NOT NULL
);
{KINDS}
CREATE INDEX IF NOT EXISTS passage_vectors_namespace ON passage_vectors(namespace, passage);
{HNSW}

CREATE OR REPLACE FUNCTION memors_vectors_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO vector_stats(namespace, vectors, changes) VALUES (NEW.namespace, 1, 1)
        ON CONFLICT (namespace) DO UPDATE
        SET vectors = vector_stats.vectors + 1, changes = vector_stats.changes + 1;
    ELSE
        UPDATE vector_stats SET vectors = vectors - 1, changes = changes + 1
        WHERE namespace = OLD.namespace;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memors_vectors_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'tombstones' THEN
        IF NEW.type = 'passage' THEN
            DELETE FROM passage_vectors
            WHERE passage = (SELECT rowid FROM passages WHERE id = NEW.target);
        END IF;
    ELSE
        DELETE FROM passage_vectors WHERE passage = OLD.rowid;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER passage_vectors_count AFTER INSERT OR DELETE ON passage_vectors
    FOR EACH ROW EXECUTE FUNCTION memors_vectors_count();
CREATE OR REPLACE TRIGGER tombstones_vectors AFTER INSERT ON tombstones
    FOR EACH ROW EXECUTE FUNCTION memors_vectors_drop();
CREATE OR REPLACE TRIGGER passages_vectors AFTER DELETE ON passages
    FOR EACH ROW EXECUTE FUNCTION memors_vectors_drop();

-- They run with the owner's rights: an application role only adds vectors
-- (docs/postgres.md, "Roles and privileges").
DO $$
BEGIN
{"".join(_definer(f) for f in VECTOR_WRITERS)}\
{"".join(f"    REVOKE EXECUTE ON FUNCTION {f} FROM PUBLIC;{chr(10)}" for f in VECTOR_WRITERS)}\
END $$;
"""

NO_SERVER_EXTENSION = (
    "this PostgreSQL server has no pgvector extension (install it on the server for search "
    "by meaning)"
)
NOT_ALLOWED = (
    "this role may not set up vectors in this database (open the store once as its owner "
    "with the semantic extra installed: creating the pgvector extension needs a role "
    "allowed to; then grant the application roles again)"
)
SEMANTIC_MISSING = "this process has no semantic extra to make vectors with"


@functools.lru_cache(maxsize=8)
def literal(vector: bytes) -> str:
    """A vector (float32 bytes) as pgvector's text form, ``[x,y,…]``: each
    number in 9 significant digits, which give every float32 back exactly
    (a third shorter than Python's ``repr`` of the double, and made three
    times faster). The last few are kept: a hybrid search sends its
    question's vector in three statements."""
    import numpy as np

    numbers = np.frombuffer(vector, dtype="<f4").tolist()
    return _form(len(numbers)) % tuple(numbers)


@functools.cache
def _form(dimensions: int) -> str:
    """The format of a vector of ``dimensions`` numbers (see :func:`literal`)."""
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


class PgVectors(SqlVectors):
    """:class:`memors_core.storage.api.Vectors` on PostgreSQL (pgvector's type)."""

    MARKS = "?::vector"

    def _values(self, vector: bytes) -> tuple[Any, ...]:
        return (literal(vector),)

    def _replace(self, rows: list[tuple[Any, ...]]) -> None:
        # Through the owner's function: an application role may not rewrite vectors.
        self.db.executemany(f"SELECT memors_vectors_remake(p.rowid, ?::vector, ?) {_PASSAGE}", rows)


#: A nearest passage: ``(rowid, cosine, id, text)`` (id and text None for
#: a vector whose passage is not there: a benchmark's vectors written alone).
Near = tuple[int, float, str | None, str | None]

# The namespace's vectors, and the walk the graph takes for ``limit``
# passages: ``BREADTH`` candidates per passage asked over the namespace's
# share of every vector, at least 40 (in ``memors.walk``; 0 where the
# namespace is scanned exactly instead, a small one or a small share of a
# large store, which the next statement then reads without starting the
# walk); pgvector's breadth set for the walk. One row, whatever the
# namespace holds.
_WALK = f"""SELECT s.vectors,
           set_config('memors.walk', CASE WHEN s.vectors >= :exact AND w.breadth <= {MOST_BREADTH}
                                          THEN w.breadth ELSE 0 END::text, true),
           set_config('hnsw.ef_search', least(greatest(w.breadth, 40), {MOST_BREADTH})::text, true)
    FROM (SELECT 1) one
    LEFT JOIN vector_stats s ON s.namespace = :ns
    CROSS JOIN LATERAL (
        SELECT t.every, CASE WHEN coalesce(s.vectors, 0) > 0 THEN greatest(
            40, (:depth * t.every + s.vectors - 1) / s.vectors) ELSE 0 END AS breadth
        FROM (SELECT coalesce(sum(vectors), 0)::bigint AS every FROM vector_stats) t
    ) w"""
# The passages of the ``memors.walk`` nearest of every namespace's that
# are the namespace's (the graph's walk), best first, with their text.
_GRAPH = """SELECT n.passage, n.cosine, p.id, p.text FROM (
        SELECT passage, cosine FROM (
            SELECT v.passage, v.namespace, 1 - (v.vector <=> :q::vector) AS cosine
            FROM passage_vectors v ORDER BY v.vector <=> :q::vector
            LIMIT current_setting('memors.walk')::int
        ) near WHERE namespace = :ns ORDER BY cosine DESC, passage LIMIT :limit
    ) n LEFT JOIN passages p ON p.rowid = n.passage ORDER BY n.cosine DESC, n.passage"""


def nearest(
    db: Any, namespace: str, vector: bytes, limit: int, entities: tuple[str, ...]
) -> list[Near]:
    """The ``limit`` passages of ``namespace`` (of ``entities`` when given)
    nearest to ``vector``, best first, with their id and text: exact.

    A large namespace is walked in the graph: how far is decided and the
    walk made in one message (:data:`_WALK`, :data:`_GRAPH`), which falls
    back on the exact scan where the walk found too few. With entities,
    their passages are found first (by index, from the entities through
    their mentions) and only their vectors read, by key: a planner that
    guessed the list's size would otherwise scan every vector of the
    namespace (160 ms at 100,000 passages). The texts are read for the
    ``limit`` nearest only, not for every passage of the entities (1.88 ->
    1.37 ms p50 for people of ~340 passages at 100,000)."""
    query = literal(vector)
    if limit <= 0:
        return []
    if not entities:
        cur = db.execute(
            f"{_WALK}; {_GRAPH}",
            {
                "exact": EXACT_BELOW,
                "ns": namespace,
                "depth": BREADTH * limit,
                "q": query,
                "limit": limit,
            },
        )
        mine = cur.fetchone()[0]
        cur.nextset()
        rows = cur.fetchall()
        if not mine:
            return []
        # (a namespace scanned exactly was walked for none: too few found)
        if len(rows) >= min(limit, int(mine)):
            return _near(rows)
        return exact(db, namespace, query, limit)
    rows = db.all(
        """WITH pool AS MATERIALIZED (
               SELECT DISTINCT p.rowid FROM entities e
               JOIN mentions m ON m.entity = e.id
               JOIN passages p ON p.id = m.passage
               WHERE e.canonical = ANY(?) AND e.namespace = ?
           ), q AS MATERIALIZED (SELECT ?::vector AS v)
           SELECT n.passage, n.cosine, p.id, p.text FROM (
               SELECT v.passage, 1 - (v.vector <=> q.v) AS cosine
               FROM pool CROSS JOIN q CROSS JOIN LATERAL (
                   SELECT passage, vector FROM passage_vectors
                   WHERE passage = pool.rowid AND namespace = ?
               ) v ORDER BY cosine DESC, v.passage LIMIT ?
           ) n LEFT JOIN passages p ON p.rowid = n.passage ORDER BY n.cosine DESC, n.passage""",
        (list(entities), namespace, query, namespace, limit),
    )
    return _near(rows)


def _near(rows: list[tuple[Any, ...]]) -> list[Near]:
    return [(int(r[0]), float(r[1]), r[2], r[3]) for r in rows]


def exact(db: Any, namespace: str, query: str, limit: int) -> list[Near]:
    """The ``limit`` nearest of the namespace's vectors to ``query`` (pgvector's
    text form), every vector compared."""
    rows = db.all(
        """SELECT n.passage, n.cosine, p.id, p.text FROM (
               SELECT v.passage, 1 - (v.vector <=> q.v) AS cosine
               FROM passage_vectors v, (SELECT ?::vector AS v) q
               WHERE v.namespace = ? ORDER BY cosine DESC, v.passage LIMIT ?
           ) n LEFT JOIN passages p ON p.rowid = n.passage ORDER BY n.cosine DESC, n.passage""",
        (query, namespace, limit),
    )
    return _near(rows)


def by_graph(db: Any, namespace: str, query: str, limit: int, breadth: int) -> list[Near]:
    """The ``limit`` nearest of the namespace's vectors to ``query`` that the
    HNSW index finds among the ``breadth`` nearest of every namespace's
    (fewer when the namespace's share of those is smaller): the graph's
    walk alone, for benchmarks that set the breadth themselves."""
    cur = db.execute(
        "SELECT set_config('memors.walk', :b, true), set_config('hnsw.ef_search', :b, true); "
        + _GRAPH,
        {"b": str(breadth), "q": query, "ns": namespace, "limit": limit},
    )
    cur.nextset()
    return _near(cur.fetchall())


#: Whether the graph index is there, built with the options given (``?``).
_GRAPH_IS = (
    "to_regclass('passage_vectors_hnsw') IS NOT NULL AND (SELECT "
    "coalesce(array_agg(o ORDER BY o), '{}') = ? FROM pg_class, unnest(reloptions) o "
    "WHERE oid = to_regclass('passage_vectors_hnsw'))"
)


def _add_graph(store: Any, lock: int) -> None:
    """Build the HNSW index of a store whose vectors predate it, or whose
    graph was built with other options than :data:`GRAPH` (once, by the
    first process with the extra that may; one to two minutes per 100,000
    vectors, docs/performance.md). A role that may not leaves it to the
    owner: search walks the graph it has, or scans exactly, meanwhile."""
    import psycopg

    try:
        with store.write(lock=lock):
            if store.scalar(f"SELECT {_GRAPH_IS}", (GRAPH_OPTIONS,)):
                return  # (another process built it while this one waited)
            store.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            store.conn.execute("DROP INDEX IF EXISTS passage_vectors_hnsw")
            store.conn.execute(HNSW)
    except psycopg.errors.InsufficientPrivilege:
        pass


#: What :func:`prepare` needs to know, in one statement: whether the
#: vector table is there, its graph index as this memors builds it, its
#: functions as this memors writes them (NULL: none), pgvector installed,
#: and, only when it is neither installed nor in use, offered by the
#: server (the subqueries of a CASE branch not taken are never run).
_STATE = (
    f"SELECT to_regclass('passage_vectors') IS NOT NULL, ({_GRAPH_IS}), "
    "(SELECT position(? in prosrc) > 0 FROM pg_proc WHERE proname = 'memors_vectors_remake' "
    "AND pronamespace = current_schema()::regnamespace), "
    "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'), "
    "CASE WHEN to_regclass('passage_vectors') IS NULL AND NOT EXISTS "
    "(SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN EXISTS "
    "(SELECT 1 FROM pg_available_extensions WHERE name = 'vector') END"
)


def _add_kinds(store: Any, lock: int) -> str:
    """Record what each vector is (:data:`KINDS`) on a vector table made
    before, and let this memors replace vectors of an older kind; "" when
    done, else why not (one line)."""
    import psycopg

    try:
        with store.write(lock=lock):
            store.conn.execute(KINDS)
            store._regrant()  # the application roles may call the new function
    except psycopg.errors.InsufficientPrivilege:
        return NOT_ALLOWED
    return ""


def prepare(store: Any, readonly: bool, lock: int) -> str:
    """Make sure the store can keep vectors; "" when it can, else why not
    (one line). Read-only, or without the ``semantic`` extra here, nothing
    is created: the store keeps vectors only if they were set up before.
    The set-up runs under the write lock ``lock`` (the migrations')."""
    from memors_core import semantic

    with store.read():
        table, graph, kinds, installed, offered = store.one(_STATE, (GRAPH_OPTIONS, KIND))
    if table:
        if readonly or semantic.unavailable() is not None:
            return ""
        if not graph:
            _add_graph(store, lock)
        return "" if kinds else _add_kinds(store, lock)
    if not (installed or offered):
        return NO_SERVER_EXTENSION
    if readonly or semantic.unavailable() is not None:
        return SEMANTIC_MISSING
    import psycopg

    from memors_core.storage.postgres.addresses import one_line

    try:
        with store.write(lock=lock):
            if not installed:
                store.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            store.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            store.conn.execute(SETUP)
            store._regrant()  # the recorded application roles may add vectors too
    except psycopg.errors.InsufficientPrivilege:
        return NOT_ALLOWED
    except psycopg.Error as exc:  # a broken server install, say: still one line
        return f"pgvector could not be set up in this database: {one_line(exc)}"
    return ""
