"""The plugin API from a plugin author's side (issue 9).

A third-party kind needs no frontend change: the real CLI and MCP server
list its items, take its resolution generically (``--set``,
``--resolution-json``, MCP ``resolution``) and validate it against the
kind's attrs class with readable errors. A plugin that raises is named with
its error while every other kind, check and rule still runs; a kind name
registered twice is refused naming both plugins. The plugins here are real
entry points, found by the subprocesses through ``plugin_env``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memors_core import BadInput, Memory, PluginError, hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.testing import (
    open_items,
    passages_about,
    plugin_env,
    run_cli,
    temporary_memory,
    write_page,
)
from memors_core.wire import to_json

BUILT_IN = ["conflict", "duplicate", "merge", "page", "stale"]

# One module of small third-party plugins, each exposed as its own entry point.
PLUGINS = '''
import attrs

from memors_core import BadInput, hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint


@attrs.frozen
class NoteResolution:
    text: str
    count: int
    tags: list[str] = attrs.field(factory=list)
    urgent: bool = False


class NoteKind(Kind):
    """One item per namespace: write a note, stored as a fact."""

    name = "note"
    description = "write a note about the notebook"
    resolution = NoteResolution
    hint = "text, count (--set text=… --set count=3)"

    def scan(self, ctx):
        yield Candidate("notebook", fingerprint("notebook"), lambda: {"summary": "the notebook"})

    def validate(self, ctx, item, resolution):
        if resolution.count < 1:
            raise BadInput(f"count must be at least 1, got {resolution.count}")

    def apply(self, ctx, item, resolution):
        fact = ctx.store.facts.record(ctx.namespace, "Notebook", "note", resolution.text)
        return f"memo://fact/{fact}"


class Note:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(NoteKind())


class FlakyKind(NoteKind):
    name = "flaky"

    def scan(self, ctx):
        raise RuntimeError("scanner exploded")


class Flaky:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(FlakyKind())


class CrashyKind(NoteKind):
    name = "crashy"

    def apply(self, ctx, item, resolution):
        raise ZeroDivisionError("division by zero")


class Crashy:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(CrashyKind())


class Judge:
    @hookimpl
    def memors_check_submission(self, resolution):
        raise ValueError("cannot judge")


class Linter:
    @hookimpl
    def memors_lint_rules(self, context):
        raise KeyError("no such table")


class Clash:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(NoteKind.__new__(type("PageAgain", (NoteKind,), {"name": "page"})))


note, flaky, crashy, judge, linter, clash = Note(), Flaky(), Crashy(), Judge(), Linter(), Clash()
'''


@pytest.fixture
def plugins(tmp_path: Path):
    """``plugins("note", "flaky")`` → a CLI runner whose subprocesses find
    those entry points (``NAME = memors_test_plugins:NAME``)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "memors_test_plugins.py").write_text(PLUGINS)
    db = tmp_path / "store.db"

    def make(*names: str):
        env = plugin_env(
            tmp_path / ("site-" + "-".join(names)),
            {n: f"memors_test_plugins:{n}" for n in names},
            [src],
        )

        def run(*args: str, **extra: str):
            r = run_cli(*args, db=db, env={**env, **extra}, cwd=tmp_path)
            r.parsed = json.loads(r.out) if "--json" in args and r.out.strip() else None
            return r

        run.env = env
        run.db = db
        return run

    return make


def one_line(r: Any) -> str:
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r
    return lines[0]


# --- a new kind needs no frontend change -----------------------------------------------------


def test_compact_and_items_take_a_plugin_kind_by_name_and_list_it_in_errors(plugins):
    run = plugins("note")
    r = run("compact", "--kinds", "note")
    assert r.code == 0, r
    assert "#1     note       open     the notebook" in r.out
    assert [i["kind"] for i in run("items", "--kind", "note", "--json").parsed["items"]] == ["note"]
    registered = "registered kinds are conflict, duplicate, merge, note, page, stale"
    for args in (("compact", "--kinds", "nope"), ("items", "--kind", "nope")):
        r = run(*args)
        assert r.code == 2 and one_line(r) == f"memors-mcp: unknown kind 'nope': {registered}"


def test_set_and_resolution_json_submit_any_kind_generically(plugins):
    run = plugins("note")
    run("compact")
    # --set: JSON values where they parse (numbers, booleans, lists), text otherwise
    r = run(
        "submit", "1", "--set", "text=ship it", "--set", "count=3", "--set", 'tags=["a","b"]',
        "--set", "urgent=true", "--json",
    )  # fmt: skip
    assert r.code == 0 and r.parsed["stored"], r
    assert run("get", r.parsed["address"], "--json").parsed["value"] == "ship it"
    shown = run("items", "show", "1", "--json").parsed
    assert shown["resolution"] == {
        "text": "ship it",
        "count": 3,
        "tags": ["a", "b"],
        "urgent": True,
    }
    # the item is done: the next compact does not bring it back
    assert run("compact", "--kinds", "note", "--json").parsed["open"] == 0


