"""What was not verified never looks verified (issue 31, point 1).

A page stored over its checks' flags (``force``) records, on each sentence,
what flagged it. ``get`` (library, CLI, MCP), the MCP page resource and
search mark those sentences as unverified — not as citing a passage — and
``lint`` lists the page (``unverified-page``) until a clean resubmission
(a new version that passes the checks) supersedes it. The web view is
covered in tests/web/test_web_http.py.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from memors_core import Memory
from memors_core.testing import open_items, passages_about
from memors_core.wire import to_json
from memors_mcp.server import build_server

RUST = "Etcd is written in Rust."


def clean(text: str) -> str:
    return text.replace("[[", "").replace("]]", "")


def forced_etcd_page(memory: Memory) -> dict[str, Any]:
    """Etcd's page, stored with ``force`` over all three checks: one cited
    sentence that holds, "Etcd is written in Rust." (no source says so), and
    a fact (Etcd is written in Go) the page leaves out."""
    memory.remember("\n\n".join(passages_about("Etcd", 3)), title="Etcd")
    go = memory.record_fact("Etcd", "language", "Go").fact
    [item] = open_items(memory, "page")
    first = item["payload"]["passages"][0]
    content = f"# Etcd\n\n{clean(first['text'])} [1]\n\n{RUST}\n"
    report = to_json(memory.submit(item["id"], content=content, title="Etcd", force=True))
    assert report["stored"], report
    checks = report["checks"]
    assert not any(checks[c]["passed"] for c in ("omission", "corruption", "substitution"))
    return {"page": report["address"], "cited": first["address"], "fact": go}


def sentence(page: dict[str, Any], text: str) -> dict[str, Any]:
    [found] = [s for s in page["sentences"] if s["text"] == text]
    return found


def test_a_forced_sentence_is_unverified_not_cited(memory: Memory) -> None:
    made = forced_etcd_page(memory)
    page = to_json(memory.get(made["page"]))
    rust = sentence(page, RUST)
    # Before: it "cited" the passage it shared the word Etcd with, like a real citation.
    assert rust["sources"] == []
    assert [f["check"] for f in rust["flags"]] == ["corruption", "substitution"]
    [sub] = [f for f in rust["flags"] if f["check"] == "substitution"]
    assert (sub["token"], sub["class"]) == ("Rust", "name")
    assert "'Rust' is in none of its sources" in sub["message"]
    held = [s for s in page["sentences"] if s["text"] != RUST]
    assert held and all(s["flags"] == [] for s in held)
    assert held[0]["sources"] == [made["cited"]]


def test_lint_lists_a_forced_page_until_a_clean_version_replaces_it(memory: Memory) -> None:
    made = forced_etcd_page(memory)
    [finding] = [f for f in to_json(memory.lint())["findings"] if f["rule"] == "unverified-page"]
    assert finding["address"] == made["page"]
    assert RUST in finding["message"]
    assert "substitution: the name 'Rust' is in none of its sources" in finding["message"]
    assert made["fact"] in finding["message"] and finding["related"] == [made["fact"]]

    # Two more passages make the page stale; a version that passes clears it.
    for text in passages_about("Etcd", 5)[3:]:
        memory.remember(text)
    [item] = open_items(memory, "stale")
    passages = item["payload"]["passages"]
    body = " ".join(f"{clean(p['text'])} [{p['ref']}]" for p in passages)
    content = f"# Etcd\n\n{body}\n\nEtcd's language is Go.\n"
    report = to_json(memory.submit(item["id"], content=content, title="Etcd"))
    assert report["stored"], report
    rules = [f["rule"] for f in to_json(memory.lint())["findings"]]
    assert "unverified-page" not in rules
    new = to_json(memory.get(report["address"]))
    assert all(s["flags"] == [] for s in new["sentences"])
    # The old version keeps what it was stored with (history is not rewritten).
    assert sentence(to_json(memory.get(made["page"])), RUST)["flags"]


def test_search_marks_the_unverified_sentences_of_a_page(memory: Memory) -> None:
    made = forced_etcd_page(memory)
    hits = to_json(memory.search("etcd rust", granularity="page"))["results"]
    assert [h["address"] for h in hits] == [made["page"]]
    assert hits[0]["unverified"] == [RUST]
    passages = to_json(memory.search("etcd", granularity="passage"))["results"]
    assert passages and all("unverified" not in h for h in passages)


def test_the_cli_marks_the_sentence_in_get_search_and_lint(cli) -> None:
    with Memory.open(cli.db) as memory:
        made = forced_etcd_page(memory)
    lines = cli("get", made["page"]).out.splitlines()
    at = lines.index(f"  2. {RUST}")
    assert lines[at + 1].startswith("     UNVERIFIED, corruption: shares only")
    assert (
        lines[at + 2] == "     UNVERIFIED, substitution: the name 'Rust' is in none of its sources"
    )
    assert lines[at + 3] == "     cites nothing"
    data = json.loads(cli("get", made["page"], "--json").out)
    assert sentence(data, RUST)["sources"] == []
    found = cli("search", "etcd rust", "--granularity", "page").out
    assert f"UNVERIFIED: {RUST}" in found
    assert json.loads(cli("search", "etcd rust", "--granularity", "page", "--json").out)["results"][
        0
    ]["unverified"] == [RUST]
    lint = cli("lint")
    assert lint.code == 1, lint  # findings
    assert "unverified-page" in lint.out and RUST in lint.out


def test_mcp_get_search_and_the_page_resource_mark_it(memory: Memory) -> None:
    made = forced_etcd_page(memory)

    async def main() -> tuple[Any, Any, str, Any]:
        async with Client(build_server(memory, "default")) as client:
            got = await client.call_tool("get", {"address": made["page"]})
            found = await client.call_tool("search", {"query": "etcd rust", "granularity": "page"})
            resource = await client.read_resource(made["page"])
            lint = await client.call_tool("lint", {})
            return got, found, resource.contents[0].text, lint

    got, found, text, lint = anyio.run(main)
    assert sentence(got.structured_content, RUST)["flags"]
    assert sentence(got.structured_content, RUST)["sources"] == []
    assert found.structured_content["results"][0]["unverified"] == [RUST]
    assert "Unverified: 1 sentence(s) stored over the checks' flags" in text
    assert f"2. {RUST} — UNVERIFIED (stored over its checks' flags: corruption:" in text
    rules = [f["rule"] for f in lint.structured_content["findings"]]
    assert "unverified-page" in rules
