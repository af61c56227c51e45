"""``remember``: one document (a file or standard input) or many (directories,
several files, ``--jsonl``), with what it stored said back."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memors_core.wire import to_json

from .. import files
from ..main import bad_text
from ..output import Progress, fail
from ._common import (
    DOCUMENT_SETTING,
    force_progress,
    open_memory,
    print_result,
    read_stdin,
    read_text,
    start_embedder,
)
from .remember_progress import LoadProgress, passages_line

if TYPE_CHECKING:
    from memors_core import Memory

TEXT_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".rst"}


def _walk(directory: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            p = Path(root) / name
            if p.suffix.lower() in TEXT_SUFFIXES and not name.startswith("."):
                yield p


def cmd_remember(args: argparse.Namespace) -> int:
    force_progress(args)
    inputs, many = _checked_inputs(args)
    listed = _listed_files(inputs)
    with open_memory(args) as memory:
        if many:
            _remember_many(args, memory, inputs, listed)
        else:
            _remember_one(args, memory, inputs[0])
        start_embedder(args, memory)
        return 0


def _checked_inputs(args: argparse.Namespace) -> tuple[list[str], bool]:
    """What to read (standard input when nothing is named and it is not a
    terminal), and whether that is many documents; a usage error or a named
    path that cannot be read is refused before anything is stored."""
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
    return inputs, many


def _listed_files(inputs: list[str]) -> dict[str, list[Path]]:
    """What the directories hold, walked before anything is stored: a file's
    URI is its path, so a name that is not UTF-8 refuses the whole load."""
    listed = {
        s: list(_walk(Path(s))) if Path(s).is_dir() else [Path(s)] for s in inputs if s != "-"
    }
    for p in (p for found in listed.values() for p in found):
        why = bad_text(str(p))
        if why:
            shown = os.fsencode(p).decode("utf-8", "backslashreplace")
            fail(f"{shown}: the file name is not valid text ({why}); rename it", code="bad-input")
    return listed


def _remember_one(args: argparse.Namespace, memory: Memory, source: str) -> None:
    """One document, from a file or standard input, said back with its passages."""
    limit = memory.limits.document_bytes
    if source == "-":
        text = read_stdin(limit)
        uri = args.uri
    else:
        path = Path(source)
        text = read_text(path, limit)
        uri = args.uri or str(path.resolve())
    shown_as = "standard input" if source == "-" else source
    with Progress(f"remembering {shown_as}", passages_line) as progress:
        result = memory.remember(
            text,
            uri=uri,
            title=args.title,
            entities=args.entity,
            namespace=args.ns,
            progress=progress.update,
        )
    data = to_json(result)
    said = None
    if not args.json:
        # `passages` lists the live ones: say how many of the document's are not.
        shown = memory.get(data["document"], namespace=args.ns)
        every = getattr(shown, "passages", None)
        hidden = len(every) - len(data["passages"]) if isinstance(every, list) else 0
        said = _remembered_text(data, hidden)
    print_result(args, data, said)


def _remember_many(
    args: argparse.Namespace, memory: Memory, inputs: list[str], listed: dict[str, list[Path]]
) -> None:
    """Many documents in one load, said back as counts (and what was skipped)."""
    progress = LoadProgress(listed, inputs, args.jsonl)
    documents = _Documents(args, inputs, memory.limits.document_bytes, progress)
    try:
        result = memory.remember_many(
            documents.read(),
            namespace=args.ns,
            progress=progress.bar.update,
            where=lambda n: documents.labels[n - 1],
        )
        progress.finished = True
    finally:
        progress.bar.done()
    data = to_json(result)
    notes = [f"{len(documents.skipped)} empty file(s)"] if documents.skipped else []
    not_regular = documents.not_regular
    if not_regular:
        data["not_regular_files"] = [{"path": e.path, "type": e.type} for e in not_regular]
        entries = "entry" if len(not_regular) == 1 else "entries"
        notes.append(f"{len(not_regular)} {entries} that are not regular files")
        for e in not_regular:  # on success only: an error stays one line
            print(f"memors-mcp: skipped {e.path}: {e.what}, not a regular file", file=sys.stderr)
    note = f" (skipped {', '.join(notes)})" if notes else ""
    print_result(
        args,
        data,
        f"remembered {data['documents']} document(s): {data['new']} new, "
        f"{data['new_versions']} new version(s), {data['unchanged']} unchanged; "
        f"{data['passages']} passage(s), {data['entities']} new entit(ies){note}",
    )


class _Documents:
    """The documents of a load, read as ``remember_many`` asks for them: the
    inputs in order, then the ``--jsonl`` lines; on the side, the empty
    files and the directory entries that are not regular files (skipped),
    and what to call the n-th document in an error."""

    def __init__(
        self, args: argparse.Namespace, inputs: list[str], limit: int, progress: LoadProgress
    ) -> None:
        self.args, self.inputs, self.limit, self.progress = args, inputs, limit, progress
        self.skipped: list[str] = []
        self.not_regular: list[files.NotRegularFile] = []
        self.labels: list[str] = []

    def read(self) -> Iterator[dict[str, Any]]:
        for source in self.inputs:
            if source == "-":
                text = read_stdin(self.limit)
                self.labels.append("standard input")
                yield {"text": text, "entities": self.args.entity}
            else:
                yield from self._files(source)
        if self.args.jsonl:
            yield from self._jsonl(self.args.jsonl)

    def _files(self, source: str) -> Iterator[dict[str, Any]]:
        walked = Path(source).is_dir()
        for p in self.progress.paths[source]:
            self.progress.visit(p)
            try:
                text = read_text(p, self.limit)
            except files.NotRegularFile as exc:
                if not walked:  # named on the command line: refused
                    raise
                self.not_regular.append(exc)
                continue
            if not text.strip():
                self.skipped.append(str(p))
                continue
            self.labels.append(str(p))
            self.progress.read()
            yield {"text": text, "uri": str(p.resolve()), "entities": self.args.entity}

    def _jsonl(self, name: str) -> Iterator[dict[str, Any]]:
        from memors_core.domain.jsonl import iter_jsonl

        if name == "-":
            handle = sys.stdin.buffer
        else:
            handle, _size = files.open_regular(Path(name))
        # No limit on the file as a whole, but each line is read with a bound.
        raw = self.progress.counted(
            files.bounded_lines(
                handle,
                files.line_limit(self.limit),
                name,
                f"at most 6 times {DOCUMENT_SETTING} plus 1 MiB for one document",
            )
        )
        line = 0

        def numbered() -> Iterator[str]:
            nonlocal line
            for line, text in enumerate(files.decoded_lines(raw, name), 1):  # noqa: B007
                yield text

        try:
            for doc in iter_jsonl(numbered(), name):
                self.labels.append(f"{name}:{line}")
                self.progress.read()
                yield _with_entities(doc, self.args.entity)
        finally:
            if handle is not sys.stdin.buffer:
                handle.close()


def _with_entities(doc: dict[str, Any], extra: list[str]) -> dict[str, Any]:
    """A ``--jsonl`` document with the ``--entity`` names added to its own."""
    if extra:
        own = doc.get("entities") or []
        own = [own] if isinstance(own, str) else own
        if isinstance(own, list):
            doc = {**doc, "entities": [*own, *extra]}
    return doc


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
