"""What the commands share: opening the store, reading a document's text
(bounded) and printing the answer as JSON or text."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memors_core import Memory

from .. import files
from ..output import emit_json, render

DOCUMENT_SETTING = "MEMORS_MAX_DOCUMENT_BYTES"


def open_memory(args: argparse.Namespace, *, reading: bool = False) -> Any:
    """The store, opened for use as ``with open_memory(args) as memory:``.

    ``reading``: the command only reads, so a store that does not exist is
    not created (nor its directory, ``-wal`` or ``-shm``): it is read as an
    empty one, and the answer is an empty store's (as ``lint`` does)."""
    if reading:
        return _open_existing(args)
    # One command, then the process exits: vectors are made by a detached
    # process (start_embedder), never by a thread that would die with it.
    return Memory.open(args.db, background_vectors=False)


def start_embedder(args: argparse.Namespace, memory: Memory) -> None:
    """Start ``memors-mcp reindex --vectors --background`` for each namespace
    this command left passages without vectors in, detached and at a low
    priority: the command returns at once, and the passages get their
    vectors meanwhile (search finds them by their words until then)."""
    import subprocess

    for namespace in sorted(memory.vectors_wanted):
        command = [sys.executable, "-m", "memors_cli", "reindex", "--vectors", "--background"]
        command += ["--ns", namespace]
        if args.db:
            command += ["--db", str(args.db)]
        try:
            subprocess.Popen(  # our own command, by this Python
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not stopped by the terminal's Ctrl-C or hang-up
                close_fds=True,
            )
        except OSError as exc:  # the text is stored: say how to make the vectors
            print(
                f"memors-mcp: vectors of namespace {namespace} not started ({exc}): "
                "run memors-mcp reindex --vectors",
                file=sys.stderr,
            )
    memory.vectors_wanted.clear()


@contextlib.contextmanager
def _open_existing(args: argparse.Namespace) -> Iterator[Memory]:
    from memors_core.settings import default_path

    address = args.db or os.environ.get("MEMORS_DB") or ""
    if isinstance(address, str) and address.startswith(("postgresql://", "postgres://")):
        # A database on a server, not a file: it is there or opening says why.
        with Memory.open(address) as memory:
            yield memory
        return
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


def print_result(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if args.json:
        emit_json(data)
    else:
        print(text if text is not None else render(data))


def read_text(path: Path, limit: int, setting: str = DOCUMENT_SETTING) -> str:
    # A regular file only (never a FIFO or a device), read with a bound.
    return files.read_text_file(path, limit, setting)


def read_stdin(limit: int, setting: str = DOCUMENT_SETTING) -> str:
    raw = files.read_bounded(sys.stdin.buffer, limit, "standard input", setting)
    return files.decode_text(raw, "standard input")


def force_progress(args: argparse.Namespace) -> None:
    from .. import output

    output.FORCE_PROGRESS = bool(getattr(args, "progress", False))
