"""The storage contract: search."""

from __future__ import annotations

from typing import Any

import pytest

from memors_core.domain.ids import address
from memors_core.domain.search import idf
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import (
    forget,
    instant,
    remember,
    words,
    write_page,
)


class SearchContract(StorageFixtures):
    """Search finds live rows only, best first, with the namespace's own scores."""

    def test_search_finds_live_passages_best_first(self, storage: Storage) -> None:
        strong = remember(storage, "Raft raft raft: the raft protocol elects a raft leader.")
        weak = remember(storage, "Paxos is older than raft and harder to explain.")
        remember(storage, "Nothing about that protocol here at all.")
        remember(storage, "Raft in another namespace.", namespace=OTHER_NS)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("raft"), 10).rows
        assert [h.address for h in hits] == [address("passage", strong), address("passage", weak)]
        assert all(h.granularity == "passage" for h in hits)
        assert hits[0].score >= hits[1].score
        assert "elects a raft leader" in hits[0].text
        with storage.read() as tx:
            assert len(tx.search.passages(NS, words("raft"), 1).rows) == 1

    def test_work_alongside_a_read_sees_its_snapshot_and_raises_its_errors(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        before = address("passage", remember(storage, "Raft elects a leader."))
        other = open_storage()

        def raft(search: Any) -> list[str]:
            return [h.address for h in search.passages(NS, words("raft"), 10).rows]

        with storage.read() as tx:
            assert raft(tx.search) == [before]
            remember(other, "Raft replicates the log to followers.")  # after the read began
            assert tx.search.alongside(raft)() == [before]
            failing = tx.search.alongside(lambda search: [raft(search), 1 / 0])
            with pytest.raises(ZeroDivisionError):
                failing()
            assert raft(tx.search) == [before]
        with storage.read() as tx:
            assert len(tx.search.alongside(raft)()) == 2

    def test_a_forgotten_passage_is_not_found(self, storage: Storage) -> None:
        gone = remember(storage, "The heartbeat interval is fifty milliseconds.")
        kept = remember(storage, "A heartbeat keeps followers from starting elections.")
        forget(storage, "passage", gone)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("heartbeat"), 10).rows
        assert [h.address for h in hits] == [address("passage", kept)]

    def test_a_query_without_words_finds_nothing(self, storage: Storage) -> None:
        remember(storage, "Raft elects a leader.")
        with storage.read() as tx:
            for query in ("", "   ", "?!* -- ()", '"'):
                assert tx.search.passages(NS, words(query), 10).rows == []
                assert tx.search.pages(NS, words(query), 10).rows == []
                assert tx.search.facts(NS, words(query), 10, None).rows == []
                assert tx.search.entities(NS, words(query), 10).rows == []

    def test_search_syntax_in_the_query_is_just_words(self, storage: Storage) -> None:
        passage = remember(storage, "Raft NEAR leader election.")
        with storage.read() as tx:
            hits = tx.search.passages(NS, words('raft AND "leader* OR NEAR('), 10).rows
        assert [h.address for h in hits] == [address("passage", passage)]

    def test_search_finds_the_current_page_only(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        old = write_page(storage, "Raft", "Raft elects a leader by heartbeat timeout.", [passage])
        new = write_page(storage, "Raft", "Raft uses randomized heartbeat timeouts.", [passage])
        with storage.read() as tx:
            hits = tx.search.pages(NS, words("heartbeat"), 10).rows
        assert [h.address for h in hits] == [address("page", new)]
        assert address("page", old) not in [h.address for h in hits]

    def test_search_finds_live_facts_valid_at_a_time(self, storage: Storage) -> None:
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "alpha", None, "2020-01-01")
            new = tx.facts.record(NS, "Raft", "leader", "beta", "2020-01-01", None)
            gone = tx.facts.record(NS, "Raft", "leader", "gamma")
            tx.tombstones.add(NS, "fact", gone, "forgotten")
        with storage.read() as tx:
            every = {h.address for h in tx.search.facts(NS, words("leader"), 10, None).rows}
            assert every == {address("fact", old), address("fact", new)}
            then = tx.search.facts(NS, words("leader"), 10, instant("2019-06-01")).rows
            assert [h.address for h in then] == [address("fact", old)]

    def test_search_finds_an_entity_by_name_not_a_merged_one(self, storage: Storage) -> None:
        with storage.write() as tx:
            survivor = tx.entities.ensure("Raft consensus", NS).id
            absorbed = tx.entities.ensure("Raft protocol", NS).id
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            hits = tx.search.entities(NS, words("raft"), 10).rows
        assert [h.address for h in hits] == [address("entity", survivor)]

    def test_a_common_word_still_weighs_and_scores_are_the_namespaces_own(
        self, storage: Storage
    ) -> None:
        # "raft" is in every passage of the namespace: FTS5's own BM25 would
        # weigh it 1e-6; memors' weight stays ln(1 + 0.5 / 3.5).
        for body in ("Raft elects a leader.", "Raft replicates the log.", "Raft is simple."):
            remember(storage, body)
        with storage.read() as tx:
            before = tx.search.passages(NS, words("raft leader"), 10)
        assert len(before.rows) == 3 and before.rows[-1].score > 0.1
        assert before.ceiling == pytest.approx((idf(3, 3) + idf(3, 1)) * 2.2)
        # Another namespace growing (with the same words) changes nothing here.
        for i in range(30):
            remember(storage, f"Raft node {i} has no leader yet.", namespace=OTHER_NS)
        with storage.read() as tx:
            after = tx.search.passages(NS, words("raft leader"), 10)
        assert [(h.address, h.score) for h in after.rows] == [
            (h.address, h.score) for h in before.rows
        ]
        assert after.ceiling == before.ceiling
        # Its own rows do: the weights are this namespace's live rows'.
        forget(storage, "passage", remember(storage, "Leader leases."))
        with storage.read() as tx:
            assert tx.search.passages(NS, words("raft leader"), 10).ceiling == before.ceiling

    def test_an_entity_is_a_term_of_the_rows_about_it(self, storage: Storage) -> None:
        about = remember(storage, "She moved to Lisbon in spring.", about="Caroline")
        said = remember(storage, "Caroline, you said you moved?", about="Melanie")
        with storage.write() as tx:
            caroline = tx.entities.find("Caroline", NS)
            fact = tx.facts.record(NS, "Caroline", "lives in", "Lisbon")
        assert caroline is not None
        with storage.read() as tx:
            # the entity alone finds the passage that mentions her, not the one naming her
            hits = tx.search.passages(NS, words("", caroline), 10).rows
            assert [h.address for h in hits] == [address("passage", about)]
            # with words, its weight adds to theirs
            both = tx.search.passages(NS, words("moved", caroline), 10).rows
            assert [h.address for h in both] == [
                address("passage", about),
                address("passage", said),
            ]
            facts = tx.search.facts(NS, words("", caroline), 10, None).rows
            assert [h.address for h in facts] == [address("fact", fact)]
            entities = tx.search.entities(NS, words("", caroline), 10).rows
            assert [h.address for h in entities] == [address("entity", caroline)]

    def test_a_merge_moves_the_entity_term_to_the_survivor(self, storage: Storage) -> None:
        passage = remember(storage, "The protocol elects a leader.", about="Raft protocol")
        with storage.write() as tx:
            survivor = tx.entities.ensure("Raft", NS).id
            absorbed = tx.entities.find("Raft protocol", NS)
            assert absorbed is not None
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("", survivor), 10).rows
            assert [h.address for h in hits] == [address("passage", passage)]
            assert tx.search.passages(NS, words("", absorbed), 10).rows == []

    def test_named_finds_entities_by_folded_name_and_alias(self, storage: Storage) -> None:
        with storage.write() as tx:
            raft = tx.entities.ensure("Raft-Protocol", NS).id
            tx.entities.add_alias(raft, NS, "The Raft")
            other = tx.entities.ensure("Raft protocol", OTHER_NS).id
        with storage.read() as tx:
            assert tx.entities.named(NS, ["raft protocol", "the raft", "paxos"]) == {
                "raft protocol": raft,
                "the raft": raft,
            }
            assert tx.entities.named(OTHER_NS, ["raft protocol"]) == {"raft protocol": other}
            assert tx.entities.named(NS, []) == {}
