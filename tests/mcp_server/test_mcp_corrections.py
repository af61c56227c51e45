"""Corrections over MCP (issue 31, point 4), through the SDK's own client:
the survivor of a merge and its name, rename_entity, undo_merge, reopen,
and propose_merge with ``again``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from memors_core import Memory
from memors_core.testing import passages_about
from memors_mcp.server import build_server


@pytest.fixture
def store(store_address: Path | str):
    memory = Memory.open(store_address)
    memory.remember("\n\n".join(passages_about("Quorum replication", 3)), uri="q.md")
    memory.remember("[[quorum-replication]] in one line.", uri="note.md")
    yield memory
    memory.close()


def _run(memory: Memory, body):
    async def main():
        async with Client(build_server(memory, "default")) as client:
            return await body(client)

    return anyio.run(main)


async def _call(client: Client, tool: str, **args):
    result = await client.call_tool(tool, args)
    text = " ".join(c.text for c in result.content if hasattr(c, "text"))
    return result.is_error, result.structured_content, text


def test_merge_survivor_rename_and_undo_over_mcp(store: Memory) -> None:
    async def body(client: Client):
        _, compacted, _ = await _call(client, "compact", kinds=["merge"])
        item = compacted["items"][0]
        first, second = (e["address"] for e in item["payload"]["entities"])
        # A survivor that is neither entity: a tool error, nothing stored.
        err, _, text = await _call(
            client, "submit", item=item["id"], resolution={"accept": True, "survivor": "Raft"}
        )
        assert err and "neither entity of this merge" in text
        err, report, _ = await _call(
            client,
            "submit",
            item=item["id"],
            accept=True,
            resolution={"survivor": second, "name": "Quorum Replication"},
        )
        assert not err and report["survivor"] == second
        _, entity, _ = await _call(client, "get", address=second)
        assert entity["name"] == "Quorum Replication"
        _, found, _ = await _call(client, "search", query="quorum", granularity="entity")
        assert [h["address"] for h in found["results"]] == [second]

        err, renamed, text = await _call(
            client, "rename_entity", entity="Quorum Replication", name="Quorum writes"
        )
        assert not err and renamed["action"] == "rename" and "stays an alias" in text
        err, _, text = await _call(client, "rename_entity", entity="nobody", name="X")
        assert err and "no entity named" in text

        err, undone, _ = await _call(client, "undo_merge", entity="Quorum replication")
        assert not err and undone["address"] == first
        err, _, text = await _call(client, "undo_merge", entity="Quorum replication")
        assert err and "nothing to undo" in text
        err, _, text = await _call(
            client, "propose_merge", entities=["Quorum replication", "Quorum writes"]
        )
        assert err or "again" in text
        err, proposed, _ = await _call(
            client, "propose_merge", entities=["Quorum replication", "Quorum writes"], again=True
        )
        assert not err and proposed["status"] == "open"
        _, compacted, _ = await _call(client, "compact", kinds=["merge"])
        return compacted["items"]

    items = _run(store, body)
    assert [i["kind"] for i in items] == ["merge"]
    assert store.entity("Quorum replication").name == "Quorum replication"


def test_reopen_a_skip_over_mcp(store: Memory) -> None:
    async def body(client: Client):
        _, compacted, _ = await _call(client, "compact", kinds=["page"])
        item = compacted["items"][0]["id"]
        err, _, _ = await _call(client, "submit", item=item, skip=True, reason="later")
        assert not err
        err, reopened, text = await _call(client, "reopen", item=item, reason="now")
        assert not err and reopened["item"] != item and "reopened as item" in text
        err, _, text = await _call(client, "reopen", item=reopened["item"])
        assert err and "only a done or skipped item" in text
        _, again, _ = await _call(client, "compact", kinds=["page"])
        return [i["id"] for i in again["items"]], reopened["item"]

    ids, new = _run(store, body)
    assert ids == [new]


def test_the_corrections_are_listed_over_mcp_paged(store: Memory, monkeypatch) -> None:
    monkeypatch.setenv("MEMORS_MCP_COMPACT_BYTES", "4096")
    long = "Quorum writes " + "x" * 150
    names = ["Quorum replication", long]
    for i in range(12):  # a long audit: renamed back and forth
        store.rename_entity(names[i % 2], names[(i + 1) % 2])
    [entity] = {c.target for c in store.corrections().corrections}

    async def body(client: Client):
        err, first, text = await _call(client, "corrections")
        assert not err and "renamed 'Quorum replication' to 'Quorum writes" in text
        err, second, _ = await _call(client, "corrections", page=2)
        assert not err
        _, about, _ = await _call(client, "corrections", action="rename", target=entity)
        err, _, bad = await _call(client, "corrections", target="nowhere")
        assert err and "malformed address" in bad
        err, _, bad = await _call(client, "corrections", action="erase")
        assert err
        return first, second, about

    first, second, about = _run(store, body)
    assert first["paged"]["lists"]["corrections"]["total"] == 12
    assert len(first["corrections"]) < 12 and first["paged"]["next"] == {"page": 2}
    ids = [c["id"] for c in first["corrections"] + second["corrections"]]
    assert ids == sorted(ids) and ids[0] == 1
    assert all(c["action"] == "rename" and c["target"] == entity for c in about["corrections"])
    assert about["paged"]["lists"]["corrections"]["total"] == 12


def test_reopen_a_kept_duplicate_over_mcp(store: Memory) -> None:
    shared = (
        "[[Raft]] elects a leader by majority vote: each follower grants its vote to the "
        "first candidate whose log is at least as complete as its own, once per term."
    )
    lost = store.remember(shared, uri="a.md").passages[0]
    kept = store.remember(shared, uri="b.md").passages[0]
    store.remember("\n\n".join(passages_about("Raft", 3)), uri="raft.md")
    page = next(
        i for i in store.compact(kinds=["page"]).items if i.payload["entity"]["name"] == "Raft"
    )
    text = "\n".join(
        p["text"].replace("[[", "").replace("]]", "")
        for p in page.payload["passages"]
        if "text" in p
    )
    assert store.submit(page.id, content=text, title="Raft").stored

    async def body(client: Client):
        _, compacted, _ = await _call(client, "compact", kinds=["duplicate"])
        item = next(  # (passages_about's templates make duplicates of their own)
            i["id"]
            for i in compacted["items"]
            if kept in [p["address"] for p in i["payload"]["passages"]]
        )
        err, report, text = await _call(client, "submit", item=item, keep=[kept])
        assert not err and report["forgotten"] == [lost], text
        err, reopened, text = await _call(client, "reopen", item=item, reason="both")
        assert not err and "reopened as item" in text
        _, again, _ = await _call(client, "get", address=f"memo://item/{reopened['item']}")
        _, old, _ = await _call(client, "get", address=lost)
        return reopened, again, old

    reopened, again, old = _run(store, body)
    members = [p["address"] for p in again["payload"]["passages"]]
    assert again["status"] == "open" and kept in members and lost not in members
    [copy] = set(members) - {kept}
    assert old["status"] == "forgotten" and store.get(copy).text == old["text"]
    # The entity's page goes stale: its refresh lists the copy as a new passage.
    [raft_page] = reopened["stale"]
    [stale] = store.compact(kinds=["stale"]).items
    assert stale.payload["page"]["address"] == raft_page
    assert {"address": copy, "change": "new"}.items() <= next(
        c for c in stale.payload["changes"] if c["address"] == copy
    ).items()
