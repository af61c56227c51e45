"""Many processes, one store: a bounded load test.

For a fixed time (``MEMORS_LOAD_SECONDS``, default 15) these run at once
against one database file: CLI writers (``remember`` of single documents,
``remember --jsonl`` of batches, ``fact add``), a CLI ``compact`` loop, a
CLI submitter, and a stdio MCP server driven by ``mcp.Client`` taking
remember, search, compact and submit. Afterwards: no "database is locked"
(or any busy error) reached a user, every acknowledged write is found, no
item was completed twice, the store is whole. The operations per second it
held are printed.
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
from mcp import Client

from mcp_clients.harness import stdio_params
from memors_core import Memory
from memors_core.testing import passages_about
from store_checks import store_problems

SECONDS = float(os.environ.get("MEMORS_LOAD_SECONDS", "15"))
LOCK_WORDS = ("locked", "busy", "internal error", "traceback")


@dataclass
class Ledger:
    """What every worker was told was stored, and every failure it saw."""

    addresses: list[str] = field(default_factory=list)
    uris: list[str] = field(default_factory=list)
    completed: list[tuple[str, int]] = field(default_factory=list)  # (who, item)
    ops: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)


def run_cli(db: Path, ledger: Ledger, name: str, *args: str, stdin: str | None = None,
            ok: tuple[int, ...] = (0,)) -> Any:  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "memors_cli", *args, "--json"],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "MEMORS_DB": str(db)},
        timeout=120,
    )
    if any(word in proc.stderr.lower() for word in LOCK_WORDS) or proc.returncode not in ok:
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


def cli_remember(db: Path, ledger: Ledger, stop: float) -> None:
    n = 0
    while time.monotonic() < stop:
        n += 1
        text = "\n\n".join(passages_about(f"Cli {n % 4}", 2, topic=f"cli load {n}"))
        out = run_cli(db, ledger, "remember", "remember", "-", "--uri", f"cli/{n}", stdin=text)
        if out:
            with ledger.lock:
                ledger.addresses += [out["document"], *out["passages"]]


def cli_bulk(db: Path, ledger: Ledger, stop: float, tmp: Path) -> None:
    n = 0
    while time.monotonic() < stop:
        n += 1
        path = tmp / f"bulk-{n}.jsonl"
        uris = [f"bulk/{n}/{i}" for i in range(150)]
        with path.open("w") as handle:
            for i, uri in enumerate(uris):
                text = f"Bulk record {n}.{i} about [[Bulk {i % 3}]] and its replicas, batch {n}."
                handle.write(json.dumps({"text": text, "uri": uri}) + "\n")
        out = run_cli(db, ledger, "remember --jsonl", "remember", "--jsonl", str(path))
        if out:
            assert out["documents"] == len(uris)
            with ledger.lock:
                ledger.uris += uris


def cli_facts(db: Path, ledger: Ledger, stop: float) -> None:
    n = 0
    while time.monotonic() < stop:
        n += 1
        out = run_cli(db, ledger, "fact add", "fact", "add", f"Cli {n % 4}", f"p{n}", f"v{n}")
        if out:
            with ledger.lock:
                ledger.addresses.append(out["fact"])


def cli_compact(db: Path, ledger: Ledger, stop: float) -> None:
    while time.monotonic() < stop:
        run_cli(db, ledger, "compact", "compact", "--limit", "0")


def cli_submitter(db: Path, ledger: Ledger, stop: float, tmp: Path) -> None:
    """Races the MCP client for the same page items."""
    while time.monotonic() < stop:
        listed = run_cli(db, ledger, "items", "items", "--kind", "page", "--status", "open")
        if not listed or not listed.get("items"):
            time.sleep(0.2)
            continue
        item = listed["items"][-1]
        fields = page_fields(item["payload"])
        page = tmp / f"page-{item['id']}.md"
        page.write_text(fields["content"], encoding="utf-8")
        cites = [a for c in fields["cites"] for a in ("--cite", c)]
        out = run_cli(
            db, ledger, "submit", "submit", str(item["id"]), "--content-file", str(page),
            "--title", fields["title"], *cites, ok=(0, 1),
        )  # fmt: skip
        if out and out.get("stored"):
            with ledger.lock:
                ledger.completed.append(("cli", item["id"]))


async def mcp_worker(db: Path, ledger: Ledger, stop: float) -> None:
    async with Client(stdio_params(db)) as client:

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
            result = await client.call_tool(name, args)
            text = " ".join(c.text for c in result.content if hasattr(c, "text"))
            if result.is_error:
                if any(word in text.lower() for word in LOCK_WORDS):
                    ledger.fail(f"mcp {name}: {text[:300]}")
                return None
            with ledger.lock:
                ledger.ops[f"mcp {name}"] += 1
            return result.structured_content

        n = 0
        while time.monotonic() < stop:
            n += 1
            text = "\n\n".join(passages_about(f"Mcp {n % 3}", 2, topic=f"mcp load {n}"))
            out = await call("remember", {"text": text, "uri": f"mcp/{n}"})
            if out:
                with ledger.lock:
                    ledger.addresses += [out["document"], *out["passages"]]
            await call("search", {"query": f"which node stays consistent in mcp load {n}?"})
            if n % 4:
                continue
            queue = await call("compact", {"kinds": ["page"], "limit": 3})
            for item in (queue or {}).get("items", []):
                done = await call("submit", {"item": item["id"], **page_fields(item["payload"])})
                if done and done.get("stored"):
                    with ledger.lock:
                        ledger.completed.append(("mcp", item["id"]))


def test_many_processes_write_one_store_without_lock_errors_or_lost_writes(tmp_path: Path):
    db = tmp_path / "load.db"
    with Memory.open(db) as memory:  # something to compact from the first second
        for name in ("Cli 0", "Mcp 0", "Seed"):
            for i, text in enumerate(passages_about(name, 3, topic="seed")):
                memory.remember(text, uri=f"seed/{name}/{i}")
    ledger = Ledger()
    start = time.monotonic()
    stop = start + SECONDS
    threads = [
        threading.Thread(target=cli_remember, args=(db, ledger, stop)),
        threading.Thread(target=cli_bulk, args=(db, ledger, stop, tmp_path)),
        threading.Thread(target=cli_facts, args=(db, ledger, stop)),
        threading.Thread(target=cli_compact, args=(db, ledger, stop)),
        threading.Thread(target=cli_submitter, args=(db, ledger, stop, tmp_path)),
    ]
    for t in threads:
        t.start()
    try:
        anyio.run(mcp_worker, db, ledger, stop)
    finally:
        for t in threads:
            t.join(120)
    elapsed = time.monotonic() - start
    total = sum(ledger.ops.values())
    print(
        f"\nload: {total} operations in {elapsed:.1f} s = {total / elapsed:.1f} ops/s "
        f"({dict(sorted(ledger.ops.items()))}); {len(ledger.addresses)} addresses, "
        f"{len(ledger.uris)} bulk documents, {len(ledger.completed)} items completed"
    )
    assert ledger.failures == []
    # every worker got work done
    for name in ("remember", "remember --jsonl", "fact add", "compact", "mcp remember"):
        assert ledger.ops[name] > 0, name

    # every acknowledged write is there
    with Memory.open(db) as memory:
        for addr in ledger.addresses:
            assert memory.get(addr).status in ("live", "superseded", "forgotten"), addr
        bulk = set(ledger.uris)
        found = {
            r[0] for r in memory.store.all("SELECT uri FROM documents WHERE uri LIKE 'bulk/%'")
        }
        assert bulk <= found
    # no item completed twice, by any client
    items = [item for _who, item in ledger.completed]
    assert len(items) == len(set(items)), Counter(items).most_common(3)
    assert store_problems(db) == []  # one page per item, counters = rows, FTS whole
