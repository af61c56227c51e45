"""Search on both engines, on the same data: recall@10 and latency.

    python -m benchmarks.search_engines                  # small (5,000 passages)
    python -m benchmarks.search_engines --size 100000    # the figure issue 15 sets targets at

A generated corpus with labelled evidence: passages of 30-120 words drawn
from a Zipf-weighted vocabulary of made-up stems, each written in one of
several inflections (``-s``, ``-ed``, ``-ing``, ``-er``, so the stemmer
matters), mixed with English function words (the stop words), grouped
into documents. Each question is planted: two to four evidence passages
each hold some of its content words (inflected differently from the
question), among noise that holds them too, so ranking decides what comes
first. Two-word questions are two content words; eight-word questions are
five content words and three function words.

The same documents go into a SQLite store and a PostgreSQL store
(``Memory.open`` + ``remember_many``; the PostgreSQL database is a fresh
one from :mod:`memors_core.testing.postgres`, dropped at the end). Printed:
remember time, recall@10 (the share of a question's evidence in its first
ten hits, averaged) and search p50/p95 per question length, each
PostgreSQL figure beside SQLite's and the target (issue 15: recall within
0.02, p50 at most 2x at 100,000 passages).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from benchmarks.corpus import FUNCTION_WORDS, SYLLABLES

SUFFIXES = ["", "", "", "s", "ed", "ing", "er"]


@dataclass
class Question:
    text: str
    words: int
    evidence: set[str] = field(default_factory=set)


@dataclass
class Corpus:
    documents: list[dict[str, Any]]
    questions: list[Question]
    passages: int


def _stems(rng: random.Random, size: int) -> list[str]:
    out: set[str] = set()
    while len(out) < size:
        out.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(out)


def generate(size: int, questions: int, seed: int = 7, per_doc: int = 8) -> Corpus:
    """``size`` passages in documents of about ``per_doc``, and ``questions``
    questions (half of two words, half of eight) with their evidence planted."""
    rng = random.Random(seed)
    stems = _stems(rng, 20_000)
    rng.shuffle(stems)
    weights = list(accumulate(1.0 / (r + 1) ** 1.05 for r in range(len(stems))))
    fweights = list(accumulate(1.0 / (r + 1) for r in range(len(FUNCTION_WORDS))))

    def inflect(stem: str) -> str:
        return stem + rng.choice(SUFFIXES)

    def noise(n: int) -> list[str]:
        content = rng.choices(stems, cum_weights=weights, k=n)
        function = rng.choices(FUNCTION_WORDS, cum_weights=fweights, k=n)
        return [
            f if rng.random() < 0.45 else inflect(c) for c, f in zip(content, function, strict=True)
        ]

    # Questions' content words come from ranks 30..3000: common enough to be
    # in plenty of noise passages, rare enough to carry weight.
    planted: list[tuple[int, list[str]]] = []
    made: list[Question] = []
    for q in range(questions):
        short = q % 2 == 0
        content = rng.sample(stems[30:3000], 2 if short else 5)
        words = [inflect(w) for w in content]
        if not short:
            for f in rng.sample(FUNCTION_WORDS[:12], 3):
                words.insert(rng.randrange(len(words) + 1), f)
        question = Question(" ".join(words).capitalize() + "?", len(words))
        made.append(question)
        for _ in range(rng.randint(2, 4)):
            keep = [w for w in content if rng.random() < 0.6] or [rng.choice(content)]
            if short and len(keep) < 2 and rng.random() < 0.5:
                keep = list(content)
            body = noise(rng.randint(30, 100))
            for w in keep:
                for _ in range(rng.choice((1, 1, 2))):
                    body.insert(rng.randrange(len(body) + 1), inflect(w))
            planted.append((q, body))

    slots = rng.sample(range(size), min(len(planted), size))
    at = dict(zip(slots, planted, strict=False))
    documents: list[dict[str, Any]] = []
    n = 0
    doc = 0
    while n < size:
        doc += 1
        texts = []
        for _ in range(rng.randint(per_doc // 2, per_doc * 3 // 2)):
            if n >= size:
                break
            q, body = at.get(n, (None, None))
            if body is None:
                body = noise(rng.randint(30, 120))
            # A numbered lead-in keeps every passage distinct (labels are passage texts).
            passage = f"Note {doc}-{len(texts)}: " + " ".join(body) + "."
            if q is not None:
                made[q].evidence.add(passage)
            texts.append(passage)
            n += 1
        documents.append({"text": "\n\n".join(texts), "uri": f"doc-{doc}"})
    return Corpus(documents, [q for q in made if q.evidence], n)


# --- measuring ------------------------------------------------------------------------


ROWS: list[tuple[str, ...]] = []


def report(name: str, value: str, reference: str = "", ratio: str = "", target: str = "") -> None:
    ROWS.append((name, value, reference, ratio, target))
    print(f"{name:<40} {value:>12}  {reference:<22} {ratio:>8}  {target}", flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


@dataclass
class Measured:
    recall: dict[int, float]
    p50: dict[int, float]
    p95: dict[int, float]


def measure(memory: Any, questions: list[Question], rounds: int) -> Measured:
    """Recall@10 per question length, and latency over ``rounds`` passes."""
    recall: dict[int, list[float]] = {}
    times: dict[int, list[float]] = {}
    for q in questions:  # warm-up pass, and the recall figures
        texts = {h.text for h in memory.search(q.text, limit=10).results}
        recall.setdefault(q.words, []).append(len(texts & q.evidence) / len(q.evidence))
    for _ in range(rounds):
        for q in questions:
            t, _ = timed(lambda q=q: memory.search(q.text, limit=10))
            times.setdefault(q.words, []).append(t)
    return Measured(
        {k: statistics.mean(v) for k, v in recall.items()},
        {k: statistics.median(v) for k, v in times.items()},
        {k: statistics.quantiles(v, n=20)[18] for k, v in times.items()},
    )


def unindexed_load(corpus: Corpus) -> float:
    """Remember the corpus into a PostgreSQL store whose search triggers are
    switched off: what the search index costs a bulk load."""
    import psycopg

    from memors_core import Memory
    from memors_core.testing import postgres

    url = postgres.new_database()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for table in ("passages", "pages", "facts", "entities", "aliases", "tombstones"):
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_search")
        memory = Memory.open(url)
        t, _ = timed(lambda: memory.remember_many(corpus.documents))
        memory.close()
        return t
    finally:
        postgres.drop_database(url)


def analyse(url: str) -> float:
    """VACUUM ANALYZE the store: what autovacuum does after a bulk load (the
    planner's statistics, and the visibility map index-only scans need)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        t, _ = timed(lambda: conn.execute("VACUUM ANALYZE"))
    return t


def size_mib(url: str) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return row[0] / 2**20 if row else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5_000, help="passages (default 5000)")
    parser.add_argument("--questions", type=int, default=400, help="questions (default 400)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the questions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--unindexed",
        action="store_true",
        help="also remember into a PostgreSQL store with the search triggers off",
    )
    args = parser.parse_args()

    from memors_core import Memory
    from memors_core.testing import postgres

    why = postgres.available()
    if why is not None:
        sys.exit(f"search_engines: {why}")
    corpus = generate(args.size, args.questions, seed=args.seed)
    evidence = sum(len(q.evidence) for q in corpus.questions)
    print(
        f"search on both engines: {corpus.passages} passages in {len(corpus.documents)} "
        f"documents, {len(corpus.questions)} questions ({evidence} evidence passages), "
        f"python {sys.version.split()[0]}\n"
    )
    print(f"{'figure':<40} {'PostgreSQL':>12}  {'SQLite':<22} {'ratio':>8}  target")
    work = Path(tempfile.mkdtemp(prefix="memors-search-"))
    url = postgres.new_database()
    try:
        lite = Memory.open(work / "memors.db")
        pg = Memory.open(url)
        lite_load, _ = timed(lambda: lite.remember_many(corpus.documents))
        pg_load, _ = timed(lambda: pg.remember_many(corpus.documents))
        report(
            "remember (all documents)",
            f"{pg_load:.2f} s",
            f"{lite_load:.2f} s",
            f"{pg_load / lite_load:.2f}x",
        )
        if args.unindexed:
            bare = unindexed_load(corpus)
            report(
                "  PostgreSQL, search triggers off",
                f"{bare:.2f} s",
                f"{lite_load:.2f} s",
                f"{bare / lite_load:.2f}x",
                f"index: {(pg_load - bare) / pg_load:.0%} of remember",
            )
        theirs = measure(lite, corpus.questions, args.rounds)
        cold = measure(pg, corpus.questions, 1)
        vacuum = analyse(url)
        report("VACUUM ANALYZE after the load", f"{vacuum:.2f} s", "(autovacuum's job)")
        ours = measure(pg, corpus.questions, args.rounds)
        for words in sorted(ours.recall):
            diff = ours.recall[words] - theirs.recall[words]
            report(
                f"recall@10, {words}-word questions",
                f"{ours.recall[words]:.3f}",
                f"{theirs.recall[words]:.3f}",
                f"{diff:+.3f}",
                "within 0.02",
            )
        for words in sorted(ours.p50):
            report(
                f"search p50, {words}-word questions",
                f"{ours.p50[words] * 1000:.2f} ms",
                f"{theirs.p50[words] * 1000:.2f} ms",
                f"{ours.p50[words] / theirs.p50[words]:.2f}x",
                "<= 2x at 100k",
            )
            report(
                f"search p95, {words}-word questions",
                f"{ours.p95[words] * 1000:.2f} ms",
                f"{theirs.p95[words] * 1000:.2f} ms",
                f"{ours.p95[words] / theirs.p95[words]:.2f}x",
            )
        for words in sorted(cold.p50):
            report(
                f"  before VACUUM: p50, {words}-word",
                f"{cold.p50[words] * 1000:.2f} ms",
                f"{theirs.p50[words] * 1000:.2f} ms",
                f"{cold.p50[words] / theirs.p50[words]:.2f}x",
            )
        lite_mib = sum(f.stat().st_size for f in work.glob("memors.db*")) / 2**20
        report("store size", f"{size_mib(url):.0f} MiB", f"{lite_mib:.0f} MiB")
        lite.close()
        pg.close()
    finally:
        postgres.drop_database(url)


if __name__ == "__main__":
    main()
