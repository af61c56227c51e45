"""Opening an SQLite store read-only without changing a byte of the directory.

A read-only connection to a WAL database would still create the ``-wal``
and ``-shm`` files when they are missing (and cannot remove them again), so
when no other connection is open the file is read as immutable while
writers are locked out (SQLite's own lock bytes, held until the store is
closed: writers wait on their busy timeout meanwhile). A store that does
not exist yet — no file, or an empty one — is read as an empty store held
in memory: nothing is created.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import apsw

from memors_core.errors import BadInput, MemorsError
from memors_core.settings import busy_timeout_ms
from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

# SQLite's lock bytes on Unix (os_unix.c): every connection holds a read lock
# on the SHARED range while it is open in WAL mode.
_PENDING_BYTE = 0x40000000
_SHARED_FIRST = _PENDING_BYTE + 2
_SHARED_SIZE = 510
# POSIX locks belong to the process, not the thread: one quiet open at a time.
_quiet_lock = threading.Lock()


class ReadonlyStore(SqliteStore):
    """A read-only :class:`SqliteStore` that releases what it holds (the writers'
    lock of a quiet open) once its connection is closed."""

    def __init__(self, conn: apsw.Connection, path: Path, release: Callable[[], None]) -> None:
        super().__init__(conn, path, readonly=True)
        self._release = release

    def close(self) -> None:
        try:
            # Closing SQLite's descriptor may drop our POSIX lock too: close it first.
            super().close()
        finally:
            self._release()


def open_readonly(path: str | os.PathLike[str]) -> SqliteStore:
    """A read-only store on ``path``; writes are refused (``SQLITE_OPEN_READONLY``).

    Older and foreign files are refused with a one-line error; a store that
    does not exist yet is an empty one, in memory.
    """
    p = Path(os.path.expanduser(path))  # (Path.expanduser raises on ~nouser)
    if not p.exists():
        return empty_store(p)
    if p.is_dir():
        raise BadInput(f"{p} is a directory, not a database file")
    stack = contextlib.ExitStack()
    try:
        quiet = _sidecars_absent(p) and stack.enter_context(_writers_locked_out(p))
        store = _connect(p, immutable=quiet, release=stack.close)
    except BaseException:
        stack.close()
        raise
    try:
        exists = _checked(store)
    except BaseException:
        store.close()
        raise
    if exists:
        return store
    store.close()
    return empty_store(p)


def empty_store(path: Path) -> SqliteStore:
    """An empty store of the current schema, in memory and read-only; it
    stands for ``path``, where no store exists yet."""
    conn = apsw.Connection(":memory:")
    conn.execute("PRAGMA foreign_keys = ON")
    for step in range(SCHEMA_VERSION):
        conn.execute(MIGRATIONS[step])
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("PRAGMA query_only = ON")
    return ReadonlyStore(conn, path, release=lambda: None)


def _sidecars_absent(path: Path) -> bool:
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm", "-journal"))


@contextlib.contextmanager
def _writers_locked_out(path: Path) -> Iterator[bool]:
    """Hold SQLite's exclusive lock on ``path`` if nobody else has it open.

    Yields True when the lock is held: then no connection is open (an open
    WAL connection always holds a shared lock) and none can start (it waits
    on its busy timeout), so the file can be read as immutable.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not a POSIX system
        yield False
        return
    # Another quiet store of this process is open (it holds the lock until it
    # is closed): never wait for it, which could be forever in one thread.
    if not _quiet_lock.acquire(blocking=False):
        yield False
        return
    try:
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, _SHARED_SIZE, _SHARED_FIRST)
            except OSError:
                yield False
                return
            # A connection may have come and gone between the first look and the lock.
            yield _sidecars_absent(path)
        finally:
            os.close(fd)  # also releases the lock
    finally:
        _quiet_lock.release()


def _connect(path: Path, immutable: bool, release: Callable[[], None]) -> SqliteStore:
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    mode = "immutable=1" if immutable else "mode=ro"
    target = "file:" + quote(str(path.resolve())) + "?" + mode
    try:
        conn = apsw.Connection(target, flags=flags)
        # A reader too waits while a writer holds the file (a closing
        # connection's checkpoint, a migration), where it failed at once.
        conn.setbusytimeout(busy_timeout_ms())
    except apsw.CantOpenError:
        raise BadInput(f"cannot open the database {path} for reading") from None
    except apsw.Error as exc:
        raise BadInput(f"cannot read {path} as a database: {exc}") from None
    store = ReadonlyStore(conn, path, release)
    try:
        store._configure()
    except BaseException as exc:
        store.close()
        if isinstance(exc, apsw.NotADBError):
            raise BadInput(f"{path} is not a memors database (not SQLite)") from None
        if isinstance(exc, apsw.BusyError):
            raise MemorsError(f"the database {path} stayed locked by another process") from None
        if isinstance(exc, apsw.Error):  # e.g. a device, or a file SQLite cannot read
            raise BadInput(f"cannot read {path} as a database: {exc}") from None
        raise
    return store


def _checked(store: SqliteStore) -> bool:
    """Whether ``store`` holds a memors store of this schema (False: an
    empty file, a store that does not exist yet)."""
    version = store.scalar("PRAGMA user_version")
    if version == SCHEMA_VERSION:
        return True
    tables = store.scalar("SELECT COUNT(*) FROM sqlite_schema")
    if version == 0 and not tables:
        return False
    if version == 0:
        raise BadInput(f"{store.path} is an SQLite database, but not a memors store")
    raise BadInput(
        f"{store.path} uses an older memors schema ({version}, this one is {SCHEMA_VERSION}); "
        "any command that writes upgrades it, then run this command again"
    )
