"""Opening the SQLite store the one right way, and transactions on it."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from memors_core.errors import BadInput, MemorsError, StoreBusy
from memors_core.log import get_logger
from memors_core.settings import busy_timeout_ms, default_path
from memors_core.storage.sql.transactions import Session, Transactions

if TYPE_CHECKING:
    from memors_core.storage.api import Capabilities
    from memors_core.storage.sqlite.tx import SqliteTx
from memors_core.storage.sqlite.indexing import flush as flush_search
from memors_core.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

log = get_logger("memors.store")


#: What a brief read returns.
T = TypeVar("T")


class SqliteStore(Transactions):
    """One apsw connection to one database file.

    Writes go through :meth:`write` (``BEGIN IMMEDIATE``: the write lock is
    taken up front, so two writers queue on the busy timeout instead of
    failing on a lock upgrade); reads that need one snapshot use :meth:`read`.
    Nested calls become savepoints (:mod:`memors_core.storage.sql.transactions`
    keeps the books).
    """

    driver_error = apsw.Error

    def __init__(self, conn: apsw.Connection, path: Path, readonly: bool) -> None:
        self.conn = conn
        self.path = path
        self.location = str(path)
        self.readonly = readonly
        #: The repositories (:class:`memors_core.storage.api.Tx`) every
        #: transaction of this connection yields.
        # (imported here: opening a store file stays light for tools that only open one)
        from memors_core.storage.sqlite.tx import SqliteTx

        self.tx = SqliteTx(self)
        # The connection's one transaction at a time.
        self._the_session = Session(self.tx)
        # One connection, one transaction at a time: threads sharing this
        # store queue here for the whole of each outermost transaction.
        self._lock = threading.RLock()
        #: Why the last finishing step of a purge was left for later.
        self.purge_held: str | None = None
        #: Each namespace's vector codes, kept between searches
        #: (:class:`memors_core.storage.sqlite.vectors.CodeCache`).
        self.vector_codes: dict[str, Any] = {}

    @property
    def capabilities(self) -> Capabilities:
        from memors_core.storage.api import Capabilities

        return Capabilities(
            secure_erase=True, online_backup=True, immutable_read=True, vectors=True
        )

    # --- opening ---------------------------------------------------------

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, *, readonly: bool = False
    ) -> SqliteStore:
        p = Path(os.path.expanduser(path)) if path is not None else default_path()
        if p.is_dir():
            raise BadInput(f"{p} is a directory, not a database file")
        if readonly:
            flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        else:
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BadInput(f"cannot create the directory for {p}: {exc.strerror}") from None
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI
        try:
            conn = apsw.Connection(str(p), flags=flags)
            conn.setbusytimeout(busy_timeout_ms())
            store = cls(conn, p, readonly)
            store._configure()
        except apsw.NotADBError:
            raise BadInput(f"{p} is not a memors database (not SQLite)") from None
        except apsw.CantOpenError:
            raise BadInput(f"cannot open the database {p}") from None
        except apsw.BusyError:
            raise StoreBusy(f"the database {p} stayed locked by another process") from None
        except apsw.Error as exc:  # e.g. a device or a read-only file system
            raise BadInput(f"cannot use {p} as a database: {exc}") from None
        return store

    def _configure(self) -> None:
        c = self.conn
        c.execute("PRAGMA foreign_keys = ON")
        if self.readonly:
            c.execute("PRAGMA query_only = ON")
            version = self.scalar("PRAGMA user_version")
            if version > SCHEMA_VERSION:
                raise MemorsError(
                    f"{self.path} was written by a newer memors (schema {version}, "
                    f"this one knows {SCHEMA_VERSION})"
                )
            return
        mode = self.scalar("PRAGMA journal_mode = WAL")
        if mode.lower() != "wal":  # pragma: no cover - only on odd file systems
            raise MemorsError(f"cannot switch {self.path} to WAL mode (got {mode})")
        c.execute("PRAGMA synchronous = NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        version = self.scalar("PRAGMA user_version")
        if version > SCHEMA_VERSION:
            raise MemorsError(
                f"{self.path} was written by a newer memors (schema {version}, "
                f"this one knows {SCHEMA_VERSION})"
            )
        if version == SCHEMA_VERSION:
            return
        with self.write():
            # Another process may have migrated while we waited for the lock.
            version = self.scalar("PRAGMA user_version")
            for step in range(version, SCHEMA_VERSION):
                self.conn.execute(MIGRATIONS[step])
                self.conn.execute(f"PRAGMA user_version = {step + 1}")
            if version < SCHEMA_VERSION:
                self.after_commit(
                    log.info,
                    "schema_migrated",
                    path=str(self.path),
                    from_version=version,
                    to_version=SCHEMA_VERSION,
                )

    engine = "sqlite"

    def read_ahead(
        self, namespace: str, documents: Sequence[tuple[str | None, Sequence[str]]]
    ) -> None:
        """(SQLite indexes a passage as it is inserted: nothing to read ahead.)"""
        return None

    def migrate_kinds(self, migrations: dict[str, list[str]]) -> None:
        """Each kind's own state at its newest version (see
        :meth:`memors_core.storage.api.Storage.migrate_kinds`); a step is an
        SQL script."""
        from memors_core.storage.sql.kind_schema import migrate_kinds

        migrate_kinds(self, migrations, self.conn.execute, apsw.Error)

    def close(self) -> None:
        self.conn.close()

    # --- transactions ------------------------------------------------------

    @contextlib.contextmanager
    def write(self, *, namespace: str | None = None, role: str = "all") -> Iterator[SqliteTx]:
        """A write transaction (or a savepoint inside one); one file has one
        writer at a time, whatever the ``namespace`` and ``role``."""
        if self.readonly:
            raise MemorsError(f"the store {self.path} was opened read-only; this would change it")
        with self._lock:
            yield from self._write()

    def _write(self) -> Iterator[SqliteTx]:
        session = self._the_session
        if session.depth:
            yield from self._savepoint(session)
            return
        self._begin("BEGIN IMMEDIATE")
        yield from self._outermost_write(session)

    # (the transaction machine's driver calls)

    @property
    def _session(self) -> Session:
        return self._the_session

    def _send(self, session: Session, sql: str) -> None:
        self.conn.execute(sql)

    def _before_commit(self, session: Session) -> None:
        flush_search(self.conn)  # the changed rows into their search indexes

    def _commit(self, session: Session) -> None:
        try:
            self.conn.execute("COMMIT")
        except apsw.BusyError:
            with contextlib.suppress(apsw.Error):
                self.conn.execute("ROLLBACK")
            raise StoreBusy("the store stayed busy; nothing was stored, try again") from None

    @contextlib.contextmanager
    def read(self) -> Iterator[SqliteTx]:
        """A read transaction: one consistent snapshot for several queries,
        in which every write is refused (``query_only``)."""
        with self._lock:
            yield from self._read()

    def brief_read(self, read: Callable[[SqliteTx], T]) -> T:
        """(A statement is a call in this process: a read as any other.)"""
        with self.read() as tx:
            return read(tx)

    def _read(self) -> Iterator[SqliteTx]:
        session = self._the_session
        if session.depth:
            yield self.tx
            return
        self._begin("BEGIN")
        if not self.readonly:  # (a read-only store is query_only for good)
            self.conn.execute("PRAGMA query_only = ON")
        try:
            yield from self._outermost_read(session)
        finally:
            with contextlib.suppress(apsw.Error):
                self.conn.execute("COMMIT")
            if not self.readonly:
                self.conn.execute("PRAGMA query_only = OFF")

    def _begin(self, sql: str) -> None:
        # The busy handler waits up to MEMORS_BUSY_TIMEOUT_MS. SQLite answers
        # busy without calling it in a few cases (a snapshot that another
        # connection's commit made stale, say): only then, while the wait is
        # not over, it is tried again shortly. A busy answer after the whole
        # wait is final, never waited for twice.
        timeout_ms = busy_timeout_ms()
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            for attempt in range(3):
                try:
                    self.conn.execute(sql)
                    return
                except apsw.BusyError:
                    pause = 0.05 * (attempt + 1)
                    left = deadline - time.monotonic() - pause
                    if left <= 0:
                        break
                    time.sleep(pause)
                    self.conn.setbusytimeout(int(left * 1000))  # what is left of the wait
        finally:
            self.conn.setbusytimeout(timeout_ms)
        raise StoreBusy(
            f"the store {self.path} stayed locked by another writer; nothing was stored, try again"
        )

    # --- purge and backup (outside a transaction; their modules load on first use) ---

    @property
    def purge_steps(self) -> tuple[str, ...]:
        from memors_core.storage.sqlite.purge import STEPS

        return STEPS

    def erasing(self) -> contextlib.AbstractContextManager[SqliteTx]:
        from memors_core.storage.sqlite.purge import erasing

        return erasing(self)

    def run_purge_step(self, step: str, *, wait: bool) -> bool:
        from memors_core.storage.sqlite.purge import run_step

        self.purge_held = None
        with self._lock:  # VACUUM and the checkpoint need the connection to themselves
            return run_step(self, step, wait=wait)

    def database_failed(self, exc: BaseException) -> bool:
        return False  # a file has no connection to lose

    def purge_hold(self, target: str) -> str:
        from memors_core.storage.sqlite.purge import hold

        return hold(self, target)

    def backup(self, path: str) -> dict[str, Any]:
        from memors_core.storage.sqlite.transfer import backup

        return backup(self, path)

    # --- helpers -------------------------------------------------------------

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> apsw.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
        self.conn.executemany(sql, rows)

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Execute one statement; how many rows it changed."""
        self.conn.execute(sql, params)
        return self.conn.changes()

    def one(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> tuple[Any, ...] | None:
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    #: (apsw keeps each statement compiled in its cache: planned once already)
    all_planned = all

    def scalar(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]
