"""What ``remember`` shows on stderr while it works: one document's passages,
or the files, bytes and documents of a load of many."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..output import Progress, Shown, size


def passages_line(state: Any) -> Shown:
    """One document: its passages prepared, then stored."""
    total = f"/{state.total:,}" if state.total is not None else ""
    return Shown(
        f"{state.phase} {state.done:,}{total} passages",
        state.done,
        state.total,
        "passages",
        state.phase,
    )


class LoadProgress:
    """What ``remember DIR…`` and ``--jsonl`` show while they load: files
    and bytes done of the total (counted before the load, only when
    progress is shown), documents stored, a big document's passages."""

    def __init__(self, paths: dict[str, list[Path]], inputs: list[str], jsonl: str | None) -> None:
        self.bar = Progress("remembering", self.describe)
        self.paths = paths  # each input's files (a directory's walked), by input
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
        if state.unit == "passages" and not self.finished:
            total = f"/{state.total:,}" if state.total is not None else ""
            # inside a big document
            parts.append(f"document {stored + 1}: {state.phase} {state.done:,}{total} passages")
        if self.bytes_total is not None or done:
            return Shown(" · ".join(parts), done, self.bytes_total, "bytes", "storing")
        return Shown(" · ".join(parts), stored, None, "documents", "storing")
