"""Both engines side by side: the same corpus, the same steps, one run.

    python -m benchmarks.engines --size 100000                      # both engines
    python -m benchmarks.engines --size 1000000 --engines postgres --skip-mcp --vacuum-analyze
    python -m benchmarks.engines --size 100000 --remember-only      # the loads only
    python -m benchmarks.engines --size 5000 --lexical-size 5000 --mixed-seconds 3  # a quick look

For each engine (SQLite in a temporary file; PostgreSQL in a fresh
database from :func:`memors_core.testing.postgres.new_database`, dropped
at the end) this remembers a generated corpus (``benchmarks.corpus``),
compacts it in full, remembers 1% more passages and compacts again
(incremental), times 2-word and 8-word searches (the same questions on
both engines), times an MCP tool call through a real stdio server against
a bare SDK no-op tool and against the library call, reads the store's
size, and times the web views issue 32 sets targets on (the namespace
home, a page citing 50 passages: :func:`web_figures` adds them to the
store) through the real server, and last remembers the whole corpus
again with a line added to each document (every document a new version:
a changed copy synced again). Then, on fresh stores, the 8-process
mixed load of ``benchmarks/writers.py`` (``--mixed-seconds``: in one
namespace and in eight, each empty at the start; then in one namespace
already holding ``--mixed-size`` passages of the same notes, by default
``--size``, as every other row is measured at that size) and lexical
search over ``--lexical-size`` conversation turns in one namespace, as
``benchmarks/retrieval.py`` measures it. Each step runs in a process of its own (``--step``), started
fresh, so the peak RSS printed beside it is that memors process's own and
not this driver's; the corpus streams from a JSONL file, so its size does
not count either. The load average is printed beside each step, since
the figures of a shared machine depend on it. A table of both engines
ends the run, then PostgreSQL's figures over SQLite's with issue 32's
target beside those that have one, then every row of issue 32's table,
both engines side by side with the ratio and the target (hybrid search
prints "not measured: needs pgvector": ``benchmarks/hybrid_search.py``
measures it on a PostgreSQL with pgvector of its own). ``--vacuum-analyze`` runs
PostgreSQL's ``VACUUM (ANALYZE)`` after each load, as autovacuum would on
a server where it is on (see :func:`vacuum_analyze`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate
from benchmarks.run import peak_rss_mib, report, timed

ENGINES = ("sqlite", "postgres")


def load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def stream(path: Path) -> Iterator[dict[str, Any]]:
    """The documents of a JSONL file, one at a time."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def questions(seed: int, words: int, count: int) -> list[str]:
    """``count`` questions of ``words`` words drawn from the corpus's first
    2,000 passages: the same on every engine for the same seed."""
    pool = [w for r in generate(2000, seed=seed) for w in r["text"].lower().split() if len(w) > 3]
    rng = random.Random(seed * 1000 + words)
    return [" ".join(rng.choice(pool) for _ in range(words)) for _ in range(count)]


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


# --- the steps, each in a process of its own -----------------------------------------------


