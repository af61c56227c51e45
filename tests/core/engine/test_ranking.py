"""Search that ranks right (issue 17): scores that mean something, the
namespace's own statistics, entity-aware queries, a comparable ``all``."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core.domain import search as rank
from memors_core.domain.search import SearchQuery
from memors_core.testing import temporary_memory


def _scores(result) -> dict[str, float]:
    return {h.address: h.score for h in result.results}


def test_a_word_in_every_passage_still_ranks_by_how_much_each_says_it(memory):
    few = memory.remember("Raft elects a leader.").passages[0]
    many = memory.remember("Raft, raft and raft again: raft everywhere.").passages[0]
    memory.remember("Raft replicates a log to the followers of the cluster.")
    hits = memory.search("raft").results
    assert len(hits) == 3 and min(h.score for h in hits) > 1e-3
    assert hits[0].address == many and few in {h.address for h in hits}


def test_a_namespace_scores_the_same_whatever_another_namespace_holds(memory):
    for body in ("Raft elects a leader.", "Paxos has proposers.", "Leases need clocks."):
        memory.remember(body, namespace="small")
    before = _scores(memory.search("leader election clocks", namespace="small"))
    memory.remember_many(
        [{"text": f"The leader {i} of cluster {i} checks clocks."} for i in range(300)],
        namespace="big",
    )
    after = _scores(memory.search("leader election clocks", namespace="small"))
    assert after == before and len(before) == 2


def test_a_query_naming_an_entity_finds_what_is_about_it_not_every_row_saying_its_name(memory):
    # Caroline told it; Melanie's turns name her and say the same words.
    told = memory.remember("I went to a pottery class last week.", entities=["Caroline Webb"])
    for reply in (
        "That's great, Caroline! I went to a pottery class once.",
        "Caroline, I never went to any pottery class, tell me more.",
        "Caroline, how was the class you told me about?",
    ):
        memory.remember(reply, entities=["Melanie Hart"])
    hits = memory.search("When did Caroline Webb go to the pottery class?").results
    assert hits[0].address == told.passages[0]
    # an alias, spelled otherwise, names her too
    with memory.store.write() as tx:
        tx.entities.add_alias(tx.entities.find("Caroline Webb", "default"), "default", "Caro")
    again = memory.search("when did caro go to the pottery class").results
    assert again[0].address == told.passages[0]


def test_a_name_alone_still_weighs_its_word(memory):
    memory.remember("Raft elects a leader.", entities=["Raft"])
    more = memory.remember("Raft raft raft: the raft log.", entities=["Raft"]).passages[0]
    assert memory.search("Raft").results[0].address == more


def test_all_puts_the_curated_page_first_for_its_own_name(memory):
    from memors_core.testing import passages_about

    for body in passages_about("Raft", 4):
        memory.remember(body, entities=["Raft"])
    for body in passages_about("Paxos", 4):
        memory.remember(body, entities=["Paxos"])
    queue = memory.compact(kinds=["page"])
    for item in queue.items:
        name = item.payload["entity"]["name"]
        body = " ".join(
            f"{p['text'].replace('[[', '').replace(']]', '')} [{p['ref']}]"
            for p in item.payload["passages"]
        )
        memory.submit(item.id, {"title": name, "content": body})
    hits = memory.search("raft", granularity="all").results
    assert hits[0].granularity == "page" and "Raft" in hits[0].text
    assert all(0 < h.score < 1 for h in hits)
    assert {h.granularity for h in hits} >= {"page", "passage", "entity"}


def test_common_words_score_the_candidates_the_rare_ones_found(memory):
    # "cluster" is in all but one passage: common (it finds no candidates);
    # "zephyr" in two. The common word's weight is still added, exactly.
    rows = [{"text": f"Cluster node {i} keeps its cluster log."} for i in range(2400)]
    memory.remember_many(rows)
    plain = memory.remember("Zephyr notes nothing else.").passages[0]
    both = memory.remember("Zephyr cluster: the zephyr runs on a cluster.").passages[0]
    with memory.store.read() as tx:
        run = tx.search.passages("default", SearchQuery(("zephyr", "cluster")), 5)
    n = 2402
    average = (2400 * 7 + 4 + 8) / n
    expected = {
        both: rank.idf(n, 2) * rank.term_part(2, 8, average)
        + rank.idf(n, 2401) * rank.term_part(2, 8, average),
        plain: rank.idf(n, 2) * rank.term_part(1, 4, average),
    }
    # (a row with the common word only is no candidate)
    assert [h.address for h in run.rows] == [both, plain]
    for hit in run.rows:
        assert hit.score == pytest.approx(expected[hit.address], rel=1e-9)
    assert run.ceiling == pytest.approx((rank.idf(n, 2401) + rank.idf(n, 2)) * (rank.K1 + 1))


@pytest.mark.sqlite_only("which tables a search reads: SQLite's authorizer")
def test_a_namespace_search_reads_its_own_index_only(memory):
    import apsw

    memory.remember("Raft elects a leader.", namespace="small")
    memory.remember_many([{"text": f"Leader {i} of raft."} for i in range(200)], namespace="big")
    own = {
        f"search_{ix}"
        for (ix,) in memory.store.all("SELECT id FROM search_indexes WHERE namespace = 'small'")
    }
    read: set[str] = set()

    def authorizer(op, table, *_):
        if op == apsw.SQLITE_READ and table and table.startswith("search_"):
            read.add(re.sub(r"_(data|idx|docsize|config|terms)$", "", table))
        return apsw.SQLITE_OK

    memory.store.conn.authorizer = authorizer
    try:
        for granularity in ("passage", "all"):
            assert memory.search("raft leader", namespace="small", granularity=granularity).results
    finally:
        memory.store.conn.authorizer = None
    assert read - {"search_indexes"} <= own and read & own


# --- the score is BM25 exactly, on any corpus ---------------------------------------------

_VOCAB = ["raft", "leader", "log", "vote", "term", "quorum", "lease", "clock", "node", "paxos"]


@pytest.mark.sqlite_only("compares with FTS5's own tokenizer (PostgreSQL stems by Snowball)")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=12), min_size=1, max_size=15),
    st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=4, unique=True),
)
def test_the_score_is_bm25_with_the_namespaces_statistics(bodies, query):
    """memors' score of every hit equals BM25 computed here from the texts
    (with what its neighbours lend)."""
    with temporary_memory() as memory:
        ids = [memory.remember(" ".join(b)).passages[0] for b in bodies]
        memory.remember("raft leader log vote", namespace="elsewhere")
        hits = _scores(memory.search(" ".join(query), limit=100))
    counts = [Counter(b) for b in bodies]
    rows = len(bodies)
    average = sum(len(b) for b in bodies) / rows
    expected = {}
    for ident, body, c in zip(ids, bodies, counts, strict=True):
        score = sum(
            rank.idf(rows, sum(1 for other in counts if w in other))
            * rank.term_part(c[w], len(body), average)
            for w in query
            if c[w]
        )
        if score:
            expected[ident] = score
    # Each found passage lends half its score to those remembered just
    # before and after it (test_neighbours.py): only to found ones, by words.
    own = dict(expected)
    for i, ident in enumerate(ids):
        if ident in own:
            beside = [own[ids[j]] for j in (i - 1, i + 1) if 0 <= j < len(ids) and ids[j] in own]
            expected[ident] += rank.NEIGHBOUR_SHARE * max(beside, default=0.0)
    assert hits.keys() == expected.keys()
    for ident, score in expected.items():
        assert hits[ident] == pytest.approx(score, rel=1e-9)
