"""The storage contract: counters, and the audit of corrections."""

from __future__ import annotations

import pytest

from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import Boom


class CounterContract(StorageFixtures):
    """Counters sum per kind and event; a rolled-back bump is not counted."""

    def test_counters_sum_per_kind_and_event(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.counters.bump("items_created", "page", "created")
            tx.counters.bump("items_created", "page", "created", by=2)
            tx.counters.bump("items_created", "merge", "created")
            tx.counters.bump("items_created", "page", "refreshed")
            tx.counters.bump("other_counter")
        with storage.write() as tx:
            tx.counters.bump("items_created", "page", "created", by=4)
        with storage.read() as tx:
            assert tx.counters.read("items_created") == {
                ("page", "created"): 7,
                ("merge", "created"): 1,
                ("page", "refreshed"): 1,
            }
            assert tx.counters.read("other_counter") == {("", ""): 1}
            assert tx.counters.read("never_bumped") == {}
            assert tx.counters.read_many(["other_counter", "items_created", "never_bumped"]) == {
                "items_created": tx.counters.read("items_created"),
                "other_counter": {("", ""): 1},
                "never_bumped": {},
            }
            assert tx.counters.read_many([]) == {}

    def test_counters_bumped_in_namespaces_read_as_one(self, storage: Storage) -> None:
        # (an engine may keep a namespace's bumps apart, so that writers of
        # different namespaces never wait for one row: read, they add up)
        for ns in (NS, OTHER_NS, NS):
            with storage.write(namespace=ns) as tx:
                tx.counters.bump("done", "page", "done", by=2)
        with storage.read() as tx:
            assert tx.counters.read("done") == {("page", "done"): 6}
            assert tx.counters.read_many(["done"]) == {"done": {("page", "done"): 6}}

    def test_a_rolled_back_bump_is_not_counted(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.counters.bump("searches")
        with pytest.raises(Boom), storage.write() as tx:
            tx.counters.bump("searches", by=5)
            raise Boom
        with storage.read() as tx:
            assert tx.counters.read("searches") == {("", ""): 1}


class CorrectionContract(StorageFixtures):
    """The corrections of a namespace, oldest first, and its newest few in one look-up."""

    def test_corrections_read_back_in_order_and_newest_first(self, storage: Storage) -> None:
        with storage.write() as tx:
            for n in range(5):
                tx.corrections.record(NS, "rename", f"memo://entity/{n % 2}", {"to": f"N{n}"})
            tx.corrections.record(OTHER_NS, "reopen", "memo://item/1", {})
        with storage.read() as tx:
            oldest_first = tx.corrections.list(NS)
            assert [c.detail["to"] for c in oldest_first] == ["N0", "N1", "N2", "N3", "N4"]
            assert [c.detail["to"] for c in tx.corrections.list(NS, target="memo://entity/1")] == [
                "N1",
                "N3",
            ]
            assert tx.corrections.list(NS, "merge") == []
            newest, total = tx.corrections.newest(NS, 2)
            assert (newest, total) == (oldest_first[::-1][:2], 5)
            assert tx.corrections.newest(NS, 10) == (oldest_first[::-1], 5)
            assert tx.corrections.newest(NS, 0) == ([], 5)
            assert tx.corrections.newest(OTHER_NS, 3)[1] == 1
            assert tx.corrections.newest("nowhere", 3) == ([], 0)
