"""The storage contract: facts."""

from __future__ import annotations

import pytest

from memors_core.domain.dates import now
from memors_core.domain.ids import address, uuid7
from memors_core.domain.rows import IdPair
from memors_core.errors import BadInput, NotFound
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import forget, instant, remember


class FactContract(StorageFixtures):
    """Facts: the pairs that disagree, the expired ones, their sources."""

    def test_facts_that_disagree_are_paired(self, storage: Storage) -> None:
        with storage.write() as tx:
            alpha = tx.facts.record(NS, "Raft", "leader", "alpha")
            beta = tx.facts.record(NS, "raft", "Leader", "beta")
            upper = tx.facts.record(NS, "Raft", "leader", "ALPHA")  # folds equal to alpha
            tx.facts.record(NS, "Raft", "term", "beta")  # another predicate
            tx.facts.record(NS, "Paxos", "leader", "gamma")  # another subject
            before = tx.facts.record(NS, "Zab", "leader", "x", None, "2020-01-01")
            after = tx.facts.record(NS, "Zab", "leader", "y", "2020-01-01", None)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == [IdPair(alpha, beta), IdPair(beta, upper)]
            assert tx.facts.disagree(alpha, beta)
            assert not tx.facts.disagree(alpha, upper)
            assert not tx.facts.disagree(before, after)  # half-open: they only touch
            raft = tx.entities.resolve("Raft", NS)
            assert tx.facts.conflicting(NS, only=[raft]) == [
                IdPair(alpha, beta),
                IdPair(beta, upper),
            ]
            assert tx.facts.conflicting(NS, only=[tx.entities.resolve("Paxos", NS)]) == []
        forget(storage, "fact", beta)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == []
            assert not tx.facts.disagree(alpha, beta)
        with storage.write() as tx:
            assert tx.facts.disagree(before, tx.facts.record(NS, "Zab", "leader", "z"))

    def test_facts_about_merged_entities_can_disagree(self, storage: Storage) -> None:
        with storage.write() as tx:
            a = tx.facts.record(NS, "Raft", "leader", "alpha")
            b = tx.facts.record(NS, "Raft protocol", "leader", "beta")
            assert tx.facts.conflicting(NS) == []
            survivor = tx.entities.resolve("Raft", NS)
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == [IdPair(a, b)]
            fact = tx.facts.get(b)
            assert fact is not None
            assert (fact.canonical, fact.subject_name) == (survivor, "Raft")
            assert [f.id for f in tx.facts.of_entity(survivor)] == [a, b]
            many = tx.facts.of_entities([survivor, "no-such-entity"])
            assert many == {survivor: tx.facts.of_entity(survivor)}
            assert tx.facts.of_entities([]) == {}

    def test_expired_facts_and_bounded_copies(self, storage: Storage) -> None:
        stamp = now()
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "alpha", "2019-01-01", "2020-01-01")
            tx.facts.record(NS, "Raft", "leader", "beta", "2020-01-01", None)
            copy = tx.facts.copy(old, "2019-01-01", "2021-01-01", stamp)
        with storage.read() as tx:
            assert [f.id for f in tx.facts.expired(NS, instant("2020-06-01"))] == [old]
            assert tx.facts.expired(NS, instant("2019-06-01")) == []
            assert tx.facts.bounded_copy(old, stamp) == copy
            row = tx.facts.get(copy)
            assert row is not None
            assert (row.value, row.valid_to, row.recorded_at) == ("alpha", "2021-01-01", stamp)
            assert [f.id for f in tx.facts.by_ids([copy, uuid7(), old])] == [copy, old]

    def test_expired_facts_that_are_history(self, storage: Storage) -> None:
        with storage.write() as tx:
            # recorded (now) after its validity ended: history
            past = tx.facts.record(NS, "Raft", "maintainer", "Ongaro", None, "2016-01-01")
            # ends after it was recorded, a newer fact on the same predicate follows it
            followed = tx.facts.record(NS, "Zab", "release", "3.4", None, "2999-01-01")
            tx.facts.record(NS, "zab", "Release", "3.5", "2999-01-01", None)
            # ends after it was recorded, nothing follows: news once it has ended
            news = tx.facts.record(NS, "Paxos", "status", "draft", None, "2999-01-01")
            # what ends before it does not follow it
            tx.facts.record(NS, "Paxos", "status", "sketch", "1980-01-01", "1981-01-01")
        later = instant("3000-01-01")
        with storage.read() as tx:
            assert [f.id for f in tx.facts.expired(NS, later)][:3] == [past, followed, news]
            assert [f.id for f in tx.facts.expired(NS, later, history=False)] == [news]

    def test_a_fact_source_must_be_a_passage_of_the_namespace(self, storage: Storage) -> None:
        passage = remember(storage, "Raft elects a leader.", namespace=OTHER_NS)
        with storage.write() as tx:
            with pytest.raises(NotFound):
                tx.facts.record(NS, "Raft", "leader", "one", source=address("passage", passage))
            with pytest.raises(BadInput):
                tx.facts.record(NS, "Raft", "leader", "one", "2021-01-01", "2020-01-01")
            assert tx.facts.live(NS) == []
