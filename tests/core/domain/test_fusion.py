"""Reciprocal-rank fusion (``domain.search.fuse``), against its definition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memors_core.domain.search import RRF_K, Hit, fuse, fusion_depth

# Rankings over a small alphabet of passages, each address at most once a ranking.
rankings = st.lists(
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10), min_size=1, max_size=4
)


def hits(ranking: list[str], label: str) -> list[Hit]:
    return [Hit(f"memo://passage/{a}", "passage", f"{label}:{a}", 0.0) for a in ranking]


@given(rankings)
def test_a_fused_score_is_the_sum_of_its_reciprocal_ranks(lists: list[list[str]]) -> None:
    fused = fuse(*(hits(r, str(n)) for n, r in enumerate(lists)))
    want = {}
    for ranking in lists:
        for rank, a in enumerate(ranking, 1):
            want[f"memo://passage/{a}"] = want.get(f"memo://passage/{a}", 0.0) + 1 / (RRF_K + rank)
    assert {h.address: h.score for h in fused} == pytest.approx(want)
    assert len(fused) == len(want)  # each hit once
    scores = [h.score for h in fused]
    assert scores == sorted(scores, reverse=True)


@given(rankings)
def test_a_hit_keeps_the_text_of_the_first_ranking_that_holds_it(lists: list[list[str]]) -> None:
    fused = fuse(*(hits(r, str(n)) for n, r in enumerate(lists)))
    for hit in fused:
        letter = hit.address.rsplit("/", 1)[1]
        first = next(n for n, r in enumerate(lists) if letter in r)
        assert hit.text == f"{first}:{letter}"


@given(rankings)
def test_first_everywhere_is_first_and_ties_keep_the_earlier_order(lists: list[list[str]]) -> None:
    fused = fuse(*(hits(r, "x") for r in lists))
    tops = {r[0] for r in lists if r}
    if len(tops) == 1 and all(r for r in lists):
        assert fused[0].address == f"memo://passage/{tops.pop()}"
    # one ranking alone keeps its order
    if lists[0]:
        alone = fuse(hits(lists[0], "x"))
        assert [h.address.rsplit("/", 1)[1] for h in alone] == lists[0]


def test_rankings_are_read_deeper_than_the_results_asked_for() -> None:
    assert fusion_depth(10) == 50 and fusion_depth(100) == 400
