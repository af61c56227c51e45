"""Export, import and backup on SQLite.

An export is every row of the tables below (or of one namespace's part of
them), row ids kept, in an order an import can replay: every row after the
rows it refers to. An import inserts such rows into an empty store; the FTS
indexes are rebuilt by the store's own triggers as the rows arrive. A backup
is SQLite's online backup, in one step.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from memors_core.errors import BadInput
from memors_core.log import get_logger
from memors_core.storage.sql.records import Repo
from memors_core.storage.sqlite.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import Store

log = get_logger("memors")

#: Schemas whose exports this one imports: the rows did not change from 3
#: to 4 (4 added the clock table, whose rows a schema-3 export lacks).
READS_SCHEMAS = frozenset({3, SCHEMA_VERSION})

# (table, SELECT of its rows — all of them when :ns is NULL, else one namespace's —
# in an order that import can replay: every row after the rows it refers to)
TABLES: list[tuple[str, str]] = [
    ("namespaces", "SELECT * FROM namespaces WHERE :ns IS NULL OR name = :ns ORDER BY name"),
    (
        "documents",
        "SELECT rowid, * FROM documents WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "document_versions",
        "SELECT v.* FROM document_versions v JOIN documents d ON d.id = v.document "
        "WHERE :ns IS NULL OR d.namespace = :ns ORDER BY d.rowid, v.version",
    ),
    (
        "entities",
        "SELECT rowid, * FROM entities WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "passages",
        "SELECT rowid, * FROM passages WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "version_passages",
        "SELECT vp.* FROM version_passages vp JOIN documents d ON d.id = vp.document "
        "WHERE :ns IS NULL OR d.namespace = :ns ORDER BY d.rowid, vp.version, vp.position",
    ),
    (
        "aliases",
        "SELECT * FROM aliases WHERE :ns IS NULL OR namespace = :ns "
        "ORDER BY created_at, entity, key",
    ),
    (
        "mentions",
        "SELECT m.* FROM mentions m JOIN passages p ON p.id = m.passage "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, m.entity",
    ),
    ("facts", "SELECT rowid, * FROM facts WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid"),
    (
        "merge_candidates",
        "SELECT * FROM merge_candidates WHERE :ns IS NULL OR namespace = :ns ORDER BY id",
    ),
    ("pages", "SELECT rowid, * FROM pages WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid"),
    (
        "page_sources",
        "SELECT s.* FROM page_sources s JOIN pages p ON p.id = s.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, s.passage",
    ),
    (
        "page_stale",
        "SELECT s.rowid, s.* FROM page_stale s JOIN pages p ON p.id = s.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY s.rowid",
    ),
    (
        "tombstones",
        "SELECT rowid, * FROM tombstones WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    ("work_items", "SELECT * FROM work_items WHERE :ns IS NULL OR namespace = :ns ORDER BY id"),
    ("purges", "SELECT * FROM purges WHERE :ns IS NULL OR namespace = :ns ORDER BY id"),
    # Counters describe the whole store (every namespace's work): only a
    # whole-store export carries them.
    ("counters", "SELECT * FROM counters WHERE :ns IS NULL ORDER BY name, kind, event"),
    # The clocks' high-water marks across purges: a store's, not a namespace's.
    ("clock", "SELECT * FROM clock WHERE :ns IS NULL ORDER BY name"),
]
TABLE_NAMES = frozenset(name for name, _sql in TABLES)
#: Derived state, rebuilt after an import rather than carried: the FTS
#: indexes (by triggers as rows arrive), compaction's change log and marks
#: and the kinds' own tables and their schema records (by the next compact,
#: a full scan).
NOT_EXPORTED = ("changes", "compact_marks", "purge_pending", "kind_schema")
#: A store holding a row of any of these is not empty.
_CONTENT = ("documents", "entities", "facts", "work_items", "pages", "purges")


class SqliteTransfer(Repo):
    """:class:`memors_core.storage.api.Transfer` on SQLite."""

    schema = SCHEMA_VERSION
    reads_schemas = READS_SCHEMAS
    tables = TABLE_NAMES

    def export(self, namespace: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        for table, sql in TABLES:
            cur = self.db.conn.execute(sql, {"ns": namespace})
            cols = None
            for row in cur:
                if cols is None:
                    cols = [d[0] for d in cur.getdescription()]
                yield table, dict(zip(cols, row, strict=True))

    def is_empty(self) -> bool:
        return not any(self.scalar(f"SELECT EXISTS (SELECT 1 FROM {t})") for t in _CONTENT)

    def restore(self, table: str, row: dict[str, Any]) -> None:
        if table not in TABLE_NAMES:
            raise BadInput(f"no table {table!r} in an export")
        cols = list(row)
        if not cols or not all(isinstance(c, str) and c.replace("_", "").isalnum() for c in cols):
            raise BadInput("bad column name")
        # A whole-store export's counters replace the ones the import itself bumped.
        verb = "INSERT OR REPLACE" if table == "counters" else "INSERT"
        try:
            self.db.conn.execute(
                f"{verb} INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [row[c] for c in cols],
            )
        except (apsw.Error, OverflowError, TypeError) as exc:
            raise BadInput(f"cannot restore this {table} row ({exc})") from None

    def restored(self) -> None:
        # Compaction state is not carried: every kind's next scan is a full one.
        self.run("DELETE FROM compact_marks")
        self.run("DELETE FROM changes")


def backup(store: Store, path: str) -> dict[str, Any]:
    """Copy the whole store to ``path`` with SQLite's online backup API.

    The copy is made in one step, inside one read transaction: it is the
    store as of one commit, whatever other processes write meanwhile (a
    stepwise copy would restart each time another connection writes).
    """
    target = Path(os.path.expanduser(path))  # (Path.expanduser raises on ~nouser)
    if target.exists() and target.stat().st_size > 0:
        raise BadInput(f"{target} already exists; choose a new path for the backup")
    if not target.parent.is_dir():
        raise BadInput(f"{target.parent} is not a directory")
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
