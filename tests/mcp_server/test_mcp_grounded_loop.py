"""An agent's page-writing loop through MCP, the way a model meets it: it
reads how to cite before it writes, its first draft (an invented date and an
uncited sentence merging two passages) is refused with flags that say what
to change, and the corrected draft (the date the source gives, markers
added) is stored with each sentence's sources."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from memors_core import Memory
from memors_mcp.server import build_server

PASSAGES = [
    "[[Raft]] was published in 2014 by Diego Ongaro and John Ousterhout.",
    "[[Raft]] elects a leader using randomized election timeouts.",
    "In [[Raft]], committed entries survive crashes because a majority of servers stores them.",
]
# Merges passages 2 and 3: neither alone holds half of its content words.
MERGED = (
    "Randomized timeouts quickly elect the protocol's cluster leader, and committed entries "
    "survive crashes on a majority of servers."
)


@pytest.fixture
def memory(store_address: Path | str):
    memory = Memory.open(store_address)
    for i, text in enumerate(PASSAGES):
        memory.remember(text, uri=f"raft-{i}")
    yield memory
    memory.close()


def test_an_agent_fixes_a_refused_draft_in_one_round(memory: Memory) -> None:
    async def agent(client: Client) -> dict:
        seen: dict = {}
        tools = {t.name: t for t in (await client.list_tools()).tools}
        seen["submit_description"] = tools["submit"].description
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt(prompts[0].name, {})
        seen["prompt"] = " ".join(m.content.text for m in prompt.messages)

        compacted = (await client.call_tool("compact", {"kinds": ["page"]})).structured_content
        (item,) = compacted["items"]
        seen["item"] = item
        refs = {p["text"]: p["ref"] for p in item["payload"]["passages"]}
        first, second, third = (refs[t] for t in PASSAGES)

        draft = f"Raft was published in 2015 by Diego Ongaro.\n\n{MERGED}\n"  # no markers yet
        args = {"item": item["id"], "fingerprint": item["fingerprint"], "title": "Raft"}
        seen["refused"] = (
            await client.call_tool("submit", {**args, "content": draft, "dry_run": True})
        ).structured_content

        fixed = (
            f"Raft was published in 2014 by Diego Ongaro [{first}].\n\n"
            f"{MERGED[:-1]} [{second}][{third}].\n"
        )
        seen["dry_run"] = (
            await client.call_tool("submit", {**args, "content": fixed, "dry_run": True})
        ).structured_content
        seen["stored"] = (
            await client.call_tool("submit", {**args, "content": fixed})
        ).structured_content
        address = seen["stored"]["address"]
        seen["page"] = (await client.call_tool("get", {"address": address})).structured_content
        return seen

    async def main() -> dict:
        async with Client(build_server(memory, "default")) as client:
            return await agent(client)

    seen = anyio.run(main)
    passages = {p["text"]: p["address"] for p in seen["item"]["payload"]["passages"]}

    # Before writing, the agent is told how to cite and what each check asks.
    for text in (seen["submit_description"], seen["prompt"]):
        assert "[n]" in text and "`ref`" in text
        for word in ("corruption", "substitution", "omission", "missing", "window"):
            assert word in text, word

    refused = seen["refused"]
    assert refused["stored"] is False
    (date,) = refused["checks"]["substitution"]["flagged"]
    # The invented year, its class, and where it was looked for: the passages the
    # sentence matches best, first the one that says 2014.
    assert date["token"] == "2015" and date["class"] == "date"
    assert date["sentence"] == "Raft was published in 2015 by Diego Ongaro."
    assert date["window"][0] == passages[PASSAGES[0]]
    (merged,) = refused["checks"]["corruption"]["flagged"]
    assert merged["sentence"] == MERGED
    assert merged["best_source"] == passages[PASSAGES[2]]
    # What none of the best source says: the words passage 2 holds (cite it too).
    assert {"randomized", "timeouts", "elect", "leader"} <= set(merged["missing"])
    assert merged["overlap"] < 0.5

    for report in (seen["dry_run"], seen["stored"]):
        assert all(c["passed"] for c in report["checks"].values()), report["checks"]
    assert seen["stored"]["stored"] is True

    page = seen["page"]
    assert page["status"] == "live" and page["is_inference"] == 1
    assert page["sentences"] == [
        {
            "text": "Raft was published in 2014 by Diego Ongaro.",
            "sources": [passages[PASSAGES[0]]],
            "flags": [],
        },
        {"text": MERGED, "sources": [passages[PASSAGES[1]], passages[PASSAGES[2]]], "flags": []},
    ]
    assert sorted(page["sources"]) == sorted(passages[t] for t in PASSAGES)
