"""A purge killed at any of its stages is finished by the next run.

Purge commits the erasure first (rows, audit record, the steps still to run),
then merges each FTS index, vacuums and truncates the WAL. The process is
killed (SIGKILL, or Ctrl-C) exactly at each stage through the test-only
``MEMORS_TEST_PURGE_STOP`` hook; then lint reports the unfinished purge, and
a rerun of the purge — or any command that opens the store — finishes it:
the marker is in none of the database, ``-wal`` and ``-shm`` bytes.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_purge import MARKER, build, traces

from memors_core.storage.sqlite.purge import STEPS
from memors_core.testing import run_cli

pytestmark = pytest.mark.sqlite_only(
    "SQLite purge's own finishing steps (FTS merges, VACUUM, the WAL) and the file's bytes"
)

# Every point at which purge can stop: inside its one transaction, right
# after it commits, before each erasure step, and before its last write.
STAGES = ("erase", "committed", *STEPS, "done")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict]:
    db = tmp_path_factory.mktemp("template") / "purge.db"
    made = build(db)
    # The fact that states the marker goes first: the document is what each test purges.
    assert run_cli("purge", made["fact"], "--yes", db=db).code == 0
    assert not Path(f"{db}-wal").exists()  # closed and checkpointed: one file to copy
    assert traces(db)
    return db, made


@pytest.fixture
def store(template, tmp_path: Path) -> tuple[Path, dict]:
    source, made = template
    db = tmp_path / "purge.db"
    shutil.copyfile(source, db)
    return db, made


def unfinished(db: Path) -> list[dict]:
    r = run_cli("lint", "--json", db=db)
    assert r.code in (0, 1), r
    return [f for f in json.loads(r.out)["findings"] if f["rule"] == "unfinished-purge"]


def purge(db: Path, target: str, stop: str | None = None):
    env = {"MEMORS_TEST_PURGE_STOP": stop} if stop else None
    return run_cli("purge", target, "--yes", "--json", db=db, env=env)


@contextlib.contextmanager
def sigint(disposition: str) -> Iterator[None]:
    """Start the processes of the block with SIGINT at its default, or
    ignored as a background job of a script inherits it (``make test &``,
    nohup, some CI runners): the Ctrl-C the hook sends must arrive either way."""
    before = signal.signal(
        signal.SIGINT, signal.SIG_IGN if disposition == "ignored" else signal.default_int_handler
    )
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


DISPOSITIONS = pytest.mark.parametrize("disposition", ["default", "ignored"])


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("finisher", ["purge", "search"])
def test_a_purge_killed_at_each_stage_is_finished_by_a_rerun_or_by_opening_the_store(
    store, stage: str, finisher: str
):
    db, made = store
    target = made["document"]
    killed = purge(db, target, stop=stage)
    assert killed.code == -signal.SIGKILL, killed

    if stage == "erase":
        # Killed inside the transaction: nothing was erased, nothing is pending.
        assert unfinished(db) == []
        assert run_cli("get", target, db=db).code == 0
    else:
        # The erasure committed; the file may still hold the text: lint says so.
        [finding] = unfinished(db)
        assert finding["address"] == target
        assert f"memors-mcp purge {target} --yes" in finding["message"]
        assert run_cli("get", target, db=db).code == 2

    if finisher == "purge":
        again = purge(db, target)
        assert again.code == 0, again
        out = json.loads(again.out)
        assert out["address"] == target and out["finished"] is True
        assert out["earlier"] is (stage != "erase")
        assert made["passages"][0] in out["erased"]
    else:
        opened = run_cli("search", "raft", db=db)
        assert opened.code == 0, opened
        if stage == "erase":
            assert purge(db, target).code == 0

    assert traces(db) == {}, f"the purged text survives after a purge killed at {stage!r}"
    assert unfinished(db) == []
    r = run_cli("search", MARKER, "--granularity", "all", "--json", db=db)
    assert json.loads(r.out)["results"] == []


@DISPOSITIONS
def test_ctrl_c_before_the_erasure_commits_says_nothing_was_purged(store, disposition):
    db, made = store
    with sigint(disposition):
        r = purge(db, made["document"], stop="erase@SIGINT")
    assert r.code == 2
    assert "interrupted; nothing was purged" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
    assert run_cli("get", made["document"], db=db).code == 0
    assert unfinished(db) == []


@DISPOSITIONS
@pytest.mark.parametrize("stage", ["committed", "fts", "vacuum", "checkpoint"])
def test_ctrl_c_after_the_erasure_committed_says_so_and_how_to_finish(
    store, stage: str, disposition
):
    db, made = store
    target = made["document"]
    with sigint(disposition):
        r = purge(db, target, stop=f"{stage}@SIGINT")
    assert r.code == 2
    [line] = r.err.strip().splitlines()
    assert f"{target} was erased (audit record" in line
    assert "nothing half-stored" not in line
    assert f"memors-mcp purge {target} --yes" in line
    assert unfinished(db) != []
    again = purge(db, target)
    assert again.code == 0, again
    assert "erased already" in run_cli("purge", target, "--yes", db=db).out
    assert traces(db) == {}
    assert unfinished(db) == []


def test_one_purge_finishes_another_that_was_killed(store):
    db, made = store
    assert purge(db, made["document"], stop="vacuum").code == -signal.SIGKILL
    r = purge(db, made["other"])
    assert r.code == 0, r
    assert traces(db) == {}
    assert unfinished(db) == []
    # each purge left exactly one audit record
    with_audit = run_cli("purge", made["document"], "--yes", "--json", db=db)
    assert json.loads(with_audit.out)["earlier"] is True


def test_purging_what_never_existed_is_still_not_found(store):
    db, _made = store
    r = purge(db, "memo://document/0190a0a0-0000-7000-8000-000000000000")
    assert r.code == 2 and "nothing at" in r.err
