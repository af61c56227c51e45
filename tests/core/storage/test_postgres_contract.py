"""The storage contract, run against the PostgreSQL engine."""

import pytest

from memors_core.testing.storage_contract import PostgresStorage, StorageContract

pytestmark = pytest.mark.postgres_run("the contract on PostgreSQL, whichever engine the run uses")


class TestPostgresContract(PostgresStorage, StorageContract):
    pass
