"""Isolation: every operation in one namespace is blind to every other.

Two namespaces hold look-alike content (the same texts, uris, entity names,
facts, duplicates and merge candidates). Everything done in ``beta`` —
search at every granularity, get, forget, submit, purge, compact, lint,
entity and fact listings, items, metrics, export, MCP resources — must never
show, touch or count a row of ``alpha``: no output of ``beta`` mentions any
id of ``alpha``, and ``alpha``'s rows are byte-identical afterwards. Through
the library, the CLI and MCP. Then HTTP with ``--allow-remote``: no request
without the bearer token gets through, and the token never reaches a log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_clients.harness import ServerProcess, http_get, http_post
from memors_core import MemorsError, Memory
from memors_core.testing import passages_about
from memors_core.wire import to_json
from memors_mcp.server import build_server
from store_checks import connect

DUPLICATE = (
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer "
    "watches from the old wooden fence."
)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def populate(memory: Memory, ns: str) -> dict[str, Any]:
    """The same content in any namespace: pages, a conflict, a merge, duplicates."""
    docs = [
        memory.remember(text, uri=f"raft-{i}", namespace=ns)
        for i, text in enumerate(passages_about("Raft", 4))
    ]
    memory.remember("A log replication protocol.", entities=["Raft consensus"], namespace=ns)
    for i in (1, 2):
        memory.remember(DUPLICATE, uri=f"copy-{i}", namespace=ns)
    f1 = memory.record_fact("Raft", "leader", "n1", namespace=ns)
    memory.record_fact("Raft", "leader", "n2", namespace=ns)
    memory.propose_merge(["Raft", "Raft consensus"], namespace=ns)
    queue = memory.compact(namespace=ns)
    kinds = {i.kind: i for i in queue.items}
    assert set(kinds) == {"page", "conflict", "merge", "duplicate"}, kinds
    item = kinds["page"]
    content = "\n".join(
        p["text"].replace("[[", "").replace("]]", "") for p in item.payload["passages"]
    )
    page = memory.submit(
        item.id, content=content + "\nleader n1. leader n2.", title="Raft", namespace=ns
    )
    assert page.stored
    return {
        "documents": [d.document for d in docs],
        "passages": [p for d in docs for p in d.passages],
        "fact": f1.fact,
        "page": page.address,
        "entity": docs[0].entities[0],
        "items": {k: i.id for k, i in kinds.items()},
    }


def namespace_ids(db: Path, ns: str) -> set[str]:
    """Every UUID stored in ``ns``'s rows."""
    conn = connect(db)
    try:
        ids: set[str] = set()
        for table in ("documents", "passages", "entities", "facts", "pages"):
            ids.update(
                r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE namespace = ?", (ns,))
            )
        return ids
    finally:
        conn.close()


def namespace_rows(db: Path, ns: str) -> list[tuple]:
    """A dump of every row that belongs to ``ns`` (to prove it is untouched)."""
    conn = connect(db)
    try:
        out: list[tuple] = []
        for table in ("documents", "passages", "entities", "aliases", "facts", "merge_candidates",
                      "pages", "tombstones", "work_items"):  # fmt: skip
            out += [
                (table, *r)
                for r in conn.execute(f"SELECT * FROM {table} WHERE namespace = ?", (ns,))
            ]
        out += [("mentions", *r) for r in conn.execute(
            "SELECT m.* FROM mentions m JOIN passages p ON p.id = m.passage WHERE p.namespace = ?",
            (ns,))]  # fmt: skip
        return sorted(out, key=repr)
    finally:
        conn.close()


def leaks(output: Any, foreign: set[str]) -> set[str]:
    text = output if isinstance(output, str) else json.dumps(to_json(output))
    return set(UUID.findall(text)) & foreign


@pytest.fixture
def two_stores(fresh_store) -> tuple[Path | str, dict[str, Any], dict[str, Any]]:
    db = fresh_store("iso.db")
    with Memory.open(db) as memory:
        alpha = populate(memory, "alpha")
        beta = populate(memory, "beta")
    return db, alpha, beta


