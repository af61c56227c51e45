"""Every work item carries its ``fingerprint``; a submission that echoes it
is refused, nothing stored, when the item was refreshed since that payload
was handed out (SPEC §5). Through the real CLI and a real MCP client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from mcp_clients.harness import Calls, stdio_params
from memors_core.testing import passages_about

HEX = re.compile(r"^[0-9a-f]{32}$")


def remember_raft(cli, start: int, count: int) -> None:
    for i, text in enumerate(passages_about("Raft", start + count)[start:]):
        assert cli("remember", "-", "--uri", f"raft-{start + i}", input=text).code == 0


def page_item(cli) -> dict[str, Any]:
    result = cli("compact", "--kinds", "page", "--json")
    assert result.code == 0, result
    (item,) = result.json["items"]
    return item


def test_compact_items_and_items_show_carry_the_same_fingerprint(cli):
    remember_raft(cli, 0, 3)
    item = page_item(cli)
    assert HEX.match(item["fingerprint"]), item
    (listed,) = cli("items", "--json").json["items"]
    assert listed["fingerprint"] == item["fingerprint"]
    shown = cli("items", "show", str(item["id"]), "--json").json
    assert shown["fingerprint"] == item["fingerprint"]
    assert (
        cli("get", f"memo://item/{item['id']}", "--json").json["fingerprint"] == item["fingerprint"]
    )


def test_a_submission_with_the_current_fingerprint_is_stored(cli, tmp_path: Path):
    remember_raft(cli, 0, 3)
    item = page_item(cli)
    page = tmp_path / "page.md"
    page.write_text("\n".join(p["text"] for p in item["payload"]["passages"]) + "\n")
    done = cli(
        "submit", str(item["id"]), "--content-file", str(page), "--title", "Raft",
        "--fingerprint", item["fingerprint"], "--json",
    )  # fmt: skip
    assert done.code == 0, done
    assert done.json["stored"] is True and done.json["status"] == "done"


def test_a_refreshed_item_refuses_the_old_fingerprint_and_stores_nothing(cli, tmp_path: Path):
    remember_raft(cli, 0, 3)
    old = page_item(cli)
    page = tmp_path / "page.md"
    page.write_text("\n".join(p["text"] for p in old["payload"]["passages"]) + "\n")
    # Someone adds a passage and runs compact: the item is refreshed in place.
    remember_raft(cli, 3, 1)
    new = page_item(cli)
    assert new["id"] == old["id"] and new["fingerprint"] != old["fingerprint"]
    args = ("submit", str(old["id"]), "--content-file", str(page), "--title", "Raft")
    for extra in ((), ("--dry-run",)):
        refused = cli(*args, *extra, "--fingerprint", old["fingerprint"])
        assert refused.code == 1, refused
        assert refused.out == ""
        (line,) = refused.err.splitlines()
        assert f"item {old['id']} was refreshed since that payload was handed out" in line
        assert "nothing was stored" in line and "run compact or items show" in line
        assert "Traceback" not in refused.err
    as_json = cli(*args, "--fingerprint", old["fingerprint"], "--json")
    assert as_json.code == 1 and as_json.json["error"]["code"] == "refused"
    # Nothing stored: the item is still open, and there is no page.
    assert cli("items", "show", str(old["id"]), "--json").json["status"] == "open"
    assert cli("search", "Raft", "--granularity", "page", "--json").json["results"] == []
    # The fresh fingerprint is accepted.
    ok = cli(*args, "--fingerprint", new["fingerprint"], "--json")
    assert ok.code == 0 and ok.json["stored"] is True, ok


def test_a_blank_fingerprint_is_bad_input(cli):
    remember_raft(cli, 0, 3)
    item = page_item(cli)
    bad = cli("submit", str(item["id"]), "--skip", "--reason", "later", "--fingerprint", " ")
    assert bad.code == 2, bad
    assert "fingerprint must be" in bad.err and len(bad.err.splitlines()) == 1
    assert cli("items", "show", str(item["id"]), "--json").json["status"] == "open"


def test_a_mistyped_fingerprint_says_so(cli):
    remember_raft(cli, 0, 3)
    item = page_item(cli)
    fp = item["fingerprint"]
    args = ("submit", str(item["id"]), "--skip", "--reason", "later", "--fingerprint")
    # one digit off, on an item that never changed since it was handed out
    typo = fp[:-1] + ("0" if fp[-1] != "0" else "1")
    bad = cli(*args, typo)
    assert bad.code == 2, bad
    assert bad.err.strip() == (
        f"memors-mcp: fingerprint {typo!r} is not item {item['id']}'s (item {item['id']} has "
        f"not changed since it was handed out): mistyped? nothing was stored — copy it from "
        f"compact or items show {item['id']}"
    )
    # not a fingerprint at all: cut short when copied, even on an item refreshed since
    remember_raft(cli, 3, 1)
    assert page_item(cli)["fingerprint"] != fp
    bad = cli(*args, fp[:20])
    assert bad.code == 2 and "mistyped?" in bad.err and "refreshed" not in bad.err, bad
    assert f"an item's fingerprint looks like {page_item(cli)['fingerprint']}" in bad.err
    assert cli("items", "show", str(item["id"]), "--json").json["status"] == "open"


def test_mcp_submit_refuses_a_refreshed_item_by_its_fingerprint(fresh_store, tmp_path: Path):
    async def main() -> None:
        async with Client(stdio_params(fresh_store("mcp.db"))) as client:
            c = Calls(client)
            for text in passages_about("Raft", 3):
                await c.ok("remember", {"text": text})
            (old,) = (await c.ok("compact", {"kinds": ["page"]}))["items"]
            assert HEX.match(old["fingerprint"])
            resource = (await client.read_resource(f"memo://item/{old['id']}")).contents[0]
            assert old["fingerprint"] in resource.text
            content = "\n".join(p["text"] for p in old["payload"]["passages"])
            await c.ok("remember", {"text": passages_about("Raft", 4)[3]})
            (new,) = (await c.ok("compact", {"kinds": ["page"]}))["items"]
            assert new["id"] == old["id"] and new["fingerprint"] != old["fingerprint"]
            args = {"item": old["id"], "title": "Raft", "content": content}
            await c.error(
                "submit",
                {**args, "fingerprint": old["fingerprint"]},
                f"item {old['id']} was refreshed since that payload was handed out",
                "nothing was stored",
            )
            (still,) = (await c.ok("compact", {"kinds": ["page"]}))["items"]
            assert still["status"] == "open" and still["fingerprint"] == new["fingerprint"]
            done = await c.ok("submit", {**args, "fingerprint": new["fingerprint"]})
            assert done["stored"] is True and done["status"] == "done"

    anyio.run(main)
