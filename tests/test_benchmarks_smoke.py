"""A small run of the benchmark harness: every figure is printed beside its reference.

The real runs (`make bench`, `make bench-quick`) are not part of the test
suite; this proves the harness itself works and stays exact.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine_independent("each benchmark picks its engines itself")

ROOT = Path(__file__).resolve().parent.parent


def _bench(*argv: str, env: dict[str, str] | None = None, timeout: float = 300):
    """Run ``python -m ARGV…`` from the checkout's root; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.sqlite_only("benchmarks.run measures the SQLite engine (the next test runs both)")
def test_bench_harness_prints_every_figure(tmp_path):
    proc = _bench("benchmarks.run", "--size", "1500", "--skip-minhash", "--skip-mcp", "--reference")
    out = proc.stdout
    for figure in (
        "remember (documents -> passages, FTS, shingles)",
        "linear pass: tokenise + shingle + hash",
        "duplicate scan, full, from the store",
        "compact after a 1% change (incremental)",
        "search p50 (2 words, limit 10)",
        "submit page, 50 sources + 20 facts, p50",
        "peak RSS (this process)",
        "remember 1 MB, one paragraph of `word word ...`",
        "first compact --kinds duplicate, 3000 look-alike passages of one document",
    ):
        assert figure in out, figure
    # The exact scan agrees with an independent inverted-index join, and an
    # incremental compact leaves exactly what a full rescan finds.
    ref = next(line for line in out.splitlines() if line.startswith("independent exact"))
    assert ref.split()[-1] == "same", ref
    again = next(line for line in out.splitlines() if line.startswith("compact --full afterwards"))
    assert "incremental vs a full rescan" in out
    # rounds of 1% changes run until the recent prefix index is folded
    assert "the round that folded the recent index" in out
    assert "same" in again and "0 created" in again, again


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_engines_harness_prints_every_figure(engine):
    if engine == "postgres":
        from memors_core.testing.postgres import require_server

        require_server()
    proc = _bench(
        "benchmarks.engines",
        *("--size", "1000", "--engines", engine, "--skip-mcp", "--web-requests", "2"),
        *("--mixed-seconds", "1", "--lexical-size", "600"),
    )
    out = proc.stdout
    for figure in (
        f"{engine}: remember 1000 passages",
        f"{engine}: compact, full (every kind)",
        f"{engine}: compact after the 1% (incremental)",
        f"{engine}: search p50 / p95 (2 words, limit 10)",
        f"{engine}: search p50 / p95 (8 words, limit 10)",
        f"{engine}: store size",
        f"{engine}: web namespace home, p50 / p95",
        f"{engine}: web page citing 50 passages, p50 / p95",
        f"{engine}: remember it all again, each edited",
        f"{engine}: 8 processes, mixed, one namespace",
        f"{engine}: 8 processes, mixed, one namespace of 1,000 passages",
        f"{engine}: lexical search p50 / p95",
        "remember, passages/s",
    ):
        assert figure in out, figure
    # the corpus loaded again, edited: each of its documents a new version
    again = next(line for line in out.splitlines() if "remember it all again" in line)
    documents = int(again.split(" new versions")[0].split()[-1])
    assert documents > 50, again
    # the same generated questions find passages on either engine
    hits = [line for line in out.splitlines() if "hits/query" in line]
    assert len(hits) == 2 and all(" 0.0 hits" not in line for line in hits), hits


def test_engines_harness_sets_postgres_beside_sqlite_with_the_target():
    from memors_core.testing.postgres import require_server

    require_server()
    proc = _bench("benchmarks.engines", "--size", "500", "--remember-only")
    out = proc.stdout
    assert "sqlite: remember 500 passages" in out and "postgres: remember 500 passages" in out
    assert "compact, full" not in out  # the loads only
    ratio = next(line for line in out.splitlines() if line.startswith("remember  "))
    assert "x  <= 1.5x: " in ratio, ratio
    assert any(line.startswith("store size") for line in out.splitlines()), out


