"""Kind ``merge``: candidates from name folding, aliases and propose_merge;
accept folds the second entity into the first, reject is final."""

from __future__ import annotations

import re

import pytest

from memors_core.errors import BadInput, Refused
from memors_core.wire import to_json

QR = [
    "[[Quorum Replication]] writes every entry to a majority of replicas.",
    "Reads under [[Quorum Replication]] contact a read quorum first.",
    "[[Quorum Replication]] tolerates a minority of failed nodes.",
]


def merges(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["merge"]))["items"]


def names(item: dict) -> list[str]:
    return [e["name"] for e in item["payload"]["entities"]]


def marked_stale_total(memory) -> float:
    m = re.search(r"^memors_store_pages_marked_stale_total (\S+)$", memory.metrics(), re.M)
    return float(m.group(1))


def test_names_that_fold_equal_are_candidates(memory):
    memory.remember("[[Quorum Replication]] needs a majority.", uri="a")
    memory.remember("We use [[quorum-replication]] here.", uri="b")
    memory.remember("[[Raft]] and [[Paxos]] are unrelated names.", uri="c")
    (item,) = merges(memory)
    assert names(item) == ["Quorum Replication", "quorum-replication"]
    assert merges(memory) == [item]  # idempotent


def test_the_payload_carries_both_entities_with_passages_facts_and_pages(memory):
    for i, text in enumerate(QR):
        memory.remember(text, uri=f"qr-{i}")
    page_item = to_json(memory.compact(kinds=["page"]))["items"][0]
    page = memory.submit(page_item["id"], content="\n".join(QR), title="QR").address
    memory.remember("[[quorum_replication]] is spelled oddly here.", uri="odd")
    fact = memory.record_fact("quorum_replication", "write quorum", "3").fact
    (item,) = merges(memory)
    first, second = item["payload"]["entities"]
    for e in (first, second):
        assert {"address", "name", "aliases", "passages", "facts", "page"} <= set(e)
    assert first["name"] == "Quorum Replication" and first["page"]["address"] == page
    assert set(first["page"]) == {"address", "title", "content", "version"}
    assert [p["text"] for p in first["passages"]] == QR
    assert second["page"] is None
    assert [f["address"] for f in second["facts"]] == [fact]


def test_accept_makes_the_second_an_alias_of_the_first_and_moves_everything(memory):
    for i, text in enumerate(QR):
        memory.remember(text, uri=f"qr-{i}")
    page_item = to_json(memory.compact(kinds=["page"]))["items"][0]
    page = memory.submit(page_item["id"], content="\n".join(QR), title="QR").address
    odd = memory.remember("[[quorum-replication]] needs three nodes.", uri="odd").passages[0]
    fact = memory.record_fact("quorum-replication", "minimum nodes", "3").fact
    loser = to_json(memory.entity("quorum-replication"))["address"]
    (item,) = merges(memory)
    report = to_json(memory.submit(item["id"], accept=True))
    survivor = item["payload"]["entities"][0]["address"]
    assert report["stored"] is True and report["address"] == survivor
    # The survivor has the alias, the passages and the facts.
    shown = to_json(memory.entity("Quorum Replication"))
    assert shown["address"] == survivor and shown["aliases"] == ["quorum-replication"]
    assert odd in [p["address"] for p in shown["passages"]]
    assert [f["address"] for f in shown["facts"]] == [fact]
    assert to_json(memory.entity("quorum-replication"))["address"] == survivor
    assert to_json(memory.get(fact))["subject"] == survivor
    merged = to_json(memory.get(loser))
    assert merged["status"] == "superseded" and merged["merged_into"] == survivor
    # Search by the alias finds the survivor, and only it.
    hits = to_json(memory.search("quorum-replication", granularity="entity"))["results"]
    assert [h["address"] for h in hits] == [survivor]
    # The survivor's page went stale, and was counted.
    assert to_json(memory.get(page))["stale"] is True
    assert marked_stale_total(memory) == 1
    (stale,) = to_json(memory.compact(kinds=["stale"]))["items"]
    assert stale["payload"]["page"]["address"] == page
    assert odd in [p["address"] for p in stale["payload"]["passages"]]
    assert merges(memory) == []


