"""A lean read of a SQLite store, for ``memors-mcp search``: one apsw
connection, the same :class:`~memors_core.storage.sqlite.search.SqliteSearch`
every SQLite transaction uses, and nothing else of the storage layer.

It opens an existing file at the current schema only (anything else is left
to the full :class:`~memors_core.storage.sqlite.connection.SqliteStore`, which
migrates, reports and finishes purges), never creates one, and writes
nothing: ``PRAGMA query_only``. Searching needs no write: every write
transaction indexes its rows before it commits.
"""

from __future__ import annotations

import apsw

from memors_core.settings import busy_timeout_ms
from memors_core.storage.sql.repo import named_entities
from memors_core.storage.sqlite.search import SqliteSearch

TYPE_CHECKING = False  # (not typing's: this module is ``memors-mcp search``'s lean path)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


#: The schema a lean reader reads (``len(schema.MIGRATIONS)``, written out so
#: that ``search`` need not build the schema's text; a test keeps them equal).
SCHEMA_VERSION = 12
#: The state of the built-in kinds a lean reader expects (``kind_schema``: the
#: duplicate kind's index at the version of its migrations; a test keeps them
#: equal). A store with other kinds' state, or older or newer, is the full
#: path's to open: it migrates it, or refuses it in one line.
BUILT_IN_KIND_STATE = {"duplicate": 2}


class _Db:
    """What :class:`~memors_core.storage.sql.repo.Repo` asks of a store."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def one(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> tuple[Any, ...] | None:
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    #: (apsw keeps each statement compiled in its cache: planned once already)
    all_planned = all

    def scalar(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def run(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> int:  # pragma: no cover - never called
        raise apsw.ReadOnlyError("a lean reader does not write")


class Reader:
    """Searches of one store file, in one read transaction."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.db = _Db(conn)
        # (a Reader holds what a search asks of its transaction: ``db``)
        self.search = SqliteSearch(self)  # type: ignore[arg-type]

    def named(self, namespace: str, folded: list[str]) -> dict[str, str]:
        return named_entities(self.db.all, namespace, folded)

    def has_vectors(self, namespace: str) -> bool:
        """Whether a passage of ``namespace`` has a vector (then a search
        asked for no mode ranks by meaning too, which is the full path's)."""
        got = self.db.one("SELECT vectors FROM vector_stats WHERE namespace = ?", (namespace,))
        return bool(got and got[0] > 0)

    def any_unverified(self, pages: list[str]) -> bool:
        """Whether a page of ``pages`` (ids) was stored over its checks'
        flags (a search shows its unverified sentences: the full path's)."""
        return any(
            self.db.one("SELECT 1 FROM pages WHERE id = ? AND flags <> '{}'", (page,))
            for page in pages
        )

    def close(self) -> None:
        self.conn.close()


def open_reader(path: str) -> Reader | None:
    """A :class:`Reader` of the store file at ``path``, in a read
    transaction; None when it is not a plain case (no such file, another
    schema or kinds' state, not a database): the caller takes the full path,
    which says why."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return None
    try:
        conn.setbusytimeout(busy_timeout_ms())
        if _Db(conn).scalar("PRAGMA user_version") != SCHEMA_VERSION:
            conn.close()
            return None
        if dict(conn.execute("SELECT kind, version FROM kind_schema")) != BUILT_IN_KIND_STATE:
            conn.close()
            return None
        conn.execute("PRAGMA query_only = ON")
        conn.execute("BEGIN")  # one snapshot for the whole search
    except apsw.Error:
        conn.close()
        return None
    return Reader(conn)
