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

from mcp_clients.harness import TOOLS, stdio_params
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

            # the other tools, on the largest things they touch
            await m.call("record_fact", {"subject": "Licensing", "predicate": "by", "value": "x"})
            accepted = []
            for pair in (["Service001", "Service002"], ["Service003", "Service004"]):
                await m.call("propose_merge", {"entities": pair})
                (merge,) = (await m.call("compact", {"kinds": ["merge"], "limit": 1}))["items"]
                accepted.append(await m.call("submit", {"item": merge["id"], "accept": True}))
            await m.call("reopen", {"item": accepted[0]["item"], "reason": "not one"})
            await m.call("undo_merge", {"entity": accepted[1]["merged"]})
            await m.call("rename_entity", {"entity": "Licensing", "name": "Licences"})
            listed = await m.call("corrections", {})
            assert {"reopen", "unmerge", "rename"} <= {c["action"] for c in listed["corrections"]}
            prompt = await client.get_prompt("work_compaction_queue")
            m.note("prompt", sum(len(x.content.text.encode()) for x in prompt.messages))
            return m.largest

    largest = anyio.run(main)
    assert TOOLS | {"resource", "prompt"} <= set(largest)  # every tool measured
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


COPIES = 2_000


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory):
    """One duplicate cluster of 2,000 members: 1,950 copies of a 160-word
    paragraph about [[Licensing]] and 50 variants of it (one word changed)."""
    rng = random.Random(2000)
    vocabulary = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(2000)
    ]
    base = _words(rng, vocabulary, 160).split()
    docs = []
    for m in range(COPIES):
        words = list(base)
        if m >= COPIES - 50:
            words[5 + m % 150] = f"variant{m}"
        docs.append({"text": "[[Licensing]] " + " ".join(words) + ".", "uri": f"copy-{m}"})
    with temporary_store(tmp_path_factory.mktemp("copies")) as db:
        with Memory.open(db) as memory:
            assert memory.remember_many(docs).passages == COPIES
        yield db


def test_keeping_one_of_2000_fits_and_the_item_lists_the_rest(copies: Path):
    """Submitting a keep on a 2,000-member cluster forgets 1,999 members in
    one answer within the cap: it counts them, shows the first page and
    names the item whose get lists them all, page by page."""

    async def main() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], str, dict]:
        async with Client(stdio_params(copies)) as client:
            m = Measured(client)
            (dup,) = (await m.call("compact", {"kinds": ["duplicate"]}))["items"]
            assert dup["paged"]["lists"]["passages"]["total"] == COPIES
            keep = dup["payload"]["passages"][0]["address"]
            args = {"item": dup["id"], "keep": keep, "fingerprint": dup["fingerprint"]}
            dry = await m.call("submit", {**args, "dry_run": True})
            result = await client.call_tool("submit", args)
            m.note("submit", size_of(result))
            done = result.structured_content
            pages = await m.pages("get", {"address": f"memo://item/{dup['id']}"})
            return dry, done, pages, result.content[0].text, m.largest

    dry, done, pages, summary, largest = anyio.run(main)
    print("largest answer per tool (bytes):", json.dumps(largest, sort_keys=True))
    assert max(largest.values()) <= CAP, largest
    address = f"memo://item/{done['item']}"
    # the answer: counts, the first page, and where the rest is
    lists = done["paged"]["lists"]
    assert lists["forgotten"]["total"] == COPIES - 1
    assert 0 < lists["forgotten"]["shown"] == len(done["forgotten"]) < COPIES - 1
    assert lists["kept"] == {"total": 1, "first": 1, "shown": 1}
    assert done["paged"]["next"] == {"get": address}
    assert f"call get with address={address}" in summary
    # a dry run recorded nothing: counted, no next, and says why
    assert dry["paged"]["lists"]["forgotten"]["total"] == COPIES - 1
    assert "next" not in dry["paged"] and address in dry["paged"]["rest"]
    # the item's get, page by page, holds every forgotten member exactly once
    outcome = [
        a
        for p in pages
        for a in (p.get("resolution") or {}).get("outcome", {}).get("forgotten", [])
    ]
    assert len(outcome) == len(set(outcome)) == COPIES - 1
    assert outcome[: len(done["forgotten"])] == done["forgotten"]
    assert pages[0]["paged"]["lists"]["resolution.outcome.forgotten"]["total"] == COPIES - 1


