"""Reading what a user names on the command line, safely.

Only regular files are read: a FIFO would block for ever, ``/dev/zero``
never ends, and neither is a document. A path is checked with ``stat``
(so a device is not even opened), then opened with ``O_NONBLOCK`` (so a
FIFO swapped in meanwhile cannot block the open) and checked again on the
descriptor, which is what is then read. Every read is bounded: a document
reads at most its limit plus one byte before it is refused as too large,
and a JSON-lines file is read a line at a time, each line with a bound.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from memors_core import BadInput
from memors_core.domain.jsonl import decode_line

BOM = b"\xef\xbb\xbf"
MIB = 1024 * 1024
CHUNK = MIB  # how much of a line is read at a time

#: (test, type as --json reports it, what it is in words)
_NOT_REGULAR = (
    (stat.S_ISDIR, "directory", "a directory"),
    (stat.S_ISFIFO, "fifo", "a FIFO (named pipe)"),
    (stat.S_ISCHR, "character-device", "a character device"),
    (stat.S_ISBLK, "block-device", "a block device"),
    (stat.S_ISSOCK, "socket", "a socket"),
)
BROKEN_LINK = ("broken-symlink", "a broken symbolic link")
LINK_LOOP = ("symlink-loop", "a loop of symbolic links")


class NotRegularFile(BadInput):
    """The path exists but is not a regular file: ``type`` says what it is
    (``fifo``, ``character-device`` …), ``what`` says it in words."""

    def __init__(self, path: Path | str, type_: str, what: str) -> None:
        self.path = str(path)
        self.type = type_
        self.what = what
        if type_ == "directory":
            message = f"{path} is a directory"
        else:
            message = f"{path} is {what}, not a regular file"
        super().__init__(message)


def _not_regular(path: Path, mode: int) -> NotRegularFile | None:
    if stat.S_ISREG(mode):
        return None
    for test, type_, what in _NOT_REGULAR:
        if test(mode):
            return NotRegularFile(path, type_, what)
    return NotRegularFile(path, "other", "not a file")


def check_regular(path: Path) -> None:
    """Refuse ``path`` unless it is (or links to) a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise NotRegularFile(path, *BROKEN_LINK) from None
        raise BadInput(f"{path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(path, *LINK_LOOP) from None
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from None
    refusal = _not_regular(path, mode)
    if refusal:
        raise refusal


def open_regular(path: Path) -> tuple[BinaryIO, int]:
    """Open a regular file for reading: the file and its size when opened."""
    check_regular(path)  # a device named by mistake is never opened
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)  # the file that was opened, whatever the path names now
        refusal = _not_regular(path, st.st_mode)
        if refusal:
            raise refusal
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_bounded(handle: BinaryIO, limit: int, name: str, setting: str, size: int = -1) -> bytes:
    """At most ``limit`` bytes (a leading UTF-8 BOM not counted) from
    ``handle``, reading no more than one byte past the limit; more is bad
    input naming ``name`` and the ``setting`` that moves the limit."""
    data = handle.read(limit + 1)
    if data.startswith(BOM) and len(data) > limit:
        data += handle.read(len(BOM))  # the BOM is not text: it does not count
    bom = len(BOM) if data.startswith(BOM) else 0
    if len(data) - bom > limit:
        # A regular file's size is known (unless it grew while being read).
        shown = f"{size - bom} bytes" if size - bom > limit else f"more than {limit} bytes"
        raise BadInput(
            f"{name} is too large ({shown}; the limit is {limit}, set {setting} to change it)"
        )
    return data


def decode_text(raw: bytes, name: str) -> str:
    """UTF-8 text (a BOM dropped), or bad input naming ``name``."""
    if b"\x00" in raw:
        raise BadInput(f"{name} looks binary (it contains NUL bytes), not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{name} is not UTF-8 text (bad byte at offset {exc.start})") from None


def read_text_file(path: Path, limit: int, setting: str = "MEMORS_MAX_DOCUMENT_BYTES") -> str:
    """A regular file's text, read with the bound ``limit``."""
    handle, size = open_regular(path)
    with handle:
        try:
            raw = read_bounded(handle, limit, str(path), setting, size)
        except OSError as exc:
            raise BadInput(f"{path}: cannot read ({exc.strerror})") from None
    return decode_text(raw, str(path))


def line_limit(document_bytes: int) -> int:
    """The longest JSON line taken for one document of at most
    ``document_bytes``: six times it (JSON escapes a control character
    as six bytes, ``\\u0001``) plus 1 MiB for the other fields."""
    return 6 * document_bytes + MIB


def import_line_limit(document_bytes: int, page_bytes: int) -> int:
    """The longest line ``import`` reads: an export's line holds one row,
    at most a document or page (its work items' payloads may quote many
    passages, hence the 256 MiB floor)."""
    return max(256 * MIB, line_limit(max(document_bytes, page_bytes)))


def bounded_lines(handle: BinaryIO, limit: int, name: str, why: str) -> Iterator[bytearray]:
    """The lines of ``handle``, each read with the bound ``limit``: a longer
    line is bad input naming ``name``, its number and ``why``. A line is
    gathered a chunk at a time, so a hostile one costs about ``limit``
    bytes of memory before it is refused, not twice that."""
    n = 0
    while True:
        line = bytearray()
        while len(line) <= limit:
            try:
                chunk = handle.readline(min(CHUNK, limit + 1 - len(line)))
            except OSError as exc:
                raise BadInput(f"{name}: cannot read ({exc.strerror})") from None
            line += chunk
            if not chunk or chunk.endswith(b"\n"):
                break
        if not line:
            return
        n += 1
        if len(line) > limit:
            raise BadInput(f"{name}:{n}: line longer than {limit:,} bytes ({why})")
        yield line


def decoded_lines(lines: Iterator[bytearray], name: str) -> Iterator[str]:
    """Each line as UTF-8 text (a BOM at the start dropped), or bad input
    naming ``name`` and the line."""
    for n, line in enumerate(lines, 1):
        yield decode_line(line, n, name)
