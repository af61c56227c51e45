"""The storage contract (memors_core.testing.storage_contract) on the SQLite engine."""

from __future__ import annotations

import pytest

from memors_core.testing.storage_contract import SqliteStorage, StorageContract


@pytest.mark.sqlite_only(
    "the SQLite engine's contract run (test_postgres_contract.py is the other)"
)
class TestSqliteContract(SqliteStorage, StorageContract):
    pass
