"""Who may change what in a PostgreSQL store: purge's one route to erase
raw rows, and the application role that cannot tamper with them.

Triggers refuse every UPDATE and DELETE of a raw row, but they bind only
roles that cannot switch them off: the tables' owner can
(``ALTER TABLE … DISABLE TRIGGER``) and so can a superuser
(``SET session_replication_role = replica``). The agents' role should
therefore be an *application role*: it may read and append raw rows, change
the mutable ones (work items, counters, marks, the change log …), and erase
raw rows only through :data:`ERASE_FUNCTION`, a ``SECURITY DEFINER``
function owned by the tables' owner. That function works only while purge's
gate is open (:func:`memors_core.storage.postgres.purge.erasing`), and a
deferred check refuses to commit, for such a role, any erasure whose
transaction wrote no audit row in ``purges`` (which no role but the owner
can change or delete). The owner and superusers are exempt from that check:
they can switch every check off anyway.

:func:`grant_application_role` grants a role exactly that (docs/postgres.md,
"Roles and privileges").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memors_core.storage.sql.tables import RAW_TABLES

if TYPE_CHECKING:
    import psycopg

#: The function through which purge erases raw rows (owned by the tables'
#: owner, running with its rights; EXECUTE is not granted to PUBLIC).
ERASE_FUNCTION = "memors_erase"

#: The transaction-local setting that opens purge's gate.
GATE = "memors.purge_gate"

T_TEXT = 'TEXT COLLATE "C"'


def _erase_function(verb: str, tables: tuple[str, ...]) -> str:
    """``verb`` (CREATE, or CREATE OR REPLACE) :data:`ERASE_FUNCTION`, erasing from ``tables``."""
    allowed = ", ".join(f"'{t}'" for t in tables)
    return f"""{verb} FUNCTION {ERASE_FUNCTION}(tbl text, col text, val text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    erased bigint;
BEGIN
    IF current_setting('{GATE}', true) IS DISTINCT FROM 'open' THEN
        RAISE EXCEPTION 'memors: rows are erased only by purge'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF tbl IS NULL OR tbl <> ALL (ARRAY[{allowed}]) THEN
        RAISE EXCEPTION 'memors: purge erases nothing from %', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('DELETE FROM %I WHERE %I = $1', tbl, col) USING val;
    GET DIAGNOSTICS erased = ROW_COUNT;
    RETURN erased;
END $$;"""


def _audit_checks(tables: tuple[str, ...]) -> str:
    return "".join(
        f"CREATE CONSTRAINT TRIGGER {t}_erasure_audited AFTER DELETE ON {t}\n"
        "    DEFERRABLE INITIALLY DEFERRED\n"
        "    FOR EACH ROW EXECUTE FUNCTION memors_erasure_audited();\n"
        for t in tables
    )


def _search_path(function: str) -> str:
    return (
        f"    EXECUTE format('ALTER FUNCTION {function} '\n"
        "                   'SET search_path = %I, pg_temp', current_schema());\n"
    )


def erasure_sql(tables: Iterable[str]) -> str:
    """The schema's erasure route for ``tables`` (the raw tables purge
    erases from): :data:`ERASE_FUNCTION` and the deferred audit check."""
    tables = tuple(tables)
    return f"""
-- Purge's route to erase raw rows for a role that may not DELETE them: it
-- runs with the owner's rights, only while the purge gate is open.
{_erase_function("CREATE", tables)}
REVOKE ALL ON FUNCTION {ERASE_FUNCTION}(text, text, text) FROM PUBLIC;

