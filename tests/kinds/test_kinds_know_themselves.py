"""Kinds know themselves (issue 14, point 5).

What the CLI and the executor show of a work item comes from its kind —
``summary(payload)``, ``usage``, ``diff(item, resolution)``, ``writes_page``
— never from a table of kind names, so a third-party kind is shown exactly
as a built-in one. The kinds here come from a test plugin found through real
entry points (``plugin_env``) by the real CLI in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memors_core.testing import passages_about, plugin_env, run_cli
from ollama_standin import OllamaStandIn

# The test plugin: a kind that shows itself (summary, usage, hint, diff) and
# never touches the store, one whose summary is broken, and two page kinds
# that differ only in what they declare about writing pages.
PLUGINS = '''
import attrs

from memors_core import BadInput, hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_kinds.page import PageKind

BOOKS = ["Dune", "Emma", "Ulysses"]


@attrs.frozen
class ShelfResolution:
    order: list[str]


class ShelveKind(Kind):
    name = "shelve"
    description = "put the books of a shelf in order"
    resolution = ShelfResolution
    hint = "order = every one of the payload's books, in shelf order"
    usage = "submit {id} --set 'order=[\\"TITLE\\", ...]'"
    instructions = "list every book of `payload.books` in `order`, as they should stand"

    def summary(self, payload):
        return f"sort {len(payload['books'])} books on shelf {payload['shelf']}"

    def diff(self, item, resolution):
        return f"- {', '.join(item.payload['books'])}\\n+ {', '.join(resolution.order)}\\n"

    def scan(self, ctx):
        yield Candidate("B2", fingerprint(BOOKS), lambda: {"shelf": "B2", "books": BOOKS})

    def validate(self, ctx, item, resolution):
        if sorted(resolution.order) != sorted(item.payload["books"]):
            raise BadInput("order must list every book of the shelf once")


class BrokenKind(ShelveKind):
    name = "broken"

    def summary(self, payload):
        return payload["no such field"]


class WikiKind(PageKind):
    """A third party's page kind: its items are pages, and it says so."""

    name = "wiki"
    writes_page = True


class DraftKind(PageKind):
    """Page-shaped items too, but this kind does not want them written by a model."""

    name = "draft"
    writes_page = False


def plugin(kind):
    class Plugin:
        @hookimpl
        def memors_register_kinds(self, registry):
            registry.add(kind)

    return Plugin()