@pytest.mark.sqlite_only("a store file that does not exist")
def test_metrics_never_creates_a_store(cli):
    missing = cli.tmp / "absent" / "memors.db"
    r = cli("metrics", "--db", str(missing))
    assert r.code == 0, r
    assert "memors_store_pages_marked_stale_total 0.0" in r.out
    assert not missing.exists() and not missing.parent.exists()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_grounding_benchmark_prints_every_figure(engine):
    """benchmarks/grounding.py at four entities (one of each type): every
    corruption class and faithful page kind is measured and printed beside
    its target, the CLI gives the service call's verdict, and a verbatim
    page with its markers is never flagged."""
    extra, drop = [], None
    if engine == "postgres":
        from memors_core.testing import postgres

        postgres.require_server()
        url = postgres.new_database()
        extra, drop = ["--db", url], lambda: postgres.drop_database(url)
    argv = ["benchmarks.grounding", "--entities", "4", "--timing", "1"]
    argv += ["--repeat", "1", "--cli", "1", *extra]
    try:
        text = _bench(*argv)
        proc = _bench(*argv, "--json")
    finally:
        if drop:
            drop()
    fig = json.loads(proc.stdout)
    out = text.stdout
    assert fig["engine"] == ("postgresql" if engine == "postgres" else "sqlite")
    for cls, target in (("number", ">= 95%"), ("date", ">= 95%"), ("roles swapped", "-")):
        line = next(line for line in out.splitlines() if line.startswith(cls + " "))
        assert target in line, line
    for cls, v in fig["corrupted"].items():
        assert v["n"] > 0, cls
        assert f"\n{cls} " in out
    for kind, v in fig["faithful"].items():
        assert v["pages"] == 4, kind
        assert f"\n{kind} " in out
    assert fig["faithful"]["verbatim, cited"]["flagged"] == 0
    for kind, v in fig["timing"].items():
        assert v["sentences"] == [25, 25] and v["sources"] == 50, (kind, v)
        assert f"25 sentences, 50 sources: {kind}" in out
    assert fig["cli"]["runs"] == 1 and fig["cli"]["same_verdict"] == 1, fig["cli"]
    assert "memors-mcp submit --dry-run" in out


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_retrieval_benchmark_prints_every_figure(engine, tmp_path):
    """benchmarks/retrieval.py on a small generated corpus, and on a JSONL
    corpus of its own: every row is printed beside its reference, and
    entity-aware search finds more of the evidence than words alone."""
    extra = []
    if engine == "postgres":
        from memors_core.testing import postgres

        postgres.require_server()
        extra = ["--db", "postgresql"]
    argv = ["benchmarks.retrieval", "--size", "1500", "--questions", "60"]
    proc = _bench(*argv, "--rounds", "1", *extra, timeout=600)
    out = proc.stdout
    rows = {}
    for line in out.splitlines():
        for figure in (
            "recall@10, bare FTS5",
            "recall@10, memors BM25, words only",
            "recall@10, memors search (entity-aware)",
            "search p50, 5-12 words",
            "search p95, 5-12 words",
            "isolation: 1k namespace p50",
        ):
            if line.startswith(figure):
                rows[figure] = line
    assert len(rows) == 6, out
    recall = {k: float(v[46:].split()[0]) for k, v in rows.items() if k.startswith("recall")}
    assert (
        recall["recall@10, memors search (entity-aware)"]
        > recall["recall@10, memors BM25, words only"]
    ), out
    # The same harness on any corpus given as JSONL.
    docs, questions = tmp_path / "docs.jsonl", tmp_path / "questions.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps({"text": t, "uri": u, "entities": [e]})
            for t, u, e in (
                ("I adopted a puppy last week.", "t1", "Ann"),
                ("Great, Ann! I adopted a puppy once.", "t2", "Bob"),
                ("Bob bought a used guitar.", "t3", "Bob"),
            )
        )
    )
    questions.write_text(
        json.dumps({"question": "When did Ann adopt a puppy?", "evidence": ["t1"]})
    )
    proc = _bench(*argv, "--documents", str(docs), "--questions-file", str(questions), *extra)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("recall@10, memors search"))
    assert float(line[46:].split()[0]) == 1.0, proc.stdout


def test_retrieval_benchmark_reads_the_public_conversation_format(tmp_path):
    """benchmarks/retrieval.py --locomo on a tiny file in LoCoMo's format
    (written here, not the public data): every turn remembered, every
    question asked through MCP search, recall per category by number and
    name, the MCP latency, and the questions whose evidence names no turn
    counted and left out."""
    sample = {
        "sample_id": "chat-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1_date_time": "10:00 am on 2 March, 2024",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Biscuit."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I bought a used guitar."},
            ],
            "session_2_date_time": "4:00 pm on 9 March, 2024",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Biscuit chewed my new shoes."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "The guitar needs new strings."},
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Ben buy?", "evidence": ["D:1:2"], "category": 1},
            {"question": "What did Biscuit chew?", "evidence": ["D2:1; D1:1"], "category": 2},
            {"question": "Where is the lake?", "evidence": [], "category": 5},
        ],
    }
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([sample]))
    proc = _bench(
        "benchmarks.retrieval", "--locomo", str(path), "--shapes", "entity,prefix",
        "--no-vectors", "--skip-generated",
    )  # fmt: skip
    out = proc.stdout
    assert out.count("4 turns, 3 questions (1 without a turn as evidence, left out)") == 2, out
    for shape in ("entity", "prefix"):
        for category in ("1 multi-hop (1)", "2 temporal (1)", "4 single-hop (1)", "all (3)"):
            assert f"{shape} {category}: R@10 lexical" in out, out
        assert f"{shape} MCP search p50 / p95, lexical" in out
    row = next(x for x in out.splitlines() if x.startswith("entity all (3): R@10 lexical"))
    assert float(row[46:].split()[0]) > 0.5, out


