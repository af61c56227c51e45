"""Kind ``page``: an entity has 3 or more live passages and no page."""

from __future__ import annotations

import pytest

from memors_core.domain.ids import parse_address
from memors_core.domain.text import content_hash
from memors_core.errors import BadInput
from memors_core.wire import to_json
from store_checks import value_of

RAFT = [
    "[[Raft]] elects a leader with randomized election timeouts.",
    "Followers in [[Raft]] append log entries sent by the leader.",
    "[[Raft]] commits an entry once a majority has stored it.",
    "A [[Raft]] leader sends heartbeats to keep its followers.",
]


def page_items(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["page"]))["items"]


def written(item: dict) -> str:
    return "\n\n".join(p["text"] for p in item["payload"]["passages"])


def test_three_live_passages_and_no_page_make_an_item(memory):
    memory.remember(RAFT[0], uri="a")
    memory.remember(RAFT[1], uri="b")
    assert page_items(memory) == []
    memory.remember(RAFT[2], uri="c")
    (item,) = page_items(memory)
    assert item["payload"]["entity"]["name"] == "Raft"


def test_passages_count_by_entity_however_it_is_named(memory):
    # Named by --entity, by a wiki link, and by a differently cased link.
    memory.remember("Leaders step down on a higher term.", entities=["Raft"], uri="a")
    memory.remember("See [[raft]] for log matching.", uri="b")
    memory.remember("[[RAFT|the protocol]] is understandable.", uri="c")
    (item,) = page_items(memory)
    assert item["payload"]["entity"]["name"] == "Raft"
    assert len(item["payload"]["passages"]) == 3


def test_forgotten_and_superseded_passages_do_not_count(memory):
    docs = [memory.remember(t, uri=f"d{i}") for i, t in enumerate(RAFT[:3])]
    memory.forget(docs[0].document)
    assert page_items(memory) == []
    memory.remember(RAFT[3], uri="d3")
    assert len(page_items(memory)) == 1
    memory.remember("Nothing about the protocol any more.", uri="d3")  # supersedes
    assert page_items(memory) == []


def test_payload_has_the_entity_its_live_passages_and_its_live_facts(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    kept = memory.record_fact("Raft", "election timeout", "150-300 ms").fact
    gone = memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01").fact
    memory.forget(gone)
    (item,) = page_items(memory)
    payload = item["payload"]
    assert set(payload) == {"entity", "passages", "facts"}
    assert set(payload["entity"]) == {"address", "name", "aliases"}
    assert [p["text"] for p in payload["passages"]] == RAFT[:3]
    for n, p in enumerate(payload["passages"], 1):
        assert set(p) == {"address", "document", "text", "ref"}
        assert p["ref"] == n  # the number a citation marker [n] uses
        assert p["address"].startswith("memo://passage/")
        assert p["document"].startswith("memo://document/")
    assert payload["facts"] == [
        {
            "address": kept,
            "subject": "Raft",
            "predicate": "election timeout",
            "value": "150-300 ms",
            "valid_from": None,
            "valid_to": None,
        }
    ]


def test_a_page_is_stored_as_an_inference_citing_its_passages(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    report = to_json(memory.submit(item["id"], content=written(item), title="Raft"))
    assert report["stored"] is True and report["status"] == "done"
    page = to_json(memory.get(report["address"]))
    assert page["is_inference"] == 1 and page["version"] == 1 and page["previous"] is None
    assert page["title"] == "Raft" and page["content"] == written(item)
    assert page["status"] == "live" and page["stale"] is False and page["flags"] == {}
    assert page["sources"] == sorted(p["address"] for p in item["payload"]["passages"])
    # Each source is stored with the passage's hash at build time.
    _, page_id = parse_address(report["address"])
    with memory.store.read() as tx:
        hashes = {s.passage: s.hash for s in tx.pages.sources(page_id)}
    for p in item["payload"]["passages"]:
        assert hashes[parse_address(p["address"])[1]] == content_hash(p["text"])
    assert value_of(memory, "SELECT is_inference FROM pages WHERE id = ?", (page_id,)) == 1
    # Searchable at granularity page; the entity shows its page; no new item.
    hits = to_json(memory.search("randomized election timeouts", granularity="page"))
    assert [h["address"] for h in hits["results"]] == [report["address"]]
    assert to_json(memory.entity("raft"))["page"] == report["address"]
    assert page_items(memory) == []
    assert to_json(memory.get(f"memo://item/{item['id']}"))["resolution"]["title"] == "Raft"


def test_cites_choose_a_subset_of_the_payload(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    first, second = (p["address"] for p in item["payload"]["passages"][:2])
    content = "\n".join(p["text"] for p in item["payload"]["passages"][:2])
    report = memory.submit(item["id"], content=content, title="Raft", cites=[first, second])
    assert to_json(memory.get(report.address))["sources"] == sorted([first, second])


@pytest.mark.parametrize(
    ("cites", "message"),
    [([], "at least one"), (["memo://passage/01990000-0000-7000-8000-000000000000"], "not among")],
)
def test_cites_outside_the_payload_are_refused(memory, cites, message):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    with pytest.raises(BadInput, match=message):
        memory.submit(item["id"], content=written(item), title="Raft", cites=cites)


def test_a_forgotten_page_asks_for_a_new_one(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    address = memory.submit(item["id"], content=written(item), title="Raft").address
    memory.forget(address)
    (again,) = page_items(memory)
    assert again["id"] != item["id"]
    assert to_json(memory.search("randomized election", granularity="page"))["results"] == []


def test_page_items_can_be_skipped(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    assert memory.submit(item["id"], skip=True, reason="not worth a page").status == "skipped"
    assert page_items(memory) == []


def test_a_purged_page_asks_for_a_new_one_as_lint_says(memory):
    for i, text in enumerate(RAFT[:3]):
        memory.remember(text, uri=f"d{i}")
    (item,) = page_items(memory)
    address = memory.submit(item["id"], content=written(item), title="Raft").address
    memory.purge(address)
    assert [f.rule for f in memory.lint().findings] == ["missing-page"]
    (again,) = page_items(memory)
    assert again["id"] != item["id"] and again["payload"] == item["payload"]
