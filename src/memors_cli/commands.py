"""Subcommand handlers: each takes the parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memors_core import MemorsError, Memory, Refused
from memors_core.memory import Limits
from memors_core.wire import to_json

from . import files
from .output import Progress, Shown, emit_json, fail, render, size

TEXT_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".rst"}


def dispatch(args: argparse.Namespace) -> int:
    handler = HANDLERS[args.command]
    try:
        return handler(args)
    except Refused as exc:
        fail(exc.message, code=exc.code, exit_code=1)
    except MemorsError as exc:
        fail(exc.message, code=exc.code)
    except KeyboardInterrupt as exc:
        fail(
            getattr(exc, "message", None)
            or "interrupted; nothing half-stored (each batch is one transaction)",
            code="interrupted",
        )
    except BrokenPipeError:
        # stdout closed early (piped into head): not an error of ours
        os._exit(0)
    except OSError as exc:  # a path the user named cannot be used (too long, no access…)
        name = str(exc.filename or "")
        shown = name if len(name) <= 80 else name[:77] + "..."
        fail(f"{shown + ': ' if shown else ''}{exc.strerror or exc}", code="bad-input")
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("MEMORS_DEBUG"):
            raise
        fail(
            f"internal error: {type(exc).__name__}: {exc} (set MEMORS_DEBUG=1 for a traceback)",
            code="internal",
        )
    return 2  # pragma: no cover


def _open(args: argparse.Namespace, *, reading: bool = False) -> Any:
    """The store, opened for use as ``with _open(args) as memory:``.

    ``reading``: the command only reads, so a store that does not exist is
    not created (nor its directory, ``-wal`` or ``-shm``): it is read as an
    empty one, and the answer is an empty store's (as ``lint`` does)."""
    if reading:
        return _open_existing(args)
    return Memory.open(args.db)


@contextlib.contextmanager
def _open_existing(args: argparse.Namespace) -> Iterator[Memory]:
    from memors_core.storage.sqlite.connection import default_path

    path = Path(os.path.expanduser(args.db)) if args.db else default_path()
    if os.path.lexists(path):
        with Memory.open(path) as memory:
            yield memory
        return
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="memors-empty-") as tmp,
        Memory.open(Path(tmp) / "empty.db") as memory,
    ):
        yield memory