-- At commit: a raw row erased by a role other than the owner needs the
-- audit row of its purge, written in the same transaction.
CREATE FUNCTION memors_erasure_audited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')
    THEN
        RETURN NULL;  -- the owner or a superuser: it can switch any check off
    END IF;
    IF NOT EXISTS (SELECT 1 FROM purges WHERE xmin = pg_current_xact_id()::xid) THEN
        RAISE EXCEPTION 'memors: % rows were erased without a purge audit record',
            TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;
{_audit_checks(tables)}
-- Both resolve names in the store's schema only, never a caller's
-- temporary table of the same name.
DO $$
BEGIN
{_search_path(f"{ERASE_FUNCTION}(text, text, text)")}{_search_path("memors_erasure_audited()")}END $$;
"""


def erasure_extended_sql(tables: Iterable[str], added: Iterable[str]) -> str:
    """A later migration's SQL that extends the erasure route to the raw
    tables ``added``: :data:`ERASE_FUNCTION` replaced to erase from every
    one of ``tables`` (its owner and grants stay), and the audit check on
    the new ones."""
    tables = tuple(tables)
    return f"""
{_erase_function("CREATE OR REPLACE", tables)}
{_audit_checks(tuple(added))}
-- (a replaced function loses its settings: set its search path again)
DO $$
BEGIN
{_search_path(f"{ERASE_FUNCTION}(text, text, text)")}END $$;
"""


#: The column(s) purge erases each raw table's rows by (what
#: :data:`ERASE_FUNCTION` accepts since migration 8).
ERASED_BY: dict[str, tuple[str, ...]] = {
    "documents": ("id",),
    "document_versions": ("document",),
    "version_passages": ("passage", "document"),
    "passages": ("id",),
    "facts": ("id",),
    "tombstones": ("target",),
    "pages": ("id",),
    "page_sources": ("page",),
    "page_sentences": ("page",),
    "page_facts": ("page",),
    "entities": ("id",),
    "mentions": ("passage",),
}

#: What a purge leaves to do after its commit, as ``purge_pending`` records
#: it (memors_core.storage.postgres.purge.STEPS); only
#: :data:`PENDING_FUNCTION` writes it.
FINISHING_STEPS: tuple[str, ...] = ("vacuum",)

#: The function through which a purge records its finishing steps.
PENDING_FUNCTION = "memors_purge_pending"

#: Trigger functions that keep derived tables (the search index, its
#: statistics, the vectors' counts) and run with the owner's rights, so
#: that no other role needs to write those tables.
DERIVED_WRITERS = (
    "memors_search_row()",
    "memors_search_alias()",
    "memors_search_tombstone()",
    "memors_search_flush()",
    "memors_search_mention()",
    "memors_search_merge()",
)
#: The same for the vectors' tables, which exist only where pgvector does.
VECTOR_WRITERS = ("memors_vectors_count()", "memors_vectors_drop()")
#: The function an application role replaces a vector of an older kind with
#: (memors_core.storage.postgres.vectors.KINDS).
REMAKE = "memors_vectors_remake(bigint, vector, text)"

#: The function a client counting a bulk insert's terms reads its
#: namespace's index number from (made if missing: ``postgres/terms.py``).
INDEX_OF = "memors_search_index_of(text)"

#: memors' functions that any role may call: what searches call.
PUBLIC_FUNCTIONS = ("memors_search_vector", "memors_written_here", "memors_owner_session")


def _definer(function: str) -> str:
    """Make ``function`` run with its owner's rights, resolving names in the
    store's schema only (inside a ``DO`` block)."""
    return (
        f"    EXECUTE format('ALTER FUNCTION {function} SECURITY DEFINER "
        "SET search_path = %I, pg_temp', current_schema());\n"
    )


def _revoke_public() -> str:
    """``DO`` body lines: no EXECUTE for PUBLIC on memors' own functions but
    :data:`PUBLIC_FUNCTIONS` (a role could otherwise attach an owner-rights
    trigger function to a temporary table of its own)."""
    keep = ", ".join(f"'{f}'" for f in PUBLIC_FUNCTIONS)
    return f"""    FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace
               AND p.proname LIKE 'memors\\_%' AND p.proname NOT IN ({keep}) LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.sig);
    END LOOP;
"""


