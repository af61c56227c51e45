"""Issue 29: the application role cannot erase or rewrite history, nor write
the state that drives memors' work, by any route; memors' own operations
still work as that role, and a store made before the fix is upgraded.

Every route runs in its own transaction as the application role of
docs/postgres.md; it must be refused (by privilege, or by a ``memors:``
check) and leave every table it aimed at exactly as it was."""

from __future__ import annotations

import json

import psycopg
import pytest

from memors_core.memory import Memory
from memors_core.storage.postgres import connection, schema
from memors_core.storage.postgres.privileges import grant_application_role
from memors_core.testing import passages_about

from .test_immutable import RAW, _contents, seeded  # noqa: F401 (a fixture)

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

#: What no route may change: every raw table, the audit, the state that
#: drives work, and the derived tables memors' own functions keep.
WATCHED = (
    *sorted(RAW),
    "work_items",
    "purge_pending",
    "search_postings",
    "search_packs",
    "search_docs",
    "search_stats",
    "search_df",
    "search_queue",
    "vector_stats",
    "passage_profiles",
    # an entity's names and people's corrections (purge erases them with it)
    "aliases",
    "entity_names",
    "alias_changes",
    "corrections",
)


def _snapshot(url: str) -> dict[str, list[str]]:
    return {table: _contents(url, table) for table in WATCHED}


def _facts(conn: psycopg.Connection) -> dict[str, str]:
    """Values the routes aim at, from the seeded store."""

    def one(query: str) -> str:
        return str(conn.execute(query).fetchone()[0])

    return {
        "passage": one("SELECT max(id) FROM passages"),
        "prowid": one("SELECT max(rowid) FROM passages"),
        "document": one("SELECT document FROM passages WHERE version = 1 ORDER BY rowid LIMIT 1"),
        "later": one("SELECT document FROM document_versions WHERE version = 2 LIMIT 1"),
        "born": one("SELECT min(created_at) FROM passages"),
        "done": one("SELECT min(id) FROM work_items WHERE status = 'done'"),
        "audit": one("SELECT min(id) FROM purges"),
        "fact": one("SELECT max(id) FROM facts"),
        "entity": one("SELECT id FROM entities WHERE name = 'Raft'"),
    }


_AUDIT = (
    "INSERT INTO purges(namespace, target, erased, created_at) "
    "VALUES ('default', 'memo://passage/{passage}', '{erased}', '2026-01-01T00:00:00Z')"
)
_GATE = "SELECT set_config('memors.purge_gate', 'open', true)"
_FORGED_PASSAGE = (
    "INSERT INTO passages(rowid, id, namespace, document, version, position, text, hash, "
    "shingles, created_at) VALUES ({prowid} + 1000, 'forged', 'default', '{document}', {version}, "
    "99, 'The forged sentence.', 'h', '\\x00', '{born}')"
)


