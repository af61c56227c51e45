"""The storage contract: export and import."""

from __future__ import annotations

from typing import Any

import pytest

from memors_core.domain.dates import now
from memors_core.domain.ids import address
from memors_core.errors import BadInput
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import forget, remember, words, write_page


class TransferContract(StorageFixtures):
    """Export and import: a store's rows carried to an empty store as they were."""

    def _fill(self, storage: Storage) -> dict[str, Any]:
        a = remember(storage, "[[Raft]] elects a leader by heartbeat.", about="Raft")
        b = remember(storage, "[[Raft]] replicates its log.", about="Raft")
        remember(storage, "Elsewhere entirely.", namespace=OTHER_NS)
        with storage.write() as tx:
            fact = tx.facts.record(NS, "Raft", "leader", "one", source=address("passage", a))
            tx.passages.add_profiles([(a, '["raft", "heartbeat"]')])
        page = write_page(
            storage,
            "Raft",
            "Raft elects a leader.",
            [a, b],
            sentences=[("Raft elects a leader.", [address("passage", a), address("fact", fact)])],
            facts=[fact],
        )
        forget(storage, "passage", b)
        with storage.write() as tx:
            item = tx.items.create(NS, "page", "raft", "fp", {"entity": "Raft"}, now())
            tx.items.finish(item, "done", {"page": page}, now())
            tx.counters.bump("remembered", "", "", 3)
        return {"a": a, "b": b, "page": page, "fact": fact, "item": item}

    def test_an_export_imports_into_an_empty_store_as_it_was(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        ids = self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export())
            heads = (tx.passages.head(), tx.tombstones.head())
        assert {table for table, _ in rows} <= set(tx.transfer.tables)
        copy = open_storage("copy")
        with copy.write() as tx:
            assert tx.transfer.is_empty()
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            assert not tx.transfer.is_empty()
            assert list(tx.transfer.export()) == rows
            assert (tx.passages.head(), tx.tombstones.head()) == heads
            assert tx.tombstones.state(ids["b"]) == "forgotten"
            raft = tx.entities.resolve("Raft", NS)
            current = tx.pages.current(raft)
            assert current is not None and current.id == ids["page"]
            assert tx.pages.is_stale(ids["page"])
            fact = tx.facts.get(ids["fact"])
            assert fact is not None and fact.source == ids["a"]
            assert [(s.text, s.sources) for s in tx.pages.sentences(ids["page"])] == [
                ("Raft elects a leader.", (address("passage", ids["a"]), address("fact", fact.id)))
            ]
            assert tx.pages.facts(ids["page"]) == [address("fact", ids["fact"])]
            # Profiles are not carried: they are computed again when missing.
            assert tx.passages.profiles([ids["a"]]) == {}
            item = tx.items.get(ids["item"], NS)
            assert item is not None and item.resolution == {"page": ids["page"]}
            assert tx.counters.read("remembered") == {("", ""): 3}
            # The search indexes are rebuilt from the imported rows.
            hits = tx.search.passages(NS, words("heartbeat"), 10).rows
            assert [h.address for h in hits] == [address("passage", ids["a"])]
            assert [h.address for h in tx.search.pages(NS, words("leader"), 10).rows] == [
                address("page", ids["page"])
            ]
        later = remember(copy, "Arrives after the import.")
        with copy.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > heads[0]

    def test_an_export_without_page_sentences_and_facts_imports(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        ids = self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export())
        # As an export of a store from before pages recorded them.
        older = [(t, r) for t, r in rows if t not in ("page_sentences", "page_facts")]
        assert len(older) == len(rows) - 2
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in older:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            page = tx.pages.get(ids["page"])
            assert page is not None and page.content == "Raft elects a leader."
            assert tx.pages.sentences(ids["page"]) == [] and tx.pages.facts(ids["page"]) == []
            assert tx.pages.is_stale(ids["page"])  # its forgotten source still counts
        forget(copy, "fact", ids["fact"])  # and nothing recorded is not an error

    def test_a_namespace_export_holds_that_namespace_only(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export(OTHER_NS))
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            assert tx.namespaces.names() == [OTHER_NS]
            assert tx.passages.live_count(OTHER_NS) == 1
            assert tx.passages.live_count(NS) == 0
            assert tx.entities.find("Raft", NS) is None

    def test_an_import_keeps_the_clock_of_a_purged_store(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        remember(storage, "Stays.")
        newest = remember(storage, "Erased before the export.")
        with storage.read() as tx:
            head = tx.passages.head()
        with storage.erasing() as tx:  # as purge does: the erasure and its audit row
            tx.purges.erase_passage(newest)
            tx.purges.record(NS, address("passage", newest), [address("passage", newest)])
        with storage.read() as tx:
            rows = list(tx.transfer.export())
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        later = remember(copy, "Arrives after the import.")
        with copy.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > head

    def test_a_row_of_no_exported_table_is_bad_input(self, storage: Storage) -> None:
        with storage.write() as tx:
            with pytest.raises(BadInput):
                tx.transfer.restore("no_such_table", {"id": 1})
            assert tx.transfer.is_empty()
