"""What the web view reads through ``Memory``: lists one page at a time, a
fact's whole history, the entities merged into one, and where each address is
shown (``get``'s ``url``)."""

from __future__ import annotations

import pytest

from memors_core import BadInput, Memory
from memors_core.wire import to_json, with_web_url


def _entities(memory: Memory, n: int) -> None:
    memory.remember_many(
        [{"text": f"Node {i:03d} runs a replica.", "entities": [f"node-{i:03d}"]} for i in range(n)]
    )


def test_entities_come_one_page_at_a_time_in_name_order(memory: Memory) -> None:
    _entities(memory, 7)
    first = memory.entities(limit=3).entities
    rest = memory.entities(offset=3).entities
    assert [e.name for e in first] == ["node-000", "node-001", "node-002"]
    assert [e.name for e in rest] == [f"node-{i:03d}" for i in range(3, 7)]
    assert all(e.passages == 1 for e in first + rest)
    assert memory.entity_count() == 7
    assert memory.entity_count("elsewhere") == 0


@pytest.mark.parametrize("bad", [-1, "2", True, 1.5])
def test_a_bad_offset_is_refused_in_one_line(memory: Memory, bad: object) -> None:
    with pytest.raises(BadInput, match="offset must be an integer"):
        memory.entities(offset=bad)  # type: ignore[arg-type]


def test_items_page_by_id_and_are_counted(memory: Memory) -> None:
    for name in ("Raft", "Paxos", "Zab"):
        memory.record_fact(name, "kind", "protocol")
        memory.record_fact(name, "kind", "algorithm")
    assert len(memory.compact(kinds=["conflict"]).items) == 3
    first, second = memory.items(limit=2).items
    (third,) = memory.items(after=second.id).items
    assert first.id < second.id < third.id
    assert memory.item_count() == 3
    assert memory.item_count("conflict", "open") == 3
    assert memory.item_count("page") == 0
    with pytest.raises(BadInput, match="after must be an item id"):
        memory.items(after=-5)
    with pytest.raises(BadInput, match="limit must be a positive integer"):
        memory.items(limit=0)


def test_fact_history_keeps_what_a_conflict_superseded(memory: Memory) -> None:
    old = memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01").fact
    new = memory.record_fact("Raft", "leader", "n2", valid_from="2024-03-01").fact
    (item,) = memory.compact(kinds=["conflict"]).items
    memory.submit(item.id, {"keep": new})
    history = memory.fact_history("Raft")
    assert [(f.address, f.status) for f in history] == [(old, "superseded"), (new, "live")]
    assert history[0].superseded is not None and history[0].superseded["by"] == new
    assert [f.address for f in memory.facts("Raft").facts] == [new]


def test_absorbed_names_the_entities_merged_into_one(memory: Memory) -> None:
    memory.remember("Raft elects a leader.", entities=["Raft"])
    memory.remember("The Raft protocol replicates a log.", entities=["Raft protocol"])
    memory.propose_merge(["Raft", "Raft protocol"])
    (item,) = memory.compact(kinds=["merge"]).items
    memory.submit(item.id, {"accept": True})
    assert [e.name for e in memory.absorbed("Raft")] == ["Raft protocol"]
    # A merged entity's name now names the survivor.
    assert memory.absorbed("Raft protocol") == memory.absorbed("Raft")


def test_get_names_where_the_web_view_shows_a_row(memory: Memory) -> None:
    passage = memory.remember("Raft elects a leader.", namespace="team-a").passages[0]
    data = with_web_url(to_json(memory.get(passage, namespace="team-a")), "team-a")
    ident = passage.rsplit("/", 1)[1]
    assert data["url"] == f"/ns/team-a/passage/{ident}"
    assert list(data)[:4] == ["address", "type", "status", "url"]


def test_the_cli_get_prints_the_url(cli) -> None:
    passage = cli("remember", "-", "--json", input="Raft elects a leader.\n").json["passages"][0]
    shown = cli("get", passage, "--json").json
    assert shown["url"] == "/ns/default/passage/" + passage.rsplit("/", 1)[1]
    assert "url: /ns/default/passage/" in cli("get", passage).out


def test_get_many_reads_what_get_reads_and_leaves_out_what_is_not_there(memory: Memory) -> None:
    first, second = memory.remember("Raft elects a leader.\n\nPaxos is older.").passages
    memory.forget(second, reason="wrong")
    missing = "memo://passage/01a23426-ebd4-731c-bcb5-fbcb533c09d8"
    found = memory.get_many([first, second, missing, "not an address", first])
    assert list(found) == [first, second]
    assert found[first] == memory.get(first)
    assert found[second].status == "forgotten" and found[second].forgotten["reason"] == "wrong"
    assert memory.get_many([first], namespace="elsewhere") == {}
