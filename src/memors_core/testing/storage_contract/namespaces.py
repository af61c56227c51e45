"""The storage contract: namespaces."""

from __future__ import annotations

from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import StorageFixtures


class NamespaceContract(StorageFixtures):
    """The namespaces in use."""

    def test_namespaces_in_use_are_listed_once(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.namespaces.touch("zeta")
            tx.namespaces.touch("alpha")
            tx.namespaces.touch("zeta")
        with storage.read() as tx:
            assert tx.namespaces.names() == ["alpha", "zeta"]
