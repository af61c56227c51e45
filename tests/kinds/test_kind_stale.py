"""Kind ``stale``: a page's sources changed or were forgotten (a cited
passage or a fact it was built with), its entity was merged, or its entity
gained 2 or more live passages since the page was built. Pages are marked
stale in the same transaction that forgets or supersedes a cited passage or
a fact they were built with; each change carries the changed row's text."""

from __future__ import annotations

import re

import pytest

from memors_core.wire import to_json

RAFT = [
    "[[Raft]] elects a leader with randomized election timeouts.",
    "Followers in [[Raft]] append log entries sent by the leader.",
    "[[Raft]] commits an entry once a majority has stored it.",
]
MORE = [
    "A [[Raft]] leader sends heartbeats to keep its followers.",
    "[[Raft]] snapshots compact the log of each server.",
    "Membership changes in [[Raft]] use joint consensus.",
]


def marked_stale_total(memory) -> float:
    m = re.search(r"^memors_store_pages_marked_stale_total (\S+)$", memory.metrics(), re.M)
    return float(m.group(1))


def stale_gauge(memory) -> float:
    m = re.search(r'^memors_kb_pages_stale\{namespace="default"\} (\S+)$', memory.metrics(), re.M)
    return float(m.group(1))


@pytest.fixture
def built(memory):
    """A Raft page v1 built from three documents; returns (memory, docs, page)."""
    docs = [memory.remember(t, uri=f"raft-{i}.md") for i, t in enumerate(RAFT)]
    item = to_json(memory.compact(kinds=["page"]))["items"][0]
    content = "# Raft\n\n" + "\n\n".join(RAFT)
    page = memory.submit(item["id"], content=content, title="Raft").address
    return memory, docs, page


def stale_items(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["stale"]))["items"]


def test_a_fresh_page_is_not_stale(built):
    memory, _docs, page = built
    assert stale_items(memory) == []
    assert to_json(memory.get(page))["stale"] is False
    assert marked_stale_total(memory) == 0 and stale_gauge(memory) == 0


def test_forgetting_a_cited_passage_marks_the_page_stale_at_once(built):
    memory, docs, page = built
    memory.forget(docs[0].passages[0], reason="wrong")
    # No compact yet: the forget itself marked and counted the page.
    assert to_json(memory.get(page))["stale"] is True
    assert marked_stale_total(memory) == 1 and stale_gauge(memory) == 1
    memory.forget(docs[1].document)  # a second change counts the page once only
    assert marked_stale_total(memory) == 1
    (item,) = stale_items(memory)
    payload = item["payload"]
    assert set(payload) == {"entity", "page", "changes", "passages", "facts"}
    assert payload["page"] == {
        "address": page,
        "title": "Raft",
        "content": "# Raft\n\n" + "\n\n".join(RAFT),
        "version": 1,
    }
    assert payload["changes"] == [
        {"address": docs[0].passages[0], "change": "forgotten", "text": RAFT[0], "ref": 1},
        {"address": docs[1].passages[0], "change": "forgotten", "text": RAFT[1], "ref": 2},
    ]
    assert [p["text"] for p in payload["passages"]] == RAFT[2:]
    assert [p["ref"] for p in payload["passages"]] == [3]  # the number the page gave it


def test_a_rollback_does_not_count_a_page_as_marked(built):
    memory, docs, page = built
    with pytest.raises(RuntimeError), memory.store.write() as tx:
        tx.tombstones.add("default", "passage", docs[0].passages[0][15:], "forgotten")
        raise RuntimeError("abort")
    assert marked_stale_total(memory) == 0
    assert to_json(memory.get(page))["stale"] is False


def test_a_new_document_version_supersedes_and_marks_stale(built):
    memory, docs, page = built
    memory.remember("[[Raft]] elects a leader after a randomized timeout.", uri="raft-0.md")
    assert marked_stale_total(memory) == 1
    assert to_json(memory.get(page))["stale"] is True
    (item,) = stale_items(memory)
    changes = item["payload"]["changes"]
    superseded = {"address": docs[0].passages[0], "change": "superseded", "text": RAFT[0]}
    assert {**superseded, "ref": 1} in changes
    [new] = [c for c in changes if c["change"] == "new"]
    assert new["text"] == "[[Raft]] elects a leader after a randomized timeout."


def test_one_new_passage_is_not_enough_two_are(built):
    memory, _docs, page = built
    memory.remember(MORE[0], uri="more-0")
    assert stale_items(memory) == []
    memory.remember(MORE[1], uri="more-1")
    (item,) = stale_items(memory)
    assert [(c["change"], c["text"]) for c in item["payload"]["changes"]] == [
        ("new", MORE[0]),
        ("new", MORE[1]),
    ]
    # Gaining passages is not a source change: nothing was marked or counted.
    assert marked_stale_total(memory) == 0
    assert stale_gauge(memory) == 1
    assert to_json(memory.get(page))["stale"] is True


def test_refreshing_stores_a_new_version_linked_to_the_old(built):
    memory, docs, page = built
    memory.forget(docs[0].document)
    memory.remember(MORE[0], uri="more-0")
    item = stale_items(memory)[0]
    content = "# Raft\n\n" + "\n\n".join(p["text"] for p in item["payload"]["passages"])
    report = to_json(memory.submit(item["id"], content=content, title="Raft (v2)"))
    assert report["stored"] is True and report["kind"] == "stale"
    assert report["diff"].splitlines()[:2] == ["--- previous", "+++ submitted"]
    assert "-" + RAFT[0] in report["diff"].splitlines()
    assert "+" + MORE[0] in report["diff"].splitlines()
    new = to_json(memory.get(report["address"]))
    assert new["version"] == 2 and new["previous"] == page and new["is_inference"] == 1
    assert new["status"] == "live" and new["stale"] is False
    assert new["sources"] == sorted(p["address"] for p in item["payload"]["passages"])
    old = to_json(memory.get(page))
    assert old["status"] == "superseded" and old["content"].startswith("# Raft")
    # Search finds the live version only; the entity points at it; nothing is stale.
    hits = to_json(memory.search("heartbeats followers", granularity="page"))["results"]
    assert [h["address"] for h in hits] == [report["address"]]
    assert to_json(memory.entity("Raft"))["page"] == report["address"]
    assert stale_items(memory) == []
    assert stale_gauge(memory) == 0


