"""Every answer fits an agent: on a 10,000-passage store with a 200-member
duplicate cluster (each member a different variant of one long paragraph,
also an entity's passages), no tool answer and no resource read exceeds the
cap — the budget (``MEMORS_MCP_COMPACT_BYTES``, 32 KiB) plus a small
envelope — and whatever was cut is counted and reachable page by page.

Through a real MCP client talking to ``memors-mcp serve`` over stdio."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_clients.harness import stdio_params
from memors_core import Memory
from memors_core.testing import temporary_store
from memors_mcp.tools import COMPACT_DEFAULT_BYTES

#: The cap of one answer: the budget of its content plus the envelope
#: (the text summary and the answer's small fields).
CAP = COMPACT_DEFAULT_BYTES + 4096
PASSAGES = 10_000
MEMBERS = 200


def _words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(n))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    """9,800 distinct passages about 200 services, and 200 documents each
    holding one variant (one word changed) of a 160-word paragraph about
    [[Licensing]]: one cluster of 200, 19,900 qualifying pairs."""
    rng = random.Random(31)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]
    docs = []
    for d in range(490):
        paragraphs = [
            f"[[Service{(d * 20 + p) % 200:03d}]] {_words(rng, vocabulary, rng.randint(14, 22))}."
            for p in range(20)
        ]
        docs.append({"text": "\n\n".join(paragraphs), "uri": f"doc-{d}"})
    base = _words(rng, vocabulary, 160).split()
    for m in range(MEMBERS):
        words = list(base)
        words[5 + m % 150] = f"variant{m}"
        docs.append({"text": "[[Licensing]] " + " ".join(words) + ".", "uri": f"licence-{m}"})
    with temporary_store(tmp_path_factory.mktemp("cap")) as db:
        with Memory.open(db) as memory:
            counts = memory.remember_many(docs)
            assert counts.passages == PASSAGES
        yield db


def size_of(result: Any) -> int:
    """An answer on the wire: its structured content and its text."""
    structured = json.dumps(result.structured_content, ensure_ascii=False).encode()
    return len(structured) + sum(len(c.text.encode()) for c in result.content)


class Measured:
    """Tool calls that record each tool's largest answer."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.largest: dict[str, int] = {}

    def note(self, name: str, size: int) -> None:
        self.largest[name] = max(self.largest.get(name, 0), size)

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, args)
        assert not result.is_error, (name, args, result.content)
        self.note(name, size_of(result))
        return result.structured_content

    async def pages(self, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Every page of one answer, following ``paged.next``."""
        out = [await self.call(name, args)]
        while "next" in out[-1].get("paged", {}):
            out.append(await self.call(name, {**args, **out[-1]["paged"]["next"]}))
        return out

    async def read(self, uri: str) -> str:
        result = await self.client.read_resource(uri)
        text = "".join(c.text for c in result.contents)
        self.note("resource", len(text.encode()))
        return text


def test_every_answer_fits_and_the_rest_is_reachable(store: Path):
    async def main() -> dict[str, int]:
        async with Client(stdio_params(store)) as client:
            m = Measured(client)
            first = await m.call("compact", {})
            assert first["open"] > MEMBERS  # a page item per entity, the cluster
            dup = (await m.call("compact", {"kinds": ["duplicate"]}))["items"][0]
            assert dup["paged"]["lists"]["passages"]["total"] == MEMBERS
            assert dup["paged"]["next"] == {"address": f"memo://item/{dup['id']}", "page": 2}
            await m.call("compact", {"limit": 1000})
            await m.call("compact", {"kinds": ["page"], "limit": 1000})

            # get of the cluster, page by page: every member once, every listed pair once
            pages = await m.pages("get", {"address": f"memo://item/{dup['id']}"})
            members = [p["address"] for page in pages for p in page["payload"]["passages"]]
            pairs = [(x["a"], x["b"]) for page in pages for x in page["payload"]["pairs"]]
            assert len(members) == len(set(members)) == MEMBERS
            assert len(pairs) == len(set(pairs)) == 1000
            assert pages[0]["payload"]["pair_count"] == MEMBERS * (MEMBERS - 1) // 2
            # compact's first page of the item is get's first page
            assert dup["payload"]["passages"] == pages[0]["payload"]["passages"]

            entity = (await m.call("search", {"query": "Licensing", "granularity": "entity"}))[
                "results"
            ][0]["address"]
            shown = await m.pages("get", {"address": entity})
            assert sum(len(p["passages"]) for p in shown) == MEMBERS
            queue, args = [], {"kinds": ["page"]}
            while True:  # the whole page queue, answer by answer
                answer = await m.call("compact", args)
                queue += answer["items"]
                if "next" not in answer:
                    break
                args = {"kinds": ["page"], **answer["next"]}
            assert len(queue) == answer["open"]
            page_item = next(i for i in queue if i["payload"]["entity"]["name"] == "Licensing")
            assert page_item["paged"]["lists"]["passages"]["total"] == MEMBERS
            await m.pages("get", {"address": f"memo://item/{page_item['id']}"})
            await m.call("get", {"address": members[0]})

            found = await m.pages("search", {"query": "Licensing", "limit": 1000})
            assert sum(len(p["results"]) for p in found) == MEMBERS
            await m.pages("search", {"query": "variant1 variant2", "granularity": "all"})
            linted = await m.pages("lint", {})
            assert (
                sum(len(p["findings"]) for p in linted)
                == linted[0]["paged"]["lists"]["findings"]["total"]
            )

            done = await m.call(
                "submit",
                {"item": dup["id"], "keep": members[0], "dry_run": True},
            )
            assert len(done["forgotten"]) + len(done["left"]) == MEMBERS - 1

            # resources: the item in pages, the entity
            text = await m.read(f"memo://item/{dup['id']}")
            assert f"memo://item/{dup['id']}?page=2" in text
            await m.read(f"memo://item/{dup['id']}?page=2")
            await m.read(entity)

            big = "\n\n".join(f"Note {n} on ordering." for n in range(1000))
            kept = await m.call("remember", {"text": big, "uri": "long-note"})
            assert kept["paged"]["next"] == {"get": kept["document"]}
            assert kept["paged"]["lists"]["passages"]["total"] == 1000
            await m.pages("get", {"address": kept["document"]})
            gone = await m.call("forget", {"address": kept["document"]})
            assert gone["paged"]["lists"]["forgotten"]["total"] >= 1000
            return m.largest

    largest = anyio.run(main)
    print("largest answer per tool (bytes):", json.dumps(largest, sort_keys=True))
    for name, size in largest.items():
        assert size <= CAP, (name, size, CAP)


def test_a_page_past_the_last_is_a_clear_tool_error(store: Path):
    async def main() -> str:
        async with Client(stdio_params(store)) as client:
            result = await client.call_tool("lint", {"page": 999})
            assert result.is_error
            return result.content[0].text

    assert anyio.run(main).startswith("page 999 is past the last page (")


def test_a_long_text_comes_in_pages_of_characters(store: Path):
    """A passage of 45,000 characters (300 long words: a dump of encoded
    data) is cut by characters, and the pages put it back together."""
    text = " ".join(f"{n:03d}é" + "Qx7" * 48 for n in range(300))

    async def main() -> tuple[list[dict[str, Any]], int]:
        async with Client(stdio_params(store)) as client:
            m = Measured(client)
            (passage,) = (await m.call("remember", {"text": text, "uri": "one-paragraph"}))[
                "passages"
            ]
            pages = await m.pages("get", {"address": passage})
            return pages, max(m.largest.values())

    pages, largest = anyio.run(main)
    assert len(pages) >= 2 and largest <= CAP
    assert "".join(p["text"] for p in pages) == text
    assert pages[0]["paged"]["lists"]["text"] == {
        "total": len(text),
        "first": 1,
        "shown": len(pages[0]["text"]),
    }
