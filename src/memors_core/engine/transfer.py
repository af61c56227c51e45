"""Export, import and backup.

``export`` writes every row of the store (or of one namespace) as JSON
lines: raw rows, tombstones, pages with their sources, items, merges, the
purge audit and, for a whole store, its counters and clocks. ``import``
restores such a file into a store that holds no content yet, row for row
(ids and sequences kept, so addresses, item numbers and page build marks
stay valid); the search indexes are rebuilt as rows arrive, and
compaction's incremental state (change log, marks, a kind's own index) is
not carried: the next compact of each namespace is a full scan, which
rebuilds it. ``backup`` copies the whole store to a new file (on SQLite,
its online backup in one read transaction, so the copy is consistent even
while another process writes).

A restore never loses silently. The file opens with a header (the format,
its version, the schema of the rows) and closes with a line that counts the
rows of each table and holds the SHA-256 of every line before it, as
export writes them (``json.dumps(obj, ensure_ascii=False)`` and a newline:
``head -n -1 FILE | sha256sum`` prints it). An import checks each line as
it comes (JSON, a known table, values a store can hold, namespaces the file
declares), then the counts and the checksum at the closing line, then that
the rows refer to one another; the first problem is named, and since it
all happens in one write transaction, nothing is stored. An export written
before exports were closed this way (no ``version`` in its header) cannot
be told from one cut short, so it is refused unless the caller accepts it
unverified.

Which rows there are, their order and how they are stored is the
storage's (:class:`memors_core.storage.api.Transfer`); this module owns the
file: its header and closing line, the JSON of each line, and what a bad
line says.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memors_core.domain.inputs import check_namespace
from memors_core.domain.jsonl import decode_line, parse_line
from memors_core.errors import BadInput
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.storage.api import Storage, Transfer

log = get_logger("memors")

FORMAT = "memors-export"
#: The version of the file's layout: 2 closes it with counts and a checksum.
#: (An export without a version in its header was written before: no closing line.)
VERSION = 2
#: What the library and the CLI say about an export that cannot be verified.
UNVERIFIED = (
    "was written by an older memors: it has no closing line of counts and checksum, "
    "so a file cut short cannot be told from a whole one; "
    "import it with --allow-unverified only if you know it is whole"
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b64": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$b64"}:
        return base64.b64decode(value["$b64"], validate=True)
    return value


def line_of(obj: Any) -> str:
    """One line of an export as ``memors-mcp export`` writes it (without
    its newline): the form the checksum is taken over."""
    return json.dumps(obj, ensure_ascii=False)


def _export(storage: Storage, namespace: str | None) -> Iterator[tuple[dict[str, Any], str]]:
    """Each object of an export with its line: the header, the rows, the closing line."""
    if namespace is not None:
        check_namespace(namespace)
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    with storage.read() as tx:
        names = [namespace] if namespace is not None else tx.namespaces.names()
        header = {"format": FORMAT, "version": VERSION, "schema": tx.transfer.schema,
                  "namespace": namespace, "namespaces": names}  # fmt: skip
        text = line_of(header)
        digest.update(text.encode("utf-8") + b"\n")
        yield header, text
        for table, row in tx.transfer.export(namespace):
            obj = {"table": table, "row": {c: _encode(v) for c, v in row.items()}}
            text = line_of(obj)
            digest.update(text.encode("utf-8") + b"\n")
            counts[table] = counts.get(table, 0) + 1
            yield obj, text
    closing = {"end": FORMAT, "rows": counts, "sha256": digest.hexdigest()}
    yield closing, line_of(closing)


def export_rows(storage: Storage, namespace: str | None = None) -> Iterator[dict[str, Any]]:
    """Every row of the store (or of ``namespace``) as ``{"table", "row"}``
    objects, after a header and before the closing line; one read
    transaction, so one consistent state."""
    for obj, _text in _export(storage, namespace):
        yield obj


def export_lines(storage: Storage, namespace: str | None = None) -> Iterator[str]:
    """The lines of an export file (each without its newline)."""
    for _obj, text in _export(storage, namespace):
        yield text


def _lines(lines: Iterable[str | bytes | bytearray]) -> Iterator[tuple[int, Any, bool]]:
    """``(number, line, is_last)`` for each line."""
    it = iter(lines)
    line, n = next(it, None), 1
    while line is not None:
        following = next(it, None)
        yield n, line, following is None
        line, n = following, n + 1


def _parse_line(line: str | bytes | bytearray, n: int, source: str, last: bool) -> Any:
    """One line of an export as JSON (None for a blank one); anything else
    is bad input naming the line."""
    # (a file cut short may end inside a line, and inside a character)
    cut = last and not (
        line.endswith(b"\n") if isinstance(line, bytes | bytearray) else line.endswith("\n")
    )
    if isinstance(line, bytes | bytearray) and b"\x00" in line:
        raise BadInput(f"{source}:{n}: looks binary (it contains NUL bytes), not JSON lines")
    try:
        if isinstance(line, bytes | bytearray):
            line = decode_line(line, n, source)
        if not line.strip():
            return None
        return parse_line(line, n, source)
    except BadInput as exc:
        if cut:
            raise BadInput(
                f"{source}:{n}: the file ends inside this line: it is cut short "
                "(an incomplete export); nothing was imported"
            ) from None
        raise exc from None


class _Reading:
    """What an import has read so far: the header, the rows of each table,
    the namespaces the file declares, the checksum of the lines."""

    def __init__(self, source: str, transfer: Transfer, allow_unverified: bool) -> None:
        self.source = source
        self.transfer = transfer
        self.allow_unverified = allow_unverified
        self.header: dict[str, Any] | None = None
        self.sealed = False
        self.closed_at = 0
        self.counts: Counter[str] = Counter()
        self.namespaces: set[str] = set()
        self.digest = hashlib.sha256()

    def take(self, obj: Any, n: int) -> None:
        """One line's object, checked, its row restored."""
        where = f"{self.source}:{n}"
        if self.closed_at:
            raise BadInput(
                f"{where}: a line after the export's closing line (line {self.closed_at})"
            )
        if self.header is not None and self.sealed and isinstance(obj, dict) and "end" in obj:
            self._close(obj, where)
            self.closed_at = n
            return
        try:
            text = line_of(obj).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode("ascii")
            raise BadInput(
                f"{where}: a string holds a lone surrogate ({bad}), which is not Unicode text"
            ) from None
        if self.header is None:
            self._header(obj)
        else:
            self._row(obj, where)
        self.digest.update(text + b"\n")

    def _header(self, obj: Any) -> None:
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise BadInput(f"{self.source} is not a memors export (no header line)")
        version = obj.get("version")
        if version is None:
            if not self.allow_unverified:
                raise BadInput(f"{self.source} {UNVERIFIED}")
        elif version != VERSION:
            raise BadInput(
                f"{self.source} is export format {version!r}; this memors reads format {VERSION}"
            )
        schema = obj.get("schema")
        known = isinstance(schema, int) and not isinstance(schema, bool)
        if not known or schema not in self.transfer.reads_schemas:
            raise BadInput(
                f"{self.source} was exported with schema {schema}; "
                f"this memors reads schema {_schemas(self.transfer.reads_schemas)}"
            )
        namespace = obj.get("namespace")
        if namespace is not None:
            try:
                check_namespace(namespace)
            except BadInput as exc:
                raise BadInput(f"{self.source}:1: the header's {exc}") from None
        self.sealed = version is not None
        self.header = obj

    def _row(self, obj: Any, where: str) -> None:
        transfer = self.transfer
        if not isinstance(obj, dict) or obj.get("table") not in transfer.tables:
            raise BadInput(f"{where}: expected {{'table', 'row'}} with a known table")
        row = obj.get("row")
        if not isinstance(row, dict) or not row:
            raise BadInput(f"{where}: the row must be a JSON object")
        table = obj["table"]
        try:
            values = {c: _decode(v) for c, v in row.items()}
        except (ValueError, TypeError):  # binascii.Error is a ValueError
            raise BadInput(f"{where}: bad base64 in a $b64 value") from None
        self._namespace(table, values, where)
        try:
            transfer.restore(table, values)
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        self.counts[table] += 1

    def _namespace(self, table: str, values: dict[str, Any], where: str) -> None:
        """A row's namespace is one the file declares (and, for one
        namespace's export, that one)."""
        assert self.header is not None
        if table == "namespaces":
            name = values.get("name")
            if isinstance(name, str):
                self.namespaces.add(name)
            return
        name = values.get("namespace")
        if not isinstance(name, str) or name in self.namespaces:
            return  # (a name of the wrong type is the storage's to refuse)
        only = self.header.get("namespace")
        said = f" (the file exports namespace {only!r})" if only is not None else ""
        raise BadInput(
            f"{where}: a {table} row of namespace {name!r}, which the file declares "
            f"no namespaces row for{said}"
        )

    def _close(self, obj: dict[str, Any], where: str) -> None:
        """The closing line: its counts and checksum are the file's."""
        rows, sha = obj.get("rows"), obj.get("sha256")
        counted = isinstance(rows, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in rows.values()
        )
        if set(obj) != {"end", "rows", "sha256"} or not counted or not isinstance(sha, str) \
                or not _SHA256.fullmatch(sha):  # fmt: skip
            raise BadInput(f"{where}: a malformed closing line (expected end, rows, sha256)")
        assert isinstance(rows, dict)
        for table in [*rows, *sorted(set(self.counts) - set(rows))]:
            want, got = rows.get(table, 0), self.counts[table]
            if want != got:
                raise BadInput(
                    f"{where}: the file holds {got} {table} row(s) where its closing line "
                    f"counts {want}: lines are missing or were added; nothing was imported"
                )
        if sha != self.digest.hexdigest():
            raise BadInput(
                f"{where}: the lines before the closing line do not have its checksum: "
                "the file was altered after export; nothing was imported"
            )

    def finish(self, last: int) -> None:
        """After the last line: the file was whole."""
        if self.header is None:
            raise BadInput(f"{self.source} is empty: not a memors export")
        if self.sealed and not self.closed_at:
            raise BadInput(
                f"{self.source} is incomplete: it ends after line {last} without the export's "
                "closing line (it was cut short); nothing was imported"
            )


