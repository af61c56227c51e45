"""The web view on a real store: how long the heavy pages take to render.

    python -m benchmarks.web                       # 100,000 passages (issue 18's store)
    python -m benchmarks.web --quick               # 2,000 passages, a smoke run
    python -m benchmarks.web --db postgresql       # the same on a fresh PostgreSQL database

Builds a store through the library: ``--size`` generated passages
(:mod:`benchmarks.corpus`, each document about one of 200 systems, so
compaction has page items as well as duplicates), conflicting facts, an
entity with ``--entity-passages`` passages of its own, and a page citing 50
passages (stored through ``submit`` on its entity's page item, every check
passing); ``compact`` then leaves an open queue. It starts the real server
(``memors-mcp serve --http`` on 127.0.0.1) and times ``--requests`` GETs of
each view over one kept-alive connection, after two to warm it up: the
page, the queue, the entity, the namespace home, search, and the lists of
pages and of documents (issue 31, point 7).

Each figure is a whole round trip on the loopback interface, so it bounds
the server's render time from above; its reference is the same round trip
for the server's smallest answer (a static file), which is what HTTP alone
costs. Target (issue 18, point 4): under 300 ms each.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks.corpus import generate
from memors_core.testing.server import ServerProcess

TARGET_MS = 300.0
ROWS: list[tuple[str, str, str, str]] = []
QUORUM = "Quorum"
LEDGER = "Ledger"


def report(name: str, value: str, reference: str = "", target: str = "") -> None:
    ROWS.append((name, value, reference, target))
    print(f"{name:<46} {value:>12}  {reference:<30} {target}", flush=True)


def p(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100)[q - 1] if len(times) > 1 else times[0]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


# --- the store ------------------------------------------------------------------------


def open_store(db: str | None, work: Path) -> tuple[Any, str, Callable[[], None]]:
    """A fresh store: a SQLite file in ``work``, or a new PostgreSQL database."""
    from memors_core import Memory

    if db is None:
        path = work / "memors.db"
        memory = Memory.open(path)
        return memory, str(path), memory.close
    from memors_core.testing import postgres

    url = postgres.new_database()
    memory = Memory.open(url)

    def done() -> None:
        memory.close()
        postgres.drop_database(url)

    return memory, url, done


def build(memory: Any, size: int, entity_passages: int, seed: int) -> dict[str, Any]:
    """Fill the store; returns the addresses the timed views show."""
    by_doc: dict[str, list[str]] = {}
    for row in generate(size, seed=seed):
        by_doc.setdefault(row["doc"], []).append(row["text"])
    documents = [
        {"text": "\n\n".join(texts), "uri": doc, "entities": [f"System {n % 200}"]}
        for n, (doc, texts) in enumerate(by_doc.items())
    ]
    # One entity with many passages of its own, eight to a document.
    ledger = [
        f"[[{LEDGER}]] entry {i} records transfer t{i} of {i * 13 % 997} units "
        f"from account a{i % 89} to account b{i % 61}."
        for i in range(entity_passages)
    ]
    documents += [
        {"text": "\n\n".join(ledger[i : i + 8]), "uri": f"ledger-{i // 8}"}
        for i in range(0, len(ledger), 8)
    ]
    documents += quorum_documents()
    took, _ = timed(lambda: memory.remember_many(documents, batch=2000))
    passages = size + entity_passages + 50
    report(
        f"build: remember {passages:,} passages",
        f"{took:.1f} s",
        f"{passages / took:,.0f} passages/s",
    )
    for n in range(40):  # two facts that disagree: a conflict item each
        memory.record_fact(f"System {n}", "owner", f"team {n}", valid_from="2020-01-01")
        memory.record_fact(f"System {n}", "owner", f"team {n + 1}", valid_from="2021-01-01")
    took, queue = timed(lambda: memory.compact(limit=0, full=True))
    by_kind = {k: memory.item_count(k, "open") for k in memory.kinds.names()}
    shown = ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items()) if n)
    report("build: compact --full (every kind)", f"{took:.1f} s", f"{queue.open:,} open: {shown}")

    took, cited = timed(lambda: submit_cited_page(memory))
    page = memory.get(cited)
    report(
        f"build: submit a page citing {len(page.sources)} passages",
        f"{took * 1000:.0f} ms",
        f"{len(page.sentences)} sentences",
    )
    entity = memory.entity(LEDGER)
    return {
        "documents": memory.documents().total,
        "page": cited,
        "entity": entity.address,
        "entity_passages": len(entity.passages),
        "open": queue.open,
    }


def quorum_sentences() -> list[str]:
    """Fifty passages a page will cite, one sentence each."""
    return [
        f"[[{QUORUM}]] replication step {i} writes value v{i} to replica r{i} before the "
        f"leader acknowledges round {i}."
        for i in range(50)
    ]


def quorum_documents() -> list[dict[str, str]]:
    """The fifty passages, a document each."""
    return [{"text": text, "uri": f"quorum-{i}"} for i, text in enumerate(quorum_sentences())]


def submit_cited_page(memory: Any) -> str:
    """Write the page of the quorum entity, a sentence citing each of its
    fifty passages, through ``submit`` on its open page item (every check
    passing); its address."""
    page_item = next(
        i
        for i in memory.items("page", "open", limit=None).items
        if i.payload["entity"]["name"] == QUORUM
    )
    refs = {p["text"]: p["ref"] for p in page_item.payload["passages"]}
    lines = [
        f"{text.replace('[[', '').replace(']]', '')} [{refs[text]}]" for text in quorum_sentences()
    ]
    content = f"# {QUORUM}\n\n" + "\n\n".join(lines) + "\n"
    done = memory.submit(page_item.id, content=content, title=QUORUM)
    if not done.stored:
        raise SystemExit(f"the page was refused: {done.message} {done.checks}")
    return done.address


# --- the server -----------------------------------------------------------------------


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    conn.request("GET", path)
    resp = conn.getresponse()
    return resp.status, resp.read()


def latencies(
    conn: http.client.HTTPConnection, path: str, requests: int
) -> tuple[list[float], int]:
    """Milliseconds per GET of ``path``, after two untimed ones; the answer's size."""
    for _ in range(2):
        status, body = get(conn, path)
        if status != 200:
            raise SystemExit(f"GET {path}: {status}\n{body[:2000].decode(errors='replace')}")
    out = []
    for _ in range(requests):
        took, (status, _) = timed(lambda: get(conn, path))
        if status != 200:
            raise SystemExit(f"GET {path}: {status}")
        out.append(took * 1000)
    return out, len(body)


