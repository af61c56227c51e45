"""Text that cannot be stored is bad input on every route into the CLI.

Three things are not text: a byte that is not UTF-8 (Python hands a command
line's over as a lone surrogate, U+DC80-U+DCFF), a lone surrogate (a JSON
``\\ud800`` escape decodes to one) and NUL. Whichever argument or input file
carries one, ``memors-mcp`` answers exit 2 with one line on stderr naming
where it was, and the store's rows are what they were. The arguments are
read from :func:`memors_cli.main.build_parser`, so a new one is covered
without touching this file; a new file argument fails
:func:`test_every_file_argument_has_a_route_here` until its contents are
fed through :data:`ROUTES` too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_cli.main import build_parser, main
from memors_core import Memory
from memors_core.testing import passages_about
from store_checks import connect, is_postgres

TABLES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    "postgres": "SELECT table_name FROM information_schema.tables WHERE table_schema = "
    "current_schema() AND table_type = 'BASE TABLE'",
}


def row_counts(db: Path | str) -> dict[str, int]:
    """Every table's row count (the counters included)."""
    conn = connect(db)
    try:
        names = [r[0] for r in conn.execute(TABLES["postgres" if is_postgres(db) else "sqlite"])]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


# --- every argument, from the parser -------------------------------------------------------------


class Argument:
    """One argument of one (sub)command that takes a value, and a command
    line that gives it ``value`` and every other required argument a
    harmless one."""

    def __init__(self, words: tuple[str, ...], action: argparse.Action, chain: list) -> None:
        self.words = words
        self.action = action
        self.chain = chain  # the parsers from the top to this one
        if action.option_strings:
            self.name = max(action.option_strings, key=len)
        else:
            self.name = str(action.metavar or action.dest)

    def __repr__(self) -> str:
        return " ".join((*self.words, self.name))

    def argv(self, value: str) -> list[str]:
        argv: list[str] = []
        for depth, parser in enumerate(self.chain):
            if depth:
                argv.append(self.words[depth - 1])
            for action in parser._actions:
                if action is self.action:
                    if action.option_strings:
                        argv.append(f"{self.name}={value}")
                    else:
                        argv += [value] * (2 if action.nargs == 2 else 1)
                elif (
                    not action.option_strings
                    and action.required
                    and not isinstance(action, argparse._SubParsersAction)
                ):
                    argv += ["x"] * (2 if action.nargs == 2 else 1)
        # Where a subcommand is required, one that needs nothing more.
        for action in self.chain[-1]._actions:
            if isinstance(action, argparse._SubParsersAction) and action.required:
                argv.append("lint" if len(self.chain) == 1 else "list")
        return argv


def _arguments() -> list[Argument]:
    found: list[Argument] = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...], chain: list) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name), [*chain, sub])
            elif action.nargs != 0 and not isinstance(
                action, argparse._HelpAction | argparse._VersionAction
            ):
                found.append(Argument(words, action, chain))

    top = build_parser()
    walk(top, (), [top])
    return found


ARGUMENTS = _arguments()

#: What a store option is called before the subcommand (``memors-mcp --db X lint``).
assert {repr(a) for a in ARGUMENTS} >= {"--db", "submit --reason", "search QUERY"}


def _bad(kind: str, draw_byte: int, draw_surrogate: int) -> str:
    return {
        "byte": chr(0xDC00 + draw_byte),  # how Python hands over a byte that is not UTF-8
        "surrogate": chr(draw_surrogate),
        "nul": "\x00",
    }[kind]


# Text around the bad character: anything storable that argparse reads as a value.
_around = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6
)


def _run_in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def seeded_store(tmp_path_factory) -> Any:
    """A store with one of most things and open work items (SQLite, or a
    PostgreSQL database under ``--engine=postgres``)."""
    from memors_core.testing import temporary_store

    with temporary_store(tmp_path_factory.mktemp("bad-text")) as db:
        _seed(db)
        yield db


def _seed(db: Path | str) -> int:
    """Seed ``db``; the number of an open work item."""
    with Memory.open(db) as memory:
        memory.remember("\n\n".join(passages_about("Raft", 3)), uri="raft", entities=["Raft"])
        memory.record_fact("Raft", "leader", "n1")
        memory.record_fact("Raft", "leader", "n2")
        items = memory.compact().items
        return next(i.id for i in items if i.kind == "conflict")


