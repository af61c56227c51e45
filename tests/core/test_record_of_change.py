"""The record of change is visible: ``get`` on a forgotten or superseded row
says when, why and by what; a document shows its versions; a conflict can be
settled by bounding one fact (a new row; the old one gets a tombstone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from memors_core import Memory
from memors_core.testing import open_items, write_page
from memors_mcp.server import build_server


def _conflict(cli) -> tuple[str, str, int]:
    a = cli("fact", "add", "Raft", "leader", "n1", "--from", "2024-01-01", "--json").json["fact"]
    b = cli("fact", "add", "Raft", "leader", "n2", "--from", "2024-03-01", "--json").json["fact"]
    (item,) = cli("compact", "--kinds", "conflict", "--json").json["items"]
    return a, b, item["id"]


def test_a_new_version_shows_in_get_of_the_document_and_of_the_dropped_passage(cli):
    notes = cli.tmp / "notes.md"
    notes.write_text("# Notes\n\nRaft elects a leader.\n\nPaxos is older.\n")
    assert cli("remember", str(notes)).code == 0
    first = cli("remember", str(notes), "--json").json
    notes.write_text("# Notes v2\n\nRaft elects a leader.\n\nViewstamped replication.\n")
    second = cli("remember", str(notes), "--json").json
    dropped = (set(first["passages"]) - set(second["passages"])).pop()

    got = cli("get", dropped, "--json").json
    assert got["status"] == "superseded"
    record = got["superseded"]
    assert record["reason"] == "document version 2" and record["at"] >= got["created_at"]
    assert record["by"] == second["document"] and record["version"] == 2
    text = cli("get", dropped).out
    assert "superseded:" in text and f"by: {second['document']}" in text

    doc = cli("get", second["document"], "--json").json
    assert [(v["version"], v["title"], v["passages"]) for v in doc["versions"]] == [
        (1, "Notes", 2),
        (2, "Notes v2", 2),
    ]
    assert "forgotten" not in doc and "superseded" not in doc  # live: no tombstone to show
    assert "versions:" in cli("get", second["document"]).out


def test_a_forgotten_fact_says_when_and_why(cli):
    fact = cli("fact", "add", "Raft", "leader", "n1", "--json").json["fact"]
    cli("forget", fact, "--reason", "n1 was never elected")
    got = cli("get", fact, "--json").json
    assert got["status"] == "forgotten"
    assert set(got["forgotten"]) == {"at", "reason"}
    assert got["forgotten"]["reason"] == "n1 was never elected"
    assert "reason: n1 was never elected" in cli("get", fact).out


def test_a_fact_superseded_by_keep_names_the_kept_fact_and_the_item(cli):
    a, b, item = _conflict(cli)
    assert cli("submit", str(item), "--keep", b).code == 0
    record = cli("get", a, "--json").json["superseded"]
    assert record["by"] == b and record["item"] == f"memo://item/{item}"
    assert f"kept {b}" in record["reason"]


def test_bound_ends_the_older_fact_where_the_newer_begins(cli):
    a, b, item = _conflict(cli)
    done = cli("submit", str(item), "--bound", a, "--to", "2024-03-01", "--json")
    assert done.code == 0, done
    report = done.json
    copy = report["address"]
    assert report["status"] == "done" and report["superseded"] == [a]
    assert copy not in (a, b) and report["bounded"] == copy

    old = cli("get", a, "--json").json  # the raw row is unchanged, with a tombstone
    assert (old["valid_from"], old["valid_to"], old["status"]) == ("2024-01-01", None, "superseded")
    assert old["superseded"]["by"] == copy and old["superseded"]["item"] == f"memo://item/{item}"
    new = cli("get", copy, "--json").json
    assert new["status"] == "live" and (new["value"], new["valid_from"], new["valid_to"]) == (
        "n1",
        "2024-01-01",
        "2024-03-01",
    )
    assert cli("get", b, "--json").json["status"] == "live"
    assert cli("compact", "--kinds", "conflict", "--json").json["open"] == 0  # settled
    facts = {f["address"] for f in cli("fact", "list", "Raft", "--json").json["facts"]}
    assert facts == {copy, b}
    assert f"by: {copy}" in cli("get", a).out


def test_a_bound_that_still_overlaps_is_refused_and_nothing_changes(cli):
    a, b, item = _conflict(cli)
    bad = cli("submit", str(item), "--bound", a, "--to", "2024-04-01")
    assert bad.code == 2 and bad.out == ""
    assert "would still overlap" in bad.err and len(bad.err.strip().splitlines()) == 1
    assert "Traceback" not in bad.err
    for args, needle in (
        (("--bound", a), "--bound needs --from T or --to T"),
        (("--to", "2024-03-01"), "--from and --to go with --bound ADDR"),
        (("--bound", b, "--from", "2023-01-01"), "would still overlap"),
        (("--bound", "memo://fact/nope", "--to", "2024-03-01"), "malformed"),
    ):
        result = cli("submit", str(item), *args)
        assert result.code == 2 and needle in result.err, (args, result)
    assert cli("get", a, "--json").json["status"] == "live"
    assert cli("items", "show", str(item), "--json").json["status"] == "open"


def test_bound_over_mcp_flat_and_as_a_resolution_and_in_the_library(fresh_store, tmp_path: Path):
    with Memory.open(fresh_store("m.db")) as memory:
        pairs = []
        for subject in ("Raft", "Paxos", "Zab"):
            a = memory.record_fact(subject, "leader", "n1", valid_from="2024-01-01").fact
            b = memory.record_fact(subject, "leader", "n2", valid_from="2024-03-01").fact
            pairs.append((a, b))
        items = {i["payload"]["facts"][0]["address"]: i["id"] for i in open_items(memory)}

        async def main() -> list[Any]:
            async with Client(build_server(memory)) as client:
                (a1, _), (a2, _), _ = pairs
                flat = await client.call_tool(
                    "submit", {"item": items[a1], "bound": {"fact": a1, "valid_to": "2024-03-01"}}
                )
                nested = await client.call_tool(
                    "submit",
                    {
                        "item": items[a2],
                        "resolution": {"bound": {"fact": a2, "valid_to": "2024-03-01"}},
                        "dry_run": True,
                    },
                )
                overlap = await client.call_tool(
                    "submit", {"item": items[a2], "bound": {"fact": a2, "valid_to": "2024-06-01"}}
                )
                real = await client.call_tool(
                    "submit", {"item": items[a2], "bound": {"fact": a2, "valid_to": "2024-02-01"}}
                )
                got = await client.call_tool("get", {"address": a1})
                resource = (await client.read_resource(a1)).contents[0].text
                return [flat, nested, overlap, real, got, resource]

        flat, nested, overlap, real, got, resource = anyio.run(main)
        assert not flat.is_error and flat.structured_content["stored"] is True
        assert nested.structured_content["stored"] is False  # a dry run: what it would do
        assert nested.structured_content["superseded"] == [pairs[1][0]]
        assert overlap.is_error and "would still overlap" in overlap.content[0].text
        assert real.structured_content["stored"] is True
        record = got.structured_content["superseded"]
        assert record["by"] == flat.structured_content["address"]
        assert f"by {record['by']}" in got.content[0].text
        assert f"by {record['by']}, through memo://item/{items[pairs[0][0]]}" in resource

        a3, b3 = pairs[2]  # the library: the same resolution, as an argument
        report = memory.submit(items[a3], bound={"fact": a3, "valid_to": "2024-03-01"})
        copy = memory.get(report.address)
        assert (copy.valid_from, copy.valid_to, copy.value) == ("2024-01-01", "2024-03-01", "n1")
        assert memory.get(a3).superseded["by"] == report.address
        assert memory.get(b3).status == "live"


def test_a_superseded_page_names_the_newer_version(fresh_store, tmp_path: Path):
    with Memory.open(fresh_store("m.db")) as memory:
        first = write_page(memory, "Raft", "Raft elects a leader.")
        passage = memory.get(memory.get(first).sources[0])
        memory.forget(passage.address, reason="wrong")
        (item,) = open_items(memory, "stale")
        second = memory.submit(
            item["id"], content="Raft elects one leader.", title="Raft", force=True
        ).address
        old = memory.get(first)
        assert old.status == "superseded"
        assert old.superseded["by"] == second
        assert old.superseded["item"] == f"memo://item/{item['id']}"
        assert old.superseded["reason"] == "page version 2"
        assert memory.get(passage.address).forgotten["reason"] == "wrong"
