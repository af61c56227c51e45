"""The storage contract: documents and their versions."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from memors_core.domain.dates import now
from memors_core.domain.ids import address, uuid7
from memors_core.domain.rows import Document, DocumentVersion, Dropped, NewPassage, ScanMark
from memors_core.errors import NotFound
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import add_document, add_passage, forget, words


class DocumentContract(StorageFixtures):
    """Documents and their versions."""

    def test_document_versions_keep_their_passages(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, [kept, dropped] = add_document(tx, ["Kept.", "Dropped."], uri="file:///n.md")
            tx.documents.add_version(DocumentVersion(document, 2, "h2", "Notes", {"k": 1}, now()))
            tx.documents.link_passage(document, 2, 0, kept)
            added = add_passage(tx, document, 2, 1, "Added.")
            tx.documents.link_passage(document, 2, 1, added)
            tx.tombstones.add(NS, "passage", dropped, "superseded", "document version 2")
            first, second = tx.entities.ensure("Zeta", NS).id, tx.entities.ensure("Alpha", NS).id
            tx.passages.mention(kept, (second, first))
            tx.passages.mention(dropped, (first,))
        with storage.read() as tx:
            # the live ones in the version's order, each with its entities
            # in the store's order of them (as entities_of)
            assert tx.passages.live_of_version(document, 1) == [(kept, [first, second])]
            assert tx.passages.live_of_version(document, 2) == [
                (kept, [first, second]),
                (added, []),
            ]
            assert tx.passages.live_of_version(document, 3) == []
            # what a new version may keep: the live ones, each with its hash
            hashes = {p: tx.passages.hash_of(p) for p in (kept, dropped, added)}
            assert tx.passages.live_hashes_of_version(document, 1) == [(kept, hashes[kept])]
            assert tx.passages.live_hashes_of_version(document, 2) == [
                (kept, hashes[kept]),
                (added, hashes[added]),
            ]
            assert tx.passages.live_hashes_of_version(document, 3) == []
            assert tx.passages.entities_of(kept) == [first, second]
            assert tx.documents.version_passages(document, 1) == [kept, dropped]
            assert tx.documents.version_passages(document, 2) == [kept, added]
            sizes = tx.documents.versions(document)
            assert [(s.version.version, s.passages) for s in sizes] == [(1, 2), (2, 2)]
            latest = tx.documents.latest_version(document)
            assert (latest.version, latest.title, latest.metadata) == (2, "Notes", {"k": 1})
            found = tx.documents.latest_by_uri(NS, "file:///n.md")
            assert found is not None and (found.document.id, found.version) == (document, 2)
            assert tx.documents.latest_by_uri(OTHER_NS, "file:///n.md") is None
            assert tx.documents.version_dropping(dropped) == Dropped(document, 2)
            assert tx.documents.version_dropping(kept) is None
            assert tx.passages.live_of_document(document) == [kept, added]
            assert tx.documents.get(document, OTHER_NS) is None
            with pytest.raises(NotFound):
                tx.documents.latest_version(uuid7())

    def test_a_later_version_places_its_passages_at_once(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, [a, b, c] = add_document(tx, ["A.", "B.", "C."])
            tx.documents.add_version(DocumentVersion(document, 2, "h2", None, {}, now()))
            tx.documents.link_passages([(document, 2, 0, c), (document, 2, 1, a)])
            tx.documents.link_passages([])  # (nothing to place: nothing sent)
        with storage.read() as tx:
            assert tx.documents.version_passages(document, 2) == [c, a]
            assert tx.documents.version_passages(document, 1) == [a, b, c]

    def test_a_forgotten_document_is_not_found_by_its_uri(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, _ = add_document(tx, ["Text."], uri="file:///gone.md")
        forget(storage, "document", document)
        with storage.read() as tx:
            assert tx.documents.latest_by_uri(NS, "file:///gone.md") is None
            assert tx.documents.get(document, NS) is not None

    def test_writes_pipelined_are_stored_or_fail_together(self, storage: Storage) -> None:
        # What a remember stores in one pipelined block: nothing waits for
        # another's answer, yet each is stored, and a failing one fails the
        # write (at the latest when the block ends) with nothing of it kept.
        stamp = now()
        first, second = uuid7(), uuid7()
        with storage.write() as tx:
            tx.namespaces.touch(NS)
            with tx.pipelined():
                tx.documents.insert_many([Document(first, NS, "file:///p.md", stamp)])
                tx.documents.add_versions([DocumentVersion(first, 1, "h", None, {}, stamp)])
                with tx.pipelined():  # (inside one, a block goes on in it)
                    piped = uuid7()
                    numbers = tx.passages.insert_many(
                        NS, [NewPassage(piped, first, 1, 0, "Piped.", "hp", b"")], stamp
                    )
        assert len(numbers) == 1
        with storage.read() as tx:
            assert tx.passages.live_of_version(first, 1) == [(piped, [])]
        driver_error = cast(Any, storage).driver_error  # (the engine's own, as it is)
        with pytest.raises(driver_error), storage.write() as tx, tx.pipelined():
            tx.documents.insert_many([Document(second, NS, "file:///q.md", stamp)])
            tx.documents.insert_many([Document(first, NS, "file:///again.md", stamp)])
            tx.documents.add_versions([DocumentVersion(second, 1, "h", None, {}, stamp)])
        with storage.read() as tx:
            assert tx.documents.get(second, NS) is None
            assert tx.documents.latest_by_uri(NS, "file:///p.md") is not None

    def test_a_savepoint_inside_a_pipelined_block_keeps_what_follows_it(
        self, storage: Storage
    ) -> None:
        # A nested write (a savepoint) ended inside a pipelined block, then
        # more writes in the block: each stored. (PostgreSQL holds a
        # savepoint's RELEASE back to go with the next statement; in the
        # driver's pipeline a statement goes alone, so there it is sent.)
        stamp = now()
        first, second = uuid7(), uuid7()
        with storage.write() as tx, tx.pipelined():
            tx.namespaces.touch(NS)
            with storage.write() as inner:
                inner.documents.insert_many([Document(first, NS, "file:///in.md", stamp)])
            tx.namespaces.touch(f"{NS}-after")
            tx.documents.insert_many([Document(second, NS, "file:///after.md", stamp)])
        with storage.read() as tx:
            assert tx.documents.get(first, NS) is not None
            assert tx.documents.get(second, NS) is not None
            assert f"{NS}-after" in tx.namespaces.names()

    def test_writes_made_later_are_stored_with_the_next_statement_or_the_commit(
        self, storage: Storage
    ) -> None:
        # What a compaction's kind writes last (its counts, its mark) needs
        # no answer: a server engine holds it back, yet a read after it in
        # the transaction sees it, the commit stores what is left, a
        # savepoint rolled back drops what was made inside it, and a
        # failing one fails the write with nothing of it kept.
        first, second, third = ScanMark(1, 2, 3), ScanMark(4, 5, 6), ScanMark(7, 8, 9)
        with storage.write() as tx:
            with tx.later():
                tx.namespaces.touch(NS)
                tx.changes.set_mark(NS, "alpha", first)
            assert tx.changes.mark(NS, "alpha") == first
            with tx.later():
                tx.changes.set_mark(NS, "beta", second)
            with pytest.raises(LookupError), storage.write() as inner:  # (a savepoint)
                with inner.later():
                    inner.changes.set_mark(NS, "gamma", third)
                raise LookupError("undone")
            with tx.later():
                tx.changes.set_mark(NS, "delta", third)
        with storage.read() as tx:
            assert tx.changes.mark(NS, "alpha") == first
            assert tx.changes.mark(NS, "beta") == second
            assert tx.changes.mark(NS, "gamma") is None
            assert tx.changes.mark(NS, "delta") == third
            assert NS in tx.namespaces.names()
        driver_error = cast(Any, storage).driver_error
        with pytest.raises(driver_error), storage.write() as tx:
            tx.changes.set_mark(NS, "epsilon", first)
            sql = tx.native("sql")
            with tx.later():
                tx.changes.set_mark(NS, "zeta", second)
                # (the namespace is there: its name again breaks the key)
                sql.execute("INSERT INTO namespaces(name, created_at) VALUES (?, ?)", (NS, now()))
        with storage.read() as tx:
            assert tx.changes.mark(NS, "epsilon") is None
            assert tx.changes.mark(NS, "zeta") is None

    def test_savepoints_undone_before_or_after_their_first_statement_undo_only_themselves(
        self, storage: Storage
    ) -> None:
        # A server engine sets a savepoint with its first statement (a
        # compaction's turn sets one a kind): one undone before anything of
        # it was sent leaves what the transaction held back before it, one
        # inside another undoes only itself, and one undone after a read
        # inside it undoes its writes as ever.
        marks = [ScanMark(n, n + 1, n + 2) for n in range(1, 7)]
        with storage.write() as tx:
            with tx.later():
                tx.namespaces.touch(NS)
                tx.changes.set_mark(NS, "kept-before", marks[0])
            with pytest.raises(LookupError), storage.write() as inner:
                with inner.later():
                    inner.changes.set_mark(NS, "undone-unsent", marks[1])
                raise LookupError("undone before anything of it was sent")
            with storage.write() as outer:
                with outer.later():
                    outer.changes.set_mark(NS, "kept-outer", marks[2])
                with pytest.raises(LookupError), storage.write() as inner:
                    with inner.later():
                        inner.changes.set_mark(NS, "undone-nested", marks[3])
                    raise LookupError("the inner one alone")
                outer.changes.set_mark(NS, "kept-after-nested", marks[4])
            with pytest.raises(LookupError), storage.write() as inner:
                inner.changes.set_mark(NS, "undone-sent", marks[5])
                assert inner.changes.mark(NS, "undone-sent") == marks[5]  # (sent, read back)
                raise LookupError("undone after its statements were sent")
            assert tx.changes.mark(NS, "kept-before") == marks[0]
        with storage.read() as tx:
            got = {k: tx.changes.mark(NS, k) for k in ("kept-before", "kept-outer")}
            assert got == {"kept-before": marks[0], "kept-outer": marks[2]}
            assert tx.changes.mark(NS, "kept-after-nested") == marks[4]
            for undone in ("undone-unsent", "undone-nested", "undone-sent"):
                assert tx.changes.mark(NS, undone) is None, undone

    def test_passages_added_without_their_numbers_are_stored_and_found(
        self, storage: Storage
    ) -> None:
        # A bulk load's passages go without waiting for their numbers (after
        # saying which texts are coming, some of which never do): stored as
        # an insert with numbers would store them, the clock past them, each
        # found by its words once committed, and a failing batch keeps none.
        stamp = now()
        doc = uuid7()
        texts = [f"Harbor {n} ships {'cargo' if n % 2 else 'grain'} northward." for n in range(80)]
        rows = [NewPassage(uuid7(), doc, 1, n, t, f"h{n}", b"") for n, t in enumerate(texts)]
        with storage.write() as tx:
            tx.namespaces.touch(NS)
            before = tx.passages.head()
            tx.documents.insert_many([Document(doc, NS, "file:///harbor.md", stamp)])
            tx.documents.add_versions([DocumentVersion(doc, 1, "h", None, {}, stamp)])
            tx.passages.coming(NS, [*texts, "A text that never comes, about lighthouses."])
            with tx.pipelined():
                tx.passages.add_many(NS, rows[:50], stamp)
                tx.passages.add_many(NS, [], stamp)
                tx.passages.add_many(NS, rows[50:], stamp)
            assert tx.passages.head() >= before + 80
        with storage.read() as tx:
            assert [p for p, _ in tx.passages.live_of_version(doc, 1)] == [r.id for r in rows]
            found = tx.search.passages(NS, words("cargo"), 100).rows
            assert {h.address for h in found} == {address("passage", r.id) for r in rows[1::2]}
            assert not tx.search.passages(NS, words("lighthouses"), 10).rows
        driver_error = cast(Any, storage).driver_error
        again = NewPassage(rows[0].id, doc, 1, 0, "Harbor again.", "h0", b"")
        with pytest.raises(driver_error), storage.write() as tx, tx.pipelined():
            tx.passages.add_many(NS, [NewPassage(uuid7(), doc, 1, 99, "Tide.", "t", b"")], stamp)
            tx.passages.add_many(NS, [again], stamp)
        with storage.read() as tx:
            assert not tx.search.passages(NS, words("tide"), 10).rows

    def test_passages_read_ahead_of_their_transaction_are_stored_and_found(
        self, storage: Storage
    ) -> None:
        # A bulk load reads ahead for its next batch outside any transaction
        # (on another thread, while the batch before it commits), and the
        # batch's transaction takes the answer: its passages stored and
        # found as without it, and an answer for other texts, for a
        # document already there, or for another namespace, changes nothing
        # of what is stored.
        stamp = now()
        texts = [
            f"Orchard {n} grows {'pears' if n % 3 else 'quinces'} by the wall." for n in range(90)
        ]
        with storage.write() as tx:
            add_document(tx, ["An orchard note."], uri="file:///orchard.md")
        answers: list[object] = []
        batch = [
            (None, texts[:30]),
            ("file:///new.md", texts[30:60]),
            ("file:///orchard.md", texts),
        ]
        thread = threading.Thread(target=lambda: answers.append(storage.read_ahead(NS, batch)))
        thread.start()
        thread.join()
        other = storage.read_ahead("elsewhere", [(None, texts)])
        for ahead in (answers[0], other):
            doc = uuid7()
            rows = [NewPassage(uuid7(), doc, 1, n, t, f"h{n}", b"") for n, t in enumerate(texts)]
            with storage.write() as tx:
                tx.namespaces.touch(NS)
                tx.documents.insert_many([Document(doc, NS, f"file:///{doc}.md", stamp)])
                tx.documents.add_versions([DocumentVersion(doc, 1, "h", None, {}, stamp)])
                tx.passages.coming(NS, texts, ahead)
                with tx.pipelined():
                    tx.passages.add_many(NS, rows, stamp)
            with storage.read() as tx:
                found = tx.search.passages(NS, words("quinces"), 200).rows
                assert {address("passage", r.id) for r in rows[::3]} <= {h.address for h in found}
                kept = [p for p, _ in tx.passages.live_of_version(doc, 1)]
                assert kept == [r.id for r in rows]

    def test_documents_stored_together_are_found_by_their_uris_at_once(
        self, storage: Storage
    ) -> None:
        # What a bulk load stores per batch: documents, then their versions,
        # then the passages of all of them, each in one call.
        stamp = now()
        ids = [uuid7() for _ in range(3)]
        uris = ["file:///a.md", "file:///b.md", None]
        with storage.write() as tx:
            tx.namespaces.touch(NS)
            gone, _ = add_document(tx, ["Old a."], uri="file:///a.md")
            tx.documents.insert_many(
                [Document(i, NS, u, stamp) for i, u in zip(ids, uris, strict=True)]
            )
            tx.documents.insert_many([])
            tx.documents.add_versions(
                [
                    DocumentVersion(i, 1, f"h{n}", f"T{n}", {"n": n}, stamp)
                    for n, i in enumerate(ids)
                ]
            )
            tx.documents.add_versions([])
            seqs = tx.passages.insert_many(
                NS,
                [
                    NewPassage(uuid7(), i, 1, p, f"Doc {n} part {p}.", f"x{n}{p}", b"")
                    for n, i in enumerate(ids)
                    for p in range(2)
                ],
                stamp,
            )
        assert seqs == sorted(seqs) and len(set(seqs)) == 6
        forget(storage, "document", gone)
        with storage.read() as tx:
            found = tx.documents.latest_by_uris(NS, ["file:///a.md", "file:///b.md", "file:///c"])
            assert {u: (f.document.id, f.version) for u, f in found.items()} == {
                "file:///a.md": (ids[0], 1),
                "file:///b.md": (ids[1], 1),
            }
            assert tx.documents.latest_by_uris(OTHER_NS, ["file:///a.md"]) == {}
            assert tx.documents.latest_by_uris(NS, []) == {}
            version = tx.documents.latest_version(ids[1])
            assert (version.title, version.metadata) == ("T1", {"n": 1})
            listed = tx.documents.listing(NS, "oldest", 0, 10)
            assert [row.document.id for row in listed] == ids
            assert [row.passages for row in listed] == [2, 2, 2]
            hits = tx.search.passages(NS, words("doc part"), 10).rows
            assert len(hits) == 6
