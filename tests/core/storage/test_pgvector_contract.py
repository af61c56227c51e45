"""The vector part of the storage contract on PostgreSQL with pgvector (a
server of the test process's own: Debian's PostgreSQL 15 has no pgvector),
and what the tests' own server says when it has none."""

import pytest

from memors_core.testing.storage_contract import (
    PgvectorStorage,
    PostgresStorage,
    VectorContract,
    remember,
    unit_vector,
)

pytestmark = pytest.mark.semantic


class TestPgvectorContract(PgvectorStorage, VectorContract):
    def test_the_store_keeps_vectors(self, storage) -> None:
        assert storage.capabilities.vectors, storage.capabilities.vectors_missing
        assert storage.capabilities.vectors_missing == ""


class TestWithoutPgvector(PostgresStorage):
    def test_a_server_without_pgvector_keeps_no_vectors_and_says_why(self, storage) -> None:
        with storage.read() as tx:
            has = tx.native("postgres").execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            )
            if has.fetchone():
                pytest.skip("this test server has pgvector")
        assert not storage.capabilities.vectors
        assert "no pgvector extension" in storage.capabilities.vectors_missing
        p = remember(storage, "Raft elects a leader.")
        with storage.read() as tx:
            assert tx.search.passages_like("default", unit_vector(1), 5).rows == []
            assert tx.vectors.count("default") == 0
        assert p
