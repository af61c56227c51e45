"""Search by meaning (the ``semantic`` extra): vectors made off the write
path after remember, kept for live passages only, searched alone or fused
with the words.

The model is the real one (all-MiniLM-L6-v2 int8, from the extra); the
store is a SQLite file, or under ``--engine=postgres`` a PostgreSQL
database with pgvector.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from memors_core import BadInput, Memory, semantic
from memors_core.domain import search as rank
from memors_core.domain.search import MIN_COSINE
from memors_core.engine import vectors
from memors_core.engine.vectors import embed_question
from memors_core.errors import MemorsError
from memors_core.testing import test_engine, write_page

pytestmark = pytest.mark.semantic

POTTERY = "Caroline went to a pottery class downtown last week. It was amazing."
PUPPY = "Melanie adopted a young rescue dog from the shelter."
BUDGET = "The quarterly budget review moved to Thursday."
CERAMICS = "Melanie tried a ceramics workshop once, years ago."


def remember_all(memory: Memory, namespace: str = "default") -> dict[str, str]:
    """The four passages, each a document about its person; text -> address."""
    out = {}
    for body, who in ((POTTERY, "Caroline"), (PUPPY, "Melanie"), (BUDGET, "Finance")):
        out[body] = memory.remember(body, entities=[who], namespace=namespace).passages[0]
    out[CERAMICS] = memory.remember(CERAMICS, entities=["Melanie"], namespace=namespace).passages[0]
    assert memory.wait_for_vectors()  # made in the background, off remember's path
    return out


def texts(found) -> list[str]:
    return [h.text for h in found.results]


def vector_count(memory: Memory, namespace: str = "default") -> int:
    with memory.store.read() as tx:
        return tx.vectors.count(namespace)


def test_remembered_passages_get_vectors_and_search_is_hybrid_by_default(vector_memory):
    remember_all(vector_memory)
    assert vector_count(vector_memory) == 4
    found = vector_memory.search("rescue dog")
    assert found.mode == "hybrid" and found.notice is None
    assert texts(found)[0] == PUPPY
    # a namespace without vectors is searched by its words, silently
    empty = vector_memory.search("dog", namespace="elsewhere")
    assert (empty.mode, empty.notice, empty.results) == ("lexical", None, [])


def test_a_hybrid_search_reads_the_words_ranking_while_the_question_is_embedded(
    vector_memory, monkeypatch
):
    """The question's embedding and the words' ranking each take a few
    milliseconds on a core of their own: the search runs them side by side."""
    remember_all(vector_memory)
    with vector_memory.store.read() as tx:
        search_class = type(tx.search)
    words_read = threading.Event()
    ranking = search_class.passages

    def passages(self, *args, **kwargs):
        try:
            return ranking(self, *args, **kwargs)
        finally:
            words_read.set()

    embed = vectors.embed_question

    def embedded_once_the_words_are_read(query):
        # (a search that embedded its question first would wait here in vain)
        if not words_read.wait(300):  # (only a search that embeds first waits it out)
            raise AssertionError("the words' ranking was not read while the question was embedded")
        return embed(query)

    monkeypatch.setattr(search_class, "passages", passages)
    monkeypatch.setattr(vectors, "embed_question", embedded_once_the_words_are_read)
    found = vector_memory.search("rescue dog")
    assert found.mode == "hybrid" and texts(found)[0] == PUPPY
    assert words_read.is_set()


def test_meaning_finds_what_the_words_miss(vector_memory):
    remember_all(vector_memory)
    # no word of the question is in the passage about the dog
    assert texts(vector_memory.search("who got a new puppy?", mode="lexical")) == []
    semantic_hits = vector_memory.search("who got a new puppy?", mode="semantic")
    assert semantic_hits.mode == "semantic"
    assert texts(semantic_hits) == [PUPPY]
    assert texts(vector_memory.search("who got a new puppy?"))[0] == PUPPY
    # "ceramics workshop" meets the pottery class, which shares no word with it
    assert set(texts(vector_memory.search("ceramics workshop", mode="semantic"))) == {
        CERAMICS,
        POTTERY,
    }
    assert texts(vector_memory.search("ceramics workshop", mode="lexical")) == [CERAMICS]


def test_a_question_about_nothing_stored_finds_nothing_by_meaning(vector_memory):
    remember_all(vector_memory)
    assert vector_memory.search("the orbits of the moons of Jupiter", mode="semantic").results == []
    assert vector_memory.search("the orbits of the moons of Jupiter").results == []


def test_semantic_scores_are_the_model_s_cosines_best_first(vector_memory):
    addresses = remember_all(vector_memory)
    question = "a ceramics workshop"
    model = semantic.embedder()
    q = np.frombuffer(model.embed([question])[0], dtype="<f4")
    want = {}
    for body, vector in zip(addresses, model.embed(list(addresses)), strict=True):
        cos = float(np.frombuffer(vector, dtype="<f4") @ q)
        if cos >= MIN_COSINE:
            want[addresses[body]] = cos
    found = vector_memory.search(question, mode="semantic").results
    assert [h.address for h in found] == sorted(want, key=lambda a: -want[a])
    for hit in found:
        assert hit.score == pytest.approx(want[hit.address], abs=1e-4)


def test_hybrid_is_the_weighted_sum_of_the_rescaled_rankings(vector_memory):
    remembered = remember_all(vector_memory)
    order = list(remembered.values())  # as remembered
    # The words favour Melanie's turn (it says "ceramics workshop"); the
    # question names Caroline: the words, every passage's vector and
    # Caroline's passages' vectors each rank, and hybrid sums their
    # rescaled scores with the weights the docs give; then each passage
    # lends half its fused score to the passages remembered just before
    # and after it (one that nothing ranked joins if its cosine with the
    # question is not plainly unrelated).
    question = "When did Caroline attend a ceramics workshop?"
    vector = embed_question(question)
    depth = rank.fusion_depth(10)
    with vector_memory.store.read() as tx:
        wanted = rank.with_entities(
            rank.text.words(question), lambda names: tx.entities.named("default", names)
        )
        assert wanted.entities  # Caroline
        lexical = tx.search.passages("default", wanted, depth).rows
        like = tx.search.passages_like("default", vector, depth).rows
        hers = tx.search.passages_like("default", vector, depth, wanted.entities).rows
    like = [h for h in like if h.score >= MIN_COSINE]
    hers = [h for h in hers if h.score >= MIN_COSINE]
    assert lexical[0].text == CERAMICS and hers[0].text == POTTERY
    want: dict[str, float] = {}
    for weight, ranking in zip(rank.hybrid_weights(True), (lexical, like, hers), strict=True):
        for hit, value in zip(ranking, rank.rescaled(ranking), strict=True):
            want[hit.address] = want.get(hit.address, 0.0) + weight * value
    fused_only = dict(want)
    q = np.frombuffer(vector, dtype="<f4")
    vectors = semantic.embedder().embed(list(remembered))
    cosine = {
        remembered[body]: float(np.frombuffer(v, dtype="<f4") @ q)
        for body, v in zip(remembered, vectors, strict=True)
    }
    want = {}
    for i, address in enumerate(order):
        beside = [order[j] for j in (i - 1, i + 1) if 0 <= j < len(order)]
        lent = [rank.NEIGHBOUR_SHARE * fused_only[n] for n in beside if n in fused_only]
        if address in fused_only or (lent and cosine[address] >= rank.NEIGHBOUR_MIN_COSINE):
            want[address] = fused_only.get(address, 0.0) + max(lent, default=0.0)
    fused = vector_memory.search(question, mode="hybrid").results
    assert {h.address: h.score for h in fused} == pytest.approx(want)
    assert [h.score for h in fused] == sorted(want.values(), reverse=True)
    assert {h.text for h in fused[:2]} == {CERAMICS, POTTERY}


def test_all_gives_passages_the_places_the_words_give_them(vector_memory):
    # Ranked with meaning, passages fill the places the words give passages
    # under `all`: a page stands against them exactly as it does by words,
    # so the curated page still comes first for its own name.
    page = write_page(vector_memory, "Raft", "Raft elects a leader by majority vote.")
    for n in range(6):
        vector_memory.remember(f"Raft note {n}: the leader sends heartbeats to followers.")
    vector_memory.wait_for_vectors()
    words = vector_memory.search("Raft leader", granularity="all", limit=6, mode="lexical")
    both = vector_memory.search("Raft leader", granularity="all", limit=6)
    assert both.mode == "hybrid"
    assert [(h.granularity, h.score) for h in both.results] == [
        (h.granularity, h.score) for h in words.results
    ]
    for query in ("Raft", "Raft leader"):
        found = vector_memory.search(query, granularity="all")
        assert found.results[0].address == page
        assert all(0 < h.score <= 1 for h in found.results)
    # where the words find no passage, passages found by meaning start from
    # their best cosine
    vector_memory.remember(PUPPY)
    vector_memory.wait_for_vectors()
    alone = vector_memory.search("who got a new puppy?", mode="semantic").results
    for mode in ("semantic", "hybrid"):
        merged = vector_memory.search("who got a new puppy?", granularity="all", mode=mode)
        assert merged.results[0].text == PUPPY
        assert merged.results[0].score == pytest.approx(alone[0].score)


def test_forgetting_superseding_and_purging_take_the_vector(vector_memory):
    addresses = remember_all(vector_memory)
    vector_memory.forget(addresses[PUPPY])
    assert vector_count(vector_memory) == 3
    assert PUPPY not in texts(vector_memory.search("who got a new puppy?", mode="semantic"))
    doc = vector_memory.remember("Raft elects a leader.\n\nPaxos is older.", uri="notes.md")
    vector_memory.remember("Raft elects a leader.\n\nZab came later.", uri="notes.md")
    vector_memory.wait_for_vectors()
    assert vector_count(vector_memory) == 5  # Paxos's passage was superseded, Zab's is new
    assert texts(vector_memory.search("an older consensus protocol", mode="semantic"))[:1] != [
        "Paxos is older."
    ]
    vector_memory.purge(doc.document)
    assert vector_count(vector_memory) == 3
    with vector_memory.store.read() as tx:
        assert tx.vectors.missing_count("default") == 0


def test_reindex_gives_every_live_passage_its_vector_once(vector_memory, monkeypatch):
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    remember_all(vector_memory)
    vector_memory.forget(vector_memory.search("budget review", mode="lexical").results[0].address)
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    assert vector_count(vector_memory) == 0
    assert vector_memory.vectors_waiting() == 3
    for mode in (None, "hybrid"):
        waiting = vector_memory.search("rescue dog", mode=mode)
        assert (waiting.mode, texts(waiting)) == ("lexical", [PUPPY])
        assert waiting.notice == (
            "searched by words only: no passage of namespace 'default' has its vector yet "
            "(vectors are made in the background; memors-mcp reindex --vectors makes them now)"
        )
    seen = []
    done = vector_memory.reindex_vectors(progress=seen.append)
    assert (done.added, done.vectors, done.model) == (3, 3, semantic.MODEL)
    assert seen[-1].done == seen[-1].total == 3 and seen[-1].phase == "embedding"
    assert vector_memory.reindex_vectors().added == 0
    assert vector_memory.vectors_waiting() == 0
    assert vector_memory.search("rescue dog").mode == "hybrid"


def test_a_mode_that_cannot_be_used_answers_by_words_and_says_why(vector_memory, monkeypatch):
    remember_all(vector_memory)
    fact = vector_memory.search("budget", granularity="fact", mode="semantic")
    assert fact.mode == "lexical"
    assert (
        fact.notice
        == "searched by words only: only passages have vectors: facts are ranked by their words"
    )
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    off = vector_memory.search("rescue dog", mode="semantic")
    assert (off.mode, texts(off)) == ("lexical", [PUPPY])
    assert off.notice == "searched by words only: vectors are switched off (MEMORS_VECTORS=off)"
    with pytest.raises(
        BadInput, match="unknown mode 'fuzzy': use one of lexical, semantic, hybrid"
    ):
        vector_memory.search("dog", mode="fuzzy")
    monkeypatch.setenv("MEMORS_VECTORS", "sometimes")
    with pytest.raises(BadInput, match="MEMORS_VECTORS must be 'on' or 'off'"):
        vector_memory.search("dog")


def test_remember_many_leaves_embedding_to_the_background(vector_memory):
    docs = [{"text": f"Turn {n}: we talked about hiking trails.", "uri": f"t{n}"} for n in range(7)]
    seen = []
    done = vector_memory.remember_many(docs, batch=3, progress=seen.append)
    assert done.passages == 7
    assert not [p for p in seen if p.phase == "embedding"]  # remember never embeds
    assert vector_memory.wait_for_vectors()
    assert vector_count(vector_memory) == 7 and vector_memory.vectors_waiting() == 0
    # the same documents again: nothing new, nothing to embed
    assert vector_memory.remember_many(docs, batch=3).unchanged == 7
    assert vector_memory.wait_for_vectors() and vector_count(vector_memory) == 7


def test_a_model_that_fails_leaves_the_passages_searchable_by_words(vector_memory, monkeypatch):
    def broken():
        raise MemorsError("the semantic extra cannot be loaded (a test broke it)")

    monkeypatch.setattr(semantic, "embedder", broken)
    done = vector_memory.remember(PUPPY, entities=["Melanie"])
    assert vector_memory.wait_for_vectors()  # the background run failed, and said so
    assert done.passages and vector_count(vector_memory) == 0
    assert texts(vector_memory.search("rescue dog", mode="lexical")) == [PUPPY]
    monkeypatch.undo()
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    assert vector_memory.reindex_vectors().added == 1


def test_an_import_carries_no_vectors_until_reindex(vector_memory, tmp_path):
    remember_all(vector_memory)
    lines = [json.dumps(r) for r in vector_memory.export()]
    assert "passage_vectors" not in "".join(lines) and "vector_stats" not in "".join(lines)
    with Memory.open(tmp_path / "copy.db") as copy:
        copy.import_(lines, "export.jsonl")
        assert copy.search("rescue dog").mode == "lexical"
        assert copy.vectors_waiting() == 4
        assert copy.reindex_vectors().added == 4
        assert texts(copy.search("who got a new puppy?"))[0] == PUPPY


@pytest.mark.skipif(test_engine() != "postgres", reason="the PostgreSQL server of the suite")
def test_a_postgres_server_without_pgvector_searches_by_words_and_says_why(memory):
    with memory.store.read() as tx:
        if (
            tx.native("postgres")
            .execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            .fetchone()
        ):
            pytest.skip("this test server has pgvector")
    remember_all(memory)
    assert vector_count(memory) == 0
    quiet = memory.search("rescue dog")
    assert (quiet.mode, quiet.notice, texts(quiet)) == ("lexical", None, [PUPPY])
    asked = memory.search("rescue dog", mode="hybrid")
    assert asked.mode == "lexical" and "no pgvector extension" in asked.notice
    with pytest.raises(
        BadInput, match="cannot make vectors: this PostgreSQL server has no pgvector"
    ):
        memory.reindex_vectors()


class _HeldModel:
    """The real model behind a gate the test opens: while it is shut, every
    embedding waits (as on a machine busy for minutes)."""

    def __init__(self, gate) -> None:
        self.gate = gate
        self.model = semantic.Embedder()

    def embed(self, texts, report=None):
        assert self.gate.wait(timeout=300), "the test never opened the gate"
        return self.model.embed(texts, report)


def test_remember_never_waits_for_the_model(vector_memory, monkeypatch):
    import threading

    gate = threading.Event()
    held = _HeldModel(gate)
    monkeypatch.setattr(semantic, "embedder", lambda: held)
    try:
        # every remember returns while the model cannot answer: the text is stored
        for body in (POTTERY, PUPPY, BUDGET, CERAMICS):
            vector_memory.remember(body)
        many = vector_memory.remember_many([{"text": "Turn: hiking trails.", "uri": "h"}])
        assert many.passages == 1
        assert vector_count(vector_memory) == 0
        assert vector_memory.vectors_waiting() == 5
        assert not vector_memory.wait_for_vectors(timeout=0.1)
        found = vector_memory.search("rescue dog")
        assert (found.mode, texts(found)) == ("lexical", [PUPPY])
        assert "has its vector yet" in found.notice
    finally:
        gate.set()
    assert vector_memory.wait_for_vectors()
    assert vector_count(vector_memory) == 5 and vector_memory.vectors_waiting() == 0
    both = vector_memory.search("who got a new puppy?")
    assert (both.mode, both.notice, texts(both)[0]) == ("hybrid", None, PUPPY)


def test_search_says_once_that_some_passages_wait_and_finds_them_by_words(
    vector_store, vector_memory
):
    remember_all(vector_memory)
    # stored by a Memory that leaves its vectors to another process: not embedded
    with Memory.open(vector_store, background_vectors=False) as other:
        other.remember("Jon sold his old bicycle to a neighbour.")
        assert other.vectors_wanted == {"default"}
    assert vector_memory.vectors_waiting() == 1
    notice = (
        "some passages of namespace 'default' have no vector yet: they are {} until they have "
        "one (vectors are made in the background; memors-mcp reindex --vectors makes them now)"
    )
    hybrid = vector_memory.search("bicycle neighbour")
    assert hybrid.mode == "hybrid"
    assert texts(hybrid)[0] == "Jon sold his old bicycle to a neighbour."  # by its words
    assert hybrid.notice == notice.format("ranked by their words only")
    alone = vector_memory.search("bicycle neighbour", mode="semantic")
    assert alone.notice == notice.format("left out")
    assert vector_memory.search("bicycle", mode="lexical").notice is None
    vector_memory.reindex_vectors()
    assert vector_memory.search("bicycle neighbour").notice is None
    assert (
        vector_memory.search("who sold a bike?", mode="semantic")
        .results[0]
        .text.startswith("Jon sold")
    )


def test_a_run_that_dies_midway_is_finished_by_the_next(vector_memory, monkeypatch):
    from memors_core.engine import vectors

    monkeypatch.setenv("MEMORS_VECTORS", "off")
    vector_memory.remember_many([{"text": f"Note {n} about the garden shed."} for n in range(7)])
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    monkeypatch.setattr(vectors, "CHUNK", 3)
    model, calls = semantic.embedder(), []

    class Dying:
        def embed(self, texts, report=None):
            calls.append(len(texts))
            if len(calls) == 2:
                raise KeyboardInterrupt  # as a kill between two chunks
            return model.embed(texts, report)

    monkeypatch.setattr(semantic, "embedder", lambda: Dying())
    with pytest.raises(KeyboardInterrupt):
        vector_memory.make_vectors()
    assert vector_count(vector_memory) == 3 and vector_memory.vectors_waiting() == 4
    calls.clear()
    monkeypatch.setattr(semantic, "embedder", lambda: model)
    assert vector_memory.make_vectors() == 4  # only what was missing
    assert vector_count(vector_memory) == 7 and vector_memory.vectors_waiting() == 0


def test_one_run_embeds_a_namespace_at_a_time(vector_memory, monkeypatch):
    from memors_core.engine import vectors

    monkeypatch.setenv("MEMORS_VECTORS", "off")
    vector_memory.remember(PUPPY)
    vector_memory.remember(BUDGET, namespace="work")
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    with vectors.lease(vector_memory.store, "default", wait=False) as held:
        assert held
        assert vector_memory.make_vectors() == 0  # another run holds the namespace
        assert vector_memory.make_vectors("work") == 1  # another namespace is free
        assert vector_memory.vectors_waiting() == 1
    assert vector_memory.make_vectors() == 1


def test_compact_gives_waiting_passages_their_vectors(vector_memory, monkeypatch):
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    vector_memory.remember(PUPPY)
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    assert vector_memory.vectors_waiting() == 1
    vector_memory.compact()
    assert vector_memory.wait_for_vectors()
    assert vector_memory.vectors_waiting() == 0 and vector_count(vector_memory) == 1


def test_metrics_count_the_passages_waiting_for_a_vector(vector_memory, monkeypatch):
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    vector_memory.remember(PUPPY)
    vector_memory.remember(BUDGET, namespace="work")
    assert "passages_without_vector" not in vector_memory.metrics()  # no vectors: no gauge
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    vector_memory.reindex_vectors("work")
    shown = vector_memory.metrics()
    assert 'memors_kb_passages_without_vector{namespace="default"} 1.0' in shown
    assert 'memors_kb_passages_without_vector{namespace="work"} 0.0' in shown


def test_a_server_starting_resumes_what_an_earlier_run_left(vector_memory, monkeypatch):
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    vector_memory.remember(PUPPY)
    vector_memory.remember(BUDGET, namespace="work")
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    vector_memory.resume_vectors()  # what the MCP server does when it starts
    assert vector_memory.wait_for_vectors()
    assert vector_memory.vectors_waiting() == vector_memory.vectors_waiting("work") == 0
    assert vector_count(vector_memory, "work") == 1


def test_closing_stops_a_background_run_between_two_batches(vector_store, monkeypatch):
    import threading

    from memors_core.engine import vectors

    monkeypatch.setattr(vectors, "CHUNK", 10_000)  # one chunk: only a batch boundary can stop it
    monkeypatch.setattr(semantic, "BATCH", 2)
    model, started, gate = semantic.embedder(), threading.Event(), threading.Event()

    class Slow:
        def embed(self, texts, report=None):
            def each(n):
                started.set()
                assert gate.wait(timeout=300)
                if report is not None:
                    report(n)

            return model.embed(texts, each)

    monkeypatch.setattr(semantic, "embedder", lambda: Slow())
    memory = Memory.open(vector_store)
    memory.remember_many([{"text": f"Note {n} about the garden shed."} for n in range(9)])
    assert started.wait(timeout=300)  # the run is inside the model, at its first batch
    closing = threading.Thread(target=memory.close)
    closing.start()
    while not memory._background._stopped:  # close has asked the run to stop
        closing.join(0.01)
    gate.set()
    closing.join()
    monkeypatch.setattr(semantic, "embedder", lambda: model)
    with Memory.open(vector_store) as again:
        assert again.vectors_waiting() == 9  # stopped before the chunk was stored
        assert again.make_vectors() == 9


EXITS_MID_EMBEDDING = """
import sys, time
from memors_core import Memory

