"""memors benchmarks: each figure beside its reference, measured in the same run.

    python -m benchmarks.run --size 100000      # make bench
    python -m benchmarks.run --quick            # make bench-quick (under a minute)
    python -m benchmarks.run --corpus FILE.jsonl --size 50000   # any {"doc","text"} corpus
    python -m benchmarks.run --scale 1000000    # remember --jsonl + full compact, peak RSS

Figures (issue 7): the duplicate scan against one linear tokenise-shingle-hash
pass and against datasketch MinHashLSH (128 permutations); incremental
against full compaction after a 1% change; remember against a bare apsw
insert into an FTS5 table; search against a bare FTS5 BM25 query; a page
submission with 50 sources and 20 facts; and peak memory. Then (issue 13)
documents of hostile shapes: remembering 9 MB of one endless paragraph (and
other shapes) against 9 MB of prose, and the first duplicate scan of one
document of look-alike passages against a linear pass over them.

    python -m benchmarks.run --shapes-only      # just those rows
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate, read_jsonl
from memors_kinds.duplicate import FOLD_RATIO

ROWS: list[tuple[str, str, str, str, str]] = []


def report(name: str, value: str, reference: str = "", ratio: str = "", target: str = "") -> None:
    ROWS.append((name, value, reference, ratio, target))
    print(f"{name:<46} {value:>12}  {reference:<28} {ratio:>8}  {target}", flush=True)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def settle(memory: Any) -> None:
    """Checkpoint the WAL, so a timed step does not copy the last one's writes."""
    memory.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def documents(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    by_doc: dict[str, list[str]] = {}
    for row in rows:
        by_doc.setdefault(row["doc"], []).append(row["text"])
    return [{"text": "\n\n".join(texts), "uri": doc} for doc, texts in by_doc.items()]


# --- ingest ------------------------------------------------------------------------


def bare_insert(path: Path, rows: list[dict[str, str]]) -> float:
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, doc TEXT, text TEXT);"
        "CREATE VIRTUAL TABLE t_fts USING fts5(text, content='t', content_rowid='id', "
        "tokenize='porter unicode61');"
        "CREATE TRIGGER t_ai AFTER INSERT ON t BEGIN "
        "INSERT INTO t_fts(rowid, text) VALUES (new.id, new.text); END;"
    )
    start = time.perf_counter()
    with conn:
        conn.executemany(
            "INSERT INTO t(doc, text) VALUES (?, ?)", ((r["doc"], r["text"]) for r in rows)
        )
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def bare_search_p50(path: Path, queries: list[str]) -> float:
    import apsw

    from memors_core.storage.sqlite.search import fts_query

    conn = apsw.Connection(str(path))
    times = []
    for q in queries:
        match = fts_query(q)
        start = time.perf_counter()
        conn.execute(
            "SELECT t.id, t.text, bm25(t_fts) AS r FROM t_fts JOIN t ON t.id = t_fts.rowid "
            "WHERE t_fts MATCH ? ORDER BY r LIMIT 10",
            (match,),
        ).fetchall()
        times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times)


# --- the duplicate scan and its references ----------------------------------------------


def linear_pass(rows: list[dict[str, str]]) -> float:
    from memors_core.domain import text

    start = time.perf_counter()
    for row in rows:
        text.pack_shingles(text.shingle_hashes(row["text"]))
    return time.perf_counter() - start


def store_scan(memory: Any) -> tuple[float, list[dict[str, Any]]]:
    """The duplicate kind's full scan as compaction runs it: from the store."""
    from memors_kinds.duplicate import clusters

    def run() -> list[dict[str, Any]]:
        rows = tx.passages.live_shingles("default")
        return clusters((r.id, r.document, r.shingles) for r in rows if r.shingles)

    with memory.store.read() as tx:
        return timed(run)


def minhash_lsh(rows: list[dict[str, str]]) -> tuple[float, set[tuple[int, int]]]:
    """datasketch MinHashLSH with 128 permutations over word 3-grams; every
    candidate pair is verified exactly, as a real scan would have to."""
    from datasketch import MinHash, MinHashLSH

    from memors_core.domain import text

    start = time.perf_counter()
    lsh = MinHashLSH(threshold=0.75, num_perm=128)
    sets: list[set[bytes]] = []
    signatures: dict[int, Any] = {}
    for i, row in enumerate(rows):
        ws = text.words(row["text"])
        grams = {" ".join(ws[k : k + 3]).encode() for k in range(len(ws) - 2)}
        sets.append(grams)
        if grams:
            mh = MinHash(num_perm=128)
            mh.update_batch(list(grams))
            signatures[i] = mh
            lsh.insert(i, mh)
    pairs: set[tuple[int, int]] = set()
    for i, mh in signatures.items():
        for j in lsh.query(mh):
            if j <= i or rows[j]["doc"] == rows[i]["doc"]:
                continue
            inter = len(sets[i] & sets[j])
            if inter * 4 >= 3 * (len(sets[i]) + len(sets[j]) - inter):
                pairs.add((i, j))
    return time.perf_counter() - start, pairs