class Ticker:
    """A long step's progress on stderr, every 30 seconds: what a run at a
    million passages has done so far, should it have to be cut short."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()

    def __call__(self, p: Any) -> None:
        now = time.perf_counter()
        if now - self.last >= 30:
            self.last = now
            took = now - self.start
            print(
                f"    ... {p.task} {p.phase}: {p.documents or p.done} {p.unit or 'documents'} "
                f"in {took:.0f} s ({load()})",
                file=sys.stderr,
                flush=True,
            )


def step(name: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one step on the store at ``url``; what it measured, as a dict."""
    from memors_core import Memory

    out: dict[str, Any] = {}
    with Memory.open(url) as memory:
        if name in ("remember", "remember-change"):
            took, done = timed(
                lambda: memory.remember_many(stream(Path(args.file)), progress=Ticker())
            )
            out.update(seconds=took, passages=done.passages, documents=done.documents)
        elif name == "compact-full":
            took, done = timed(lambda: memory.compact(limit=0, full=True, progress=Ticker()))
            out.update(seconds=took, open=done.open, created=done.created)
        elif name == "compact":
            took, done = timed(lambda: memory.compact(limit=0))
            out.update(seconds=took, open=done.open, created=done.created)
        elif name == "search":
            for words in (2, 8):
                qs = questions(args.seed, words, args.queries)
                for q in qs[:10]:  # warm up: caches, the first query plans
                    memory.search(q)
                times, hits = [], 0
                for q in qs:
                    t, found = timed(lambda q=q: memory.search(q))
                    times.append(t)
                    hits += len(found.results)
                out[f"p50_{words}"] = statistics.median(times)
                out[f"p95_{words}"] = percentile(times, 0.95)
                out[f"hits_{words}"] = hits / len(qs)
        elif name == "web":
            out.update(web_figures(memory, url, args))
        elif name == "lexical":
            out.update(lexical_figures(memory, args))
        else:
            raise SystemExit(f"unknown step {name!r}")
    out["rss_mib"] = peak_rss_mib()
    # remember's helper process (it splits and shingles the next batch)
    out["helper_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


def web_figures(memory: Any, url: str, args: argparse.Namespace) -> dict[str, float]:
    """The web views issue 32 sets targets on, over this store: what
    ``benchmarks/web.py`` builds besides its corpus is added first (200
    entities of 8 passages, 40 pairs of facts that disagree, a page citing
    50 passages, through ``submit``), then the real server answers
    ``--web-requests`` GETs of each view (after two to warm it up)."""
    import http.client

    from benchmarks import web
    from memors_core.testing.server import ServerProcess

    systems = [
        {
            "text": "\n\n".join(
                f"[[System {n}]] node {i} of system {n} holds shard {i * 7 % 31} in rack {n % 13}."
                for i in range(8)
            ),
            "uri": f"system-{n}",
        }
        for n in range(200)
    ]
    memory.remember_many(systems + web.quorum_documents())
    for n in range(40):
        memory.record_fact(f"System {n}", "owner", f"team {n}", valid_from="2020-01-01")
        memory.record_fact(f"System {n}", "owner", f"team {n + 1}", valid_from="2021-01-01")
    memory.compact(limit=0)
    page = web.submit_cited_page(memory).rsplit("/", 1)[1]
    views = {"home": "/ns/default/", "page": f"/ns/default/page/{page}"}
    out: dict[str, float] = {}
    with ServerProcess(url) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        try:
            static, _ = web.latencies(conn, "/static/memors.css", args.web_requests)
            out["static_p50"] = statistics.median(static)
            for name, path in views.items():
                times, _size = web.latencies(conn, path, args.web_requests)
                out[f"{name}_p50"] = statistics.median(times)
                out[f"{name}_p95"] = percentile(times, 0.95)
        finally:
            conn.close()
    return out  # milliseconds


def lexical_figures(memory: Any, args: argparse.Namespace) -> dict[str, float]:
    """Lexical search over ``--lexical-size`` conversation turns in one
    namespace, as ``python -m benchmarks.retrieval --one-namespace
    --no-vectors`` measures it: p50 / p95 of questions of 5-12 words."""
    from benchmarks import retrieval
    from benchmarks.conversations import generate as conversations

    corpus = conversations(args.lexical_size, 500, seed=args.seed, one_namespace=True)
    took = retrieval.remember(memory, corpus.documents)
    mid = [q for q in corpus.questions if 5 <= q.words <= 12] or corpus.questions
    times = retrieval.latency(lambda q: retrieval.memors_hits(memory, q), mid, 1)
    return {
        "remember_s": took,
        "turns": len(corpus.documents),
        "questions": len(mid),
        "p50_ms": statistics.median(times),
        "p95_ms": percentile(times, 0.95),
    }


def run_step(name: str, url: str, args: argparse.Namespace, file: Path | None = None) -> dict:
    """``step`` in a fresh interpreter; its figures, its peak RSS and the load."""
    argv = [sys.executable, "-m", "benchmarks.engines", "--step", name, "--url", url]
    argv += ["--seed", str(args.seed), "--queries", str(args.queries)]
    argv += ["--web-requests", str(args.web_requests), "--lexical-size", str(args.lexical_size)]
    if file:
        argv += ["--file", str(file)]
    # stderr passes through: a long step's progress, or why it failed
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    if proc.returncode != 0:
        sys.exit(f"step {name} failed (its error is above)")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["load"] = load()  # at the step's end: the 1-minute figure spans it
    return out


def vacuum_analyze(url: str) -> float:
    """``VACUUM (ANALYZE)`` the whole PostgreSQL store; seconds. What
    autovacuum does on a default server a while after a bulk load; the test
    server runs with it off (``conf.d/90-ci.conf``). Without statistics the
    planner takes compaction's ``json_each`` joins for walks of the
    namespace, and without a visibility map search reads the heap beside
    the postings index."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return timed(lambda: conn.execute("VACUUM (ANALYZE)"))[0]


def store_size(engine: str, url: str) -> float:
    """The store's size on disk, MiB (SQLite: the file and its WAL)."""
    if engine == "sqlite":
        return (
            sum(
                Path(url + suffix).stat().st_size
                for suffix in ("", "-wal")
                if Path(url + suffix).exists()
            )
            / 2**20
        )
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20


# --- MCP: a tool call through a real stdio server against the library call ------------------


def mcp_figures(url: str, args: argparse.Namespace) -> dict[str, float]:
    """A memors ``get`` against a bare SDK no-op tool (alternating blocks),
    then ``search`` over MCP against the same search through the library,
    the way ``benchmarks/mcp_overhead.py`` measures them, on this store."""
    from mcp import StdioServerParameters

    from benchmarks import mcp_overhead as mo

    # As mcp_overhead.py does: the client on the first core, both servers on
    # the second, so that where the scheduler puts them weighs on both alike.
    server_cpu, mine = None, None
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        mine = os.sched_getaffinity(0)
        client_cpu, server_cpu = sorted(mine)[:2]
        os.sched_setaffinity(0, {client_cpu})
    script = str(Path(mo.__file__).resolve())
    env = {**os.environ, "MEMORS_DB": url}
    memors = StdioServerParameters(
        command=sys.executable, args=mo.pinned(server_cpu, ["-m", "memors_cli", "serve"]), env=env
    )
    bare = StdioServerParameters(
        command=sys.executable, args=mo.pinned(server_cpu, [script, "--bare"]), env=env
    )
    try:
        return _mcp_calls(url, args, memors, bare)
    finally:
        if mine is not None:
            os.sched_setaffinity(0, mine)


def _mcp_calls(url: str, args: argparse.Namespace, memors: Any, bare: Any) -> dict[str, float]:
    import anyio

    from benchmarks import mcp_overhead as mo
    from memors_core import Memory

    query = {"query": questions(args.seed, 8, 1)[0], "limit": 10}
    with Memory.open(url) as memory:
        target = memory.search(questions(args.seed, 2, 1)[0], limit=1).results[0].address
    calls = args.calls
    noop, get = anyio.run(
        mo.time_calls, [(bare, "noop", {}), (memors, "get", {"address": target})], calls
    )
    (search,) = anyio.run(mo.time_calls, [(memors, "search", query)], calls)
    library = mo.time_library(url, query, calls)  # a postgresql:// address opens as well
    med = statistics.median
    return {
        "noop": med(noop),
        "get": med(get),
        "search": med(search),
        "library": med(library),
    }


# --- the run -------------------------------------------------------------------------------


def write_edited(corpus: Path, edited: Path) -> None:
    """The corpus again, a line added to each document: a changed copy of
    what the store holds (a wiki synced again), every document a new version."""
    with corpus.open(encoding="utf-8") as src, edited.open("w", encoding="utf-8") as out:
        for line in src:
            doc = json.loads(line)
            doc["text"] += "\n\nEdited once more, a line added at the end."
            out.write(json.dumps(doc) + "\n")


def engine_run(
    engine: str, args: argparse.Namespace, corpus: Path, change: Path, edited: Path | None = None
) -> dict:
    """Every step on one engine; its figures, printed as they come."""
    if engine == "postgres":
        from memors_core.testing import postgres

        why = postgres.available()
        if why:
            print(f"postgres: skipped ({why})")
            return {}
        url = postgres.new_database()
        drop = lambda: postgres.drop_database(url)  # noqa: E731
    else:
        where = tempfile.mkdtemp(prefix="memors-engines-")
        url = where + "/memors.db"
        drop = lambda: shutil.rmtree(where)  # noqa: E731
    fig: dict[str, Any] = {}
    n = args.size
    print(f"\n[{engine}] {load()}")
    try:
        r = fig["remember"] = run_step("remember", url, args, corpus)
        report(
            f"{engine}: remember {r['passages']} passages",
            f"{r['seconds']:.1f} s",
            f"{r['passages'] / r['seconds']:.0f} passages/s",
            "",
            f"RSS {r['rss_mib']:.0f} MiB (helper {r['helper_rss_mib']:.0f}); {r['load']}",
        )
        if args.vacuum_analyze and engine == "postgres":
            took = fig["analyze"] = vacuum_analyze(url)
            report(f"{engine}: VACUUM (ANALYZE) after the load", f"{took:.1f} s", "", "", load())
        if args.remember_only:
            fig["size_mib"] = store_size(engine, url)
            return fig
        r = fig["compact_full"] = run_step("compact-full", url, args)
        report(
            f"{engine}: compact, full (every kind)",
            f"{r['seconds']:.1f} s",
            f"{r['open']} items open",
            "",
            f"RSS {r['rss_mib']:.0f} MiB; {r['load']}",
        )
        r = fig["remember_change"] = run_step("remember-change", url, args, change)
        report(
            f"{engine}: remember 1% more ({r['passages']})",
            f"{r['seconds']:.2f} s",
            f"{r['passages'] / r['seconds']:.0f} passages/s",
        )
        if args.vacuum_analyze and engine == "postgres":
            fig["analyze_change"] = vacuum_analyze(url)
        r = fig["compact"] = run_step("compact", url, args)
        full = fig["compact_full"]["seconds"]
        report(
            f"{engine}: compact after the 1% (incremental)",
            f"{r['seconds']:.2f} s",
            f"full compact {full:.1f} s",
            f"{r['seconds'] / full:.1%}",
            f"<= 10%; RSS {r['rss_mib']:.0f} MiB; {r['load']}",
        )
        r = fig["search"] = run_step("search", url, args)
        for words in (2, 8):
            report(
                f"{engine}: search p50 / p95 ({words} words, limit 10)",
                f"{r[f'p50_{words}'] * 1000:.2f} ms",
                f"p95 {r[f'p95_{words}'] * 1000:.2f} ms",
                "",
                f"{r[f'hits_{words}']:.1f} hits/query; {r['load']}",
            )
        fig["size_mib"] = store_size(engine, url)
        report(
            f"{engine}: store size",
            f"{fig['size_mib']:.0f} MiB",
            f"{fig['size_mib'] * 2**20 / (n * 1.01):.0f} B/passage",
        )
        if not args.skip_mcp:
            m = fig["mcp"] = mcp_figures(url, args)
            report(
                f"{engine}: MCP get vs a bare no-op tool, p50",
                f"{m['get'] * 1000:.2f} ms",
                f"no-op {m['noop'] * 1000:.2f} ms",
                f"{m['get'] / m['noop']:.2f}x",
                "<= 1.3x",
            )
            report(
                f"{engine}: MCP search vs the library call, p50",
                f"{m['search'] * 1000:.2f} ms",
                f"library {m['library'] * 1000:.2f} ms",
                f"+{(m['search'] - m['library']) * 1000:.2f} ms",
                load(),
            )
        if not args.skip_web:
            w = fig["web"] = run_step("web", url, args)
            for view, label in (("home", "namespace home"), ("page", "page citing 50 passages")):
                report(
                    f"{engine}: web {label}, p50 / p95",
                    f"{w[f'{view}_p50']:.1f} ms",
                    f"p95 {w[f'{view}_p95']:.1f} ms",
                    "",
                    f"static file p50 {w['static_p50']:.1f} ms; {w['load']}",
                )
        if edited is not None:  # last: it makes every document a new version
            r = fig["remember_edited"] = run_step("remember", url, args, edited)
            report(
                f"{engine}: remember it all again, each edited",
                f"{r['seconds']:.1f} s",
                f"{r['documents']} new versions",
                "",
                r["load"],
            )
    finally:
        drop()
    return fig


def fresh_store(engine: str) -> tuple[str, Any]:
    """A new empty store of ``engine``: its address and what removes it."""
    if engine == "postgres":
        from memors_core.testing import postgres

        url = postgres.new_database()
        return url, lambda: postgres.drop_database(url)
    where = tempfile.mkdtemp(prefix="memors-engines-")
    return where + "/memors.db", lambda: shutil.rmtree(where)


def mixed_run(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/writers.py``'s mixed load (remember, search, every 4th
    round a fact and an incremental compact) of 8 processes for
    ``--mixed-seconds``, all in one namespace, then each in its own, on a
    fresh store seeded as that benchmark seeds it (its namespaces start
    empty); then, with ``--mixed-size``, all in one namespace holding that
    many passages of the same notes when the step starts (``sized``)."""
    from benchmarks import writers

    out: dict[str, Any] = {}
    url, drop = fresh_store(engine)
    try:
        writers.seed(url)
        for layout in ("one", "own"):
            f = out[layout] = writers.run_step(url, 8, layout, True, args.mixed_seconds)
            _mixed_report(engine, f, f"{layout} namespace{'s' if layout == 'own' else ''}")
    finally:
        drop()
    if args.mixed_size > 0:
        url, drop = fresh_store(engine)
        try:
            writers.seed(url, args.mixed_size // 2, "shared")  # (two passages a note)
            f = out["sized"] = writers.run_step(url, 8, "one", True, args.mixed_seconds)
            _mixed_report(engine, f, f"one namespace of {args.mixed_size:,} passages")
        finally:
            drop()
    return out


def _mixed_report(engine: str, f: dict[str, Any], where: str) -> None:
    report(
        f"{engine}: 8 processes, mixed, {where}",
        f"{f['ops_s']:.1f} ops/s",
        f"p95 {f['p95_ms']:.0f} ms",
        "",
        f"{len(f['errors'])} errors; {load()}",
    )


def lexical_run(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`lexical_figures` on a fresh store, in a process of its own."""
    url, drop = fresh_store(engine)
    try:
        r = run_step("lexical", url, args)
    finally:
        drop()
    report(
        f"{engine}: lexical search p50 / p95, {r['turns']} turns",
        f"{r['p50_ms']:.2f} ms",
        f"p95 {r['p95_ms']:.2f} ms",
        "",
        f"{r['questions']} questions; remember {r['remember_s']:.0f} s; {r['load']}",
    )
    return r


def table(figs: dict[str, dict]) -> None:
    """The figures of every engine that ran, one column each."""
    names = [e for e in figs if figs[e]]
    rows: list[tuple[str, ...]] = []

    def row(label: str, fn: Any) -> None:
        cells = []
        for e in names:
            try:
                cells.append(fn(figs[e]))
            except KeyError:
                cells.append("-")
        rows.append((label, *cells))

    row(
        "remember, passages/s",
        lambda f: f"{f['remember']['passages'] / f['remember']['seconds']:.0f}",
    )
    row("remember, s", lambda f: f"{f['remember']['seconds']:.1f}")
    row("remember, peak RSS MiB", lambda f: f"{f['remember']['rss_mib']:.0f}")
    row("VACUUM (ANALYZE) after the load, s", lambda f: f"{f['analyze']:.1f}")
    row("remember again, each edited, s", lambda f: f"{f['remember_edited']['seconds']:.1f}")
    row("compact full, s", lambda f: f"{f['compact_full']['seconds']:.1f}")
    row("compact full, peak RSS MiB", lambda f: f"{f['compact_full']['rss_mib']:.0f}")
    row("compact incremental (1%), s", lambda f: f"{f['compact']['seconds']:.2f}")
    for w in (2, 8):
        row(
            f"search {w} words p50 / p95, ms",
            lambda f, w=w: (
                f"{f['search'][f'p50_{w}'] * 1000:.2f} / {f['search'][f'p95_{w}'] * 1000:.2f}"
            ),
        )
    row("store size, MiB", lambda f: f"{f['size_mib']:.0f}")
    row(
        "MCP get / no-op, p50 ms",
        lambda f: f"{f['mcp']['get'] * 1000:.2f} / {f['mcp']['noop'] * 1000:.2f}",
    )
    row(
        "MCP search / library, p50 ms",
        lambda f: f"{f['mcp']['search'] * 1000:.2f} / {f['mcp']['library'] * 1000:.2f}",
    )
    width = max(len(r[0]) for r in rows)
    print(f"\n{'':<{width}}  " + "  ".join(f"{e:>16}" for e in names))
    for r in rows:
        print(f"{r[0]:<{width}}  " + "  ".join(f"{c:>16}" for c in r[1:]))
    if "sqlite" in names and "postgres" in names:
        ratios(figs["sqlite"], figs["postgres"])


def ratios(lite: dict, pg: dict) -> None:
    """PostgreSQL's time over SQLite's, with issue 32's target beside it."""
    n = lite.get("remember", {}).get("passages", 0)
    rows = [
        ("remember", lambda f: f["remember"]["seconds"], 1.5 if n <= 200_000 else 2.0),
        ("remember again, each edited", lambda f: f["remember_edited"]["seconds"], 1.5),
        ("compact full", lambda f: f["compact_full"]["seconds"], None),
        ("compact incremental (1%)", lambda f: f["compact"]["seconds"], None),
        ("search 2 words p50", lambda f: f["search"]["p50_2"], None),
        ("search 8 words p50", lambda f: f["search"]["p50_8"], None),
        ("store size", lambda f: f["size_mib"], None),
    ]
    print(f"\n{'PostgreSQL / SQLite':<28} {'ratio':>8}  target")
    for label, fn, target in rows:
        try:
            ratio = fn(pg) / fn(lite)
        except (KeyError, ZeroDivisionError):
            continue
        verdict = (
            "" if target is None else f"<= {target:g}x: {'met' if ratio <= target else 'NOT met'}"
        )
        print(f"{label:<28} {ratio:>7.2f}x  {verdict}")


def issue_table(lite: dict, pg: dict, args: argparse.Namespace) -> None:
    """Every row of issue 32's table, both engines side by side, the ratio
    and the target beside each (a row not measured in this run says why)."""
    n = lite.get("remember", {}).get("passages", args.size)
    rows: list[tuple[str, str, str, str, str]] = []

    def row(label: str, fn: Any, unit: str, target: str, ratio: Any = None, ok: Any = None) -> None:
        try:
            a, b = fn(lite), fn(pg)
        except KeyError:
            rows.append((label, "-", "-", "", f"{target}: not measured in this run"))
            return
        r = ratio(a, b) if ratio else b / a if a else float("nan")
        verdict = "" if ok is None else (" (met)" if ok(a, b, r) else " (NOT met)")
        rows.append((label, unit.format(a), unit.format(b), f"{r:.2f}x", target + verdict))

    row(
        f"remember {n:,} passages",
        lambda f: f["remember"]["seconds"],
        "{:.1f} s",
        "<= 1.5x" if n <= 200_000 else "<= 2x",
        ok=lambda a, b, r: r <= (1.5 if n <= 200_000 else 2.0),
    )
    row("full compact", lambda f: f["compact_full"]["seconds"], "{:.1f} s", "-")
    row(
        "MCP get over the bare SDK tool",
        lambda f: f["mcp"]["get"] / f["mcp"]["noop"],
        "{:.2f}x",
        "PostgreSQL <= 1.3x",
        ok=lambda a, b, r: b <= 1.3,
    )
    row(
        "web namespace home p50",
        lambda f: f["web"]["home_p50"],
        "{:.1f} ms",
        "<= 2x",
        ok=lambda a, b, r: r <= 2.0,
    )
    row(
        "web page citing 50 passages p50",
        lambda f: f["web"]["page_p50"],
        "{:.1f} ms",
        "<= 2x",
        ok=lambda a, b, r: r <= 2.0,
    )
    size = lite.get("lexical", {}).get("turns") or args.lexical_size
    row(
        f"lexical search p50 at {size:,} turns",
        lambda f: f["lexical"]["p50_ms"],
        "{:.2f} ms",
        "PostgreSQL <= 10 ms" + ("" if size >= 300_000 else " at 300k"),
        ok=lambda a, b, r: b <= 10.0,
    )
    row(
        "8 processes, mixed ops (one namespace, empty at start)",
        lambda f: f["mixed"]["one"]["ops_s"],
        "{:.1f} ops/s",
        ">= 1.0x",
        ok=lambda a, b, r: r >= 1.0,
    )
    if "sized" in lite.get("mixed", {}):
        row(
            f"8 processes, mixed ops (one namespace of {args.mixed_size:,} passages)",
            lambda f: f["mixed"]["sized"]["ops_s"],
            "{:.1f} ops/s",
            ">= 1.0x",
            ok=lambda a, b, r: r >= 1.0,
        )
    rows.append(
        (
            f"hybrid search p50 at {n:,}",
            "-",
            "-",
            "",
            "PostgreSQL <= 15 ms: not measured: needs pgvector "
            "(python -m benchmarks.hybrid_search measures it on a server of its own)",
        )
    )
    head = ("issue 32", "SQLite", "PostgreSQL", "ratio", "target")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    print()
    for r in [head, *rows]:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )
            + "  "
            + r[4]
        )


