"""One broken plugin does not take the memory down (issue 13, point 8).

Installed plugins are real entry points (a ``.dist-info`` on PYTHONPATH,
written by ``plugin_env``): ``broken`` raises ImportError at import (after
it once worked and left an open item of its kind), ``wrong`` has a hook
that does not fit its spec, ``nameless`` registers a kind without a name.
Through the real CLI and a real MCP client: every command works, each
broken plugin named in one warning line on stderr; only what needs it
fails, naming it and its error; a disabled plugin is silent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from memors_core import Memory, PluginError
from memors_core.testing import passages_about, plugin_env, run_cli

WORKING = """
from memors_core import hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint


class BrokenKind(Kind):
    name = "broken"
    description = "one item per namespace"

    def scan(self, ctx):
        yield Candidate("one", fingerprint("one"), lambda: {"summary": "the one"})


class Plugin:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(BrokenKind())


plugin = Plugin()
"""

BROKEN = "raise ImportError('needs a missing library')\n"

WRONG = """
from memors_core import hookimpl


class Wrong:
    @hookimpl
    def memors_extract_entities(self, text, language):
        return []


plugin = Wrong()
"""

NAMELESS = """
from memors_core import hookimpl
from memors_core.plugins.kinds import Kind


class Nameless:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(Kind())


plugin = Nameless()
"""

ERRORS = {
    "broken": "ImportError: needs a missing library",
    "wrong": "invalid: Plugin 'wrong' for hook 'memors_extract_entities'",
    "nameless": "registered a kind without a name",
}
CANNOT_RUN = (
    "memors-mcp: kind 'broken' cannot run: its plugin 'broken' failed to load: "
    "ImportError: needs a missing library"
)
SUBMIT_REFUSED = (
    "memors-mcp: item 1 is of kind 'broken', whose plugin 'broken' failed to load: "
    "ImportError: needs a missing library; nothing was stored"
)


@pytest.fixture
def store(tmp_path: Path) -> dict[str, Any]:
    """A store with an open ``broken`` item (made while the plugin still
    worked), then the plugin broken, with ``wrong`` and ``nameless`` also
    installed. ``run(*args)`` runs the real CLI there."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "memors_wrong_hook.py").write_text(WRONG)
    (src / "memors_nameless_kind.py").write_text(NAMELESS)
    module = src / "memors_broken_kind.py"
    module.write_text(WORKING)
    db = tmp_path / "store.db"
    # While it still works, alone, it leaves an open item of its kind.
    alone = plugin_env(tmp_path / "site-alone", {"broken": "memors_broken_kind:plugin"}, [src])
    first = run_cli("compact", "--kinds", "broken", "--json", db=db, env=alone, cwd=tmp_path)
    assert first.code == 0 and [i["kind"] for i in first.json["items"]] == ["broken"], first
    module.write_text(BROKEN)
    env = plugin_env(
        tmp_path / "site",
        {
            "broken": "memors_broken_kind:plugin",
            "wrong": "memors_wrong_hook:plugin",
            "nameless": "memors_nameless_kind:plugin",
        },
        [src],
    )

    def run(*args: str, **extra: str):
        return run_cli(*args, db=db, env={**env, **extra}, cwd=tmp_path)

    (tmp_path / "raft.md").write_text("\n\n".join(passages_about("Raft", 3)) + "\n")
    return {"run": run, "env": env, "db": db, "src": src, "site": tmp_path / "site"}


def warnings(err: str) -> dict[str, dict[str, Any]]:
    """The ``plugin_failed_to_load`` events on stderr, by plugin; each is
    exactly one line and named once."""
    events = [json.loads(line) for line in err.splitlines() if "plugin_failed_to_load" in line]
    named = [e["plugin"] for e in events]
    assert sorted(named) == sorted(set(named)), err  # once each
    return {e["plugin"]: e for e in events}


def assert_named(err: str) -> None:
    found = warnings(err)
    assert sorted(found) == sorted(ERRORS), err
    for name, error in ERRORS.items():
        event = found[name]
        assert event["level"] == "warning" and error in event["error"], event
    assert "Traceback" not in err


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines, err
    return lines[-1]


# --- the real CLI ------------------------------------------------------------------------------


def test_every_command_works_and_names_each_broken_plugin_in_one_warning_line(store):
    run = store["run"]
    for args in (
        ("lint", "--json"),  # before remember: no findings, exit 0
        ("remember", "raft.md", "--json"),
        ("search", "replication", "--json"),
        ("metrics",),
        ("items", "--json"),
        ("get", "memo://item/1", "--json"),
    ):
        r = run(*args)
        assert r.code == 0, (args, r)
        # nothing else on stderr: one line per broken plugin, each valid JSON
        assert len(r.err.strip().splitlines()) == len(ERRORS), (args, r)
        assert_named(r.err)
        if args[0] == "search":
            assert r.json["results"], r
        if args[0] == "metrics":
            # the kinds that loaded are still counted
            assert 'memors_kb_work_items_open{kind="broken",namespace="default"} 1.0' in r.out
    # its stored items are listed without the plugin
    r = run("items", "--kind", "broken", "--json")
    assert r.code == 0 and [i["id"] for i in r.json["items"]] == [1], r