def _routes(f: dict[str, str]) -> dict[str, list[str]]:
    """Each attack, as the statements of one transaction."""
    erase_all = (
        "SELECT memors_erase('passages', 'namespace', 'default'), "
        "memors_erase('facts', 'namespace', 'default')"
    )
    erase_one = f"SELECT memors_erase('passages', 'id', '{f['passage']}')"
    naming = json.dumps([f"memo://passage/{f['passage']}"])
    return {
        # -- erasing (issue 29's first route, and its variations)
        "issue 29: erase all, checks immediate": [
            "SET CONSTRAINTS ALL IMMEDIATE",
            _GATE,
            erase_all,
        ],
        "erase all, checks deferred": [_GATE, erase_all],
        "erase by id, checks immediate": ["SET CONSTRAINTS ALL IMMEDIATE", _GATE, erase_one],
        "erase by id, an audit row naming nothing": [
            _GATE,
            erase_one,
            _AUDIT.format(passage=f["passage"], erased="[]"),
        ],
        "erase by id, an audit row naming it, steps left out": [
            _GATE,
            erase_one,
            _AUDIT.format(passage=f["passage"], erased=naming),
        ],
        "erase by id, an audit row that is not JSON": [
            _GATE,
            erase_one,
            _AUDIT.format(passage=f["passage"], erased="not json"),
            "SELECT memors_purge_pending(currval(pg_get_serial_sequence('purges', 'id')))",
        ],
        "erase by id, an earlier purge's audit row": [
            _GATE,
            erase_one,
            f"SELECT memors_purge_pending({f['audit']})",
        ],
        "erase by a column purge does not erase by": [
            _GATE,
            "SELECT memors_erase('facts', 'predicate', 'leader')",
            _AUDIT.format(passage=f["passage"], erased="[]"),
            "SELECT memors_purge_pending(currval(pg_get_serial_sequence('purges', 'id')))",
        ],
        "erase from a table that is not raw": [
            _GATE,
            "SELECT memors_erase('work_items', 'id', '1')",
        ],
        "erase from a schema-qualified name": [
            _GATE,
            f"SELECT memors_erase('public.passages', 'id', '{f['passage']}')",
        ],
        "erase with NULL arguments": [_GATE, "SELECT memors_erase(NULL, NULL, NULL)"],
        "erase by an empty id": [_GATE, "SELECT memors_erase('passages', 'id', '')"],
        "erase through a temporary log table": [
            "CREATE TEMP TABLE purge_erasures(target text) ON COMMIT DROP",
            "SET LOCAL search_path = pg_temp, public",
            _GATE,
            erase_one,
        ],
        # -- an entity's names (issue 31: purge erases them, nothing else does)
        "an entity's aliases erased without a purge": [
            _GATE,
            f"SELECT memors_erase('aliases', 'entity', '{f['entity']}')",
        ],
        "the corrections about an entity erased without a purge": [
            _GATE,
            f"SELECT memors_erase('corrections', 'target', 'memo://entity/{f['entity']}')",
        ],
        "renames deleted": ["DELETE FROM entity_names"],
        "alias retractions deleted with the gate open": [_GATE, "DELETE FROM alias_changes"],
        "a plain DELETE with the gate open": [
            _GATE,
            f"DELETE FROM passages WHERE id = '{f['passage']}'",
        ],
        # -- a past version gains a passage
        "a passage added to version 1, backdated": [_FORGED_PASSAGE.format(**f, version=1)],
        "a passage linked into an existing version 2": [
            "INSERT INTO version_passages(document, version, position, passage) "
            f"VALUES ('{f['later']}', 2, 99, '{f['passage']}')"
        ],
        "a passage added past a temporary document_versions": [
            "CREATE TEMP TABLE document_versions AS SELECT *, now() AS x "
            "FROM public.document_versions",
            "SET LOCAL search_path = pg_temp, public",
            _FORGED_PASSAGE.format(**f, version=1),
        ],
        "the version trigger switched off": [
            "ALTER TABLE passages DISABLE TRIGGER passages_version_unsealed",
            _FORGED_PASSAGE.format(**f, version=1),
        ],
        # -- a finished work item
        "a done item reopened": [f"UPDATE work_items SET status = 'open' WHERE id = {f['done']}"],
        "a done item finished again": [
            f"UPDATE work_items SET status = 'skipped' WHERE id = {f['done']}"
        ],
        "a done item reopened by upsert": [
            f"INSERT INTO work_items SELECT * FROM work_items WHERE id = {f['done']} "
            "ON CONFLICT (id) DO UPDATE SET status = 'open'"
        ],
        "a done item deleted": [f"DELETE FROM work_items WHERE id = {f['done']}"],
        "work items truncated": ["TRUNCATE work_items"],
        # -- derived tables and the state that drives work
        "postings rewritten": ["UPDATE search_postings SET tf = tf + 7"],
        "postings deleted": ["DELETE FROM search_postings"],
        "a posting added": [
            f"INSERT INTO search_postings(term, rowid, tf, length) VALUES (1, {f['prowid']}, 1, 1)"
        ],
        "index statistics rewritten": ["UPDATE search_stats SET docs = docs * 10"],
        "document frequencies rewritten": ["UPDATE search_df SET n = 1"],
        "an indexed row dropped": ["DELETE FROM search_docs"],
        "the index queue fed": [f"INSERT INTO search_queue(rowid) VALUES ({f['prowid']})"],
        "the index truncated": ["TRUNCATE search_postings, search_docs, search_stats"],
        "vector counts rewritten": ["UPDATE vector_stats SET vectors = 0"],
        "the index rebuilt by hand": ["SELECT memors_search_rebuild()"],
        "a row taken out of the index by hand": [
            f"SELECT memors_search_remove('p', {f['prowid']})"
        ],
        "a row indexed again by hand": [f"SELECT memors_search_refresh('f', '{f['fact']}')"],
        "an owner-rights trigger on a temporary table": [
            "CREATE TEMP TABLE facts(rowid bigint, id text) ON COMMIT DROP",
            "CREATE TRIGGER t AFTER DELETE ON pg_temp.facts "
            "FOR EACH ROW EXECUTE FUNCTION memors_search_row()",
            f"INSERT INTO pg_temp.facts VALUES ({f['prowid']}, 'x')",
            "DELETE FROM pg_temp.facts",
        ],
        "junk pending steps": [
            _AUDIT.format(passage=f["passage"], erased="[]"),
            "INSERT INTO purge_pending(purge, steps) "
            "VALUES (currval(pg_get_serial_sequence('purges', 'id')), 'not json')",
        ],
        "null pending steps": [
            _AUDIT.format(passage=f["passage"], erased="[]"),
            "INSERT INTO purge_pending(purge, steps) "
            "VALUES (currval(pg_get_serial_sequence('purges', 'id')), null)",
        ],
        "a vacuum asked for in purge_pending": [
            _AUDIT.format(passage=f["passage"], erased="[]"),
            "INSERT INTO purge_pending(purge, steps) "
            "VALUES (currval(pg_get_serial_sequence('purges', 'id')), '[\"vacuum\"]')",
        ],
        "a vacuum asked for without a purge": [
            _AUDIT.format(passage=f["passage"], erased="[]"),
            "SELECT memors_purge_pending(currval(pg_get_serial_sequence('purges', 'id')))",
        ],
        "pending steps asked for by NULL": ["SELECT memors_purge_pending(NULL)"],
        "the audit rewritten": ["UPDATE purges SET erased = '[]'"],
        # -- the table-level and session-level switches
        "MERGE over passages": [
            "MERGE INTO passages p USING (SELECT id FROM passages) s ON p.id = s.id "
            "WHEN MATCHED THEN UPDATE SET text = 'rewritten'"
        ],
        "MERGE deleting work items": [
            "MERGE INTO work_items w USING (SELECT id FROM work_items) s ON w.id = s.id "
            "WHEN MATCHED THEN DELETE"
        ],
        "a rule rewriting inserts": ["CREATE RULE r AS ON INSERT TO work_items DO INSTEAD NOTHING"],
        "a trigger of its own": [
            "CREATE TRIGGER t BEFORE INSERT ON passages "
            "FOR EACH ROW EXECUTE FUNCTION memors_refuse_update()"
        ],
        "the work-item trigger dropped": [
            "DROP TRIGGER work_items_finished ON work_items",
            f"UPDATE work_items SET status = 'open' WHERE id = {f['done']}",
        ],
        "the erase function replaced": [
            "CREATE OR REPLACE FUNCTION memors_erase(tbl text, col text, val text) "
            "RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'"
        ],
        "the erase function made the caller's": [
            "ALTER FUNCTION memors_erase(text, text, text) SECURITY INVOKER"
        ],
        # -- the profiles the substitution check reads (added once, never rewritten)
        "a profile rewritten": ["UPDATE passage_profiles SET data = data || ' forged'"],
        "profiles truncated": ["TRUNCATE passage_profiles"],
        "replica mode": [
            "SET LOCAL session_replication_role = replica",
            f"UPDATE work_items SET status = 'open' WHERE id = {f['done']}",
        ],
        "SET ROLE to the owner": [
            "SELECT set_config('role', tableowner, true) FROM pg_tables "
            "WHERE tablename = 'passages'",
            "DELETE FROM search_postings",
        ],
        "SET SESSION AUTHORIZATION to the owner": [
            "SELECT set_config('session_authorization', tableowner, true) FROM pg_tables "
            "WHERE tablename = 'passages'",
            "DELETE FROM search_postings",
        ],
    }


