"""Export, import and backup.

``export`` writes every row of a namespace (raw rows, tombstones, pages with
their sources, items, merges) plus the store's counters and purge audit as
JSON lines; ``import`` restores such a file into an empty store, row for
row (ids and row ids kept, so addresses, item numbers and page build marks
stay valid); ``backup`` copies the whole database with SQLite's online
backup, consistent even while another process writes.
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from .errors import BadInput
from .log import get_logger
from .schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from .memory import Memory

log = get_logger("memors")

FORMAT = "memors-export"

# (table, SELECT restricted to one namespace, in an order that import can replay)
TABLES: list[tuple[str, str]] = [
    ("namespaces", "SELECT * FROM namespaces WHERE name = :ns"),
    ("documents", "SELECT rowid, * FROM documents WHERE namespace = :ns ORDER BY rowid"),
    (
        "document_versions",
        "SELECT v.* FROM document_versions v JOIN documents d ON d.id = v.document "
        "WHERE d.namespace = :ns ORDER BY d.rowid, v.version",
    ),
    ("entities", "SELECT rowid, * FROM entities WHERE namespace = :ns ORDER BY rowid"),
    ("passages", "SELECT rowid, * FROM passages WHERE namespace = :ns ORDER BY rowid"),
    (
        "version_passages",
        "SELECT vp.* FROM version_passages vp JOIN documents d ON d.id = vp.document "
        "WHERE d.namespace = :ns ORDER BY d.rowid, vp.version, vp.position",
    ),
    ("aliases", "SELECT * FROM aliases WHERE namespace = :ns ORDER BY created_at, entity, key"),
    (
        "mentions",
        "SELECT m.* FROM mentions m JOIN passages p ON p.id = m.passage "
        "WHERE p.namespace = :ns ORDER BY p.rowid, m.entity",
    ),
    ("facts", "SELECT rowid, * FROM facts WHERE namespace = :ns ORDER BY rowid"),
    ("merge_candidates", "SELECT * FROM merge_candidates WHERE namespace = :ns ORDER BY id"),
    ("pages", "SELECT rowid, * FROM pages WHERE namespace = :ns ORDER BY rowid"),
    (
        "page_sources",
        "SELECT s.* FROM page_sources s JOIN pages p ON p.id = s.page "
        "WHERE p.namespace = :ns ORDER BY p.rowid, s.passage",
    ),
    (
        "page_stale",
        "SELECT s.rowid, s.* FROM page_stale s JOIN pages p ON p.id = s.page "
        "WHERE p.namespace = :ns ORDER BY s.rowid",
    ),
    ("tombstones", "SELECT rowid, * FROM tombstones WHERE namespace = :ns ORDER BY rowid"),
    ("work_items", "SELECT * FROM work_items WHERE namespace = :ns ORDER BY id"),
    ("purges", "SELECT * FROM purges WHERE namespace = :ns ORDER BY id"),
    ("counters", "SELECT * FROM counters ORDER BY name, kind, event"),
]
TABLE_NAMES = {name for name, _sql in TABLES}


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"])
    return value


def export_rows(memory: Memory, namespace: str) -> Iterator[dict[str, Any]]:
    """Every row of ``namespace`` as ``{"table", "row"}`` objects, after a header."""
    from .ops import check_namespace

    check_namespace(namespace)
    store = memory.store
    with store.read():
        yield {"format": FORMAT, "schema": SCHEMA_VERSION, "namespace": namespace}
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
        for t in ("documents", "entities", "facts", "work_items", "pages")
    )


def import_rows(memory: Memory, lines: Iterable[str], source: str) -> dict[str, Any]:
    """Replay an export into an empty store, in one transaction."""
    store = memory.store
    counts: Counter[str] = Counter()
    namespace = None
    with memory._lock, store.write():
        if not _store_is_empty(memory):
            raise BadInput("import needs an empty store: give a new --db path")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{source}:{n}: not valid JSON ({exc.msg})") from None
            if n == 1:
                if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                    raise BadInput(f"{source} is not a memors export (no header line)")
                if obj.get("schema") != SCHEMA_VERSION:
                    raise BadInput(
                        f"{source} was exported with schema {obj.get('schema')}; "
                        f"this memors reads schema {SCHEMA_VERSION}"
                    )
                namespace = obj.get("namespace")
                continue
            if not isinstance(obj, dict) or obj.get("table") not in TABLE_NAMES:
                raise BadInput(f"{source}:{n}: expected {{'table', 'row'}} with a known table")
            row = obj.get("row")
            if not isinstance(row, dict) or not row:
                raise BadInput(f"{source}:{n}: the row must be a JSON object")
            table = obj["table"]
            cols = list(row)
            if not all(c.replace("_", "").isalnum() for c in cols):
                raise BadInput(f"{source}:{n}: bad column name")
            values = [_decode(row[c]) for c in cols]
            verb = "INSERT OR REPLACE" if table == "counters" else "INSERT"
            try:
                store.conn.execute(
                    f"{verb} INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    values,
                )
            except apsw.Error as exc:
                raise BadInput(f"{source}:{n}: cannot restore this {table} row ({exc})") from None
            counts[table] += 1
        store.after_commit(
            log.info,
            "store_imported",
            namespace=namespace,
            source=source,
            rows=sum(counts.values()),
        )
    return {"namespace": namespace, "rows": dict(counts)}


def backup(memory: Memory, path: str) -> dict[str, Any]:
    """Copy the whole store to ``path`` with SQLite's online backup API."""
    target = Path(os.path.expanduser(path))
    if target.exists() and target.stat().st_size > 0:
        raise BadInput(f"{target} already exists; choose a new path for the backup")
    if not target.parent.is_dir():
        raise BadInput(f"{target.parent} is not a directory")
    dest = apsw.Connection(str(target))
    try:
        with memory._lock, dest.backup("main", memory.store.conn, "main") as job:
            while not job.done:
                job.step(1024)
            pages = job.page_count
    finally:
        dest.close()
    log.info("store_backed_up", path=str(target), pages=pages)
    return {"path": str(target), "pages": pages}
