"""Hybrid's fusion (``domain.search.fuse``), against its definition."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core.domain.search import Hit, fuse, fusion_depth, hybrid_weights, rescaled

pytestmark = pytest.mark.engine_independent("pure functions of the domain layer, no store")

# A ranking: distinct passages of a small alphabet, with scores best first.
ranking = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.floats(0, 50, allow_nan=False)),
    unique_by=lambda t: t[0],
    max_size=10,
).map(lambda pairs: sorted(pairs, key=lambda p: -p[1]))
weighted = st.lists(st.tuples(st.floats(0.01, 1), ranking), min_size=1, max_size=3)


def hits(pairs: list[tuple[str, float]], label: str) -> list[Hit]:
    return [Hit(f"memo://passage/{a}", "passage", f"{label}:{a}", s) for a, s in pairs]


# Fast, but the machine may be busy: no deadline.
relaxed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fused_of(lists) -> list[Hit]:
    return fuse(*((w, hits(r, str(n))) for n, (w, r) in enumerate(lists)))


@relaxed
@given(weighted)
def test_a_fused_score_is_the_weighted_sum_of_rescaled_scores(lists) -> None:
    want: dict[str, float] = {}
    for weight, pairs in lists:
        if not pairs:
            continue
        top, bottom = pairs[0][1], pairs[-1][1]
        for a, score in pairs:
            value = 1.0 if top == bottom else (score - bottom) / (top - bottom)
            want[f"memo://passage/{a}"] = want.get(f"memo://passage/{a}", 0.0) + weight * value
    fused = fused_of(lists)
    assert {h.address: h.score for h in fused} == pytest.approx(want)
    assert len(fused) == len(want)  # each hit once
    scores = [h.score for h in fused]
    assert scores == sorted(scores, reverse=True)


@relaxed
@given(weighted)
def test_a_hit_keeps_the_text_of_the_first_ranking_that_holds_it(lists) -> None:
    for hit in fused_of(lists):
        letter = hit.address.rsplit("/", 1)[1]
        first = next(n for n, (_, r) in enumerate(lists) if letter in dict(r))
        assert hit.text == f"{first}:{letter}"


@relaxed
@given(weighted, st.sampled_from("abcdefghij"))
def test_what_every_ranking_puts_first_is_first(lists, best: str) -> None:
    # Put `best` first (alone at the top) in every ranking: whatever the
    # others' scores, no passage can outrank it — least of all one that
    # no ranking holds.
    lifted = [
        (w, [(best, max([s for _, s in r], default=0.0) + 1.0)] + [p for p in r if p[0] != best])
        for w, r in lists
    ]
    assert fused_of(lifted)[0].address == f"memo://passage/{best}"


@relaxed
@given(ranking)
def test_one_ranking_alone_keeps_its_order(pairs) -> None:
    assert [h.address.rsplit("/", 1)[1] for h in fuse((1.0, hits(pairs, "x")))] == [
        a for a, _ in pairs
    ]


def test_rescaled_spans_the_ranking_read() -> None:
    three = hits([("a", 9.0), ("b", 6.0), ("c", 3.0)], "x")
    assert rescaled(three) == [1.0, 0.5, 0.0]
    assert rescaled(hits([("a", 2.0), ("b", 2.0)], "x")) == [1.0, 1.0]
    assert rescaled([]) == []


def test_the_weights_sum_to_one_and_favour_the_words() -> None:
    for named in (True, False):
        words, everyone, theirs = hybrid_weights(named)
        assert words + everyone + theirs == pytest.approx(1.0)
        assert words > everyone + theirs
    assert hybrid_weights(False)[2] == 0.0
    # Every passage's vector holds its entities' names: that ranking leads
    # the named entities' passages' own, which still counts.
    _, everyone, theirs = hybrid_weights(True)
    assert everyone > theirs > 0


def test_rankings_are_read_deeper_than_the_results_asked_for() -> None:
    assert fusion_depth(10) == 50 and fusion_depth(100) == 400
