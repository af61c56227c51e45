"""The MCP server as a real process: ``python -m memors_cli serve`` over stdio and HTTP.

Driven by the SDK's own client; plus the raw wire (nothing but JSON-RPC on
stdout), the HTTP refusals, the bearer token, DNS-rebinding protection,
``/metrics`` and the import boundary (no MCP code path reaches the CLI).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_clients.harness import (
    ServerProcess,
    full_scenario,
    http_get,
    http_post,
    server_env,
    stdio_params,
)
from memors_core.testing import passages_about
from paths import ROOT

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}


def test_stdio_serves_every_tool_resource_and_prompt(fresh_store, tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        async with Client(stdio_params(fresh_store("stdio.db"))) as client:
            return await full_scenario(client)

    stored = anyio.run(main)
    # what the server stored is in the file, for the CLI to see
    out = subprocess.run(
        [sys.executable, "-m", "memors_cli", "get", stored["page"], "--json"],
        capture_output=True,
        text=True,
        env=server_env(fresh_store("stdio.db")),
        check=True,
    )
    assert json.loads(out.stdout)["is_inference"] == 1


def test_http_serves_every_tool_resource_and_prompt(fresh_store, tmp_path: Path) -> None:
    with ServerProcess(fresh_store("http.db")) as server:

        async def main() -> dict[str, Any]:
            async with Client(server.url) as client:
                return await full_scenario(client)

        anyio.run(main)

        async def legacy() -> list[str]:
            # clients on the handshake-era protocol work too
            async with Client(server.url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                return [t.name for t in (await client.list_tools()).tools]

        assert len(anyio.run(legacy)) == 13
        status, headers, body = http_get(f"{server.base}/metrics")
        assert status == 200
        assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert 'memors_kb_pages{namespace="default"} 1.0' in body
        assert 'memors_kb_pages_stale{namespace="default"} 1.0' in body
        assert 'memors_store_work_items_total{event="done",kind="page"} 1.0' in body
        assert 'memors_kb_work_items_open{kind="stale",namespace="default"} 1.0' in body
        # refused pages: the corruption check, the omission check, the item no longer open
        assert 'memors_store_work_items_total{event="refused",kind="page"} 3.0' in body
        assert 'memors_store_work_items_total{event="refreshed",kind="merge"} 1.0' in body
        assert "memors_store_pages_marked_stale_total 1.0" in body
    assert server.proc.returncode == 0, server.stderr
    assert server.stdout_text == ""


def test_stdio_stdout_carries_nothing_but_protocol(fresh_store, tmp_path: Path) -> None:
    """Raw wire, debug logging on: every stdout line is JSON-RPC; the logs are on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "serve", "--log-level", "debug"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(fresh_store("raw.db")),
    )
    messages = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"text": "[[Raft]] elects a leader."}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "get", "arguments": {"address": "nonsense"}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "memo://item/9"}},
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
    ]
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[str] = []
    for message in messages:  # one at a time, as a client does: wait for each reply
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" in message:
            lines.append(proc.stdout.readline())
    out, err = proc.communicate(timeout=30)  # closing stdin ends the session
    assert proc.returncode == 0, err
    lines += out.splitlines()
    replies = [json.loads(line) for line in lines]  # every line parses
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert set(by_id) == {1, 2, 3, 4, 5}
    assert by_id[2]["result"]["structuredContent"]["document"].startswith("memo://document/")
    assert by_id[3]["result"]["isError"] is True
    assert "malformed address" in by_id[3]["result"]["content"][0]["text"]
    assert by_id[4]["error"]["code"] == -32602
    assert "document_remembered" in err  # the logs went to stderr
    assert not any("document_remembered" in line for line in lines)


