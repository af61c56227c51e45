"""The storage contract's openers: how a test reaches an engine's store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memors_core.storage.api import Storage

NS = "default"
OTHER_NS = "elsewhere"

#: ``open_storage(name="store", *, readonly=False)``: a new connection to
#: the test's store ``name`` (the same name, the same store).
Opener = Callable[..., Storage]


class StorageFixtures:
    """The fixtures a storage suite uses, from one method an engine overrides.

    ``open_storage(name="store", *, readonly=False)`` opens a new
    connection to one of the test's stores: calls with the same ``name``
    reach the same store (two connections to it, as two processes would
    have), another ``name`` an empty store of its own. ``storage`` is the
    first connection to ``"store"``. Every connection is closed after the test.
    """

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        """Open a connection to the store ``name`` of the test whose own
        empty directory is ``where`` (creating the store if it is new)."""
        raise NotImplementedError(f"{type(self).__name__} must say how to open its engine's store")

    def open_backup(self, path: Path) -> Storage:
        """Open the store :meth:`Storage.backup` wrote at ``path`` (the
        backup tests skip while this is not overridden)."""
        pytest.skip(f"{type(self).__name__} does not say how to open a backup")

    @pytest.fixture
    def open_storage(self, tmp_path: Path) -> Iterator[Opener]:
        opened: list[Storage] = []

        def open_(name: str = "store", *, readonly: bool = False) -> Storage:
            storage = self.make_storage(tmp_path, name, readonly=readonly)
            opened.append(storage)
            return storage

        yield open_
        for storage in reversed(opened):
            storage.close()

    @pytest.fixture
    def storage(self, open_storage: Opener) -> Storage:
        return open_storage()


class SqliteStorage(StorageFixtures):
    """The SQLite engine's opener: one database file per store name."""

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        from memors_core.storage.sqlite.connection import SqliteStore

        return SqliteStore.open(where / f"{name}.db", readonly=readonly)

    def open_backup(self, path: Path) -> Storage:
        from memors_core.storage.sqlite.connection import SqliteStore

        return SqliteStore.open(path, readonly=True)


class PostgresStorage(StorageFixtures):
    """The PostgreSQL engine's opener: one fresh database per store name,
    cloned from a migrated template (:mod:`memors_core.testing.postgres`),
    dropped after the test. Skips when no test server answers, unless
    ``MEMORS_REQUIRE_POSTGRES`` is set (``make test`` sets it)."""

    def server(self) -> Any:
        """The module whose ``new_database()`` and ``drop_database(url)``
        serve this opener, once its server answers (else skip or fail)."""
        from memors_core.testing import postgres

        postgres.require_server()
        return postgres

    @pytest.fixture(autouse=True)
    def _postgres_databases(self) -> Iterator[None]:
        self._server = self.server()
        self._databases: dict[str, str] = {}
        yield
        for url in self._databases.values():
            self._server.drop_database(url)

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        from memors_core.storage.postgres.connection import PgStore

        if name not in self._databases:
            self._databases[name] = self._server.new_database()
        return PgStore.open(self._databases[name], readonly=readonly)

    def open_backup(self, path: Path) -> Storage:
        # A PostgreSQL store's backup is a memors SQLite file.
        from memors_core.storage.sqlite.connection import SqliteStore

        return SqliteStore.open(path, readonly=True)


class PgvectorStorage(PostgresStorage):
    """PostgreSQL with pgvector: fresh databases on a server of this test
    process's own (:mod:`memors_core.testing.pgvector`), for the tests of
    vectors on PostgreSQL. Skips when that server cannot be had, unless
    ``CI`` is set (then it fails)."""

    def server(self) -> Any:
        from memors_core.testing import pgvector

        pgvector.require_server()
        return pgvector
