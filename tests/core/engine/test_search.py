"""Search (SPEC §4): BM25 over live rows, words OR-ed, stop words dropped, any
text a valid query, every granularity, limit, as_of, namespaces."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core import BadInput
from memors_core.storage.sqlite.search import fts_query
from memors_core.testing import passages_about, temporary_memory
from memors_core.wire import to_json


def _addresses(result) -> list[str]:
    return [h.address for h in result.results]


def test_results_have_exactly_the_wire_shape_and_best_first(memory):
    memory.remember("Raft elects a leader by majority vote.")
    memory.remember("A leader leads. The leader is elected; the leader sends heartbeats.")
    out = to_json(memory.search("leader"))
    assert set(out) == {"results", "mode"}
    assert out["mode"] == "lexical"
    assert len(out["results"]) == 2
    for hit in out["results"]:
        assert set(hit) == {"address", "granularity", "text", "score"}
        assert hit["granularity"] == "passage" and isinstance(hit["score"], float)
    scores = [h["score"] for h in out["results"]]
    assert scores == sorted(scores, reverse=True)
    assert out["results"][0]["text"].startswith("A leader leads.")  # more "leader" ranks higher


def test_words_are_or_ed_so_a_question_in_plain_language_works(memory):
    a = memory.remember("Raft elects a leader by majority vote.").passages[0]
    b = memory.remember("Heartbeats keep followers from starting elections.").passages[0]
    memory.remember("Unrelated text about gardening tomatoes.")
    hits = _addresses(memory.search("How does Raft handle heartbeats?"))
    assert set(hits) == {a, b}
    # A passage matching more of the words ranks first.
    c = memory.remember("Raft sends heartbeats from the leader.").passages[0]
    assert _addresses(memory.search("raft heartbeats leader"))[0] == c


def test_stop_words_are_dropped_and_stemming_applies(memory):
    memory.remember("Replicas replicate the replicated log.")
    plain = to_json(memory.search("replication"))
    wordy = to_json(memory.search("what is the replication of it"))
    assert plain == wordy and len(plain["results"]) == 1
    assert fts_query("what is the replication of it") == '"replication"'
    # Nothing but stop words: they are searched rather than nothing at all.
    memory.remember("To be or not to be.")
    assert len(memory.search("to be").results) == 1


def test_a_query_without_words_finds_nothing_and_is_no_error(memory):
    memory.remember("Anything at all.")
    for query in ("", "   ", "!!!", "***", '""', "()", "-", "_"):
        assert memory.search(query).results == []


# Queries that break naive FTS5 MATCH use: operators, quotes, columns, prefixes.
_nasty = st.sampled_from(
    [
        '"',
        "'",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "*",
        "^",
        ":",
        "(",
        ")",
        "{",
        "}",
        "-",
        "+",
        "text:",
        "passages_fts",
        "rank",
        "\\",
        "\x00",
        "%",
        ";",
        "--",
        "/*",
        "ǅ",
        "ﬁ",
        "日本語",
        "🙂",
        "\u200b",
        "\ufeff",
        "é",
    ]
)
_query = st.one_of(
    st.text(max_size=80),
    st.lists(st.one_of(_nasty, st.text(max_size=6)), max_size=12).map(" ".join),
    st.lists(st.one_of(_nasty, st.text(max_size=6)), max_size=12).map("".join),
)


def test_any_user_text_is_a_valid_query_at_every_granularity():
    with temporary_memory() as memory:
        for body in passages_about("Raft", 3):
            memory.remember(body)
        memory.remember('Quotes "and" operators AND OR NOT NEAR * ^ : ( ) 日本語 🙂 ﬁle.')
        memory.record_fact("Raft", "leader", 'n1 "quoted" AND NOT')
        [item] = memory.compact(kinds=["page"]).items
        memory.submit(item.id, content="Raft copies writes.", title="Raft", force=True)

        @settings(
            max_examples=250,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(_query, st.sampled_from(["passage", "page", "fact", "entity", "all"]))
        def check(query, granularity):
            try:
                result = memory.search(query, granularity=granularity)
            except BadInput as exc:  # only a NUL is refused, and clearly
                assert "\x00" in query or "surrogate" in exc.message, exc.message
                return
            for hit in result.results:
                assert hit.granularity == granularity or granularity == "all"

        check()
        # And the operator words themselves are ordinary words.
        hits = memory.search('NEAR "AND" OR', granularity="passage").results
        assert len(hits) == 1 and hits[0].text.startswith("Quotes")


def test_words_beyond_ascii_are_found_with_or_without_their_accents(memory):
    # Both engines split words at what is neither a letter nor a digit, in
    # any script, and fold accents away (SQLite's unicode61; PostgreSQL's
    # own rule since its migration 18: before it "café" was indexed "caf").
    cafe = memory.remember("Le café de Zürich sert un résumé naïf.").passages[0]
    tokyo = memory.remember("東京 is far from Zürich.").passages[0]
    memory.remember("A plain passage about coffee and a summary.")
    for question in ("café", "cafe", "CAFÉ", "résumé", "resume", "naïf", "naif"):
        assert _addresses(memory.search(question)) == [cafe], question
    assert set(_addresses(memory.search("zurich"))) == {cafe, tokyo}
    assert _addresses(memory.search("東京")) == [tokyo]
    fact = memory.record_fact("Zoë", "lives in", "Zürich").fact
    assert _addresses(memory.search("zoe", granularity="fact")) == [fact]
    assert [h.text for h in memory.search("Zoë", granularity="entity").results] == ["Zoë"]


def test_a_word_with_sharp_s_is_found_as_written(memory):
    # Both indexes keep "ß" (lowercase, not casefold); the question's words
    # are folded the same way, so "Straße" meets "Straße" (casefolded to
    # "strasse" it met nothing on either engine). Names still match
    # casefolded, as they are kept.
    street = memory.remember("Die Hauptstraße führt zum Bahnhof, der Fußweg nicht.").passages[0]
    memory.remember("A plain passage about a road and a footpath.")
    for question in ("Hauptstraße", "HAUPTSTRAẞE", "Fußweg", "fußweg zum bahnhof"):
        assert _addresses(memory.search(question)) == [street], question
    named = memory.remember("[[Große Straße]] ist lang.").passages[0]
    entity = memory.search("große straße", granularity="entity").results
    assert [h.text for h in entity] == ["Große Straße"]
    assert _addresses(memory.search("Große Straße")) == [named]


def test_every_granularity_and_all(memory):
    for body in passages_about("Raft", 3):
        memory.remember(body)
    memory.record_fact("Raft", "replication factor", "three")
    [item] = memory.compact(kinds=["page"]).items
    page = memory.submit(
        item.id, content="Raft replication copies writes.", title="Raft", force=True
    ).address

    passages = memory.search("replication", granularity="passage").results
    assert len(passages) == 3 and {h.granularity for h in passages} == {"passage"}
    pages = memory.search("replication", granularity="page").results
    assert _addresses(memory.search("copies", granularity="page")) == [page]
    assert [h.granularity for h in pages] == ["page"] and pages[0].text.startswith("Raft")
    facts = memory.search("replication", granularity="fact").results
    assert [h.granularity for h in facts] == ["fact"]
    assert facts[0].text == "Raft replication factor three"
    # Facts are searched over subject, predicate and value.
    assert _addresses(memory.search("three", granularity="fact")) == [facts[0].address]
    assert _addresses(memory.search("raft", granularity="fact")) == [facts[0].address]
    entities = memory.search("raft", granularity="entity").results
    assert [(h.granularity, h.text) for h in entities] == [("entity", "Raft")]
    everything = memory.search("raft replication", granularity="all", limit=100).results
    assert {h.granularity for h in everything} == {"passage", "page", "fact", "entity"}
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=True)


def test_limit_caps_results_and_bad_limits_are_refused(memory):
    for i in range(15):
        memory.remember(f"Replication note number {i}.")
    assert len(memory.search("replication").results) == 10  # the default
    assert len(memory.search("replication", limit=3).results) == 3
    assert len(memory.search("replication", limit=1000).results) == 15
    assert len(memory.search("replication", granularity="all", limit=4).results) == 4
    for bad in (0, -1, 1001, "5", 2.5, True, None):
        with pytest.raises(BadInput, match="limit must be an integer from 1 to 1000"):
            memory.search("replication", limit=bad)


def test_bad_granularity_and_as_of_are_refused(memory):
    with pytest.raises(BadInput, match="unknown granularity 'sentence'"):
        memory.search("x", granularity="sentence")
    with pytest.raises(BadInput, match="as_of 'tomorrow' is not an ISO 8601"):
        memory.search("x", granularity="fact", as_of="tomorrow")
    with pytest.raises(BadInput, match="query must be a string"):
        memory.search(None)
    with pytest.raises(BadInput, match="query too long"):
        memory.search("word " * 5000)


def test_as_of_uses_half_open_intervals(memory):
    f = memory.record_fact(
        "Raft", "leader", "n1", valid_from="2024-01-01", valid_to="2024-02-01"
    ).fact
    open_ended = memory.record_fact("Raft", "leader", "n2", valid_from="2024-02-01").fact
    forever = memory.record_fact("Raft", "language", "Go").fact

    def at(when):
        return set(_addresses(memory.search("raft", granularity="fact", as_of=when)))

    assert at("2023-12-31T23:59:59Z") == {forever}
    assert at("2024-01-01") == {f, forever}  # valid_from is included
    assert at("2024-01-31T23:59:59.999999Z") == {f, forever}
    assert at("2024-02-01") == {open_ended, forever}  # valid_to is excluded
    assert at("2999-01-01") == {open_ended, forever}
    assert set(_addresses(memory.search("raft", granularity="fact"))) == {f, open_ended, forever}
    # as_of filters facts only; the other granularities ignore it.
    memory.remember("Raft is a consensus algorithm.")
    assert len(memory.search("raft", as_of="1999-01-01").results) == 1


def test_forgotten_and_superseded_rows_are_never_returned(memory):
    gone = memory.remember("Obsolete lease protocol notes.")
    memory.forget(gone.document)
    v1 = memory.remember("Leases last ten seconds.", uri="leases")
    v2 = memory.remember("Leases last five seconds.", uri="leases")
    assert _addresses(memory.search("leases seconds obsolete")) == v2.passages
    assert v1.passages[0] not in _addresses(memory.search("ten"))

    a = memory.record_fact("Leases", "duration", "ten seconds").fact
    b = memory.record_fact("Leases", "duration", "five seconds").fact
    [conflict] = memory.compact(kinds=["conflict"]).items
    memory.submit(conflict.id, keep=b)
    assert _addresses(memory.search("duration seconds", granularity="fact")) == [b]
    memory.forget(b)
    assert memory.search("duration seconds", granularity="fact").results == []
    assert a not in _addresses(memory.search("ten", granularity="all", limit=100))

    memory.remember("[[Lease Protocol]] and [[Leasing]] are one thing.")
    memory.propose_merge(["Lease Protocol", "Leasing"])
    [merge] = memory.compact(kinds=["merge"]).items
    memory.submit(merge.id, accept=True)
    entities = memory.search("leasing", granularity="entity").results
    # The merged entity is gone; the survivor is found by its new alias.
    assert "Lease Protocol (also: Leasing)" in [h.text for h in entities]
    assert "Leasing" not in [h.text for h in entities]


def test_pages_superseded_or_forgotten_are_not_returned(memory):
    for body in passages_about("Raft", 3):
        memory.remember(body)
    [item] = memory.compact(kinds=["page"]).items
    first = memory.submit(item.id, content="Raft copies writes.", title="Raft", force=True).address
    memory.forget(memory.entity("Raft").passages[0].address)
    [stale] = memory.compact(kinds=["stale"]).items
    second = memory.submit(
        stale.id, content="Raft orders leases.", title="Raft", force=True
    ).address
    assert _addresses(memory.search("copies orders", granularity="page")) == [second]
    assert first not in _addresses(memory.search("copies", granularity="all", limit=100))
    memory.forget(second)
    assert memory.search("raft", granularity="page").results == []


def test_a_search_naming_an_entity_reads_its_term_with_the_statistics(memory, monkeypatch):
    # A question that names an entity also looks for the entity's term (the
    # passages that mention it). On PostgreSQL the term is made from the
    # entity's row in the statement that reads the terms' statistics: no
    # round trip of its own to read the entity's number first.
    memory.remember("[[Raft]] elects a leader.", uri="raft")
    memory.remember("The protocol by Ongaro keeps a replicated log.", uri="log")
    memory.remember("[[Raft]] was written up in 2014.", uri="paper")
    if memory.store.tx.engine != "postgres":
        pytest.skip("PostgreSQL's round trips (SQLite's reads are calls in its process)")
    from store_checks import statements

    with statements(memory, monkeypatch) as seen:
        found = memory.search("what about raft", limit=5).results
    assert {r.text for r in found} == {
        "[[Raft]] elects a leader.",
        "[[Raft]] was written up in 2014.",
    }
    assert not [s for s in seen if "rowid FROM entities WHERE id IN" in s], seen
    assert any("FROM search_stats" in s and "FROM entities e" in s for s in seen), seen
