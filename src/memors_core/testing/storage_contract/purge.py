"""The storage contract: purge."""

from __future__ import annotations

from pathlib import Path

import pytest

from memors_core.domain.dates import now
from memors_core.domain.ids import address, uuid7
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import (
    Boom,
    add_document,
    remember,
    words,
    write_page,
)


class PurgeContract(StorageFixtures):
    """Purge: erased rows are gone from every table (and file, where declared), audited."""

    def test_an_erased_passage_is_gone_and_not_found(self, storage: Storage) -> None:
        gone = remember(storage, "The secret rotation key is swordfish.", about="Rotation")
        kept = remember(storage, "The rotation happens every ninety days.", about="Rotation")
        with storage.write() as tx:
            tx.passages.add_profiles([(gone, '["secret", "swordfish"]'), (kept, '["ninety"]')])
        with storage.erasing() as tx:
            assert [
                p.id
                for p in tx.purges.passages_of(
                    tx.passages.get(gone).document  # type: ignore[union-attr]
                )
            ] == [gone]
            tx.purges.erase_passage(gone)
        with storage.read() as tx:
            assert tx.passages.get(gone) is None
            hits = tx.search.passages(NS, words("rotation swordfish"), 10).rows
            assert [h.address for h in hits] == [address("passage", kept)]
            rotation = tx.entities.resolve("Rotation", NS)
            assert [p.id for p in tx.entities.live_passages(rotation)] == [kept]
            # its profile (words of its text) went with it
            assert tx.passages.profiles([gone, kept]) == {kept: '["ninety"]'}

    def test_a_document_is_erased_with_everything_that_names_it(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, [secret] = add_document(tx, ["[[Vault]] opens with the word swordfish."])
            vault = tx.entities.ensure("Vault", NS).id
            tx.passages.mention(secret, [vault])
        kept = remember(storage, "[[Keeper]] stays.", about="Keeper")
        with storage.write() as tx:
            before = tx.facts.record(NS, "Vault", "door", "steel")
        v1 = write_page(
            storage,
            "Vault",
            "The vault opens with swordfish.",
            [secret],
            sentences=[("The vault opens with swordfish.", [address("passage", secret)])],
            facts=[before],
        )
        with storage.write() as tx:
            page_item = tx.items.create(NS, "page", "vault", "fp-page", {"cites": [secret]}, now())
        v2 = write_page(storage, "Vault", "The vault opens with a word.", [secret], item=page_item)
        # A page whose sentence cites the passage without listing it in its cites.
        keeper_page = write_page(
            storage,
            "Keeper",
            "Keeper stays with swordfish.",
            [kept],
            sentences=[("Keeper stays with swordfish.", [address("passage", secret)])],
        )
        with storage.write() as tx:
            fact = tx.facts.record(
                NS, "Vault", "word", "swordfish", source=address("passage", secret)
            )
            tx.items.finish(page_item, "done", {"page": v2}, now())
            open_item = tx.items.create(NS, "stale", "vault", "fp-open", {"cites": [secret]}, now())
        with storage.erasing() as tx:
            assert [p.id for p in tx.purges.passages_of(document)] == [secret]
            assert tx.purges.mentioned([secret]) == {vault}
            assert tx.purges.pages_citing([secret]) == {v1, v2, keeper_page}
            assert tx.purges.pages_citing([]) == set()
            assert tx.purges.pages_built_with([before]) == {v1}
            assert tx.purges.pages_built_with([fact]) == set()
            assert tx.purges.later_pages([v1]) == {v2}
            assert tx.purges.unnamed_entities([vault]) == []  # still mentioned
            for page in (v2, v1, keeper_page):
                tx.purges.erase_page(page)
            tx.purges.erase_fact(fact)
            tx.purges.erase_fact(before)
            tx.purges.erase_passage(secret)
            tx.purges.erase_document(document)
            tx.purges.redact_items(secret, {"redacted": True})
            assert tx.purges.unnamed_entities([vault]) == [vault]
            tx.purges.erase_entity(vault)
        with storage.read() as tx:
            assert tx.passages.get(secret) is None
            assert tx.documents.get(document, NS) is None
            assert tx.facts.get(fact) is None
            assert tx.pages.get(v1) is None and tx.pages.get(v2) is None
            assert tx.pages.get(keeper_page) is None
            # the page's sentences and facts went with it
            assert tx.pages.sentences(v1) == [] and tx.pages.facts(v1) == []
            assert tx.pages.sentences(keeper_page) == []
            assert tx.entities.get(vault) is None and tx.entities.find("Vault", NS) is None
            for search in (tx.search.passages, tx.search.pages, tx.search.entities):
                assert search(NS, words("swordfish vault"), 10).rows == []
            assert tx.search.facts(NS, words("swordfish"), 10, None).rows == []
            for ident in (page_item, open_item):
                item = tx.items.get(ident, NS)
                assert item is not None and item.payload == {"redacted": True}
                assert secret not in str(item.resolution)
            # neither still counts as done or as scanned for its inputs
            done = tx.items.get(page_item, NS)
            assert done is not None and done.fingerprint != "fp-page"
            assert tx.items.open_keys(NS, "stale")["vault"].fingerprint != "fp-open"
            assert tx.passages.get(kept) is not None
            assert tx.entities.find("Keeper", NS) is not None

    def test_a_failed_erasure_erases_nothing(self, storage: Storage) -> None:
        passage = remember(storage, "Must survive.")
        with pytest.raises(Boom), storage.erasing() as tx:
            tx.purges.erase_passage(passage)
            raise Boom
        with storage.read() as tx:
            assert tx.passages.get(passage) is not None

    def test_a_purge_is_audited_until_its_steps_are_done(self, storage: Storage) -> None:
        target, passage = address("document", uuid7()), address("passage", uuid7())
        with storage.erasing() as tx:
            audit = tx.purges.record(NS, target, [target, passage])
        with storage.read() as tx:
            record = tx.purges.last(NS, target)
            assert record is not None
            assert (record.id, record.erased) == (audit, [target, passage])
            [pending] = tx.purges.pending(NS)
            assert (pending.purge, pending.steps) == (audit, list(storage.purge_steps))
            assert tx.purges.pending(OTHER_NS) == []
            assert tx.purges.unreadable() == []
        for step in storage.purge_steps:
            assert storage.run_purge_step(step, wait=True)
            with storage.write() as tx:
                tx.purges.step_done(step, [audit])
        with storage.read() as tx:
            assert tx.purges.pending() == []
            assert tx.purges.last(NS, target) is not None

    def test_an_audit_record_of_content_still_there_drives_no_step(self, storage: Storage) -> None:
        passage = address("passage", remember(storage, "Still here."))
        with storage.erasing() as tx:
            audit = tx.purges.record(NS, passage, [passage])
        with storage.read() as tx:
            assert tx.purges.pending() == []
            [bad] = tx.purges.unreadable(NS)
            assert (bad.purge, bad.target) == (audit, passage)
            assert "still in the store" in bad.reason
            assert tx.purges.unreadable(OTHER_NS) == []

    def test_a_purged_text_is_in_no_file_of_the_store(self, storage: Storage) -> None:
        if not storage.capabilities.secure_erase:
            pytest.skip("the engine does not declare secure_erase")
        secret = ["zebracornish", "quartzlingo", "octarineblue"]
        passage = remember(storage, f"The door code is {' '.join(secret)} for now.")
        remember(storage, "Another passage that stays.")
        with storage.write() as tx:  # a profile holds words of its passage
            tx.passages.add_profiles([(passage, " ".join(reversed(secret)))])
        with storage.erasing() as tx:
            tx.purges.erase_passage(passage)
            audit = tx.purges.record(NS, address("passage", passage), [address("passage", passage)])
        for step in storage.purge_steps:
            assert storage.run_purge_step(step, wait=True)
            with storage.write() as tx:
                tx.purges.step_done(step, [audit])
        where = Path(storage.location)
        files = [p for p in where.parent.glob(where.name + "*") if p.is_file()]
        assert files
        for path in files:
            content = path.read_bytes()
            assert [w for w in secret if w.encode() in content] == [], path
