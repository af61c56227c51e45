"""What memors adds to an MCP call: ``search`` over stdio vs a do-nothing tool.

Starts ``python -m memors_cli serve`` over a store of generated documents and
a bare ``MCPServer`` with one tool that returns at once, both as stdio
subprocesses driven by the SDK's own client, and times N sequential calls of
each in the same run (plus the same search through the library, for
reference)::

    python benchmarks/mcp_overhead.py [--calls 200] [--documents 2000]

The no-op and ``get`` servers are open together and called in alternating
blocks of 20, and on a machine with two cores or more the client runs on
the first core and both servers on the second: where the scheduler puts
three busy processes, and slow drift of a VM's shared cores, then weigh on
both alike (measured one after the other and unpinned, the same p50 ratio
ranged from 1.1x to 1.6x between runs on the 2-core machine).
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

# Run as a script (the servers are), this file's folder comes first on the
# path, where benchmarks/queue.py would stand for the standard library's
# queue (which anyio imports): leave the folder out.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402

# The store ranks by words here, as in every harness but retrieval.py (benchmarks/__init__.py).
os.environ.setdefault("MEMORS_VECTORS", "off")


def bare_server() -> None:
    """The baseline: an MCPServer whose only tool does nothing."""
    from mcp.server import MCPServer

    server = MCPServer("bare", log_level="WARNING")

    @server.tool()
    def noop() -> str:
        """Return at once."""
        return "ok"

    server.run()


def pinned(cpu: int | None, argv: list[str]) -> list[str]:
    """``argv`` run as a process pinned to ``cpu`` (through this script's ``--pin``)."""
    if cpu is None:
        return argv
    return [str(Path(__file__).resolve()), "--pin", str(cpu), "--", *argv]


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


async def time_calls(
    sides: list[tuple[Any, str, dict]], calls: int, block: int = 20
) -> list[list[float]]:
    """``calls`` timed calls of each ``(server, tool, arguments)``, the
    servers open at once and called in alternating blocks of ``block``: a
    slow drift of the machine (a VM's cores are shared) weighs on all alike,
    while each server stays warm within its block."""
    from contextlib import AsyncExitStack

    from mcp import Client

    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(params)) for params, _t, _a in sides]
        for client, (_p, tool, args) in zip(clients, sides, strict=True):
            for _ in range(10):  # warm up: imports, caches, the first query plan
                await client.call_tool(tool, args)
        out: list[list[float]] = [[] for _ in sides]
        while len(out[-1]) < calls:
            for k, (client, (_p, tool, args)) in enumerate(zip(clients, sides, strict=True)):
                for _ in range(min(block, calls - len(out[k]))):
                    started = time.perf_counter()
                    result = await client.call_tool(tool, args)
                    out[k].append(time.perf_counter() - started)
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
    parser.add_argument("--pin", type=int, help=argparse.SUPPRESS)
    parser.add_argument("argv", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pin is not None:  # pin, then become the server (affinity survives exec)
        os.sched_setaffinity(0, {args.pin})
        os.execv(sys.executable, [sys.executable, *args.argv])
    if args.bare:
        bare_server()
        return
    server_cpu = None
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        client_cpu, server_cpu = sorted(os.sched_getaffinity(0))[:2]
        os.sched_setaffinity(0, {client_cpu})

    from mcp import StdioServerParameters

    with tempfile.TemporaryDirectory(prefix="memors-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        seed(db, args.documents)
        env = {**os.environ, "MEMORS_DB": str(db)}
        memors = StdioServerParameters(
            command=sys.executable, args=pinned(server_cpu, ["-m", "memors_cli", "serve"]), env=env
        )
        bare = StdioServerParameters(
            command=sys.executable,
            args=pinned(server_cpu, [str(Path(__file__).resolve()), "--bare"]),
            env=env,
        )
        query = {"query": "which node stays consistent during replication", "limit": 10}
        from memors_core import Memory

        with Memory.open(db) as memory:
            target = memory.search("replication", limit=1).results[0].address
        noop, get = anyio.run(
            time_calls, [(bare, "noop", {}), (memors, "get", {"address": target})], args.calls
        )
        (search,) = anyio.run(time_calls, [(memors, "search", query)], args.calls)
        library = time_library(db, query, args.calls)
    where = (
        f"client on cpu {client_cpu}, servers on cpu {server_cpu}"
        if server_cpu is not None
        else "unpinned"
    )
    print(
        f"stdio, {args.calls} calls each, no-op and get in alternating blocks of 20 ({where}); "
        f"store: {args.documents} documents"
    )
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