def _refused(exc: psycopg.Error) -> bool:
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return True
    return isinstance(exc, psycopg.errors.RaiseException) and str(exc).startswith("memors: ")


def _attack(url: str, routes: dict[str, list[str]]) -> dict[str, str]:
    """The routes the database let through (or that failed for another reason)."""
    let_through = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for route, statements in routes.items():
            try:
                with conn.transaction():
                    for statement in statements:
                        conn.execute(statement)
            except psycopg.Error as exc:
                if not _refused(exc):
                    let_through[route] = f"failed otherwise: {type(exc).__name__}: {exc}"
            else:
                let_through[route] = "let through"
    return let_through


def test_every_route_to_rewrite_history_is_refused_to_the_application_role(seeded):  # noqa: F811
    with psycopg.connect(seeded.owner_url, autocommit=True) as conn:
        facts = _facts(conn)
    before = _snapshot(seeded.owner_url)
    routes = _routes(facts)
    assert len(routes) >= 35
    assert _attack(seeded.app_url, routes) == {}
    assert _snapshot(seeded.owner_url) == before
    with Memory.open(seeded.app_url) as memory:  # what a user sees
        assert memory.search("forged sentence").results == []
        assert memory.search("Raft").results


def test_a_purge_as_the_application_role_records_its_own_steps(seeded):  # noqa: F811
    with Memory.open(seeded.app_url) as memory:
        gone = memory.remember("[[Keystone]] holds the Zq9tappsecret phrase.", uri="keystone.txt")
        memory.rename_entity("Keystone", "Zq9tappname")
        purged = memory.purge(gone.document)
        assert purged.audit and not purged.finished
        # The renamed entity went with its passage, its names with it.
        assert any(a.startswith("memo://entity/") for a in purged.erased)
    with psycopg.connect(seeded.owner_url, autocommit=True) as conn:
        steps = conn.execute(
            "SELECT steps FROM purge_pending WHERE purge = %s", (purged.audit,)
        ).fetchone()[0]
        assert json.loads(steps) == ["vacuum"]
        assert conn.execute("SELECT count(*) FROM purge_erasures").fetchone()[0] == 0
        for table in ("aliases", "entity_names", "corrections"):
            left = conn.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE '%Zq9tapp%'")
            assert left.fetchone()[0] == 0, table
    with Memory.open(seeded.owner_url) as memory:  # the owner's next write finishes it
        from .test_purge import finish

        finish(memory)
    with psycopg.connect(seeded.owner_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM purge_pending").fetchone()[0] == 0


def test_memors_remembers_inside_a_savepoint_as_the_application_role(seeded):  # noqa: F811
    # A version written in a savepoint is still this transaction's own.
    with Memory.open(seeded.app_url) as memory:
        with memory.store.write():  # remember's own write is a savepoint in it
            out = memory.remember("[[Nested]] first text.", uri="nested.txt")
            again = memory.remember("[[Nested]] second text, a new version.", uri="nested.txt")
        assert again.document == out.document
        assert memory.search("Nested second").results


def _made_at_schema_6(owner_url: str) -> None:
    """A store as memors left it before migration 8, with a page done and a
    document in two versions."""

    from memors_core.storage.postgres import tx as pg_tx
    from memors_core.storage.postgres.tx import PgTx
    from memors_core.storage.sql.queue import SqlCounters
    from memors_core.storage.sql.records import SqlPassages
    from memors_core.storage.sql.tx import SqlTx

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection, "SCHEMA_VERSION", 6)
        # (memors of then: numbers as the highest row's plus one, counters in
        # one row, passages inserted one statement per row)
        patch.setattr(PgTx, "tick", SqlTx.tick)
        patch.setattr(PgTx, "reserve", SqlTx.reserve)
        patch.setattr(pg_tx, "PgCounters", SqlCounters)
        patch.setattr(pg_tx, "PgPassages", SqlPassages)
        with Memory.open(owner_url) as memory:
            # Today's code reads the corrections' tables (a later migration's):
            # they stand in while it writes, and go before the upgrade.
            with psycopg.connect(owner_url, autocommit=True) as conn:
                conn.execute(schema.V10)
            for i, text in enumerate(passages_about("Raft", 4)):
                memory.remember(text, uri=f"raft-{i}.txt")
            item = next(i for i in memory.compact().items if i.kind == "page")
            text = "\n".join(
                p["text"].replace("[[", "").replace("]]", "") for p in item.payload["passages"]
            )
            assert memory.submit(item.id, content=text, title="Raft").stored
            memory.remember("[[Raft]] a second version of the first.", uri="raft-0.txt")
    with psycopg.connect(owner_url, autocommit=True) as conn:  # an earlier purge's audit
        conn.execute(_AUDIT.format(passage="gone", erased='["memo://passage/gone"]'))
        conn.execute("DROP TABLE corrections, entity_names, alias_changes")
    assert schema.SCHEMA_VERSION > 6


