"""Helpers for the MCP server tests: real server processes and one scenario.

``ServerProcess`` runs ``python -m memors_cli serve --http --port 0`` and
reads the bound port from its one start-up line on stderr; ``stdio_params``
builds the parameters for the SDK's stdio client. ``full_scenario`` drives
every tool, resource template and the prompt through any connected
``mcp.Client`` (in-process, stdio or HTTP), errors included.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from memors_core.testing import passages_about
from memors_core.testing.server import ServerProcess as _ServerProcess

TOOLS = {
    "remember",
    "record_fact",
    "propose_merge",
    "search",
    "get",
    "forget",
    "compact",
    "submit",
    "lint",
    "rename_entity",
    "undo_merge",
    "reopen",
    "corrections",
}
TEMPLATES = {
    f"memo://{t}/{{id}}{{?page}}" for t in ("page", "entity", "passage", "fact", "document", "item")
}
PROMPT = "work_compaction_queue"
#: Small enough that an "oversized" document is cheap to send.
SMALL_DOCUMENT_LIMIT = 50_000
DUPLICATE = (
    "The quick brown fox jumps over the lazy dog near the river bank while the farmer "
    "watches from the old wooden fence."
)


def server_env(db: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "MEMORS_DB": str(db),
        "MEMORS_MAX_DOCUMENT_BYTES": str(SMALL_DOCUMENT_LIMIT),
    }
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    env.pop("MEMORS_HTTP_TOKEN", None)
    env.update(extra)
    return env


def stdio_params(db: Path, *args: str, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memors_cli", "serve", *args],
        env=server_env(db, **extra),
    )


class ServerProcess(_ServerProcess):
    """``memors-mcp serve --http`` on an ephemeral loopback port, with the tests'
    environment (:func:`server_env`) and ``extra`` settings."""

    def __init__(self, db: Path, *args: str, **extra: str) -> None:
        super().__init__(db, *args, env=server_env(db, **extra))


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """A plain GET: (status, headers, body), for any status."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def http_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# --- the scenario ----------------------------------------------------------------------------


