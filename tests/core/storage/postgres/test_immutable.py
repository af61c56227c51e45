"""Raw rows really are immutable on PostgreSQL: the application role of
docs/postgres.md cannot change or delete one by any route plain SQL offers,
yet memors works as that role (purge included); the tables' owner is
refused a plain UPDATE or DELETE by the triggers."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql

from memors_core.memory import Memory
from memors_core.testing import passages_about

from .test_purge import finish

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

#: The tables whose rows only purge erases, and the column a test erases by.
RAW = {
    "documents": "id",
    "document_versions": "document",
    "version_passages": "passage",
    "passages": "id",
    "facts": "id",
    "tombstones": "target",
    "pages": "id",
    "page_sources": "page",
    "page_sentences": "page",
    "page_facts": "page",
    "entities": "id",
    "mentions": "passage",
    "aliases": "entity",
    "purges": "target",
}


def _page_text(payload: dict) -> str:
    return "\n".join(p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"])


@pytest.fixture(scope="module")
def seeded(roles):
    """A row in every raw table, written by memors as the owner."""
    with Memory.open(roles.owner_url) as memory:
        for i, text in enumerate(passages_about("Raft", 4)):
            memory.remember(text, uri=f"raft-{i}.txt", title=f"Raft {i}")
        item = next(i for i in memory.compact().items if i.kind == "page")
        assert memory.submit(item.id, content=_page_text(item.payload), title="Raft").stored
        fact = memory.record_fact("Raft", "leader", "node 1")
        with memory.store.write() as tx:  # a version with its sentences and its facts
            raft = tx.entities.resolve("Raft", "default")
            previous = tx.pages.current(raft)
            cited = [f"memo://passage/{s.passage}" for s in tx.pages.sources(previous.id)]
            tx.pages.write(
                "default", raft, "Raft", previous.content, cited, previous, None, {},
                sentences=[("Raft elects a leader.", cited[:1]), ("Its leader is node 1.", [fact.fact])],
                facts=[fact.fact],
            )  # fmt: skip
        memory.remember("[[Raft]] was rewritten in a second version.", uri="raft-0.txt")
        gone = memory.remember("[[Paxos]] is forgotten soon.", uri="paxos.txt")
        memory.forget(gone.passages[0])
        erased = memory.remember("Purged at once.", uri="purged.txt")
        memory.purge(erased.document)
    with psycopg.connect(roles.owner_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO aliases(entity, namespace, alias, key, folded, created_at) "
            "SELECT id, namespace, 'Raft protocol', 'raft protocol', 'raft protocol', created_at "
            "FROM entities WHERE name = 'Raft'"
        )
        # Rows nothing refers to, so that erasing them is refused for no other reason.
        conn.execute(
            "INSERT INTO entities(id, namespace, name, key, folded, canonical, created_at) "
            "SELECT 'zz-orphan', namespace, 'Orphan', 'orphan', 'orphan', 'zz-orphan', "
            "created_at FROM entities LIMIT 1"
        )
        conn.execute(
            "INSERT INTO documents(id, namespace, uri, created_at) "
            "SELECT 'zz-orphan', namespace, NULL, created_at FROM documents LIMIT 1"
        )
        for table in RAW:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] > 0, table
    return roles


def _contents(url: str, table: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(f"SELECT t::text FROM {table} t ORDER BY 1")]


def _one_value(conn: psycopg.Connection, table: str, column: str) -> str:
    # The greatest: the rows nothing refers to where there are some.
    return conn.execute(f"SELECT max({column}::text) FROM {table}").fetchone()[0]


def _key(conn: psycopg.Connection, table: str) -> list[str]:
    """The columns of the table's primary key."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
            (table,),
        )
    ]


