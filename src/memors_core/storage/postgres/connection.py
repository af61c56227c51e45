"""Opening a PostgreSQL store, and transactions on it.

One psycopg connection per store object, in autocommit mode with explicit
transactions. Writes serialise on one transaction-scoped advisory lock
(:data:`WRITE_LOCK`), taken first in every outermost write: that is what
SQLite's ``BEGIN IMMEDIATE`` gave the code written for it (read, check,
write), across every process and host, and it puts the numbers writers
take from sequences and clocks in commit order — so an incremental scan's
high-water mark never skips a row a slower writer commits later. Reads
are ``REPEATABLE READ READ ONLY`` (one snapshot; every write refused).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from memors_core.domain.dates import now
from memors_core.errors import BadInput, MemorsError, PluginError, StoreBusy
from memors_core.log import get_logger
from memors_core.storage.postgres.dialect import render
from memors_core.storage.postgres.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from memors_core.storage.api import Capabilities
    from memors_core.storage.postgres.engine import PgTx

log = get_logger("memors.store")

#: Advisory lock keys (two 32-bit halves: "memo", then what for).
LOCK_SPACE = 0x6D656D6F
WRITE_LOCK = 1
MIGRATE_LOCK = 2

DEFAULT_BUSY_TIMEOUT_MS = 15_000


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def safe_location(url: str) -> str:
    """The address without its password, for messages and logs."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(an address that does not parse)"
    user = params.get("user")
    host = params.get("host") or "localhost"
    port = params.get("port")
    db = params.get("dbname") or ""
    who = f"{user}@" if user else ""
    where = f"{host}:{port}" if port else host
    return f"postgresql://{who}{where}/{db}"


def _busy_timeout_ms() -> int:
    raw = os.environ.get("MEMORS_BUSY_TIMEOUT_MS")
    if raw is None:
        return DEFAULT_BUSY_TIMEOUT_MS
    try:
        return max(0, int(raw))
    except ValueError:
        raise BadInput(f"MEMORS_BUSY_TIMEOUT_MS must be an integer, got {raw!r}") from None


