"""The SQLite engine's transaction object: its repositories and its clocks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memors_core.errors import PluginError
from memors_core.storage.sqlite.pages import SqlitePages
from memors_core.storage.sqlite.purge import SqlitePurges
from memors_core.storage.sqlite.queue import (
    SqliteChangeLog,
    SqliteCounters,
    SqliteItems,
    SqliteMergeCandidates,
)
from memors_core.storage.sqlite.records import (
    SqliteDocuments,
    SqliteEntities,
    SqliteFacts,
    SqliteNamespaces,
    SqlitePassages,
    SqliteTombstones,
)
from memors_core.storage.sqlite.search import SqliteSearch
from memors_core.storage.sqlite.transfer import SqliteTransfer

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import Store

#: The clocks: rows ordered by arrival whose numbers incremental scans keep.
CLOCKS = ("passages", "tombstones")


class SqliteTx:
    """The repositories of one SQLite connection (:class:`memors_core.storage.api.Tx`).

    One object serves every transaction of the connection: a repository
    method runs in whatever transaction the connection is in.
    """

    def __init__(self, db: Store) -> None:
        self.db = db
        # Within one write transaction the next clock values are counted
        # here instead of being read per row (a bulk load stores thousands).
        self._ticks: dict[str, int] = {}
        self.namespaces = SqliteNamespaces(self)
        self.documents = SqliteDocuments(self)
        self.passages = SqlitePassages(self)
        self.entities = SqliteEntities(self)
        self.facts = SqliteFacts(self)
        self.pages = SqlitePages(self)
        self.tombstones = SqliteTombstones(self)
        self.merges = SqliteMergeCandidates(self)
        self.items = SqliteItems(self)
        self.changes = SqliteChangeLog(self)
        self.counters = SqliteCounters(self)
        self.search = SqliteSearch(self)
        self.purges = SqlitePurges(self)
        self.transfer = SqliteTransfer(self)

    engine = "sqlite"

    def after_commit(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        self.db.after_commit(fn, *args, **kwargs)

    def native(self, engine: str) -> Any:
        """The ``apsw.Connection`` (see :meth:`memors_core.storage.api.Tx.native`)."""
        if engine != self.engine:
            raise PluginError(
                f"this store runs on the {self.engine} engine, not {engine}: "
                f"a kind's {engine} module cannot work on it"
            )
        return self.db.conn

    # --- the logical clocks ------------------------------------------------------

    def clock(self, name: str) -> int:
        """The newest number ``name``'s clock handed out (0 for none).

        SQLite gives a new row the highest row id plus one, so once purge
        erased the newest rows their numbers would come round again; the
        ``clock`` table keeps the high-water mark across purges."""
        if name in self._ticks:
            return self._ticks[name]
        return self.db.conn.execute(
            f"SELECT MAX(COALESCE((SELECT MAX(rowid) FROM {name}), 0), "
            "COALESCE((SELECT value FROM clock WHERE name = ?), 0))",
            (name,),
        ).fetchone()[0]

    def tick(self, name: str) -> int:
        """The next number of ``name``'s clock (inside a write transaction)."""
        value = self.clock(name) + 1
        self._ticks[name] = value
        return value

    def hold_clocks(self) -> None:
        """Record every clock's high-water mark (before purge erases rows)."""
        for name in CLOCKS:
            self.db.conn.execute(
                "INSERT INTO clock(name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = MAX(value, excluded.value)",
                (name, self.clock(name)),
            )

    def reset_clocks(self) -> None:
        """Forget counted clock values (a transaction began or rolled back)."""
        self._ticks.clear()
