"""Concurrent writers on both engines: do writers queue?

    python -m benchmarks.writers                      # both engines, 8 s a step
    python -m benchmarks.writers --engines postgres --seconds 15
    python -m benchmarks.writers --pool               # PostgreSQL's pool sizes

For each engine (SQLite in a temporary file; PostgreSQL in a fresh database
from :func:`memors_core.testing.postgres.new_database`, dropped at the end)
and for 1, 2, 4 and 8 writer processes, each writer process opens the store
(not timed), waits for a common start, then remembers small documents (two
passages about a named entity, as an agent's note) for ``--seconds``:

- ``own``: each process in a namespace of its own;
- ``one``: every process in one namespace.

Then the mixed load of the concurrency test, 8 processes in one namespace
(``mixed``) and each in its own (``mixed own``): a loop of remember,
search, and every 4th round a fact and an incremental compact. Each step
prints the operations per second of all its processes together and the
p95 latency of one operation, then the targets of issue 32: on PostgreSQL
8 writers in 8 namespaces at least 1.7x one writer's throughput, and the
8-process mixed figure at least SQLite's. The store is seeded with 400
documents first, so no step starts from an empty one. The load average is
printed beside each step: the figures of a shared machine depend on it.

``--pool`` measures instead one process of 8 threads (as ``serve --http``
serves concurrent requests), one remembering and seven searching, with
``MEMORS_PG_POOL_SIZE`` 1, 2, 4 and 8: the guidance of docs/postgres.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.run import report

ENGINES = ("sqlite", "postgres")
COUNTS = (1, 2, 4, 8)
ENTITIES = ("Raft", "Paxos", "Zab", "Gossip", "Chord", "Kademlia")


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


#: Words of a note's details, drawn per note (see :func:`note`).
# fmt: off
DETAILS = (
    "disk", "latency", "quorum", "backlog", "retry", "checksum", "lease", "timeout", "replica",
    "ledger", "rollout", "canary", "shard", "index", "cache", "budget", "alert", "paging",
    "rotation", "audit", "token", "session", "certificate", "mirror", "archive", "restore",
    "throttle", "partition", "rebalance", "compaction", "heartbeat", "election", "snapshot",
    "journal", "tombstone", "cursor", "batch", "window", "schema", "migration", "export",
    "import", "sampling", "trace",
)
# fmt: on


def note(who: str, n: int) -> str:
    """A small document of two passages about one entity, unique to ``who``
    and ``n``. Each passage carries details drawn for this note: without
    them, notes 42 apart differed only in their number, so every writer's
    notes were near duplicates of each other (Jaccard >= 0.75) and the
    duplicate kind's exact scan, whose output grows as the square of a
    cluster, was what the mixed steps measured (docs/performance.md)."""
    entity = ENTITIES[n % len(ENTITIES)]
    pick = random.Random(f"{who}/{n}").sample(DETAILS, 10)
    return (
        f"[[{entity}]] note {n} by {who}: the {entity} cluster in region {n % 7} "
        f"kept its leader through the failover drill ({' '.join(pick[:5])}), "
        f"and writer {who} logged it.\n\n"
        f"Round {n} of {who}: replicas of [[{entity}]] caught up within the window; "
        f"the follow-up for {who} is to check the {' '.join(pick[5:])} of shard {n % 11}."
    )


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else 0.0


# --- one writer process -----------------------------------------------------------------


def worker(url: str, namespace: str, who: str, start: float, seconds: float, mixed: bool) -> None:
    """Open the store, wait for ``start`` (wall clock), work until ``seconds``
    later; print the latencies of every operation (seconds) as JSON."""
    from memors_core import Memory

    latencies: list[float] = []
    errors: list[str] = []
    with Memory.open(url) as memory:
        time.sleep(max(0.0, start - time.time()))
        stop = time.monotonic() + seconds
        n = 0
        while time.monotonic() < stop:
            n += 1
            ops = [lambda n=n: memory.remember(note(who, n), uri=f"{who}/{n}", namespace=namespace)]
            if mixed:
                entity = ENTITIES[n % len(ENTITIES)]
                ops.append(
                    lambda e=entity: memory.search(f"{e} leader failover", namespace=namespace)
                )
                if n % 4 == 0:
                    ops.append(
                        lambda e=entity, n=n: memory.record_fact(
                            e, f"p{who}", f"v{n}", namespace=namespace
                        )
                    )
                    ops.append(lambda: memory.compact(limit=0, namespace=namespace))
            for op in ops:
                began = time.perf_counter()
                try:
                    op()
                except Exception as exc:  # counted, not fatal: a busy store is a figure too
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                latencies.append(time.perf_counter() - began)
    print(json.dumps({"latencies": latencies, "errors": errors}))


def pool_worker(url: str, seconds: float, threads: int) -> None:
    """One process as ``serve --http`` is: ``threads`` threads sharing one
    store (its pool of ``MEMORS_PG_POOL_SIZE``), one remembering and the
    others searching; prints each kind's latencies as JSON."""
    import threading

    from memors_core import Memory

    found: dict[str, list[float]] = {"search": [], "remember": []}
    errors: list[str] = []
    with Memory.open(url) as memory:
        stop = time.monotonic() + seconds

        def loop(kind: str, who: int) -> None:
            n = 0
            while time.monotonic() < stop:
                n += 1
                began = time.perf_counter()
                try:
                    if kind == "remember":
                        memory.remember(
                            note(f"pool{who}", n), uri=f"pool{who}/{n}", namespace="pool"
                        )
                    else:
                        memory.search(f"{ENTITIES[n % len(ENTITIES)]} leader", namespace="pool")
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                found[kind].append(time.perf_counter() - began)

        workers = [threading.Thread(target=loop, args=("remember", 0))]
        workers += [threading.Thread(target=loop, args=("search", i)) for i in range(1, threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    print(json.dumps({**found, "errors": errors}))


def pool_run(args: argparse.Namespace) -> None:
    """``MEMORS_PG_POOL_SIZE`` 1, 2, 4, 8 under one process of 8 threads."""
    from memors_core.testing import postgres

    url = postgres.new_database()
    try:
        seed(url)
        for size in (1, 2, 4, 8):
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.writers", "--pool-worker", "--url", url,
                 "--seconds", str(args.seconds)],
                capture_output=True, text=True, timeout=args.seconds + 300,
                env={**os.environ, "MEMORS_PG_POOL_SIZE": str(size)},
            )  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-2000:])
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            searches, writes = got["search"], got["remember"]
            report(
                f"pool {size}: 7 searching threads + 1 writer",
                f"{len(searches) / args.seconds:7.1f} searches/s",
                f"search p95 {percentile(searches, 0.95) * 1000:.1f} ms, "
                f"remember p95 {percentile(writes, 0.95) * 1000:.1f} ms, "
                f"{len(writes) / args.seconds:.1f} remembers/s",
                f"{len(got['errors'])} errors",
                load(),
            )
    finally:
        postgres.drop_database(url)