def test_one_element_larger_than_an_answer_is_cut_and_says_where_it_is_whole(tmp_path: Path):
    """A 200 KB passage (one paragraph, one sentence) and a page whose one
    sentence is that paragraph: every answer that shows them — search hits,
    get of the entity, its page, its page item, the resources — fits the
    cap; the text cut says so in `cut` and names the address whose get
    shows it whole."""
    rng = random.Random(7)
    body = " ".join(  # a passage holds at most 400 words: these are long ones
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(520)) for _ in range(390)
    )
    text = f"[[Giant]] giantword {body}."
    assert len(text.encode()) > 200_000

    async def main() -> tuple[dict[str, Any], dict[str, int]]:
        with temporary_store(tmp_path) as db:
            big = {"MEMORS_MAX_DOCUMENT_BYTES": str(1 << 20)}
            async with Client(stdio_params(db, **big)) as client:
                m = Measured(client)
                (passage,) = (await m.call("remember", {"text": text, "uri": "giant"}))["passages"]
                for n in range(3):  # enough for a page item about Giant
                    note = f"[[Giant]] stands {n + 10} metres tall on the hill number {n}."
                    await m.call("remember", {"text": note, "uri": f"note-{n}"})
                seen: dict[str, Any] = {"passage": passage}
                hit = (await m.call("search", {"query": "giantword"}))["results"][0]
                seen["hit"] = hit
                entity = (await m.call("search", {"query": "Giant", "granularity": "entity"}))[
                    "results"
                ][0]["address"]
                seen["entity"] = await m.call("get", {"address": entity})
                (item,) = (await m.call("compact", {"kinds": ["page"]}))["items"]
                offered = [
                    p
                    for page in await m.pages("get", {"address": f"memo://item/{item['id']}"})
                    for p in page["payload"]["passages"]
                ]
                (giant,) = [p for p in offered if p["address"] == passage]
                seen["offered"] = giant
                stored = await m.call(
                    "submit",
                    {
                        "item": item["id"],
                        "title": "Giant",
                        "content": f"Giant giantword {body} [{giant['ref']}].",
                        "fingerprint": item["fingerprint"],
                        "force": True,
                    },
                )
                assert stored["stored"], stored
                seen["page"] = await m.pages("get", {"address": stored["address"]})
                seen["page_hit"] = (
                    await m.call("search", {"query": "giantword", "granularity": "page"})
                )["results"][0]
                await m.pages("get", {"address": passage})
                for uri in (passage, entity, stored["address"], f"memo://item/{item['id']}"):
                    await m.read(uri)
                document = (await m.call("get", {"address": passage}))["document"]
                await m.read(document)
                seen["page_address"] = stored["address"]
                return seen, m.largest

    seen, largest = anyio.run(main)
    print("largest answer per tool (bytes):", json.dumps(largest, sort_keys=True))
    for name, size in largest.items():
        assert size <= CAP, (name, size, CAP)
    passage = seen["passage"]
    # a search hit of the whole passage: cut, with where it is whole
    hit = seen["hit"]
    assert hit["address"] == passage and hit["cut"]["get"] == passage
    assert hit["cut"]["text"]["total"] > 200_000 > hit["cut"]["text"]["shown"] > 0
    assert text.startswith(hit["text"])
    # the entity's one passage, the page item's one passage: the same
    (shown,) = [p for p in seen["entity"]["passages"] if p["address"] == passage]
    assert shown["cut"]["get"] == passage and text.startswith(shown["text"])
    offered = seen["offered"]
    assert offered["cut"]["get"] == passage and text.startswith(offered["text"])
    # the page's one enormous sentence: cut on its page, its content whole across pages
    pages = seen["page"]
    (sentence,) = [s for p in pages for s in p["sentences"]]
    assert sentence["cut"]["get"] == seen["page_address"]
    assert "".join(p["content"] for p in pages).startswith(f"Giant giantword {body[:1000]}")
    assert seen["page_hit"]["address"] == seen["page_address"]  # (a snippet: it fits)