def run(args: argparse.Namespace) -> None:
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            sys.exit(f"unknown engine {e!r} (choose from {', '.join(ENGINES)})")
    work = Path(tempfile.mkdtemp(prefix="memors-engines-"))
    corpus, change = work / "corpus.jsonl", work / "change.jsonl"
    # Written by a child process, so that this one stays small.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.corpus",
            *map(str, (corpus, args.size, args.seed, change)),
        ],
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    edited = work / "edited.jsonl"
    write_edited(corpus, edited)
    print(
        f"memors on {', '.join(engines)}: {args.size} passages (+1% for the change), "
        f"{os.cpu_count()} cores, python {sys.version.split()[0]}, {load()}"
        + (", VACUUM (ANALYZE) after each load on PostgreSQL" if args.vacuum_analyze else "")
    )
    print(f"{'figure':<46} {'value':>12}  {'reference':<28} {'ratio':>8}  target / notes")
    try:
        figs = {e: engine_run(e, args, corpus, change, edited) for e in engines}
    finally:
        shutil.rmtree(work)
    live = [e for e in engines if figs[e]]
    if not args.remember_only:
        if args.mixed_seconds > 0:
            print(f"\n[8 processes, mixed] {load()}")
            for e in live:
                figs[e]["mixed"] = mixed_run(e, args)
        if args.lexical_size > 0:
            print(f"\n[lexical search, {args.lexical_size} turns in one namespace] {load()}")
            for e in live:
                figs[e]["lexical"] = lexical_run(e, args)
    table(figs)
    if "sqlite" in live and "postgres" in live and not args.remember_only:
        issue_table(figs["sqlite"], figs["postgres"], args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="passages (default 100000)")
    parser.add_argument("--engines", default="sqlite,postgres", help="default sqlite,postgres")
    parser.add_argument("--skip-mcp", action="store_true", help="skip the MCP call figures")
    parser.add_argument(
        "--remember-only", action="store_true", help="stop after the load (and its size)"
    )
    parser.add_argument("--calls", type=int, default=200, help="MCP calls per tool (200)")
    parser.add_argument(
        "--vacuum-analyze",
        action="store_true",
        help="on PostgreSQL, VACUUM (ANALYZE) after each load, as autovacuum would when on",
    )
    parser.add_argument("--queries", type=int, default=200, help="searches of each length (200)")
    parser.add_argument("--skip-web", action="store_true", help="skip the web view figures")
    parser.add_argument(
        "--web-requests", type=int, default=100, help="timed GETs of each web view (100)"
    )
    parser.add_argument(
        "--mixed-seconds",
        type=float,
        default=8.0,
        help="seconds of each 8-process mixed step (default 8; 0 skips it)",
    )
    parser.add_argument(
        "--mixed-size",
        type=int,
        default=None,
        help="passages of the namespace of one more mixed step, one namespace "
        "(default --size; 0 skips it)",
    )
    parser.add_argument(
        "--lexical-size",
        type=int,
        default=300_000,
        help="conversation turns of the lexical search row (default 300000; 0 skips it)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mixed_size is None:
        args.mixed_size = args.size
    if args.step:
        print(json.dumps(step(args.step, args.url, args)))
    else:
        run(args)


if __name__ == "__main__":
    main()