@pytest.mark.parametrize("argument", ARGUMENTS, ids=repr)
def test_every_argument_refuses_text_that_cannot_be_stored(seeded_store, argument, tmp_path):
    """In-process (fast enough for every argument and many examples): a bad
    byte, a lone surrogate or a NUL anywhere in the value is exit 2, one line
    naming the argument, and no row changes."""
    before = row_counts(seeded_store)

    @settings(
        max_examples=6,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        kind=st.sampled_from(["byte", "surrogate", "nul"]),
        byte=st.integers(0x80, 0xFF),
        surrogate=st.integers(0xD800, 0xDFFF),
        head=_around,
        tail=_around,
        as_json=st.booleans(),
    )
    def check(kind, byte, surrogate, head, tail, as_json) -> None:
        value = "a" + head + _bad(kind, byte, surrogate) + tail
        # (The store option given twice: the later one, the argument's, wins.)
        argv = ["--db", str(seeded_store), *argument.argv(value)]
        code, out, err = _run_in_process([*argv, *(["--json"] if as_json else [])])
        lines = err.strip().splitlines()
        assert code == 2, (argv, out, err)
        assert len(lines) == 1 and argument.name in lines[0], (argv, err)
        assert "internal error" not in err and "Traceback" not in err
        if as_json:
            assert json.loads(out)["error"]["message"], out
        else:
            assert out == ""

    with contextlib.chdir(tmp_path):  # a stray PATH (backup's) would land here
        check()
    assert row_counts(seeded_store) == before
    assert list(tmp_path.iterdir()) == []


# --- the real command line: bytes, as a shell passes them ----------------------------------------

#: Byte sequences that are not UTF-8: Latin-1, a stray continuation byte, a
#: truncated sequence, a surrogate encoded as UTF-8 (CESU-8), an overlong '/'.
BAD_BYTES = [b"caf\xe9", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]


