"""``run_cli`` (the ``cli`` fixture) forks each command from a zygote that has
already imported the CLI: what a command prints, exits with, reads and
writes must be exactly what a fresh ``python -m memors_cli`` gives."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from memors_core.testing import run_cli
from memors_core.testing.zygote import SETTING, zygote_for

pytestmark = pytest.mark.engine_independent("runs the CLI on SQLite files of its own")


def _both(tmp_path, *args, input=None, env=None, cwd=None):
    """The same command through the zygote and through a fresh interpreter,
    each on a store of its own (the same file name in its own directory)."""
    results = []
    for way in ("zygote", "spawn"):
        home = tmp_path / way
        home.mkdir(exist_ok=True)
        extra = {**(env or {}), **({SETTING: "spawn"} if way == "spawn" else {})}
        where = home / cwd if cwd else home
        where.mkdir(exist_ok=True)
        results.append(
            run_cli(*args, db=home / "memors.db", env=extra, input=input, cwd=where, timeout=60)
        )
    return results


@pytest.mark.parametrize(
    "args, input",
    [
        (("remember", "-", "--entity", "Raft"), "Raft elects a leader.\r\nA second line.\n"),
        (("search", "leader", "--json"), None),
        (("fact", "add", "Raft", "leader", "n1"), None),
        (("compact",), None),
        (("lint",), None),
        (("get", "memo://nowhere/1"), None),
        (("search",), None),
        (("no-such-command",), None),
        (("--version",), None),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_a_forked_command_answers_as_a_fresh_interpreter_does(tmp_path, args, input):
    fork, fresh = _both(tmp_path, *args, input=input)
    assert _same(fork) == _same(fresh)


def _same(result):
    # New rows' ids are the one thing two runs may not share.
    ids = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    return result.code, ids.sub("ID", result.out), ids.sub("ID", result.err)


def test_the_working_directory_environment_and_store_are_the_call_s_own(tmp_path):
    (tmp_path / "zygote" / "notes").mkdir(parents=True)
    (tmp_path / "spawn" / "notes").mkdir(parents=True)
    for way in ("zygote", "spawn"):
        (tmp_path / way / "notes" / "raft.md").write_text("# Raft\n\nRaft elects a leader.\n")
    # A relative file name is found from the call's own working directory.
    fork, fresh = _both(tmp_path, "remember", "raft.md", "--json", cwd="notes")
    assert fork.code == fresh.code == 0, (fork, fresh)
    assert len(fork.json["passages"]) == len(fresh.json["passages"]) == 1
    fork, fresh = _both(tmp_path, "remember", "raft.md")
    assert fork.code == fresh.code == 2 and "raft.md" in fork.err
    assert _same(fork) == _same(fresh)
    # The environment is the call's: a log level set for one call shows in it
    # and not in the next.
    chatty = run_cli(
        "fact", "add", "Raft", "leader", "n2", "--json",
        db=tmp_path / "zygote" / "memors.db",
        env={"MEMORS_LOG_LEVEL": "info"},
    )  # fmt: skip
    quiet = run_cli("fact", "add", "Raft", "term", "3", db=tmp_path / "zygote" / "memors.db")
    assert chatty.code == quiet.code == 0
    assert chatty.err.strip() and not quiet.err.strip()


def test_a_change_to_how_python_starts_runs_a_fresh_interpreter(tmp_path, monkeypatch):
    assert zygote_for(dict(os.environ)) is not None
    assert zygote_for({**os.environ, "PYTHONPATH": str(tmp_path)}) is None
    assert zygote_for({**os.environ, "LC_ALL": "C"}) is None
    monkeypatch.setenv(SETTING, "spawn")
    assert zygote_for(dict(os.environ)) is None


def test_a_command_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path):
    # `serve --http` runs until it is stopped.
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("serve", "--http", "--port", "0", db=tmp_path / "memors.db", timeout=3)
    after = run_cli("remember", "-", db=tmp_path / "memors.db", input="Raft elects a leader.")
    assert after.code == 0, after
