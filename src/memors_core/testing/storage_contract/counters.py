"""The storage contract: counters."""

from __future__ import annotations

import pytest

from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import StorageFixtures
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

    def test_a_rolled_back_bump_is_not_counted(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.counters.bump("searches")
        with pytest.raises(Boom), storage.write() as tx:
            tx.counters.bump("searches", by=5)
            raise Boom
        with storage.read() as tx:
            assert tx.counters.read("searches") == {("", ""): 1}
