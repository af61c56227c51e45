"""A team's small writes on real conversations, each engine beside SQLite.

Remembers the turns of LoCoMo's conversations (``--locomo``, the public
long-conversation format; ``../shared/data/locomo-dev.json`` in this
project's workspace) one ``remember`` each, in their order, with an
incremental ``compact`` after every ``--every`` turns, then searches the
conversations' questions; prints each step's p50 per engine, PostgreSQL's
beside SQLite's (the reference) with the ratio. Then, on a fresh store,
the same turns ``--copies`` times over (each copy its own documents) in
one bulk ``remember_many``, each turn a document naming its speaker, as a
team importing its conversations would: the seconds it took::

    python -m benchmarks.real_turns [--locomo PATH] [--turns N] [--questions 400]
        [--copies 10] [--engines sqlite,postgres]

What issue 32 points 1 and 2 are about on real text: a single document's
remember, the compaction that follows writes, and a search, one at a time;
and a bulk load of many small documents.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("MEMORS_VECTORS", "off")

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev.json"
STEPS = ("remember", "compact", "search")


def conversations(path: Path) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Every turn (its uri, ``speaker: text`` and speaker), in session order,
    and every question."""
    turns: list[tuple[str, str, str]] = []
    questions: list[str] = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        sessions = sorted(
            (k for k in conv if k.startswith("session_") and k.split("_")[1].isdigit()),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            if isinstance(conv[key], list):
                for turn in conv[key]:
                    uri = f"locomo/{sample['sample_id']}/{turn['dia_id']}"
                    turns.append((uri, f"{turn['speaker']}: {turn['text']}", turn["speaker"]))
        questions += [q["question"] for q in sample.get("qa", [])]
    return turns, questions


def run(url: str, turns: list[tuple[str, str, str]], questions: list[str], every: int) -> dict:
    """Each step's latencies (seconds) on the store at ``url``."""
    from memors_core import Memory

    took: dict[str, list[float]] = {step: [] for step in STEPS}

    def timed(step: str, call) -> None:
        started = time.perf_counter()
        call()
        took[step].append(time.perf_counter() - started)

    with Memory.open(url) as memory:
        for n, (uri, text, _speaker) in enumerate(turns, 1):
            timed("remember", lambda t=text, u=uri: memory.remember(t, uri=u))
            if n % every == 0:
                timed("compact", lambda: memory.compact(limit=0))
        for question in questions:
            timed("search", lambda q=question: memory.search(q))
    return took


def bulk(url: str, turns: list[tuple[str, str, str]], copies: int) -> dict:
    """Seconds to remember ``copies`` copies of the turns in one bulk load."""
    from memors_core import Memory

    documents = [
        {"text": text, "uri": f"copy{c}/{uri}", "entities": [speaker]}
        for c in range(copies)
        for uri, text, speaker in turns
    ]
    with Memory.open(url) as memory:
        started = time.perf_counter()
        memory.remember_many(documents)
        return {"bulk": [time.perf_counter() - started]}


def on(engine: str, call: Callable[[str], dict]) -> dict | None:
    """``call(url)`` on a fresh store of ``engine`` (None: PostgreSQL is not reachable)."""
    if engine == "postgres":
        from memors_core.testing import postgres

        why = postgres.available()
        if why:
            print(f"postgres: skipped ({why})")
            return None
        url = postgres.new_database()
        try:
            return call(url)
        finally:
            postgres.drop_database(url)
    with tempfile.TemporaryDirectory(prefix="memors-turns-") as tmp:
        return call(str(Path(tmp) / "memors.db"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT)
    parser.add_argument("--turns", type=int, default=0, help="the first N turns (0: all)")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--every", type=int, default=40, help="turns between compactions")
    parser.add_argument(
        "--copies", type=int, default=10, help="copies of the turns in the bulk load (0: none)"
    )
    parser.add_argument("--engines", default="sqlite,postgres")
    args = parser.parse_args()
    if not args.locomo.is_file():
        raise SystemExit(f"no conversations at {args.locomo} (--locomo PATH)")
    turns, questions = conversations(args.locomo)
    turns = turns[: args.turns] if args.turns else turns
    questions = questions[: args.questions]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    print(
        f"{len(turns)} real turns remembered one at a time, a compaction every {args.every}, "
        f"{len(questions)} questions searched ({args.locomo.name})"
    )
    p50: dict[str, dict[str, float]] = {}
    for engine in engines:
        took = on(engine, lambda url: run(url, turns, questions, args.every))
        if took is None:
            continue
        if args.copies:
            took.update(on(engine, lambda url: bulk(url, turns, args.copies)) or {})
        p50[engine] = {s: statistics.median(v) * 1000 for s, v in took.items() if v}
    reference = p50.get("sqlite", {})
    print(f"{'step, p50':<24}" + "".join(f"{e:>12}" for e in p50) + "  ratio to sqlite")
    for step in (*STEPS, "bulk") if args.copies else STEPS:
        values = [p50[e].get(step) for e in p50]
        if step == "bulk":  # (one load: its seconds, three figures however short)
            label = f"bulk, {len(turns) * args.copies} turns"
            cells = "".join(
                f"{v / 1000:>10.3g} s" if v is not None else f"{'-':>12}" for v in values
            )
        else:
            label = step
            cells = "".join(f"{v:>9.2f} ms" if v is not None else f"{'-':>12}" for v in values)
        ratios = ", ".join(
            f"{e} {p50[e][step] / reference[step]:.2f}x"
            for e in p50
            if e != "sqlite" and step in p50[e] and reference.get(step)
        )
        print(f"{label:<24}{cells}  {ratios}")


if __name__ == "__main__":
    main()