# --- the driver ---------------------------------------------------------------------------


def seed(url: str, documents: int = 400, namespace: str = "default") -> None:
    """``documents`` notes (two passages each) remembered in ``namespace``
    and compacted. By default in ``default``, beside the namespaces the
    steps write (``shared``, ``w0``…), which start empty."""
    from memors_core import Memory

    with Memory.open(url) as memory:
        memory.remember_many(
            [{"text": note("seed", n), "uri": f"seed/{n}"} for n in range(documents)], namespace
        )
        memory.compact(limit=0, namespace=namespace)


def run_step(url: str, count: int, layout: str, mixed: bool, seconds: float) -> dict[str, Any]:
    start = time.time() + 3.0 + 0.3 * count  # every process opened its store by then
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.writers",
                "--worker",
                "--url",
                url,
                "--namespace",
                f"w{i}" if layout == "own" else "shared",
                "--who",
                f"p{i}-{layout}-{count}-{int(mixed)}",
                "--start",
                repr(start),
                "--seconds",
                str(seconds),
            ]
            + (["--mixed"] if mixed else []),
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    latencies: list[float] = []
    errors: list[str] = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=seconds + 300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise SystemExit(
                f"a writer process of step {layout} x{count} was still working "
                f"{seconds + 300:.0f} s after its start; stopped"
            ) from None
        if proc.returncode != 0:
            raise SystemExit(f"a writer process failed (exit {proc.returncode})")
        got = json.loads(out.strip().splitlines()[-1])
        latencies += got["latencies"]
        errors += got["errors"]
    return {
        "ops_s": len(latencies) / seconds,
        "p95_ms": percentile(latencies, 0.95) * 1000,
        "errors": errors,
    }


def engine_run(engine: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    from memors_core.testing import postgres

    tmp = Path(tempfile.mkdtemp(prefix="memors-writers-"))
    url = str(tmp / "writers.db") if engine == "sqlite" else postgres.new_database()
    figures: dict[str, dict[str, Any]] = {}
    try:
        seed(url)
        steps = [("writes", layout, n) for layout in ("own", "one") for n in COUNTS]
        steps += [("mixed", "one", 8), ("mixed", "own", 8)]
        for mode, layout, count in steps:
            name = f"{mode} {layout} x{count}"
            fig = run_step(url, count, layout, mode == "mixed", args.seconds)
            figures[name] = fig
            report(
                f"{engine:8} {name:15}",
                f"{fig['ops_s']:7.1f} ops/s  p95 {fig['p95_ms']:7.1f} ms",
                f"{load()}"
                + (f"  {len(fig['errors'])} errors: {fig['errors'][0]}" if fig["errors"] else ""),
            )
    finally:
        if engine == "postgres":
            postgres.drop_database(url)
    return figures


def run(args: argparse.Namespace) -> None:
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    figs = {engine: engine_run(engine, args) for engine in engines}
    print()
    for engine, f in figs.items():
        one = f["writes own x1"]["ops_s"]
        eight = f["writes own x8"]["ops_s"]
        report(
            f"{engine}: 8 writers in 8 namespaces",
            f"{eight:.1f} ops/s",
            f"1 writer {one:.1f} ops/s",
            f"{eight / one:.2f}x" if one else "-",
            ">= 1.7x (PostgreSQL)" if engine == "postgres" else "(one writer at a time)",
        )
    if "sqlite" in figs and "postgres" in figs:
        for name in ("mixed one x8", "mixed own x8"):
            pg, lite = figs["postgres"][name]["ops_s"], figs["sqlite"][name]["ops_s"]
            report(
                f"8 processes, {name.split()[1]} namespace(s), mixed ops",
                f"PostgreSQL {pg:.1f} ops/s",
                f"SQLite {lite:.1f} ops/s",
                f"{pg / lite:.2f}x" if lite else "-",
                ">= 1.0x",
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="sqlite,postgres", help="default sqlite,postgres")
    parser.add_argument("--seconds", type=float, default=8.0, help="per step (default 8)")
    parser.add_argument(
        "--pool", action="store_true", help="PostgreSQL's pool sizes under one 8-thread process"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pool-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--who", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--mixed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.url, args.namespace, args.who, args.start, args.seconds, args.mixed)
    elif args.pool_worker:
        pool_worker(args.url, args.seconds, 8)
    elif args.pool:
        pool_run(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
