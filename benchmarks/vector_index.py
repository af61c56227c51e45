"""The vector step of a search at scale: SQLite's code pass, PostgreSQL's exact scan and HNSW.

    python -m benchmarks.vector_index                   # 100,000 vectors, one namespace
    python -m benchmarks.vector_index --size 20000 --questions 100

The vectors are the real model's (all-MiniLM-L6-v2 int8, the ``semantic``
extra) of a generated long conversation (:mod:`benchmarks.conversations`,
one namespace), embedded once per distinct text and kept in
``$XDG_CACHE_HOME/memors-bench`` (a generated corpus repeats its turns:
100,000 turns are about 18,000 texts). They are written straight into
each store's ``passage_vectors`` table (the step measured here reads only
that table), beside a 1,000-vector namespace of their own; the questions
are the corpus's.

Rows, each engine: the nearest 50 passages of the big namespace to each
question (a hybrid search reads 50), p50/p95, and the share of the exact
nearest 50 (every vector compared, in numpy) that the step returns. On
PostgreSQL with pgvector (a server of this process's own, the ``pgserver``
package): the exact scan memors did before, the HNSW index's build time on
the vectors already there, then the step as search runs it (HNSW for a
namespace of 10,000 vectors or more, exact below), and the small
namespace's p50 beside the big one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.conversations import generate

BIG, SMALL, DEPTH = "big", "small", 50
#: The cosines of the last timed run's hits, per question (for kept_by_cosine).
COSINES: list[list[float]] = []
#: The exact 50th cosine of each question.
FLOORS: list[float] = []


def report(name: str, value: str, reference: str = "") -> None:
    print(f"{name:<52} {value:>12}  {reference}", flush=True)


def vectors_of(texts: list[str]) -> Any:
    """The model's vector of each text (a float32 matrix), from the cache or embedded now."""
    import numpy as np

    from memors_core import semantic

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memors-bench"
    path = home / f"vectors-{key}.npy"
    if path.exists():
        return np.load(path)
    distinct = list(dict.fromkeys(texts))
    start = time.perf_counter()
    model = semantic.embedder()
    made: dict[str, bytes] = {}
    for at in range(0, len(distinct), 256):
        chunk = distinct[at : at + 256]
        made.update(zip(chunk, model.embed(chunk), strict=True))
    print(f"(embedded {len(distinct)} distinct texts in {time.perf_counter() - start:.0f} s)")
    matrix = np.stack([np.frombuffer(made[t], dtype="<f4") for t in texts])
    home.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def timed_runs(fn: Any, questions: list[bytes]) -> tuple[list[float], list[list[int]]]:
    fn(questions[0])  # warm-up (SQLite reads its codes once a process)
    times, found = [], []
    for q in questions:
        start = time.perf_counter()
        got = fn(q)
        times.append((time.perf_counter() - start) * 1000)
        found.append([r[0] for r in got])  # (rowid, cosine, ...)
        COSINES.append([r[1] for r in got])
    return times, found


def kept_by_cosine(found: list[list[float]], exact: list[float]) -> float:
    """The share of the nearest 50 whose cosine reaches the exact 50th's: a
    generated corpus repeats its turns, so another copy of a tied vector
    counts as found."""
    return statistics.mean(
        min(1.0, sum(1 for c in f if c >= e - 1e-5) / DEPTH)
        for f, e in zip(found, exact, strict=True)
    )


def kept(found: list[list[int]], exact: list[list[int]]) -> float:
    return statistics.mean(
        len(set(f) & set(e)) / max(1, len(e)) for f, e in zip(found, exact, strict=True)
    )


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=100)[94]