def _tampering(conn: psycopg.Connection, table: str, column: str) -> dict[str, list[str]]:
    """Every route plain SQL offers to change or delete a row of ``table``,
    each as the statements of one transaction."""
    value = _one_value(conn, table, column)
    literal = sql.Literal(value).as_string(conn)
    key = _key(conn, table)
    others = [
        r[0]
        for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            (table,),
        )
        if r[0] not in key
    ]
    changed = others[0] if others else key[0]
    return {
        "update": [f"UPDATE {table} SET {changed} = {changed}"],
        "delete": [f"DELETE FROM {table} WHERE {column} = {literal}"],
        "truncate": [f"TRUNCATE {table} CASCADE"],
        "upsert over an existing row": [
            f"INSERT INTO {table} SELECT * FROM {table} WHERE {column} = {literal} "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {changed} = excluded.{changed}"
        ],
        "disable its triggers": [
            f"ALTER TABLE {table} DISABLE TRIGGER ALL",
            f"DELETE FROM {table} WHERE {column} = {literal}",
        ],
        "drop its trigger": [
            f"DROP TRIGGER IF EXISTS {table}_no_delete ON {table}",
            f"DELETE FROM {table} WHERE {column} = {literal}",
        ],
        "replica mode": [
            "SET LOCAL session_replication_role = replica",
            f"DELETE FROM {table} WHERE {column} = {literal}",
        ],
        "the gate opened by hand": [
            "SELECT set_config('memors.purge_gate', 'open', true)",
            f"DELETE FROM {table} WHERE {column} = {literal}",
        ],
        "the erase function outside a purge": [
            f"SELECT memors_erase('{table}', '{column}', {literal})",
        ],
        "the erase function with the gate opened by hand, no audit": [
            "SELECT set_config('memors.purge_gate', 'open', true)",
            f"SELECT memors_erase('{table}', '{column}', {literal})",
        ],
        "the erase function on its own temporary audit table": [
            "CREATE TEMP TABLE purges(id int) ON COMMIT DROP",
            "INSERT INTO pg_temp.purges VALUES (1)",
            "SELECT set_config('memors.purge_gate', 'open', true)",
            f"SELECT memors_erase('{table}', '{column}', {literal})",
        ],
        "take the owner's role": [
            "SELECT set_config('role', tableowner, true) FROM pg_tables "
            f"WHERE tablename = '{table}'",
            f"DELETE FROM {table} WHERE {column} = {literal}",
        ],
    }


@pytest.mark.parametrize("table", sorted(RAW))
def test_the_application_role_can_change_no_raw_row_by_any_route(seeded, table):
    before = _contents(seeded.owner_url, table)
    with psycopg.connect(seeded.app_url, autocommit=True) as conn:
        routes = _tampering(conn, table, RAW[table])
        let_through = {}
        for route, statements in routes.items():
            try:
                with conn.transaction():
                    for statement in statements:
                        conn.execute(statement)
            except psycopg.errors.InsufficientPrivilege:
                continue  # refused: at the statement, or at commit
            except psycopg.Error as exc:
                let_through[route] = f"failed otherwise: {exc}"
            else:
                let_through[route] = "let through"
    assert let_through == {}
    assert _contents(seeded.owner_url, table) == before


def test_memors_works_as_the_application_role_and_the_owner_finishes_its_purge(seeded):
    marker = "Qvzk7approlemarker"
    with Memory.open(seeded.app_url) as memory:
        secret = memory.remember(f"The [[Vault]] opens with {marker}.", uri="vault.txt")
        for i, text in enumerate(passages_about("Vault", 4)):
            memory.remember(text, uri=f"vault-{i}.txt")
        item = next(i for i in memory.compact().items if i.kind == "page")
        page = memory.submit(item.id, content=_page_text(item.payload), title="Vault")
        assert page.stored
        fact = memory.record_fact("Vault", "word", "swordfish")
        forgotten = memory.forget(fact.fact)
        assert forgotten.status == "forgotten"
        purged = memory.purge(secret.document)
        assert purged.audit and not purged.earlier
        # Only the tables' owner may rewrite them: the purge waits for it.
        assert not purged.finished
        assert "unfinished-purge" in {f.rule for f in memory.lint().findings}
        with memory.store.read() as tx:
            assert tx.passages.get(secret.passages[0].rsplit("/", 1)[1]) is None
    with Memory.open(seeded.owner_url) as memory:  # the owner finishes it
        finish(memory)
        with memory.store.read() as tx:
            assert tx.purges.pending() == []
    with psycopg.connect(seeded.owner_url, autocommit=True) as conn:
        erased = conn.execute(
            "SELECT erased FROM purges WHERE id = %s", (purged.audit,)
        ).fetchone()[0]
        assert json.loads(erased) == purged.erased
        assert (
            conn.execute(
                "SELECT count(*) FROM passages WHERE text LIKE %s", (f"%{marker}%",)
            ).fetchone()[0]
            == 0
        )


@pytest.mark.parametrize("table", sorted(set(RAW) - {"mentions", "aliases"}))
def test_the_owner_is_refused_a_plain_update_or_delete_by_the_triggers(seeded, table):
    before = _contents(seeded.owner_url, table)
    with psycopg.connect(seeded.owner_url, autocommit=True) as conn:
        routes = _tampering(conn, table, RAW[table])
        for route in ("update", "delete", "truncate", "upsert over an existing row"):
            if table == "entities" and route in ("update", "upsert over an existing row"):
                continue  # entities may point to a new canonical one; see below
            with (
                pytest.raises(psycopg.errors.RaiseException, match="memors: "),
                conn.transaction(),
            ):
                for statement in routes[route]:
                    conn.execute(statement)
        if table == "entities":
            with pytest.raises(psycopg.errors.RaiseException, match="names are never modified"):
                conn.execute("UPDATE entities SET name = name || 'x'")
    assert _contents(seeded.owner_url, table) == before
