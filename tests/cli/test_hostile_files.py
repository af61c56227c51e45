"""Files that are not files, and files too big or too strange to read.

Through the real CLI in a subprocess: a FIFO, ``/dev/zero`` (named, or as a
symbolic link inside a directory), a broken link, a socket, a 64 GiB sparse
file, a line with no end, JSON nested 100,000 deep and bytes that are not
UTF-8 — given to ``remember``, ``remember --jsonl``, ``import`` and ``submit
--content-file``. Each is a one-line error (exit 2) naming the file (and the
line), or, inside a directory, an entry skipped and reported; nothing hangs,
memory stays bounded (the commands run under a 4 GiB address-space limit,
so reading a whole endless file fails instead of filling the machine), and
a failed import stores nothing.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import one_line_error

from store_checks import connect

MEMORY_CAP = 4 << 30  # address space: >10x the most a run here needs (import of a 64 GiB
# sparse file: 295 MB resident, fine under a 500 MB cap); reading /dev/zero whole hits it in seconds
TIMEOUT = 60  # seconds; every run here takes under two


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout.decode("utf-8", "replace")
        self.err = proc.stderr.decode("utf-8", "replace")

    @property
    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"<exit {self.code}\nstdout: {self.out[:2000]}\nstderr: {self.err[:2000]}>"


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.fixture
def run(tmp_path: Path, store_address: Path | str):
    """The real ``memors-mcp`` with a memory cap; ``stdin`` is bytes or an open file."""
    db = tmp_path / "cli.db" if isinstance(store_address, Path) else store_address

    def go(*args: str, stdin=None, env: dict[str, str] | None = None) -> Run:
        full = {k: v for k, v in os.environ.items() if k != "MEMORS_DISABLE_PLUGINS"}
        full.update(MEMORS_DB=str(db), **(env or {}))
        feed = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
        if stdin is None:
            feed = {"stdin": subprocess.DEVNULL}
        proc = subprocess.run(
            [sys.executable, "-m", "memors_cli", *args],
            capture_output=True,
            timeout=TIMEOUT,  # a FIFO read without the fix blocks for ever: this fails it
            env=full,
            cwd=tmp_path,
            preexec_fn=_cap_memory,
            **feed,
        )
        return Run(proc)

    go.db = db  # type: ignore[attr-defined]
    go.tmp = tmp_path  # type: ignore[attr-defined]
    return go


def count(db: Path | str, table: str = "documents") -> int:
    if isinstance(db, Path) and not db.exists():
        return 0
    conn = connect(db)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def sparse(path: Path, size: int = 64 << 30) -> Path:
    with path.open("wb") as f:
        f.truncate(size)  # 64 GiB of zeros that take no disk
    return path


# --- not regular files ---------------------------------------------------------------------


def test_a_fifo_or_a_device_named_to_any_command_is_refused_at_once(run):
    os.mkfifo(run.tmp / "pipe.md")
    (run.tmp / "fine.md").write_text("Fine words about replication.")
    (run.tmp / "zero.md").symlink_to("/dev/zero")
    fifo = "pipe.md is a FIFO (named pipe), not a regular file"
    device = "is a character device, not a regular file"
    cases = [
        (["remember", "pipe.md"], fifo),
        (["remember", "fine.md", "pipe.md"], fifo),  # checked before anything is stored
        (["remember", "--jsonl", "pipe.md"], fifo),
        (["import", "pipe.md"], fifo),
        (["submit", "1", "--content-file", "pipe.md", "--title", "T"], fifo),
        (["remember", "/dev/zero"], "/dev/zero " + device),
        (["remember", "zero.md"], "zero.md " + device),
        (["remember", "fine.md", "zero.md"], "zero.md " + device),
        (["remember", "--jsonl", "/dev/zero"], "/dev/zero " + device),
        (["import", "/dev/zero"], "/dev/zero " + device),
        (["submit", "1", "--content-file", "/dev/zero", "--title", "T"], "/dev/zero " + device),
    ]
    for args, says in cases:
        r = run(*args, "--json")
        line = one_line_error(r)
        assert says in line, (args, r)
        assert r.json["error"]["code"] == "bad-input"
        assert count(run.db) == 0, args


def test_a_directory_walk_skips_entries_that_are_not_regular_files_and_says_which(run):
    root = run.tmp / "notes"
    root.mkdir()
    (root / "a.md").write_text("Alpha notes about [[Raft]].")
    (root / "b.txt").write_text("Beta notes.")
    os.mkfifo(root / "pipe.md")
    (root / "zero.md").symlink_to("/dev/zero")
    (root / "gone.md").symlink_to(root / "nowhere.md")
    (root / "loop.md").symlink_to(root / "loop.md")
    (root / "ignored-pipe").symlink_to("/dev/zero")  # not a text suffix: never considered
    said = {
        "broken-symlink": "a broken symbolic link",
        "symlink-loop": "a loop of symbolic links",
        "fifo": "a FIFO (named pipe)",
        "character-device": "a character device",
        "socket": "a socket",
    }
    expected = [
        {"path": "notes/gone.md", "type": "broken-symlink"},
        {"path": "notes/loop.md", "type": "symlink-loop"},
        {"path": "notes/pipe.md", "type": "fifo"},
        {"path": "notes/zero.md", "type": "character-device"},
    ]
    with socket.socket(socket.AF_UNIX) as sock:
        try:
            sock.bind(str(root / "sock.md"))
            expected.append({"path": "notes/sock.md", "type": "socket"})
        except OSError:  # a path too long for a socket: the other cases still hold
            pass
        expected.sort(key=lambda e: e["path"])  # the walk's order
        r = run("remember", "notes", "--json")
        assert r.code == 0, r
        assert r.json == {
            "documents": 2,
            "passages": 2,
            "entities": 1,
            "new": 2,
            "new_versions": 0,
            "unchanged": 0,
            "not_regular_files": expected,
        }
        assert r.err.splitlines() == [
            f"memors-mcp: skipped {e['path']}: {said[e['type']]}, not a regular file"
            for e in expected
        ], r
        text = run("remember", "notes")
        assert text.code == 0, text
        assert f"(skipped {len(expected)} entries that are not regular files)" in text.out, text
    assert count(run.db) == 2
    # The same entries named on the command line are refused.
    assert "gone.md is a broken symbolic link" in one_line_error(run("remember", "notes/gone.md"))


def test_opening_a_fifo_never_blocks_even_if_it_replaces_a_file_after_the_check(run):
    # The race between the check and the open: a FIFO appears after ``stat``
    # said "regular file". The open must not block and the descriptor is refused.
    os.mkfifo(run.tmp / "late.md")
    code = (
        "from pathlib import Path\n"
        "from memors_cli import files\n"
        "files.check_regular = lambda path: None  # the FIFO arrived after the check\n"
        "try:\n"
        "    files.open_regular(Path('late.md'))\n"
        "except files.NotRegularFile as exc:\n"
        "    print(exc.type)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=run.tmp,
    )
    assert proc.stdout.strip() == "fifo", proc


# --- bounded reads ---------------------------------------------------------------------------


def test_endless_or_huge_input_is_refused_after_reading_at_most_the_limit(run):
    sparse(run.tmp / "huge.md")
    sparse(run.tmp / "huge.jsonl")
    sparse(run.tmp / "huge-export.jsonl")
    limit = 10 * 1024 * 1024
    too_large = f"the limit is {limit}, set MEMORS_MAX_DOCUMENT_BYTES to change it"
    cases = [
        (["remember", "huge.md"], f"huge.md is too large ({64 << 30} bytes; {too_large})", None),
        (["remember", "-"], f"standard input is too large (more than {limit} bytes", "zero"),
        (["remember", "-", "fine.md"], "standard input is too large", "zero"),
        (["submit", "1", "--content-file", "-", "--title", "T"], "is too large", "zero"),
        (["remember", "--jsonl", "huge.jsonl"], "huge.jsonl:1: line longer than", None),
        (["remember", "--jsonl", "-"], "-:1: line longer than", "zero"),
        (["import", "huge-export.jsonl"], "huge-export.jsonl:1: line longer than", None),
    ]
    (run.tmp / "fine.md").write_text("Fine.")
    for args, says, stdin in cases:
        if stdin == "zero":
            with open("/dev/zero", "rb") as zero:
                r = run(*args, stdin=zero)
        else:
            r = run(*args)
        line = one_line_error(r)
        assert says in line, (args, r)
        assert count(run.db) == 0, args


def test_the_document_limit_is_exact_for_files_and_standard_input(run):
    small = {"MEMORS_MAX_DOCUMENT_BYTES": "100"}
    (run.tmp / "at.md").write_bytes(b"x" * 100)
    (run.tmp / "bom.md").write_bytes(b"\xef\xbb\xbf" + b"y" * 100)  # the BOM is not text
    (run.tmp / "over.md").write_bytes(b"z" * 101)
    assert run("remember", "at.md", env=small).code == 0
    assert run("remember", "bom.md", env=small).code == 0
    assert run("remember", "-", stdin=b"w" * 100, env=small).code == 0
    line = one_line_error(run("remember", "over.md", env=small))
    assert "over.md is too large (101 bytes; the limit is 100" in line
    line = one_line_error(run("remember", "-", stdin=b"v" * 101, env=small))
    assert "standard input is too large (more than 100 bytes; the limit is 100" in line
    assert count(run.db) == 3


def test_a_jsonl_line_longer_than_its_bound_names_the_line_and_keeps_what_came_before(run):
    small = {"MEMORS_MAX_DOCUMENT_BYTES": "100"}  # lines up to 6 x 100 bytes + 1 MiB
    lines = [
        json.dumps({"text": "First."}),
        json.dumps({"text": "Second."}),
        json.dumps({"text": "é" * 50}, ensure_ascii=True),  # 100 bytes of text, 300 escaped
        json.dumps({"text": "x", "metadata": {"pad": "p" * (2 << 20)}}),
        json.dumps({"text": "Never read."}),
    ]
    (run.tmp / "long.jsonl").write_text("\n".join(lines) + "\n")
    line = one_line_error(run("remember", "--jsonl", "long.jsonl", env=small))
    assert line.startswith(f"memors-mcp: long.jsonl:4: line longer than {6 * 100 + (1 << 20):,}")
    assert "the 3 document(s) before it were stored" in line
    assert count(run.db) == 3


# --- bad input, not internal errors ----------------------------------------------------------


def test_hostile_jsonl_lines_are_bad_input_naming_file_and_line(run):
    good = json.dumps({"text": "A good first line."})
    cases = {
        "deep": ("[" * 100_000 + "]" * 100_000, "not valid input (JSON nested too deeply)"),
        "deep-object": ('{"a":' * 100_000 + "1" + "}" * 100_000, "JSON nested too deeply"),
        "deep-metadata": (
            '{"text": "x", "metadata": {"a": ' + "[" * 900 + "]" * 900 + "}}",
            "metadata is nested too deeply (at most 64 levels)",
        ),
        "latin1": ('{"text": "caf\xe9"}', "not UTF-8 text (bad byte at offset 13 of the line)"),
        "digits": ('{"text": "x", "metadata": {"n": ' + "9" * 5000 + "}}", "not valid JSON"),
    }
    for name, (bad, says) in cases.items():
        body = good.encode() + b"\n" + bad.encode("latin-1") + b"\n"
        path = run.tmp / f"{name}.jsonl"
        path.write_bytes(body)
        before = count(run.db)
        line = one_line_error(run("remember", "--jsonl", path.name))
        assert line.startswith(f"memors-mcp: {path.name}:2: "), (name, line)
        assert says in line and "internal error" not in line, (name, line)
        assert "the 1 document(s) before it were stored" in line, line
        assert count(run.db) == before + 1
        # The same from standard input.
        line = one_line_error(run("remember", "--jsonl", "-", stdin=body))
        assert line.startswith("memors-mcp: -:2: ") and says in line, (name, line)
    # Metadata that is stored can be read back (before, 980 levels were stored and then
    # every `get` of the document failed with an internal error).
    ok = {"text": "Nested but fine.", "uri": "nested", "metadata": {"a": [[[[["deep"]]]]]}}
    (run.tmp / "ok.jsonl").write_text(json.dumps(ok) + "\n")
    assert run("remember", "--jsonl", "ok.jsonl").code == 0
    hit = run("search", "nested fine", "--json").json["results"][0]
    doc = run("get", hit["address"], "--json")
    assert doc.code == 0, doc


def _export(run) -> list[bytes]:
    (run.tmp / "a.md").write_text("Raft elects a leader; [[Raft]] uses terms.")
    (run.tmp / "b.md").write_text("Paxos is older than [[Raft]].")
    assert run("remember", "a.md", "b.md").code == 0
    r = run("export")
    assert r.code == 0, r
    return r.out.encode().splitlines()


def _altered(lines: list[bytes], table: str, column: str, value: str) -> tuple[bytes, int]:
    """The export with ``value`` in the first ``table`` row's ``column`` (as
    JSON escapes, the way a file can hold what is not text), and that line's number."""
    at = next(i for i, line in enumerate(lines) if json.loads(line).get("table") == table)
    row = json.loads(lines[at])
    row["row"][column] = value
    altered = [*lines[:at], json.dumps(row).encode(), *lines[at + 1 :]]
    return b"\n".join(altered), at + 1


