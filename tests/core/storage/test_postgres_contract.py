"""The storage contract, run against the PostgreSQL engine."""

from memors_core.testing.storage_contract import PostgresStorage, StorageContract


class TestPostgresContract(PostgresStorage, StorageContract):
    pass