def _print(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if args.json:
        emit_json(data)
    else:
        print(text if text is not None else render(data))


# --- remember ----------------------------------------------------------------


DOCUMENT_SETTING = "MEMORS_MAX_DOCUMENT_BYTES"


def _read_text(path: Path, limit: int, setting: str = DOCUMENT_SETTING) -> str:
    # A regular file only (never a FIFO or a device), read with a bound.
    return files.read_text_file(path, limit, setting)


def _read_stdin(limit: int, setting: str = DOCUMENT_SETTING) -> str:
    raw = files.read_bounded(sys.stdin.buffer, limit, "standard input", setting)
    return files.decode_text(raw, "standard input")


def _walk(directory: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            p = Path(root) / name
            if p.suffix.lower() in TEXT_SUFFIXES and not name.startswith("."):
                yield p


def _force_progress(args: argparse.Namespace) -> None:
    from . import output

    output.FORCE_PROGRESS = bool(getattr(args, "progress", False))


def cmd_remember(args: argparse.Namespace) -> int:
    _force_progress(args)
    inputs: list[str] = args.inputs
    if not inputs and not args.jsonl:
        if sys.stdin.isatty():
            fail("remember needs FILE, DIR, - (stdin) or --jsonl FILE", code="usage")
        inputs = ["-"]
    many = bool(args.jsonl) or len(inputs) > 1 or any(Path(i).is_dir() for i in inputs if i != "-")
    if many and (args.uri or args.title):
        fail(
            "--uri and --title apply to one document; use --jsonl for per-document fields",
            code="usage",
        )
    if inputs.count("-") > 1:
        fail("standard input (-) can be read only once", code="usage")
    # Check every named path before storing anything: a named FIFO or device
    # is refused (inside a directory, such an entry is skipped and reported).
    for i in inputs:
        if i != "-" and not os.path.lexists(i):  # (a broken link is named as one below)
            fail(f"{i}: no such file or directory", code="bad-input")
        if i != "-" and not Path(i).is_dir():
            files.check_regular(Path(i))
    if args.jsonl and args.jsonl != "-":
        files.check_regular(Path(args.jsonl))

    with _open(args) as memory:
        limit = memory.limits.document_bytes
        if not many:
            source = inputs[0]
            if source == "-":
                text = _read_stdin(limit)
                uri = args.uri
            else:
                path = Path(source)
                text = _read_text(path, limit)
                uri = args.uri or str(path.resolve())
            shown_as = "standard input" if source == "-" else source
            with Progress(f"remembering {shown_as}", _passages_line) as progress:
                result = memory.remember(
                    text,
                    uri=uri,
                    title=args.title,
                    entities=args.entity,
                    namespace=args.ns,
                    progress=progress.update,
                )
            data = to_json(result)
            text = None
            if not args.json:
                # `passages` lists the live ones: say how many of the document's are not.
                shown = memory.get(data["document"], namespace=args.ns)
                every = getattr(shown, "passages", None)
                hidden = len(every) - len(data["passages"]) if isinstance(every, list) else 0
                text = _remembered_text(data, hidden)
            _print(args, data, text)
            return 0

        progress = _LoadProgress(inputs, args.jsonl)
        skipped: list[str] = []
        not_regular: list[files.NotRegularFile] = []  # entries of a directory, skipped
        labels: list[str] = []  # what to call the n-th document in an error

        def documents() -> Iterator[dict[str, Any]]:
            from memors_core.memory import iter_jsonl

            for source in inputs:
                if source == "-":
                    text = _read_stdin(limit)
                    labels.append("standard input")
                    yield {"text": text, "entities": args.entity}
                    continue
                path = Path(source)
                walked = path.is_dir()
                paths = progress.paths[source]
                for p in paths:
                    progress.visit(p)
                    try:
                        text = _read_text(p, limit)
                    except files.NotRegularFile as exc:
                        if not walked:  # named on the command line: refused
                            raise
                        not_regular.append(exc)
                        continue
                    if not text.strip():
                        skipped.append(str(p))
                        continue
                    labels.append(str(p))
                    progress.read()
                    yield {"text": text, "uri": str(p.resolve()), "entities": args.entity}
            if args.jsonl:
                if args.jsonl == "-":
                    handle = sys.stdin.buffer
                else:
                    handle, _size = files.open_regular(Path(args.jsonl))
                # No limit on the file as a whole, but each line is read with a bound.
                raw = progress.counted(
                    files.bounded_lines(
                        handle,
                        files.line_limit(limit),
                        args.jsonl,
                        f"at most 6 times {DOCUMENT_SETTING} plus 1 MiB for one document",
                    )
                )
                line = 0

                def numbered() -> Iterator[str]:
                    nonlocal line
                    for line, text in enumerate(files.decoded_lines(raw, args.jsonl), 1):  # noqa: B007
                        yield text

                try:
                    for doc in iter_jsonl(numbered(), args.jsonl):
                        labels.append(f"{args.jsonl}:{line}")
                        progress.read()
                        if args.entity:
                            own = doc.get("entities") or []
                            own = [own] if isinstance(own, str) else own
                            if isinstance(own, list):
                                doc = {**doc, "entities": [*own, *args.entity]}
                        yield doc
                finally:
                    if handle is not sys.stdin.buffer:
                        handle.close()

        try:
            result = memory.remember_many(
                documents(),
                namespace=args.ns,
                progress=progress.bar.update,
                where=lambda n: labels[n - 1],
            )
            progress.finished = True
        finally:
            progress.bar.done()
        data = to_json(result)
        notes = [f"{len(skipped)} empty file(s)"] if skipped else []
        if not_regular:
            data["not_regular_files"] = [{"path": e.path, "type": e.type} for e in not_regular]
            entries = "entry" if len(not_regular) == 1 else "entries"
            notes.append(f"{len(not_regular)} {entries} that are not regular files")
            for e in not_regular:  # on success only: an error stays one line
                print(
                    f"memors-mcp: skipped {e.path}: {e.what}, not a regular file", file=sys.stderr
                )
        note = f" (skipped {', '.join(notes)})" if notes else ""
        _print(
            args,
            data,
            f"remembered {data['documents']} document(s): {data['new']} new, "
            f"{data['new_versions']} new version(s), {data['unchanged']} unchanged; "
            f"{data['passages']} passage(s), {data['entities']} new entit(ies){note}",
        )
        return 0


def _passages_line(state: Any) -> Shown:
    """One document: its passages prepared, then stored."""
    total = f"/{state.total:,}" if state.total is not None else ""
    return Shown(
        f"{state.phase} {state.done:,}{total} passages",
        state.done,
        state.total,
        "passages",
        state.phase,
    )


class _LoadProgress:
    """What ``remember DIR…`` and ``--jsonl`` show while they load: files
    and bytes done of the total (counted before the load, only when
    progress is shown), documents stored, a big document's passages."""

    def __init__(self, inputs: list[str], jsonl: str | None) -> None:
        self.bar = Progress("remembering", self.describe)
        self.paths = {
            s: list(_walk(Path(s))) if Path(s).is_dir() else [Path(s)] for s in inputs if s != "-"
        }
        self.by_files = not jsonl and "-" not in inputs  # else: documents, of no known total
        self.files_total = sum(map(len, self.paths.values()))
        self.bytes_total: int | None = None
        self.files = self.bytes = self.documents = 0
        self.finished = False
        self.marks: Any = None
        self.at = (0, 0)  # files and bytes behind the documents stored
        if self.bar.enabled:
            from collections import deque

            self.marks = deque()  # (n, files, bytes) of documents read, not yet stored
            total = sum(self._size(p) for ps in self.paths.values() for p in ps)
            if jsonl and jsonl != "-":
                total += self._size(Path(jsonl))
            self.bytes_total = None if "-" in inputs or jsonl == "-" else total

    @staticmethod
    def _size(path: Path) -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    def visit(self, path: Path) -> None:  # a file is about to be read (or skipped)
        if self.marks is not None:
            self.files += 1
            self.bytes += self._size(path)

    def counted(self, lines: Iterator[bytearray]) -> Iterator[bytearray]:
        for line in lines:
            self.bytes += len(line)
            yield line

    def read(self) -> None:  # the next document was read
        if self.marks is not None:
            self.documents += 1
            self.marks.append((self.documents, self.files, self.bytes))

    def describe(self, state: Any) -> Shown:
        marks = self.marks
        stored = state.documents
        if self.finished:
            stored, self.at = self.documents, (self.files, self.bytes)
        while marks and marks[0][0] <= stored:  # (only this thread takes marks off)
            self.at = marks.popleft()[1:]
        if state.phase == "preparing" and state.unit == "documents" and not self.finished:
            return Shown(
                f"preparing {state.done:,}/{state.total:,} documents (split, shingled)",
                state.done,
                state.total,
                "documents",
                "preparing",
            )
        files, done = self.at
        parts = [
            f"{files:,}/{self.files_total:,} files" if self.by_files else f"{stored:,} documents"
        ]
        if self.bytes_total is not None:
            parts.append(f"{size(done)}/{size(self.bytes_total)}")
        elif done:
            parts.append(size(done))
        if state.unit == "passages" and not self.finished:  # inside a big document
            total = f"/{state.total:,}" if state.total is not None else ""
            parts.append(f"document {stored + 1}: {state.phase} {state.done:,}{total} passages")
        if self.bytes_total is not None or done:
            return Shown(" · ".join(parts), done, self.bytes_total, "bytes", "storing")
        return Shown(" · ".join(parts), stored, None, "documents", "storing")


def _remembered_text(data: dict[str, Any], hidden: int) -> str:
    entities = len(data["entities"])
    text = (
        f"remembered {data['document']}: {len(data['passages'])} passage(s), "
        f"{entities} entit{'y' if entities == 1 else 'ies'}"
    )
    if hidden:
        text += (
            f"; {hidden} forgotten passage(s) not listed "
            "(remembering the same text again does not revive them)"
        )
    return text


# --- search, get, forget -------------------------------------------------------


def cmd_search(args: argparse.Namespace) -> int:
    with _open(args, reading=True) as memory:
        result = to_json(
            memory.search(
                args.query,
                granularity=args.granularity,
                limit=args.limit,
                as_of=args.as_of,
                namespace=args.ns,
            )
        )
    lines = []
    for hit in result["results"]:
        snippet = " ".join(hit["text"].split())
        if len(snippet) > 240:
            snippet = snippet[:237] + "..."
        lines.append(f"{hit['score']:.4g}  {hit['address']}\n       {snippet}")
    _print(args, result, "\n".join(lines) if lines else "no results")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with _open(args, reading=True) as memory:
        data = to_json(memory.get(args.address, namespace=args.ns))
    _print(args, data)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        data = to_json(memory.forget(args.address, reason=args.reason, namespace=args.ns))
    if data["forgotten"]:
        text = f"forgot {len(data['forgotten'])} row(s): " + ", ".join(data["forgotten"])
    else:
        text = f"{data['address']} was already {data['status']}; nothing changed"
    _print(args, data, text)
    return 0


# --- facts and entities -------------------------------------------------------------


def cmd_fact(args: argparse.Namespace) -> int:
    with _open(args, reading=args.fact_command == "list") as memory:
        if args.fact_command == "add":
            data = to_json(
                memory.record_fact(
                    args.subject,
                    args.predicate,
                    args.value,
                    valid_from=args.valid_from,
                    valid_to=args.valid_to,
                    source=args.source,
                    namespace=args.ns,
                )
            )
            _print(args, data, f"recorded {data['fact']}")
            return 0
        data = to_json(memory.facts(args.subject, namespace=args.ns))
    lines = []
    for f in data["facts"]:
        span = ""
        if f["valid_from"] or f["valid_to"]:
            span = f"  [{f['valid_from'] or '…'}, {f['valid_to'] or '…'})"
        lines.append(f"{f['address']}  {f['subject']} | {f['predicate']} | {f['value']}{span}")
    _print(args, data, "\n".join(lines) if lines else "no facts")
    return 0


def cmd_entity(args: argparse.Namespace) -> int:
    with _open(args, reading=args.entity_command in ("list", "show")) as memory:
        if args.entity_command == "list":
            data = to_json(memory.entities(namespace=args.ns))
            lines = [
                f"{e['address']}  {e['name']}"
                + (f" (also {', '.join(e['aliases'])})" if e["aliases"] else "")
                + f"  passages={e['passages']} facts={e['facts']}"
                + (f" page={e['page']}" if e["page"] else "")
                for e in data["entities"]
            ]
            _print(args, data, "\n".join(lines) if lines else "no entities")
        elif args.entity_command == "show":
            _print(args, to_json(memory.entity(args.name, namespace=args.ns)))
        else:
            data = to_json(memory.propose_merge(list(args.names), namespace=args.ns))
            _print(
                args,
                data,
                f"merge candidate {data['candidate']} is {data['status']}: "
                f"{data['entities'][1]} into {data['entities'][0]} "
                "(run compact to get its merge item)",
            )
    return 0


# --- compaction ----------------------------------------------------------------------


def _kinds_arg(value: str | None) -> list[str] | None:
    if value is None:
        return None
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds:
        fail("--kinds needs at least one kind name", code="usage")
    return kinds


def _item_line(item: dict[str, Any]) -> str:
    p = item["payload"]
    kind = item["kind"]
    if isinstance(p.get("summary"), str):  # any kind may say in one line what an item is about
        about = " ".join(p["summary"].split())[:120]
    elif "entity" in p and isinstance(p["entity"], dict):
        about = f"{p['entity']['name']} ({len(p.get('passages', []))} passages, {len(p.get('facts', []))} facts)"
    elif kind == "conflict":
        about = " vs ".join(f"{f['subject']} {f['predicate']} {f['value']!r}" for f in p["facts"])
    elif kind == "merge":
        about = " + ".join(e["name"] for e in p["entities"])
    elif kind == "duplicate":
        about = f"{len(p['passages'])} passages, {p['pair_count']} pair(s), jaccard >= {p['jaccard']:.2f}"
    else:
        about = ", ".join(sorted(p))[:80]
    return f"#{item['id']:<5} {kind:<10} {item['status']:<8} {about}"


def compact_line(state: Any) -> Shown:
    """Compaction: the kind that runs, its step with done of total, items created."""
    if isinstance(state, str):
        return Shown(state)
    text = state.phase + (f": {state.step}" if state.step else "")
    unit = "" if state.step.endswith(state.unit) else f" {state.unit}"  # not "items 5 items"
    if state.total is not None and state.done:
        text += f" {state.done:,}/{state.total:,}{unit}"
    elif state.total is not None:  # starting, or a step that cannot count: its size
        text += f" ({state.total:,} {state.unit})"
    elif state.done:
        text += f" {state.done:,}{unit}"
    new = f"{state.created:,} new item{'' if state.created == 1 else 's'}"
    return Shown(f"{text} · {new}", state.done, state.total, state.unit, (state.phase, state.step))


def cmd_compact(args: argparse.Namespace) -> int:
    _force_progress(args)
    kinds = _kinds_arg(args.kinds)
    if args.executor is None and (args.apply or args.allow_remote):
        fail("--apply and --allow-remote go with --executor ollama", code="usage")
    if args.limit is not None and args.limit < 0:
        fail("--limit must be 0 or more", code="usage")
    if args.executor == "ollama":
        from .executor import run_executor

        return run_executor(args, kinds)
    progress = Progress("compacting", compact_line, sep=" ")
    with _open(args) as memory:
        try:
            result = memory.compact(
                kinds,
                args.limit,
                namespace=args.ns,
                full=args.full,
                progress=progress.update,
            )
            new = result.created
            progress.state = f"done: {new:,} new item{'' if new == 1 else 's'}"
        finally:
            progress.done()
        data = to_json(result)
    lines = [f"namespace {data['namespace']}: {data['created']} new item(s), {data['open']} open"]
    lines.extend(_item_line(i) for i in data["items"])
    for err in data.get("errors", []):
        lines.append(f"error: kind {err['kind']} (plugin {err['plugin']}) failed: {err['error']}")
    _print(args, data, "\n".join(lines))
    return 1 if data.get("errors") else 0


def cmd_items(args: argparse.Namespace) -> int:
    with _open(args, reading=True) as memory:
        if args.items_command == "show":
            data = to_json(
                memory.get(
                    f"memo://item/{args.item}" if args.item.isdigit() else args.item,
                    namespace=args.ns,
                )
            )
            _print(args, data, None if args.json else _item_text(data))
            return 0
        data = to_json(memory.items(kind=args.kind, status=args.status, namespace=args.ns))
    lines = [_item_line(i) for i in data["items"]]
    _print(args, data, "\n".join(lines) if lines else "no items")
    return 0


#: How each built-in kind is completed (``items show`` prints it for an open item).
SUBMIT_HINTS = {
    "page": "submit {id} --content-file PAGE.md --title T [--cite ADDR]...",
    "stale": "submit {id} --content-file PAGE.md --title T [--cite ADDR]...",
    "conflict": "submit {id} --keep FACT-ADDR",
    "merge": "submit {id} --accept | --reject",
    "duplicate": "submit {id} --keep PASSAGE-ADDR...",
}


def _fact_text(f: dict[str, Any], recorded: bool = True) -> str:
    text = f"{f.get('subject')} | {f.get('predicate')} | {f.get('value')}"
    if f.get("valid_from") or f.get("valid_to"):
        text += f"  [{f.get('valid_from') or '…'}, {f.get('valid_to') or '…'})"
    else:
        text += "  (valid at all times)"
    if recorded and f.get("recorded_at"):
        text += f"  recorded {f['recorded_at']}"
    return text


def _entity_name(entity: dict[str, Any]) -> str:
    aliases = entity.get("aliases") or []
    return f"{entity.get('name')}" + (f" (also {', '.join(aliases)})" if aliases else "")


def _indented(text: str, pad: str = "      ") -> list[str]:
    return [pad + line for line in str(text).splitlines()] or [pad]


def _payload_lines(payload: dict[str, Any]) -> list[str]:
    """A work item's payload for people: the shapes of SPEC §10 by name,
    anything else (a plugin's own fields) rendered generically."""
    lines: list[str] = []
    for key, value in payload.items():
        if key == "summary" and isinstance(value, str):
            lines.append(f"summary: {value}")
        elif key == "entity" and isinstance(value, dict):
            lines.append(f"entity: {_entity_name(value)}  {value.get('address')}")
        elif key == "entities" and isinstance(value, list):
            lines.append(f"entities ({len(value)}):")
            lines.extend(
                f"  {e.get('address')}  {_entity_name(e)}" if isinstance(e, dict) else f"  {e}"
                for e in value
            )
        elif key == "passages" and isinstance(value, list):
            lines.append(f"passages ({len(value)}):" if value else "passages: none")
            for n, ps in enumerate(value, 1):
                if not isinstance(ps, dict):
                    lines.append(f"  {ps}")
                    continue
                ref = ps.get("ref", n)
                lines.append(f"  [{ref}] {ps.get('address')}  (document {ps.get('document')})")
                if ps.get("best_match"):
                    lines.append(
                        f"      closest: {ps['best_match']} (jaccard {ps.get('best_jaccard')})"
                    )
                lines.extend(_indented(ps.get("text", "")))
        elif key == "facts" and isinstance(value, list):
            lines.append(f"facts ({len(value)}):" if value else "facts: none")
            for f in value:
                shown = _fact_text(f) if isinstance(f, dict) else ""
                lines.append(f"  {f.get('address') if isinstance(f, dict) else f}  {shown}")
        elif key == "page" and isinstance(value, dict):
            lines.append(
                f"page: {value.get('title')} (version {value.get('version')})  "
                f"{value.get('address')}"
            )
            lines.extend(_indented(value.get("content", ""), "    "))
        elif key == "changes" and isinstance(value, list):
            lines.append(f"changes ({len(value)}):" if value else "changes: none")
            lines.extend(
                f"  {c.get('change')}: {c.get('address')}" if isinstance(c, dict) else f"  {c}"
                for c in value
            )
        elif key == "pairs" and isinstance(value, list):
            total = payload.get("pair_count", len(value))
            lines.append(f"pairs ({len(value)} of {total}):" if value else "pairs: none")
            lines.extend(
                f"  {pr.get('a')} ~ {pr.get('b')}  jaccard {pr.get('jaccard')}"
                if isinstance(pr, dict)
                else f"  {pr}"
                for pr in value
            )
        elif key == "sources" and isinstance(value, list):
            lines.append("sources: " + (", ".join(map(str, value)) if value else "none"))
        elif isinstance(value, dict | list):
            if value:
                lines.append(f"{key}:")
                lines.append(render(value, 1))
            else:
                lines.append(f"{key}: none")
        elif value is not None:
            lines.append(f"{key}: {value}")
    return lines


def _item_text(data: dict[str, Any]) -> str:
    """``items show`` for people: what the item is, its payload, how to complete it."""
    lines = [
        f"item {data['id']} ({data['kind']}): {data['status']}",
        f"fingerprint: {data['fingerprint']}",
        f"created {data['created_at']}, updated {data['updated_at']}",
    ]
    payload = data.get("payload")
    if isinstance(payload, dict) and payload:
        lines.append("")
        lines.extend(_payload_lines(payload))
    if data.get("resolution"):
        lines.append("")
        lines.append("resolution:")
        lines.append(render(data["resolution"], 1))
    hint = SUBMIT_HINTS.get(data["kind"])
    if data["status"] == "open":
        lines.append("")
        how = hint.format(id=data["id"]) if hint else f"submit {data['id']} --set KEY=VALUE..."
        lines.append(
            f"complete it with: memors-mcp {how} --fingerprint {data['fingerprint']}"
            f" (or: submit {data['id']} --skip --reason R)"
        )
    return "\n".join(lines)


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--set takes KEY=VALUE, got {pair!r}", code="usage")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value  # a bare word is a string
        out[key.strip()] = parsed
    return out


def build_resolution(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if args.resolution_json is not None:
        try:
            res = json.loads(args.resolution_json)
        except json.JSONDecodeError as exc:
            fail(f"--resolution-json is not valid JSON ({exc.msg})", code="bad-input")
        if not isinstance(res, dict):
            fail("--resolution-json must be a JSON object", code="bad-input")
    if args.set:
        res.update(_parse_set(args.set))
    if args.content_file is not None:
        # A page's text, but a kind may take other content: the larger limit bounds the read.
        limits = Limits()
        limit, setting = max(
            (limits.page_bytes, "MEMORS_MAX_PAGE_BYTES"), (limits.document_bytes, DOCUMENT_SETTING)
        )
        if args.content_file == "-":
            res["content"] = _read_stdin(limit, setting)
        else:
            res["content"] = _read_text(Path(args.content_file), limit, setting)
    for field in ("title", "reason"):
        if getattr(args, field) is not None:
            res[field] = getattr(args, field)
    if args.cite:
        res["cites"] = args.cite
    if args.keep:
        res["keep"] = args.keep
    if args.bound is not None:
        if args.bound_from is None and args.bound_to is None:
            fail("--bound needs --from T or --to T (the fact's new bound)", code="usage")
        res["bound"] = {"fact": args.bound}
        for key, value in (("valid_from", args.bound_from), ("valid_to", args.bound_to)):
            if value is not None:
                res["bound"][key] = value
    elif args.bound_from is not None or args.bound_to is not None:
        fail("--from and --to go with --bound ADDR", code="usage")
    for flag in ("accept", "reject", "skip"):
        if getattr(args, flag):
            res[flag] = True
    if not res:
        fail(
            "submit needs a resolution: --content-file F --title T, --keep ADDR, "
            "--bound ADDR --to T, --accept, "
            "--reject, --skip --reason R, --set KEY=VALUE or --resolution-json JSON",
            code="usage",
        )
    if args.accept and args.reject:
        fail("--accept and --reject exclude each other", code="usage")
    if args.skip and not args.reason:
        fail("--skip needs --reason R", code="usage")
    return res


def _submit_text(
    memory: Memory, args: argparse.Namespace, resolution: dict[str, Any], report: dict[str, Any]
) -> str:
    """A submission's report for people: every address it kept, superseded,
    forgot or left, and the diff (or why there is none)."""
    lines = [f"item {report['item']} ({report['kind']}): {report.get('message', '')}"]
    would = "" if report["stored"] else "would be "  # a dry run says what it would do
    listed = [f for f in ("kept", "forgotten", "left") if isinstance(report.get(f), list)]
    keep = resolution.get("keep")
    kept = report["address"] or (keep[0] if isinstance(keep, list) and keep else None)
    if report["kind"] == "conflict" and kept and not resolution.get("skip"):
        # The kept fact and what became of the others, each with what it said.
        facts = to_json(memory.get(f"memo://item/{report['item']}", namespace=args.ns))
        facts = [
            f
            for f in (facts.get("payload") or {}).get("facts", [])
            if isinstance(f, dict) and "address" in f
        ]
        if report["address"] and report["address"] not in [f["address"] for f in facts]:
            lines.append(f"stored {report['address']}")  # a new row (a bounded copy)
        for f in facts:
            if f["address"] == kept:
                label = f"{would}kept"
            elif report["stored"]:
                label = to_json(memory.get(f["address"], namespace=args.ns))["status"]
            else:
                label = "would be superseded"
            lines.append(f"{label} {f['address']}: {_fact_text(f, recorded=False)}")
    elif report["address"] and not listed:
        lines.append(f"stored {report['address']}")
    for field, label in (("kept", "kept"), ("forgotten", "forgotten"), ("left", "left live")):
        if field in listed:
            lines.append(f"{would}{label} ({len(report[field])}):")
            lines.extend(f"  {a}" for a in report[field])
    for name, check in report["checks"].items():
        lines.append(f"{name}: {'passed' if check['passed'] else 'FLAGGED'}")
        for flag in check["flagged"]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in flag.items()))
    if report["diff"]:
        lines.append("diff:")
        lines.append(report["diff"].rstrip("\n"))
    elif "content" in resolution and not report["message"].startswith("skipped"):
        # Say why there is no diff rather than leave the section out.
        lines.append("diff: none (the submitted content is the same as the current page's)")
    return "\n".join(lines)


def cmd_submit(args: argparse.Namespace) -> int:
    resolution = build_resolution(args)
    with _open(args) as memory:
        report = to_json(
            memory.submit(
                args.item,
                resolution,
                dry_run=args.dry_run,
                force=args.force,
                fingerprint=args.fingerprint,
                namespace=args.ns,
            )
        )
        text = None if args.json else _submit_text(memory, args, resolution, report)
    report.pop("message", "")
    _print(args, report, text)
    refused = not report["stored"] and not args.dry_run
    flagged = any(not c["passed"] for c in report["checks"].values())
    return 1 if refused or (args.dry_run and flagged and not args.force) else 0


# --- lint, metrics, purge, serve, export/import/backup ---------------------------------------


def cmd_lint(args: argparse.Namespace) -> int:
    from memors_core.engine.lint import run_lint
    from memors_core.plugins.manager import build_plugin_manager
    from memors_core.storage.sqlite.connection import default_path
    from memors_core.storage.sqlite.ops import check_namespace

    check_namespace(args.ns)
    path = Path(os.path.expanduser(args.db)) if args.db else default_path()
    data = to_json(run_lint(path, args.ns, build_plugin_manager()))
    lines = [f"{f['rule']:<14} {f['address']}  {f['message']}" for f in data["findings"]]
    _print(args, data, "\n".join(lines) if lines else f"namespace {args.ns}: no findings")
    return 1 if data["findings"] else 0


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.json:
        fail("metrics prints the Prometheus text format; it has no --json form", code="usage")
    with _open(args, reading=True) as memory:  # never creates a store: an empty one's
        text = memory.metrics()
    sys.stdout.write(text)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    if not args.yes:
        fail(f"purge erases {args.address} for good; add --yes to confirm", code="usage")
    with _open(args) as memory:
        data = to_json(memory.purge(args.address, namespace=args.ns))
    if data["earlier"]:
        text = f"{data['address']} was erased already (audit record {data['audit']})"
        text += "; its erasure from the file is finished" if data["finished"] else ""
    else:
        text = f"purged {len(data['erased'])} row(s); audit record {data['audit']}"
    if not data["finished"]:
        text += (
            "; another process still reads old pages of the file: the next memors command "
            "finishes erasing them"
        )
    _print(args, data, text)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from memors_mcp.server import serve

    return serve(args)


def cmd_export(args: argparse.Namespace) -> int:
    from memors_core.engine.transfer import export_rows

    with _open(args, reading=True) as memory:
        for row in export_rows(memory, args.ns):
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from memors_core.engine.transfer import import_rows

    path = Path(args.file)
    handle, _size = files.open_regular(path)  # never a FIFO or a device
    with handle, _open(args) as memory:
        limits = memory.limits
        lines = files.bounded_lines(
            handle,
            files.import_line_limit(limits.document_bytes, limits.page_bytes),
            str(path),
            f"raise {DOCUMENT_SETTING} to read longer lines",
        )
        data = import_rows(memory, lines, str(path))
    _print(args, data, f"imported {sum(data['rows'].values())} row(s)")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from memors_core.engine.transfer import backup

    with _open(args) as memory:
        data = backup(memory, args.path)
    copied = size(Path(data["path"]).stat().st_size)
    _print(
        args, data, f"backed up to {data['path']}: copied {copied} ({data['pages']} SQLite pages)"
    )
    return 0


HANDLERS = {
    "serve": cmd_serve,
    "remember": cmd_remember,
    "search": cmd_search,
    "get": cmd_get,
    "forget": cmd_forget,
    "fact": cmd_fact,
    "entity": cmd_entity,
    "compact": cmd_compact,
    "items": cmd_items,
    "submit": cmd_submit,
    "lint": cmd_lint,
    "metrics": cmd_metrics,
    "purge": cmd_purge,
    "export": cmd_export,
    "import": cmd_import,
    "backup": cmd_backup,
}