def latency_row(name: str, times: list[float], reference: str = "") -> None:
    report(name, f"{statistics.median(times):.2f} ms", f"p95 {p95(times):.2f} ms {reference}")


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="vectors (default 100000)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument(
        "--breadths",
        default="",
        help="also walk the graph for each of these many candidates (hnsw.ef_search, "
        "comma-separated, e.g. 100,200,400,800): p50/p95 and the share kept",
    )
    parser.add_argument(
        "--builds",
        default="",
        help="also build the graph with each of these m:ef_construction pairs "
        "(comma-separated, e.g. 16:128,24:128) and walk it for each --breadths",
    )
    args = parser.parse_args()

    model_or_exit("vector_index")
    from memors_core import semantic

    corpus = generate(args.size, args.questions, seed=args.seed, one_namespace=True)
    texts = [d["text"] for d in corpus.documents]
    small = generate(1_000, 10, seed=args.seed + 1, one_namespace=True)
    matrix = vectors_of(texts)
    others = vectors_of([d["text"] for d in small.documents])
    model = semantic.embedder()
    questions = model.embed([q.text for q in corpus.questions])
    exact = []
    for q in questions:
        cos = matrix @ np.frombuffer(q, dtype="<f4")
        order = np.argsort(-cos, kind="stable")[:DEPTH]
        exact.append([int(i) + 1 for i in order])
        FLOORS.append(float(cos[order[-1]]))
    print(f"vector step: {len(texts)} vectors in one namespace, {len(questions)} questions\n")
    print(f"{'figure':<52} {'value':>12}  reference")
    if not args.skip_sqlite:
        sqlite_rows(matrix, others, questions, exact)
    if not args.skip_postgres:
        breadths = [int(b) for b in args.breadths.split(",") if b]
        builds = [tuple(int(x) for x in b.split(":")) for b in args.builds.split(",") if b]
        postgres_rows(matrix, others, questions, exact, breadths, builds)


def rows_of(matrix: Any, first: int, namespace: str) -> list[tuple[int, str, bytes]]:
    """(passage, namespace, vector) for each row of ``matrix``, numbered from ``first``."""
    return [(n, namespace, row.astype("<f4").tobytes()) for n, row in enumerate(matrix, first)]


def write_vectors(store: Any, rows: list[tuple[int, str, bytes]], postgres: bool) -> None:
    """Write (passage, namespace, vector) rows straight into the store's vector
    table, as the store would hold them: on PostgreSQL without its graph (built
    after, as a store that predates it gets it) and with the namespaces' counts
    written once at the end (one count row updated per vector in one
    transaction is quadratic)."""
    from memors_core.storage.postgres.vectors import literal
    from memors_core.storage.sqlite.vectors import code

    if not postgres:
        with store.write():
            store.conn.executemany(
                "INSERT INTO passage_vectors(passage, namespace, code, vector) VALUES (?, ?, ?, ?)",
                ((r, ns, code(v), v) for r, ns, v in rows),
            )
        return
    with store.write():
        store.conn.execute("DROP INDEX IF EXISTS passage_vectors_hnsw")
        store.conn.execute("ALTER TABLE passage_vectors DISABLE TRIGGER passage_vectors_count")
        with (
            store.conn.cursor() as cur,
            cur.copy("COPY passage_vectors(passage, namespace, vector) FROM STDIN") as cp,
        ):
            for r, ns, v in rows:
                cp.write_row((r, ns, literal(v)))
        store.conn.execute("ALTER TABLE passage_vectors ENABLE TRIGGER passage_vectors_count")
        store.conn.execute(
            "INSERT INTO vector_stats(namespace, vectors, changes) "
            "SELECT namespace, count(*), count(*) FROM passage_vectors GROUP BY namespace "
            "ON CONFLICT (namespace) DO UPDATE SET vectors = excluded.vectors"
        )


def model_or_exit(name: str) -> None:
    """Vectors on (the package's harnesses default them off), or exit saying
    why the model cannot run here."""
    os.environ["MEMORS_VECTORS"] = "on"
    from memors_core import semantic

    why = semantic.unavailable()
    if why is not None:
        raise SystemExit(f"{name}: {why}")


def sqlite_rows(matrix: Any, others: Any, questions: list[bytes], exact: list) -> None:
    from memors_core import Memory

    work = Path(tempfile.mkdtemp(prefix="memors-vector-index-"))
    with Memory.open(work / "store.db") as memory:
        write_vectors(
            memory.store,
            rows_of(matrix, 1, BIG) + rows_of(others, len(matrix) + 1, SMALL),
            postgres=False,
        )
        with memory.store.read() as tx:
            COSINES.clear()
            times, found = timed_runs(lambda q: tx.search._nearest(BIG, q, DEPTH, ()), questions)
            cosines = list(COSINES)
            small, _ = timed_runs(lambda q: tx.search._nearest(SMALL, q, DEPTH, ()), questions)
    latency_row("SQLite code pass: nearest 50, p50", times)
    report("SQLite code pass: of the exact nearest 50, kept", f"{kept(found, exact):.3f}")
    report("... counting a tied copy as found", f"{kept_by_cosine(cosines, FLOORS):.3f}")
    latency_row("SQLite: a 1,000-vector namespace beside it, p50", small)


