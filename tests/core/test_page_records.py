"""A page shows what it was built from: ``get`` (JSON, the CLI's text, the
MCP page resource) lists the facts it was built with and each checked
sentence with the addresses it cites; a page stored without them shows
empty lists. The pages are written through the store, as a submission
stores them."""

from __future__ import annotations

import json

import anyio
from mcp import Client

from memors_core import Memory
from memors_core.testing import passages_about
from memors_core.wire import to_json
from memors_mcp.server import build_server

NS = "default"


def write_page(memory: Memory, *, with_records: bool) -> dict[str, str]:
    """A Raft page (with its sentences and facts, or without); the addresses involved."""
    remembered = memory.remember("\n\n".join(passages_about("Raft", 3)), uri="raft.md")
    fact = memory.record_fact("Raft", "leader", "n1").fact
    a, b, _c = remembered.passages
    sentences = [
        ("Raft elects a leader and replicates its log.", [a, b]),
        ("Its leader is n1.", [fact]),
        ("Raft is a consensus protocol.", []),
    ]
    with memory.store.write() as tx:
        raft = tx.entities.resolve("Raft", NS)
        page = tx.pages.write(
            NS,
            raft,
            "Raft",
            "# Raft\n\nRaft elects a leader and replicates its log [1][2]. Its leader is n1.",
            remembered.passages,
            None,
            None,
            {},
            sentences=sentences if with_records else (),
            facts=[fact] if with_records else (),
        )
    return {"page": page, "a": a, "b": b, "fact": fact}


def test_get_shows_a_page_s_facts_and_sentences_with_their_sources(memory: Memory) -> None:
    made = write_page(memory, with_records=True)
    page = to_json(memory.get(made["page"]))
    assert page["facts"] == [made["fact"]]
    assert page["sentences"] == [
        {
            "text": "Raft elects a leader and replicates its log.",
            "sources": [made["a"], made["b"]],
            "flags": [],
        },
        {"text": "Its leader is n1.", "sources": [made["fact"]], "flags": []},
        {"text": "Raft is a consensus protocol.", "sources": [], "flags": []},
    ]
    assert page["stale"] is False
    # Forgetting the fact marks the page stale; what it shows of its build stays.
    memory.forget(made["fact"])
    again = to_json(memory.get(made["page"]))
    assert again["stale"] is True
    assert (again["facts"], again["sentences"]) == (page["facts"], page["sentences"])
    [finding] = [f for f in to_json(memory.lint())["findings"] if f["rule"] == "stale-page"]
    assert "1 forgotten fact(s)" in finding["message"]


def test_a_page_stored_without_records_shows_empty_lists(memory: Memory) -> None:
    made = write_page(memory, with_records=False)
    page = to_json(memory.get(made["page"]))
    assert (page["facts"], page["sentences"]) == ([], [])
    memory.forget(made["fact"])  # it was not built with it, as far as it records
    assert to_json(memory.get(made["page"]))["stale"] is False


def test_the_cli_lists_each_sentence_with_its_sources(cli) -> None:
    with Memory.open(cli.db) as memory:
        made = write_page(memory, with_records=True)
    out = cli("get", made["page"]).out
    lines = out.splitlines()
    at = lines.index("sentences (3):")
    assert lines[at + 1 : at + 7] == [
        "  1. Raft elects a leader and replicates its log.",
        f"     cites {made['a']}, {made['b']}",
        "  2. Its leader is n1.",
        f"     cites {made['fact']}",
        "  3. Raft is a consensus protocol.",
        "     cites nothing (no marker)",
    ]
    assert f"facts:\n  - {made['fact']}" in out
    assert json.loads(cli("get", made["page"], "--json").out)["sentences"][1] == {
        "text": "Its leader is n1.",
        "sources": [made["fact"]],
        "flags": [],
    }


def test_the_mcp_page_resource_shows_the_sentences_and_facts(memory: Memory) -> None:
    made = write_page(memory, with_records=True)

    async def main() -> str:
        async with Client(build_server(memory, NS)) as client:
            result = await client.read_resource(made["page"])
            return result.contents[0].text

    text = anyio.run(main)
    assert f"Built with the facts: {made['fact']}" in text
    assert (
        f"1. Raft elects a leader and replicates its log. — {made['a']}, {made['b']}\n"
        f"2. Its leader is n1. — {made['fact']}\n"
        "3. Raft is a consensus protocol. — none (no marker)\n"
    ) in text
