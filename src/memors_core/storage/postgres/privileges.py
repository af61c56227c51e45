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

from collections.abc import Iterable

from memors_core.storage.sql.tables import RAW_TABLES

#: The function through which purge erases raw rows (owned by the tables'
#: owner, running with its rights; EXECUTE is not granted to PUBLIC).
ERASE_FUNCTION = "memors_erase"

#: The transaction-local setting that opens purge's gate.
GATE = "memors.purge_gate"


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


#: Tables an application role may read and append to, never change.
def append_only_tables() -> tuple[str, ...]:
    return (*RAW_TABLES, "mentions", "aliases", "purges")


def grant_statements(conn, role: str) -> list[str]:
    """The statements that make ``role`` an application role of the store
    ``conn`` is connected to (every table of its schema, as it is now)."""
    from psycopg import sql

    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "AND relkind IN ('r', 'p') ORDER BY relname"
        )
    ]
    append_only = set(append_only_tables())
    who = sql.Identifier(role)

    def render(template: str, *names: str) -> str:
        return (
            sql.SQL(template).format(*(sql.Identifier(n) for n in names), role=who).as_string(conn)
        )

    out = [render("GRANT USAGE ON SCHEMA {} TO {role}", schema)]
    for table in tables:
        out.append(render("REVOKE ALL ON TABLE {} FROM {role}", table))
        if table == "schema_migrations":
            out.append(render("GRANT SELECT ON TABLE {} TO {role}", table))
        elif table == "entities":
            # Merging entities points them at a new canonical one; names never change.
            out.append(render("GRANT SELECT, INSERT ON TABLE {} TO {role}", table))
            out.append(render("GRANT UPDATE (canonical) ON TABLE {} TO {role}", table))
        elif table in append_only:
            out.append(render("GRANT SELECT, INSERT ON TABLE {} TO {role}", table))
        else:
            out.append(render("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {} TO {role}", table))
    out.append(render("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {role}", schema))
    out.append(
        render(
            f"GRANT EXECUTE ON FUNCTION {{}}.{ERASE_FUNCTION}(text, text, text) TO {{role}}", schema
        )
    )
    return out


def grant_application_role(url: str, role: str) -> list[str]:
    """Make the existing login role ``role`` an application role of the
    store at ``url`` (an address connecting as the tables' owner or a
    superuser, after memors has migrated the store); the statements run.

    Run it again after an upgrade that adds tables. The role never owns
    anything, so it can neither switch a trigger off nor drop one."""
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
    except psycopg.Error as exc:
        raise MemorsError(
            f"could not grant {role!r} on {safe_location(url)}: {one_line(exc, _password(url))}"
        ) from None
    return statements