def test_resolution_json_and_set_fill_one_object(plugins, tmp_path):
    run = plugins("note")
    run("compact")
    r = run(
        "submit", "1", "--resolution-json", '{"text": "from json"}', "--set", "count=2", "--json"
    )
    assert r.code == 0 and r.parsed["stored"], r
    assert run("items", "show", "1", "--json").parsed["resolution"] == {
        "text": "from json",
        "count": 2,
    }


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--set", "count=2"], 2, "required field missing @ resolution.text"),
        (["--set", "text=x", "--set", "count=many"], 2, "expected an integer, got str @ resolution.count"),
        (["--set", "text=x", "--set", "count=1", "--set", "urgent=yes"], 2, "expected true or false, got str @ resolution.urgent"),
        (["--set", "text=x", "--set", "count=1", "--set", "colour=red"], 2, "extra fields found (colour) @ resolution"),
        (["--set", "text=x", "--set", "count=0"], 2, "count must be at least 1, got 0"),
        (["--set", "count"], 2, "--set takes KEY=VALUE, got 'count'"),
        (["--resolution-json", "[1]"], 2, "--resolution-json must be a JSON object"),
        (["--resolution-json", "{text"], 2, "--resolution-json is not valid JSON"),
    ],
)  # fmt: skip
def test_a_resolution_that_does_not_fit_is_one_readable_line(plugins, args, code, message):
    run = plugins("note")
    run("compact")
    r = run("submit", "1", *args)
    assert r.code == code
    line = one_line(r)
    assert message in line
    if "resolution" in message and "--" not in message:
        # the kind's own hint says how to do it right
        assert line.endswith(
            "a note item takes text, count (--set text=… --set count=3), or skip with a reason"
        )
    assert run("items", "show", "1", "--json").parsed["status"] == "open"


def test_every_kind_can_be_skipped_with_a_reason(plugins):
    run = plugins("note")
    run("compact")
    r = run("submit", "1", "--skip", "--reason", "not now", "--json")
    assert r.code == 0 and r.parsed["status"] == "skipped", r


def test_the_mcp_server_lists_a_plugin_kind_and_takes_its_resolution_object(plugins):
    run = plugins("note", "flaky")
    params = StdioServerParameters(
        command=__import__("sys").executable,
        args=["-m", "memors_cli", "serve"],
        env={**_clean_env(), **run.env, "MEMORS_DB": str(run.db)},
    )

    async def main() -> None:
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            kinds = tools["compact"].input_schema["properties"]["kinds"]["description"]
            assert "note (write a note about the notebook; resolve with text, count" in kinds
            result = await client.call_tool("compact", {"kinds": ["note", "flaky"]})
            assert not result.is_error
            out = result.structured_content
            assert [i["kind"] for i in out["items"]] == ["note"]
            assert out["errors"] == [
                {"kind": "flaky", "plugin": "flaky", "error": "RuntimeError: scanner exploded"}
            ]
            item = out["items"][0]["id"]
            bad = await client.call_tool("submit", {"item": item, "resolution": {"text": 5}})
            assert bad.is_error
            assert "expected a string, got int @ resolution.text" in bad.content[0].text
            done = await client.call_tool(
                "submit", {"item": item, "resolution": {"text": "over mcp", "count": 1}}
            )
            assert not done.is_error and done.structured_content["stored"] is True

    anyio.run(main)


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORS_")}


# --- a broken plugin is named; the others still run -------------------------------------------


def test_a_scanner_that_raises_is_named_and_every_other_kind_still_runs(plugins, tmp_path):
    run = plugins("note", "flaky")
    (tmp_path / "raft.md").write_text("\n\n".join(passages_about("Raft", 3)) + "\n")
    assert run("remember", "raft.md").code == 0
    r = run("compact")
    assert r.code == 1
    assert "page       open     Raft (3 passages, 0 facts)" in r.out
    assert "note       open     the notebook" in r.out
    assert "error: kind flaky (plugin flaky) failed: RuntimeError: scanner exploded" in r.out
    data = run("compact", "--json").parsed
    assert data["errors"] == [
        {"kind": "flaky", "plugin": "flaky", "error": "RuntimeError: scanner exploded"}
    ]
    assert sorted(i["kind"] for i in data["items"]) == ["note", "page"]
    # without it, compact is clean again
    assert run("compact", MEMORS_DISABLE_PLUGINS="flaky").code == 0


def test_a_kind_whose_apply_raises_is_named_and_nothing_is_stored(plugins):
    run = plugins("crashy")
    run("compact", "--kinds", "crashy")
    r = run("submit", "1", "--set", "text=x", "--set", "count=1")
    assert r.code == 2
    assert one_line(r) == (
        "memors-mcp: kind 'crashy' (plugin 'crashy') failed in apply: "
        "ZeroDivisionError: division by zero; nothing was stored"
    )
    assert run("items", "show", "1", "--json").parsed["status"] == "open"
    assert run("fact", "list", "--json").parsed["facts"] == []