def test_the_library_keeps_namespaces_apart(two_stores):
    db, alpha, beta = two_stores
    foreign = namespace_ids(db, "alpha")
    before = namespace_rows(db, "alpha")
    with Memory.open(db) as memory:
        # the same uri in another namespace is another document, not a new version
        assert beta["documents"][0] != alpha["documents"][0]
        assert memory.get(beta["documents"][0], namespace="beta").version == 1
        outputs: list[Any] = []
        for granularity in ("passage", "page", "fact", "entity", "all"):
            found = memory.search("raft leader replication fox", granularity, namespace="beta")
            assert found.results, granularity
            outputs.append(found)
        outputs += [
            memory.entities(namespace="beta"),
            memory.entity("Raft", namespace="beta"),
            memory.facts(namespace="beta"),
            memory.facts("Raft", namespace="beta"),
            memory.items(namespace="beta"),
            memory.lint(namespace="beta"),
            memory.compact(namespace="beta"),
            memory.compact(namespace="beta", full=True),
            memory.get(beta["page"], namespace="beta"),
            memory.get(beta["entity"], namespace="beta"),
        ]
        for item in beta["items"].values():
            outputs.append(memory.get(f"memo://item/{item}", namespace="beta"))
        for output in outputs:
            assert not leaks(output, foreign), output
        # duplicates and merge candidates pair within a namespace only
        dup = memory.items(kind="duplicate", namespace="beta").items[0]
        assert len(dup.payload["passages"]) == 2

        # alpha's addresses do not exist from beta: get, forget, submit, purge, cite, source
        targets = [*alpha["documents"][:1], alpha["passages"][0], alpha["fact"], alpha["page"],
                   alpha["entity"]]  # fmt: skip
        for target in targets:
            with pytest.raises(MemorsError, match="nothing at"):
                memory.get(target, namespace="beta")
            if "/entity/" not in target:
                with pytest.raises(MemorsError, match="nothing at"):
                    memory.forget(target, namespace="beta")
                with pytest.raises(MemorsError, match="nothing at"):
                    memory.purge(target, namespace="beta")
        for item in alpha["items"].values():
            with pytest.raises(MemorsError, match=f"no work item {item} in namespace 'beta'"):
                memory.submit(item, skip=True, reason="from beta", namespace="beta")
            with pytest.raises(MemorsError, match="nothing at"):
                memory.get(f"memo://item/{item}", namespace="beta")
        with pytest.raises(MemorsError, match="no passage"):
            memory.record_fact("Raft", "p", "v", source=alpha["passages"][0], namespace="beta")
        stale = memory.compact(kinds=["conflict"], namespace="beta").items[0]
        with pytest.raises(MemorsError):
            memory.submit(stale.id, keep=alpha["fact"], namespace="beta")
        page_item = memory.remember("\n\n".join(passages_about("Paxos", 3)), namespace="beta")
        item = memory.compact(kinds=["page"], namespace="beta").items[0]
        with pytest.raises(MemorsError, match="not among"):
            memory.submit(item.id, content="Paxos.", title="Paxos", cites=[alpha["passages"][0]],
                          namespace="beta")  # fmt: skip
        assert page_item.document
        # forgetting and compacting in beta changed nothing of alpha
        memory.forget(beta["passages"][0], namespace="beta")
        memory.compact(namespace="beta")
        metrics = memory.metrics()
    assert namespace_rows(db, "alpha") == before
    # gauges carry each namespace's own figures
    assert 'memors_kb_pages{namespace="alpha"} 1.0' in metrics
    assert 'memors_kb_pages_stale{namespace="alpha"} 0.0' in metrics
    assert 'memors_kb_pages_stale{namespace="beta"} 1.0' in metrics
    assert 'memors_kb_work_items_open{kind="page",namespace="beta"} 1.0' in metrics
    assert 'memors_kb_work_items_open{kind="page",namespace="alpha"} 0.0' in metrics
    assert 'memors_kb_work_items_open{kind="stale",namespace="alpha"} 0.0' in metrics


def run_cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORS_DB": str(db)}
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "memors_cli", *args], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip


def test_the_cli_keeps_namespaces_apart(two_stores):
    db, alpha, beta = two_stores
    foreign = namespace_ids(db, "alpha")
    before = namespace_rows(db, "alpha")
    for args in (
        ["search", "raft leader fox", "--granularity", "all"],
        ["entity", "list"],
        ["entity", "show", "Raft"],
        ["fact", "list"],
        ["items"],
        ["compact"],
        ["lint"],
        ["export"],
        ["get", beta["page"]],
    ):
        r = run_cli(db, *args, "--ns", "beta", "--json")
        assert r.returncode in (0, 1), (args, r.stderr)
        assert not leaks(r.stdout, foreign), args
    for target in (alpha["page"], alpha["fact"], alpha["passages"][0], alpha["documents"][0]):
        for args in (["get", target], ["forget", target], ["purge", target, "--yes"]):
            r = run_cli(db, *args, "--ns", "beta")
            assert r.returncode == 2 and "nothing at" in r.stderr, (args, r.stderr)
    item = alpha["items"]["merge"]
    r = run_cli(db, "submit", str(item), "--reject", "--ns", "beta")
    assert r.returncode == 2 and f"no work item {item} in namespace 'beta'" in r.stderr
    r = run_cli(db, "items", "show", str(item), "--ns", "beta")
    assert r.returncode == 2
    assert namespace_rows(db, "alpha") == before


