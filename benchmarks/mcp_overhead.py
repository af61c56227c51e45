"""What memors adds to an MCP call: ``search`` over stdio vs a do-nothing tool.

Starts ``python -m memors_cli serve`` over a store of generated documents and
a bare ``MCPServer`` with one tool that returns at once, both as stdio
subprocesses driven by the SDK's own client, and times N sequential calls of
each in the same run (plus the same search through the library, for
reference)::

    python benchmarks/mcp_overhead.py [--calls 200] [--documents 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio


def bare_server() -> None:
    """The baseline: an MCPServer whose only tool does nothing."""
    from mcp.server import MCPServer

    server = MCPServer("bare", log_level="WARNING")

    @server.tool()
    def noop() -> str:
        """Return at once."""
        return "ok"

    server.run()


def seed(db: Path, documents: int) -> None:
    from memors_core import Memory

    topics = ["replication", "consensus", "storage", "indexing", "caching", "scheduling"]
    verbs = ["copies", "orders", "checks", "stores", "retries", "elects", "repairs", "batches"]
    with Memory.open(db) as memory:
        memory.remember_many(
            {
                "text": "\n\n".join(
                    f"[[System{n % 97}]] {verbs[(n + i) % len(verbs)]} {topics[(n * i) % 6]} "
                    f"records in step {i} of run {n} so that node {i + n} stays consistent."
                    for i in range(4)
                ),
                "uri": f"bench://doc/{n}",
            }
            for n in range(documents)
        )


async def time_calls(params, tool: str, args: dict, calls: int) -> list[float]:
    from mcp import Client

    async with Client(params) as client:
        for _ in range(10):  # warm up: imports, caches, the first query plan
            await client.call_tool(tool, args)
        out = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool(tool, args)
            out.append(time.perf_counter() - started)
            assert not result.is_error, result
    return out


def time_library(db: Path, query: dict, calls: int) -> list[float]:
    """The same search through the library, no MCP: what the tool itself costs."""
    from memors_core import Memory
    from memors_core.wire import to_json

    with Memory.open(db) as memory:
        for _ in range(10):
            to_json(memory.search(**query))
        out = []
        for _ in range(calls):
            started = time.perf_counter()
            to_json(memory.search(**query))
            out.append(time.perf_counter() - started)
    return out


def describe(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[int(len(ms) * 0.9) - 1]
    return f"{name:<28} p50 {statistics.median(ms):6.2f} ms   p90 {p90:6.2f} ms   ({len(ms)} calls)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare_server()
        return

    from mcp import StdioServerParameters

    with tempfile.TemporaryDirectory(prefix="memors-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        seed(db, args.documents)
        env = {**os.environ, "MEMORS_DB": str(db)}
        memors = StdioServerParameters(
            command=sys.executable, args=["-m", "memors_cli", "serve"], env=env
        )
        bare = StdioServerParameters(
            command=sys.executable, args=[str(Path(__file__).resolve()), "--bare"], env=env
        )
        query = {"query": "which node stays consistent during replication", "limit": 10}
        from memors_core import Memory

        with Memory.open(db) as memory:
            target = memory.search("replication", limit=1).results[0].address
        noop = anyio.run(time_calls, bare, "noop", {}, args.calls)
        get = anyio.run(time_calls, memors, "get", {"address": target}, args.calls)
        search = anyio.run(time_calls, memors, "search", query, args.calls)
        library = time_library(db, query, args.calls)
    print(f"stdio, {args.calls} sequential calls each; store: {args.documents} documents")
    print(describe("bare MCPServer no-op tool", noop))
    print(describe("memors get (one passage)", get))
    print(describe("memors search (10 hits)", search))
    print(describe("library search, no MCP", library))
    ratio = statistics.median(get) / statistics.median(noop)
    print(
        f"a memors tool call (get) costs {ratio:.2f}x a bare SDK no-op call at p50 (target <= 1.3x)"
    )
    extra = statistics.median(search) - statistics.median(library)
    print(f"search over MCP adds {extra * 1000:.2f} ms at p50 to the library call")


if __name__ == "__main__":
    main()
