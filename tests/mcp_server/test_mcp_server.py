"""The MCP server in-process: tools, schemas, errors, resources, the prompt, concurrency.

These drive the real server object through the SDK's own client
(``mcp.Client(server)``), over a real store file; the end-to-end tests in
``test_mcp_e2e.py`` do the same through real processes over stdio and HTTP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_clients.harness import PROMPT, SMALL_DOCUMENT_LIMIT, TEMPLATES, TOOLS, full_scenario
from memors_core import Memory, hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import passages_about
from memors_mcp.server import build_server
from memors_mcp.tools import COMPACT_DEFAULT_LIMIT


@pytest.fixture
def store(store_address: Path | str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMORS_MAX_DOCUMENT_BYTES", str(SMALL_DOCUMENT_LIMIT))
    memory = Memory.open(store_address)
    yield memory
    memory.close()


def drive(memory: Memory, body: Callable[[Client], Awaitable[Any]], namespace: str = "default"):
    """Run ``body(client)`` against a fresh server over ``memory``."""

    async def main() -> Any:
        async with Client(build_server(memory, namespace)) as client:
            return await body(client)

    return anyio.run(main)


def text_of(result) -> str:
    return " ".join(c.text for c in result.content if hasattr(c, "text"))


def test_every_tool_resource_and_prompt_in_process(store: Memory) -> None:
    stored = drive(store, full_scenario)
    # the same store, seen through the library: one code path
    assert store.get(stored["page"]).status == "live"
    assert store.get(stored["facts"][1]).status == "superseded"


def test_tools_are_described_for_a_model(store: Memory) -> None:
    tools = drive(store, lambda c: c.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert len(tool.description) > 200, tool.name
        assert tool.output_schema is not None, f"{tool.name} publishes no output schema"
        assert tool.annotations is not None and tool.annotations.title
        props = tool.input_schema["properties"]
        assert "namespace" in props, tool.name
        for name, prop in props.items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    by_name = {t.name: t for t in tools}
    # the limits are stated where a model will read them
    assert f"default {COMPACT_DEFAULT_LIMIT}" in by_name["compact"].description
    assert (
        "10,000 characters" in by_name["search"].input_schema["properties"]["query"]["description"]
    )
    assert (
        f"{SMALL_DOCUMENT_LIMIT:,} bytes"
        in by_name["remember"].input_schema["properties"]["text"]["description"]
    )
    assert "dry_run" in by_name["submit"].description
    for read_only in ("search", "get", "lint", "corrections"):
        assert by_name[read_only].annotations.read_only_hint is True
    assert by_name["forget"].annotations.destructive_hint is True
    assert by_name["search"].input_schema["properties"]["granularity"]["enum"] == [
        "passage",
        "page",
        "fact",
        "entity",
        "all",
    ]


def test_each_server_states_its_own_figures(store: Memory, monkeypatch) -> None:
    """The descriptions are written once, naming figures (``$budget``…); a
    server fills in its own: its namespace, its answer budget, its limits."""
    monkeypatch.setenv("MEMORS_MCP_COMPACT_BYTES", "5000")
    tools = drive(store, lambda c: c.list_tools(), namespace="work").tools
    for tool in tools:
        described = [tool.description]
        described += [p.get("description", "") for p in tool.input_schema["properties"].values()]
        assert not [d for d in described if "$" in d], f"{tool.name}: a figure left unfilled"
    by_name = {t.name: t for t in tools}
    props = by_name["get"].input_schema["properties"]
    assert "Default: 'work' (the server's)" in props["namespace"]["description"]
    assert "within about 5,000 bytes" in props["page"]["description"]
    assert "within about 5,000 bytes" in by_name["compact"].description
    content = by_name["submit"].input_schema["properties"]["content"]["description"]
    assert f"At most {store.limits.page_bytes:,} bytes" in content


def test_optional_booleans_are_plain_booleans(store: Memory) -> None:
    """A client that draws a form from the schema (the MCP Inspector) offers a
    checkbox for a boolean, and nothing it can send for anyOf boolean/null."""
    tools = drive(store, lambda c: c.list_tools()).tools
    booleans = set()
    for tool in tools:
        for name, prop in tool.input_schema["properties"].items():
            variants = [v.get("type") for v in prop.get("anyOf", [])]
            assert "boolean" not in variants, f"{tool.name}.{name}: {prop}"
            if prop.get("type") == "boolean":
                assert prop.get("default") is False, f"{tool.name}.{name}: {prop}"
                booleans.add(f"{tool.name}.{name}")
    assert {"submit.accept", "submit.reject", "submit.skip", "submit.dry_run"} <= booleans

    store.remember("\n\n".join(passages_about("Raft", 3)))
    [item] = store.compact().items

    async def body(client: Client):
        return await client.call_tool(
            "submit", {"item": item.id, "skip": True, "reason": "later", "accept": False}
        )

    skipped = drive(store, body)
    assert not skipped.is_error and skipped.structured_content["status"] == "skipped", skipped


@attrs.frozen
class TodoResolution:
    done: str


class TodoKind(Kind):
    """The plugin tutorial's kind (docs/plugins.md), cut down."""

    name = "todo"
    description = "a passage with a TODO: say what was done"
    resolution = TodoResolution
    hint = "done = what was done"

    def scan(self, ctx):
        for passage in ctx.store.passages.live(ctx.namespace):
            if "TODO" in passage.text:
                yield Candidate(passage.id, fingerprint(passage.text), lambda: {})

    def apply(self, ctx, item, resolution):
        return None