def _revoke_granted() -> str:
    """``DO`` body lines: the write privileges an earlier grant gave on what
    is now read-only to an application role, taken back from every role but
    the owner (a store upgraded in place is safe before the grant is run
    again)."""
    read_only = ", ".join(f"'{t}'" for t in _READ_ONLY_V8)
    return f"""    FOR r IN SELECT c.relname, a.grantee, a.privilege_type
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.relnamespace = current_schema()::regnamespace
               AND a.grantee <> c.relowner
               AND ((c.relname IN ({read_only})
                     AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'))
                    OR (c.relname = 'work_items' AND a.privilege_type IN ('DELETE', 'TRUNCATE'))
                    OR (c.relname = 'passage_vectors'
                        AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE'))
                    OR (c.relname = 'passage_profiles'
                        AND a.privilege_type IN ('UPDATE', 'TRUNCATE'))) LOOP
        EXECUTE format('REVOKE %s ON TABLE %I FROM %s', r.privilege_type, r.relname,
                       CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE r.grantee::regrole::text END);
    END LOOP;
"""


def _guarded_erase(erased_by: dict[str, tuple[str, ...]], logged: str = "val") -> str:
    """:data:`ERASE_FUNCTION` as migration 8 made it (checked arguments, the
    erasure logged as ``logged``), erasing the tables and columns of ``erased_by``."""
    allowed = ", ".join(f"'{t}'" for t in erased_by)
    pairs = ", ".join(f"'{t}.{c}'" for t, cols in erased_by.items() for c in cols)
    return f"""CREATE OR REPLACE FUNCTION {ERASE_FUNCTION}(tbl text, col text, val text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    erased bigint;
BEGIN
    IF current_setting('{GATE}', true) IS DISTINCT FROM 'open' THEN
        RAISE EXCEPTION 'memors: rows are erased only by purge'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF tbl IS NULL OR tbl <> ALL (ARRAY[{allowed}]) THEN
        RAISE EXCEPTION 'memors: purge erases nothing from %', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF col IS NULL OR tbl || '.' || col <> ALL (ARRAY[{pairs}]) THEN
        RAISE EXCEPTION 'memors: purge erases no % rows by %', tbl, col
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF val IS NULL OR val = '' THEN
        RAISE EXCEPTION 'memors: purge erases rows by an id, not %', quote_nullable(val)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('DELETE FROM %I WHERE %I = $1', tbl, col) USING val;
    GET DIAGNOSTICS erased = ROW_COUNT;
    IF NOT memors_owner_session() THEN
        INSERT INTO purge_erasures(target) VALUES ({logged});
    END IF;
    RETURN erased;
END $$;
"""


#: An entity's names, erased with it (migration 12, issue 31): the aliases
#: it was given, the renames and alias retractions people recorded, and the
#: corrections about it (a rename's record holds both names).
NAME_TABLES = ("aliases", "entity_names", "alias_changes", "corrections")


def erase_names_sql() -> str:
    """Migration 12: purge erases an entity's names with it (by entity), by
    the same route and under the same audit as its other rows; the DELETE
    triggers of the correction tables give way to purge's gate only. And
    the erasure is logged by the id an address ends with (a correction is
    erased by the entity's address, and the audit names addresses). And
    the trigger that re-indexes a renamed entity runs with the owner's
    rights, as every writer of the search index does."""
    erased_by = {**ERASED_BY, **{t: ("entity",) for t in NAME_TABLES[:3]}}
    erased_by["corrections"] = ("target",)
    guards = "".join(
        f"DROP TRIGGER {t}_no_delete ON {t};\n"
        f"CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t} "
        "FOR EACH ROW EXECUTE FUNCTION memors_refuse_delete();\n"
        for t in NAME_TABLES[1:]
    )
    return f"""
{_guarded_erase(erased_by, logged="substring(val FROM '[^/]*$')")}
{guards}{_audit_checks(NAME_TABLES)}
DO $$
DECLARE
    f record;
BEGIN
{_search_path(f"{ERASE_FUNCTION}(text, text, text)")}{_definer("memors_search_names()")}\
{_revoke_public()}END $$;
"""


