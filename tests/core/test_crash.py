"""Crash safety: SIGKILL a bulk ``remember``, a ``compact`` and ``submit`` mid-way.

After every kill a fresh connection finds the store whole (integrity_check,
FTS5 integrity-check against the content tables, no orphan rows, every
document complete or absent, persisted counters equal to the rows they
count), and running the command again finishes the work without duplicates.
Kill points are random; the seed is printed so a failure can be replayed
(``MEMORS_CRASH_SEED``).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from memors_core import Memory
from memors_core.domain.text import split_passages
from paths import TESTS
from store_checks import connect, corpus, counters, store_problems, write_jsonl

SEED = int(os.environ.get("MEMORS_CRASH_SEED", str(random.randrange(1 << 30))))

CLI = [sys.executable, "-m", "memors_cli"]


def env_for(db: Path) -> dict[str, str]:
    env = {**os.environ, "MEMORS_DB": str(db)}
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    return env


def kill_after(
    args: list[str],
    db: Path,
    delay: float,
    cwd: Path,
    ok: tuple[int, ...] = (0,),
    when: Callable[[], bool] | None = None,
) -> tuple[bool, str]:
    """Start ``args``, SIGKILL it ``delay`` seconds after ``when()`` holds (at
    once: after start); (killed mid-run?, stderr). A run that ends first must
    end with a status in ``ok``."""
    proc = subprocess.Popen(
        args,
        env=env_for(db),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    while when is not None and proc.poll() is None and not when():
        time.sleep(0.01)
    try:
        proc.wait(delay)
        killed = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = True
    err = proc.stderr.read() if proc.stderr else ""
    if not killed:
        assert proc.returncode in ok, err
    return killed, err


def copy_store(source: Path, target: Path) -> None:
    """Copy a store file that no process has open, with its WAL if one was left."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")


