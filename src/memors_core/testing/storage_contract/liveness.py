"""The storage contract: append-only and liveness."""

from __future__ import annotations

from memors_core.domain.counters import PAGES_MARKED_STALE
from memors_core.domain.ids import address
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import add_document, forget, remember, write_page


class LivenessContract(StorageFixtures):
    """Rows are append-only: forgetting leaves a tombstone, and what is live follows."""

    def test_a_stored_passage_stays_readable_after_later_writes(self, storage: Storage) -> None:
        first = remember(storage, "Raft elects a leader by majority vote.")
        remember(storage, "Paxos agrees on one value.")
        with storage.write() as tx:
            tx.facts.record(NS, "Raft", "year", "2014")
        with storage.read() as tx:
            passage = tx.passages.get(first)
            assert passage is not None
            assert passage.text == "Raft elects a leader by majority vote."
            assert passage.namespace == NS

    def test_forgetting_leaves_the_row_with_a_tombstone(self, storage: Storage) -> None:
        passage = remember(storage, "The lease lasts ten seconds.")
        assert forget(storage, "passage", passage)
        with storage.read() as tx:
            kept = tx.passages.get(passage)
            assert kept is not None and kept.text == "The lease lasts ten seconds."
            assert not tx.tombstones.is_live(passage)
            assert tx.tombstones.state(passage) == "forgotten"
            tombstone = tx.tombstones.get(passage)
            assert tombstone is not None
            assert (tombstone.type, tombstone.state, tombstone.reason) == (
                "passage",
                "forgotten",
                "a test forgot it",
            )

    def test_what_get_shows_of_a_passage_is_its_row_tombstone_and_entities(
        self, storage: Storage
    ) -> None:
        # get_shown answers in one look-up what get, tombstones.get and
        # entities_of answer: a merged entity's mentions count once, as its
        # canonical, in the order first mentioned
        passage = remember(storage, "[[Raft]] and [[Paxos]] and [[Raft protocol]] agree.")
        plain = remember(storage, "Nothing is named here.")
        with storage.write() as tx:
            ids = [tx.entities.ensure(n, NS).id for n in ("Paxos", "Raft", "Raft protocol")]
            tx.passages.mention(passage, ids)
            tx.entities.merge(ids[1], ids[2], NS)  # Raft protocol -> Raft
        assert forget(storage, "passage", passage)
        with storage.read() as tx:
            shown = tx.passages.get_shown(passage, NS)
            assert shown is not None
            row, stone, entities = shown
            assert row == tx.passages.get(passage)
            assert stone == tx.tombstones.get(passage) and stone is not None
            assert stone.state == "forgotten"
            assert entities == tx.passages.entities_of(passage) == ids[:2]
            assert tx.passages.get_shown(plain, NS) == (tx.passages.get(plain), None, [])
            assert tx.passages.get_shown(passage, OTHER_NS) is None  # another namespace's
            assert tx.passages.get_shown("no-such-passage", NS) is None

    def test_a_forgotten_fact_is_kept_but_no_longer_live(self, storage: Storage) -> None:
        with storage.write() as tx:
            kept = tx.facts.record(NS, "Raft", "leader", "one")
            gone = tx.facts.record(NS, "Raft", "term", "monotonic")
        assert forget(storage, "fact", gone)
        with storage.read() as tx:
            fact = tx.facts.get(gone)
            assert fact is not None and fact.value == "monotonic"
            assert [f.id for f in tx.facts.live(NS)] == [kept]
            canonical = tx.entities.find("Raft", NS)
            assert canonical is not None
            assert [f.id for f in tx.facts.of_entity(canonical)] == [kept]

    def test_an_untouched_row_is_live(self, storage: Storage) -> None:
        passage = remember(storage, "Quorums overlap in one node.")
        with storage.read() as tx:
            assert tx.tombstones.is_live(passage)
            assert tx.tombstones.state(passage) == "live"
            assert tx.tombstones.get(passage) is None

    def test_forgetting_twice_is_false_the_second_time(self, storage: Storage) -> None:
        passage = remember(storage, "Snapshots compact the log.")
        assert forget(storage, "passage", passage)
        with storage.write() as tx:
            assert not tx.tombstones.add(NS, "passage", passage, "superseded")
            assert not tx.tombstones.add(NS, "passage", passage, "forgotten")
        with storage.read() as tx:
            assert tx.tombstones.state(passage) == "forgotten"

    def test_forgetting_many_at_once_tombstones_the_live_ones_in_order(
        self, storage: Storage
    ) -> None:
        with storage.write() as tx:
            _, ids = add_document(tx, [f"Raft note {n}: terms only grow." for n in range(5)])
        cited, first, gone, last = ids[1], ids[0], ids[2], ids[4]
        page = write_page(storage, "Raft", "Terms only grow.", [cited])
        assert forget(storage, "passage", gone)
        with storage.write() as tx:
            head = tx.tombstones.head()
            done = tx.tombstones.add_many(
                NS, "passage", [last, gone, first, cited, last], "forgotten", "many at once"
            )
            assert done == [last, first, cited]  # once each, the forgotten one left out
            assert tx.tombstones.add_many(NS, "passage", [first, cited], "forgotten") == []
        with storage.read() as tx:
            made = tx.tombstones.since(NS, head)
            assert [t.target for t in made] == [last, first, cited]  # numbered in that order
            assert {t.reason for t in made} == {"many at once"}
            assert tx.tombstones.state(ids[3]) == "live"
            assert tx.pages.is_stale(page)

    def test_forgetting_a_cited_passage_makes_the_page_stale(self, storage: Storage) -> None:
        cited = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        other = remember(storage, "[[Paxos]] agrees on a value.", about="Paxos")
        raft_page = write_page(storage, "Raft", "Raft elects a leader.", [cited])
        paxos_page = write_page(storage, "Paxos", "Paxos agrees.", [other])
        with storage.read() as tx:
            assert not tx.pages.is_stale(raft_page)
        forget(storage, "passage", cited)
        with storage.read() as tx:
            assert tx.pages.is_stale(raft_page)
            assert not tx.pages.is_stale(paxos_page)
            page = tx.pages.get(raft_page)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("passage", cited),
                    "change": "forgotten",
                    "text": "[[Raft]] elects a leader.",
                }
            ]
            assert [s.page.id for s in tx.pages.stale(NS)] == [raft_page]

    def test_pages_are_listed_sorted_paged_and_the_stale_ones_alone(self, storage: Storage) -> None:
        made = {}
        for name in ("raft", "Paxos", "etcd"):
            cited = remember(storage, f"[[{name}]] keeps a log.", about=name)
            made[name] = (cited, write_page(storage, name, f"{name} keeps a log.", [cited], item=7))
        newer = write_page(storage, "Paxos", "Paxos keeps a log.", [made["Paxos"][0]])
        forget(storage, "passage", made["etcd"][0])
        with storage.read() as tx:
            rows = tx.pages.listing(NS, "title", 0, 10)
            assert [(r.page.title, r.name, r.stale) for r in rows] == [
                ("etcd", "etcd", True),
                ("Paxos", "Paxos", False),
                ("raft", "raft", False),
            ]
            assert [r.page.id for r in tx.pages.listing(NS, "newest", 0, 1)] == [newer]
            assert [r.page.title for r in tx.pages.listing(NS, "oldest", 1, 1)] == ["etcd"]
            assert [r.page.title for r in tx.pages.listing(NS, "title", 0, 10, stale=True)] == [
                "etcd"
            ]
            assert tx.pages.live_count(NS) == 3
            assert tx.pages.live_count(NS, stale=True) == 1
            assert tx.pages.live_count("elsewhere") == 0
            assert tx.pages.of_item(7, NS) == made["etcd"][1]  # (the last one item 7 wrote)
            assert tx.pages.of_item(8, NS) is None

    def test_documents_are_listed_by_title_with_their_live_passages(self, storage: Storage) -> None:
        with storage.write() as tx:
            first, ids = add_document(tx, ["One.", "Two."], uri="b.txt")
            second, _ = add_document(tx, ["Three."], uri="a.txt")
            gone, _ = add_document(tx, ["Four."], uri="c.txt")
        forget(storage, "passage", ids[0])
        forget(storage, "document", gone)
        with storage.read() as tx:
            rows = tx.documents.listing(NS, "title", 0, 10)
            assert [
                (r.document.id, r.document.uri, r.latest.version, r.passages) for r in rows
            ] == [
                (second, "a.txt", 1, 1),
                (first, "b.txt", 1, 1),
            ]
            assert [r.document.id for r in tx.documents.listing(NS, "newest", 0, 1)] == [second]
            assert [r.document.id for r in tx.documents.listing(NS, "oldest", 1, 5)] == [second]
            assert tx.documents.live_count(NS) == 2

    def test_superseding_a_fact_makes_the_pages_built_with_it_stale(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "n1", "2024-01-01", "2024-06-01")
            kept = tx.facts.record(NS, "Raft", "term", "monotonic")
        built = write_page(storage, "Raft", "Raft elects n1.", [passage], facts=[old, kept])
        other = write_page(storage, "Paxos", "Paxos agrees.", [], facts=[kept])
        with storage.read() as tx:
            assert not tx.pages.is_stale(built) and not tx.pages.is_stale(other)
            before = tx.counters.read(PAGES_MARKED_STALE).get(("", ""), 0)
        with storage.write() as tx:
            assert tx.tombstones.add(NS, "fact", old, "superseded", "kept the newer one")
            # marked at once, and once: a second mark finds it stale already
            assert tx.pages.mark_built_with(old, "superseded") == 0
        with storage.read() as tx:
            assert tx.pages.is_stale(built) and not tx.pages.is_stale(other)
            assert tx.counters.read(PAGES_MARKED_STALE) == {("", ""): before + 1}
            page = tx.pages.get(built)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("fact", old),
                    "change": "superseded",
                    "text": "Raft leader n1 (from 2024-01-01 to 2024-06-01)",
                }
            ]
            assert [s.page.id for s in tx.pages.stale(NS)] == [built]
        # The next version, built without the old fact, is not stale.
        again = write_page(storage, "Raft", "Raft elects.", [passage], facts=[kept])
        with storage.read() as tx:
            assert not tx.pages.is_stale(again)
        forget(storage, "fact", kept)
        with storage.read() as tx:
            assert tx.pages.is_stale(again) and tx.pages.is_stale(other)
            page = tx.pages.get(other)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("fact", kept),
                    "change": "forgotten",
                    "text": "Raft term monotonic",
                }
            ]

    def test_a_fact_purged_after_it_made_a_page_stale_is_named_without_its_words(
        self, storage: Storage
    ) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            fact = tx.facts.record(NS, "Raft", "secret", "swordfish")
        page = write_page(storage, "Raft", "Raft elects.", [passage], facts=[fact])
        forget(storage, "fact", fact)
        with storage.erasing() as tx:
            tx.purges.erase_fact(fact)
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and tx.pages.is_stale(page)
            assert tx.pages.changes(row) == [
                {"address": address("fact", fact), "change": "purged", "text": ""}
            ]

    def test_an_entitys_history_holds_its_forgotten_facts_and_those_of_merged_ones(
        self, storage: Storage
    ) -> None:
        with storage.write() as tx:
            kept = tx.facts.record(NS, "Raft", "leader", "one")
            gone = tx.facts.record(NS, "Raft", "term", "monotonic")
            theirs = tx.facts.record(NS, "Raft protocol", "year", "2014")
            tx.facts.record(OTHER_NS, "Raft", "leader", "another namespace's")
        assert forget(storage, "fact", gone)
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            assert [f.id for f in tx.facts.history(survivor)] == [kept, gone, theirs]
            assert [f.id for f in tx.facts.of_entity(survivor)] == [kept, theirs]
            assert [e.id for e in tx.entities.absorbed(survivor)] == [absorbed]
            assert tx.entities.absorbed(absorbed) == []

    def test_live_passage_count_counts_what_live_passages_lists(self, storage: Storage) -> None:
        first = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        remember(storage, "[[Raft]] replicates a log.", about="Raft")
        remember(storage, "[[Raft protocol]] uses terms.", about="Raft protocol")
        assert forget(storage, "passage", first)
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            assert tx.entities.live_passage_count(survivor) == 2
            assert len(tx.entities.live_passages(survivor)) == 2

    def test_a_merge_stale_page_lists_the_merged_entity_and_its_passages(
        self, storage: Storage
    ) -> None:
        cited = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        theirs = remember(storage, "[[Raft protocol]] replicates a log.", about="Raft protocol")
        page = write_page(storage, "Raft", "Raft elects a leader.", [cited])
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            tx.entities.merge(survivor, absorbed, NS)
            assert tx.pages.mark_stale(page, "merge", address("entity", absorbed))
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and tx.pages.is_stale(page)
            # The merged entity's passage is older than the page, yet listed.
            assert tx.pages.changes(row) == [
                {
                    "address": address("entity", absorbed),
                    "change": "merged",
                    "text": "Raft protocol",
                },
                {
                    "address": address("passage", theirs),
                    "change": "new",
                    "text": "[[Raft protocol]] replicates a log.",
                },
            ]
            [(stale, changes)] = [(s.page, s.changes) for s in tx.pages.stale(NS)]
            assert stale.id == page and changes == tx.pages.changes(row)

    def test_mark_stale_is_true_the_first_time_only(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [passage])
        with storage.write() as tx:
            assert tx.pages.mark_stale(page, "merge")
            assert not tx.pages.mark_stale(page, "merge")
        with storage.read() as tx:
            assert tx.pages.is_stale(page)
