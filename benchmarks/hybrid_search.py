"""Hybrid search at scale on both engines, its vectors written straight in.

    python -m benchmarks.hybrid_search                    # 100,000 turns, one namespace
    python -m benchmarks.hybrid_search --size 20000 --engines postgres

``python -m benchmarks.retrieval --size 100000 --one-namespace`` measures the
same search but embeds every turn first (more than an hour on a loaded
machine). Here the turns of the generated long conversation
(:mod:`benchmarks.conversations`, one namespace) are remembered with no
vectors made, and the real model's vectors of their texts (embedded once
per distinct text and cached, :func:`benchmarks.vector_index.vectors_of`)
are written straight into each store's vector table, as
:mod:`benchmarks.vector_index` does; on PostgreSQL the HNSW index is then
built on them (its time printed) and ``VACUUM ANALYZE`` run (what
autovacuum does after a load). PostgreSQL is a server with pgvector of this
process's own (the ``pgserver`` package).

Rows, each engine: the store's load, recall@10 of hybrid and lexical
search, and p50/p95 of ``Memory.search`` (limit 10) over the questions of
5-12 words, in hybrid mode (the question embedded each time, as a user's
search does), lexical mode, hybrid through the MCP ``search`` tool (the
SDK's client, in memory), and embedding the question alone. On PostgreSQL
the same hybrid search through a pool of one connection follows (the vector
steps then run after the words' ranking instead of beside it, on a second
connection), and with the vector step scanning exactly (every vector
compared), to show what the graph costs in recall and saves in time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks.conversations import Question, generate
from benchmarks.retrieval import (
    embed_only,
    latency,
    mcp_runs,
    memors_hits,
    p,
    recall,
    remember,
    report,
    uris_of,
)
from benchmarks.vector_index import model_or_exit, vectors_of, write_vectors


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def put_vectors(memory: Any, matrix: Any, index: dict[str, int], postgres: bool) -> None:
    """Give every passage the vector of its turn's text, straight into the table."""
    store = memory.store
    with store.read():
        rows = store.all(
            "SELECT p.rowid, p.namespace, d.uri FROM passages p "
            "JOIN documents d ON d.id = p.document"
        )
    vectors = [(r, ns, matrix[index[uri]].astype("<f4").tobytes()) for r, ns, uri in rows]
    write_vectors(store, vectors, postgres)


def build_graph(memory: Any) -> float:
    """Build the HNSW index as a store that predates it gets it; seconds."""
    from memors_core.storage.postgres import vectors

    store = memory.store
    start = time.perf_counter()
    with store.write():
        store.conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        store.conn.execute(vectors.HNSW)
    return time.perf_counter() - start


def vacuum(url: str) -> float:
    import psycopg

    start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - start


def rows_for(
    label: str,
    memory: Any,
    questions: list[Question],
    mid: list[Question],
    rounds: int,
    *,
    full: bool = True,
) -> None:
    uris = uris_of(memory)
    r_hyb = statistics.mean(
        recall(memors_hits(memory, q, "hybrid"), uris, q.evidence) for q in questions
    )
    r_lex = statistics.mean(recall(memors_hits(memory, q), uris, q.evidence) for q in questions)
    report(f"{label}: recall@10, hybrid", f"{r_hyb:.3f}", f"lexical {r_lex:.3f}")
    hyb = latency(lambda q: memors_hits(memory, q, "hybrid"), mid, rounds)
    report(
        f"{label}: hybrid p50 / p95",
        f"{statistics.median(hyb):.2f} ms",
        f"p95 {p(hyb, 95):.2f} ms  {load()}",
        "p50 <= 15 ms at 100k",
    )
    if not full:
        return
    lex = latency(lambda q: memors_hits(memory, q), mid, rounds)
    embed = latency(embed_only, mid, rounds)
    report(
        f"{label}: lexical p50 / p95",
        f"{statistics.median(lex):.2f} ms",
        f"p95 {p(lex, 95):.2f} ms",
    )
    report(f"{label}: embedding the question p50", f"{statistics.median(embed):.2f} ms")
    runs = mcp_runs(memory, mid, ("hybrid",))["hybrid"]
    mcp = [t for _, _, t in runs]
    report(
        f"{label}: MCP search (hybrid) p50 / p95",
        f"{statistics.median(mcp):.2f} ms",
        f"p95 {p(mcp, 95):.2f} ms",
    )


