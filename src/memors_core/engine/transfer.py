"""Export, import and backup.

``export`` writes every row of the store (or of one namespace) as JSON
lines: raw rows, tombstones, pages with their sources, items, merges, the
purge audit and, for a whole store, its counters and clocks. ``import``
restores such a file into an empty store, row for row (ids and sequences
kept, so addresses, item numbers and page build marks stay valid); the
search indexes are rebuilt as rows arrive, and compaction's incremental
state (change log, marks, a kind's own index) is not carried: the next
compact of each namespace is a full scan, which rebuilds it. ``backup``
copies the whole store to a new file (on SQLite, its online backup in one
read transaction, so the copy is consistent even while another process
writes).

Which rows there are, their order and how they are stored is the
storage's (:class:`memors_core.storage.api.Transfer`); this module owns the
file: its header, the JSON of each line, and what a bad line says.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memors_core.domain.inputs import check_namespace
from memors_core.domain.jsonl import decode_line, parse_line
from memors_core.errors import BadInput
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.storage.api import Storage

log = get_logger("memors")

FORMAT = "memors-export"


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"])
    return value


def export_rows(storage: Storage, namespace: str | None = None) -> Iterator[dict[str, Any]]:
    """Every row of the store (or of ``namespace``) as ``{"table", "row"}``
    objects, after a header; one read transaction, so one consistent state."""
    if namespace is not None:
        check_namespace(namespace)
    with storage.read() as tx:
        names = [namespace] if namespace is not None else tx.namespaces.names()
        yield {"format": FORMAT, "schema": tx.transfer.schema, "namespace": namespace,
               "namespaces": names}  # fmt: skip
        for table, row in tx.transfer.export(namespace):
            yield {"table": table, "row": {c: _encode(v) for c, v in row.items()}}


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
    storage: Storage, lines: Iterable[str | bytes | bytearray], source: str
) -> dict[str, Any]:
    """Replay an export into an empty store, in one transaction: all or nothing.

    ``lines`` are text, or bytes (UTF-8, checked line by line)."""
    counts: Counter[str] = Counter()
    namespace = None
    header = False
    with storage.write() as tx:
        transfer = tx.transfer
        if not transfer.is_empty():
            raise BadInput("import needs an empty store: give a new --db path")
        for n, line in enumerate(lines, 1):
            obj = _parse_line(line, n, source)
            if obj is None and not line.strip():
                continue
            if not header:
                if not isinstance(obj, dict) or obj.get("format") != FORMAT:
                    raise BadInput(f"{source} is not a memors export (no header line)")
                schema = obj.get("schema")
                known = isinstance(schema, int) and not isinstance(schema, bool)
                if not known or schema not in transfer.reads_schemas:
                    raise BadInput(
                        f"{source} was exported with schema {schema}; "
                        f"this memors reads schema {_schemas(transfer.reads_schemas)}"
                    )
                namespace = obj.get("namespace")
                header = True
                continue
            if not isinstance(obj, dict) or obj.get("table") not in transfer.tables:
                raise BadInput(f"{source}:{n}: expected {{'table', 'row'}} with a known table")
            row = obj.get("row")
            if not isinstance(row, dict) or not row:
                raise BadInput(f"{source}:{n}: the row must be a JSON object")
            table = obj["table"]
            try:
                values = {c: _decode(v) for c, v in row.items()}
            except (ValueError, TypeError):  # binascii.Error is a ValueError
                raise BadInput(f"{source}:{n}: bad base64 in a $b64 value") from None
            try:
                transfer.restore(table, values)
            except BadInput as exc:
                raise BadInput(f"{source}:{n}: {exc}") from None
            counts[table] += 1
        if not header:
            raise BadInput(f"{source} is empty: not a memors export")
        transfer.restored()
        tx.after_commit(
            log.info,
            "store_imported",
            namespace=namespace,
            source=source,
            rows=sum(counts.values()),
        )
    return {"namespace": namespace, "rows": dict(counts)}


def _schemas(versions: Iterable[int]) -> str:
    """``3`` or ``3 and 4``, for a message."""
    names = [str(v) for v in sorted(versions)]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def backup(storage: Storage, path: str) -> dict[str, Any]:
    """Copy the whole store to ``path`` (a new file): ``{"path", "pages"}``."""
    return storage.backup(path)
