"""Type-only: each engine is a :class:`~memors_core.storage.api.Storage`,
its transactions :class:`~memors_core.storage.api.Tx`, and every ``Tx`` a
plugin's :class:`~memors_core.plugins.store.PluginStore`.

Never imported, never collected by pytest: ``make typecheck`` (mypy) reads
it, and fails naming the member that does not fit when an engine drifts
from the protocol (a method's signature, a repository missing or mistyped).
"""

from __future__ import annotations

from memors_core.plugins.store import PluginStore
from memors_core.storage.api import Storage, Tx
from memors_core.storage.empty import EmptyStore, EmptyTx
from memors_core.storage.postgres.connection import PgStore
from memors_core.storage.postgres.tx import PgTx
from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.storage.sqlite.tx import SqliteTx


def sqlite_is_a_storage(store: SqliteStore) -> Storage:
    return store


def postgres_is_a_storage(store: PgStore) -> Storage:
    return store


def no_store_yet_is_a_storage(store: EmptyStore) -> Storage:
    return store


def sqlite_tx_is_a_tx(tx: SqliteTx) -> Tx:
    return tx


def postgres_tx_is_a_tx(tx: PgTx) -> Tx:
    return tx


def no_store_yet_tx_is_a_tx(tx: EmptyTx) -> Tx:
    return tx


def a_tx_is_what_plugins_see(tx: Tx) -> PluginStore:
    return tx