def test_a_kinds_field_sent_beside_resolution_says_where_it_goes(store_address) -> None:
    class Plugin:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(TodoKind())

    pm = build_plugin_manager()
    pm.register(Plugin(), "todo")
    with Memory.open(store_address, plugin_manager=pm) as memory:
        memory.remember("TODO: write the rollback runbook.")
        [item] = memory.compact(kinds=["todo"]).items

        async def body(client: Client):
            flat = await client.call_tool("submit", {"item": item.id, "done": "written"})
            typo = await client.call_tool("submit", {"item": item.id, "dryrun": True})
            inside = {"item": item.id, "resolution": {"done": "written"}}
            return flat, typo, await client.call_tool("submit", inside)

        flat, typo, inside = drive(memory, body)
    assert flat.is_error
    assert text_of(flat).startswith(
        "unknown argument 'done' for submit; 'done' belongs in `resolution` (a field of the "
        'todo kind): send {"item": ID, "resolution": {"done": …}}; it takes '
    ), text_of(flat)
    assert typo.is_error and "resolution" not in text_of(typo).split("it takes")[0]
    assert not inside.is_error and inside.structured_content["status"] == "done"


def test_tool_inputs_are_spec_names(store: Memory) -> None:
    tools = {t.name: t for t in drive(store, lambda c: c.list_tools()).tools}
    expected = {
        "remember": {"text", "uri", "title", "entities", "metadata"},
        "record_fact": {"subject", "predicate", "value", "valid_from", "valid_to", "source"},
        "propose_merge": {"entities", "again"},
        "rename_entity": {"entity", "name"},
        "undo_merge": {"entity"},
        "reopen": {"item", "reason"},
        # mode: SPEC §4; page: an answer too long for one (docs/mcp.md, "Answers")
        "search": {"query", "granularity", "limit", "as_of", "mode", "page"},
        "get": {"address", "page"},
        "forget": {"address", "reason"},
        # no executor, no --full: nothing over MCP can reach the Ollama executor
        "compact": {"kinds", "limit", "after"},
        "submit": {
            "item",
            "content",
            "title",
            "cites",
            "keep",
            "bound",
            "accept",
            "reject",
            "skip",
            "reason",
            "fingerprint",
            "dry_run",
            "force",
            "resolution",
        },
        "lint": {"rules", "page"},
        "corrections": {"action", "target", "page"},
    }
    for name, fields in expected.items():
        assert set(tools[name].input_schema["properties"]) == fields | {"namespace"}, name