memory = Memory.open(sys.argv[1])
memory.remember_many(
    {"text": f"Note {n} about the garden shed, its leaking roof and the rain."}
    for n in range(6000)
)
total = memory.vectors_waiting()
while memory.vectors_waiting() == total:  # until the first chunk is stored
    time.sleep(0.02)
print(total, memory.vectors_waiting(), flush=True)
# ends here, Memory not closed, the background thread inside the model
"""


@pytest.mark.engine_independent("a program of its own on a SQLite file")
def test_a_program_that_ends_without_closing_exits_cleanly_while_vectors_are_made(tmp_path):
    # It used to die inside onnxruntime ("terminate called without an active
    # exception", SIGABRT) as the interpreter killed the thread mid-batch.
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", EXITS_MID_EMBEDDING, str(tmp_path / "m.db")],
        capture_output=True,
        text=True,
        timeout=1800,  # (only against a hang: it takes seconds)
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "terminate called" not in run.stderr
    total, left = map(int, run.stdout.split())
    assert 0 < left < total  # it ended while the thread was making vectors
    with Memory.open(tmp_path / "m.db") as again:
        # What was made is stored: at least what it had seen (a chunk may
        # have been stored while the program was ending, on a busy machine).
        assert again.vectors_waiting() <= left


# A short chat between two friends, each turn remembered with its speaker
# as entity, as an agent remembers a conversation.
CHAT = (
    ("Ann", "My knee has hurt ever since the half marathon last Sunday."),
    ("Ben", "Ouch. Rest it for two weeks and see a physio before you run again."),
    ("Ann", "I will. I also signed up for a pottery class on Thursdays."),
    ("Ben", "Nice! I baked sourdough bread all weekend, the kitchen is a mess."),
    ("Ann", "Work is busy, but I love my new team and my manager."),
    ("Ben", "My sister is visiting from Lisbon next month."),
    ("Ann", "We should all go to the lake together when the weather is warmer."),
    ("Ben", "Good idea. I still need to fix the bike before then."),
)


def test_an_answer_told_by_someone_the_question_does_not_name_is_found(vector_memory):
    # The advice Ann got was given by Ben: his turn does not mention Ann,
    # and shares no word with the question. The vector side ranks every
    # passage (limited to the named person's, it never saw Ben's turn).
    said = {}
    for who, body in CHAT:
        said[body] = vector_memory.remember(body, entities=[who]).passages[0]
    assert vector_memory.wait_for_vectors()
    question = "What advice did Ann get for her injury?"
    advice = said[CHAT[1][1]]
    assert advice not in [h.address for h in vector_memory.search(question, mode="lexical").results]
    found = [h.address for h in vector_memory.search(question).results]
    assert advice in found
    # and first of what Ben said
    bens = [said[body] for who, body in CHAT if who == "Ben"]
    assert next(a for a in found if a in bens) == advice


def test_in_hybrid_a_reply_joins_after_the_turn_it_answers(vector_memory):
    # The reply shares no word with the question and means little alone;
    # remembered right after the turn that asked in the question's words,
    # hybrid finds it there. The words alone do not return it, and an
    # unrelated passage remembered next to a hit does not join.
    asked = vector_memory.remember("Did Caroline ever go back to Lisbon after the wedding?")
    reply = vector_memory.remember("Yes, in May, with her sister and the kids.")
    vector_memory.remember(BUDGET)
    assert vector_memory.wait_for_vectors()
    question = "When did Caroline go back to Lisbon?"
    lexical = [h.address for h in vector_memory.search(question, mode="lexical").results]
    hybrid = [h.address for h in vector_memory.search(question, mode="hybrid").results]
    assert lexical == asked.passages
    assert hybrid[:2] == asked.passages + reply.passages
    assert BUDGET not in texts(vector_memory.search(question, mode="hybrid"))


ADOPTED = "I adopted a puppy from the shelter last month."
BROUGHT = "We brought a little dog home from the shelter."
PET = "What pet did Melanie adopt?"


def test_a_passage_s_vector_knows_who_it_is_about(vector_memory):
    # Neither turn names its speaker in its text: the store knows them as
    # entities. By its text alone, Caroline's turn is nearer the question
    # (it says "adopted a puppy"); embedded with who said it, Melanie's is.
    caroline = vector_memory.remember(ADOPTED, entities=["Caroline"]).passages[0]
    melanie = vector_memory.remember(BROUGHT, entities=["Melanie"]).passages[0]
    assert vector_memory.wait_for_vectors()
    found = [h.address for h in vector_memory.search(PET, mode="semantic").results]
    assert found[:2] == [melanie, caroline]
    cosine = vector_memory.search(PET, mode="semantic").results[0].score
    expected = np.frombuffer(semantic.embedder().embed(["Melanie: " + BROUGHT])[0], "<f4")
    question = np.frombuffer(embed_question(PET), "<f4")
    assert cosine == pytest.approx(float(expected @ question), abs=1e-4)


def test_the_names_go_before_the_text_unless_it_holds_them():
    assert semantic.passage_input(BROUGHT, ["Melanie", "Caroline"]) == (
        "Melanie, Caroline: " + BROUGHT
    )
    assert semantic.passage_input(POTTERY, ["Caroline", "Pottery"]) == POTTERY  # (both in it)
    assert semantic.passage_input(BROUGHT, []) == BROUGHT
    many = [f"Person {n}" for n in range(9)]
    assert semantic.passage_input("hello", many).startswith(", ".join(many[:5]) + ": ")


def test_a_vector_of_the_text_alone_is_made_again_by_reindex(vector_memory, monkeypatch):
    # Vectors made before the form existed hold the passage's text alone:
    # they count as waiting, search uses them meanwhile, and reindex (or
    # the background run) replaces them with vectors that know who spoke.
    monkeypatch.setenv("MEMORS_VECTORS", "off")
    caroline = vector_memory.remember(ADOPTED, entities=["Caroline"]).passages[0]
    melanie = vector_memory.remember(BROUGHT, entities=["Melanie"]).passages[0]
    monkeypatch.setenv("MEMORS_VECTORS", "on")
    old = semantic.embedder().embed([ADOPTED, BROUGHT])
    ids = [a.rsplit("/", 1)[1] for a in (caroline, melanie)]
    with vector_memory.store.write() as tx:
        assert tx.vectors.add("default", zip(ids, old, strict=True), semantic.TEXT_ONLY) == 2
    assert vector_memory.vectors_waiting() == 2
    before = vector_memory.search(PET, mode="semantic")
    assert before.notice is None and next(h.address for h in before.results) == caroline
    done = vector_memory.reindex_vectors()
    assert (done.added, done.vectors) == (2, 2)
    assert vector_memory.vectors_waiting() == 0
    assert next(h.address for h in vector_memory.search(PET, mode="semantic").results) == melanie
