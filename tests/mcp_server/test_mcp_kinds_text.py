"""A third-party kind is explained to an agent as well as a built-in one.

The MCP server knows no kind by name: how to do an item (the prompt, the
``compact`` tool's description) is the kind's ``instructions``, and each
item's line in ``compact``'s text is the kind's ``summary`` of its payload.
A small kind from a test plugin shows it, through a real MCP client session:
the server as a process over stdio, finding the plugin by its entry point as
an installed one is found; and in process for the prompt's kind filter and
the fallbacks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from mcp import Client, StdioServerParameters

from mcp_clients.harness import server_env
from memors_core import hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.testing import passages_about, plugin_env, temporary_memory
from memors_kinds.page import PageKind
from memors_mcp.prompts import PROMPT_NAME
from memors_mcp.server import build_server

ERRAND_PLUGIN = """
import attrs

from memors_core import hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint


@attrs.frozen
class Done:
    done: str


class ErrandKind(Kind):
    name = "errand"
    description = "run an errand noted on the fridge"
    resolution = Done
    hint = "done = what was done"
    instructions = (
        "run the errand in `payload.errand` before `payload.due`, then send `done` "
        "saying what you did"
    )

    def summary(self, payload):
        return f"{payload['errand']} by {payload['due']}"

    def scan(self, ctx):
        payload = {"errand": "water the plants", "due": "Friday"}
        yield Candidate("fridge", fingerprint("fridge"), lambda: payload)

    def apply(self, ctx, item, resolution):
        return None


class Errands:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(ErrandKind())


errands = Errands()
"""

ERRAND_INSTRUCTIONS = (
    "run the errand in `payload.errand` before `payload.due`, then send `done` saying what you did."
)


def flat(text: str) -> str:
    """``text`` with its line breaks and indents as single spaces (the prompt is wrapped)."""
    return " ".join(text.split())


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if hasattr(c, "text"))


def test_a_plugin_kind_is_in_the_prompt_and_the_compact_text_over_stdio(
    fresh_store, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "memors_errands.py").write_text(ERRAND_PLUGIN)
    env = server_env(
        fresh_store("store.db"),
        **plugin_env(tmp_path / "site", {"errands": "memors_errands:errands"}, [src]),
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memors_cli", "serve"], env=env
    )

    async def session() -> tuple[str, str, Any, Any]:
        async with Client(params) as client:
            prompt = await client.get_prompt(PROMPT_NAME, {})
            tools = {t.name: t for t in (await client.list_tools()).tools}
            compact = await client.call_tool("compact", {"kinds": ["errand"]})
            item = compact.structured_content["items"][0]
            done = await client.call_tool(
                "submit",
                {
                    "item": item["id"],
                    "fingerprint": item["fingerprint"],
                    "resolution": {"done": "watered them"},
                },
            )
            return prompt.messages[0].content.text, tools["compact"].description, compact, done

    prompt, description, compact, done = anyio.run(session)

    # how to do it, in the plugin's words, with the built-in kinds' own
    assert f"- errand: {ERRAND_INSTRUCTIONS}" in flat(prompt)
    assert f"- page: {flat(PageKind.instructions)}." in flat(prompt)
    assert f"errand: {ERRAND_INSTRUCTIONS}" in description
    assert f"page: {flat(PageKind.instructions)}." in description
    # each item's line is the kind's summary of its payload
    assert not compact.is_error, text_of(compact)
    item = compact.structured_content["items"][0]
    assert (
        f"- item {item['id']} (errand): water the plants by Friday" in text_of(compact).splitlines()
    )
    assert not done.is_error and done.structured_content["status"] == "done", text_of(done)


# --- in process: the prompt's kind filter, and what a kind leaves out --------------------------


@attrs.frozen
class Ack:
    ok: bool


class TerseKind(Kind):
    """A kind that says only its description and hint, and whose summary is broken."""

    name = "terse"
    description = "acknowledge the notebook"
    resolution = Ack
    hint = "ok = true"

    def summary(self, payload: dict[str, Any]) -> str:
        raise KeyError("no_such_field")

    def scan(self, ctx):
        yield Candidate("notebook", fingerprint("notebook"), lambda: {"notebook": 1})

    def apply(self, ctx, item, resolution):
        return None


class Terse:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(TerseKind())


@pytest.fixture
def memory():
    with temporary_memory(plugins=[("terse", Terse())]) as memory:
        yield memory


def drive(memory: Any, body: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(memory)) as client:
            return await body(client)

    return anyio.run(main)


def test_the_prompt_explains_only_the_kinds_asked_for(memory) -> None:
    async def prompts(client: Client) -> tuple[str, str]:
        chosen = await client.get_prompt(PROMPT_NAME, {"kinds": "terse"})
        every = await client.get_prompt(PROMPT_NAME, {})
        return chosen.messages[0].content.text, every.messages[0].content.text

    chosen, every = drive(memory, prompts)
    # without instructions, the kind's description and hint say how it is done
    assert "- terse: acknowledge the notebook; resolve with ok = true." in chosen
    assert "- page:" not in chosen and "- page:" in every and "- terse:" in every
    assert "- any kind: `skip: true` with a `reason`" in chosen


def test_a_summary_that_raises_is_named_on_its_line_and_the_answer_stands(memory) -> None:
    for text in passages_about("Raft", 3):
        memory.remember(text)

    result = drive(memory, lambda client: client.call_tool("compact", {}))

    assert not result.is_error
    by_kind = {i["kind"]: i["id"] for i in result.structured_content["items"]}
    (page,) = [i for i in result.structured_content["items"] if i["kind"] == "page"]
    lines = text_of(result).splitlines()
    assert (
        f"- item {by_kind['terse']} (terse): (kind terse (plugin terse) failed in summary: "
        "KeyError: 'no_such_field')"
    ) in lines
    page_line = f"- item {page['id']} (page): {PageKind().summary(page['payload'])}"
    assert page_line in lines and "Raft" in page_line