# Long: a shipped migration (8), read as the one SQL script it is; stores
# record what it ran, so its text does not change.
def guarded_history_sql() -> str:
    """Migration 8 (issue 29): what the application role may write is what
    memors' own operations write, and nothing it writes rewrites history.

    - :data:`ERASE_FUNCTION` checks its arguments (a raw table and a column
      purge erases by, a value) and logs what it erased in
      ``purge_erasures``, which only the owner's functions read and write;
      :data:`PENDING_FUNCTION` accepts the audit row of the running
      transaction only when that row names every id erased, empties the log
      and records the finishing steps; a deferred check refuses to commit
      while the log holds anything, and checked at once (``SET CONSTRAINTS
      … IMMEDIATE``) it refuses the erasure itself, since the audit row
      comes after it. No role's rights exempt it.
    - A passage or a version's passage link is added only to a version that
      the same transaction created: a past version never gains text.
    - A finished work item never changes its status.
    - The search index and the vectors' counts are written by trigger
      functions with the owner's rights, so the grants leave them read-only.
    """
    steps = json.dumps(list(FINISHING_STEPS))
    definers = "".join(_definer(f) for f in DERIVED_WRITERS)
    vector_definers = "".join(
        f"    IF to_regprocedure('{f}') IS NOT NULL THEN\n    {_definer(f)}    END IF;\n"
        for f in VECTOR_WRITERS
    )
    return f"""
-- Whether a row with this xmin was written by the running transaction (or
-- one of its savepoints, whose numbers it holds locks on).
CREATE FUNCTION memors_written_here(x xid) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT x = pg_current_xact_id()::xid
        OR EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid'
                   AND pid = pg_backend_pid() AND transactionid = x)
$$;

-- Whether the role that logged in (not one it may have SET ROLE to, nor a
-- function's owner) is the tables' owner or a superuser: it can switch any
-- check off, so the audit checks below do not bind it.
CREATE FUNCTION memors_owner_session() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT pg_has_role(session_user,
                       (SELECT relowner FROM pg_class WHERE oid = 'purges'::regclass), 'USAGE')
$$;

-- What the running transaction erased, until its purge's audit row names it.
CREATE TABLE purge_erasures(target {T_TEXT} NOT NULL);

{_guarded_erase(ERASED_BY)}
CREATE FUNCTION memors_erasures_audited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM purge_erasures) THEN
        RAISE EXCEPTION 'memors: rows were erased without a purge audit record naming them'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER purge_erasures_audited AFTER INSERT ON purge_erasures
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memors_erasures_audited();

CREATE FUNCTION {PENDING_FUNCTION}(audit bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    named text[];
BEGIN
    IF audit IS NULL OR NOT EXISTS (
        SELECT 1 FROM purges WHERE id = audit AND memors_written_here(xmin)
    ) THEN
        RAISE EXCEPTION 'memors: % is no purge audit record of this transaction', audit
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF memors_owner_session() THEN
        NULL;  -- the owner's audit records are its own business
    ELSIF NOT EXISTS (SELECT 1 FROM purge_erasures) THEN
        RAISE EXCEPTION 'memors: purge % erased nothing in this transaction', audit
            USING ERRCODE = 'insufficient_privilege';
    ELSE
        BEGIN
            SELECT array_agg(substring(a FROM '[^/]*$')) INTO named
            FROM purges, json_array_elements_text(erased::json) a WHERE id = audit;
        EXCEPTION WHEN invalid_text_representation OR invalid_parameter_value THEN
            named := NULL;
        END;
        IF named IS NULL OR EXISTS (
            SELECT 1 FROM purge_erasures WHERE target <> ALL (named)
        ) THEN
            RAISE EXCEPTION 'memors: purge audit record % does not name everything erased',
                audit USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    DELETE FROM purge_erasures;
    INSERT INTO purge_pending(purge, steps) VALUES (audit, '{steps}')
        ON CONFLICT (purge) DO NOTHING;
END $$;

-- A past version never gains a passage: a passage (version 1's text) or a
-- link of a later version goes only to a version this transaction wrote.
CREATE FUNCTION memors_version_unsealed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM document_versions
        WHERE document = NEW.document AND version = NEW.version AND memors_written_here(xmin)
    ) THEN
        RAISE EXCEPTION 'memors: version % of document % is written: nothing is added to it',
            NEW.version, NEW.document USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER passages_version_unsealed BEFORE INSERT ON passages
    FOR EACH ROW EXECUTE FUNCTION memors_version_unsealed();
CREATE TRIGGER version_passages_version_unsealed BEFORE INSERT ON version_passages
    FOR EACH ROW EXECUTE FUNCTION memors_version_unsealed();

-- A finished work item stays finished (done once, skipped once, obsolete).
CREATE FUNCTION memors_item_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'open' AND NEW.status IS DISTINCT FROM OLD.status THEN
        RAISE EXCEPTION 'memors: work item % is % and stays so', OLD.id, OLD.status
            USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER work_items_finished BEFORE UPDATE ON work_items
    FOR EACH ROW EXECUTE FUNCTION memors_item_finished();

DO $$
DECLARE
    f record;
    r record;
BEGIN
{_search_path(f"{ERASE_FUNCTION}(text, text, text)")}{_definer("memors_erasures_audited()")}\
{_search_path(f"{PENDING_FUNCTION}(bigint)")}{_search_path("memors_written_here(xid)")}{_search_path("memors_owner_session()")}\
{_search_path("memors_version_unsealed()")}{_search_path("memors_item_finished()")}{definers}{vector_definers}{_revoke_public()}{_revoke_granted()}END $$;
"""


