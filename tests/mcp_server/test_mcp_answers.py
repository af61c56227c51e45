"""Agent-sized answers: a ``compact`` answer over MCP stays within a byte
budget, counts the rest and says how to get it; schemas are strict; a
structured result is not repeated as text."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memors_core import BadInput, Memory
from memors_core.testing import temporary_store
from memors_mcp.server import build_server
from memors_mcp.tools import COMPACT_DEFAULT_BYTES, COMPACT_DEFAULT_LIMIT, item_bytes

ENTITIES = 200
PASSAGES = 10_000


def _sentence(rng: random.Random, vocabulary: list[str]) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(14, 22))) + "."


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory):
    """10,000 distinct passages in 500 documents, 50 passages per entity: 200 page items."""
    rng = random.Random(19)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]
    names = [f"Service{n:03d}" for n in range(ENTITIES)]
    docs = []
    per_doc = PASSAGES // 500
    for d in range(500):
        paragraphs = [
            f"[[{names[(d * per_doc + p) % ENTITIES]}]] {_sentence(rng, vocabulary)}"
            for p in range(per_doc)
        ]
        docs.append({"text": "\n\n".join(paragraphs), "uri": f"doc-{d}"})
    with temporary_store(tmp_path_factory.mktemp("answers")) as db:
        memory = Memory.open(db)
        counts = memory.remember_many(docs)
        assert counts.passages == PASSAGES
        yield memory
        memory.close()


def call(memory: Memory, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        async with Client(build_server(memory)) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def answer_bytes(result: Any) -> int:
    """What the answer costs on the wire: its structured content and its text."""
    structured = json.dumps(result.structured_content, ensure_ascii=False).encode()
    text = "".join(c.text for c in result.content).encode()
    return len(structured) + len(text)


def test_the_default_compact_answer_fits_a_budget_and_counts_the_rest(big_store: Memory):
    (first,) = call(big_store, ("compact", {}))
    assert not first.is_error, first.content
    answer = first.structured_content
    items = answer["items"]
    assert answer["open"] >= ENTITIES  # a page item per entity (no duplicates among them)
    assert 1 <= len(items) < COMPACT_DEFAULT_LIMIT
    # Measured: 20 page items were ~150 KB of payload before the budget; now ~32 KB.
    assert sum(item_bytes(i) for i in items) <= COMPACT_DEFAULT_BYTES
    assert answer_bytes(first) <= COMPACT_DEFAULT_BYTES + 4096
    # the rest is counted and the way to it named
    assert answer["more"] == answer["open"] - len(items)
    assert answer["next"] == {"after": items[-1]["id"]}
    # each payload is whole: every live passage of its entity
    for item in items:
        assert len(item["payload"]["passages"]) == PASSAGES // ENTITIES
    # the text is a summary that names the next step, not the payloads again
    text = "".join(c.text for c in first.content)
    assert len(text) < 1000
    assert not any(p["text"] in text for item in items for p in item["payload"]["passages"])
    assert f"after={items[-1]['id']}" in text


def test_an_agent_pages_through_the_whole_queue_with_after(big_store: Memory):
    (first,) = call(big_store, ("compact", {}))
    open_ids = first.structured_content["open"]
    seen: list[int] = []
    args: dict[str, Any] = {}
    for _ in range(open_ids + 1):  # never more calls than items
        (result,) = call(big_store, ("compact", args))
        answer = result.structured_content
        assert sum(item_bytes(i) for i in answer["items"]) <= COMPACT_DEFAULT_BYTES
        seen.extend(i["id"] for i in answer["items"])
        assert answer["more"] == open_ids - len(seen)
        if "next" not in answer:
            break
        args = {"after": answer["next"]["after"]}
    assert len(seen) == len(set(seen)) == open_ids
    assert seen == sorted(seen)  # oldest first, none repeated, none skipped
    everything = big_store.compact(limit=0)
    assert everything.open == open_ids


def test_an_item_larger_than_the_budget_comes_alone_its_payload_paged(
    big_store: Memory, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("MEMORS_MCP_COMPACT_BYTES", "4000")
    first, second = call(big_store, ("compact", {"kinds": ["page"]}), ("compact", {"limit": 0}))
    answer = first.structured_content
    (item,) = answer["items"]
    assert answer["more"] == answer["open"] - 1 and answer["next"] == {"after": item["id"]}
    counts = second.structured_content  # limit 0: counts only, the rest all counted
    assert counts["items"] == [] and counts["more"] == counts["open"] and "next" not in counts
    # The item's passages come in pages; get pages through the rest, each answer within budget.
    address = f"memo://item/{item['id']}"
    paged = item["paged"]
    assert paged["lists"]["passages"] == {
        "total": PASSAGES // ENTITIES,
        "first": 1,
        "shown": len(item["payload"]["passages"]),
    }
    assert paged["next"] == {"address": address, "page": 2} and item_bytes(item) <= 4000
    text = "".join(c.text for c in first.content)
    assert f"call get with address={address}, page=2" in text
    assert f"Service000 ({PASSAGES // ENTITIES} passages" in text  # said of the whole payload
    passages = []
    for number in range(1, paged["pages"] + 1):
        (got,) = call(big_store, ("get", {"address": address, "page": number}))
        data = got.structured_content
        assert data["paged"]["page"] == number and item_bytes(data) <= 4000 + 512
        passages += data["payload"]["passages"]
    assert passages[: len(item["payload"]["passages"])] == item["payload"]["passages"]
    whole = big_store.get(address).payload["passages"]
    assert [p["address"] for p in passages] == [p["address"] for p in whole]


def test_a_bad_budget_setting_is_one_clear_error(
    fresh_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("MEMORS_MCP_COMPACT_BYTES", "lots")
    with Memory.open(fresh_store("m.db")) as memory, pytest.raises(BadInput) as err:
        build_server(memory)
    assert str(err.value) == "MEMORS_MCP_COMPACT_BYTES must be an integer, got 'lots'"


def test_tool_schemas_refuse_unknown_arguments(fresh_store, tmp_path: Path):
    with Memory.open(fresh_store("m.db")) as memory:

        async def main() -> Any:
            async with Client(build_server(memory)) as client:
                tools = (await client.list_tools()).tools
                typo = await client.call_tool("compact", {"limt": 1})
                return tools, typo

        tools, typo = anyio.run(main)
    assert len(tools) == 13
    for tool in tools:
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    assert typo.is_error and "unknown argument 'limt' for compact" in typo.content[0].text


def test_structured_results_are_not_repeated_as_text(fresh_store, tmp_path: Path):
    with Memory.open(fresh_store("m.db")) as memory:
        text = "\n\n".join(f"[[Raft]] paragraph {n} about leader election." for n in range(40))
        remembered, search = call(
            memory,
            ("remember", {"text": text}),
            ("search", {"query": "leader election", "limit": 40}),
        )
    for result in (remembered, search):
        assert not result.is_error
        (block,) = result.content
        assert "(the full result is structured content)" in block.text
        assert len(block.text) < 600 < len(json.dumps(result.structured_content))
    assert remembered.content[0].text.startswith(
        f"remembered {remembered.structured_content['document']}: 40 passage(s)"
    )
    assert search.content[0].text.startswith("40 result(s): memo://passage/")
