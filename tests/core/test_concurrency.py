"""Many processes (on PostgreSQL: many hosts), one memory: the bounded
load test, on both engines.

For a fixed time (``MEMORS_LOAD_SECONDS``, default 15) at least eight
processes share one store: two CLI writers, a CLI bulk loader, a CLI fact
writer, a CLI ``compact`` loop, a CLI submitter, a stdio MCP server and an
HTTP MCP server (each driven by the SDK's client, taking remember, search,
compact and submit). Afterwards no error a user would see, every
acknowledged write is found, no item was completed twice, and the
incremental compaction that ran under concurrent writers leaves exactly
what a full rescan finds. It runs on a SQLite file and on a PostgreSQL
database in one test and prints the operations per second of both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_clients.harness import ServerProcess, stdio_params
from memors_core import Memory
from memors_core.testing import passages_about
from memors_core.testing import postgres as pg
from store_checks import store_problems

SECONDS = float(os.environ.get("MEMORS_LOAD_SECONDS", "15"))
#: Words in an error that a user should never see from a shared store.
USER_VISIBLE = ("locked", "busy", "internal error", "traceback", "lost the connection")


@dataclass
class Ledger:
    """What every worker was told was stored, and every failure it saw."""

    addresses: list[str] = field(default_factory=list)
    uris: list[str] = field(default_factory=list)
    completed: list[tuple[str, int]] = field(default_factory=list)
    ops: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)


def cli(db: str, ledger: Ledger, name: str, *args: str, stdin: str | None = None,
        ok: tuple[int, ...] = (0,)) -> Any:  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "memors_cli", *args, "--json"],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "MEMORS_DB": db},
        timeout=180,
    )
    if any(w in proc.stderr.lower() for w in USER_VISIBLE) or proc.returncode not in ok:
        ledger.fail(f"{name} {args[:3]}: exit {proc.returncode}: {proc.stderr.strip()[:300]}")
        return None
    with ledger.lock:
        ledger.ops[name] += 1
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def page_fields(payload: dict[str, Any]) -> dict[str, Any]:
    """A page every check accepts: the cited passages' own sentences and the facts."""
    passages = payload["passages"][:3]
    lines = [p["text"].replace("[[", "").replace("]]", "") for p in passages]
    lines += [f"{f['predicate']} {f['value']}." for f in payload["facts"]]
    return {
        "title": payload["entity"]["name"],
        "content": "\n\n".join(lines),
        "cites": [p["address"] for p in passages],
    }


# --- the workers ------------------------------------------------------------------------------


def rounds(stop: float):
    """Round numbers (from 1) of a worker's loop until ``stop``, and at least one (a slow
    machine's late start still gets every worker's work done once)."""
    n = 1
    yield n
    while time.monotonic() < stop:
        n += 1
        yield n


def cli_remember(db: str, ledger: Ledger, stop: float, who: str) -> None:
    for n in rounds(stop):
        text = "\n\n".join(passages_about(f"{who} {n % 4}", 2, topic=f"{who} load {n}"))
        out = cli(db, ledger, "remember", "remember", "-", "--uri", f"{who}/{n}", stdin=text)
        if out:
            with ledger.lock:
                ledger.addresses += [out["document"], *out["passages"]]


def cli_bulk(db: str, ledger: Ledger, stop: float, tmp: Path) -> None:
    for n in rounds(stop):
        path = tmp / f"bulk-{n}.jsonl"
        uris = [f"bulk/{n}/{i}" for i in range(100)]
        with path.open("w") as handle:
            for i, uri in enumerate(uris):
                text = f"Bulk record {n}.{i} about [[Bulk {i % 3}]] and its replicas, batch {n}."
                handle.write(json.dumps({"text": text, "uri": uri}) + "\n")
        if cli(db, ledger, "remember --jsonl", "remember", "--jsonl", str(path)):
            with ledger.lock:
                ledger.uris += uris


def cli_facts(db: str, ledger: Ledger, stop: float) -> None:
    for n in rounds(stop):
        out = cli(db, ledger, "fact add", "fact", "add", f"Writer {n % 4}", f"p{n}", f"v{n}")
        if out:
            with ledger.lock:
                ledger.addresses.append(out["fact"])


def cli_compact(db: str, ledger: Ledger, stop: float) -> None:
    for _ in rounds(stop):
        cli(db, ledger, "compact", "compact", "--limit", "0")


def cli_submitter(db: str, ledger: Ledger, stop: float, tmp: Path) -> None:
    """Races the MCP clients for the same page items."""
    for _ in rounds(stop):
        listed = cli(db, ledger, "items", "items", "--kind", "page", "--status", "open")
        if not listed or not listed.get("items"):
            time.sleep(0.2)
            continue
        item = listed["items"][-1]
        fields = page_fields(item["payload"])
        page = tmp / f"page-{item['id']}.md"
        page.write_text(fields["content"], encoding="utf-8")
        cites = [a for c in fields["cites"] for a in ("--cite", c)]
        out = cli(
            db, ledger, "submit", "submit", str(item["id"]), "--content-file", str(page),
            "--title", fields["title"], *cites, ok=(0, 1),
        )  # fmt: skip
        if out and out.get("stored"):
            with ledger.lock:
                ledger.completed.append(("cli", item["id"]))