#: Tables an application role may read and append to, never change.
def append_only_tables() -> tuple[str, ...]:
    return (
        *RAW_TABLES,
        "mentions",
        "aliases",
        "purges",
        # the corrections people make and what they name (issue 31)
        "corrections",
        "entity_names",
        "alias_changes",
    )


#: Tables an application role may only read: derived from other tables by
#: memors' own functions, or state that drives work and that only those
#: functions write (``purge_pending``: the owner's next write rewrites the
#: tables for it).
def read_only_tables() -> tuple[str, ...]:
    return (*_READ_ONLY_V8, "search_packs")


#: The read-only tables migration 8 took write privileges back on (its
#: text never changes; a later table is never granted them).
_READ_ONLY_V8 = (
    "schema_migrations",
    "search_postings",
    "search_docs",
    "search_stats",
    "search_df",
    "search_queue",
    "vector_stats",
    "purge_pending",
    "application_roles",
)


def grant_statements(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """The statements that make ``role`` an application role of the store
    ``conn`` is connected to (every table of its schema, as it is now)."""
    from psycopg import sql

    schema = conn.execute("SELECT current_schema()").fetchall()[0][0]
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "AND relkind IN ('r', 'p') ORDER BY relname"
        )
    ]
    append_only = set(append_only_tables())
    read_only = set(read_only_tables())
    who = sql.Identifier(role)
    # memors' functions this role may not call (a later migration's new ones too).
    keep = list(PUBLIC_FUNCTIONS)
    private = [
        r[0]
        for r in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace "
            "AND p.proname LIKE 'memors\\_%%' AND p.proname <> ALL (%s) ORDER BY 1",
            (keep,),
        )
    ]

    def render(template: str, *names: str) -> str:
        return (
            sql.SQL(template).format(*(sql.Identifier(n) for n in names), role=who).as_string(conn)
        )

    out = [render("GRANT USAGE ON SCHEMA {} TO {role}", schema)]
    for table in tables:
        out.append(render("REVOKE ALL ON TABLE {} FROM {role}", table))
        if table in read_only:
            out.append(render("GRANT SELECT ON TABLE {} TO {role}", table))
        elif table == "purge_erasures":
            pass  # only the owner's functions read or write it
        elif table == "work_items":
            # Items are created, refreshed and finished, never deleted.
            out.append(render("GRANT SELECT, INSERT, UPDATE ON TABLE {} TO {role}", table))
        elif table == "passage_profiles":
            # The words the substitution check reads of a passage: added
            # once, never rewritten; purge deletes them with their passage
            # (and a missing one is made again from the passage's text).
            out.append(render("GRANT SELECT, INSERT, DELETE ON TABLE {} TO {role}", table))
        elif table == "search_staged":
            # A bulk insert's terms, counted by the client for the flush at
            # commit, which reads and empties the table with its owner's rights.
            out.append(render("GRANT INSERT ON TABLE {} TO {role}", table))
        elif table == "passage_vectors":
            # A passage's vector is added once; its tombstone or purge takes it away.
            out.append(render("GRANT SELECT, INSERT ON TABLE {} TO {role}", table))
        elif table == "entities":
            # Merging entities points them at a new canonical one; names never change.
            out.append(render("GRANT SELECT, INSERT ON TABLE {} TO {role}", table))
            out.append(render("GRANT UPDATE (canonical) ON TABLE {} TO {role}", table))
        elif table in append_only:
            out.append(render("GRANT SELECT, INSERT ON TABLE {} TO {role}", table))
        else:
            out.append(render("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {} TO {role}", table))
    out.append(render("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {role}", schema))
    for function in private:
        # (schema-qualified by regprocedure's text when not on the search path)
        out.append(f"REVOKE EXECUTE ON FUNCTION {function} FROM PUBLIC")
    called = [f"{ERASE_FUNCTION}(text, text, text)"]
    for function in (f"{PENDING_FUNCTION}(bigint)", INDEX_OF):
        if function in private:
            called.append(function)
    for function in called:
        out.append(render(f"GRANT EXECUTE ON FUNCTION {{}}.{function} TO {{role}}", schema))
    for function in private:  # (its signature names pgvector's type, wherever that lives)
        if function.split("(")[0].rsplit(".", 1)[-1] == REMAKE.split("(")[0]:
            out.append(render(f"GRANT EXECUTE ON FUNCTION {function} TO {{role}}"))
    return out


