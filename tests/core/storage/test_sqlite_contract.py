"""The storage contract (memors_core.testing.storage_contract) on the SQLite engine."""

from __future__ import annotations

from memors_core.testing.storage_contract import SqliteStorage, StorageContract


class TestSqliteContract(SqliteStorage, StorageContract):
    pass