def engine_rows(engine: str, corpus: Any, args: argparse.Namespace) -> None:
    from memors_core import Memory

    index = {d["uri"]: n for n, d in enumerate(corpus.documents)}
    postgres = engine == "postgres"
    if postgres:
        from memors_core.testing import pgvector

        why = pgvector.available()
        if why is not None:
            report("PostgreSQL with pgvector", "skipped", why)
            return
        url = pgvector.new_database()
        target: Any = url
    else:
        target = Path(tempfile.mkdtemp(prefix="memors-hybrid-")) / "memors.db"
    name = "PostgreSQL" if postgres else "SQLite"
    memory = Memory.open(target, background_vectors=False)
    try:
        took = remember(memory, corpus.documents)
        report(f"{name}: remember (no vectors made)", f"{took:.1f} s", load())
        matrix = vectors_of([d["text"] for d in corpus.documents])  # (cached after the first)
        start = time.perf_counter()
        put_vectors(memory, matrix, index, postgres)
        report(f"{name}: vectors written", f"{time.perf_counter() - start:.1f} s")
        if postgres:
            report(f"{name}: HNSW index build", f"{build_graph(memory):.1f} s", load())
            report(f"{name}: VACUUM ANALYZE", f"{vacuum(url):.1f} s")
        mid = [q for q in corpus.questions if 5 <= q.words <= 12] or corpus.questions
        rows_for(name, memory, corpus.questions, mid, args.rounds)
        if postgres:
            from memors_core.storage.postgres import vectors

            # The same searches with a pool of one connection: the vector
            # steps run after the words' ranking, not beside it.
            with mock.patch.dict(os.environ, {"MEMORS_PG_POOL_SIZE": "1"}):
                alone = Memory.open(url, background_vectors=False)
            try:
                rows_for(
                    f"{name}, one connection", alone, corpus.questions, mid, args.rounds, full=False
                )
            finally:
                alone.close()
            breadth, graph = vectors.BREADTH, vectors.EXACT_BELOW
            try:
                for walk in [int(b) for b in args.breadths.split(",") if b]:
                    vectors.BREADTH = walk
                    rows_for(f"{name}, walk {walk} x", memory, corpus.questions, mid, 1, full=False)
                vectors.BREADTH = breadth
                vectors.EXACT_BELOW = sys.maxsize  # every namespace scanned exactly
                rows_for(f"{name}, exact step", memory, corpus.questions, mid, 1, full=False)
            finally:
                vectors.BREADTH, vectors.EXACT_BELOW = breadth, graph
    finally:
        memory.close()
        if postgres:
            pgvector.drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="turns (default 100000)")
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the questions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engines", default="sqlite,postgres", help="comma-separated")
    parser.add_argument(
        "--breadths",
        default="",
        help="PostgreSQL: also hybrid with the graph walked for each of these many candidates "
        "per passage read (comma-separated, e.g. 4,8,16; the code's BREADTH is the default row)",
    )
    args = parser.parse_args()

    model_or_exit("hybrid_search")
    corpus = generate(args.size, args.questions, seed=args.seed, one_namespace=True)
    mid = sum(1 for q in corpus.questions if 5 <= q.words <= 12)
    print(
        f"hybrid search: {len(corpus.documents)} turns in one namespace, "
        f"{len(corpus.questions)} questions ({mid} of 5-12 words timed), "
        f"python {sys.version.split()[0]}\n"
    )
    print(f"{'figure':<46} {'value':>10}  {'reference':<28} target")
    for engine in [e for e in args.engines.split(",") if e]:
        engine_rows(engine, corpus, args)


if __name__ == "__main__":
    main()