def test_a_store_made_before_the_fix_is_upgraded_by_the_migration():
    """Schema 6 granted as before (writes on the index, on purge_pending,
    DELETE on work items): opening it as the owner migrates it, and the
    migration takes those writes back before the grant is run again."""
    from .conftest import roles_database

    with roles_database(_made_at_schema_6) as roles:
        with psycopg.connect(roles.owner_url, autocommit=True) as conn:
            assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == 6
            for table in ("search_postings", "search_stats", "purge_pending", "work_items"):
                conn.execute(f'GRANT INSERT, UPDATE, DELETE ON {table} TO "{roles.app}"')
        Memory.open(roles.owner_url).close()  # the owner's open migrates
        with psycopg.connect(roles.owner_url, autocommit=True) as conn:
            assert (
                conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
                == schema.SCHEMA_VERSION
            )
            facts = _facts(conn)
        before = _snapshot(roles.owner_url)
        routes = _routes(facts)
        assert _attack(roles.app_url, routes) == {}
        grant_application_role(roles.owner_url, roles.app)
        assert _attack(roles.app_url, routes) == {}
        assert _snapshot(roles.owner_url) == before
        with Memory.open(roles.app_url) as memory:  # and memors works as that role
            memory.remember("[[Raft]] after the upgrade.", uri="after.txt")
            assert memory.search("after the upgrade").results


