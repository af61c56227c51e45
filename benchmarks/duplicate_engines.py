"""The duplicate scan on both engines, same corpus, same run.

    python -m benchmarks.duplicate_engines --size 20000
    python -m benchmarks.duplicate_engines --size 20000 --postgres postgresql:///scratch

For each engine: remember the corpus, a full ``compact --kinds duplicate``,
then a 1% change (new documents, some copies of old passages) and the
incremental compact, then ``--full`` again (its items must be the
incremental's). Beside each compaction, the time spent in the prefix
index's own statements (:mod:`memors_kinds.duplicate.index`): the rest is
the engine-free join and reading passages. Without ``--postgres``, the
PostgreSQL store is a fresh database on the test server
(:mod:`memors_core.testing.postgres`), dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate
from benchmarks.run import documents
from memors_kinds.duplicate import postgres_index, sqlite_index

INDEX_METHODS = (
    "indexed",
    "set_indexed",
    "add",
    "fold",
    "candidates",
    "clusters_of",
    "members_of",
    "forget_clusters",
    "remember_clusters",
)

SPENT: dict[str, float] = defaultdict(float)


def _timed_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - start

    return run


def instrument() -> None:
    for cls in (sqlite_index.SqlitePrefixIndex, postgres_index.PostgresPrefixIndex):
        for name in INDEX_METHODS:
            setattr(cls, name, _timed_method(name, getattr(cls, name)))


def compact(memory: Any, *, full: bool) -> tuple[float, float, Any]:
    """(seconds, of which in the prefix index, result)."""
    SPENT.clear()
    start = time.perf_counter()
    result = memory.compact(kinds=["duplicate"], limit=0, full=full)
    return time.perf_counter() - start, sum(SPENT.values()), result


def run_engine(label: str, address: Any, base: list[dict], change: list[dict]) -> None:
    from memors_core import Memory

    memory = Memory.open(address)
    try:
        start = time.perf_counter()
        memory.remember_many(documents(base))
        print(
            f"{label:<10} remember {len(base)} passages{'':<14} {time.perf_counter() - start:7.2f} s"
        )
        took, index, first = compact(memory, full=True)
        print(
            f"{label:<10} compact --full (first){'':<16} {took:7.2f} s  "
            f"index {index:5.2f} s  {first.open} items"
        )
        memory.remember_many(change)
        took_inc, index, _inc = compact(memory, full=False)
        print(
            f"{label:<10} compact after a 1% change{'':<13} {took_inc:7.3f} s  index {index:5.3f} s"
        )
        items = memory.items(kind="duplicate", status="open").items
        before = {i.id: json.dumps(i.payload, sort_keys=True) for i in items}
        took, index, _again = compact(memory, full=True)
        items = memory.items(kind="duplicate", status="open").items
        after = {i.id: json.dumps(i.payload, sort_keys=True) for i in items}
        print(
            f"{label:<10} compact --full afterwards{'':<13} {took:7.2f} s  index {index:5.2f} s  "
            f"{'same items' if before == after else 'DIFFERENT items'}; "
            f"incremental {took_inc / took:.1%} of it"
        )
    finally:
        memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="passages (default 20000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", help="an empty PostgreSQL database's postgresql:// address")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    step = max(1, args.size // 100)
    rows = list(generate(args.size + step, seed=args.seed))
    base, extra = rows[: args.size], rows[args.size :]
    rng = random.Random(args.seed)
    change = documents(extra) + [
        {"text": base[rng.randrange(len(base))]["text"], "uri": f"copy-{i}"}
        for i in range(max(1, args.size // 2000))
    ]
    instrument()
    if not args.skip_sqlite:
        work = Path(tempfile.mkdtemp(prefix="memors-dup-engines-"))
        run_engine("sqlite", work / "memors.db", base, change)
    if args.postgres:
        run_engine("postgres", args.postgres, base, change)
        return
    from memors_core.testing import postgres

    why = postgres.available()
    if why is not None:
        raise SystemExit(f"no PostgreSQL to measure on: {why}")
    url = postgres.new_database()
    try:
        run_engine("postgres", url, base, change)
    finally:
        postgres.drop_database(url)


if __name__ == "__main__":
    main()
