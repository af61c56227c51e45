"""Purge on PostgreSQL: erasing rows, the audit record and the finishing step.

Raw tables refuse DELETE unless purge's gate is open, and the gate is a
transaction-local setting (``memors.purge_gate``) that :func:`erasing`
opens inside its own write transaction and closes before it commits. The
rows are erased through ``memors_erase()``, a ``SECURITY DEFINER`` function
of the tables' owner, so the same code erases as the owner, as a superuser
and as an application role that holds no DELETE on raw tables
(:mod:`memors_core.storage.postgres.privileges`).

After the commit the text is still on disk: a deleted row stays in its
table's heap file (and an updated work item's old version too) until the
table is rewritten. The finishing step (:data:`STEPS`) is ``VACUUM FULL``
of every table of the store, which writes each into a new file and removes
the old one; it first waits for every transaction older than the purge on
the server, for which PostgreSQL would copy the erased rows along. The
write-ahead log, its archive and base backups keep the
text until they cycle; this engine does not promise otherwise
(``Capabilities.secure_erase`` is False).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from memors_core.errors import StoreBusy
from memors_core.log import get_logger
from memors_core.storage.postgres.privileges import (
    ERASE_FUNCTION,
    FINISHING_STEPS,
    GATE,
    NAME_TABLES,
    PENDING_FUNCTION,
)
from memors_core.storage.postgres.schema import ERASABLE
from memors_core.storage.sql.purges import SqlPurges

if TYPE_CHECKING:
    from memors_core.storage.postgres.connection import PgStore
    from memors_core.storage.postgres.tx import PgTx

log = get_logger("memors")

#: The finishing steps after the erasure commits, in the order they run.
STEPS: tuple[str, ...] = FINISHING_STEPS

#: How long a finishing step that must not wait (opening the store) waits
#: for a table's lock before it leaves the step for later.
NO_WAIT_LOCK_MS = 50


@contextlib.contextmanager
def erasing(store: PgStore) -> Iterator[PgTx]:
    """A write transaction in which raw rows may be erased."""
    with store.write() as tx:
        tx.hold_clocks()  # the erased rows' numbers are never handed out again
        store.conn.execute("SELECT set_config(%s, 'open', true)", (GATE,))
        yield tx
        store.conn.execute("SELECT set_config(%s, '', true)", (GATE,))


class PgPurges(SqlPurges):
    """:class:`memors_core.storage.api.Purges` on PostgreSQL."""

    def finisher(self) -> str | None:
        tables = store_tables(self.db)
        if all(allowed for _name, allowed, _owner in tables):
            return None
        return tables[0][2]

    def erase_rows(self, table: str, column: str, value: str) -> None:
        if table in ERASABLE or table in NAME_TABLES:
            # With the owner's rights: the connected role may hold no DELETE here.
            self.one(f"SELECT {ERASE_FUNCTION}(?, ?, ?)", (table, column, value))
        else:
            super().erase_rows(table, column, value)

    def erase_rows_many(self, table: str, column: str, values: Sequence[str]) -> None:
        if values and table in ERASABLE:
            # The same route, one row at a time in the server: one round trip.
            self.one(
                f"SELECT count({ERASE_FUNCTION}(?, ?, value)) FROM json_each(?)",
                (table, column, json.dumps(list(values))),
            )
        else:
            super().erase_rows_many(table, column, values)

    def mark_pending(self, audit: int) -> None:
        # Only memors' function writes purge_pending: it checks that this
        # transaction's audit record names everything erased, and which steps.
        self.one(f"SELECT {PENDING_FUNCTION}(CAST(? AS bigint))", (audit,))


# --- the finishing step (outside a transaction) -------------------------------------


def store_tables(store: PgStore) -> list[tuple[str, bool, str]]:
    """Every table of the store's schema, whether the connected role may
    vacuum it (its owner, the database's owner or a superuser), and its owner."""
    return store.all(
        "SELECT c.relname, pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE'), "
        "pg_get_userbyid(c.relowner) "
        "FROM pg_class c JOIN pg_database d ON d.datname = current_database() "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
        "ORDER BY c.relname"
    )


#: The first transaction still running (or snapshot still open) that began
#: before the newest unfinished purge committed: PostgreSQL keeps the erased
#: rows' old versions for it, so a rewrite now would copy them along.
_OLDER_THAN_PURGE = """
WITH purge AS (
    SELECT min(age(p.xmin)) AS age FROM purges p WHERE p.id = ANY(?)
)
SELECT what FROM (
    SELECT 'a transaction (process ' || a.pid || ', database '
           || coalesce(a.datname, '-') || ')' AS what
    FROM pg_stat_activity a, purge
    WHERE a.pid <> pg_backend_pid()
      AND (age(a.backend_xid) >= purge.age
           OR (age(a.backend_xmin) >= purge.age
               AND (a.datname = current_database() OR a.datname IS NULL)))
    UNION ALL
    SELECT 'a prepared transaction (' || x.gid || ')'
    FROM pg_prepared_xacts x, purge WHERE age(x.transaction) >= purge.age
    UNION ALL
    SELECT 'the replication slot ' || r.slot_name
    FROM pg_replication_slots r, purge WHERE age(r.xmin) >= purge.age
) older LIMIT 1
"""

POLL_S = 0.1


def older_than_purge(store: PgStore, *, wait: bool) -> str | None:
    """What on the server still needs the erased rows' old versions (None:
    nothing), waiting for it within the busy timeout when ``wait``. Only the
    purges memors acts on count (not an entry lint reports as bad)."""
    with store.read() as tx:
        audits = [p.purge for p in tx.purges.pending()]
    timeout = store.scalar("SELECT current_setting('lock_timeout')") if wait else "0"
    deadline = time.monotonic() + _ms(timeout) / 1000
    while True:
        what: str | None = store.scalar(_OLDER_THAN_PURGE, (audits,))
        if what is None or time.monotonic() >= deadline:
            return what
        time.sleep(POLL_S)


def _ms(setting: str) -> int:
    """A duration setting as PostgreSQL shows it (``15s``, ``200ms``, ``0``) in ms."""
    units = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    for unit in sorted(units, key=len, reverse=True):
        if setting.endswith(unit) and setting[: -len(unit)].isdigit():
            return int(setting[: -len(unit)]) * units[unit]
    return int(setting) if setting.isdigit() else 0


def _unfinished(store: PgStore, step: str) -> str:
    with store.read() as tx:
        todo = sorted(p.purge for p in tx.purges.pending() if step in p.steps)
    return ", ".join(str(a) for a in todo)


def run_step(store: PgStore, step: str, *, wait: bool) -> bool:
    """Run one finishing step for the unfinished purges; False when it is
    left for later: a role that may not rewrite the tables, a transaction
    older than the purge still running on the server (waited for within the
    busy timeout when ``wait``), or, without ``wait``, a table another
    connection holds. With ``wait``, tables that stay locked past the busy
    timeout raise :class:`StoreBusy`."""
    if step != "vacuum":
        raise ValueError(f"no purge step {step!r} on PostgreSQL")
    from psycopg import errors, sql

    tables = store_tables(store)
    refused = [name for name, allowed, _owner in tables if not allowed]
    if refused:
        store.purge_held = _needs_owner(store, tables)
        # VACUUM would skip them with a warning only: leave the step pending
        # (lint reports it) for the owner, whose next command finishes it.
        log.warning(
            "purge_vacuum_needs_owner",
            path=store.location,
            tables=len(refused),
            hint="open the store once as the tables' owner to finish the purge",
        )
        return False
    older = older_than_purge(store, wait=wait)
    if older is not None:
        # A rewrite now would copy the erased rows along (VACUUM FULL keeps
        # what an older snapshot may still read); the next command retries.
        log.warning("purge_vacuum_deferred", path=store.location, waiting_for=older)
        store.purge_held = (
            f"{older} began before the purge and still runs, and PostgreSQL keeps the "
            "erased rows for it: the next memors command after it ends finishes the rewrite"
        )
        return False
    previous = store.scalar("SELECT current_setting('lock_timeout')")
    if not wait:
        store.conn.execute(f"SET lock_timeout = {NO_WAIT_LOCK_MS}")
    try:
        for name, _allowed, _owner in tables:
            # Rewrites the table (its TOAST and indexes too) into a new file
            # without the dead rows, and refreshes its statistics, whose
            # samples may hold short values of the erased rows.
            store.conn.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(name)))
    except errors.LockNotAvailable:
        if not wait:
            store.purge_held = (
                "other connections held the store's tables: the next memors command finishes "
                "the rewrite when the store is idle"
            )
            return False
        raise StoreBusy(
            f"erased (audit record {_unfinished(store, step)}), but other connections kept the "
            "store's tables locked, so they were not rewritten yet: the next purge or any "
            "memors command finishes it when the store is idle"
        ) from None
    finally:
        store.conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(previous)))
    return True


def _needs_owner(store: PgStore, tables: list[tuple[str, bool, str]]) -> str:
    role = store.scalar("SELECT current_user")
    owner = next(owner for _name, allowed, owner in tables if not allowed)
    return (
        f"the role {role} may not rewrite the store's tables, so their files may still hold "
        f"the text: only their owner ({owner}) can finish the purge, by running "
        "`memors-mcp purge {target} --yes` (or any memors command that opens the store) "
        f"connected as {owner}"
    )


def hold(store: PgStore, target: str) -> str:
    """What kept the purge of ``target`` from finishing, and what finishes it."""
    why = store.purge_held or (
        "the tables were not rewritten yet: the next memors command finishes it"
    )
    return why.replace("{target}", target)
