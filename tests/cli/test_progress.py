"""Progress that shows (issue 19): long work draws a live line on a terminal
— done of total, rate, ETA — several times while it runs, rewritten in place;
nothing on a pipe unless asked (``--progress``, ``MEMORS_PROGRESS=1``).

Each run lasts a few seconds here; the line is redrawn at least every half
second, so "two different counts before the process exits" holds on any
machine slow enough to make it longer. No assertion reads a rate or a time."""

from __future__ import annotations

import json
import os
import pty
import random
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORDS = [f"w{i}" for i in range(3000)]


def _paragraph(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(60)) + "."


def _corpus(directory: Path, files: int, paragraphs: int) -> None:
    """``files`` Markdown files of ``paragraphs`` passages; half the passages
    are shared with other files, so a compaction finds many duplicates."""
    rng = random.Random(19)
    shared = [_paragraph(rng) for _ in range(files * paragraphs // 4 + 1)]
    directory.mkdir()
    for f in range(files):
        parts = [
            rng.choice(shared) if rng.random() < 0.5 else _paragraph(rng) for _ in range(paragraphs)
        ]
        (directory / f"note-{f:04}.md").write_text("\n\n".join(parts) + "\n")


def _env(cli, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORS_PROGRESS",)}
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    return {**env, "MEMORS_DB": str(cli.db), **extra}


def run_on_a_terminal(cli, *args: str, stdout_too: bool = True, **env: str):
    """Run the real CLI with stderr (and stdout, unless ``stdout_too`` is
    false: then it is a pipe) on a pseudo-terminal, reading it as it comes.

    Returns (status, frames, screen, stdout): ``frames`` are the progress
    lines (each drawing ends with clear-to-end-of-line) read while the
    process was still running."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower if stdout_too else subprocess.PIPE,
        stderr=follower,
        env=_env(cli, **env),
        cwd=cli.tmp,
        close_fds=True,
    )
    os.close(follower)
    screen, frames, pending = b"", [], b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            running = proc.poll() is None  # what was just read came before the exit
            screen += data
            pending += data
            *drawn, pending = pending.split(b"\x1b[K")
            if running:
                frames.extend(d.decode("utf-8", "replace").strip("\r\n") for d in drawn)
        elif proc.poll() is not None:
            break
    os.close(leader)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=60), frames, screen.decode("utf-8", "replace"), out


def _counts(frames: list[str], pattern: str) -> list[tuple[str, ...]]:
    return [m.groups() for f in frames if (m := re.search(pattern, f))]


@pytest.fixture
def notes(cli) -> Path:
    _corpus(cli.tmp / "notes", files=300, paragraphs=60)  # about 9 MB, 18,000 passages
    return cli.tmp / "notes"


def test_remembering_a_directory_shows_files_and_bytes_while_it_runs(cli, notes):
    status, frames, screen, _ = run_on_a_terminal(cli, "remember", "notes")
    assert status == 0, screen
    stored = _counts(frames, r"remembering: ([\d,]+)/300 files · [\d.]+ [kMG]?B/[\d.]+ MB")
    prepared = _counts(frames, r"remembering: preparing ([\d,]+)/300 documents")
    assert len(set(stored) | {("p", *c) for c in prepared}) >= 2, screen
    assert any(c != ("300",) for c in stored + prepared), screen  # seen part way
    # Rewritten in place, finished with a newline; the summary is unchanged.
    assert "\rremembering: 300/300 files" in screen
    assert re.search(r"remembering: 300/300 files[^\n]*\x1b\[K\r?\n", screen), screen
    assert "remembered 300 document(s)" in screen

    # compact on the same store: each kind's name, the duplicate scan's steps
    # with done of total, items created; stdout (a pipe) is only the JSON.
    status, frames, screen, out = run_on_a_terminal(
        cli, "compact", "--kinds", "duplicate", "--limit", "0", "--json", stdout_too=False
    )
    assert status == 0, screen
    assert json.loads(out)["created"] > 100
    steps = _counts(
        frames,
        r"compacting duplicate: ([a-z ]+?) (?:([\d,]+)/([\d,]+)|\([\d,]+ [a-z]+\)) · [\d,]+ new item",
    )
    assert len({(step, done or "0") for step, done, _total in steps}) >= 2, screen
    assert any(done and done != total for _step, done, total in steps), screen  # part way
    assert re.search(r"compacting done: [\d,]+ new items\x1b\[K\r?\n", screen), screen
    assert "{" not in screen  # no JSON on the terminal's stderr


def test_one_big_document_shows_its_passages_while_it_is_stored(cli):
    rng = random.Random(7)
    (cli.tmp / "big.md").write_text("\n\n".join(_paragraph(rng) for _ in range(15_000)))
    status, frames, screen, _ = run_on_a_terminal(cli, "remember", "big.md")
    assert status == 0, screen
    seen = _counts(frames, r"remembering big\.md: (preparing|storing) ([\d,]+)/15,000 passages")
    assert len(set(seen)) >= 2, screen
    assert any(done != "15,000" for _phase, done in seen), screen
    assert ("storing", "15,000") in _counts(
        [screen], r"remembering big\.md: (storing) (15,000)/15,000"
    )
    assert "remembered memo://document/" in screen


def test_nothing_on_a_pipe_unless_asked(cli):
    _corpus(cli.tmp / "few", files=3, paragraphs=2)
    r = cli("remember", "few")
    assert r.code == 0 and r.err == "", r
    r = cli("compact", "--limit", "0")
    assert r.code == 0 and r.err == "", r

    _corpus(cli.tmp / "more", files=4, paragraphs=2)
    r = cli("remember", "more", "--progress", "--json")
    assert r.code == 0, r
    assert "remembering: 4/4 files" in r.err and "\r" not in r.err, r.err
    assert json.loads(r.out)["documents"] == 4  # stdout stays JSON
    r = cli("compact", "--full", "--limit", "0", extra_env={"MEMORS_PROGRESS": "1"})
    assert r.code == 0, r
    assert re.search(r"^compacting done: \d+ new items?$", r.err, re.M), r.err

    # And off on a terminal when asked: MEMORS_PROGRESS=0.
    _corpus(cli.tmp / "quiet", files=2, paragraphs=2)
    status, _frames, screen, _ = run_on_a_terminal(cli, "remember", "quiet", MEMORS_PROGRESS="0")
    assert status == 0 and "remembering:" not in screen, screen


def test_a_load_says_where_it_is_inside_a_big_document():
    from memors_cli.commands.remember_progress import LoadProgress
    from memors_core.engine.progress import Progress

    load = LoadProgress({"-": []}, ["-"], None)
    inside = load.describe(
        Progress(
            task="remember", phase="storing", done=128, total=900, unit="passages", documents=7
        )
    )
    assert inside.text == "7 documents · document 8: storing 128/900 passages"


class _Clock:
    """Seconds that pass when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_embedding_shows_done_of_total_rate_and_eta_even_while_a_batch_runs(capsys):
    from memors_cli.commands.admin import _embedding_line
    from memors_cli.output import Progress
    from memors_core.engine.progress import Progress as State

    clock = _Clock()
    bar = Progress("vectors of default", _embedding_line, mode="terminal", clock=clock)

    def at(seconds: float, done: int) -> str:
        clock.now = 100.0 + seconds
        bar.update(State("reindex", "embedding", done, 300, "passages"), now=True)
        return capsys.readouterr().err.rsplit("\r", 1)[-1].replace("\x1b[K", "")

    try:
        assert at(0, 0) == "vectors of default: embedded 0/300 passages"
        assert at(1, 30) == "vectors of default: embedded 30/300 passages · 30 passages/s · ETA 9s"
        assert at(2, 60) == "vectors of default: embedded 60/300 passages · 30 passages/s · ETA 8s"
        # A batch that takes long: nothing more is done, the line still moves.
        assert at(3, 60) == "vectors of default: embedded 60/300 passages · 20 passages/s · ETA 12s"
        assert at(4, 90) == "vectors of default: embedded 90/300 passages · 22 passages/s · ETA 9s"
    finally:
        bar.done()
    assert "embedded 90/300 passages" in capsys.readouterr().err  # the last state, kept