def test_mcp_keeps_namespaces_apart(two_stores):
    db, alpha, beta = two_stores
    foreign = namespace_ids(db, "alpha")
    before = namespace_rows(db, "alpha")
    memory = Memory.open(db)

    async def session() -> None:
        # a server whose default namespace is beta; tools may also name it
        async with Client(build_server(memory, "beta")) as client:
            texts: list[str] = []

            async def ok(tool: str, args: dict[str, Any]) -> None:
                result = await client.call_tool(tool, args)
                assert not result.is_error, (tool, result.content)
                texts.append(json.dumps(result.structured_content))

            for granularity in ("passage", "page", "fact", "entity", "all"):
                await ok("search", {"query": "raft leader fox", "granularity": granularity})
            await ok("search", {"query": "raft leader", "namespace": "beta"})
            await ok("compact", {})
            await ok("lint", {})
            await ok("get", {"address": beta["page"]})
            for target in (alpha["page"], alpha["fact"], alpha["passages"][0], alpha["entity"]):
                for tool in ("get", "forget"):
                    result = await client.call_tool(tool, {"address": target})
                    assert result.is_error, (tool, target)
                    message = result.content[0].text  # (it may repeat the address it was given)
                    assert "nothing at" in message or "only documents" in message, message
                kind, ident = target[7:].split("/")
                with pytest.raises(MCPError):
                    await client.read_resource(f"memo://{kind}/{ident}")
            for item in alpha["items"].values():
                result = await client.call_tool(
                    "submit", {"item": item, "skip": True, "reason": "x"}
                )
                assert result.is_error and "namespace 'beta'" in result.content[0].text
                with pytest.raises(MCPError):
                    await client.read_resource(f"memo://item/{item}")
            resources = await client.list_resources()
            texts += [str(r.uri) for r in resources.resources]
            assert str(resources.resources[-1].uri) == beta["page"]
            prompt = await client.get_prompt("work_compaction_queue", {})
            texts += [m.content.text for m in prompt.messages if hasattr(m.content, "text")]
            for text in texts:
                assert not leaks(text, foreign), text

    try:
        anyio.run(session)
    finally:
        memory.close()
    assert namespace_rows(db, "alpha") == before


# --- HTTP with --allow-remote: the bearer token --------------------------------------------------


def test_remote_http_lets_nothing_through_without_the_token_and_never_logs_it(
    fresh_store, tmp_path: Path
):
    token = "tok-" + os.urandom(16).hex()
    db = fresh_store("remote.db")
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"text": "written without a token"}},
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    wrong = [
        {},
        {"Authorization": token},  # no scheme
        {"Authorization": f"Basic {token}"},
        {"Authorization": f"Bearer {token[:-1]}"},  # a prefix
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer {token.upper()}"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Bearer {token}, Bearer {token}"},
        {"X-Authorization": f"Bearer {token}"},
    ]
    args = ("--allow-remote", "--log-level", "debug")  # debug: every log line, access log on
    # (the throttle would answer 429 after ten wrong tokens: raised to see every 401)
    throttle = {"MEMORS_HTTP_AUTH_FAILURES": "1000"}
    with ServerProcess(db, *args, MEMORS_HTTP_TOKEN=token, **throttle) as server:
        for extra in wrong:
            for path in ("/mcp", "/mcp/", "/", "/metrics", "/nowhere", "/ns/default/"):
                status, _ = http_post(f"{server.base}{path}", json.dumps(call).encode(),
                                      {**headers, **extra})  # fmt: skip
                assert status == 401, (extra, path, status)
                status, _, body = http_get(f"{server.base}{path}", extra)
                if path.startswith(("/mcp", "/metrics")):
                    assert status == 401, (extra, path)
                else:  # a browser is sent to sign in (the redirect followed): nothing else
                    assert status == 200 and 'action="/login"' in body, (extra, path)
                    assert "default" not in body.split("<main>", 1)[1], (extra, path)
        status, _, _body = http_get(f"{server.base}/metrics", {"Authorization": f"bearer {token}"})
        assert status == 200  # the scheme is case-insensitive, the token is not
    assert token not in server.stderr and token[:-1] not in server.stderr
    assert token.upper() not in server.stderr
    assert token not in server.stdout_text
    assert "unauthorized_request" in server.stderr
    # nothing written by the refused requests
    with Memory.open(db) as memory:
        assert memory.search("written without a token").results == []
