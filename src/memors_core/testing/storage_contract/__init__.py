"""The storage contract: behaviour every storage engine keeps, as pytest tests.

The tests talk to a :class:`memors_core.storage.api.Storage` through the
protocol only (no SQL, no engine internals), so one suite checks every
engine. An engine's test module runs it by naming how its store is opened::

    from memors_core.testing.storage_contract import SqliteStorage, StorageContract

    class TestSqliteContract(SqliteStorage, StorageContract):
        pass

A new engine writes its own opener, a :class:`StorageFixtures` with
:meth:`~StorageFixtures.make_storage` (or, when its stores need set-up and
tear-down beyond ``close``, its own ``open_storage`` fixture)::

    class PostgresStorage(StorageFixtures):
        def make_storage(self, where, name, *, readonly=False):
            return PgStore.open(dsn_for(where, name), readonly=readonly)

Guarantees beyond the protocol are tested only where the engine declares
them in :class:`~memors_core.storage.api.Capabilities`; the others skip.

The same openers serve any other suite written against ``storage`` — a
kind's own index, say: write it as a class of tests taking the ``storage``
(or ``open_storage``) fixture, and run it on an engine by mixing that
engine's opener in, as above (``class TestMyIndexOnSqlite(SqliteStorage,
MyIndexContract)``).

Add ``pytest_plugins = ["memors_core.testing"]`` to the ``conftest.py``
so pytest rewrites the suite's asserts into readable failures.

The suite is a package with one module per capability, each a class of
tests (``search.SearchContract``, ``purge.PurgeContract``, ...);
:class:`StorageContract` is all of them. An engine still being written can
run one capability's class on its own the same way; the openers live in
``fixtures``, the helpers that store rows through the protocol in
``helpers``.
"""

from __future__ import annotations

from memors_core.testing.storage_contract.backup import BackupContract
from memors_core.testing.storage_contract.changes import ChangeContract
from memors_core.testing.storage_contract.clocks import ClockContract
from memors_core.testing.storage_contract.counters import CorrectionContract, CounterContract
from memors_core.testing.storage_contract.documents import DocumentContract
from memors_core.testing.storage_contract.entities import EntityContract
from memors_core.testing.storage_contract.facts import FactContract
from memors_core.testing.storage_contract.fixtures import (
    NS,
    OTHER_NS,
    Opener,
    PgvectorStorage,
    PostgresStorage,
    SqliteStorage,
    StorageFixtures,
)
from memors_core.testing.storage_contract.helpers import (
    Boom,
    add_document,
    add_passage,
    cosine,
    forget,
    instant,
    remember,
    unit_vector,
    words,
    write_page,
)
from memors_core.testing.storage_contract.items import WorkItemContract
from memors_core.testing.storage_contract.liveness import LivenessContract
from memors_core.testing.storage_contract.namespaces import NamespaceContract
from memors_core.testing.storage_contract.pages import PageContract
from memors_core.testing.storage_contract.purge import PurgeContract
from memors_core.testing.storage_contract.rules import RuleContract
from memors_core.testing.storage_contract.search import SearchContract
from memors_core.testing.storage_contract.transactions import TransactionContract
from memors_core.testing.storage_contract.transfer import TransferContract
from memors_core.testing.storage_contract.vectors import VectorContract

__all__ = [
    "NS",
    "OTHER_NS",
    "BackupContract",
    "Boom",
    "ChangeContract",
    "ClockContract",
    "CorrectionContract",
    "CounterContract",
    "DocumentContract",
    "EntityContract",
    "FactContract",
    "LivenessContract",
    "NamespaceContract",
    "Opener",
    "PageContract",
    "PgvectorStorage",
    "PostgresStorage",
    "PurgeContract",
    "RuleContract",
    "SearchContract",
    "SqliteStorage",
    "StorageContract",
    "StorageFixtures",
    "TransactionContract",
    "TransferContract",
    "VectorContract",
    "WorkItemContract",
    "add_document",
    "add_passage",
    "cosine",
    "forget",
    "instant",
    "remember",
    "unit_vector",
    "words",
    "write_page",
]


class StorageContract(
    LivenessContract,
    ClockContract,
    WorkItemContract,
    CounterContract,
    CorrectionContract,
    SearchContract,
    TransactionContract,
    NamespaceContract,
    EntityContract,
    FactContract,
    ChangeContract,
    RuleContract,
    PageContract,
    DocumentContract,
    PurgeContract,
    BackupContract,
    TransferContract,
    VectorContract,
):
    """The behaviour tests, every capability's. Run them by subclassing with
    an engine's opener (``class TestMyEngine(MyEngineStorage, StorageContract)``)."""
