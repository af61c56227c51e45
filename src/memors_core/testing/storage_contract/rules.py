"""The storage contract: the shared rules: needing a page, stale."""

from __future__ import annotations

from memors_core.domain import text
from memors_core.domain.ids import address
from memors_core.domain.rows import NeedsPage
from memors_core.domain.rules import PAGE_MIN_PASSAGES, STALE_NEW_PASSAGES
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import forget, remember, write_page


class RuleContract(StorageFixtures):
    """The shared rules: when an entity needs a page, when a page is stale."""

    def test_an_entity_needs_a_page_from_enough_live_passages(self, storage: Storage) -> None:
        passages = [
            remember(storage, f"[[Raft]] fact number {n}.", about="Raft")
            for n in range(PAGE_MIN_PASSAGES)
        ]
        remember(storage, "[[Paxos]] only once.", about="Paxos")
        with storage.read() as tx:
            raft = tx.entities.resolve("Raft", NS)
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES) == [
                NeedsPage(raft, PAGE_MIN_PASSAGES)
            ]
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES, only=[]) == []
        forget(storage, "passage", passages[0])
        with storage.read() as tx:
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES) == []
            assert tx.passages.live_count(NS) == PAGE_MIN_PASSAGES
        write_page(storage, "Raft", "Raft.", passages[1:])
        with storage.read() as tx:
            assert tx.entities.needing_page(NS, 1) == [
                NeedsPage(tx.entities.resolve("Paxos", NS), 1)
            ]

    def test_enough_new_passages_make_a_page_stale(self, storage: Storage) -> None:
        first = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [first])
        new = [
            remember(storage, f"[[Raft]] new detail {n}.", about="Raft")
            for n in range(STALE_NEW_PASSAGES)
        ]
        with storage.read() as tx:
            assert tx.pages.is_stale(page)
            row = tx.pages.get(page)
            assert row is not None
            assert tx.pages.changes(row) == [
                {
                    "address": address("passage", p),
                    "change": "new",
                    "text": f"[[Raft]] new detail {n}.",
                }
                for n, p in enumerate(new)
            ]
            assert tx.pages.counts() == {NS: (1, 1)}
        forget(storage, "passage", new[0])
        with storage.read() as tx:
            assert not tx.pages.is_stale(page)
            assert tx.pages.counts() == {NS: (1, 0)}

    def test_live_shingles_follow_the_clock(self, storage: Storage) -> None:
        a = remember(storage, "Raft elects a leader by majority vote quickly.")
        b = remember(storage, "Paxos agrees on one value among the acceptors.")
        c = remember(storage, "Zab broadcasts atomically to its followers.")
        remember(storage, "Another namespace entirely, with words.", namespace=OTHER_NS)
        forget(storage, "passage", b)
        with storage.read() as tx:
            rows = {r.id: r for r in tx.passages.live_shingles(NS)}
            assert list(rows) == [a, c]
            expected = text.pack_shingles(text.shingle_hashes(tx.passages.get(a).text))  # type: ignore[union-attr]
            assert rows[a].shingles == expected
            assert [r.id for r in tx.passages.live_shingles(NS, after=rows[a].seq)] == [c]
            assert [r.id for r in tx.passages.live_shingles(NS, seqs=[rows[c].seq])] == [c]