def test_an_open_stale_item_is_refreshed_and_then_obsolete_when_the_page_goes(built):
    memory, docs, page = built
    memory.forget(docs[0].document)
    (item,) = stale_items(memory)
    memory.forget(docs[1].document)
    result = to_json(memory.compact(kinds=["stale"]))
    assert result["created"] == 0 and result["items"][0]["id"] == item["id"]
    assert len(result["items"][0]["payload"]["changes"]) == 2
    memory.forget(page)
    assert stale_items(memory) == []
    assert to_json(memory.get(f"memo://item/{item['id']}"))["status"] == "obsolete"


def test_a_skipped_stale_item_comes_back_when_more_changes(built):
    memory, docs, _page = built
    memory.forget(docs[0].document)
    (item,) = stale_items(memory)
    memory.submit(item["id"], skip=True, reason="minor")
    assert stale_items(memory) == []
    memory.forget(docs[1].document)
    (again,) = stale_items(memory)
    assert again["id"] != item["id"]


FACTS = "Raft leader is n1.\n\nRaft leader is n2."


def build_with_facts(memory) -> tuple[str, str, str]:
    """A Raft page built while two disagreeing facts about its leader were
    live; returns (the n1 fact, the n2 fact, the page)."""
    for i, text in enumerate(RAFT):
        memory.remember(text, uri=f"raft-{i}.md")
    n1 = memory.record_fact("Raft", "leader", "n1").fact
    n2 = memory.record_fact("Raft", "leader", "n2").fact
    item = to_json(memory.compact(kinds=["page"]))["items"][0]
    content = "# Raft\n\n" + "\n\n".join(RAFT) + "\n\n" + FACTS
    report = memory.submit(item["id"], content=content, title="Raft")
    assert report.stored, to_json(report)["checks"]
    return n1, n2, report.address


def test_a_fact_superseded_after_the_page_was_built_makes_it_stale_at_once(memory):
    n1, n2, page = build_with_facts(memory)
    assert to_json(memory.get(page))["facts"] == [n1, n2]
    assert stale_items(memory) == []
    (conflict,) = to_json(memory.compact(kinds=["conflict"]))["items"]
    assert memory.submit(conflict["id"], keep=n2).stored
    # No compact yet: superseding the fact marked and counted the page.
    assert to_json(memory.get(page))["stale"] is True
    assert marked_stale_total(memory) == 1 and stale_gauge(memory) == 1
    (item,) = stale_items(memory)
    assert item["payload"]["changes"] == [
        {"address": n1, "change": "superseded", "text": "Raft leader n1"}
    ]
    assert [f["address"] for f in item["payload"]["facts"]] == [n2]
    # The new version is built with the facts that hold now, and is not stale.
    content = "# Raft\n\n" + "\n\n".join(RAFT) + "\n\nRaft leader is n2."
    report = memory.submit(item["id"], content=content, title="Raft")
    assert report.stored, to_json(report)["checks"]
    assert to_json(memory.get(report.address))["facts"] == [n2]
    assert stale_items(memory) == [] and stale_gauge(memory) == 0


def test_forgetting_a_fact_the_page_was_built_with_makes_it_stale(memory):
    _n1, n2, page = build_with_facts(memory)
    memory.forget(n2, reason="wrong")
    assert to_json(memory.get(page))["stale"] is True
    assert marked_stale_total(memory) == 1
    (item,) = stale_items(memory)
    assert item["payload"]["changes"] == [
        {"address": n2, "change": "forgotten", "text": "Raft leader n2"}
    ]


def test_a_fact_recorded_after_the_page_does_not_make_it_stale(built):
    memory, _docs, page = built
    memory.record_fact("Raft", "leader", "n3")
    assert to_json(memory.get(page))["stale"] is False
    assert to_json(memory.get(page))["facts"] == []
    assert stale_items(memory) == []


def test_a_merge_stale_item_lists_the_merged_entity_and_its_passages(memory):
    # The merged entity's passage is older than the page: only the merge brings it.
    theirs = memory.remember("The [[Raft protocol]] was designed to be understandable.", uri="rp")
    docs = [memory.remember(t, uri=f"raft-{i}.md") for i, t in enumerate(RAFT)]
    item = to_json(memory.compact(kinds=["page"]))["items"][0]
    page = memory.submit(item["id"], content="# Raft\n\n" + "\n\n".join(RAFT), title="Raft")
    assert page.stored
    proposed = to_json(memory.propose_merge(["Raft", "Raft protocol"]))
    (merge,) = to_json(memory.compact(kinds=["merge"]))["items"]
    assert memory.submit(merge["id"], accept=True).stored
    assert marked_stale_total(memory) == 1
    (stale,) = stale_items(memory)
    changes = stale["payload"]["changes"]
    assert changes == [
        {"address": proposed["entities"][1], "change": "merged", "text": "Raft protocol"},
        {
            "address": theirs.passages[0],
            "change": "new",
            "text": "The [[Raft protocol]] was designed to be understandable.",
        },
    ]
    cited = {d.passages[0] for d in docs}
    assert {p["address"] for p in stale["payload"]["passages"]} == cited | {theirs.passages[0]}
