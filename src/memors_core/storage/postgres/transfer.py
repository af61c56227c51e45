"""Export, import and backup on PostgreSQL.

The tables, their columns and the order rows are replayed in are SQLite's
(:mod:`memors_core.storage.sql.transfer`), so an export from either engine
imports into the other unchanged. An export reads each table through a
cursor declared in the read transaction, a batch of rows at a time: one
snapshot, and the whole table is never held in memory. An import inserts
the rows it is given with their ids, then moves every identity past the
highest restored value, so the next document, item or page gets a new
number, never one already taken.

A backup is a memors SQLite file: the store's rows, read in one
``REPEATABLE READ`` snapshot (so it is the store as of one commit, whatever
other clients write meanwhile), restored into a new SQLite store at the
path. It opens with memors like any store (``--db FILE``), and an import
of its export into an empty PostgreSQL database brings the store back.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from memors_core.errors import BadInput, MemorsError
from memors_core.log import get_logger
from memors_core.storage.postgres.dialect import render
from memors_core.storage.postgres.schema import EXPORT_SCHEMA, IDENTITIES
from memors_core.storage.sql.repo import Repo
from memors_core.storage.sql.transfer import (
    IS_EMPTY,
    RECONCILE,
    TABLE_NAMES,
    TABLES,
    check_references,
    row_columns,
    row_dict,
)
from memors_core.storage.sql.tx import CLOCKS
from memors_core.storage.sqlite.transfer import READS_SCHEMAS

if TYPE_CHECKING:
    from memors_core.storage.postgres.connection import PgStore

log = get_logger("memors")

#: Rows fetched per round trip while exporting.
BATCH = 1000
#: How a restored row meets one the store holds already.
_RECONCILE = {
    **RECONCILE,
    "clock": "ON CONFLICT (name) DO UPDATE SET value = GREATEST(clock.value, excluded.value)",
}

_cursor_numbers = itertools.count(1)
#: The counters as one row each, as SQLite keeps them: the store-wide row
#: and the namespaces' shards summed (a whole-store export only).
_COUNTERS = (
    "SELECT name, kind, event, SUM(value)::bigint AS value FROM ("
    "SELECT name, kind, event, value FROM counters UNION ALL "
    "SELECT name, kind, event, value FROM counter_shards) c "
    "WHERE :ns IS NULL GROUP BY name, kind, event ORDER BY name, kind, event"
)


class PgTransfer(Repo):
    """:class:`memors_core.storage.api.Transfer` on PostgreSQL."""

    schema = EXPORT_SCHEMA
    reads_schemas = READS_SCHEMAS
    tables = TABLE_NAMES

    def export(self, namespace: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        # Each table through its own cursor, which lives until the
        # transaction ends: one left unread (the caller stopped early) goes
        # then; every round trip is a whole statement, so the caller may use
        # the connection between rows.
        conn = self.db.conn
        for table, sql in TABLES:
            if table == "counters":
                sql = _COUNTERS
            name = f"memors_export_{next(_cursor_numbers)}"
            rendered = render(sql)
            conn.execute(
                f"DECLARE {name} NO SCROLL CURSOR FOR {rendered.sql}",
                rendered.params({"ns": namespace}),
            )
            while True:
                cur = conn.execute(f"FETCH FORWARD {BATCH} FROM {name}")
                rows = cur.fetchall()
                if not rows:
                    break
                cols = [d.name for d in cur.description or ()]
                for row in rows:
                    yield table, row_dict(cols, row)
            conn.execute(f"CLOSE {name}")

    def is_empty(self) -> bool:
        return bool(self.scalar(IS_EMPTY))

    def restore(self, table: str, row: dict[str, Any]) -> None:
        cols = row_columns(table, row)
        values = [row[c] for c in cols]
        sql = f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
        # A row the store holds already (opening it wrote it) is met, not refused.
        sql += " " + _RECONCILE.get(table, "")
        try:
            self.db.conn.execute(sql, values)
            if table == "counters":  # the export's total is the store's now
                self.db.conn.execute(
                    "DELETE FROM counter_shards WHERE name = %s AND kind = %s AND event = %s",
                    (row["name"], row.get("kind", ""), row.get("event", "")),
                )
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError) as exc:
            why = exc.diag.message_primary or " ".join(str(exc).split())
            raise BadInput(f"cannot restore this {table} row ({why})") from None

    def restored(self) -> None:
        check_references(self.scalar)
        # Compaction state is not carried: every kind's next scan is a full one.
        self.run("DELETE FROM compact_marks")
        self.run("DELETE FROM changes")
        # An identity hands out numbers past the highest restored one. The
        # change log's also passes its recorded mark (the log was emptied
        # above, but a compaction mark taken from that clock must stay below
        # every change logged from now on).
        changes_mark = self.scalar("SELECT value FROM clock WHERE name = 'changes'") or 0
        try:
            for table, column in IDENTITIES.items():
                high = self.scalar(f"SELECT COALESCE(MAX({column}), 0) FROM {table}")
                if table == "changes":
                    high = max(high, changes_mark)
                self._advance(table, column, high)
            for clock in CLOCKS:  # passages' and tombstones' numbers: their sequences
                high = self.scalar(
                    f"SELECT GREATEST(COALESCE((SELECT MAX(rowid) FROM {clock}), 0), "
                    "COALESCE((SELECT value FROM clock WHERE name = ?), 0))",
                    (clock,),
                )
                self._advance_sequence(f"{clock}_clock", high)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise MemorsError(
                f"this role cannot import into the store ({exc.diag.message_primary}); "
                "nothing was imported"
            ) from None

    def _advance(self, table: str, column: str, high: int) -> None:
        """Move ``table.column``'s identity so its next number is above ``high``.

        ``setval`` needs UPDATE on the sequence, which the tables' owner has
        and an application role (docs/postgres.md) has not; that role may
        only draw numbers, so it draws them up to ``high`` (about a third of
        a second per million)."""
        sequence = self.scalar("SELECT pg_get_serial_sequence(?, ?)", (table, column))
        self._advance_sequence(sequence, high)

    def _advance_sequence(self, sequence: str, high: int) -> None:
        last, called = self.one(f"SELECT last_value, is_called FROM {sequence}")
        given = last if called else last - 1
        if high <= given:
            return
        if self.scalar("SELECT has_sequence_privilege(?, 'UPDATE')", (sequence,)):
            self.scalar("SELECT setval(?, ?)", (sequence, high))
        else:
            self.scalar(
                "SELECT MAX(nextval(?)) FROM generate_series(1, ?)", (sequence, high - given)
            )


def backup(store: PgStore, path: str) -> dict[str, Any]:
    """Write the whole store to a new memors SQLite file at ``path``.

    Every row is read in one ``REPEATABLE READ`` transaction (the store as
    of one commit, while others go on writing) and restored into the new
    file in one transaction; a failure leaves no file behind. ``pages`` is
    the new file's size in SQLite pages, as a SQLite backup reports it.
    Derived state is rebuilt there as after an import: the search indexes
    as the rows arrive, compaction's on its first full scan.
    """
    from memors_core.storage.sqlite.connection import SqliteStore
    from memors_core.storage.sqlite.transfer import backup_target

    target = backup_target(path)
    try:
        dest = SqliteStore.open(target)
    except MemorsError as exc:
        _remove(target)
        raise BadInput(f"cannot write a backup to {target}: {exc}") from None
    try:
        with store.read() as tx, dest.write() as out:
            if tx.transfer.schema not in out.transfer.reads_schemas:  # pragma: no cover
                raise MemorsError(
                    f"this memors cannot write schema {tx.transfer.schema} rows to SQLite"
                )
            for table, row in tx.transfer.export():
                out.transfer.restore(table, row)
            out.transfer.restored()
        pages = dest.scalar("PRAGMA page_count")
    except BaseException:
        dest.close()
        _remove(target)
        raise
    dest.close()
    log.info("store_backed_up", path=str(target), pages=pages)
    return {"path": str(target), "pages": pages}


def _remove(target: Any) -> None:
    """A half-written backup and its SQLite side files, gone."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            target.with_name(target.name + suffix).unlink()