BAD_CALLS = [
    ("remember", {"text": ["a"]}, ["text", "valid string"]),
    ("remember", {"text": "x", "metadata": [1, 2]}, ["metadata", "dictionary"]),
    ("remember", {"text": "x", "entities": [""]}, ["entity name must not be empty"]),
    ("remember", {"text": "nul \x00 byte"}, ["NUL"]),
    ("search", {"query": "x", "limit": 0}, ["limit", "greater than or equal to 1"]),
    ("search", {"query": "x", "limit": True}, ["limit", "integer"]),
    ("search", {"query": "x", "as_of": "yesterday"}, ["as_of"]),
    ("search", {"query": "x", "namespace": "n" * 65}, ["bad namespace"]),
    ("get", {}, ["address is required"]),
    ("get", {"address": 5}, ["address", "string"]),
    ("get", {"address": "memo://page/0190AAAA-aaaa-7aaa-8aaa-aaaaaaaaaaaa"}, ["UUIDv7"]),
    ("forget", {"address": "memo://item/3"}, ["only documents, passages, facts and pages"]),
    (
        "record_fact",
        {"subject": " ", "predicate": "p", "value": "v"},
        ["subject must not be empty"],
    ),
    (
        "record_fact",
        {
            "subject": "S",
            "predicate": "p",
            "value": "v",
            "valid_from": "2024-02-01",
            "valid_to": "2024-01-01",
        },
        ["must be before"],
    ),
    (
        "record_fact",
        {
            "subject": "S",
            "predicate": "p",
            "value": "v",
            "source": "memo://fact/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
        },
        ["passage"],
    ),
    ("propose_merge", {"entities": ["Nobody", "Nothing"]}, ["no entity named 'Nobody'"]),
    ("propose_merge", {"entities": ["A", "B", "C"]}, ["entities", "at most 2"]),
    ("compact", {"kinds": "page"}, ["kinds", "list"]),
    ("compact", {"limit": 2.5}, ["limit", "integer"]),
    ("submit", {"item": "memo://item/x", "skip": True, "reason": "r"}, ["malformed item address"]),
    ("submit", {"item": 0, "skip": True, "reason": "r"}, ["positive"]),
    ("submit", {"item": 1, "skip": True, "reason": "r", "dry_run": 1}, ["dry_run", "boolean"]),
    ("submit", {"item": 1, "resolution": "keep it"}, ["resolution", "dictionary"]),
    ("submit", {"item": 1.5}, ["item: expected an integer or a string (got 1.5)"]),
    ("submit", {"item": 1, "keep": 5}, ["keep: expected a string or a list of strings"]),
    ("submit", {"item": 1, "skip": True, "reason": "r"}, ["no work item 1"]),
    ("submit", {"item": 1}, ["no work item 1"]),
    ("lint", {"namespace": "white space"}, ["bad namespace"]),
    ("lint", {"rules": ["missing-pages"]}, ["unknown lint rule 'missing-pages'"]),
    ("search", {"query": "x", "dry_run": True}, ["unknown argument 'dry_run'", "it takes"]),
    ("no_such_tool", {}, ["no_such_tool"]),
]


@pytest.mark.parametrize(
    ("tool", "args", "needles"), BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)]
)
def test_bad_input_is_a_specific_tool_error(
    store: Memory, tool: str, args: dict, needles: list[str]
) -> None:
    async def body(client: Client):
        result = await client.call_tool(tool, args)
        after = await client.call_tool("search", {"query": "anything"})
        return result, after

    result, after = drive(store, body)
    message = text_of(result)
    assert result.is_error, f"{tool} {args} was accepted: {result.structured_content}"
    for needle in needles:
        assert needle.lower() in message.lower(), f"{needle!r} not in {message!r}"
    assert "\n" not in message and "pydantic.dev" not in message and "Traceback" not in message
    assert not after.is_error  # the server keeps serving


def test_submit_refusal_by_checks_is_a_result_not_an_error(store: Memory) -> None:
    store.remember("\n\n".join(passages_about("Raft", 3)))
    item = store.compact().items[0].id

    async def body(client: Client):
        return await client.call_tool(
            "submit", {"item": item, "content": "Penguins wrote it in Antarctica.", "title": "Raft"}
        )

    result = drive(store, body)
    assert not result.is_error
    report = result.structured_content
    assert report["stored"] is False and report["checks"]["corruption"]["passed"] is False
    # the text content is a short summary, not the same JSON again
    assert text_of(result).startswith(f"item {item} (page): refused by corruption")
    assert "flagged by corruption" in text_of(result) and "{" not in text_of(result)
    assert store.get(f"memo://item/{item}").status == "open"


def test_compact_returns_a_small_page_of_items_by_default(store: Memory) -> None:
    names = [f"Topic{n:02d}" for n in range(COMPACT_DEFAULT_LIMIT + 3)]
    store.remember_many({"text": "\n\n".join(passages_about(n, 3))} for n in names)

    async def body(client: Client):
        # (the generated passages are near-duplicates of each other: leave that kind out)
        first = await client.call_tool("compact", {"kinds": ["page"]})
        counts = await client.call_tool("compact", {"kinds": ["page"], "limit": 0})
        everything = await client.call_tool("compact", {"kinds": ["page"], "limit": 100})
        return first.structured_content, counts.structured_content, everything.structured_content

    first, counts, everything = drive(store, body)
    assert first["created"] == first["open"] == len(names)
    assert len(first["items"]) == COMPACT_DEFAULT_LIMIT
    assert counts["items"] == [] and counts["open"] == len(names) and counts["created"] == 0
    assert len(everything["items"]) == len(names)
    assert [i["id"] for i in everything["items"][:COMPACT_DEFAULT_LIMIT]] == [
        i["id"] for i in first["items"]
    ]