def one_line(exc: BaseException, secret: str | None = None) -> str:
    """A driver error as one line, never holding the password."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if secret:
        text = text.replace(secret, "***")
    return text


class PgStore:
    """One psycopg connection to one PostgreSQL database holding a memors store."""

    engine = "postgres"

    def __init__(self, conn: psycopg.Connection, url: str, readonly: bool) -> None:
        self.conn = conn
        self.url = url
        self.location = safe_location(url)
        self.path = self.location
        self.readonly = readonly
        from memors_core.storage.postgres.engine import PgTx

        self.tx = PgTx(self)
        self._lock = threading.RLock()
        self._depth = 0
        self._after_commit: list[tuple] = []
        self._in_write = False
        self._reading = False

    @property
    def capabilities(self) -> Capabilities:
        from memors_core.storage.api import Capabilities

        return Capabilities(secure_erase=False, online_backup=True, shared=True)

    # --- opening ---------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, readonly: bool = False) -> PgStore:
        secret = _password(url)
        timeout_ms = _busy_timeout_ms()
        try:
            conn = psycopg.connect(
                url,
                autocommit=True,
                cursor_factory=psycopg.ClientCursor,
                connect_timeout=max(1, timeout_ms // 1000),
                application_name="memors",
            )
        except psycopg.Error as exc:
            raise MemorsError(
                f"cannot connect to {safe_location(url)}: {one_line(exc, secret)}"
            ) from None
        store = cls(conn, url, readonly)
        try:
            # Waiting for another writer's lock is bounded like SQLite's busy timeout.
            conn.execute(f"SET lock_timeout = {timeout_ms}")
            conn.execute("SET client_min_messages = warning")
            if readonly:
                conn.execute("SET default_transaction_read_only = on")
                store._check_version(store._version())
            else:
                store._migrate()
        except BaseException:
            conn.close()
            raise
        return store

    def _version(self) -> int:
        exists = self.scalar("SELECT to_regclass('schema_migrations') IS NOT NULL")
        if not exists:
            return 0
        return self.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise MemorsError(
                f"{self.location} was written by a newer memors (schema {version}, "
                f"this one knows {SCHEMA_VERSION})"
            )

    def _migrate(self) -> None:
        version = self._version()
        self._check_version(version)
        if version == SCHEMA_VERSION:
            return
        with self.write(lock=MIGRATE_LOCK):
            # Another process may have migrated while we waited for the lock.
            version = self._version()
            if version == 0:
                self.conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations("
                    'version INTEGER PRIMARY KEY, applied_at TEXT COLLATE "C" NOT NULL)'
                )
            for step in range(version, SCHEMA_VERSION):
                self.conn.execute(MIGRATIONS[step])
                self.conn.execute(
                    "INSERT INTO schema_migrations(version, applied_at) VALUES (%s, %s)",
                    (step + 1, now()),
                )
            if version < SCHEMA_VERSION:
                self.after_commit(
                    log.info,
                    "schema_migrated",
                    path=self.location,
                    from_version=version,
                    to_version=SCHEMA_VERSION,
                )

    def migrate_kinds(self, migrations: dict[str, list[str]]) -> None:
        """Each kind's own state at its newest version (see
        :meth:`memors_core.storage.api.Storage.migrate_kinds`); a step is an
        SQL script for PostgreSQL."""
        known = {kind: len(steps) for kind, steps in migrations.items()}
        if not self._kinds_behind(known):
            return
        with self.write():
            for kind, version in self._kinds_behind(known).items():
                steps = migrations[kind]
                for step in range(version, len(steps)):
                    try:
                        with self.write():  # a savepoint: a failing step leaves nothing
                            self.conn.execute(steps[step])
                    except psycopg.Error as exc:
                        raise PluginError(
                            f"kind {kind!r}: migration {step + 1} of its own state "
                            f"failed ({one_line(exc)}); nothing was migrated"
                        ) from None
                self.run(
                    "INSERT INTO kind_schema(kind, version, applied_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(kind) DO UPDATE SET version = excluded.version, "
                    "applied_at = excluded.applied_at",
                    (kind, len(steps), now()),
                )
                self.after_commit(
                    log.info,
                    "kind_schema_migrated",
                    path=self.location,
                    kind=kind,
                    from_version=version,
                    to_version=len(steps),
                )

    def _kinds_behind(self, known: dict[str, int]) -> dict[str, int]:
        recorded = dict(self.all("SELECT kind, version FROM kind_schema"))
        behind = {}
        for kind, version in known.items():
            have = recorded.get(kind, 0)
            if have > version:
                raise MemorsError(
                    f"{self.location}: the kind {kind!r} keeps state at version {have}, "
                    f"written by a newer release of it (this one knows {version}); upgrade it"
                )
            if have < version:
                behind[kind] = have
        return behind

    def close(self) -> None:
        self.conn.close()

    # --- transactions ------------------------------------------------------

    @contextlib.contextmanager
    def write(self, *, lock: int = WRITE_LOCK) -> Iterator[PgTx]:
        """A write transaction (or a savepoint inside one)."""
        if self.readonly:
            raise MemorsError(
                f"the store {self.location} was opened read-only; this would change it"
            )
        with self._lock, self._translated():
            yield from self._write(lock)

    def _write(self, lock: int) -> Iterator[PgTx]:
        if self._depth:
            self._depth += 1
            name = f"memors_{self._depth}"
            mark = len(self._after_commit)
            self.conn.execute(f"SAVEPOINT {name}")
            try:
                yield self.tx
            except BaseException:
                del self._after_commit[mark:]
                self.tx.reset_clocks()
                with contextlib.suppress(psycopg.Error):
                    self.conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    self.conn.execute(f"RELEASE SAVEPOINT {name}")
                raise
            else:
                self.conn.execute(f"RELEASE SAVEPOINT {name}")
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        self._depth = 1
        self._after_commit = []
        self._in_write = True
        self.tx.reset_clocks()
        try:
            try:
                self.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SPACE, lock))
            except pg_errors.LockNotAvailable:
                raise StoreBusy(
                    f"the store {self.location} stayed locked by another writer; "
                    "nothing was stored, try again"
                ) from None
            yield self.tx
        except BaseException:
            self._depth = 0
            self._in_write = False
            self._after_commit = []
            self.tx.reset_clocks()
            with contextlib.suppress(psycopg.Error):
                self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        self._in_write = False
        self.tx.reset_clocks()
        pending, self._after_commit = self._after_commit, []
        self.conn.execute("COMMIT")
        for fn, args, kwargs in pending:
            fn(*args, **kwargs)

    def after_commit(self, fn, /, *args, **kwargs) -> None:
        """Call ``fn(*args, **kwargs)`` once the current write transaction
        commits (at once outside one); dropped if it rolls back."""
        if self._in_write:
            self._after_commit.append((fn, args, kwargs))
        else:
            fn(*args, **kwargs)

    @contextlib.contextmanager
    def read(self) -> Iterator[PgTx]:
        """A read transaction: one snapshot, in which every write is refused."""
        with self._lock, self._translated():
            if self._depth:
                yield self.tx
                return
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            # A refused write rolls back to here, so the snapshot stays usable.
            self.conn.execute("SAVEPOINT memors_read")
            self._depth = 1
            self._reading = True
            try:
                yield self.tx
            finally:
                self._depth = 0
                self._reading = False
                with contextlib.suppress(psycopg.Error):
                    self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors a user can act on, as one line (outermost transaction only)."""
        if self._depth:
            yield
            return
        try:
            yield
        except pg_errors.ReadOnlySqlTransaction:
            raise MemorsError(
                f"the store {self.location} refused a write in a read transaction"
            ) from None
        except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
            raise StoreBusy(
                f"the store {self.location} stayed locked by another writer; "
                "nothing was stored, try again"
            ) from None
        except psycopg.OperationalError as exc:
            raise MemorsError(
                f"lost the connection to {self.location} ({one_line(exc, _password(self.url))}); "
                "the transaction was rolled back, nothing of it was stored"
            ) from None

    # --- purge and backup ------------------------------------------------------

    @property
    def purge_steps(self) -> tuple[str, ...]:
        from memors_core.storage.postgres.purge import STEPS

        return STEPS

    def erasing(self) -> contextlib.AbstractContextManager[PgTx]:
        from memors_core.storage.postgres.purge import erasing

        return erasing(self)

    def run_purge_step(self, step: str, *, wait: bool) -> bool:
        from memors_core.storage.postgres.purge import run_step

        with self._lock:
            return run_step(self, step, wait=wait)

    def backup(self, path: str) -> dict:
        from memors_core.storage.postgres.transfer import backup

        return backup(self, path)

    # --- helpers: SQL in the shared repositories' spelling ---------------------

    def execute(self, sql: str, params: Any = ()) -> psycopg.Cursor:
        r = render(sql)
        try:
            return self.conn.execute(r.sql, r.params(params))
        except pg_errors.ReadOnlySqlTransaction:
            if self._reading:
                self.conn.execute("ROLLBACK TO SAVEPOINT memors_read")
            raise MemorsError(
                f"the store {self.location} is read-only in this transaction; nothing was written"
            ) from None

    def executemany(self, sql: str, rows: Iterable[Any]) -> None:
        r = render(sql)
        with self.conn.cursor() as cur:
            cur.executemany(r.sql, [r.params(p) for p in rows])

    def run(self, sql: str, params: Any = ()) -> int:
        """Execute one statement; how many rows it changed."""
        return self.execute(sql, params).rowcount

    def one(self, sql: str, params: Any = ()) -> tuple | None:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Any = ()) -> list[tuple]:
        return self.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.execute(sql, params).fetchone()
        return None if row is None else row[0]


def _password(url: str) -> str | None:
    try:
        return psycopg.conninfo.conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        return None
