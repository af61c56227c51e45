"""Kind ``conflict``: two live facts about one subject (after merges) whose
predicates fold equal, whose values do not, and whose half-open validity
intervals overlap. ``keep`` one; the other is superseded."""

from __future__ import annotations

from datetime import date, timedelta
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core.errors import BadInput
from memors_core.testing import temporary_memory
from memors_core.wire import to_json


def conflicts(memory) -> list[dict]:
    return to_json(memory.compact(kinds=["conflict"]))["items"]


def pairs(memory) -> set[frozenset[str]]:
    return {frozenset(f["address"] for f in i["payload"]["facts"]) for i in conflicts(memory)}


def test_overlapping_disagreeing_facts_make_an_item_with_both_facts_and_sources(memory):
    src = memory.remember("The [[Raft]] cluster was led by n1 in January.", uri="log").passages[0]
    a = memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01", source=src).fact
    b = memory.record_fact("raft", "Leader", "n2", valid_from="2024-01-15").fact
    (item,) = conflicts(memory)
    payload = item["payload"]
    assert [f["address"] for f in payload["facts"]] == [a, b]
    for f in payload["facts"]:
        assert set(f) == {
            "address",
            "subject",
            "predicate",
            "value",
            "valid_from",
            "valid_to",
            "recorded_at",
        }
        assert f["subject"] == "Raft"
        assert f["recorded_at"] == to_json(memory.get(f["address"]))["recorded_at"]
    assert payload["facts"][0]["valid_from"] == "2024-01-01"
    assert payload["sources"] == [
        {
            "fact": a,
            "address": src,
            "document": to_json(memory.get(src))["document"],
            "text": "The [[Raft]] cluster was led by n1 in January.",
        }
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Touching half-open intervals do not overlap.
        (("leader", "n1", "2024-01-01", "2024-02-01"), ("leader", "n2", "2024-02-01", None)),
        (("leader", "n1", None, "2024-02-01"), ("leader", "n2", "2024-02-01T00:00:00Z", None)),
        # Values that fold equal agree.
        (("leader", "Node One", None, None), ("leader", "node-one", None, None)),
        # Different predicates say different things.
        (("leader", "n1", None, None), ("follower", "n2", None, None)),
    ],
)
def test_facts_that_do_not_conflict(memory, first, second):
    for predicate, value, vf, vt in (first, second):
        memory.record_fact("Raft", predicate, value, valid_from=vf, valid_to=vt)
    assert conflicts(memory) == []


def test_predicates_fold_and_unbounded_intervals_overlap(memory):
    memory.record_fact("Raft", "Election-Timeout", "150 ms")
    memory.record_fact("Raft", "election timeout", "300 ms", valid_to="2030-01-01")
    assert len(conflicts(memory)) == 1


def test_different_subjects_do_not_conflict_until_they_merge(memory):
    memory.record_fact("Raft", "leader", "n1")
    memory.record_fact("Raft protocol", "leader", "n2")
    assert conflicts(memory) == []
    memory.propose_merge(["Raft", "Raft protocol"])
    merge = to_json(memory.compact(kinds=["merge"]))["items"][0]
    memory.submit(merge["id"], accept=True)
    (item,) = conflicts(memory)
    assert {f["subject"] for f in item["payload"]["facts"]} == {"Raft"}


def test_keep_supersedes_the_other_fact(memory):
    a = memory.record_fact("Raft", "leader", "n1").fact
    b = memory.record_fact("Raft", "leader", "n2").fact
    (item,) = conflicts(memory)
    report = to_json(memory.submit(item["id"], keep=b))
    assert report["stored"] is True and report["address"] == b and report["checks"] == {}
    assert to_json(memory.get(a))["status"] == "superseded"
    assert to_json(memory.get(b))["status"] == "live"
    assert [f["address"] for f in to_json(memory.facts("Raft"))["facts"]] == [b]
    assert conflicts(memory) == []
    assert all(f.rule != "contradiction" for f in memory.lint().findings)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (["memo://fact/01990000-0000-7000-8000-000000000000"], "not one of item"),
        ("both", "exactly one"),
        (["memo://passage/01990000-0000-7000-8000-000000000000"], "fact"),
        ([], "exactly one"),
    ],
)
def test_keep_must_be_one_of_the_two_facts(memory, keep, message):
    a = memory.record_fact("Raft", "leader", "n1").fact
    b = memory.record_fact("Raft", "leader", "n2").fact
    (item,) = conflicts(memory)
    with pytest.raises(BadInput, match=message):
        memory.submit(item["id"], keep=[a, b] if keep == "both" else keep)
    assert to_json(memory.get(a))["status"] == to_json(memory.get(b))["status"] == "live"


def test_a_fact_forgotten_meanwhile_makes_the_item_obsolete(memory):
    a = memory.record_fact("Raft", "leader", "n1").fact
    memory.record_fact("Raft", "leader", "n2")
    (item,) = conflicts(memory)
    memory.forget(a)
    assert conflicts(memory) == []
    assert to_json(memory.get(f"memo://item/{item['id']}"))["status"] == "obsolete"


DAY0 = date(2024, 1, 1)
interval = st.tuples(st.none() | st.integers(0, 8), st.none() | st.integers(0, 8)).filter(
    lambda iv: iv[0] is None or iv[1] is None or iv[0] < iv[1]
)


def _iso(day: int | None) -> str | None:
    return None if day is None else (DAY0 + timedelta(days=day)).isoformat()


def _overlap(a, b) -> bool:
    """Half-open [from, to) overlap, brute force over the days."""
    lo = lambda d: -1 if d is None else d  # noqa: E731
    hi = lambda d: 10 if d is None else d  # noqa: E731
    return bool(set(range(lo(a[0]), hi(a[1]))) & set(range(lo(b[0]), hi(b[1]))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Raft", "raft", "Paxos"]),
            st.sampled_from(["leader", "Leader", "term"]),
            st.sampled_from(["n1", "N1", "n-2", "N 2"]),
            interval,
        ),
        min_size=2,
        max_size=5,
    )
)
def test_conflict_items_match_a_brute_force_rule(facts):
    fold = lambda s: " ".join(s.replace("-", " ").casefold().split())  # noqa: E731
    with temporary_memory() as memory:
        addrs = [
            memory.record_fact(s, p, v, valid_from=_iso(iv[0]), valid_to=_iso(iv[1])).fact
            for s, p, v, iv in facts
        ]
        expected = {
            frozenset((addrs[i], addrs[j]))
            for (i, a), (j, b) in combinations(enumerate(facts), 2)
            if fold(a[0]) == fold(b[0])
            and fold(a[1]) == fold(b[1])
            and fold(a[2]) != fold(b[2])
            and _overlap(a[3], b[3])
        }
        assert pairs(memory) == expected
