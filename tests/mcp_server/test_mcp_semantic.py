"""The MCP ``search`` tool by meaning: its ``mode`` input, the mode and
notice in its structured output, through the SDK's own client."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from memors_mcp.server import build_server

pytestmark = pytest.mark.semantic


def call(memory, name: str, arguments: dict):
    async def main():
        async with Client(build_server(memory, "default")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools, await client.call_tool(name, arguments)

    return anyio.run(main)


def test_search_takes_a_mode_and_says_which_ranked(vector_memory) -> None:
    vector_memory.remember(
        "Melanie adopted a young rescue dog from the shelter.", entities=["Melanie"]
    )
    vector_memory.remember("The quarterly budget review moved to Thursday.")
    assert vector_memory.wait_for_vectors()  # the server's background run made them
    tools, result = call(vector_memory, "search", {"query": "who got a new puppy?"})
    assert not result.is_error
    assert result.structured_content["mode"] == "hybrid"
    [hit] = result.structured_content["results"]
    assert hit["text"].startswith("Melanie adopted")
    schema = tools["search"].input_schema["properties"]["mode"]
    assert "by meaning" in schema["description"]
    assert {"lexical", "semantic", "hybrid"} <= set(
        v for option in schema.get("anyOf", [schema]) for v in option.get("enum", [])
    )
    _, lexical = call(vector_memory, "search", {"query": "who got a new puppy?", "mode": "lexical"})
    assert lexical.structured_content == {"results": [], "mode": "lexical"}


def test_a_mode_that_cannot_be_used_is_a_notice_not_an_error(vector_memory) -> None:
    vector_memory.record_fact("Melanie", "adopted", "a dog")
    _, result = call(
        vector_memory, "search", {"query": "dog", "granularity": "fact", "mode": "semantic"}
    )
    assert not result.is_error
    assert result.structured_content["mode"] == "lexical"
    assert result.structured_content["notice"].startswith("searched by words only")
    assert result.structured_content["results"][0]["text"].startswith("Melanie adopted a dog")
    _, bad = call(vector_memory, "search", {"query": "dog", "mode": "fuzzy"})
    assert bad.is_error