def test_concurrent_tool_calls_are_all_served(store: Memory) -> None:
    docs = 24

    async def body(client: Client):
        results: list[Any] = []

        async def remember(n: int) -> None:
            r = await client.call_tool(
                "remember", {"text": f"[[Node{n}]] stores snapshot number {n} for replication."}
            )
            results.append(r)

        async def search() -> None:
            results.append(await client.call_tool("search", {"query": "snapshot replication"}))

        async with anyio.create_task_group() as tg:
            for n in range(docs):
                tg.start_soon(remember, n)
                tg.start_soon(search)
            tg.start_soon(lambda: client.call_tool("lint", {}))
            tg.start_soon(lambda: client.call_tool("compact", {"limit": 0}))
        final = await client.call_tool("search", {"query": "snapshot", "limit": 100})
        return results, final

    results, final = drive(store, body)
    assert len(results) == 2 * docs
    assert not any(r.is_error for r in results), [text_of(r) for r in results if r.is_error]
    assert len(final.structured_content["results"]) == docs
    assert len(store.entities().entities) == docs


def test_two_simultaneous_submits_of_one_item_exactly_one_wins(store: Memory) -> None:
    store.remember("\n\n".join(passages_about("Raft", 3)))
    item = store.compact().items[0].id
    content = "\n".join(p.replace("[[", "").replace("]]", "") for p in passages_about("Raft", 3))

    async def body(client: Client):
        results: list[Any] = []

        async def submit() -> None:
            results.append(
                await client.call_tool(
                    "submit", {"item": item, "content": content, "title": "Raft"}
                )
            )

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(submit)
        return results

    results = drive(store, body)
    stored = [r for r in results if not r.is_error and r.structured_content["stored"]]
    refused = [r for r in results if r.is_error]
    assert len(stored) == 1 and len(refused) == 3
    assert all("not open" in text_of(r) for r in refused)
    assert len([e for e in store.entities().entities if e.page]) == 1


def test_namespace_defaults_to_the_servers_and_can_be_chosen(store: Memory) -> None:
    async def body(client: Client):
        mine = await client.call_tool("remember", {"text": "[[Kafka]] keeps an ordered log."})
        other = await client.call_tool(
            "remember", {"text": "[[Kafka]] compacts topics.", "namespace": "other"}
        )
        here = await client.call_tool("search", {"query": "kafka"})
        there = await client.call_tool("search", {"query": "kafka", "namespace": "other"})
        cross = await client.call_tool("get", {"address": other.structured_content["document"]})
        return mine, here, there, cross

    _, here, there, cross = drive(store, body, namespace="proj")
    assert [h["text"] for h in here.structured_content["results"]] == [
        "[[Kafka]] keeps an ordered log."
    ]
    assert [h["text"] for h in there.structured_content["results"]] == [
        "[[Kafka]] compacts topics."
    ]
    assert cross.is_error and "namespace 'proj'" in text_of(cross)
    assert store.search("kafka", namespace="proj").results
    assert not store.search("kafka").results  # nothing reached 'default'


def test_live_pages_are_listed_as_resources(store: Memory) -> None:
    store.remember("\n\n".join(passages_about("Raft", 3)))
    item = store.compact().items[0].id
    content = "\n".join(p.replace("[[", "").replace("]]", "") for p in passages_about("Raft", 3))

    async def uris(client: Client) -> set[str]:
        return {str(r.uri) for r in (await client.list_resources(cache_mode="refresh")).resources}

    async def body(client: Client):
        before = await uris(client)
        report = await client.call_tool(
            "submit", {"item": item, "content": content, "title": "Raft log"}
        )
        page = report.structured_content["address"]
        during = await client.list_resources(cache_mode="refresh")
        await client.call_tool("forget", {"address": page})
        after = await uris(client)
        gone = await client.read_resource(page)  # forgotten, still readable, marked
        return before, page, during, after, gone.contents[0].text

    before, page, during, after, gone = drive(store, body)
    assert before == set()
    listed = {str(r.uri): r for r in during.resources}
    assert set(listed) == {page}
    assert listed[page].title == "Raft log" and listed[page].mime_type == "text/markdown"
    assert after == set()
    assert "forgotten" in gone


