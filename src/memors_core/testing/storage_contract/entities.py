"""The storage contract: entities."""

from __future__ import annotations

import pytest

from memors_core.domain.ids import address
from memors_core.domain.rows import Ensured, IdPair
from memors_core.errors import BadInput, NotFound
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import forget, remember, write_page


class EntityContract(StorageFixtures):
    """Entities: folded names, aliases, merges."""

    def test_ensure_is_idempotent_and_folds_case_and_space(self, storage: Storage) -> None:
        with storage.write() as tx:
            first = tx.entities.ensure("Quorum Replication", NS)
            ident = first.id
            assert first.created
            assert tx.entities.ensure("Quorum Replication", NS) == Ensured(ident, False)
            assert tx.entities.ensure("  quorum   REPLICATION ", NS) == Ensured(ident, False)
            other = tx.entities.ensure("quorum-replication", NS)
            assert other.created and other.id != ident
            elsewhere = tx.entities.ensure("Quorum Replication", OTHER_NS)
            assert elsewhere.created and elsewhere.id != ident
        with storage.read() as tx:
            entity = tx.entities.get(ident)
            assert entity is not None
            assert (entity.name, entity.canonical, entity.namespace) == (
                "Quorum Replication",
                ident,
                NS,
            )
            assert tx.entities.find("QUORUM replication", NS) == ident
            assert tx.entities.find("Quorum Replication", "nowhere") is None
            assert tx.entities.count(NS) == 2
            assert tx.entities.get(ident, OTHER_NS) is None
            many = tx.entities.get_many([ident, other.id, elsewhere.id, "no-such-entity", ident])
            assert many == {
                e: tx.entities.get(e) for e in (ident, other.id, elsewhere.id)
            }  # (every namespace's: an id names one entity)
            assert tx.entities.get_many([]) == {}

    def test_an_empty_entity_name_is_bad_input(self, storage: Storage) -> None:
        with storage.write() as tx:
            for name in ("", "   "):
                with pytest.raises(BadInput):
                    tx.entities.ensure(name, NS)

    def test_an_alias_finds_the_entity(self, storage: Storage) -> None:
        with storage.write() as tx:
            ident = tx.entities.ensure("PostgreSQL", NS).id
            tx.entities.add_alias(ident, NS, "Postgres")
            tx.entities.add_alias(ident, NS, "Postgres")
            tx.entities.add_alias(ident, NS, "postgresql")  # the name itself, folded
        with storage.read() as tx:
            assert tx.entities.find("postgres", NS) == ident
            assert tx.entities.resolve("POSTGRES", NS) == ident
            assert tx.entities.resolve(address("entity", ident), NS) == ident
            assert tx.entities.aliases(ident) == ["Postgres"]
            with pytest.raises(NotFound):
                tx.entities.resolve("MySQL", NS)

    def test_merge_points_the_absorbed_entity_at_the_survivor(self, storage: Storage) -> None:
        p1 = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        p2 = remember(storage, "[[Raft protocol]] replicates a log.", about="Raft protocol")
        p3 = remember(storage, "[[Raft algorithm]] is understandable.", about="Raft algorithm")
        plain = remember(storage, "Nothing is named here.")
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            third = tx.entities.resolve("Raft algorithm", NS)
            tx.entities.merge(absorbed, third, NS)  # third -> absorbed, then both -> survivor
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            for ident in (absorbed, third):
                entity = tx.entities.get(ident)
                assert entity is not None and entity.canonical == survivor
            assert tx.entities.find("Raft protocol", NS) == survivor
            assert tx.entities.canonical_of([absorbed, third]) == {survivor}
            assert [e.id for e in tx.entities.canonical_list(NS)] == [survivor]
            assert set(tx.entities.aliases(survivor)) == {"Raft protocol", "Raft algorithm"}
            assert [p.id for p in tx.entities.live_passages(survivor)] == [p1, p2, p3]
            # many entities at once: each as alone; an absorbed one, or an
            # unknown one, has no live passages of its own
            many = tx.entities.live_passages_of([survivor, absorbed, "no-such-entity", survivor])
            assert many == {survivor: tx.entities.live_passages(survivor)}
            assert tx.entities.live_passages_of([]) == {}
            assert tx.passages.entities_of(p3) == [survivor]
            # many at once; a passage that mentions nothing is left out
            assert tx.passages.entities_of_many([p3, p2, p1, plain]) == {
                p: [survivor] for p in (p1, p2, p3)
            }
            assert tx.passages.entities_of_many([]) == {}

    def test_the_canonical_entities_are_listed_by_name_a_page_at_a_time(
        self, storage: Storage
    ) -> None:
        with storage.write() as tx:
            made = {n: tx.entities.ensure(n, NS).id for n in ("Raft", "Paxos", "Zab", "Etcd")}
            tx.entities.ensure("Raft", OTHER_NS)
            tx.entities.merge(made["Raft"], made["Etcd"], NS)  # Etcd is Raft's now
        with storage.read() as tx:
            every = tx.entities.canonical_list(NS)
            assert [e.name for e in every] == ["Paxos", "Raft", "Zab"]
            assert tx.entities.listed(NS) == (every, 3)
            assert tx.entities.listed(NS, 1, 1) == (every[1:2], 3)
            assert tx.entities.listed(NS, 2, 50) == (every[2:], 3)
            assert tx.entities.listed(NS, 0, 0) == ([], 3)
            assert tx.entities.listed(NS, 9, 5) == ([], 3)
            assert tx.entities.listed(OTHER_NS)[1] == 1
            assert tx.entities.listed("nowhere") == ([], 0)

    def test_a_list_of_entities_reads_what_it_shows_of_each_together(
        self, storage: Storage
    ) -> None:
        # Other names, live passages, live facts and current page of each
        # entity shown: what the four reads give one by one, read together.
        kept = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        gone = remember(storage, "[[Raft]] keeps a log.", about="Raft")
        remember(storage, "[[Paxos]] agrees on a value.", about="Paxos")
        forget(storage, "passage", gone)
        write_page(storage, "Raft", f"Raft elects a leader. [passage:{kept}]", [kept])
        with storage.write() as tx:
            raft = tx.entities.resolve("Raft", NS)
            assert raft is not None
            tx.entities.add_alias(raft, NS, "Raft consensus")
            tx.facts.record(NS, "Raft", "year", "2014")
            tx.facts.record(NS, "Raft", "authors", "Ongaro and Ousterhout")
            tx.entities.ensure("Zab", NS)
        with storage.read() as tx:
            shown = tx.entities.canonical_list(NS)
            ids = [e.id for e in shown]
            four = (
                lambda: tx.entities.aliases_of(shown),
                lambda: tx.entities.live_passage_counts(ids),
                lambda: tx.facts.live_counts_of(ids),
                lambda: tx.pages.current_of(ids),
            )
            together = tx.together(*four)
            assert together == [read() for read in four]
            names, passages, facts, pages = together
            by = {e.name: e.id for e in shown}
            assert names[by["Raft"]] == ["Raft consensus"] and names[by["Zab"]] == []
            assert passages == {by["Raft"]: 1, by["Paxos"]: 1}
            assert facts == {by["Raft"]: 2}
            assert list(pages) == [by["Raft"]]
            assert tx.together(
                lambda: tx.entities.aliases_of([]),
                lambda: tx.entities.live_passage_counts([]),
                lambda: tx.facts.live_counts_of([]),
                lambda: tx.pages.current_of([]),
            ) == [{}, {}, {}, {}]

    def test_reads_asked_for_together_answer_as_each_alone(self, storage: Storage) -> None:
        # Independent reads sent together answer what each answers alone,
        # in their order, whatever each begins with; one read together
        # inside another's reads still answers; an error is the read's own.
        remember(storage, "[[Raft]] elects a leader.", about="Raft")
        remember(storage, "[[Paxos]] agrees.", about="Paxos")
        with storage.read() as tx:
            alone = (
                tx.entities.listed(NS),
                tx.pages.counts(NS),
                tx.entities.count(NS),
                tx.items.open_counts(NS),
            )
            together = tx.together(
                lambda: tx.entities.listed(NS),
                lambda: tx.pages.counts(NS),
                lambda: tx.entities.count(NS),
                lambda: tx.together(lambda: tx.items.open_counts(NS))[0],
            )
            assert together == list(alone)
            assert tx.together() == [] and tx.together(lambda: 7) == [7]
            ran: list[int] = []  # a read that makes no statement runs once

            def counted() -> int:
                ran.append(1)
                return 5

            assert tx.together(counted, lambda: tx.entities.count(NS)) == [5, alone[2]]
            assert ran == [1]
            with pytest.raises(NotFound):
                tx.together(lambda: tx.entities.listed(NS), lambda: tx.entities.require("nobody"))

    def test_same_name_pairs_and_orphans(self, storage: Storage) -> None:
        remember(storage, "[[Quorum Replication]] needs a majority.", about="Quorum Replication")
        with storage.write() as tx:
            named = tx.entities.resolve("Quorum Replication", NS)
            folded = tx.entities.ensure("quorum-replication", NS).id
            lonely = tx.entities.ensure("Lonely", NS).id
        with storage.read() as tx:
            assert tx.entities.same_name_pairs(NS) == [IdPair(named, folded)]
            assert set(tx.entities.orphans(NS)) == {folded, lonely}
