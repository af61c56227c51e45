"""A passage lends half its score to the passages remembered just before
and after it in its namespace (``domain.search.with_neighbours``): a reply
rarely repeats the words of the question it answers, and a question asks in
those words. By words, lending only reorders what the words found."""

from __future__ import annotations

from memors_core import Memory

ASKED = "Did you ever go back to Lisbon after the wedding?"
REPLY = "Yes, Lisbon again in May, with my sister and her two small children."
ELSEWHERE = "Lisbon, Portugal."
FILLER = "The quarterly budget review moved to Thursday."
QUESTION = "go back to Lisbon after the wedding"


def addresses(memory: Memory, query: str, **kw) -> list[str]:
    return [h.address for h in memory.search(query, mode="lexical", **kw).results]


def bm25(memory: Memory, query: str) -> dict[str, float]:
    """Each passage's own BM25 score, before any lending (the store's ranking)."""
    with memory.store.read() as tx:
        return {h.address: h.score for h in tx.search.passages("default", query, 10).rows}


def test_a_reply_ranks_above_an_unrelated_passage_with_the_same_words(memory):
    [other] = memory.remember(ELSEWHERE).passages
    memory.remember(FILLER)
    [asked] = memory.remember(ASKED).passages
    [reply] = memory.remember(REPLY).passages
    # By its own words the short passage outranks the long reply...
    assert list(bm25(memory, QUESTION)) == [asked, other, reply]
    # ...but the reply follows the turn that asked in the question's words.
    assert addresses(memory, QUESTION) == [asked, reply, other]


def test_by_words_only_what_the_words_found_is_returned(memory):
    memory.remember(ASKED)
    memory.remember(FILLER)  # right after a hit, but no word of the question
    found = memory.search(QUESTION, mode="lexical").results
    assert [h.text for h in found] == [ASKED]


def test_the_neighbour_is_the_nearest_live_passage_of_the_same_namespace(memory):
    [other] = memory.remember(ELSEWHERE).passages
    memory.remember(FILLER)
    [asked] = memory.remember(ASKED).passages
    gone = memory.remember("Lisbon notes to forget.")
    memory.remember("Lisbon, somewhere else entirely.", namespace="elsewhere")
    [reply] = memory.remember(REPLY).passages
    memory.forget(gone.document)
    # The forgotten passage and the other namespace's lie between the turn
    # that asked and the reply: the reply is still the next, and lent to.
    assert addresses(memory, QUESTION) == [asked, reply, other]
    assert addresses(memory, QUESTION, namespace="elsewhere") == [
        memory.search("somewhere", namespace="elsewhere").results[0].address
    ]


def test_scores_are_their_own_plus_half_the_best_neighbour_s(memory):
    [asked] = memory.remember(ASKED).passages
    [reply] = memory.remember(REPLY).passages
    own = bm25(memory, QUESTION)
    found = {h.address: h.score for h in memory.search(QUESTION, mode="lexical").results}
    assert found == {
        asked: own[asked] + own[reply] / 2,  # each lends half its own score
        reply: own[reply] + own[asked] / 2,
    }