def test_resource_templates_and_not_found(store: Memory) -> None:
    async def body(client: Client):
        templates = await client.list_resource_templates()
        errors = {}
        for uri in (
            "memo://page/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
            "memo://entity/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
            "memo://passage/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
            "memo://fact/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
            "memo://document/0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa",
            "memo://item/77",
            "memo://fact/not-an-id",
            "memo://thing/1",
        ):
            try:
                await client.read_resource(uri)
            except MCPError as exc:
                errors[uri] = (exc.code, str(exc))
        return templates, errors

    templates, errors = drive(store, body)
    assert {t.uri_template for t in templates.resource_templates} == TEMPLATES
    assert all(t.description for t in templates.resource_templates)
    assert len(errors) == 8
    assert all(code == -32602 for code, _ in errors.values()), errors
    assert "nothing at memo://item/77" in errors["memo://item/77"][1]
    assert "UUIDv7" in errors["memo://fact/not-an-id"][1]


def test_prompt_walks_through_the_queue(store: Memory) -> None:
    store.remember("\n\n".join(passages_about("Raft", 3)))
    store.compact()

    async def body(client: Client):
        listed = await client.list_prompts()
        default = await client.get_prompt(PROMPT)
        chosen = await client.get_prompt(PROMPT, {"namespace": "elsewhere", "kinds": "conflict"})
        return listed, default.messages[0].content.text, chosen.messages[0].content.text

    listed, default, chosen = drive(store, body)
    prompt = next(p for p in listed.prompts if p.name == PROMPT)
    assert {a.name for a in prompt.arguments} == {"namespace", "kinds"}
    assert not any(a.required for a in prompt.arguments)
    assert "1 page" in default  # the queue as it stands
    steps = [
        "`compact`",
        "Pick one item",
        "payload only",
        "`ref`",  # how to cite, before writing
        "dry_run: true",
        "corruption",
        "substitution",
        "omission",
        "`force: true`",
    ]
    positions = [default.index(s) for s in steps]
    assert positions == sorted(positions), "the steps are out of order"
    assert '"namespace": "elsewhere", "kinds": ["conflict"]' in chosen
    assert "No items are open" in chosen


def test_the_prompts_last_step_lint_confirms(store: Memory) -> None:
    """Worked to the end through MCP (a history bounded, a page skipped),
    the prompt's "call `lint` to confirm" comes back clean."""
    store.remember("\n\n".join(passages_about("Raft", 3)))
    store.record_fact("Paxos", "status", "draft", valid_from="1989-01-01")
    store.record_fact("Paxos", "status", "published", valid_from="1998-01-01")

    async def body(client: Client):
        before = await client.call_tool("lint", {})
        only = await client.call_tool("lint", {"rules": ["missing-page"]})
        items = (await client.call_tool("compact", {})).structured_content["items"]
        for item in items:
            if item["kind"] == "page":
                args = {"item": item["id"], "skip": True, "reason": "not needed yet"}
            else:
                older = min(item["payload"]["facts"], key=lambda f: f["valid_from"])
                args = {"item": item["id"], "bound": {"fact": older["address"]}}
                args["bound"]["valid_to"] = "1998-01-01"
            done = await client.call_tool("submit", args)
            assert not done.is_error and done.structured_content["status"] in ("done", "skipped")
        return before, only, await client.call_tool("lint", {})

    before, only, after = drive(store, body)
    assert {f["rule"] for f in before.structured_content["findings"]} == {
        "contradiction",
        "missing-page",
    }
    assert [f["rule"] for f in only.structured_content["findings"]] == ["missing-page"]
    assert after.structured_content["findings"] == [], after.structured_content
    assert text_of(after).startswith("namespace default: 0 finding(s)")


def test_mcp_and_cli_answer_with_the_same_json(cli, tmp_path: Path) -> None:
    memory = Memory.open(cli.db)
    try:

        async def body(client: Client):
            await client.call_tool("remember", {"text": "\n\n".join(passages_about("Raft", 3))})
            await client.call_tool(
                "record_fact", {"subject": "Raft", "predicate": "leader", "value": "n1"}
            )
            await client.call_tool(
                "record_fact", {"subject": "Raft", "predicate": "leader", "value": "n2"}
            )
            search = await client.call_tool(
                "search", {"query": "replication round", "granularity": "all"}
            )
            lint = await client.call_tool("lint", {})
            return search.structured_content, lint.structured_content

        search, lint = drive(memory, body)
    finally:
        memory.close()
    assert cli("search", "replication round", "--granularity", "all", "--json").json == search
    r = cli("lint", "--json")
    assert r.code == 1 and r.json == lint
    assert {f["rule"] for f in lint["findings"]} >= {"contradiction", "missing-page"}
