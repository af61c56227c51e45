"""Kind ``duplicate``: live passages from different documents whose word
3-gram Jaccard is at least 0.75, one item per cluster; ``keep`` forgets the
other members. (The scan's exactness is proven in test_duplicates.py.)"""

from __future__ import annotations

import pytest

from memors_core.errors import BadInput, Refused
from memors_core.wire import to_json

LICENCE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy "
    "of this software to deal in the software without restriction."
)
NEAR = LICENCE.replace("without restriction.", "without any restriction.")


def duplicates(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["duplicate"]))["items"]


@pytest.fixture
def trio(memory):
    a = memory.remember(f"{LICENCE}\n\nThe alpha tool sorts files.", uri="alpha").passages
    b = memory.remember(f"{LICENCE}\n\nThe beta tool counts lines.", uri="beta").passages
    c = memory.remember(f"{NEAR}\n\nThe gamma tool prints dates.", uri="gamma").passages
    return memory, [a[0], b[0], c[0]]


def test_a_cluster_is_one_item_with_passages_jaccard_pairs_and_count(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    payload = item["payload"]
    assert set(payload) == {"passages", "jaccard", "pairs", "pair_count"}
    assert sorted(p["address"] for p in payload["passages"]) == sorted(members)
    for p in payload["passages"]:
        assert set(p) == {"address", "document", "text"}
    assert payload["pair_count"] == 3 == len(payload["pairs"])
    for pair in payload["pairs"]:
        assert set(pair) == {"a", "b", "jaccard"} and pair["a"] < pair["b"]
    assert 0.75 <= payload["jaccard"] < 1.0
    assert payload["jaccard"] == min(p["jaccard"] for p in payload["pairs"])
    assert duplicates(memory) == [item]


def test_keep_forgets_every_other_member(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    report = to_json(memory.submit(item["id"], keep=members[1]))
    assert report["stored"] is True and report["address"] == members[1]
    states = [to_json(memory.get(p))["status"] for p in members]
    assert states == ["forgotten", "live", "forgotten"]
    assert duplicates(memory) == []
    hits = to_json(memory.search("hereby granted free of charge"))["results"]
    assert [h["address"] for h in hits] == [members[1]]


def test_keep_may_name_several_members(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    memory.submit(item["id"], keep=[members[0], members[2]])
    states = [to_json(memory.get(p))["status"] for p in members]
    assert states == ["live", "forgotten", "live"]
    # The two kept passages are still near duplicates: they form a new item.
    (again,) = duplicates(memory)
    assert sorted(p["address"] for p in again["payload"]["passages"]) == sorted(
        [members[0], members[2]]
    )
    # Keeping both says they are not duplicates: not asked again while nothing changes.
    memory.submit(again["id"], keep=[members[0], members[2]])
    assert duplicates(memory) == []


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ([], "at least one"),
        (["memo://passage/01990000-0000-7000-8000-000000000000"], "not a member"),
        (["memo://fact/01990000-0000-7000-8000-000000000000"], "passage"),
    ],
)
def test_keep_must_name_members(trio, keep, message):
    memory, members = trio
    (item,) = duplicates(memory)
    with pytest.raises(BadInput, match=message):
        memory.submit(item["id"], keep=keep)
    assert all(to_json(memory.get(p))["status"] == "live" for p in members)


def test_a_member_forgotten_meanwhile_refuses_the_submission(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    memory.forget(members[2])
    with pytest.raises(Refused, match="run compact again"):
        memory.submit(item["id"], keep=members[0])
    assert to_json(memory.get(members[1]))["status"] == "live"
    (fresh,) = duplicates(memory)  # the cluster shrank: a fresh item
    assert len(fresh["payload"]["passages"]) == 2


def test_forgetting_a_duplicate_cited_by_a_page_marks_the_page_stale(memory):
    cited = []
    for i, tool in enumerate(["alpha", "beta", "gamma"]):
        r = memory.remember(f"[[Licensing]] {LICENCE}" if i == 0 else f"[[Licensing]] {tool}.")
        cited.append(r.passages[0])
    copy = memory.remember(f"Licensing {LICENCE}", uri="copy").passages[0]
    page_item = to_json(memory.compact(kinds=["page"]))["items"][0]
    body = "\n".join(p["text"] for p in page_item["payload"]["passages"])
    page = memory.submit(page_item["id"], content=body, title="Licensing").address
    (item,) = duplicates(memory)
    memory.submit(item["id"], keep=copy)
    assert to_json(memory.get(cited[0]))["status"] == "forgotten"
    assert to_json(memory.get(page))["stale"] is True


def test_same_document_copies_are_not_duplicates(memory):
    memory.remember(f"{LICENCE}\n\nIntro.\n\n{LICENCE}", uri="one")
    assert duplicates(memory) == []