def test_a_hostile_import_file_is_bad_input_naming_the_line_and_imports_nothing(run):
    lines = _export(run)
    n = len(lines)  # the closing line's number
    head, end = lines[:-1], lines[-1]
    cases = {
        "binary": (bytes(range(256)) * 4, 1, "looks binary (it contains NUL bytes)"),
        "latin1": ("café".encode("latin-1"), 1, "not UTF-8 text"),
        "bad-line-before-the-end": (
            b"\n".join([*head, b'{"table": "facts", "\xff": 1}', end]),
            n,
            "not UTF-8 text (bad byte at offset 20 of the line)",
        ),
        "deep": (b"\n".join([*lines[:3], b"[" * 100_000]), 4, "JSON nested too deeply"),
        "bad-base64": (
            b"\n".join([*head, b'{"table": "facts", "row": {"id": {"$b64": "a"}}}', end]),
            n,
            "bad base64",
        ),
        # Escapes that JSON allows but text does not hold (issue 29, point 6).
        "lone-surrogate": (
            *_altered(lines, "passages", "text", "Raft \ud800 elects"),
            "a string holds a lone surrogate (\\ud800), which is not Unicode text",
        ),
        "low-surrogate-in-a-name": (
            *_altered(lines, "entities", "name", "\udfff"),
            "a string holds a lone surrogate (\\udfff)",
        ),
        "nul-escape": (
            *_altered(lines, "passages", "text", "Raft \x00 elects"),
            "the passages row's text contains a NUL character",
        ),
    }
    for name, (body, at, says) in cases.items():
        path = run.tmp / f"{name}.jsonl"
        path.write_bytes(body + b"\n")
        target = run.tmp / f"{name}.db"
        r = run("import", path.name, "--db", str(target), "--json")
        line = one_line_error(r)
        assert line.startswith(f"memors-mcp: {path.name}:{at}: "), (name, line)
        assert says in line and "internal error" not in line, (name, line)
        assert r.json["error"]["code"] == "bad-input"
        assert count(target) == 0, name  # all or nothing
        # Nothing was kept, so the store is still empty: the good export now imports.
        good = run.tmp / "good.jsonl"
        good.write_bytes(b"\n".join(lines) + b"\n")
        assert run("import", good.name, "--db", str(target)).code == 0
        assert count(target) == 2