class Calls:
    """Tool calls with assertions on the outcome."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def ok(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.client.call_tool(name, args or {})
        text = result.content[0].text if result.content else ""
        assert not result.is_error, f"{name} failed: {text}"
        assert isinstance(result.structured_content, dict), result
        return result.structured_content

    async def error(self, name: str, args: dict[str, Any], *needles: str) -> str:
        result = await self.client.call_tool(name, args)
        text = " ".join(c.text for c in result.content if hasattr(c, "text"))
        assert result.is_error, f"{name} {args} should fail, got {result.structured_content}"
        for needle in needles:
            assert needle.lower() in text.lower(), f"{needle!r} not in error {text!r}"
        return text


def page_content() -> str:
    sentences = [p.replace("[[", "").replace("]]", "") for p in passages_about("Raft", 3)]
    return "\n".join(sentences) + "\n\nThe leader is n1. The leader is n2.\n"


async def full_scenario(client: Client) -> dict[str, Any]:
    """Every tool, template and the prompt, with the errors; returns what it stored."""
    c = Calls(client)
    tools = await client.list_tools()
    assert {t.name for t in tools.tools} == TOOLS

    # remember, record_fact, propose_merge
    doc = await c.ok("remember", {"text": "\n\n".join(passages_about("Raft", 3)), "title": "Raft"})
    assert set(doc) == {"document", "passages", "entities"}
    assert len(doc["passages"]) == 3 and len(doc["entities"]) == 1
    other = await c.ok(
        "remember", {"text": "A protocol for replicated logs.", "entities": ["Raft consensus"]}
    )
    for n in (1, 2):
        await c.ok("remember", {"text": DUPLICATE, "uri": f"file:///copy{n}.txt"})
    f1 = await c.ok("record_fact", {"subject": "Raft", "predicate": "leader", "value": "n1"})
    f2 = await c.ok("record_fact", {"subject": "Raft", "predicate": "leader", "value": "n2"})
    assert set(f1) == {"fact"} and f1["fact"].startswith("memo://fact/")
    merge = await c.ok("propose_merge", {"entities": ["Raft", "Raft consensus"]})
    assert merge["status"] == "open" and merge["entities"][1] == other["entities"][0]

    # search
    hits = await c.ok("search", {"query": "which node stays consistent during replication?"})
    assert hits["results"] and set(hits["results"][0]) == {
        "address",
        "granularity",
        "text",
        "score",
    }
    facts = await c.ok("search", {"query": "leader", "granularity": "fact"})
    assert {h["address"] for h in facts["results"]} == {f1["fact"], f2["fact"]}
    assert (await c.ok("search", {"query": "replication", "namespace": "elsewhere"}))[
        "results"
    ] == []

    # compact
    queue = await c.ok("compact")
    assert set(queue) == {"namespace", "created", "open", "items", "more"}
    assert queue["more"] == 0  # all four fit in one answer
    kinds = {i["kind"]: i for i in queue["items"]}
    assert set(kinds) == {"page", "conflict", "merge", "duplicate"}, kinds.keys()
    assert queue["open"] == queue["created"] == 4
    assert set(queue["items"][0]) == {"id", "kind", "status", "fingerprint", "payload"}
    counts = await c.ok("compact", {"limit": 0})
    assert counts["items"] == [] and counts["open"] == 4 and counts["created"] == 0

    page_item = kinds["page"]["id"]
    conflict_item = kinds["conflict"]["id"]

    # errors: each one a tool error with a specific message, and the server keeps serving
    await c.error("submit", {"item": 9999, "skip": True, "reason": "x"}, "no work item 9999")
    await c.error(
        "submit", {"item": conflict_item, "content": "x", "title": "y"}, "conflict item", "keep"
    )
    await c.error("submit", {"item": conflict_item, "keep": f1["fact"], "dryrun": True}, "dryrun")
    await c.error("submit", {"item": page_item, "skip": True}, "reason")
    await c.error("get", {"address": "memo://nope/1"}, "unknown address type 'nope'")
    await c.error("get", {"address": "not an address"}, "malformed address")
    await c.error(
        "get", {"address": "memo://fact/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa"}, "nothing at"
    )
    await c.error(
        "forget", {"address": "memo://entity/" + doc["entities"][0][14:]}, "only documents"
    )
    await c.error("remember", {"text": "x" * (SMALL_DOCUMENT_LIMIT + 1)}, "too large")
    await c.error("remember", {"text": "   "}, "empty")
    await c.error("remember", {"text": 42}, "text", "valid string")
    await c.error("search", {"query": "x", "limit": "ten"}, "limit", "integer")
    await c.error("search", {"query": "x", "granularity": "word"}, "granularity")
    await c.error("search", {"query": "x" * 10_001}, "query too long")
    await c.error("record_fact", {"subject": "Raft", "predicate": "p"}, "value is required")
    await c.error(
        "record_fact",
        {"subject": "Raft", "predicate": "p", "value": "v", "valid_from": "someday"},
        "valid_from",
    )
    await c.error("compact", {"kinds": ["nonsense"]}, "unknown kind 'nonsense'")
    await c.error("compact", {"limit": -1}, "limit")
    await c.error("propose_merge", {"entities": ["Raft"]}, "entities")
    await c.error("lint", {"namespace": "no spaces allowed"}, "bad namespace")
    await c.error("submit", {"item": page_item, "dry_run": "yes"}, "dry_run")
    assert (await c.ok("search", {"query": "replication"}))["results"]  # still serving

    # submit: a page through dry run, a refusal by the checks, a fix, the real thing
    dry = await c.ok(
        "submit", {"item": page_item, "content": page_content(), "title": "Raft", "dry_run": True}
    )
    assert dry["stored"] is False and dry["address"] is None and dry["status"] == "open"
    assert {"item", "kind", "status", "stored", "address", "diff", "checks"} <= set(dry)
    assert set(dry["checks"]) >= {"omission", "corruption"}
    assert all(ch["passed"] for ch in dry["checks"].values()), dry["checks"]
    bad = page_content() + "\nPenguins invented it in Antarctica during winter.\n"
    refused = await c.ok("submit", {"item": page_item, "content": bad, "title": "Raft"})
    assert refused["stored"] is False and refused["checks"]["corruption"]["passed"] is False
    assert "Penguins" in refused["checks"]["corruption"]["flagged"][0]["sentence"]
    missing = "\n".join(page_content().splitlines()[:3])  # no facts: the omission check flags
    omitted = await c.ok("submit", {"item": page_item, "content": missing, "title": "Raft"})
    assert omitted["stored"] is False
    assert {f["fact"] for f in omitted["checks"]["omission"]["flagged"]} == {f1["fact"], f2["fact"]}
    stored = await c.ok(
        "submit", {"item": f"memo://item/{page_item}", "content": page_content(), "title": "Raft"}
    )
    assert stored["stored"] is True and stored["status"] == "done"
    page = stored["address"]
    assert page.startswith("memo://page/")
    await c.error(
        "submit", {"item": page_item, "content": page_content(), "title": "Raft"}, "not open"
    )

    # the other kinds
    done = await c.ok("submit", {"item": conflict_item, "keep": f1["fact"]})
    assert done["stored"] is True and done["kind"] == "conflict"
    # the page changed the merge item's inputs: refused until compact refreshes its payload
    merge_item = kinds["merge"]["id"]
    await c.error("submit", {"item": merge_item, "reject": True}, "changed", "compact")
    fresh = {i["kind"]: i for i in (await c.ok("compact"))["items"]}
    assert fresh["merge"]["id"] == merge_item and "page" not in fresh
    done = await c.ok("submit", {"item": merge_item, "resolution": {"reject": True}})
    assert done["stored"] is True
    kinds["duplicate"] = fresh["duplicate"]
    dup_passages = [p["address"] for p in kinds["duplicate"]["payload"]["passages"]]
    done = await c.ok("submit", {"item": kinds["duplicate"]["id"], "keep": dup_passages[0]})
    assert done["stored"] is True

    # get
    got = await c.ok("get", {"address": page})
    assert got["type"] == "page" and got["status"] == "live" and got["is_inference"] == 1
    assert set(got["sources"]) == set(doc["passages"])
    got = await c.ok("get", {"address": dup_passages[1]})
    assert got["status"] == "forgotten"
    got = await c.ok("get", {"address": f2["fact"]})
    assert got["status"] == "superseded"

    # resources: the templates, the live page listed, each type read as text, a missing one
    templates = await client.list_resource_templates()
    assert {t.uri_template for t in templates.resource_templates} == TEMPLATES
    listed = await client.list_resources()
    assert page in {str(r.uri) for r in listed.resources}
    page_text = (await client.read_resource(page)).contents[0].text
    assert "The leader is n1." in page_text and doc["passages"][0] in page_text
    entity_text = (await client.read_resource(doc["entities"][0])).contents[0].text
    assert entity_text.startswith("# Raft") and "leader: n1" in entity_text and page in entity_text
    passage_text = (await client.read_resource(doc["passages"][0])).contents[0].text
    assert "replication round 0" in passage_text
    fact_text = (await client.read_resource(f1["fact"])).contents[0].text
    assert "leader: n1" in fact_text
    doc_text = (await client.read_resource(doc["document"])).contents[0].text
    assert doc_text.startswith("# Raft") and "replication round 2" in doc_text
    item_text = (await client.read_resource(f"memo://item/{page_item}")).contents[0].text
    assert "page (done)" in item_text and '"entity"' in item_text
    for missing_uri in (
        "memo://page/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
        "memo://item/424242",
        "memo://entity/not-a-uuid",
    ):
        try:
            await client.read_resource(missing_uri)
        except MCPError as exc:
            assert exc.code == -32602, exc
        else:
            raise AssertionError(f"{missing_uri} should not be found")

    # the prompt
    prompts = await client.list_prompts()
    assert PROMPT in {p.name for p in prompts.prompts}
    walk = await client.get_prompt(PROMPT, {"kinds": "page,stale"})
    text = walk.messages[0].content.text
    for step in ("`compact`", "dry_run", "payload only", "omission", "corruption", '"page"'):
        assert step in text, step

    # forget: the page goes stale, lint says so
    gone = await c.ok("forget", {"address": doc["passages"][0], "reason": "wrong"})
    assert gone["forgotten"] == [doc["passages"][0]]
    report = await c.ok("lint")
    assert set(report) == {"namespace", "findings"}
    stale = [f for f in report["findings"] if f["rule"] == "stale-page"]
    assert stale and stale[0]["address"] == page
    assert set(stale[0]) == {"rule", "address", "message", "related"}
    after = await c.ok("compact", {"kinds": ["stale"]})
    assert [i["kind"] for i in after["items"]] == ["stale"]
    return {"page": page, "document": doc["document"], "facts": [f1["fact"], f2["fact"]]}
