"""A deterministic corpus with planted near-duplicates, or any JSONL corpus.

Generated passages are 30-120 words drawn from a Zipf-distributed made-up
vocabulary (so 3-grams repeat the way real prose does), grouped into
documents. A share of passages is planted again in other documents: exact
copies (in clusters of up to 60, as real corpora copy licences and
boilerplate), light edits (Jaccard mostly >= 0.75) and heavier edits
(mostly below), so the scan has real work on both sides of the threshold.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "tu",
    "ra",
    "si",
    "po",
    "de",
    "fa",
    "gu",
    "hi",
    "jo",
    "be",
    "vo",
    "zi",
    "an",
    "el",
    "or",
    "us",
    "qua",
    "tri",
    "sto",
    "pla",
    "gre",
]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _edit(rng: random.Random, words: list[str], vocab: list[str], edits: int) -> list[str]:
    out = list(words)
    for _ in range(edits):
        i = rng.randrange(len(out))
        op = rng.random()
        if op < 0.4:
            out[i] = rng.choice(vocab)
        elif op < 0.7:
            out.insert(i, rng.choice(vocab))
        elif len(out) > 5:
            del out[i]
    return out


FUNCTION_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "at",
    "from",
    "an",
    "which",
    "not",
    "but",
    "have",
    "has",
    "can",
    "will",
    "their",
    "its",
    "these",
    "also",
    "than",
    "into",
    "when",
    "more",
    "other",
]


def generate(passages: int, seed: int = 7, per_doc: int = 8) -> Iterator[dict[str, str]]:
    """Yield ``{"doc", "text"}`` rows: ``passages`` passages in documents of ~``per_doc``.

    About 45% of the words are English function words (Zipf-weighted, as
    in prose); the rest come from a 20,000-word Zipf vocabulary.
    """
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 20_000)
    weights = list(accumulate(1.0 / (r + 1) ** 1.07 for r in range(len(vocab))))
    fweights = list(accumulate(1.0 / (r + 1) for r in range(len(FUNCTION_WORDS))))

    def sentence_words(n: int) -> list[str]:
        content = rng.choices(vocab, cum_weights=weights, k=n)
        function = rng.choices(FUNCTION_WORDS, cum_weights=fweights, k=n)
        return [f if rng.random() < 0.45 else c for c, f in zip(content, function, strict=True)]

    originals: list[list[str]] = []
    doc = 0
    made = 0
    while made < passages:
        doc += 1
        for _ in range(rng.randint(max(1, per_doc // 2), per_doc * 3 // 2)):
            if made >= passages:
                break
            roll = rng.random()
            if originals and roll < 0.05:  # exact copy of an earlier passage
                words = rng.choice(
                    originals[: max(1, len(originals) // 50)] if rng.random() < 0.3 else originals
                )
            elif originals and roll < 0.08:  # light edit: usually still a duplicate
                base = rng.choice(originals)
                words = _edit(rng, base, vocab, max(1, len(base) // 40))
            elif originals and roll < 0.10:  # heavier edit: usually not
                base = rng.choice(originals)
                words = _edit(rng, base, vocab, max(3, len(base) // 8))
            else:
                n = rng.randint(30, 120)
                words = sentence_words(n)
                originals.append(words)
            yield {"doc": f"doc-{doc}", "text": " ".join(words).capitalize() + "."}
            made += 1


def read_jsonl(path: Path, limit: int | None = None) -> Iterator[dict[str, str]]:
    """Rows of an existing JSONL corpus with ``doc`` and ``text`` per line."""
    with path.open(encoding="utf-8") as handle:
        for n, line in enumerate(handle):
            if limit is not None and n >= limit:
                return
            row = json.loads(line)
            yield {"doc": str(row["doc"]), "text": row["text"]}


def write_documents(path: Path, passages: int, seed: int = 7, change: Path | None = None) -> None:
    """Write a generated corpus as documents, one JSON object per line, for
    ``memors-mcp remember --jsonl`` (the passages of a document joined by
    blank lines, its id as ``uri``). With ``change``, the next 1% of the
    same stream goes there, as documents of their own (``-change`` uris)."""
    extra = max(1, passages // 100) if change else 0
    rows = generate(passages + extra, seed=seed)
    with path.open("w", encoding="utf-8") as out:
        _write(out, (next(rows) for _ in range(passages)), "")
    if change:
        with change.open("w", encoding="utf-8") as out:
            _write(out, rows, "-change")


def _write(out: Any, rows: Iterator[dict[str, str]], suffix: str) -> None:
    batch: list[str] = []
    doc = None
    for row in rows:
        if row["doc"] != doc and batch:
            out.write(json.dumps({"text": "\n\n".join(batch), "uri": f"{doc}{suffix}"}) + "\n")
            batch = []
        doc = row["doc"]
        batch.append(row["text"])
    if batch:
        out.write(json.dumps({"text": "\n\n".join(batch), "uri": f"{doc}{suffix}"}) + "\n")


if __name__ == "__main__":  # python -m benchmarks.corpus FILE PASSAGES [SEED [CHANGE_FILE]]
    import sys

    write_documents(
        Path(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]) if len(sys.argv) > 3 else 7,
        Path(sys.argv[4]) if len(sys.argv) > 4 else None,
    )