#: Records a granted role, so that a migration grants it the new tables too.
RECORD_ROLE = (
    "INSERT INTO application_roles(role, granted_at) VALUES (%s, "
    "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')) "
    "ON CONFLICT (role) DO NOTHING"
)


def regrant(conn: psycopg.Connection[Any]) -> list[str]:
    """Run the grant again, inside ``conn``'s transaction (the owner's,
    migrating), for every recorded application role that still exists;
    returns their names."""
    if not conn.execute("SELECT to_regclass('application_roles') IS NOT NULL").fetchall()[0][0]:
        return []
    roles = [
        r[0]
        for r in conn.execute(
            "SELECT a.role FROM application_roles a JOIN pg_roles r ON r.rolname = a.role "
            "ORDER BY a.role"
        )
    ]
    for role in roles:
        for statement in grant_statements(conn, role):
            conn.execute(statement)
    return roles


def grant_application_role(url: str, role: str) -> list[str]:
    """Make the existing login role ``role`` an application role of the
    store at ``url`` (an address connecting as the tables' owner or a
    superuser, after memors has migrated the store); the statements run.

    The role is recorded in the store (``application_roles``): the owner's
    next migration (an upgrade of memors or of a kind that adds tables)
    grants it the new tables itself, in the migrating transaction. The role
    never owns anything, so it can neither switch a trigger off nor drop one."""
    import psycopg

    from memors_core.errors import MemorsError
    from memors_core.storage.postgres.addresses import one_line, safe_location
    from memors_core.storage.postgres.addresses import password as _password

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                raise MemorsError(f"no role {role!r} on {safe_location(url)}: create it first")
            statements = grant_statements(conn, role)
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
                if conn.execute("SELECT to_regclass('application_roles')").fetchall()[0][0]:
                    conn.execute(RECORD_ROLE, (role,))
    except psycopg.Error as exc:
        raise MemorsError(
            f"could not grant {role!r} on {safe_location(url)}: {one_line(exc, _password(url))}"
        ) from None
    return statements