def test_real_turns_benchmark_sets_each_engine_beside_sqlite(tmp_path):
    """benchmarks/real_turns.py on a tiny file in LoCoMo's format (written
    here): every turn remembered, a compaction every two, every question
    searched, each step's p50 per engine with PostgreSQL's ratio to SQLite."""
    turns = [
        {"speaker": "Ann", "dia_id": f"D1:{n}", "text": f"I walked Biscuit the puppy on day {n}."}
        for n in range(1, 7)
    ]
    sample = {
        "sample_id": "chat-1",
        "conversation": {"session_1_date_time": "2 March, 2024", "session_1": turns},
        "qa": [{"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"]}],
    }
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([sample]))
    out = _bench(
        "benchmarks.real_turns", "--locomo", str(path), "--every", "2", "--copies", "3"
    ).stdout
    assert "6 real turns remembered one at a time, a compaction every 2, 1 questions" in out, out
    for step in ("remember", "compact", "search", "bulk, 18 turns"):
        row = next(x for x in out.splitlines() if x.startswith(step))
        assert float(row[24:].split()[0]) > 0, out
        if "postgres: skipped" not in out:
            assert re.search(r"postgres \d+\.\d\dx$", row), out


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_web_benchmark_prints_every_figure(engine):
    """benchmarks/web.py --quick: a store with a page citing 50 passages, an
    entity with its own passages and an open queue of every built-in kind is
    built, and each view's p50 and p95 are printed beside the static-file
    reference and the 300 ms target."""
    extra = []
    if engine == "postgres":
        from memors_core.testing import postgres

        postgres.require_server()
        extra = ["--db", "postgresql"]
    proc = _bench("benchmarks.web", "--quick", *extra)
    lines = proc.stdout.splitlines()

    def row(prefix: str) -> str:
        found = [line for line in lines if line.startswith(prefix)]
        assert len(found) == 1, (prefix, proc.stdout)
        return found[0]

    assert "build: remember 2,150 passages" in row("build: remember")
    compact = row("build: compact --full (every kind)")
    for kind in ("conflict 40", "duplicate", "page"):
        assert kind in compact, compact
    assert "50 sentences" in row("build: submit a page citing 50 passages")
    for view in (
        "page view, 50 cited passages",
        "queue view,",
        "entity view, 100 passages",
        "entity view, its last 50 passages",
        "namespace home (metrics, entities)",
        "search page, 2 words",
    ):
        for q in ("p50", "p95"):
            line = next((x for x in lines if x.startswith(view) and f" {q} " in x), None)
            assert line is not None, (view, q, proc.stdout)
            assert re.search(r" \d+\.\d ms ", line) and line.endswith("< 300 ms"), line
            if q == "p50":
                assert "static file p50" in line, line
            else:
                assert "KiB of HTML" in line, line


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_large_forget_benchmark_prints_every_figure(engine):
    """benchmarks/large_forget.py on a document of 0.1 MB: remember, forget
    and purge are timed beside the 10 s target (on PostgreSQL as a
    superuser, the tables' owner and an application role)."""
    if engine == "postgres":
        from memors_core.testing import postgres

        postgres.require_server()
    proc = _bench("benchmarks.large_forget", "--mb", "0.1", "--engines", engine)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("one document of 0.1 MB"), proc.stdout
    who = ["sqlite"] if engine == "sqlite" else ["postgres, superuser", "postgres, owner"]
    if engine == "postgres":
        who.append("postgres, app role")
    for label in who:
        for step in ("remember", "forget", "purge"):
            found = [x for x in lines if x.startswith(f"{label}: {step}")]
            assert len(found) == 1, (label, step, proc.stdout)
            assert re.search(r" \d+\.\d\d s ", found[0]), found[0]
            if step != "remember":
                assert found[0].endswith("<= 10 s"), found[0]