def sweep(store: Any, questions: list[bytes], exact: list, breadths: list[int], label: str) -> None:
    """The graph walked for each of ``breadths`` candidates: p50/p95 and the
    share of the exact nearest 50 kept (and with tied copies counted)."""
    from memors_core.storage.postgres import vectors

    for breadth in breadths:
        with store.read():
            COSINES.clear()
            times, found = timed_runs(
                lambda q, b=breadth: vectors.by_graph(store, BIG, vectors.literal(q), DEPTH, b),
                questions,
            )
            cosines = list(COSINES)
        latency_row(
            f"{label}, ef_search {breadth}: p50",
            times,
            f"kept {kept(found, exact):.3f}, tied {kept_by_cosine(cosines, FLOORS):.3f}",
        )


def postgres_rows(
    matrix: Any,
    others: Any,
    questions: list[bytes],
    exact: list,
    breadths: list[int] = (),  # type: ignore[assignment]
    builds: list[tuple[int, ...]] = (),  # type: ignore[assignment]
) -> None:
    from memors_core import Memory
    from memors_core.storage.postgres import vectors
    from memors_core.testing import pgvector

    why = pgvector.available()
    if why is not None:
        report("PostgreSQL with pgvector", "skipped", why)
        return
    url = pgvector.new_database()
    try:
        with Memory.open(url) as memory:
            store = memory.store
            write_vectors(
                store,
                rows_of(matrix, 1, BIG) + rows_of(others, len(matrix) + 1, SMALL),
                postgres=True,
            )
            with store.write():
                store.conn.execute("ANALYZE passage_vectors")
            with store.read():
                times, found = timed_runs(
                    lambda q: vectors.exact(store, BIG, vectors.literal(q), DEPTH), questions
                )
            latency_row("PostgreSQL exact scan (before): nearest 50, p50", times)
            report(
                "PostgreSQL exact scan: of the exact nearest 50, kept", f"{kept(found, exact):.3f}"
            )
            start = time.perf_counter()
            with store.write():
                store.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
                store.conn.execute(vectors.HNSW)
            report("PostgreSQL HNSW index build", f"{time.perf_counter() - start:.1f} s")
            with store.write():
                store.conn.execute("ANALYZE passage_vectors")
            with store.read() as tx:
                COSINES.clear()
                times, found = timed_runs(
                    lambda q: tx.search._nearest(BIG, q, DEPTH, ()), questions
                )
                cosines = list(COSINES)
                small, _ = timed_runs(lambda q: tx.search._nearest(SMALL, q, DEPTH, ()), questions)
            latency_row("PostgreSQL HNSW (search now): nearest 50, p50", times)
            report("PostgreSQL HNSW: of the exact nearest 50, kept", f"{kept(found, exact):.3f}")
            report("... counting a tied copy as found", f"{kept_by_cosine(cosines, FLOORS):.3f}")
            latency_row("PostgreSQL: a 1,000-vector namespace beside it, p50", small, "(exact)")
            graph = dict(vectors.GRAPH)
            label = f"HNSW m {graph['m']}, ef_construction {graph['ef_construction']}"
            sweep(store, questions, exact, breadths, label)
            for m, construction in builds:
                start = time.perf_counter()
                with store.write():
                    store.conn.execute("DROP INDEX passage_vectors_hnsw")
                    store.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
                    store.conn.execute(
                        "CREATE INDEX passage_vectors_hnsw ON passage_vectors USING hnsw "
                        f"(vector vector_cosine_ops) WITH (m = {m}, ef_construction = {construction})"
                    )
                took = time.perf_counter() - start
                report(f"HNSW m {m}, ef_construction {construction}: build", f"{took:.1f} s")
                sweep(
                    store, questions, exact, breadths, f"HNSW m {m}, ef_construction {construction}"
                )
    finally:
        pgvector.drop_database(url)


if __name__ == "__main__":
    main()
