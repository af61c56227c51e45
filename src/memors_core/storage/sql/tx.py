"""The transaction object both SQL engines share: one instance per
connection, holding the repositories and counting the clocks."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar

from memors_core.errors import PluginError
from memors_core.log import get_logger
from memors_core.storage.sql.corrections import SqlCorrections
from memors_core.storage.sql.pages import SqlPages
from memors_core.storage.sql.queue import (
    SqlChangeLog,
    SqlCounters,
    SqlItems,
    SqlMergeCandidates,
)
from memors_core.storage.sql.records import (
    SqlDocuments,
    SqlEntities,
    SqlFacts,
    SqlNamespaces,
    SqlPassages,
    SqlTombstones,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from memors_core.storage import api

log = get_logger("memors.store")

#: The clocks: rows ordered by arrival whose numbers incremental scans keep.
CLOCKS = ("passages", "tombstones")


class SqlTx:
    """The repositories of one connection (:class:`memors_core.storage.api.Tx`).

    One object serves every transaction of the connection: a repository
    method runs in whatever transaction the connection is in. An engine
    subclasses it, builds its own repositories where they differ (search,
    vectors, purge and transfer always), and says how its clocks are read.
    """

    engine: str

    # The repositories, typed as the protocol says (so each class is checked
    # against its protocol where it is built): the shared ones are built
    # here, an engine replaces those it writes its own way and builds
    # search, vectors, purges and transfer.
    namespaces: api.Namespaces
    documents: api.Documents
    passages: api.Passages
    entities: api.Entities
    facts: api.Facts
    pages: api.Pages
    tombstones: api.Tombstones
    merges: api.MergeCandidates
    items: api.Items
    changes: api.ChangeLog
    counters: api.Counters
    corrections: api.Corrections
    search: api.Search
    vectors: api.Vectors
    purges: api.Purges
    transfer: api.Transfer

    #: SQL of one clock's high-water mark: the highest row number or the
    #: recorded mark, whichever is higher (parameter: the clock's name,
    #: ``{table}`` its table).
    clock_sql: ClassVar[str]
    #: SQL that records a clock's mark, never lowering it (name, value).
    hold_clock_sql: ClassVar[str]
    #: SQL of the change log's clock: the newest number its sequence gave.
    change_head_sql: ClassVar[str]
    #: How a unique key is matched against a list of keys (a JSON array
    #: parameter), where each is best looked up in the key's index.
    keys_in: ClassVar[str] = "IN (SELECT value FROM json_each(?))"

    def __init__(self, db: Any) -> None:
        self.db = db
        # Within one write transaction the next clock values are counted
        # here instead of being read per row (a bulk load stores thousands).
        self._ticks: dict[str, int] = {}
        self.namespaces = SqlNamespaces(self)
        self.documents = SqlDocuments(self)
        self.passages = SqlPassages(self)
        self.entities = SqlEntities(self)
        self.facts = SqlFacts(self)
        self.pages = SqlPages(self)
        self.tombstones = SqlTombstones(self)
        self.merges = SqlMergeCandidates(self)
        self.items = SqlItems(self)
        self.changes = SqlChangeLog(self)
        self.counters = SqlCounters(self)
        self.corrections = SqlCorrections(self)

    def after_commit(self, fn: Any, /, *args: Any, **kwargs: Any) -> None:
        self.db.after_commit(fn, *args, **kwargs)

    def pipelined(self) -> contextlib.AbstractContextManager[None]:
        """(Statements are calls in SQLite's process: nothing to gather.)"""
        return contextlib.nullcontext()

    def later(self) -> contextlib.AbstractContextManager[None]:
        """(SQLite runs each statement at once: nothing to hold back.)"""
        return contextlib.nullcontext()

    def together(self, *reads: Callable[[], Any]) -> list[Any]:
        """(SQLite's reads are calls in its process: each runs in turn; the
        PostgreSQL engine sends their statements together.)"""
        return [read() for read in reads]

    def native(self, engine: str) -> Any:
        """The engine's own connection, or with ``"sql"`` the SQL handle of
        either engine (see :meth:`memors_core.storage.api.Tx.native`)."""
        if engine == "sql":
            return SqlHandle(self.db, self.engine)
        if engine != self.engine:
            raise PluginError(
                f"this store runs on the {self.engine} engine, not {engine}: "
                f"a kind's {engine} module cannot work on it"
            )
        return self.db.conn

    # --- the logical clocks ------------------------------------------------------

    def clock(self, name: str) -> int:
        """The newest number ``name``'s clock handed out (0 for none).

        A new row gets the highest row number plus one, so once purge erased
        the newest rows their numbers would come round again; the ``clock``
        table keeps the high-water mark across purges."""
        if name in self._ticks:
            return self._ticks[name]
        value: int = self.db.scalar(self.clock_sql.format(table=name), (name,))
        return value

    def counted(self, name: str) -> bool:
        """Whether this transaction ticked ``name``'s clock (its value is then
        counted here, not read: :meth:`clock`)."""
        return name in self._ticks

    def tick(self, name: str) -> int:
        """The next number of ``name``'s clock (inside a write transaction)."""
        value = self.clock(name) + 1
        self._ticks[name] = value
        return value

    def reserve(self, name: str, count: int) -> None:
        """Say that ``count`` numbers of ``name``'s clock are about to be
        ticked (an engine that draws them from the database draws them in
        one round trip; here they are counted in memory)."""

    def hold_clocks(self) -> None:
        """Record every clock's high-water mark (before purge erases rows)."""
        for name in CLOCKS:
            self.db.run(self.hold_clock_sql, (name, self.clock(name)))

    def reset_clocks(self) -> None:
        """Forget counted clock values (a transaction began or rolled back)."""
        self._ticks.clear()


class SqlHandle:
    """``tx.native("sql")``: statements in SQLite's spelling on either SQL
    engine, inside the transaction they came from. The PostgreSQL engine
    renders each (its placeholders, ``json_each(?)``, ``INSERT OR IGNORE``,
    ``CROSS JOIN … ON``: :mod:`memors_core.storage.postgres.dialect`), so a
    kind writes the statements its engines share once; ``conn`` is the
    engine's own connection, for what only that engine does."""

    __slots__ = ("all", "conn", "engine", "execute", "executemany", "one", "scalar")

    def __init__(self, db: Any, engine: str) -> None:
        #: The store's engine (``"sqlite"``, ``"postgres"``).
        self.engine = engine
        self.conn = db.conn
        self.execute = db.execute
        self.executemany = db.executemany
        self.one = db.one
        self.all = db.all
        self.scalar = db.scalar