def import_rows(
    storage: Storage,
    lines: Iterable[str | bytes | bytearray],
    source: str,
    *,
    allow_unverified: bool = False,
) -> dict[str, Any]:
    """Replay an export into a store without content, in one transaction:
    all or nothing.

    ``lines`` are text, or bytes (UTF-8, checked line by line). A file cut
    short, altered, or whose rows do not hold together is refused with the
    first problem; so is one without a closing line (written by an older
    memors) unless ``allow_unverified``."""
    last = 0
    with storage.write() as tx:
        transfer = tx.transfer
        if not transfer.is_empty():
            raise BadInput("import needs an empty store: give a new --db path")
        reading = _Reading(source, transfer, allow_unverified)
        for n, line, is_last in _lines(lines):
            last = n
            obj = _parse_line(line, n, source, is_last)
            if obj is not None:
                reading.take(obj, n)
        reading.finish(last)
        try:
            transfer.restored()
        except BadInput as exc:
            raise BadInput(f"{source}: {exc}; nothing was imported") from None
        namespace = reading.header.get("namespace") if reading.header else None
        tx.after_commit(
            log.info,
            "store_imported",
            namespace=namespace,
            source=source,
            rows=sum(reading.counts.values()),
            verified=reading.sealed,
        )
    return {"namespace": namespace, "rows": dict(reading.counts), "verified": reading.sealed}


def _schemas(versions: Iterable[int]) -> str:
    """``3`` or ``3 and 4``, for a message."""
    names = [str(v) for v in sorted(versions)]
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def backup(storage: Storage, path: str) -> dict[str, Any]:
    """Copy the whole store to ``path`` (a new file): ``{"path", "pages"}``."""
    return storage.backup(path)