@pytest.mark.semantic
def test_the_application_role_adds_vectors_and_only_memors_takes_them_away():
    """On a server with pgvector: the role's remember adds vectors and its
    forget takes one away (by the owner's trigger), but it can neither
    change nor delete a vector, nor the counts, itself."""
    import uuid

    from psycopg import sql

    from memors_core import semantic
    from memors_core.testing import pgvector, test_engine

    if test_engine() != "postgres":
        pytest.skip("postgres only")
    pgvector.require_server()
    admin = pgvector.server()
    tag = uuid.uuid4().hex[:8]
    owner, app, db = f"memors_t_vowner_{tag}", f"memors_t_vapp_{tag}", f"memors_t_vdb_{tag}"

    def url(role: str, dbname: str) -> str:
        return admin.replace("postgres@/postgres?", f"{role}@/{dbname}?", 1)

    with psycopg.connect(admin, autocommit=True) as conn:
        for role in (owner, app):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(owner))
        )
    try:
        with psycopg.connect(url("postgres", db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")  # a superuser's step
        with Memory.open(url(owner, db)) as memory:  # the owner migrates, vectors set up
            assert memory.store.capabilities.vectors
        grant_application_role(url(owner, db), app)
        with Memory.open(url(app, db)) as memory:
            kept = memory.remember("[[Lighthouse]] keepers trimmed the wick at dusk.", uri="a.txt")
            gone = memory.remember("[[Lighthouse]] storms broke the lantern glass.", uri="b.txt")
            assert memory.wait_for_vectors()  # (made after remember returns)
            memory.forget(gone.passages[0])
            assert memory.search("the keeper of the light", mode="semantic").results
        with psycopg.connect(url(owner, db), autocommit=True) as conn:
            count = conn.execute("SELECT count(*) FROM passage_vectors").fetchone()[0]
            assert count == len(kept.passages) == 1
            assert conn.execute("SELECT sum(vectors) FROM vector_stats").fetchone()[0] == count
        before = {t: _contents(url(owner, db), t) for t in ("passage_vectors", "vector_stats")}
        routes = {
            "a vector rewritten": ["UPDATE passage_vectors SET vector = vector"],
            "a vector deleted": ["DELETE FROM passage_vectors"],
            "vectors truncated": ["TRUNCATE passage_vectors"],
            "a vector replaced by upsert": [
                "INSERT INTO passage_vectors SELECT * FROM passage_vectors "
                "ON CONFLICT (passage) DO UPDATE SET vector = excluded.vector"
            ],
            "counts rewritten": ["UPDATE vector_stats SET vectors = 0"],
            "an owner-rights trigger on a temporary table": [
                "CREATE TEMP TABLE passages(rowid bigint) ON COMMIT DROP",
                "CREATE TRIGGER t AFTER DELETE ON pg_temp.passages "
                "FOR EACH ROW EXECUTE FUNCTION memors_vectors_drop()",
            ],
        }
        assert _attack(url(app, db), routes) == {}
        assert {t: _contents(url(owner, db), t) for t in before} == before
        # The owner's function replaces only a vector of an older kind, and
        # only with one of the kind memors makes: a no-op on these.
        with psycopg.connect(url(app, db), autocommit=True) as conn:
            for kind in ("another kind", semantic.KIND):
                conn.execute(
                    "SELECT memors_vectors_remake(passage, vector, %s) FROM passage_vectors",
                    (kind,),
                )
        assert {t: _contents(url(owner, db), t) for t in before} == before
        # A vector of the text alone (made before kinds) is made again by the role.
        with psycopg.connect(url(owner, db), autocommit=True) as conn:
            conn.execute("UPDATE passage_vectors SET kind = %s", (semantic.TEXT_ONLY,))
        with Memory.open(url(app, db)) as memory:
            assert memory.vectors_waiting() == 1
            assert memory.reindex_vectors().added == 1
        with psycopg.connect(url(owner, db), autocommit=True) as conn:
            kinds = conn.execute("SELECT kind FROM passage_vectors").fetchall()
        assert kinds == [(semantic.KIND,)]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )
            for role in (app, owner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