def measure(port: int, views: dict[str, str], requests: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        static, _ = latencies(conn, "/static/memors.css", requests)
        reference = f"static file p50 {statistics.median(static):.1f} ms"
        for name, path in views.items():
            times, size = latencies(conn, path, requests)
            report(f"{name} p50", f"{statistics.median(times):.1f} ms", reference, "< 300 ms")
            report(
                f"{name} p95",
                f"{p(times, 95):.1f} ms",
                f"{size / 1024:.0f} KiB of HTML",
                "< 300 ms",
            )
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="passages (default 100000)")
    parser.add_argument(
        "--entity-passages", type=int, default=1_000, help="passages of one entity (1000)"
    )
    parser.add_argument("--requests", type=int, default=20, help="timed GETs per view (20)")
    parser.add_argument("--quick", action="store_true", help="2,000 passages, 100 of the entity")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--db", help="'postgresql' for a fresh PostgreSQL database (default SQLite)"
    )
    args = parser.parse_args()
    if args.quick:
        args.size, args.entity_passages, args.requests = 2_000, 100, 5
    if args.db is not None and not args.db.startswith("postgres"):
        parser.error("--db takes 'postgresql' (a fresh database on the local server)")
    if args.db is not None:
        from memors_core.testing import postgres

        why = postgres.available()
        if why is not None:
            sys.exit(f"web: {why}")
    engine = "PostgreSQL" if args.db else "SQLite"
    print(
        f"web view on {engine}: {args.size:,} passages, an entity with "
        f"{args.entity_passages:,}, a page citing 50; {args.requests} timed GETs a view, "
        f"{os.cpu_count()} cores, python {sys.version.split()[0]}\n"
    )
    print(f"{'figure':<46} {'value':>12}  {'reference':<30} target")
    work = Path(tempfile.mkdtemp(prefix="memors-web-"))
    memory, address, done = open_store(args.db, work)
    try:
        built = build(memory, args.size, args.entity_passages, args.seed)
        server = ServerProcess(address)
        try:
            ns = "/ns/default"
            page_id = built["page"].rsplit("/", 1)[1]
            entity_id = built["entity"].rsplit("/", 1)[1]
            last = max(0, (built["entity_passages"] - 1) // 50 * 50)
            docs = built["documents"]
            docs_last = max(0, (docs - 1) // 50 * 50)
            views = {
                "page view, 50 cited passages": f"{ns}/page/{page_id}",
                f"queue view, {built['open']:,} open items": f"{ns}/queue",
                f"entity view, {built['entity_passages']:,} passages": f"{ns}/entity/{entity_id}",
                "entity view, its last 50 passages": f"{ns}/entity/{entity_id}?offset={last}",
                "namespace home (metrics, entities)": f"{ns}/",
                "search page, 2 words": f"{ns}/search?q={quote('replication step')}",
                "pages list, by title": f"{ns}/pages",
                "stale pages list": f"{ns}/pages?stale=1",
                f"documents list, {docs:,} by title": f"{ns}/documents",
                "documents list, its last 50 by title": f"{ns}/documents?offset={docs_last}",
                "documents list, newest first": f"{ns}/documents?sort=newest",
            }
            measure(server.port, views, args.requests)
        finally:
            server.stop()
    finally:
        done()


if __name__ == "__main__":
    main()
