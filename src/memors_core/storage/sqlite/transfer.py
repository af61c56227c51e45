"""Export, import and backup on SQLite.

An export is every row of the tables :mod:`memors_core.storage.sql.transfer`
lists (or of one namespace's part of them), row ids kept, in an order an
import can replay: every row after the rows it refers to. An import inserts
such rows into an empty store; the FTS indexes are rebuilt by the store's
own triggers as the rows arrive. A backup is SQLite's online backup, in one
step.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from memors_core.errors import BadInput
from memors_core.log import get_logger
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
from memors_core.storage.sqlite.schema import EXPORT_SCHEMA

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import SqliteStore

log = get_logger("memors")

#: Schemas whose exports this one imports: the rows of the tables they
#: have did not change from 3 on (4 added the clock table, 5 the pages'
#: sentences and facts, whose rows an older export lacks: its pages simply
#: record none; 8 the sentences' flags, which an older export's sentences
#: lack: they record none).
READS_SCHEMAS = frozenset({3, 4, 5, EXPORT_SCHEMA})
_RECONCILE = {
    **RECONCILE,
    "clock": "ON CONFLICT (name) DO UPDATE SET value = MAX(value, excluded.value)",
}


class SqliteTransfer(Repo):
    """:class:`memors_core.storage.api.Transfer` on SQLite."""

    schema = EXPORT_SCHEMA
    reads_schemas = READS_SCHEMAS
    tables = TABLE_NAMES

    def export(self, namespace: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        for table, sql in TABLES:
            cur = self.db.conn.execute(sql, {"ns": namespace})
            cols = None
            for row in cur:
                if cols is None:
                    cols = [d[0] for d in cur.getdescription()]
                yield table, row_dict(cols, row)

    def is_empty(self) -> bool:
        return bool(self.scalar(IS_EMPTY))

    def restore(self, table: str, row: dict[str, Any]) -> None:
        cols = row_columns(table, row)
        # A row the store holds already (opening it wrote it) is met, not refused.
        meet = _RECONCILE.get(table, "")
        try:
            self.db.conn.execute(
                f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                + meet,
                [row[c] for c in cols],
            )
        except (apsw.Error, OverflowError, TypeError) as exc:
            raise BadInput(f"cannot restore this {table} row ({exc})") from None

    def restored(self) -> None:
        check_references(self.scalar)
        # Compaction state is not carried: every kind's next scan is a full one.
        self.run("DELETE FROM compact_marks")
        self.run("DELETE FROM changes")


def backup_target(path: str) -> Path:
    """Where a backup goes: a new file (or an empty one) in a directory that exists."""
    target = Path(os.path.expanduser(path))  # (Path.expanduser raises on ~nouser)
    if target.exists() and not target.is_file():
        # /dev/null, a FIFO, a directory: the copy would go nowhere, or block.
        raise BadInput(f"{target} is not a regular file; choose a new path for the backup")
    if target.exists() and target.stat().st_size > 0:
        raise BadInput(f"{target} already exists; choose a new path for the backup")
    if not target.parent.is_dir():
        raise BadInput(f"{target.parent} is not a directory")
    return target


def backup(store: SqliteStore, path: str) -> dict[str, Any]:
    """Copy the whole store to ``path`` with SQLite's online backup API.

    The copy is made in one step, inside one read transaction: it is the
    store as of one commit, whatever other processes write meanwhile (a
    stepwise copy would restart each time another connection writes).
    """
    target = backup_target(path)
    try:
        dest = apsw.Connection(str(target))
    except apsw.Error as exc:
        raise BadInput(f"cannot write a backup to {target}: {exc}") from None
    try:
        with store._lock, dest.backup("main", store.conn, "main") as job:
            job.step(-1)
            pages = job.page_count
    except apsw.Error as exc:
        dest.close()
        target.unlink(missing_ok=True)
        raise BadInput(f"cannot write a backup to {target}: {exc}") from None
    dest.close()
    log.info("store_backed_up", path=str(target), pages=pages)
    return {"path": str(target), "pages": pages}
