"""Markers that mean the same thing across versions (issue 31, point 3).

A stale item keeps the previous page's numbering: each passage keeps the
``ref`` its markers used, a number is never given to another passage, and
a change to a passage the page cited says which number it had. So the
previous page's unchanged sentences, resubmitted as they were, pass; a
marker naming a passage forgotten since is flagged as such (check
``citations``: "[2] names a passage forgotten since: …"), not as a
corruption. Through the library, the CLI and MCP.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from memors_core import Memory
from memors_core.testing import open_items
from memors_core.wire import to_json
from memors_mcp.server import build_server

ETCD = [
    "[[Etcd]] stores its keys in a multi-version B-tree on disk.",
    "Every [[Etcd]] member persists a write-ahead log before answering.",
    "[[Etcd]] watches stream revisions to clients over gRPC.",
    "Leases in [[Etcd]] expire keys when their holder stops renewing them.",
    "[[Etcd]] compaction discards revisions older than a chosen one.",
]


def plain(text: str) -> str:
    return text.replace("[[", "").replace("]]", "")


def sentence_lines(passages: list[dict[str, Any]]) -> list[str]:
    return [f"{plain(p['text'])} [{p['ref']}]" for p in passages]


def built(memory: Memory) -> dict[str, Any]:
    """Etcd's page, each sentence citing its passage; then passage [2] is
    forgotten. Returns the old sentences, the stale item and the gone passage."""
    docs = [memory.remember(t, uri=f"etcd-{i}.md") for i, t in enumerate(ETCD)]
    [item] = open_items(memory, "page")
    lines = sentence_lines(item["payload"]["passages"])
    assert [p["ref"] for p in item["payload"]["passages"]] == [1, 2, 3, 4, 5]
    report = memory.submit(item["id"], content="\n\n".join(lines), title="Etcd")
    assert report.stored, report
    gone = docs[1].passages[0]
    memory.forget(gone, reason="member logs moved")
    [stale] = open_items(memory, "stale")
    return {"lines": lines, "item": stale, "gone": gone}


def test_the_previous_page_keeps_its_numbers(memory: Memory) -> None:
    made = built(memory)
    payload = made["item"]["payload"]
    # Before: renumbered 1 to 4, so the old [3] named what had been [4].
    refs = {p["address"]: p["ref"] for p in payload["passages"]}
    assert sorted(refs.values()) == [1, 3, 4, 5]
    assert [plain(p["text"]) for p in payload["passages"]] == [
        plain(t) for n, t in enumerate(ETCD) if n != 1
    ]
    [change] = [c for c in payload["changes"] if c["change"] == "forgotten"]
    assert (change["address"], change["ref"]) == (made["gone"], 2)


def test_unchanged_sentences_pass_and_a_forgotten_marker_is_flagged_as_such(memory: Memory):
    made = built(memory)
    item, lines = made["item"], made["lines"]
    # The whole old page, as it was: only the sentence citing [2] is flagged, by `citations`.
    report = to_json(
        memory.submit(item["id"], content="\n\n".join(lines), title="Etcd", dry_run=True)
    )
    checks = report["checks"]
    assert checks["corruption"]["passed"] and checks["substitution"]["passed"], checks
    [flag] = checks["citations"]["flagged"]
    assert flag["marker"] == "[2]" and flag["passage"] == made["gone"]
    assert flag["message"] == f"[2] names a passage forgotten since: {ETCD[1]}"
    assert flag["sentence"] == plain(ETCD[1])
    # Without it, the unchanged sentences pass as they are.
    kept = [line for line in lines if "[2]" not in line]
    stored = to_json(memory.submit(item["id"], content="\n\n".join(kept), title="Etcd"))
    assert stored["stored"], stored
    assert all(c["passed"] for c in stored["checks"].values())
    page = to_json(memory.get(stored["address"]))
    assert [s["sources"] for s in page["sentences"]] == [
        [p["address"]] for p in item["payload"]["passages"]
    ]


def test_a_page_forced_over_a_lost_marker_shows_it_unverified(memory: Memory) -> None:
    made = built(memory)
    item, lines = made["item"], made["lines"]
    report = memory.submit(item["id"], content="\n\n".join(lines), title="Etcd", force=True)
    page = to_json(memory.get(report.address))
    [lost] = [s for s in page["sentences"] if s["flags"]]
    assert lost["sources"] == [] and lost["flags"][0]["check"] == "citations"
    assert lost["flags"][0]["message"].startswith("[2] names a passage forgotten since:")


def test_the_next_version_keeps_the_numbers_too(memory: Memory) -> None:
    made = built(memory)
    item, lines = made["item"], made["lines"]
    kept = [line for line in lines if "[2]" not in line]
    assert memory.submit(item["id"], content="\n\n".join(kept), title="Etcd").stored
    more = ["[[Etcd]] defragments its database file to return space.", "[[Etcd]] serves reads."]
    for n, text in enumerate(more):
        memory.remember(text, uri=f"more-{n}.md")
    [again] = open_items(memory, "stale")
    refs = [p["ref"] for p in again["payload"]["passages"]]
    assert refs == [1, 3, 4, 5, 6, 7]  # 2 is never given to another passage
    report = memory.submit(again["id"], content="\n\n".join(kept), title="Etcd", dry_run=True)
    assert report.checks["corruption"].passed and report.checks["substitution"].passed


def test_through_the_cli_and_mcp(cli) -> None:
    with Memory.open(cli.db) as memory:
        made = built(memory)
    item, lines = made["item"], made["lines"]
    page = cli.tmp / "page.md"
    page.write_text("\n\n".join(lines))
    r = cli("submit", str(item["id"]), "--content-file", str(page), "--title", "Etcd", "--json")
    assert r.code == 1, r
    assert [f["marker"] for f in r.json["checks"]["citations"]["flagged"]] == ["[2]"]
    text = cli("submit", str(item["id"]), "--content-file", str(page), "--title", "Etcd").out
    assert "[2] names a passage forgotten since:" in text
    with Memory.open(cli.db) as memory:

        async def main() -> Any:
            async with Client(build_server(memory, "default")) as client:
                kept = "\n\n".join(line for line in lines if "[2]" not in line)
                return await client.call_tool(
                    "submit", {"item": item["id"], "content": kept, "title": "Etcd"}
                )

        result = anyio.run(main)
    assert result.structured_content["stored"] is True, json.dumps(result.structured_content)