def test_a_check_that_raises_is_named_and_refuses_until_forced(plugins):
    run = plugins("note", "judge")
    run("compact", "--kinds", "note")
    r = run("submit", "1", "--set", "text=x", "--set", "count=1", "--json")
    assert r.code == 1 and r.parsed["stored"] is False
    assert r.parsed["checks"]["judge"] == {
        "passed": False,
        "flagged": [{"error": "ValueError: cannot judge"}],
    }
    r = run("submit", "1", "--set", "text=x", "--set", "count=1")
    assert "judge: FLAGGED" in r.out and "error=ValueError: cannot judge" in r.out
    assert run("submit", "1", "--set", "text=x", "--set", "count=1", "--force").code == 0


def test_a_lint_rule_that_raises_is_named_and_the_others_still_report(plugins):
    run = plugins("linter")
    assert run("fact", "add", "Raft", "leader", "node 3").code == 0
    assert run("fact", "add", "Raft", "leader", "node 4").code == 0
    r = run("lint", "--json")
    assert r.code == 1
    found = {(f["rule"], f["address"]) for f in r.parsed["findings"]}
    assert ("plugin-error", "plugin:linter") in found
    assert "contradiction" in {rule for rule, _ in found}
    [error] = [f for f in r.parsed["findings"] if f["rule"] == "plugin-error"]
    assert error["message"] == "lint rules of plugin 'linter' failed: KeyError: 'no such table'"


def test_a_kind_name_registered_twice_is_refused_naming_both_plugins(plugins):
    run = plugins("clash")
    r = run("compact")
    assert r.code == 2
    assert one_line(r) == (
        "memors-mcp: plugins 'clash' and 'page' both register the kind 'page': "
        "disable one with MEMORS_DISABLE_PLUGINS"
    )
    # its name is how to get going again
    assert run("compact", MEMORS_DISABLE_PLUGINS="clash").code == 0


def test_registering_a_taken_name_in_process_names_both_plugins():
    class Mine:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(type("Dup", (Kind,), {"name": "conflict"})())

    with pytest.raises(PluginError) as err, temporary_memory(plugins=[("mine", Mine())]):
        pass
    assert str(err.value) == (
        "plugins 'conflict' and 'mine' both register the kind 'conflict': "
        "disable one with MEMORS_DISABLE_PLUGINS"
    )


# --- memors_core.testing -----------------------------------------------------------------------


def test_a_test_plugin_named_like_an_installed_one_takes_its_place():
    class Quiet(Kind):
        name = "conflict"
        description = "a stand-in"

        def scan(self, ctx):
            return iter(())

    class StandIn:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(Quiet())

    with temporary_memory(plugins=[("conflict", StandIn())]) as memory:
        assert isinstance(memory.kinds.get("conflict"), Quiet)
        assert memory.kinds.owner("conflict") == "conflict"
        memory.record_fact("Raft", "leader", "a", valid_to="2030-01-01")
        memory.record_fact("Raft", "leader", "b", valid_to="2030-01-01")
        assert open_items(memory, "conflict") == []


def test_open_items_fails_the_test_when_a_scanner_raises():
    class Boom(Kind):
        name = "boom"

        def scan(self, ctx):
            raise OSError("disk gone")

    class P:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(Boom())

    with (
        temporary_memory(plugins=[("boom", P())], entrypoints=False) as memory,
        pytest.raises(AssertionError, match="OSError: disk gone"),
    ):
        open_items(memory)


def test_write_page_gives_an_entity_a_live_page():
    with temporary_memory() as memory:
        page = write_page(memory, "Raft", "Raft replicates a log.", title="About Raft")
        shown = to_json(memory.get(page))
        assert (shown["title"], shown["content"], shown["status"]) == (
            "About Raft",
            "Raft replicates a log.",
            "live",
        )
        assert open_items(memory, "page") == []
        with pytest.raises(AssertionError, match="already have a page"):
            write_page(memory, "Raft", "again")


def test_the_memors_cli_fixture_runs_the_real_cli_on_a_fresh_store(memors_cli):
    r = memors_cli("fact", "add", "Raft", "leader", "node 3", "--json")
    assert r.code == 0 and r.json["fact"].startswith("memo://fact/")
    with Memory.open(memors_cli.db) as memory:  # the fixture's store is the one written
        assert [f.value for f in memory.facts("Raft").facts] == ["node 3"]
    r = memors_cli("search", "node", "--granularity", "fact", "--json")
    assert [x["address"] for x in r.json["results"]] == [
        memors_cli("fact", "list", "--json").json["facts"][0]["address"]
    ]


def test_a_kind_test_is_a_few_lines():
    # What docs/plugins.md promises: a kind, its registration and its test.
    import attrs

    @attrs.frozen
    class Ack:
        ok: bool

    class Ping(Kind):
        name = "ping"
        resolution = Ack

        def scan(self, ctx):
            yield Candidate("ping", fingerprint("ping"), lambda: {"summary": "ping"})

        def validate(self, ctx, item, resolution):
            if not resolution.ok:
                raise BadInput("say ok")

        def apply(self, ctx, item, resolution):
            return None

    class P:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(Ping())

    with temporary_memory(plugins=[("ping", P())]) as memory:
        [item] = open_items(memory, "ping")
        with pytest.raises(BadInput, match="say ok"):
            memory.submit(item["id"], {"ok": False})
        assert memory.submit(item["id"], {"ok": True}).status == "done"
