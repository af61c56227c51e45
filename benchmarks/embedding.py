"""The embedding model's speed (the ``semantic`` extra), beside what it embeds.

    python -m benchmarks.embedding

Rows: loading the model; passages of real English prose (this repository's
own docs, split as memors splits documents) and short chat turns
(:mod:`benchmarks.conversations`) embedded per second, with onnxruntime's
default threads (every core) and on one; one question's vector, p50. The
reference is memors' own remember speed without vectors, measured in
``benchmarks/retrieval.py`` (``--no-vectors``).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def prose() -> list[str]:
    from memors_core.domain.text import split_passages

    out = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        out += [p for p in split_passages(path.read_text(encoding="utf-8")) if len(p.split()) >= 8]
    return out


def rate(embed, texts: list[str]) -> float:
    start = time.perf_counter()
    embed(texts)
    return len(texts) / (time.perf_counter() - start)


def main() -> None:
    import os

    import benchmarks
    from memors_core import semantic

    if benchmarks.VECTORS_DEFAULTED:
        os.environ["MEMORS_VECTORS"] = "on"  # (the package turned it off for the others)

    if semantic.unavailable():
        sys.exit(f"embedding: {semantic.unavailable()}")
    start = time.perf_counter()
    model = semantic.embedder()
    loaded = time.perf_counter() - start
    from benchmarks.conversations import generate

    passages = prose()
    turns = [d["text"] for d in generate(2_000, 0).documents]
    words = statistics.mean(len(p.split()) for p in passages)
    print(f"embedding with {semantic.MODEL}, python {sys.version.split()[0]}\n")
    print(f"{'figure':<52} {'value':>14}  reference")
    print(f"{'load the model (first vector of a process)':<52} {loaded:>12.2f} s")
    model.embed(passages[:32])  # warm
    for label, texts in ((f"prose passages ({words:.0f} words)", passages), ("chat turns", turns)):
        print(f"{label + ', per second':<52} {rate(model.embed, texts):>14,.0f}  every core")
    model = semantic.Embedder(threads=1)  # one core, as a busy machine gives
    for label, texts in ((f"prose passages ({words:.0f} words)", passages), ("chat turns", turns)):
        print(f"{label + ', per second':<52} {rate(model.embed, texts):>14,.0f}  one core")
    questions = [t.split(".")[0] + "?" for t in turns[:200]]
    times = []
    for q in questions:
        start = time.perf_counter()
        model.embed([q])
        times.append((time.perf_counter() - start) * 1000)
    print(f"{'a question, p50 (one core)':<52} {statistics.median(times):>11.2f} ms")


if __name__ == "__main__":
    main()