def test_only_what_needs_the_broken_plugin_fails_naming_it(store):
    run = store["run"]
    assert run("remember", "raft.md").code == 0
    r = run("compact", "--kinds", "broken")
    assert r.code == 2 and last_line(r.err) == CANNOT_RUN, r
    r = run("compact", "--kinds", "page,broken", "--json")
    assert r.code == 2 and last_line(r.err) == CANNOT_RUN, r
    assert r.json["error"]["code"] == "plugin-error"
    r = run("submit", "1", "--skip", "--reason", "not now")
    assert r.code == 2 and last_line(r.err) == SUBMIT_REFUSED, r
    assert_named(r.err)
    assert run("items", "show", "1", "--json").json["status"] == "open"
    # every kind that loaded runs; the ones that could not are said, once each
    r = run("compact", "--json")
    assert r.code == 1, r
    assert_named(r.err)
    assert "page" in {i["kind"] for i in r.json["items"]}
    errors = {e["plugin"]: e for e in r.json["errors"]}
    assert sorted(errors) == sorted(ERRORS)
    assert errors["broken"] == {
        "kind": "broken",
        "plugin": "broken",
        "error": "plugin failed to load: ImportError: needs a missing library",
    }
    r = run("compact")
    assert (
        "error: kind broken (plugin broken) failed: plugin failed to load: "
        "ImportError: needs a missing library" in r.out
    )
    # and the rest of the queue works as ever
    page = next(i for i in run("items", "--kind", "page", "--json").json["items"])
    done = run("submit", str(page["id"]), "--skip", "--reason", "later", "--json")
    assert done.code == 0 and done.json["status"] == "skipped", done
    # a disabled plugin is silent, as before
    quiet = {"MEMORS_DISABLE_PLUGINS": "broken,wrong,nameless"}
    for args in (("search", "x"), ("compact",)):
        r = run(*args, **quiet)
        assert r.code == 0 and r.err == "", (args, r)
    r = run("compact", "--kinds", "broken", **quiet)
    assert r.code == 2 and "unknown kind 'broken'" in last_line(r.err)


def test_purge_refuses_while_a_plugin_that_may_hold_the_text_failed_to_load(store):
    """A kind that did not load cannot erase what it derived from the text:
    purge names it and erases nothing, until it is fixed or disabled."""
    run = store["run"]
    r = run("remember", "raft.md", "--json")
    assert r.code == 0, r
    doc = r.json["document"]
    r = run("purge", doc, "--yes")
    assert r.code == 2 and "nothing was purged" in last_line(r.err), r
    assert "MEMORS_DISABLE_PLUGINS=" in last_line(r.err)
    assert run("get", doc).code == 0
    quiet = {"MEMORS_DISABLE_PLUGINS": "broken,wrong,nameless"}
    assert run("purge", doc, "--yes", **quiet).code == 0
    assert run("get", doc, **quiet).code == 2


def test_the_library_says_what_failed(store, monkeypatch):
    monkeypatch.syspath_prepend(str(store["src"]))
    monkeypatch.syspath_prepend(str(store["site"]))
    monkeypatch.delenv("MEMORS_DISABLE_PLUGINS", raising=False)
    with Memory.open(store["db"]) as memory:
        assert set(memory.plugin_errors) == set(ERRORS)
        assert memory.plugin_errors["broken"] == "ImportError: needs a missing library"
        assert "broken" not in memory.kinds and "page" in memory.kinds
        memory.remember("Raft elects a leader by majority vote.")
        assert memory.search("leader").results
        with pytest.raises(PluginError, match="its plugin 'broken' failed to load"):
            memory.compact(["broken"])


# --- a real MCP client over stdio ------------------------------------------------------------


def test_the_mcp_server_starts_serves_and_names_the_broken_plugin(store, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORS_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memors_cli", "serve"],
        env={**env, **store["env"], "MEMORS_DB": str(store["db"])},
    )
    errlog = tmp_path / "server.err"

    async def main() -> None:
        with errlog.open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                stored = await client.call_tool(
                    "remember", {"text": "Raft elects a leader by majority vote."}
                )
                assert not stored.is_error, stored
                found = await client.call_tool("search", {"query": "leader"})
                assert not found.is_error and found.structured_content["results"], found
                bad = await client.call_tool("compact", {"kinds": ["broken"]})
                assert bad.is_error and CANNOT_RUN.removeprefix("memors-mcp: ") in (
                    bad.content[0].text
                )
                refused = await client.call_tool(
                    "submit", {"item": 1, "skip": True, "reason": "not now"}
                )
                assert refused.is_error
                assert SUBMIT_REFUSED.removeprefix("memors-mcp: ") in refused.content[0].text
                every = await client.call_tool("compact", {})
                assert not every.is_error
                assert {e["plugin"] for e in every.structured_content["errors"]} == set(ERRORS)

    anyio.run(main)
    assert_named(errlog.read_text())