def exact_pairs(rows: list[dict[str, str]]) -> set[tuple[int, int]]:
    """An independent exact reference: an inverted index over every shingle."""
    from memors_core.domain import text

    sets = [set(text.shingle_hashes(r["text"])) for r in rows]
    postings: dict[int, list[int]] = {}
    for i, s in enumerate(sets):
        for tok in s:
            postings.setdefault(tok, []).append(i)
    pairs = set()
    for i, s in enumerate(sets):
        overlap: dict[int, int] = {}
        for tok in s:
            for j in postings[tok]:
                if j > i:
                    overlap[j] = overlap.get(j, 0) + 1
        for j, inter in overlap.items():
            if rows[i]["doc"] != rows[j]["doc"] and inter * 4 >= 3 * (
                len(s) + len(sets[j]) - inter
            ):
                pairs.add((i, j))
    return pairs


# --- documents of hostile shapes (issue 13) ------------------------------------------------


def hostile_shapes(mb: float) -> dict[str, str]:
    """Documents of about ``mb`` MiB that split into long runs of words."""
    n = int(mb * 2**20)
    return {
        "one paragraph of `word word ...`": "word " * (n // 5),
        "one sentence over many lines": "word\n" * (n // 5),
        "a pile of heading lines": "# h\n" * (n // 4),
        "a log (one paragraph of lines)": "".join(
            f"2026-12-01T10:00:{i % 60:02d} INFO req id={i} path=/api/x status=200\n"
            for i in range(n // 64)
        ),
    }


def prose_document(mb: float, seed: int) -> str:
    """About ``mb`` MiB of the benchmark corpus's passages, as one document."""
    n = int(mb * 2**20)
    texts: list[str] = []
    size = 0
    for row in generate(n // 300, seed=seed):
        texts.append(row["text"])
        size += len(row["text"]) + 2
        if size >= n:
            break
    return "\n\n".join(texts)


def look_alike_document(passages: int, seed: int = 13) -> str:
    """One document of paragraphs of 30-80 words from a 24-word vocabulary:
    every passage shares 3-grams with thousands of others, none qualifies."""
    rng = random.Random(seed)
    vocab = [f"alpha{i}" for i in range(24)]
    return "\n\n".join(
        " ".join(rng.choice(vocab) for _ in range(rng.randint(30, 80))) for _ in range(passages)
    )


def look_alike_notes(count: int) -> list[dict[str, str]]:
    """Notes an agent logs daily, one a document: each differs from the
    others in a number only, so every pair qualifies (one cluster)."""
    line = (
        "writer {w} records that the nightly backup of host {w} finished without errors "
        "and the archive was verified against the catalogue before the tapes were rotated "
        "into the vault for safe keeping until the next quarter when they are reused again, "
        "run {n}"
    )
    return [{"text": line.format(w=k % 8, n=k // 8), "uri": f"note-{k}"} for k in range(count)]


def run_shapes(mb: float, passages: int, seed: int) -> None:
    """9 MB documents in ``make bench`` (3 MB with ``--quick``, 1 MB in the
    harness's small smoke run), each remembered into a fresh store."""
    from memors_core import Memory
    from memors_core.domain import text

    work = Path(tempfile.mkdtemp(prefix="memors-shapes-"))

    def remember_once(name: str, body: str) -> float:
        memory = Memory.open(work / f"{name}.db")
        try:
            return timed(lambda: memory.remember(body))[0]
        finally:
            memory.close()

    prose = prose_document(mb, seed)
    reference = remember_once("prose", prose)
    report(
        f"remember {len(prose) / 2**20:.0f} MB of prose (one document)",
        f"{reference:.2f} s",
    )
    for i, (shape, body) in enumerate(hostile_shapes(mb).items()):
        took = remember_once(f"shape{i}", body)
        report(
            f"  remember {len(body) / 2**20:.0f} MB, {shape}",
            f"{took:.2f} s",
            f"prose {reference:.2f} s",
            f"{took / reference:.2f}x",
            "<= 1.5x",
        )

    def first_duplicate_compact(name: str, texts: list[str], load: Callable[[Any], Any]):
        """The linear pass over ``texts`` (tokenise, shingle, hash), and the
        first full ``compact --kinds duplicate`` of a store ``load`` filled."""
        start = time.perf_counter()
        for piece in texts:
            text.pack_shingles(text.shingle_hashes(piece))
        linear = time.perf_counter() - start
        memory = Memory.open(work / f"{name}.db")
        try:
            load(memory)
            settle(memory)
            scan, result = timed(lambda: memory.compact(kinds=["duplicate"], limit=0, full=True))
        finally:
            memory.close()
        return linear, scan, result

    body = look_alike_document(passages)
    linear, scan, result = first_duplicate_compact(
        "look-alike", text.split_passages(body), lambda memory: memory.remember(body)
    )
    report(
        f"first compact --kinds duplicate, {passages} look-alike passages of one document",
        f"{scan:.2f} s",
        f"linear pass {linear:.2f} s",
        f"{scan / linear:.2f}x",
        "<= 3x",
    )
    report("  items created (none can qualify)", f"{result.created}")

    notes = look_alike_notes(passages // 6)
    linear, scan, result = first_duplicate_compact(
        "notes", [note["text"] for note in notes], lambda memory: memory.remember_many(notes)
    )
    report(
        f"first compact --kinds duplicate, {len(notes)} look-alike notes, one a document",
        f"{scan:.2f} s",
        f"linear pass {linear:.2f} s",
        f"{scan / linear:.0f}x",
        "none: every pair is counted",
    )
    report("  items created (one cluster)", f"{result.created}")


# --- the run --------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    from memors_core import Memory

    size = 10_000 if args.quick else args.size
    step = max(1, size // 100)
    # the base, a 1% change, then rounds of 1% changes up to a fold of the prefix index
    wanted = size + step * (2 + FOLD_RATIO * 2)
    if args.corpus:
        rows = list(read_jsonl(Path(args.corpus), wanted))
    else:
        rows = list(generate(wanted, seed=args.seed))
    base, extra, later = rows[:size], rows[size : size + step], rows[size + step :]
    if not extra:
        extra = list(generate(step, seed=args.seed + 1))
    print(
        f"memors benchmarks: {len(base)} passages (+{len(extra)} for the 1% change), "
        f"{os.cpu_count()} cores, python {sys.version.split()[0]}\n"
    )
    if size < 100_000:
        print(
            "(the targets are set at 100,000 passages; on fewer, fixed costs such as the\n"
            " bulk load's helper process starting weigh more, so ratios run higher)\n"
        )
    print(f"{'figure':<46} {'value':>12}  {'reference':<28} {'ratio':>8}  target")
    work = Path(tempfile.mkdtemp(prefix="memors-bench-"))

    # Ingest: remember vs a bare FTS5 insert of the same rows.
    bare = bare_insert(work / "bare.db", base)
    memory = Memory.open(work / "memors.db")
    ingest, _ = timed(lambda: memory.remember_many(documents(base)))
    report(
        "remember (documents -> passages, FTS, shingles)",
        f"{ingest:.2f} s",
        f"bare FTS5 insert {bare:.2f} s",
        f"{ingest / bare:.2f}x",
        "<= 2x",
    )

    # Duplicate scan vs one linear pass, in the same run.
    linear = linear_pass(base)
    report("linear pass: tokenise + shingle + hash", f"{linear:.2f} s")
    scan, found = store_scan(memory)
    pair_count = sum(c["pair_count"] for c in found)
    report(
        "duplicate scan, full, from the store",
        f"{scan:.2f} s",
        f"linear pass {linear:.2f} s",
        f"{scan / linear:.2f}x",
        "<= 3x",
    )
    report("  clusters / qualifying pairs", f"{len(found)} / {pair_count}")
    if not args.skip_minhash:
        try:
            mh_time, mh_pairs = minhash_lsh(base)
        except ImportError:
            report("datasketch MinHashLSH (128 perms)", "not installed", "pip install '.[bench]'")
        else:
            report(
                "datasketch MinHashLSH (128 perms), verified",
                f"{mh_time:.2f} s",
                f"duplicate scan {scan:.2f} s",
                f"{mh_time / scan:.1f}x",
                ">= 2x slower",
            )
            report(
                "  MinHashLSH pairs found (misses)",
                f"{len(mh_pairs)}",
                f"exact {pair_count}",
                f"{pair_count - len(mh_pairs)} missed",
            )
    if args.reference:
        ref = exact_pairs(base)
        report(
            "independent exact reference (inverted index)",
            f"{len(ref)} pairs",
            f"duplicate scan {pair_count}",
            "same" if len(ref) == pair_count else "DIFFERENT",
        )

    # Compaction: full, then incremental after a 1% change, then --full again.
    # The WAL is checkpointed before each timed compaction, so that none of
    # them pays for copying the previous step's writes into the database.
    settle(memory)
    full, first = timed(lambda: memory.compact(limit=0, full=True))
    report("compact, full (every kind)", f"{full:.2f} s", f"{first.open} items")
    rng = random.Random(args.seed)
    change = documents(extra) + [
        {"text": base[rng.randrange(len(base))]["text"], "uri": f"copy-{i}"}
        for i in range(max(1, size // 2000))
    ]
    memory.remember_many(change)
    for item in memory.items(kind="duplicate", status="open").items[: max(1, size // 2000)]:
        memory.forget(item.payload["passages"][0]["address"])
    settle(memory)
    incremental, _inc = timed(lambda: memory.compact(limit=0))
    report(
        "compact after a 1% change (incremental)",
        f"{incremental:.3f} s",
        f"first full compact {full:.2f} s",
        f"{incremental / full:.1%}",
        "<= 10%",
    )
    before = {
        i.id: json.dumps(i.payload, sort_keys=True) for i in memory.items(status="open").items
    }
    settle(memory)
    again, rescan = timed(lambda: memory.compact(limit=0, full=True))
    after = {i.id: json.dumps(i.payload, sort_keys=True) for i in memory.items(status="open").items}
    report(
        "compact --full afterwards (same store)",
        f"{again:.2f} s",
        f"{rescan.created} created",
        "same" if before == after else "DIFFERENT",
        "identical items",
    )
    report(
        "  incremental vs a full rescan of that store",
        f"{incremental:.3f} s",
        f"compact --full {again:.2f} s",
        f"{incremental / again:.1%}",
        "<= 10%",
    )
    # More 1% changes, each compacted, until the small recent prefix index
    # is folded into the main one: what incremental compaction costs over time.
    rounds: list[float] = []
    folded = False
    for a in range(0, len(later), step):
        memory.remember_many(
            documents([{"doc": f"{r['doc']}-r{a}", "text": r["text"]} for r in later[a : a + step]])
        )
        settle(memory)
        t, _ = timed(lambda: memory.compact(limit=0))
        rounds.append(t)
        if not memory.store.scalar("SELECT COUNT(*) FROM dup_recent"):
            folded = True
            break
    if rounds:
        report(
            f"  {len(rounds)} more 1% changes, median",
            f"{statistics.median(rounds):.3f} s",
            f"compact --full {again:.2f} s",
            f"{statistics.median(rounds) / again:.1%}",
            "<= 10%",
        )
        report(
            "  the round that folded the recent index" if folded else "  the last round",
            f"{rounds[-1]:.3f} s",
            f"mean of the {len(rounds)} {statistics.mean(rounds):.3f} s",
            f"{statistics.mean(rounds) / again:.1%}",
            "mean <= 10%",
        )

    # Search: memors vs a bare FTS5 BM25 query, two-word queries.
    words = [w for r in base[:2000] for w in r["text"].lower().split() if len(w) > 3]
    queries = [
        f"{rng.choice(words)} {rng.choice(words)}" for _ in range(100 if args.quick else 300)
    ]
    bare_p50 = bare_search_p50(work / "bare.db", queries)
    times = []
    for q in queries:
        t, _ = timed(lambda q=q: memory.search(q))
        times.append(t)
    p50 = statistics.median(times)
    report(
        "search p50 (2 words, limit 10)",
        f"{p50 * 1000:.2f} ms",
        f"bare FTS5 BM25 {bare_p50 * 1000:.2f} ms",
        f"{p50 / bare_p50:.2f}x",
        "<= 2x",
    )

    # Submit: a page with 50 sources and 20 facts, checks included (dry run).
    submit_p50 = page_submit_p50(memory, 20 if args.quick else 60)
    report(
        "submit page, 50 sources + 20 facts, p50", f"{submit_p50 * 1000:.1f} ms", "", "", "< 20 ms"
    )
    memory.close()
    report("peak RSS (this process)", f"{peak_rss_mib():.0f} MiB")
    print()
    if size >= 100_000:
        run_shapes(9.0, 18_000, args.seed)
    elif args.quick:
        run_shapes(3.0, 18_000, args.seed)
    else:  # a small run (the test suite's smoke run of the harness)
        run_shapes(1.0, 3_000, args.seed)

    mcp = Path(__file__).with_name("mcp_overhead.py")
    if mcp.exists() and not args.skip_mcp:
        print()
        subprocess.run([sys.executable, str(mcp)], check=False)


def page_submit_p50(memory: Any, runs: int) -> float:
    ns = "bench-submit"
    for i in range(50):
        memory.remember(
            f"[[Quorum]] replication step {i} writes value v{i} to replica r{i} before the "
            f"leader acknowledges round {i}.",
            namespace=ns,
        )
    for i in range(20):
        memory.record_fact("Quorum", f"property {i}", f"value {i}", namespace=ns)
    item = memory.compact(kinds=["page"], namespace=ns).items[0]
    lines = [p["text"].replace("[[", "").replace("]]", "") for p in item.payload["passages"]]
    lines += [f"Quorum {f['predicate']} {f['value']}." for f in item.payload["facts"]]
    content = "\n\n".join(lines)
    times = []
    for _ in range(runs):
        t, report_ = timed(
            lambda: memory.submit(
                item.id, content=content, title="Quorum", dry_run=True, namespace=ns
            )
        )
        assert all(c.passed for c in report_.checks.values()), report_.checks
        times.append(t)
    return statistics.median(times)


# --- a million passages: the real CLI, peak memory of each process ------------------------


def run_scale(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="memors-scale-"))
    corpus, change = work / "corpus.jsonl", work / "change.jsonl"
    n = args.scale
    print(f"memors at scale: {n} passages through the real CLI\n")
    # Written by a child process, so this one stays small: a child's peak RSS
    # counts the parent's pages it was forked with.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.corpus",
            str(corpus),
            str(n),
            str(args.seed),
            str(change),
        ],
        check=True,
    )
    env = {**os.environ, "MEMORS_DB": str(work / "memors.db")}
    took: dict[str, float] = {}
    for label, argv in (
        ("remember --jsonl", ["remember", "--jsonl", str(corpus), "--json"]),
        ("compact (full, every kind)", ["compact", "--full", "--limit", "0", "--json"]),
        ("compact again (incremental, nothing new)", ["compact", "--limit", "0", "--json"]),
        ("remember --jsonl, 1% more passages", ["remember", "--jsonl", str(change), "--json"]),
        ("compact after the 1% change (incremental)", ["compact", "--limit", "0", "--json"]),
        ("compact --full of the same store", ["compact", "--full", "--limit", "0", "--json"]),
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "memors_cli", *argv],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        out = proc.stdout.read() if proc.stdout else ""
        err = proc.stderr.read() if proc.stderr else ""
        if status != 0:
            print(err, file=sys.stderr)
            sys.exit(f"{label} failed")
        took[label] = elapsed
        report(
            label,
            f"{elapsed:.2f} s",
            f"peak RSS {usage.ru_maxrss / 1024:.0f} MiB",
            "",
            "<= 3072 MiB",
        )
        print(f"    {out.strip()[:200]}")
    incremental = took["compact after the 1% change (incremental)"]
    rescan = took["compact --full of the same store"]
    report(
        "  incremental vs compact --full",
        f"{incremental:.2f} s",
        f"compact --full {rescan:.2f} s",
        f"{incremental / rescan:.1%}",
        "<= 10%",
    )
    size = (work / "memors.db").stat().st_size / 2**20
    report("database size", f"{size:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="passages (default 100000)")
    parser.add_argument("--quick", action="store_true", help="10,000 passages, under a minute")
    parser.add_argument("--corpus", help="a JSONL corpus with doc and text per line")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-minhash", action="store_true", help="skip datasketch")
    parser.add_argument("--skip-mcp", action="store_true", help="skip the MCP overhead figure")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run the independent exact reference join (slow)",
    )
    parser.add_argument("--scale", type=int, help="run the CLI at this many passages instead")
    parser.add_argument(
        "--shapes-only",
        action="store_true",
        help="only the documents of hostile shapes (9 MB each; 3 MB with --quick)",
    )
    args = parser.parse_args()
    if args.scale:
        run_scale(args)
    elif args.shapes_only:
        print(f"{'figure':<46} {'value':>12}  {'reference':<28} {'ratio':>8}  target")
        run_shapes(3.0 if args.quick else 9.0, 18_000, args.seed)
    else:
        run(args)


if __name__ == "__main__":
    main()