shelve, broken = plugin(ShelveKind()), plugin(BrokenKind())
wiki, draft = plugin(WikiKind()), plugin(DraftKind())
'''

MODEL = "test-model"


@pytest.fixture
def plugins(tmp_path: Path, store_address: Path | str):
    """``plugins("shelve")`` → a CLI runner whose subprocesses find those
    entry points (``NAME = memors_kind_test_plugins:NAME``)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "memors_kind_test_plugins.py").write_text(PLUGINS)

    def make(*names: str):
        env = plugin_env(
            tmp_path / ("site-" + "-".join(names)),
            {n: f"memors_kind_test_plugins:{n}" for n in names},
            [src],
        )

        def run(*args: str, **extra: str):
            return run_cli(*args, db=store_address, env={**env, **extra}, cwd=tmp_path)

        return run

    return make


def one_line(r: Any) -> str:
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r
    return lines[0]


def test_the_item_line_says_what_a_plugin_kind_asks_for_in_its_own_words(plugins):
    run = plugins("shelve")
    r = run("compact", "--kinds", "shelve")
    assert r.code == 0, r
    assert "#1     shelve     open     sort 3 books on shelf B2" in r.out
    r = run("items", "--kind", "shelve")
    assert r.code == 0, r
    assert r.out.strip() == "#1     shelve     open     sort 3 books on shelf B2"
    # the summary is shown, not stored: the JSON is the payload as the kind gave it
    [item] = json.loads(run("items", "--kind", "shelve", "--json").out)["items"]
    assert item["payload"] == {"shelf": "B2", "books": ["Dune", "Emma", "Ulysses"]}


def test_a_summary_that_raises_is_named_on_its_line_and_the_listing_goes_on(plugins, tmp_path):
    run = plugins("shelve", "broken")
    (tmp_path / "raft.md").write_text("\n\n".join(passages_about("Raft", 3)) + "\n")
    assert run("remember", "raft.md").code == 0
    r = run("compact")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert any(
        line.endswith("(kind broken (plugin broken) failed in summary: KeyError: 'no such field')")
        for line in lines
    ), r.out
    assert any(line.endswith("open     sort 3 books on shelf B2") for line in lines), r.out
    assert any(line.endswith("open     Raft (3 passages, 0 facts)") for line in lines), r.out


def test_items_show_tells_how_to_complete_it_with_the_kinds_usage(plugins):
    run = plugins("shelve")
    run("compact")
    r = run("items", "show", "1")
    assert r.code == 0, r
    fingerprint = json.loads(run("items", "show", "1", "--json").out)["fingerprint"]
    assert (
        f"""complete it with: memors-mcp submit 1 --set 'order=["TITLE", ...]' """
        f"--fingerprint {fingerprint}"
    ) in r.out


def test_a_resolution_that_does_not_fit_is_refused_with_the_hint_and_the_usage(plugins):
    run = plugins("shelve")
    run("compact")
    r = run("submit", "1", "--set", "count=3")
    assert r.code == 2
    assert one_line(r) == (
        "memors-mcp: item 1 is a shelve item and this resolution does not fit "
        "(required field missing @ resolution.order; extra fields found (count) @ resolution); "
        "a shelve item takes order = every one of the payload's books, in shelf order, or skip "
        """with a reason; on the command line: memors-mcp submit 1 --set 'order=["TITLE", ...]'"""
    )
    # the kind's own refusal gets the usage too
    r = run("submit", "1", "--set", 'order=["Dune"]')
    assert r.code == 2
    assert one_line(r).startswith("memors-mcp: order must list every book of the shelf once; ")
    assert one_line(r).endswith("""memors-mcp submit 1 --set 'order=["TITLE", ...]'""")


def test_the_submit_report_shows_the_kinds_diff(plugins):
    run = plugins("shelve")
    run("compact")
    order = '["Ulysses", "Dune", "Emma"]'
    r = run("submit", "1", "--set", f"order={order}", "--dry-run", "--json")
    assert r.code == 0, r
    report = json.loads(r.out)
    assert report["diff"] == "- Dune, Emma, Ulysses\n+ Ulysses, Dune, Emma\n"
    assert report["stored"] is False
    r = run("submit", "1", "--set", f"order={order}", "--dry-run")
    assert r.code == 0, r
    assert "diff:\n- Dune, Emma, Ulysses\n+ Ulysses, Dune, Emma" in r.out


# --- the executor takes the kinds that write pages -------------------------------------------


@pytest.fixture
def ollama():
    with OllamaStandIn(models=(f"{MODEL}:latest",)) as standin:
        yield standin


def test_the_executor_writes_pages_for_the_kinds_that_say_they_write_pages(
    plugins, ollama, tmp_path
):
    # page is off, so the entity's page items are only the plugins' wiki and draft ones
    run = plugins("wiki", "draft")
    executor = {
        "MEMORS_OLLAMA_URL": ollama.url,
        "MEMORS_OLLAMA_MODEL": MODEL,
        "MEMORS_OLLAMA_TIMEOUT": "20",
        "MEMORS_DISABLE_PLUGINS": "page",
    }
    (tmp_path / "raft.md").write_text("\n\n".join(passages_about("Raft", 3)) + "\n")
    assert run("remember", "raft.md").code == 0
    assert run("compact", "--kinds", "draft", **executor).code == 0

    r = run("compact", "--executor", "ollama", "--kinds", "draft", **executor)
    assert r.code == 2, r
    assert one_line(r) == (
        "memors-mcp: --executor ollama writes pages: --kinds may name only stale and wiki, "
        "not draft"
    )
    assert ollama.requests == []

    r = run("compact", "--executor", "ollama", "--apply", "--json", **executor)
    assert r.code == 0, r
    result = json.loads(r.out)
    assert [i["kind"] for i in result["items"]] == ["wiki"]
    assert result["summary"]["written"] == 1
    # the draft item was left for someone else; the wiki one is done, its page stored
    listed = json.loads(run("items", "--json", **executor).out)["items"]
    assert sorted((i["kind"], i["status"]) for i in listed) == [
        ("draft", "open"),
        ("wiki", "done"),
    ]
    found = json.loads(run("search", "Raft", "--granularity", "page", "--json").out)
    assert len(found["results"]) == 1
