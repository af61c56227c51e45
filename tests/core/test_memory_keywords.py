"""The library's keywords are the JSON field names (SPEC §9): every operation
of SPEC §4 can be called as ``memory.op(field=value, ...)`` with the names
an MCP client sends, and no method spells one differently."""

from __future__ import annotations

import inspect
from pathlib import Path

import anyio
from mcp import Client

from memors_core import Memory
from memors_core.testing import passages_about
from memors_mcp.server import build_server

#: The operations of SPEC §4 that are MCP tools too, by name.
TOOLS = (
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
)


def test_every_operation_is_callable_with_its_json_field_names(fresh_store, tmp_path: Path) -> None:
    ns = "kw"
    with Memory.open(fresh_store("kw.db")) as memory:
        doc = memory.remember(
            text="\n\n".join(passages_about("Raft", 3)),
            uri="notes/raft.md",
            title="Raft",
            entities=["Raft", "Paxos"],
            metadata={"source": "test"},
            namespace=ns,
        )
        passage = doc.passages[0]
        fact = memory.record_fact(
            subject="Raft",
            predicate="leader",
            value="n1",
            valid_from="2024-01-01",
            valid_to="2025-01-01",
            source=passage,
            namespace=ns,
        ).fact
        merge = memory.propose_merge(entities=["Raft", "Paxos"], namespace=ns)
        assert merge.status == "open"
        hits = memory.search(
            query="leader", granularity="fact", limit=5, as_of="2024-06-01", namespace=ns
        )
        assert [h.address for h in hits.results] == [fact]
        view = memory.get(address=fact, namespace=ns)
        assert (view.address, view.source) == (fact, passage)
        compacted = memory.compact(kinds=["merge"], limit=10, namespace=ns)
        [item] = compacted.items
        submitted = memory.submit(
            item=item.id,
            fingerprint=item.fingerprint,
            skip=True,
            reason="decided elsewhere",
            dry_run=False,
            force=False,
            namespace=ns,
        )
        assert submitted.stored
        assert memory.get(address=f"memo://item/{item.id}", namespace=ns).status == "skipped"
        forgotten = memory.forget(address=fact, reason="wrong", namespace=ns)
        assert forgotten.forgotten == [fact]
        assert memory.get(address=fact, namespace=ns).forgotten["reason"] == "wrong"
        assert memory.lint(namespace=ns).namespace == ns
        purged = memory.purge(address=passage, namespace=ns)
        assert passage in purged.erased


def _tool_arguments(tmp_path: Path) -> dict[str, set[str]]:
    """Each MCP tool's argument names, as a client is told them."""
    memory = Memory.open(tmp_path / "mcp.db")

    async def listed() -> dict[str, set[str]]:
        async with Client(build_server(memory)) as client:
            tools = (await client.list_tools()).tools
            return {t.name: set(t.input_schema.get("properties", {})) for t in tools}

    try:
        return anyio.run(listed)
    finally:
        memory.close()


def test_each_method_names_its_arguments_as_the_mcp_tool_does(tmp_path: Path) -> None:
    arguments = _tool_arguments(tmp_path)
    assert set(arguments) == set(TOOLS)
    for name, fields in arguments.items():
        parameters = inspect.signature(getattr(Memory, name)).parameters
        named = {p for p, v in parameters.items() if v.kind is not v.VAR_KEYWORD}
        takes_more = any(v.kind is v.VAR_KEYWORD for v in parameters.values())
        # ``page`` pages an MCP answer within its size budget (SPEC's cap); the
        # library hands back the whole result, so no method takes it.
        missing = fields - named - {"page"}
        # submit's flat resolution fields (content, keep, accept…) go through **fields.
        assert not missing or (name == "submit" and takes_more), (name, sorted(missing))