def test_undecodable_bytes_on_the_real_command_line_are_bad_input(seeded_store, tmp_path):
    """A subprocess per example (so a bounded number), with the bytes in the
    process's own argv: exit 2, one line, nothing stored; with ``--json``
    the error is JSON on stdout."""
    before = row_counts(seeded_store)
    env = {**os.environ, "MEMORS_DB": str(seeded_store)}

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        argument=st.sampled_from(ARGUMENTS),
        bad=st.sampled_from(BAD_BYTES),
        as_json=st.booleans(),
    )
    def check(argument, bad, as_json) -> None:
        value = "a" + bad.decode("utf-8", "surrogateescape")
        argv = [os.fsencode(a) for a in argument.argv(value)]
        argv += [b"--json"] if as_json else []
        proc = subprocess.run(
            [sys.executable, "-m", "memors_cli", *argv],
            capture_output=True,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        err = proc.stderr.decode("utf-8", "backslashreplace")
        assert proc.returncode == 2, (argv, err)
        [line] = err.strip().splitlines()
        assert argument.name in line and "internal error" not in line, line
        if as_json:
            assert json.loads(proc.stdout)["error"]["code"] in ("bad-input", "usage")

    check()
    assert row_counts(seeded_store) == before
    assert list(tmp_path.iterdir()) == []


# --- every input file ---------------------------------------------------------------------------

# The text a route carries, with a bad character: as bytes in a file, or as
# JSON escapes inside a valid UTF-8 line.
_RAW = {
    "byte": b"caf\xe9 au lait",
    "cesu": b"a surrogate \xed\xa0\x80 as UTF-8",
    "nul": b"binary \x00 data",
}
_ESCAPED = {"surrogate": "lone \ud800 surrogate", "nul": "a \x00 NUL"}


def _jsonl(field: str, text: str) -> bytes:
    doc: dict[str, Any] = {"text": "Raft elects a leader."}
    if field == "metadata key":
        doc["metadata"] = {text: 1}
    elif field == "metadata":
        doc["metadata"] = {"note": [text]}
    elif field == "entities":
        doc["entities"] = ["Raft", text]
    else:
        doc[field] = text
    return json.dumps(doc).encode() + b"\n"  # ASCII: the escapes stay escapes


#: (route, how it is run) -> what the one error line names. A route is a
#: function (item, tmp) -> (argv, stdin bytes, the word the error names).
ROUTES: dict[str, Any] = {}


def route(name: str, kinds: list[str]):
    def register(fn):
        for kind in kinds:
            ROUTES[f"{name}-{kind}"] = (fn, kind)
        return fn

    return register


@route("remember FILE", list(_RAW))
def _remember_file(item, tmp, kind):
    (tmp / "notes.md").write_bytes(_RAW[kind])
    return ["remember", "notes.md"], None, "notes.md"


@route("remember DIR", list(_RAW))
def _remember_dir(item, tmp, kind):
    # The bad file first: a load keeps the documents before a bad one (and says so).
    (tmp / "docs").mkdir()
    (tmp / "docs" / "a.md").write_bytes(_RAW[kind])
    (tmp / "docs" / "b.md").write_text("Raft elects a leader.")
    return ["remember", "docs"], None, "a.md"


@route("remember DIR name", ["byte"])
def _remember_dir_name(item, tmp, kind):
    (tmp / "docs").mkdir()
    (tmp / "docs" / "a.md").write_text("Raft elects a leader.")
    (tmp / os.fsdecode(b"docs/caf\xe9.md")).write_text("Raft copies writes.")
    return ["remember", "docs"], None, "caf"


@route("remember -", list(_RAW))
def _remember_stdin(item, tmp, kind):
    return ["remember", "-"], _RAW[kind], "standard input"


@route("remember --jsonl raw", list(_RAW))
def _jsonl_raw(item, tmp, kind):
    line = b'{"text": "' + _RAW[kind] + b'"}\n'
    (tmp / "docs.jsonl").write_bytes(line)
    return ["remember", "--jsonl", "docs.jsonl"], None, "docs.jsonl:1"


for _field in ("text", "uri", "title", "entities", "metadata", "metadata key"):

    @route(f"remember --jsonl {_field}", list(_ESCAPED))
    def _jsonl_field(item, tmp, kind, field=_field):
        (tmp / "docs.jsonl").write_bytes(_jsonl(field, _ESCAPED[kind]))
        return ["remember", "--jsonl", "docs.jsonl"], None, "docs.jsonl:1"

    @route(f"remember --jsonl - {_field}", list(_ESCAPED))
    def _jsonl_stdin_field(item, tmp, kind, field=_field):
        return ["remember", "--jsonl", "-"], _jsonl(field, _ESCAPED[kind]), "-:1"


@route("submit --content-file", list(_RAW))
def _content_file(item, tmp, kind):
    (tmp / "page.md").write_bytes(_RAW[kind])
    return ["submit", str(item), "--content-file", "page.md", "--title", "Raft"], None, "page.md"


@route("submit --content-file -", list(_RAW))
def _content_stdin(item, tmp, kind):
    argv = ["submit", str(item), "--content-file", "-", "--title", "Raft"]
    return argv, _RAW[kind], "standard input"


@route("submit --resolution-json", list(_ESCAPED))
def _resolution_json(item, tmp, kind):
    resolution = json.dumps({"skip": True, "reason": _ESCAPED[kind]})
    return ["submit", str(item), "--resolution-json", resolution], None, "reason"


@route("submit --set", list(_ESCAPED))
def _set(item, tmp, kind):
    value = json.dumps(_ESCAPED[kind])
    return ["submit", str(item), "--set", "skip=true", "--set", f"reason={value}"], None, "reason"


@route("import FILE", ["byte", "cesu", "nul"])
def _import(item, tmp, kind):
    # (A lone surrogate escaped inside an export's line is the import's own rule.)
    (tmp / "dump.jsonl").write_bytes(b'{"table": "' + _RAW[kind] + b'"}\n')
    return ["import", "dump.jsonl"], None, "dump.jsonl:1"


#: The arguments that name a file the CLI reads, by (words, name), and the
#: route of ROUTES that feeds that file bad contents.
FILE_ROUTES = {
    ("remember", "FILE|DIR|-"): "remember FILE",
    ("remember", "--jsonl"): "remember --jsonl",
    ("submit", "--content-file"): "submit --content-file",
    ("import", "FILE"): "import FILE",
    ("backup", "PATH"): None,  # written, not read: its name is an argument like any other
}


def _names_a_file(argument: Argument) -> bool:
    metavar = str(argument.action.metavar or "")
    return argument.name != "--db" and ("FILE" in metavar or "PATH" in metavar or metavar == "F")


def test_every_file_argument_has_a_route_here():
    """A new argument that names a file must have its contents fed bad
    text too: add a route to ROUTES, then the argument to FILE_ROUTES."""
    named = {(" ".join(a.words), a.name) for a in ARGUMENTS if _names_a_file(a)}
    assert named == set(FILE_ROUTES)
    for fed in filter(None, FILE_ROUTES.values()):
        assert any(name.startswith(fed) for name in ROUTES), fed


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_input_file_route_refuses_text_that_cannot_be_stored(
    name, store_address, fresh_store, tmp_path
):
    """Each file (and standard input) a command reads, with a bad byte, an
    encoded surrogate or NUL in it, or a JSON escape of a lone surrogate or
    NUL in any field of a line: exit 2, one line naming the file (and line)
    or the field, nothing stored."""
    fn, kind = ROUTES[name]
    if name.startswith("import"):  # into an empty store, as import requires
        db = fresh_store("empty.db")
        Memory.open(db).close()
        item = 0
    else:
        db = store_address
        item = _seed(db)
    before = row_counts(db)
    argv, stdin, names = fn(item, tmp_path, kind)
    r = _run_bytes(argv, db, tmp_path, stdin)
    assert r.code == 2, r
    [line] = r.err.strip().splitlines()
    assert names in line and "internal error" not in line, line
    assert row_counts(db) == before


class _Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code = proc.returncode
        self.out = proc.stdout.decode("utf-8", "backslashreplace")
        self.err = proc.stderr.decode("utf-8", "backslashreplace")

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout: {self.out}\nstderr: {self.err}"


def _run_bytes(argv: list[str], db: Path | str, cwd: Path, stdin: bytes | None) -> _Result:
    """The real CLI on ``db``, given exactly the bytes ``stdin`` (none: no input)."""
    env = {k: v for k, v in os.environ.items() if k != "MEMORS_DISABLE_PLUGINS"}
    env["MEMORS_DB"] = str(db)
    proc = subprocess.run(
        [sys.executable, "-m", "memors_cli", *argv],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    return _Result(proc)
