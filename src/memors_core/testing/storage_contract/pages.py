"""The storage contract: pages."""

from __future__ import annotations

import pytest

from memors_core.domain.ids import address, uuid7
from memors_core.errors import BadInput, NotFound
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import remember, write_page


class PageContract(StorageFixtures):
    """Pages: versions, citations, sentences and the facts they were built with."""

    def test_a_new_page_version_supersedes_the_old_one(self, storage: Storage) -> None:
        a = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        b = remember(storage, "[[Raft]] replicates a log.", about="Raft")
        v1 = write_page(storage, "Raft", "Raft elects.", [a])
        v2 = write_page(storage, "Raft", "Raft elects and replicates.", [a, b, a])
        with storage.read() as tx:
            raft = tx.entities.resolve("Raft", NS)
            current = tx.pages.current(raft)
            assert current is not None and current.id == v2
            assert (current.version, current.previous, current.content) == (
                2,
                v1,
                "Raft elects and replicates.",
            )
            old = tx.pages.get(v1)
            assert old is not None and old.content == "Raft elects."
            assert tx.tombstones.state(v1) == "superseded"
            assert tx.tombstones.is_live(v2)
            assert tx.pages.newer(v1) == v2
            assert tx.pages.newer(v2) is None
            assert tx.pages.last_written(raft) == v2
            assert tx.pages.last_written_of([raft, "no-such-entity"]) == {raft: v2}
            assert tx.pages.last_written_of([]) == {}
            assert [p.id for p in tx.pages.live(NS)] == [v2]
            assert tx.pages.counts() == {NS: (1, 0)}
            assert tx.pages.counts(NS) == {NS: (1, 0)} and tx.pages.counts("elsewhere") == {}
            hashes = {p.id: p.hash for p in tx.passages.by_ids([a, b])}
            assert {(s.passage, s.hash) for s in tx.pages.sources(v2)} == set(hashes.items())
            assert [(s.passage, s.hash) for s in tx.pages.sources(v1)] == [(a, hashes[a])]

    def test_a_page_records_the_passage_clock_it_was_built_at(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [passage])
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and row.built_at == tx.passages.head()

    def test_a_page_cannot_cite_a_missing_passage(self, storage: Storage) -> None:
        with pytest.raises(NotFound):
            write_page(storage, "Raft", "Raft elects.", [uuid7()])
        with storage.read() as tx:
            assert tx.pages.live(NS) == []

    def test_a_page_keeps_its_sentences_with_their_sources_and_its_facts(
        self, storage: Storage
    ) -> None:
        a = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        b = remember(storage, "[[Raft]] replicates a log.", about="Raft")
        with storage.write() as tx:
            year = tx.facts.record(NS, "Raft", "published", "2014")
            leader = tx.facts.record(NS, "Raft", "leader", "n1")
        sentences = [
            ("Raft elects a leader and replicates a log.", [address("passage", a),
                                                             address("passage", b)]),
            ("It was published in 2014.", [address("fact", year)]),
            ("Raft elects a leader.", [address("passage", a), address("passage", a)]),
            ("A sentence citing nothing.", []),
        ]  # fmt: skip
        page = write_page(
            storage, "Raft", "…", [a, b], sentences=sentences, facts=[leader, year, leader]
        )
        plain = write_page(storage, "Paxos", "Paxos agrees.", [])
        with storage.read() as tx:
            assert [(s.text, list(s.sources)) for s in tx.pages.sentences(page)] == [
                (sentences[0][0], sentences[0][1]),
                (sentences[1][0], sentences[1][1]),
                ("Raft elects a leader.", [address("passage", a)]),  # each source once
                ("A sentence citing nothing.", []),
            ]
            assert tx.pages.facts(page) == [address("fact", leader), address("fact", year)]
            assert tx.pages.sentences(plain) == [] and tx.pages.facts(plain) == []
            # A new version records its own (none here), not its previous one's.
            assert tx.pages.sentences(uuid7()) == [] and tx.pages.facts(uuid7()) == []
        again = write_page(storage, "Raft", "Raft elects.", [a])
        with storage.read() as tx:
            assert tx.pages.sentences(again) == [] and tx.pages.facts(again) == []
            assert len(tx.pages.sentences(page)) == 4

    def test_a_page_cannot_be_built_with_a_missing_fact_or_source(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            elsewhere = tx.facts.record(OTHER_NS, "Raft", "leader", "n1")
        for kwargs in (
            {"facts": [uuid7()]},
            {"facts": [elsewhere]},  # a fact of another namespace
            {"sentences": [("Raft elects.", [address("passage", uuid7())])]},
            {"sentences": [("Raft elects.", [address("fact", uuid7())])]},
        ):
            with pytest.raises(NotFound):
                write_page(storage, "Raft", "Raft elects.", [passage], **kwargs)
        for bad in ("not an address", address("entity", uuid7())):
            with pytest.raises(BadInput):
                write_page(storage, "Raft", "Raft elects.", [passage], sentences=[("S.", [bad])])
        with storage.read() as tx:
            assert tx.pages.live(NS) == []

    def test_a_passage_profile_is_stored_once(self, storage: Storage) -> None:
        a = remember(storage, "Raft elects a leader.")
        b = remember(storage, "Paxos agrees on a value.")
        with storage.read() as tx:
            assert tx.passages.profiles([a, b]) == {}
            assert tx.passages.profiles([]) == {}
        with storage.write() as tx:
            tx.passages.add_profiles([(a, '{"tokens": ["raft"]}')])
        with storage.write() as tx:
            # a second add of the same passage keeps the first
            tx.passages.add_profiles([(a, '{"tokens": ["other"]}'), (b, '{"tokens": ["paxos"]}')])
            tx.passages.add_profiles([])
        with storage.read() as tx:
            assert tx.passages.profiles([a, b, uuid7()]) == {
                a: '{"tokens": ["raft"]}',
                b: '{"tokens": ["paxos"]}',
            }
            assert tx.passages.profiles([b]) == {b: '{"tokens": ["paxos"]}'}

    def test_a_merged_entity_s_page_is_the_survivor_s(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft protocol]] elects.", about="Raft protocol")
        page = write_page(storage, "Raft protocol", "Raft elects.", [passage])
        with storage.write() as tx:
            survivor = tx.entities.ensure("Raft", NS).id
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            current = tx.pages.current(survivor)
            assert current is not None and current.id == page
