"""The storage contract: merge candidates and the change log."""

from __future__ import annotations

import threading

from memors_core.domain import text
from memors_core.domain.dates import now
from memors_core.domain.ids import uuid7
from memors_core.domain.rows import NewPassage, Opened, ScanMark
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import add_document, forget, remember


class ChangeContract(StorageFixtures):
    """Merge candidates, the change log and the scan marks that read it."""

    def test_a_merge_candidate_is_opened_once_per_pair(self, storage: Storage) -> None:
        with storage.write() as tx:
            a = tx.entities.ensure("Raft", NS).id
            b = tx.entities.ensure("Raft protocol", NS).id
            opened = tx.merges.open(NS, a, b, "names")
            ident = opened.id
            assert opened.status == "open"
            assert tx.merges.open(NS, b, a, "agent") == Opened(ident, "open")
            tx.merges.set_status(ident, "rejected")
            assert tx.merges.open(NS, a, b, "names") == Opened(ident, "rejected")
        with storage.read() as tx:
            candidate = tx.merges.get(ident)
            assert candidate is not None
            assert (candidate.first, candidate.second, candidate.status) == (a, b, "rejected")
            assert [c.id for c in tx.merges.in_namespace(NS)] == [ident]
            assert tx.merges.in_namespace(NS, "open") == []
            assert tx.merges.in_namespace(OTHER_NS) == []

    def test_the_change_log_names_the_entities_touched_since_a_mark(self, storage: Storage) -> None:
        remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.read() as tx:
            mark = tx.changes.head()
            raft = tx.entities.resolve("Raft", NS)
            assert raft in tx.changes.entities_since(NS, 0)
        remember(storage, "[[Paxos]] agrees.", about="Paxos")
        with storage.write() as tx:
            paxos = tx.entities.resolve("Paxos", NS)
            assert tx.changes.head() > mark
            assert tx.changes.entities_since(NS, mark) == {paxos}
            assert tx.changes.entities_since(OTHER_NS, 0) == set()
            tx.changes.set_mark(NS, "page", ScanMark(mark, 1, 0))
            assert tx.changes.mark(NS, "page") == ScanMark(mark, 1, 0)
            assert tx.changes.mark(NS, "merge") is None
            tx.changes.forget_marks(NS)
            assert tx.changes.mark(NS, "page") is None

    def test_passages_stored_in_a_batch_are_as_if_stored_one_by_one(self, storage: Storage) -> None:
        bodies = [f"Batch passage {i} about [[Raft]]." for i in range(5)]
        with storage.write() as tx:
            tx.namespaces.touch(NS)
            document, [single] = add_document(tx, ["Stored alone first."])
            raft = tx.entities.ensure("Raft", NS).id
            batch = [
                NewPassage(
                    uuid7(), document, 1, i + 1, body, text.content_hash(body),
                    text.pack_shingles(text.shingle_hashes(body)),
                )
                for i, body in enumerate(bodies)
            ]  # fmt: skip
            seqs = tx.passages.insert_many(NS, batch, now())
            assert tx.passages.insert_many(NS, [], now()) == []
            tx.passages.mention_many([(p.id, raft) for p in batch] + [(batch[0].id, raft)])
        with storage.read() as tx:
            first = tx.passages.get(single)
            assert first is not None
            assert seqs == list(range(first.seq + 1, first.seq + 6))  # the clock, in order
            assert tx.passages.head() == seqs[-1]
            assert [p.text for p in tx.passages.by_ids([p.id for p in batch])] == bodies
            assert [p.id for p in tx.entities.live_passages(raft)] == [p.id for p in batch]
            assert tx.passages.entities_of(batch[0].id) == [raft]  # linked once

    def test_a_scan_mark_never_skips_a_write_committed_after_it(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        # The hazard of a sequence read as a high-water mark: writer A takes
        # number 4, B takes 5 and commits first, a scan records 5, A commits
        # and `seq > 5` never sees A's row. Here writers on their own
        # connections race a scanner that records the clocks in a write
        # transaction, as compaction does; afterwards every mark must still
        # cover exactly the rows that were visible when it was taken.
        writers = [open_storage() for _ in range(3)]
        scanner = open_storage()
        marks: list[tuple[int, int, set[str], set[str]]] = []
        errors: list[BaseException] = []
        rounds = 25

        def write(store: Storage, who: int) -> None:
            try:
                for n in range(rounds):
                    passage = remember(store, f"Writer {who} stores passage {n}.", about=f"W{who}")
                    if n % 5 == 0:
                        forget(store, "passage", passage)
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        def scan() -> None:
            try:
                for _ in range(rounds):
                    with scanner.write() as tx:
                        head, changes = tx.passages.head(), tx.changes.head()
                        seen = {p.id for p in tx.passages.live_shingles(NS)}
                        touched = tx.changes.entities_since(NS, 0)
                        marks.append((head, changes, seen, touched))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w, i)) for i, w in enumerate(writers)]
        threads.append(threading.Thread(target=scan))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with storage.write() as tx:
            for head, changes, seen, touched in marks:
                live_then = {
                    p.id
                    for p in tx.passages.live_shingles(NS)
                    if p.seq <= head and tx.tombstones.get(p.id) is None
                }
                # a passage numbered within the mark is one the scan saw
                # (or one forgotten since, which a tombstone scan finds)
                assert live_then <= seen
                later = {p.id for p in tx.passages.live_shingles(NS, after=head)}
                assert not (later & seen)
                # and the change log's mark covers every entity logged up to it
                assert tx.changes.entities_since(NS, 0) - tx.changes.entities_since(
                    NS, changes
                ) <= touched | tx.entities.canonical_of(touched)

    def test_merging_shows_the_absorbed_entity_under_its_survivor(self, storage: Storage) -> None:
        with storage.write() as tx:
            survivor = tx.entities.ensure("Raft", NS).id
            absorbed = tx.entities.ensure("Raft protocol", NS).id
            mark = tx.changes.head()
            tx.entities.merge(survivor, absorbed, NS)
            assert survivor in tx.changes.entities_since(NS, mark)
