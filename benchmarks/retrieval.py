"""Retrieval: recall@10 and latency of ``search``, each beside its reference and target.

    python -m benchmarks.retrieval                      # 20,000 turns, recall rows
    python -m benchmarks.retrieval --size 300000 --one-namespace --no-vectors  # lexical targets
    python -m benchmarks.retrieval --size 100000 --one-namespace               # hybrid target
    python -m benchmarks.retrieval --db postgresql      # on the local PostgreSQL server
    python -m benchmarks.retrieval --db pgvector        # on a PostgreSQL with pgvector
    python -m benchmarks.retrieval --documents D.jsonl --questions-file Q.jsonl  # any corpus
    python -m benchmarks.retrieval --locomo locomo10.json  # real long conversations, through MCP

With the ``semantic`` extra installed, remembering embeds every turn
(about 200 short turns a second on this machine): 100,000 take some
minutes.

The generated corpus is :mod:`benchmarks.conversations` (turns remembered
with their speaker as entity, questions with their evidence turns). Any
other corpus is two JSONL files: documents ``{"text", "uri", "entities"?,
"namespace"?}`` (one line each) and questions ``{"question", "evidence":
[uri, …], "namespace"?}``; a hit is relevant when its passage belongs to
an evidence document.

Rows, measured in one run on one store:

- recall@10 (share of a question's evidence in its first ten hits,
  averaged): a bare FTS5 table over the same passages (words OR-ed, FTS5's
  BM25: what memors did before), memors' BM25 on the words only (no entity
  terms), and memors' ``search`` (entity-aware), lexical mode;
- with vectors (the ``semantic`` extra installed; ``--no-vectors`` leaves
  them out): recall@10 in ``semantic`` and ``hybrid`` mode, and hybrid
  as it was before (reciprocal rank, k = 60, with the vector ranking of
  the named entities' passages alone), the same on the questions asked in
  other words, and how much of the exact vector ranking the code pass keeps
  (SQLite);
- search latency p50/p95 through the library (``Memory.search``, limit 10)
  for questions of 5-12 words, lexical and (with vectors) hybrid;
- the isolation row: a 1,000-turn namespace's p50 in a store of its own
  and beside the big one (a namespace's cost must not grow with others').

MCP's overhead on ``search`` is ``benchmarks/mcp_overhead.py``'s row.

``--locomo PATH`` takes the public LoCoMo file (``data/locomo10.json`` of
github.com/snap-research/LoCoMo, CC BY-NC 4.0: it is not shipped here) or a
subset of it in the same format, and measures as an outside harness would:
every dialogue turn remembered as a document (one namespace per
conversation), in each ``--shapes`` (the speaker named as entity, the text
prefixed with the speaker's name, both, neither), every question asked
through the MCP ``search`` tool (the SDK's own client, in memory) in each
mode; it prints recall@5 and @10 of the evidence turns per question
category and overall, and p50/p95 of the MCP call per mode, beside a
generated corpus of about the same size asked the same way.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from benchmarks.conversations import Corpus, Question, generate, jsonl

ROWS: list[tuple[str, ...]] = []


def report(name: str, value: str, reference: str = "", target: str = "") -> None:
    ROWS.append((name, value, reference, target))
    print(f"{name:<46} {value:>10}  {reference:<28} {target}", flush=True)


def load_jsonl(documents: str, questions: str) -> Corpus:
    docs = []
    for n, row in enumerate(jsonl(documents), 1):
        if "text" not in row:
            raise SystemExit(f"{documents}:{n}: a document needs a 'text'")
        docs.append(row)
    qs = []
    for n, row in enumerate(jsonl(questions), 1):
        if "question" not in row or not row.get("evidence"):
            raise SystemExit(f"{questions}:{n}: a question needs 'question' and 'evidence'")
        qs.append(Question(row["question"], row.get("namespace", "default"), set(row["evidence"])))
    return Corpus(docs, qs)


def remember(memory: Any, documents: list[dict]) -> float:
    """Bulk-load the documents, by namespace; seconds taken (the vectors,
    made off remember's path, are waited for after the clock stops)."""
    by_ns: dict[str, list[dict]] = {}
    for d in documents:
        d = dict(d)
        by_ns.setdefault(d.pop("namespace", "default"), []).append(d)
    start = time.perf_counter()
    for ns, docs in by_ns.items():
        memory.remember_many(docs, namespace=ns, batch=2000)
    took = time.perf_counter() - start
    memory.wait_for_vectors()
    return took


def uris_of(memory: Any) -> dict[str, str]:
    """Passage address -> its document's uri."""
    with memory.store.read():
        rows = memory.store.all(
            "SELECT p.id, d.uri FROM passages p JOIN documents d ON d.id = p.document"
        )
    return {f"memo://passage/{p}": u for p, u in rows}


def recall(hits: Iterable[str], uris: dict[str, str], evidence: set[str]) -> float:
    found = {uris.get(h) for h in hits}
    return len(found & evidence) / len(evidence)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def memors_hits(memory: Any, q: Question, mode: str = "lexical") -> list[str]:
    found = memory.search(q.text, namespace=q.namespace, limit=10, mode=mode)
    assert found.mode == mode, found.notice
    return [h.address for h in found.results]


def restricted_hybrid_hits(memory: Any, q: Question) -> list[str]:
    """Hybrid as it was before: reciprocal-rank fusion (k = 60) with the
    vector side limited to the passages of the entities the question names
    (it loses every answer told by someone the question does not name)."""
    from memors_core.domain import search as rank
    from memors_core.engine.vectors import embed_question

    vector = embed_question(q.text)
    with memory.store.read() as tx:
        wanted = rank.with_entities(
            rank.text.words(q.text), lambda names: tx.entities.named(q.namespace, names)
        )
        depth = rank.fusion_depth(10)
        lexical = tx.search.passages(q.namespace, wanted, depth).rows
        near = tx.search.passages_like(q.namespace, vector, depth, wanted.entities).rows
    near = [h for h in near if h.score >= rank.MIN_COSINE]
    return rrf([lexical, near], 60)[:10]


def code_pass_recall(memory: Any, questions: list[Question], depth: int) -> float:
    """Of the exact ``depth`` nearest passages (every vector compared),
    the share the search's code pass keeps (SQLite's first pass)."""
    import numpy as np

    from memors_core.engine.vectors import embed_question

    kept = []
    by_ns: dict[str, tuple[Any, Any]] = {}
    for q in questions:
        if q.namespace not in by_ns:
            with memory.store.read():
                rows = memory.store.all(
                    "SELECT 'memo://passage/' || p.id, v.vector FROM passage_vectors v "
                    "JOIN passages p ON p.rowid = v.passage WHERE v.namespace = ?",
                    (q.namespace,),
                )
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
            by_ns[q.namespace] = ([r[0] for r in rows], matrix.reshape(len(rows), -1))
        addresses, matrix = by_ns[q.namespace]
        vector = embed_question(q.text)
        order = np.argsort(-(matrix @ np.frombuffer(vector, dtype="<f4")))[:depth]
        exact = {addresses[i] for i in order}
        with memory.store.read() as tx:
            found = {h.address for h in tx.search.passages_like(q.namespace, vector, depth).rows}
        kept.append(len(exact & found) / max(1, len(exact)))
    return statistics.mean(kept)


def words_only_hits(memory: Any, q: Question) -> list[str]:
    """memors' BM25 without entity terms (the query's words only)."""
    from memors_core.domain.search import SearchQuery, query_words

    with memory.store.read() as tx:
        run = tx.search.passages(q.namespace, SearchQuery(tuple(query_words(q.text))), 10)
    return [h.address for h in run.rows]


def bare_fts(path: Path, memory: Any) -> Callable[[Question], list[str]]:
    """A plain FTS5 table over every live passage (store-wide, FTS5's BM25,
    words OR-ed): the reference memors started from."""
    import apsw

    from memors_core.storage.sqlite.search import fts_query

    conn = apsw.Connection(str(path))
    conn.execute(
        "CREATE TABLE t(id TEXT, ns TEXT, text TEXT);"
        "CREATE VIRTUAL TABLE t_fts USING fts5(text, content='t', tokenize='porter unicode61')"
    )
    with memory.store.read():
        rows = memory.store.all("SELECT id, namespace, text FROM passages")
    with conn:
        conn.executemany(
            "INSERT INTO t(rowid, id, ns, text) VALUES (?, ?, ?, ?)",
            ((i, *r) for i, r in enumerate(rows, 1)),
        )
        conn.execute("INSERT INTO t_fts(t_fts) VALUES ('rebuild')")

    def hits(q: Question) -> list[str]:
        match = fts_query(q.text)
        if match is None:
            return []
        got = conn.execute(
            "SELECT t.id, bm25(t_fts) AS r FROM t_fts JOIN t ON t.rowid = t_fts.rowid "
            "WHERE t_fts MATCH ? AND t.ns = ? ORDER BY r LIMIT 10",
            (match, q.namespace),
        ).fetchall()
        return [f"memo://passage/{i}" for i, _ in got]

    return hits


def embed_only(q: Question) -> bytes:
    from memors_core.engine.vectors import embed_question

    return embed_question(q.text)


def latency(fn: Callable[[Question], Any], questions: list[Question], rounds: int) -> list[float]:
    for q in questions:  # warm-up
        fn(q)
    times = []
    for _ in range(rounds):
        for q in questions:
            t, _ = timed(lambda q=q: fn(q))
            times.append(t * 1000)
    return times


def p(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100)[q - 1] if len(times) > 1 else times[0]


def open_store(db: str | None, work: Path, name: str) -> tuple[Any, Callable[[], None]]:
    from memors_core import Memory

    if db is None:
        memory = Memory.open(work / f"{name}.db")
        return memory, memory.close
    if db == "pgvector":  # PostgreSQL with pgvector: a server of this process's own
        from memors_core.testing import pgvector as postgres
    else:
        from memors_core.testing import postgres

    url = postgres.new_database()
    memory = Memory.open(url)

    def done() -> None:
        memory.close()
        postgres.drop_database(url)

    return memory, done


def isolation(db: str | None, work: Path, big: Any, rounds: int, seed: int) -> None:
    """A 1,000-turn namespace's p50 alone and beside the big one."""
    small = generate(1_000, 100, seed=seed + 1, one_namespace=True)
    for d in small.documents:
        d["namespace"] = "small"
    for q in small.questions:
        q.namespace = "small"
    remember(big, small.documents)
    alone, done = open_store(db, work, "alone")
    try:
        remember(alone, small.documents)
        a = latency(lambda q: memors_hits(alone, q), small.questions, rounds)
        b = latency(lambda q: memors_hits(big, q), small.questions, rounds)
    finally:
        done()
    report(
        "isolation: 1k namespace p50, beside / alone",
        f"{statistics.median(b):.2f} ms",
        f"alone {statistics.median(a):.2f} ms",
        f"same within noise ({statistics.median(b) / statistics.median(a):.2f}x)",
    )


def mcp_runs(
    memory: Any, questions: list[Question], modes: tuple[str, ...]
) -> dict[str, list[tuple[Question, list[str], float]]]:
    """Every question through the MCP ``search`` tool in each mode: per
    mode, ``(question, hit addresses, milliseconds)``."""
    import anyio
    from mcp import Client

    from memors_mcp.server import build_server

    async def ask() -> dict[str, list[tuple[Question, list[str], float]]]:
        out: dict[str, list[tuple[Question, list[str], float]]] = {}
        async with Client(build_server(memory)) as client:
            for mode in modes:
                runs = out.setdefault(mode, [])
                for q in questions:
                    args = {"query": q.text, "namespace": q.namespace, "limit": 10, "mode": mode}
                    start = time.perf_counter()
                    got = await client.call_tool("search", args)
                    took = (time.perf_counter() - start) * 1000
                    body = got.structured_content or {}
                    if got.is_error or body.get("mode") != mode:
                        raise SystemExit(f"search in {mode} mode failed: {got.content}")
                    runs.append((q, [h["address"] for h in body["results"]], took))
        return out

    return anyio.run(ask)


def by_category(
    runs: list[tuple[Question, list[str], float]], uris: dict[str, str], at: int
) -> dict[str, float]:
    """Mean recall@``at`` per question category, and ``all``."""
    got: dict[str, list[float]] = {}
    for q, hits, _ in runs:
        r = recall(hits[:at], uris, q.evidence)
        got.setdefault(q.category, []).append(r)
        got.setdefault("all", []).append(r)
    return {c: statistics.mean(v) for c, v in sorted(got.items())}


def conversation_rows(
    label: str, memory: Any, questions: list[Question], variants: tuple[str, ...] = ()
) -> None:
    """One store's recall and MCP latency rows, per mode (and hybrid in
    each of ``variants``: ``W:S``, the words' weight and the named
    entities' passages' share of the rest)."""
    from memors_core.domain import search as rank

    probe = memory.search("x", namespace=questions[0].namespace, mode="hybrid")
    modes: tuple[str, ...] = ("lexical", "semantic", "hybrid")
    if probe.mode != "hybrid":
        modes, variants = ("lexical",), ()
    runs = mcp_runs(memory, questions, modes)
    chosen = rank.hybrid_weights
    try:
        for variant in variants:
            words, share = (float(x) for x in variant.split(":"))

            def weights(named: bool, w: float = words, s: float = share) -> tuple:
                meaning = 1.0 - w
                return (w, meaning * (1 - s), meaning * s) if named else (w, meaning, 0.0)

            rank.hybrid_weights = weights
            runs[f"hybrid {variant}"] = mcp_runs(memory, questions, ("hybrid",))["hybrid"]
    finally:
        rank.hybrid_weights = chosen
    modes = (*modes, *(f"hybrid {v}" for v in variants))
    uris = uris_of(memory)
    at10 = {m: by_category(runs[m], uris, 10) for m in modes}
    at5 = {m: by_category(runs[m], uris, 5) for m in modes}
    lex = at10["lexical"]
    kinds = {q.category for q in questions}
    for category in [c for c in lex if c == "all" or len(kinds) > 1]:
        n = sum(1 for q in questions if category in ("all", q.category))
        for m in modes:
            below = m.startswith("hybrid") and at10[m][category] < lex[category]
            report(
                f"{label} {category} ({n}): R@10 {m}",
                f"{at10[m][category]:.3f}",
                f"R@5 {at5[m][category]:.3f}"
                + ("" if m == "lexical" else f", lexical {lex[category]:.3f}"),
                "BELOW LEXICAL" if below else "",
            )
    for m in modes:
        times = [t for _, _, t in runs[m]]
        report(
            f"{label} MCP search p50 / p95, {m}",
            f"{statistics.median(times):.1f} ms",
            f"p95 {p(times, 95):.1f} ms",
        )


def rrf(rankings: list[list[Any]], k: int) -> list[str]:
    """Plain reciprocal-rank fusion of hit lists, constant ``k``."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for n, hit in enumerate(ranking, 1):
            scores[hit.address] = scores.get(hit.address, 0.0) + 1.0 / (k + n)
    return sorted(scores, key=lambda a: -scores[a])


def lever_rows(label: str, memory: Any, questions: list[Question]) -> None:
    """Each fusion lever alone, through the library (recall@10 overall and
    on the questions that name someone other than the speaker): the
    vector side over every passage or the named entities' only, RRF's k,
    rescaled scores with equal or word-leaning weights."""
    from memors_core.domain import search as rank
    from memors_core.engine.vectors import embed_question

    uris = uris_of(memory)
    depth = rank.fusion_depth(10)
    variants: dict[str, Callable[[Any, list, list, list], list[str]]] = {
        "vectors, every passage": lambda q, lex, near, named: [h.address for h in near],
        "vectors, named entities' only": lambda q, lex, near, named: [
            h.address for h in (named if q.entities else near)
        ],
        "RRF 60, named's vectors (before)": lambda q, lex, near, named: rrf(
            [lex, named if q.entities else near], 60
        ),
        "RRF 60, every passage's vectors": lambda q, lex, near, named: rrf([lex, near], 60),
        "RRF 5, every passage's vectors": lambda q, lex, near, named: rrf([lex, near], 5),
        "rescaled, 0.5 words / 0.5 all": lambda q, lex, near, named: [
            h.address for h in rank.fuse((0.5, lex), (0.5, near))
        ],
        "rescaled, 0.7 words / 0.3 all": lambda q, lex, near, named: [
            h.address for h in rank.fuse((0.7, lex), (0.3, near))
        ],
        "words alone, no neighbours (before)": lambda q, lex, near, named: [h.address for h in lex],
        "hybrid, no neighbours (before)": lambda q, lex, near, named: [
            h.address
            for h in rank.fuse(
                *zip(rank.hybrid_weights(bool(q.entities)), (lex, near, named), strict=True)
            )
        ],
    }
    got: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for question in questions:
        vector = embed_question(question.text)
        with memory.store.read() as tx:
            wanted = rank.with_entities(
                rank.text.words(question.text),
                lambda names, ns=question.namespace: tx.entities.named(ns, names),
            )
            lex = tx.search.passages(question.namespace, wanted, depth).rows if wanted else []
            near = tx.search.passages_like(question.namespace, vector, depth).rows
            named = (
                tx.search.passages_like(question.namespace, vector, depth, wanted.entities).rows
                if wanted.entities
                else []
            )
        near = [h for h in near if h.score >= rank.MIN_COSINE]
        named = [h for h in named if h.score >= rank.MIN_COSINE]
        for name, ranked in variants.items():
            r = recall(ranked(wanted, lex, near, named)[:10], uris, question.evidence)
            got[name].setdefault("all", []).append(r)
            got[name].setdefault(question.category, []).append(r)
    for name, by in got.items():
        adversarial = [v for c, v in by.items() if c.endswith("adversarial")]
        report(
            f"{label} lever: {name}",
            f"{statistics.mean(by['all']):.3f}",
            f"adversarial {statistics.mean(adversarial[0]):.3f}" if adversarial else "",
        )


def locomo_main(args: argparse.Namespace) -> None:
    """The ``--locomo`` run: each shape of the public file, then the
    generated corpus of about its size, through MCP."""
    from benchmarks.conversations import locomo

    work = Path(tempfile.mkdtemp(prefix="memors-locomo-"))
    shapes = [s for s in args.shapes.split(",") if s]
    for shape in shapes:
        corpus, skipped = locomo(args.locomo, shape)
        print(
            f"\nLoCoMo, turns remembered as '{shape}': {len(corpus.documents)} turns, "
            f"{len(corpus.questions)} questions ({skipped} without a turn as evidence, left out)"
        )
        print(f"{'figure':<46} {'value':>10}  {'reference':<28} target")
        memory, done = open_store(args.db, work, f"locomo-{shape}")
        try:
            t = remember(memory, corpus.documents)
            report("remember (all turns)", f"{t:.1f} s", f"{len(corpus.documents) / t:.0f} turns/s")
            conversation_rows(shape, memory, corpus.questions, args.hybrid_variants)
            if (
                args.levers
                and memory.search("x", namespace=corpus.questions[0].namespace).mode == "hybrid"
            ):
                lever_rows(shape, memory, corpus.questions)
        finally:
            done()
    if args.skip_generated:
        return
    size = len(locomo(args.locomo, shapes[0] if shapes else "entity")[0].documents)
    corpus = generate(size, min(500, size // 4), seed=args.seed, per_conversation=600)
    print(
        f"\nGenerated conversations: {len(corpus.documents)} turns, {len(corpus.questions)} questions"
    )
    print(f"{'figure':<46} {'value':>10}  {'reference':<28} target")
    memory, done = open_store(args.db, work, "generated")
    try:
        remember(memory, corpus.documents)
        conversation_rows("generated", memory, corpus.questions)
    finally:
        done()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000, help="turns (default 20000)")
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the questions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--db",
        help="'postgresql' for a fresh database on the local PostgreSQL server, 'pgvector' "
        "for one on a PostgreSQL with pgvector started for the run (default SQLite)",
    )
    parser.add_argument("--documents", help="a JSONL corpus's documents (with --questions-file)")
    parser.add_argument("--questions-file", dest="questions_file", help="its questions (JSONL)")
    parser.add_argument("--skip-isolation", action="store_true")
    parser.add_argument(
        "--locomo",
        metavar="PATH",
        help="the public LoCoMo file (data/locomo10.json of snap-research/LoCoMo) or a "
        "subset in its format: measure it through MCP search",
    )
    parser.add_argument(
        "--shapes",
        default="entity,prefix",
        help="with --locomo: how turns are remembered, comma-separated among entity, prefix, "
        "prefix+entity, bare (default entity,prefix)",
    )
    parser.add_argument(
        "--levers",
        action="store_true",
        help="with --locomo: also each fusion lever alone (recall@10, through the library)",
    )
    parser.add_argument(
        "--hybrid-variants",
        type=lambda v: tuple(x for x in v.split(",") if x),
        default=(),
        metavar="W:S,…",
        help="with --locomo: also hybrid with the words' weight W and the named entities' "
        "passages' share S of the rest (chosen: memors_core.domain.search.hybrid_weights), "
        "through MCP",
    )
    parser.add_argument(
        "--skip-generated",
        action="store_true",
        help="with --locomo: leave out the generated corpus's rows",
    )
    parser.add_argument(
        "--no-vectors",
        action="store_true",
        help="make no vectors (MEMORS_VECTORS=off): the lexical rows only",
    )
    parser.add_argument(
        "--one-namespace",
        action="store_true",
        help="every conversation in one namespace (the latency targets' store)",
    )
    args = parser.parse_args()
    import os

    import benchmarks

    if args.no_vectors:
        os.environ["MEMORS_VECTORS"] = "off"
    elif benchmarks.VECTORS_DEFAULTED:
        os.environ["MEMORS_VECTORS"] = "on"  # (the package turned it off for the others)
    if bool(args.documents) != bool(args.questions_file):
        parser.error("--documents and --questions-file go together")
    if args.db is not None and not args.db.startswith(("postgres", "pgvector")):
        parser.error("--db takes 'postgresql' or 'pgvector'")
    if args.db is not None:
        if args.db == "pgvector":
            from memors_core.testing import pgvector as postgres
        else:
            from memors_core.testing import postgres

        why = postgres.available()
        if why is not None:
            sys.exit(f"retrieval: {why}")
    if args.locomo:
        locomo_main(args)
        return
    if args.documents:
        corpus = load_jsonl(args.documents, args.questions_file)
    else:
        corpus = generate(
            args.size, args.questions, seed=args.seed, one_namespace=args.one_namespace
        )
    engine = "PostgreSQL" if args.db else "SQLite"
    print(
        f"retrieval on {engine}: {len(corpus.documents)} documents, "
        f"{len(corpus.questions)} questions, python {sys.version.split()[0]}\n"
    )
    print(f"{'figure':<46} {'value':>10}  {'reference':<28} target")
    work = Path(tempfile.mkdtemp(prefix="memors-retrieval-"))
    memory, done = open_store(args.db, work, "memors")
    try:
        t = remember(memory, corpus.documents)
        report("remember (all documents)", f"{t:.1f} s", f"{len(corpus.documents) / t:.0f} docs/s")
        uris = uris_of(memory)
        qs = corpus.questions
        bare = bare_fts(work / "bare.db", memory)
        r_bare = statistics.mean(recall(bare(q), uris, q.evidence) for q in qs)
        r_words = statistics.mean(recall(words_only_hits(memory, q), uris, q.evidence) for q in qs)
        r_full = statistics.mean(recall(memors_hits(memory, q), uris, q.evidence) for q in qs)
        report(
            "recall@10, bare FTS5 (store-wide BM25)", f"{r_bare:.3f}", "(what memors did before)"
        )
        report("recall@10, memors BM25, words only", f"{r_words:.3f}", f"bare {r_bare:.3f}")
        report(
            "recall@10, memors search (entity-aware)",
            f"{r_full:.3f}",
            f"words only {r_words:.3f}",
            ">= 0.63 on the public benchmark",
        )
        probe = memory.search("x", namespace=qs[0].namespace, mode="hybrid")
        vectors = not args.no_vectors and probe.mode == "hybrid"
        if vectors:
            r_sem = statistics.mean(
                recall(memors_hits(memory, q, "semantic"), uris, q.evidence) for q in qs
            )
            r_hyb = statistics.mean(
                recall(memors_hits(memory, q, "hybrid"), uris, q.evidence) for q in qs
            )
            r_plain = statistics.mean(
                recall(restricted_hybrid_hits(memory, q), uris, q.evidence) for q in qs
            )
            report("recall@10, semantic (vectors alone)", f"{r_sem:.3f}", f"lexical {r_full:.3f}")
            report(
                "recall@10, hybrid (memors search, default)",
                f"{r_hyb:.3f}",
                f"lexical {r_full:.3f}",
                ">= 0.70 on the public benchmark",
            )
            report(
                "recall@10, hybrid before (RRF, named's vectors)",
                f"{r_plain:.3f}",
                f"memors hybrid {r_hyb:.3f}",
                "(the design before)",
            )
            other = [q for q in qs if q.paraphrased]
            if other:
                r_lex_o = statistics.mean(
                    recall(memors_hits(memory, q), uris, q.evidence) for q in other
                )
                r_hyb_o = statistics.mean(
                    recall(memors_hits(memory, q, "hybrid"), uris, q.evidence) for q in other
                )
                report(
                    f"recall@10 asked in other words ({len(other)}), hybrid",
                    f"{r_hyb_o:.3f}",
                    f"lexical {r_lex_o:.3f}",
                )
            if not args.db:
                depth = 50
                kept = code_pass_recall(memory, qs[:100], depth)
                report(
                    f"vector top {depth}: exact neighbours the code pass keeps",
                    f"{kept:.3f}",
                    "every vector compared: 1.000",
                )
        mid = [q for q in qs if 5 <= q.words <= 12] or qs
        times = latency(lambda q: memors_hits(memory, q), mid, args.rounds)
        bare_times = latency(bare, mid, args.rounds)
        report(
            f"search p50, 5-12 words ({len(mid)} questions)",
            f"{statistics.median(times):.2f} ms",
            f"bare FTS5 {statistics.median(bare_times):.2f} ms",
            "<= 15 ms at 300k",
        )
        report(
            "search p95, 5-12 words",
            f"{p(times, 95):.2f} ms",
            f"bare FTS5 {p(bare_times, 95):.2f} ms",
            "<= 60 ms at 300k",
        )
        if vectors:
            hyb = latency(lambda q: memors_hits(memory, q, "hybrid"), mid, args.rounds)
            embed = latency(lambda q: embed_only(q), mid, args.rounds)
            report(
                "hybrid search p50, 5-12 words",
                f"{statistics.median(hyb):.2f} ms",
                f"lexical {statistics.median(times):.2f} ms",
                "<= 50 ms at 100k",
            )
            report(
                "hybrid search p95, 5-12 words",
                f"{p(hyb, 95):.2f} ms",
                f"embedding the question p50 {statistics.median(embed):.2f} ms",
            )
        if not args.skip_isolation and not args.documents:
            isolation(args.db, work, memory, args.rounds, args.seed)
    finally:
        done()


if __name__ == "__main__":
    main()
