"""Export, import and backup.

``export`` writes every row of the store (or of one namespace) as JSON
lines: raw rows, tombstones, pages with their sources, items, merges, the
purge audit and, for a whole store, its counters. ``import`` restores such a
file into an empty store, row for row (ids and row ids kept, so addresses,
item numbers and page build marks stay valid); the full-text indexes are
rebuilt by the store's own triggers, and compaction's incremental state
(change log, marks, a kind's own tables) is not carried: the next compact
of each namespace is a full scan, which rebuilds it. ``backup`` copies the
whole database with SQLite's online backup in one read transaction, so the
copy is consistent even while another process writes.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from memors_core.domain.jsonl import decode_line, parse_line
from memors_core.errors import BadInput
from memors_core.log import get_logger
from memors_core.storage.sqlite.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from memors_core.memory import Memory

log = get_logger("memors")

FORMAT = "memors-export"

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
TABLE_NAMES = {name for name, _sql in TABLES}
#: Derived state, rebuilt after an import rather than carried: the FTS
#: indexes (by triggers as rows arrive), compaction's change log and marks
#: and the kinds' own tables (by the next compact, a full scan).
NOT_EXPORTED = ("changes", "compact_marks", "purge_pending", "kind_schema")


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"])
    return value


def export_rows(memory: Memory, namespace: str | None = None) -> Iterator[dict[str, Any]]:
    """Every row of the store (or of ``namespace``) as ``{"table", "row"}``
    objects, after a header; one read transaction, so one consistent state."""
    from memors_core.storage.sqlite.ops import check_namespace

    if namespace is not None:
        check_namespace(namespace)
    store = memory.store
    with store.read():
        names = [namespace] if namespace is not None else memory.namespaces()
        yield {"format": FORMAT, "schema": SCHEMA_VERSION, "namespace": namespace,
               "namespaces": names}  # fmt: skip
        for table, sql in TABLES:
            cur = store.conn.execute(sql, {"ns": namespace})
            cols = None
            for row in cur:
                if cols is None:
                    cols = [d[0] for d in cur.getdescription()]
                yield {
                    "table": table,
                    "row": {c: _encode(v) for c, v in zip(cols, row, strict=True)},
                }


def _store_is_empty(memory: Memory) -> bool:
    return not any(
        memory.store.scalar(f"SELECT EXISTS (SELECT 1 FROM {t})")
        for t in ("documents", "entities", "facts", "work_items", "pages", "purges")
    )


def _parse_line(line: str | bytes | bytearray, n: int, source: str) -> Any:
    """One line of an export as JSON; anything else is bad input naming the line."""
    if isinstance(line, bytes | bytearray):
        if b"\x00" in line:
            raise BadInput(f"{source}:{n}: looks binary (it contains NUL bytes), not JSON lines")
        line = decode_line(line, n, source)
    if not line.strip():
        return None
    return parse_line(line, n, source)


def import_rows(
    memory: Memory, lines: Iterable[str | bytes | bytearray], source: str
) -> dict[str, Any]:
    """Replay an export into an empty store, in one transaction: all or nothing.

    ``lines`` are text, or bytes (UTF-8, checked line by line)."""
    store = memory.store
    counts: Counter[str] = Counter()
    namespace = None
    header = False
    with memory._lock, store.write():
        if not _store_is_empty(memory):
            raise BadInput("import needs an empty store: give a new --db path")
        for n, line in enumerate(lines, 1):
            obj = _parse_line(line, n, source)
            if obj is None and not line.strip():
                continue
            if not header:
                if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                    raise BadInput(f"{source} is not a memors export (no header line)")
                if obj.get("schema") != SCHEMA_VERSION:
                    raise BadInput(
                        f"{source} was exported with schema {obj.get('schema')}; "
                        f"this memors reads schema {SCHEMA_VERSION}"
                    )
                namespace = obj.get("namespace")
                header = True
                continue
            if not isinstance(obj, dict) or obj.get("table") not in TABLE_NAMES:
                raise BadInput(f"{source}:{n}: expected {{'table', 'row'}} with a known table")
            row = obj.get("row")
            if not isinstance(row, dict) or not row:
                raise BadInput(f"{source}:{n}: the row must be a JSON object")
            table = obj["table"]
            cols = list(row)
            if not all(isinstance(c, str) and c.replace("_", "").isalnum() for c in cols):
                raise BadInput(f"{source}:{n}: bad column name")
            try:
                values = [_decode(row[c]) for c in cols]
            except (ValueError, TypeError):  # binascii.Error is a ValueError
                raise BadInput(f"{source}:{n}: bad base64 in a $b64 value") from None
            verb = "INSERT OR REPLACE" if table == "counters" else "INSERT"
            try:
                store.conn.execute(
                    f"{verb} INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    values,
                )
            except (apsw.Error, OverflowError, TypeError) as exc:
                raise BadInput(f"{source}:{n}: cannot restore this {table} row ({exc})") from None
            counts[table] += 1
        if not header:
            raise BadInput(f"{source} is empty: not a memors export")
        # Compaction state is not carried: every kind's next scan is a full one.
        store.conn.execute("DELETE FROM compact_marks")
        store.conn.execute("DELETE FROM changes")
        store.after_commit(
            log.info,
            "store_imported",
            namespace=namespace,
            source=source,
            rows=sum(counts.values()),
        )
    return {"namespace": namespace, "rows": dict(counts)}


def backup(memory: Memory, path: str) -> dict[str, Any]:
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
        with memory._lock, dest.backup("main", memory.store.conn, "main") as job:
            job.step(-1)
            pages = job.page_count
    except apsw.Error as exc:
        dest.close()
        target.unlink(missing_ok=True)
        raise BadInput(f"cannot write a backup to {target}: {exc}") from None
    dest.close()
    log.info("store_backed_up", path=str(target), pages=pages)
    return {"path": str(target), "pages": pages}