def test_stray_output_during_start_up_goes_to_stderr() -> None:
    """While the store and plugins load, file descriptor 1 points at stderr."""
    code = (
        "import os, sys\n"
        "from memors_mcp.server import stdout_to_stderr\n"
        "with stdout_to_stderr():\n"
        "    print('stray print'); sys.stdout.flush(); os.write(1, b'raw write\\n')\n"
        "print('after')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "after\n"
    assert "stray print" in out.stderr and "raw write" in out.stderr


def test_http_body_limit_leaves_the_document_limit_in_charge(fresh_store, tmp_path: Path) -> None:
    """A document past the SDK's 4 MiB body default is judged by the store's own limit."""
    with ServerProcess(fresh_store("big.db"), MEMORS_MAX_DOCUMENT_BYTES="4500000") as server:

        async def main() -> tuple[Any, Any]:
            async with Client(server.url) as client:
                big = await client.call_tool("remember", {"text": "word " * 1_000_000})
                ok = await client.call_tool("remember", {"text": "[[Raft]] elects a leader."})
                return big, ok

        big, ok = anyio.run(main)
    assert big.is_error and "document too large (5000000 bytes" in big.content[0].text
    assert not ok.is_error


def test_stdio_serves_simultaneous_calls(fresh_store, tmp_path: Path) -> None:
    async def main() -> tuple[list[Any], Any]:
        async with Client(stdio_params(fresh_store("many.db"))) as client:
            results: list[Any] = []

            async def remember(n: int) -> None:
                results.append(
                    await client.call_tool("remember", {"text": f"[[Disk{n}]] holds block {n}."})
                )

            async def search() -> None:
                results.append(await client.call_tool("search", {"query": "block"}))

            async with anyio.create_task_group() as tg:
                for n in range(16):
                    tg.start_soon(remember, n)
                    tg.start_soon(search)
            final = await client.call_tool("search", {"query": "block", "limit": 50})
            return results, final

    results, final = anyio.run(main)
    assert len(results) == 32 and not any(r.is_error for r in results)
    assert len(final.structured_content["results"]) == 16


# --- HTTP: refusals, token, rebinding ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--host", "0.0.0.0"], {}, "not a loopback address (add --allow-remote"),
        (["--host", "memors.example.invalid"], {}, "not a loopback address"),
        (["--host", "0.0.0.0", "--allow-remote"], {}, "set MEMORS_HTTP_TOKEN"),
        (["--allow-remote"], {"MEMORS_HTTP_TOKEN": "  "}, "set MEMORS_HTTP_TOKEN"),
        (
            ["--host", "memors.example.invalid", "--allow-remote"],
            {"MEMORS_HTTP_TOKEN": "t" * 16},
            "cannot resolve",
        ),
        (["--port", "70000"], {}, "--port must be from 0 to 65535"),
    ],
)
def test_http_refuses_to_start(cli, args: list[str], env: dict[str, str], needle: str) -> None:
    r = cli("serve", "--http", *args, extra_env=env, timeout=60)
    assert r.code == 2, r
    assert needle in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err
    assert r.out == ""


