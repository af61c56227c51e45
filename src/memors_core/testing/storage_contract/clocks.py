"""The storage contract: the clocks."""

from __future__ import annotations

import pytest

from memors_core.domain.rows import ScanMark
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import Boom, add_document, forget, remember


class ClockContract(StorageFixtures):
    """The passage and tombstone clocks only grow (a rollback or a purge winds neither back)."""

    def test_the_passage_clock_grows_with_each_insert(self, storage: Storage) -> None:
        with storage.read() as tx:
            assert tx.passages.head() == 0
        seen = []
        for n in range(3):
            passage = remember(storage, f"Round {n} of replication.")
            with storage.read() as tx:
                row = tx.passages.get(passage)
                assert row is not None
                assert tx.passages.head() == row.seq
                seen.append(row.seq)
        assert seen == sorted(seen) and len(set(seen)) == 3
        with storage.write() as tx:
            _, ids = add_document(tx, ["One.", "Two."])
            seqs = [p.seq for p in tx.passages.by_ids(ids)]
            assert seqs[0] > seen[-1] and seqs[1] > seqs[0]
            assert tx.passages.head() == seqs[1]

    def test_a_rolled_back_insert_does_not_move_the_clock_back(self, storage: Storage) -> None:
        remember(storage, "Kept passage.")
        with storage.read() as tx:
            before = tx.passages.head()
        with pytest.raises(Boom), storage.write() as tx:
            add_document(tx, ["Lost passage."])
            raise Boom
        with storage.read() as tx:
            assert tx.passages.head() == before
        later = remember(storage, "Later passage.")
        with storage.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > before

    def test_the_three_heads_read_at_once_are_the_clocks_read_one_by_one(
        self, storage: Storage
    ) -> None:
        with storage.read() as tx:
            assert tx.changes.heads() == ScanMark(0, 0, 0)
        a = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        remember(storage, "[[Paxos]] agrees.", about="Paxos")
        forget(storage, "passage", a)
        with storage.read() as tx:
            one_by_one = ScanMark(tx.changes.head(), tx.passages.head(), tx.tombstones.head())
            assert one_by_one.passages > 0 and one_by_one.tombstones > 0
            assert one_by_one.changes > 0
            assert tx.changes.heads() == one_by_one
        with storage.write() as tx:  # numbers ticked in this write are counted in
            _, ids = add_document(tx, ["One more."])
            (row,) = tx.passages.by_ids(ids)
            heads = tx.changes.heads()
            assert heads.passages == row.seq == tx.passages.head()
            assert heads.tombstones == one_by_one.tombstones
            assert heads.changes == tx.changes.head()

    def test_the_tombstone_clock_orders_tombstones(self, storage: Storage) -> None:
        a = remember(storage, "First to go.")
        b = remember(storage, "Second to go.")
        with storage.read() as tx:
            start = tx.tombstones.head()
        forget(storage, "passage", a)
        with storage.read() as tx:
            middle = tx.tombstones.head()
        forget(storage, "passage", b)
        with storage.read() as tx:
            assert start < middle < tx.tombstones.head()
            assert [t.target for t in tx.tombstones.since(NS, start)] == [a, b]
            assert [t.target for t in tx.tombstones.since(NS, middle)] == [b]
            assert tx.tombstones.since(OTHER_NS, start) == []

    def test_clock_numbers_are_not_handed_out_again_after_a_purge(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        remember(storage, "Stays.")
        newest = remember(storage, "Erased soon.")
        forget(storage, "passage", newest)
        with storage.read() as tx:
            passages_before, tombstones_before = tx.passages.head(), tx.tombstones.head()
        with storage.erasing() as tx:
            tx.purges.erase_passage(newest)
        with storage.read() as tx:
            assert tx.passages.get(newest) is None
            assert tx.passages.head() >= passages_before
            assert tx.tombstones.head() >= tombstones_before
        # A new connection (another process) knows the high-water marks too.
        again = open_storage()
        after = remember(again, "Arrives after the purge.")
        forget(again, "passage", after)
        with again.read() as tx:
            row = tx.passages.get(after)
            assert row is not None and row.seq > passages_before
            tombstone = tx.tombstones.get(after)
            assert tombstone is not None and tombstone.seq > tombstones_before