@pytest.mark.semantic
@pytest.mark.sqlite_only("the embedding benchmark runs the model, no store")
def test_embedding_benchmark_prints_each_configuration_beside_the_bare_model(tmp_path):
    proc = _bench(
        "benchmarks.embedding", "--limit", "3", "--rounds", "1", "--only", "idle",
        "--locomo", str(tmp_path / "absent.json"), timeout=600,
    )  # fmt: skip
    out = proc.stdout
    assert "idle, prose: 3 texts" in out and "generated turns (no LoCoMo file)" in out
    for row in (
        "memors (default threads, no spinning)",
        "memors, 1 thread",
        "memors, 2 threads",
        "memors, spinning",
        "bare onnxruntime (reference)",
        "bare onnxruntime, 1 thread",
    ):
        assert out.count(row) == 2, row  # prose and turns
    assert re.search(r"x of bare\s+target >= 0\.8x", out), out


@pytest.mark.semantic
@pytest.mark.sqlite_only("the vector-step benchmark runs both engines itself")
def test_vector_index_benchmark_prints_each_engine_s_step(tmp_path):
    from memors_core.testing import pgvector

    proc = _bench(
        "benchmarks.vector_index", "--size", "300", "--questions", "5",
        "--breadths", "40,80", "--builds", "16:64",
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)}, timeout=600,
    )  # fmt: skip
    out = proc.stdout
    assert "vector step: 300 vectors in one namespace, 5 questions" in out
    assert re.search(r"SQLite code pass: of the exact nearest 50, kept\s+1\.000", out), out
    if pgvector.available() is None:
        for row in ("exact scan (before)", "HNSW index build", "HNSW (search now)"):
            assert f"PostgreSQL {row}" in out, out
        # a namespace of 300 vectors is scanned exactly: all of the exact ranking
        assert re.search(r"PostgreSQL HNSW: of the exact nearest 50, kept\s+1\.000", out), out
        for graph in ("m 24, ef_construction 128", "m 16, ef_construction 64"):
            for walk in (40, 80):
                assert f"HNSW {graph}, ef_search {walk}: p50" in out, out
        assert "HNSW m 16, ef_construction 64: build" in out, out


@pytest.mark.semantic
@pytest.mark.sqlite_only("the hybrid benchmark runs both engines itself")
def test_hybrid_benchmark_prints_each_engine_s_search(tmp_path):
    from memors_core.testing import pgvector

    proc = _bench(
        "benchmarks.hybrid_search", "--size", "300", "--questions", "20", "--rounds", "1",
        "--breadths", "8", env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)}, timeout=900,
    )  # fmt: skip
    out = proc.stdout
    assert "hybrid search: 300 turns in one namespace" in out, out
    engines = ["SQLite"] + (["PostgreSQL"] if pgvector.available() is None else [])
    for engine in engines:
        for row in ("recall@10, hybrid", "hybrid p50 / p95", "MCP search (hybrid) p50 / p95"):
            assert f"{engine}: {row}" in out, out
    if pgvector.available() is None:
        assert "PostgreSQL: HNSW index build" in out, out
        assert "PostgreSQL, walk 8 x: hybrid p50 / p95" in out, out
        assert "PostgreSQL, exact step: hybrid p50 / p95" in out, out


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_queue_benchmark_works_the_whole_queue_to_a_clean_lint(engine):
    """benchmarks/queue.py --quick: a scripted agent works every item of a
    real corpus through MCP (pages, then merges, conflicts, duplicates and
    the stale pages they leave); every item ends settled, lint is clean, no
    answer exceeds the cap and each duplicate cluster took one round."""
    if not Path("/usr/share/common-licenses/GPL-2").exists():
        pytest.skip("the quick corpus is Debian's /usr/share/common-licenses and copyright files")
    extra, drop = [], None
    if engine == "postgres":
        from memors_core.testing import postgres

        postgres.require_server()
        url = postgres.new_database()
        extra, drop = ["--db", url], lambda: postgres.drop_database(url)
    try:
        proc = _bench("benchmarks.queue", "--quick", *extra, timeout=600)
    finally:
        if drop:
            drop()
    out = proc.stdout
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    for figure in ("items settled", "final lint", "largest answer", "duplicate rounds"):
        assert lines[figure].endswith(" met"), lines[figure]
    assert "0 open, 0 given up" in lines["items settled"]
    assert "0 finding(s)" in lines["final lint"]
    rounds = json.loads(lines["rounds per kind"].split(None, 3)[3])
    # every kind came up, and the decisions made pages stale that were refreshed
    assert set(rounds) == {"page", "stale", "merge", "conflict", "duplicate"}, rounds
    dup = re.search(r"(\d+) for (\d+) cluster", lines["duplicate rounds"])
    assert dup and dup.group(1) == dup.group(2) and int(dup.group(2)) > 0, dup
    size = re.search(r"([\d,]+) B \(\w+\)\s+<= ([\d,]+) B", lines["largest answer"])
    assert size and int(size[1].replace(",", "")) <= int(size[2].replace(",", ""))
    assert out.rstrip().endswith("targets: all met")