def test_http_refuses_a_port_in_use(cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = cli("serve", "--http", "--port", str(port), timeout=60)
    assert r.code == 2 and f"cannot listen on 127.0.0.1:{port}" in r.err, r


def test_allow_remote_without_http_is_refused(cli) -> None:
    r = cli("serve", "--allow-remote", timeout=60)
    assert r.code == 2 and "--allow-remote goes with --http" in r.err


def test_allow_remote_requires_the_bearer_token_on_every_request(
    fresh_store, tmp_path: Path
) -> None:
    token = "s3cret-" + os.urandom(8).hex()
    args = ("--allow-remote", "--log-level", "debug")
    with ServerProcess(fresh_store("remote.db"), *args, MEMORS_HTTP_TOKEN=token) as server:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
            status, resp_headers, body = http_get(f"{server.base}/metrics", headers)
            assert status == 401, (headers, status)
            assert resp_headers["www-authenticate"].startswith("Bearer")
            assert "bearer token" in body
        status, _ = http_post(
            server.url,
            json.dumps(INITIALIZE).encode(),
            {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        assert status == 401
        status, _, body = http_get(f"{server.base}/metrics", {"Authorization": f"Bearer {token}"})
        assert status == 200 and "memors_kb_pages" in body

        async def with_token() -> Any:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client,
            ):
                await client.call_tool("remember", {"text": "[[Raft]] elects a leader."})
                return await client.call_tool("search", {"query": "leader"})

        assert anyio.run(with_token).structured_content["results"]

        async def without_token() -> None:
            async with Client(server.url) as client:
                await client.list_tools()

        with pytest.raises(BaseException):  # noqa: B017 - the transport's own error type
            anyio.run(without_token)
    assert server.proc.returncode == 0
    assert "unauthorized_request" in server.stderr  # refusals are logged …
    assert token not in server.stderr  # … but the token never is
    assert token not in server.stdout_text
    assert "bearer token required" in server.stderr


def test_dns_rebinding_protection_stays_on(fresh_store, tmp_path: Path) -> None:
    body = json.dumps(INITIALIZE).encode()
    post_headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    with ServerProcess(fresh_store("rebind.db")) as server:
        assert http_post(server.url, body, {**post_headers, "Host": "evil.example"})[0] == 421
        assert http_get(f"{server.base}/metrics", {"Host": "evil.example"})[0] == 421
        status, _ = http_post(server.url, body, {**post_headers, "Origin": "http://evil.example"})
        assert status == 403
        assert http_get(f"{server.base}/metrics", {"Origin": "http://evil.example"})[0] == 403
        good = {**post_headers, "Origin": f"http://localhost:{server.port}"}
        assert http_post(server.url, body, good)[0] == 200
    token = "t0ken-" + os.urandom(8).hex()
    with ServerProcess(
        fresh_store("rebind2.db"),
        "--allow-remote",
        MEMORS_HTTP_TOKEN=token,
        MEMORS_HTTP_ALLOWED_HOSTS="memors.example, proxy.example:8443",
    ) as server:
        auth = {**post_headers, "Authorization": f"Bearer {token}"}
        assert http_post(server.url, body, {**auth, "Host": "evil.example"})[0] == 421
        assert http_post(server.url, body, auth)[0] == 200
        # names the operator listed are let through, with any port or the one given
        for host in ("memors.example", "memors.example:8765", "proxy.example:8443"):
            assert http_post(server.url, body, {**auth, "Host": host})[0] == 200, host
        assert http_post(server.url, body, {**auth, "Host": "proxy.example:9999"})[0] == 421
        origin = {**auth, "Origin": "https://memors.example"}
        assert http_post(server.url, body, origin)[0] == 200


def test_server_stops_cleanly_on_sigterm(fresh_store, tmp_path: Path) -> None:
    server = ServerProcess(fresh_store("stop.db"))
    # Exit status 0: it ended on SIGTERM by itself. Had it not, stop() would
    # have killed it (status -9), whatever the machine's speed.
    assert server.stop() == 0
    assert "Traceback" not in server.stderr


# --- the documentation's example ------------------------------------------------------------


def test_the_documented_client_config_starts_the_server(fresh_store, tmp_path: Path) -> None:
    """docs/mcp.md's JSON entry, as a client would run it (with a temporary store)."""
    docs = (ROOT / "docs" / "mcp.md").read_text()
    block = re.search(r"```json\n(.*?)```", docs, re.S)
    assert block, "docs/mcp.md has no JSON config block"
    entry = json.loads(block.group(1))["mcpServers"]["memors"]
    assert entry["command"] == "memors-mcp" and entry["args"][0] == "serve"
    command = Path(sys.executable).parent / entry["command"]  # the venv's console script
    db = fresh_store("documented.db")
    env = {**server_env(db), **entry["env"], "MEMORS_DB": str(db)}
    params = StdioServerParameters(command=str(command), args=entry["args"], env=env)

    async def main() -> Any:
        async with Client(params) as client:
            await client.call_tool("remember", {"text": "[[Raft]] elects a leader."})
            return await client.call_tool("search", {"query": "leader"})

    assert anyio.run(main).structured_content["results"]
    namespace = entry["args"][entry["args"].index("--ns") + 1]
    out = subprocess.run(
        [str(command), "search", "leader", "--ns", namespace, "--json"],
        capture_output=True,
        text=True,
        env=server_env(db),
        check=True,
    )
    assert json.loads(out.stdout)["results"]  # stored in the documented namespace
    for name in ("remember", "record_fact", "propose_merge", "search", "get", "forget"):
        assert f"`{name}`" in docs
    for name in ("compact", "submit", "lint", "work_compaction_queue", "MEMORS_HTTP_TOKEN"):
        assert f"`{name}`" in docs
    for kind in ("page", "entity", "passage", "fact", "document", "item"):
        assert f"`memo://{kind}/{{id}}{{?page}}`" in docs


# --- the import boundary -------------------------------------------------------------------


def test_no_mcp_code_path_reaches_the_cli_or_the_executor(tmp_path: Path) -> None:
    """Import the server, build it over a store with every kind, serve a compact: no CLI."""
    document = "\n\n".join(passages_about("Raft", 3))
    code = f"""
import sys, anyio
from mcp import Client
import memors_mcp.server, memors_mcp.http
from memors_core import Memory
memory = Memory.open({str(tmp_path / "iso.db")!r})
memory.remember({document!r})
async def main():
    async with Client(memors_mcp.server.build_server(memory)) as client:
        r = await client.call_tool("compact", {{}})
        assert r.structured_content["open"] == 1, r
anyio.run(main)
print(sorted(m for m in sys.modules if m.startswith("memors_cli") or "executor" in m or "ollama" in m))
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=server_env(tmp_path / "x.db"),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
