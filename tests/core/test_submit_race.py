"""Several processes submitting the same item at once: exactly one wins."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from memors_core import Memory
from memors_core.errors import Refused
from memors_core.testing import passages_about
from store_checks import rows_of, value_of

RACERS = 6


def _prepare(db: Path) -> tuple[int, str]:
    with Memory.open(db) as memory:
        for i, text in enumerate(passages_about("Raft", 3)):
            memory.remember(text, uri=f"raft-{i}")
        item = memory.compact(kinds=["page"]).items[0]
    content = "\n\n".join(p["text"] for p in item.payload["passages"])
    return item.id, content


def test_six_cli_processes_submit_one_item_and_exactly_one_wins(fresh_store, tmp_path):
    db = fresh_store("race.db")
    item, content = _prepare(db)
    page = tmp_path / "page.md"
    page.write_text(content, encoding="utf-8")
    env = {**os.environ, "MEMORS_DB": str(db)}
    gate = tmp_path / "go"
    # Every racer imports everything, then spins on the gate file, so that
    # the six submits really start together.
    starter = (
        "import os, sys, time\n"
        "import memors_cli.commands, memors_core.engine.compaction, memors_kinds.page\n"
        "from memors_cli.main import main\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.001)\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                starter,
                "submit",
                str(item),
                "--content-file",
                str(page),
                "--title",
                f"Raft by racer {n}",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(RACERS)
    ]
    gate.write_text("go")
    results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0] + [1] * (RACERS - 1), results
    for code, _out, err in results:
        if code == 1:
            assert f"item {item} is done, not open; nothing was stored" in err
            assert "Traceback" not in err
    with Memory.open(db) as memory:
        assert value_of(memory, "SELECT COUNT(*) FROM pages") == 1
        assert memory.get(f"memo://item/{item}").status == "done"
        metrics = memory.metrics()
    assert 'memors_store_work_items_total{event="done",kind="page"} 1.0' in metrics
    refused = f'memors_store_work_items_total{{event="refused",kind="page"}} {RACERS - 1}.0'
    assert refused in metrics


def _racer(db: str, item: int, content: str, barrier, results) -> None:
    with Memory.open(db) as memory:
        barrier.wait()
        try:
            report = memory.submit(item, content=content, title="Raft")
            results.put(("stored", report.stored, report.address))
        except Refused as exc:
            results.put(("refused", False, exc.message))


def test_library_processes_behind_a_barrier_exactly_one_wins(fresh_store, tmp_path):
    db = fresh_store("race.db")
    item, content = _prepare(db)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(str(db), item, content, barrier, results))
        for _ in range(RACERS)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    stored = [o for o in outcomes if o[0] == "stored"]
    assert len(stored) == 1 and stored[0][1] is True
    assert sorted(o[0] for o in outcomes).count("refused") == RACERS - 1
    with Memory.open(db) as memory:
        pages = rows_of(memory, "SELECT id FROM pages")
    assert [f"memo://page/{pages[0][0]}"] == [stored[0][2]]