def run_ok(args: list[str], db: Path, cwd: Path) -> str:
    proc = subprocess.run(
        args, env=env_for(db), capture_output=True, text=True, cwd=cwd, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def document_count(db: Path) -> int:
    """How many documents are stored so far (while a writer may be at work)."""
    if not db.exists():
        return 0
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        finally:
            conn.close()
    except apsw.Error:  # not created yet
        return 0


def stored_documents(db: Path) -> dict[str, list[str]]:
    """uri -> the passage texts of its first version, in order."""
    conn = connect(db)
    try:
        docs: dict[str, list[str]] = {}
        for uri, text in conn.execute(
            "SELECT d.uri, p.text FROM documents d "
            "JOIN passages p ON p.document = d.id AND p.version = 1 "
            "ORDER BY d.rowid, p.position"
        ):
            docs.setdefault(uri, []).append(text)
        uris = [r[0] for r in conn.execute("SELECT uri FROM documents")]
        assert len(uris) == len(set(uris)), "a document was stored twice"
        assert len(uris) == len(docs)
        return docs
    finally:
        conn.close()


@pytest.mark.sqlite_only("kills writers of a SQLite file, then reads and copies the file")
def test_killing_a_bulk_remember_leaves_whole_documents_and_a_rerun_finishes(tmp_path: Path):
    print(f"MEMORS_CRASH_SEED={SEED}")
    rng = random.Random(SEED)
    records = corpus(4000)
    expected = {r["uri"]: split_passages(r["text"]) for r in records}
    jsonl = write_jsonl(tmp_path / "bulk.jsonl", records)
    db = tmp_path / "crash.db"
    args = [*CLI, "remember", "--jsonl", str(jsonl), "--json"]
    mid_way = []
    for _ in range(7):
        # kill once a random number of documents is stored, plus a little (mid-batch),
        # whatever this machine's speed
        stored = document_count(db)
        if stored == len(records):
            break  # (a run finished before its kill)
        target = min(len(records), stored + rng.randrange(1, 700))  # about a batch further
        killed, _err = kill_after(
            args,
            db,
            rng.uniform(0, 0.3),
            tmp_path,
            when=lambda target=target: document_count(db) >= target,
        )
        assert store_problems(db) == []
        docs = stored_documents(db)
        for uri, passages in docs.items():
            assert passages == expected[uri], f"{uri} is incomplete after a kill"
        if killed and 0 < len(docs) < len(records):
            mid_way.append(len(docs))
    # the kills landed part-way through the load (batches of 500 committed)
    assert mid_way, "no kill landed mid-way: the corpus is too small for this machine"
    print(f"documents stored when killed mid-way: {mid_way}")

    run_ok(args, db, tmp_path)  # running the load again finishes it
    assert store_problems(db) == []
    docs = stored_documents(db)
    assert docs == expected
    run_ok(args, db, tmp_path)  # and once more changes nothing
    assert stored_documents(db) == expected
    conn = connect(db)
    assert conn.execute("SELECT COUNT(*) FROM document_versions").fetchone()[0] == len(records)
    conn.close()


# --- compact and submit -------------------------------------------------------------------


@pytest.fixture(scope="module")
def compaction_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with work for every kind: pages, duplicates, conflicts, merges."""
    tmp = tmp_path_factory.mktemp("crash-compact")
    db = tmp / "seed.db"
    jsonl = write_jsonl(tmp / "seed.jsonl", corpus(2500, seed=11))
    run_ok([*CLI, "remember", "--jsonl", str(jsonl)], db, tmp)
    with Memory.open(db) as memory:
        for i in range(0, 60, 3):
            memory.record_fact(f"Subject {i}", "status", "active", valid_from="2020-01-01")
            memory.record_fact(f"Subject {i}", "status", "retired", valid_from="2021-01-01")
            memory.record_fact(f"Subject {i + 1}", "owner", f"team {i}")
        for i in range(0, 20, 2):
            memory.propose_merge([f"Topic {i}", f"Topic {i + 1}"])
    return db


def open_items(db: Path) -> dict[tuple[str, str], tuple[str, str]]:
    conn = connect(db)
    try:
        return {
            (kind, key): (fingerprint, payload)
            for kind, key, fingerprint, payload in conn.execute(
                "SELECT kind, key, fingerprint, payload FROM work_items WHERE status = 'open'"
            )
        }
    finally:
        conn.close()


@pytest.mark.sqlite_only("kills writers of a SQLite file, then reads and copies the file")
def test_killing_compact_leaves_a_consistent_queue_and_a_rerun_completes_it(
    compaction_store: Path, tmp_path: Path
):
    print(f"MEMORS_CRASH_SEED={SEED}")
    rng = random.Random(SEED + 1)
    reference = tmp_path / "reference.db"
    db = tmp_path / "compact.db"
    copy_store(compaction_store, reference)
    copy_store(compaction_store, db)
    start = time.monotonic()
    run_ok([*CLI, "compact", "--limit", "0"], reference, tmp_path)
    took = time.monotonic() - start
    wanted = open_items(reference)
    conn = connect(reference)
    wanted_counts = counters(conn)
    conn.close()
    assert {kind for kind, _key in wanted} == {"page", "duplicate", "conflict", "merge"}

    partial = []
    # Kill points at random moments of the reference run's time; then, should
    # none have landed part-way (a machine slower or faster than during the
    # reference run), rounds killed as soon as a part of the queue is visible.
    part_way = lambda: 0 < len(open_items(db)) < len(wanted)  # noqa: E731
    for round_ in range(8):
        if round_ >= 4 and partial:
            break
        copy_store(compaction_store, db)  # a round starts with all the work to do
        killed, _err = kill_after(
            [*CLI, "compact", "--limit", "0"],
            db,
            rng.uniform(0.3, took) if round_ < 4 else 0.0,
            tmp_path,
            when=None if round_ < 4 else part_way,
        )
        assert store_problems(db) == []
        found = open_items(db)
        assert set(found) <= set(wanted)
        if killed and 0 < len(found) < len(wanted):
            partial.append(len(found))
        run_ok([*CLI, "compact", "--limit", "0"], db, tmp_path)
        assert store_problems(db) == []
        # the same queue as an uninterrupted run: nothing lost, nothing twice
        assert open_items(db) == wanted
        conn = connect(db)
        assert counters(conn) == wanted_counts
        conn.close()
    print(f"compact took {took:.2f} s; items open when killed part-way: {partial}")
    assert partial, "no kill landed part-way through compact"


SUBMITTER = r"""
import sys
from memors_core import Memory, Refused

KINDS = ["conflict", "merge", "duplicate", "page", "stale"]
with Memory.open(sys.argv[1]) as memory:
    while memory.compact(kinds=KINDS, limit=0).open:
        for kind in KINDS:
            for item in memory.items(kind=kind, status="open").items:
                p = item.payload
                if kind in ("page", "stale"):
                    cites = [x["address"] for x in p["passages"][:3]]
                    lines = [x["text"] for x in p["passages"][:3]]
                    lines += [f"{f['predicate']} {f['value']}." for f in p["facts"]]
                    fields = {"title": p["entity"]["name"], "content": "\n\n".join(lines),
                              "cites": cites}
                elif kind == "duplicate":
                    fields = {"keep": [p["passages"][0]["address"]]}
                elif kind == "conflict":
                    fields = {"keep": p["facts"][0]["address"]}
                else:
                    fields = {"accept": True}
                try:
                    report = memory.submit(item.id, **fields)
                except Refused:  # an earlier submit (a merge) changed its inputs:
                    continue  # the next compact refreshes it
                assert report.stored, (item.id, report)
"""


@pytest.mark.sqlite_only("kills writers of a SQLite file, then reads and copies the file")
def test_killing_submit_completes_each_item_once_or_not_at_all(
    compaction_store: Path, tmp_path: Path
):
    print(f"MEMORS_CRASH_SEED={SEED}")
    rng = random.Random(SEED + 2)
    db = tmp_path / "submit.db"
    copy_store(compaction_store, db)
    run_ok([*CLI, "compact", "--limit", "0"], db, tmp_path)
    submitter = [sys.executable, "-c", SUBMITTER, str(db)]

    # a few single CLI submits, killed at random moments of their run
    page_item = next(iter(_open_ids(db, "page")))
    payload_db = Memory.open(db)
    item = payload_db.get(f"memo://item/{page_item}")
    payload_db.close()
    page = tmp_path / "page.md"
    page.write_text(item.payload["passages"][0]["text"], encoding="utf-8")
    cli_submit = [*CLI, "submit", str(page_item), "--content-file", str(page), "--title", "T"]
    for _ in range(3):
        # (one that finishes first stores the page; the next is refused: exit 1)
        kill_after(cli_submit, db, rng.uniform(0.1, 0.6), tmp_path, ok=(0, 1))
        assert store_problems(db) == []

    # the library working through the whole queue, killed again and again:
    # first an uninterrupted run on a copy, for its time and its outcome
    reference = tmp_path / "reference.db"
    copy_store(db, reference)
    start = time.monotonic()
    run_ok([sys.executable, "-c", SUBMITTER, str(reference)], reference, tmp_path)
    took = time.monotonic() - start
    expected = _summary(reference)
    seed = tmp_path / "compacted.db"
    copy_store(db, seed)
    done_when_killed = []
    total = expected_done(expected)
    # As for compact: random moments first, then (if none landed part-way)
    # rounds killed as soon as some, not all, of the items are done.
    part_way = lambda: 0 < len(_done_ids(db)) < total  # noqa: E731
    for round_ in range(10):
        if round_ >= 5 and any(0 < n < total for n in done_when_killed):
            break
        copy_store(seed, db)  # every round starts with the whole queue open
        kill_after(
            submitter,
            db,
            rng.uniform(0.3, took) if round_ < 5 else 0.0,
            tmp_path,
            when=None if round_ < 5 else part_way,
        )
        assert store_problems(db) == []
        done_when_killed.append(len(_done_ids(db)))
        run_ok(submitter, db, tmp_path)  # the rerun finishes the queue
        assert store_problems(db) == []
        for kind in ("page", "stale", "duplicate", "conflict", "merge"):
            assert not _open_ids(db, kind), f"{kind} items left open"
        assert _summary(db) == expected  # as if never interrupted
    print(f"submitting took {took:.2f} s; items done when killed: {done_when_killed}")
    assert any(0 < n < total for n in done_when_killed)


def expected_done(summary: list[tuple]) -> int:
    return sum(n for what, _k, status, n in summary if what == "item" and status == "done")


def _summary(db: Path) -> list[tuple]:
    conn = connect(db)
    try:
        # each page or stale item made exactly one page version (store_problems checks
        # the item side: none made two, none done without its page)
        made = conn.execute(
            "SELECT COUNT(*) FROM work_items WHERE kind IN ('page', 'stale') AND status = 'done'"
        ).fetchone()[0]
        assert made == conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
        return conn.execute(SUMMARY).fetchall()
    finally:
        conn.close()


SUMMARY = """
SELECT 'item', kind, status, COUNT(*) FROM work_items GROUP BY kind, status
UNION ALL SELECT 'tombstone', type, state, COUNT(*) FROM tombstones GROUP BY type, state
UNION ALL SELECT 'pages', '', '', COUNT(*) FROM pages
UNION ALL SELECT 'counter', kind, event, value FROM counters
    WHERE event NOT IN ('refreshed', 'refused')  -- (these depend on where the kills fell)
ORDER BY 1, 2, 3
"""


def _open_ids(db: Path, kind: str) -> list[int]:
    conn = connect(db)
    try:
        return [
            r[0]
            for r in conn.execute(
                "SELECT id FROM work_items WHERE kind = ? AND status = 'open' ORDER BY id", (kind,)
            )
        ]
    finally:
        conn.close()


def _done_ids(db: Path) -> list[int]:
    conn = connect(db)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM work_items WHERE status = 'done'")]
    finally:
        conn.close()


def test_docs_reliability_names_only_tests_that_exist():
    """docs/reliability.md says how each guarantee is tested: those tests exist."""
    root = TESTS
    doc = (root.parent / "docs" / "reliability.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(?:tests/[\w/]+\.py::)?(test_\w+)`", doc))
    assert len(named) > 20
    defined = {
        m
        for path in root.rglob("test_*.py")
        for m in re.findall(r"^def (test_\w+)", path.read_text(), re.M)
    }
    assert named <= defined, sorted(named - defined)