def test_a_new_name_matching_an_alias_is_a_candidate(memory):
    memory.remember("[[Raft]] is a consensus protocol.", uri="a")
    memory.remember("[[Replicated Log Protocol]] is what we call it.", uri="b")
    memory.propose_merge(["Raft", "Replicated Log Protocol"])
    (item,) = merges(memory)
    memory.submit(item["id"], accept=True)
    memory.remember("The [[replicated-log-protocol]] again.", uri="c")
    (again,) = merges(memory)
    assert names(again) == ["Raft", "replicated-log-protocol"]


def test_propose_merge_opens_an_item_and_reject_is_final(memory):
    memory.remember("[[Raft]] elects leaders.", uri="a")
    memory.remember("[[Paxos]] has proposers.", uri="b")
    proposed = to_json(memory.propose_merge(["Raft", "Paxos"]))
    assert proposed["status"] == "open"
    (item,) = merges(memory)
    assert item["payload"]["candidate"] == proposed["candidate"]
    assert names(item) == ["Raft", "Paxos"]
    report = to_json(memory.submit(item["id"], reject=True))
    assert report["stored"] is True and report["address"] is None
    for pair in (["Raft", "Paxos"], ["Paxos", "Raft"]):
        with pytest.raises(Refused, match="rejected before"):
            memory.propose_merge(pair)
    assert merges(memory) == []
    assert to_json(memory.entity("Paxos"))["name"] == "Paxos"


def test_the_scanner_never_reopens_a_rejected_pair(memory):
    memory.remember("[[Quorum Replication]] needs a majority.", uri="a")
    memory.remember("We use [[quorum-replication]] here.", uri="b")
    (item,) = merges(memory)
    memory.submit(item["id"], reject=True)
    memory.remember("More on [[quorum-replication]].", uri="c")
    memory.remember("More on [[Quorum Replication]].", uri="d")
    for _ in range(2):
        assert merges(memory) == []


@pytest.mark.parametrize(
    "fields",
    [{"accept": True, "reject": True}, {"accept": False}, {"keep": ["memo://fact/0199"]}],
)
def test_a_merge_takes_exactly_one_of_accept_or_reject(memory, fields):
    memory.remember("[[Quorum Replication]] needs a majority.", uri="a")
    memory.remember("We use [[quorum-replication]] here.", uri="b")
    (item,) = merges(memory)
    with pytest.raises(BadInput):
        memory.submit(item["id"], **fields)
    assert merges(memory) == [item]


def test_a_merge_item_can_be_skipped_and_stays_skipped(memory):
    memory.remember("[[Quorum Replication]] needs a majority.", uri="a")
    memory.remember("We use [[quorum-replication]] here.", uri="b")
    (item,) = merges(memory)
    memory.submit(item["id"], skip=True, reason="unsure")
    assert merges(memory) == []


def test_when_both_have_pages_the_second_page_is_superseded(memory):
    pages = {}
    for name in ("Quorum Replication", "quorum-replication"):
        for i in range(3):
            memory.remember(f"[[{name}]] fact number {i} about {name} writes.", uri=f"{name}{i}")
    for item in to_json(memory.compact(kinds=["page"]))["items"]:
        body = "\n".join(p["text"] for p in item["payload"]["passages"])
        name = item["payload"]["entity"]["name"]
        pages[name] = memory.submit(item["id"], content=body, title=name).address
    (item,) = merges(memory)
    memory.submit(item["id"], accept=True)
    assert to_json(memory.get(pages["quorum-replication"]))["status"] == "superseded"
    survivor = to_json(memory.get(pages["Quorum Replication"]))
    assert survivor["status"] == "live" and survivor["stale"] is True
    assert to_json(memory.entity("quorum-replication"))["page"] == pages["Quorum Replication"]
    (stale,) = to_json(memory.compact(kinds=["stale"]))["items"]
    assert len(stale["payload"]["passages"]) == 6