async def mcp_worker(target: Any, ledger: Ledger, stop: float, who: str) -> None:
    async with Client(target) as client:

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
            result = await client.call_tool(name, args)
            text = " ".join(c.text for c in result.content if hasattr(c, "text"))
            if result.is_error:
                if any(w in text.lower() for w in USER_VISIBLE):
                    ledger.fail(f"{who} {name}: {text[:300]}")
                return None
            with ledger.lock:
                ledger.ops[f"{who} {name}"] += 1
            return result.structured_content

        for n in rounds(stop):
            text = "\n\n".join(passages_about(f"{who} {n % 3}", 2, topic=f"{who} load {n}"))
            out = await call("remember", {"text": text, "uri": f"{who}/{n}"})
            if out:
                with ledger.lock:
                    ledger.addresses += [out["document"], *out["passages"]]
            await call("search", {"query": f"which node stays consistent in {who} load {n}?"})
            if n % 4:
                continue
            queue = await call("compact", {"kinds": ["page"], "limit": 3})
            for item in (queue or {}).get("items", []):
                done = await call("submit", {"item": item["id"], **page_fields(item["payload"])})
                if done and done.get("stored"):
                    with ledger.lock:
                        ledger.completed.append((who, item["id"]))


async def mcp_workers(db: str, http_url: str, ledger: Ledger, stop: float) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(mcp_worker, stdio_params(db), ledger, stop, "stdio")  # type: ignore[arg-type]
        group.start_soon(mcp_worker, http_url, ledger, stop, "http")


# --- one run --------------------------------------------------------------------------------------


def open_items(db: str) -> dict[int, str]:
    with Memory.open(db) as memory:
        return {i.id: i.fingerprint for i in memory.items(status="open").items}


def run_load(db: str, tmp: Path) -> dict[str, Any]:
    """The load on the store ``db``; returns what a person reading the result wants."""
    with Memory.open(db) as memory:  # something to compact from the first second
        for name in ("Cli 0", "stdio 0", "http 0", "Seed"):
            for i, text in enumerate(passages_about(name, 3, topic="seed")):
                memory.remember(text, uri=f"seed/{name}/{i}")
    ledger = Ledger()
    with ServerProcess(db) as server:  # type: ignore[arg-type]
        start = time.monotonic()
        stop = start + SECONDS
        threads = [
            threading.Thread(target=cli_remember, args=(db, ledger, stop, "Cli")),
            threading.Thread(target=cli_remember, args=(db, ledger, stop, "Writer")),
            threading.Thread(target=cli_bulk, args=(db, ledger, stop, tmp)),
            threading.Thread(target=cli_facts, args=(db, ledger, stop)),
            threading.Thread(target=cli_compact, args=(db, ledger, stop)),
            threading.Thread(target=cli_submitter, args=(db, ledger, stop, tmp)),
        ]
        for t in threads:
            t.start()
        try:
            anyio.run(mcp_workers, db, server.url, ledger, stop)
        finally:
            for t in threads:
                t.join(180)
        elapsed = time.monotonic() - start
        server_log = server.stderr
    assert ledger.failures == []
    assert "Traceback" not in server_log, server_log[-2000:]
    for name in ("remember", "remember --jsonl", "fact add", "compact", "items"):
        assert ledger.ops[name] > 0, name
    for who in ("stdio", "http"):
        assert ledger.ops[f"{who} remember"] > 0, who

    # every acknowledged write is there
    with Memory.open(db) as memory:
        for addr in ledger.addresses:
            assert memory.get(addr).status in ("live", "superseded", "forgotten"), addr
        with memory.store.read() as tx:
            lost = [u for u in ledger.uris if tx.documents.latest_by_uri("default", u) is None]
        assert lost == []
    # no item completed twice, by any client
    items = [item for _who, item in ledger.completed]
    assert len(items) == len(set(items)), Counter(items).most_common(3)

    # incremental compaction under concurrent writers found what a full rescan finds
    cli(db, ledger, "compact", "compact", "--limit", "0")
    after_incremental = open_items(db)
    cli(db, ledger, "compact --full", "compact", "--full", "--limit", "0")
    assert ledger.failures == []
    assert open_items(db) == after_incremental
    assert store_problems(db) == []  # one page per item, counters = rows, search index whole
    total = sum(ledger.ops.values())
    return {"ops": total, "seconds": elapsed, "completed": len(items), "by": dict(ledger.ops)}


def test_many_processes_share_one_store_on_each_engine(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if request.config.getoption("--engine", default="sqlite") == "postgres":
        pytest.skip("runs on both engines itself, in the SQLite run of the suite")
    results = {"sqlite": run_load(str(tmp_path / "load.db"), tmp_path)}
    pg.require_server()  # (the SQLite half above has run)
    url = pg.new_database()
    try:
        (tmp_path / "pg").mkdir()
        results["postgres"] = run_load(url, tmp_path / "pg")
    finally:
        pg.drop_database(url)
    print()
    for engine, r in results.items():
        print(
            f"load on {engine:8}: {r['ops']} operations in {r['seconds']:.1f} s = "
            f"{r['ops'] / r['seconds']:.1f} ops/s, {r['completed']} items completed"
        )
