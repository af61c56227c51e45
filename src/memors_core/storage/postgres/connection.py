"""Opening a PostgreSQL store, and transactions on it.

One psycopg connection per store object, in autocommit mode with explicit
transactions. Every outermost write first takes transaction-scoped
advisory locks: a write that names its namespace takes the store's write
lock (:data:`WRITE_LOCK`) *shared* and its namespace's locks of its role
(:data:`ROLE_LOCKS`); any other write takes the store's lock exclusively.
So writers that forget, load in bulk or make a new version of a document
in one namespace take turns, as SQLite's ``BEGIN IMMEDIATE`` made them
(the code written for it reads, checks, then writes); writers that only
add (a document at a new uri, a fact: role ``add``) run together, waiting
for each other only where they claim one uri or make entities; a
compaction's scans take turns among themselves and run beside all of
them; writers of different namespaces never wait for each other, and a
store-wide write (an import, a purge, a migration) waits for all of them.
The numbers a namespace's writers draw (passages, tombstones, the change
log: sequences, which no one waits for) are not in commit order where
writers run together, so a scan reads its clocks once no content writer
of the namespace is under way (:meth:`PgStore.settled_row`): every number
at or below what it read is committed, and an incremental scan's
high-water mark never skips a row a slower writer commits later. Reads
are ``REPEATABLE READ READ ONLY`` (one snapshot; every write refused).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from memors_core.domain.dates import now
from memors_core.errors import BadInput, MemorsError, StoreBusy, StoreUnavailable
from memors_core.log import get_logger
from memors_core.settings import busy_timeout_ms
from memors_core.storage.postgres.addresses import one_line, safe_location
from memors_core.storage.postgres.addresses import password as _password
from memors_core.storage.postgres.dialect import render
from memors_core.storage.postgres.locks import (
    LOCK_SPACE,
    MIGRATE_LOCK,
    NAMESPACE_SPACE,
    ROLE_LOCKS,
    WRITE_LOCK,
    WRITING_SPACE,
    covers,
    namespace_key,
)
from memors_core.storage.postgres.schema import MIGRATIONS, SCHEMA_VERSION, STAGED_TERMS
from memors_core.storage.postgres.terms import STAGED, Ahead, TermCache
from memors_core.storage.sql.transactions import Session, Transactions

if TYPE_CHECKING:
    from memors_core.storage.api import Capabilities
    from memors_core.storage.postgres.tx import PgTx

log = get_logger("memors.store")
# The pool reports what it does about a lost server (discarding a closed
# connection, failing to reconnect) on the stdlib logger "psycopg". Where no
# one configured logging, Python would print those warnings bare on stderr
# beside memors' own one-line error; they go wherever the application sends
# its logs, and nowhere otherwise.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

#: What begins a read: one snapshot, every write refused (a refused write
#: rolls back to the savepoint, so the snapshot stays usable).
READ_BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SAVEPOINT memors_read"

#: Connections a store's pool holds at most (``MEMORS_PG_POOL_SIZE``).
DEFAULT_POOL_SIZE = 4
#: Seconds between two checks of the tables' statistics by one process.
STATISTICS_EVERY_S = 5.0


#: What a brief read returns.
T = TypeVar("T")


class _SharedTurn:
    """The turns of a process's writers that hold a database lock together:
    up to ``width`` threads at once (at least one), re-entrant in a thread
    (what runs after a commit may write again)."""

    def __init__(self, width: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, width))
        self._depth = threading.local()

    def acquire(self, timeout: float) -> bool:
        depth = getattr(self._depth, "n", 0)
        if not depth and not self._slots.acquire(timeout=timeout):
            return False
        self._depth.n = depth + 1
        return True

    def release(self) -> None:
        self._depth.n -= 1
        if not self._depth.n:
            self._slots.release()


class NoStoreYet(BadInput):
    """A read-only open found a database without the memors schema."""


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


class _NotBrief(Exception):
    """A brief read's second statement: its transaction ended with its first."""


class _Learned(BaseException):
    """A read of :meth:`PgStore.together` stopped at its first planned
    read, its statement learned (a BaseException: no read's own error
    handling takes it for a failure)."""


class _Held:
    """What a statement held back (:meth:`PgTx.later`) answers: nothing to read."""

    rowcount = -1

    def _refuse(self, *args: Any) -> Any:
        raise RuntimeError("a statement of a later() block was read: it has no answer yet")

    fetchone = fetchall = fetchmany = nextset = _refuse


_HELD = _Held()


class _Session(Session):
    """One thread's transaction: the shared bookkeeping, its connection and
    the namespaces it holds."""

    __slots__ = (
        "begin",
        "brief",
        "conn",
        "later",
        "queued",
        "recording",
        "replaying",
        "role",
        "scope",
        "snapshot",
    )

    def __init__(self, tx: PgTx) -> None:
        super().__init__(tx)
        self.conn: psycopg.Connection | None = None
        #: While :meth:`PgStore.together` learns its reads' statements: the
        #: planned reads asked for so far (each read stops at its first).
        self.recording: list[tuple[str, Any]] | None = None
        #: While it runs a read again: its first planned read and its rows.
        self.replaying: tuple[str, Any, list[tuple[Any, ...]]] | None = None
        #: A transaction's first statements (its BEGIN, a write's locks),
        #: not sent yet: they go with its first statement, in one message
        #: (:meth:`PgStore._begin_with`).
        self.begin: str | None = None
        #: Inside :meth:`PgTx.later` blocks (their depth): a write's
        #: statements are held back in ``queued``, rendered, and go with the
        #: transaction's next statement or its commit (:meth:`PgStore._begin_with`).
        self.later = 0
        self.queued: list[str] = []
        #: In a brief read (:meth:`PgStore.brief_read`): "waiting" until its
        #: statement went with the read's begin and end, then "sent".
        self.brief: str | None = None
        #: What the write transaction holds: None for the whole store, else
        #: the namespaces whose locks it took.
        self.scope: frozenset[str] | None = None
        #: The role of a write naming namespaces (``Storage.write``).
        self.role = "all"
        #: The read's snapshot as exported for work alongside it (one export a read).
        self.snapshot: str | None = None


#: A helper waits for a second connection of the pool this many seconds at
#: a time (one made new takes a few ms), until the asker claims the work.
SPARE_WAIT_S = 0.05


class _Alongside:
    """One :meth:`PgStore.alongside` work: run by a helper thread on a
    second connection, unless the thread that asked for its answer claims
    it first (no connection came free by then) and runs it itself: it is
    run exactly once."""

    def __init__(self, store: PgStore, snapshot: str, work: Callable[[Any], Any], tx: Any):
        self.store, self.snapshot, self.work, self.tx = store, snapshot, work, tx
        self.guard = threading.Lock()
        self.state = "waiting"  # then "claimed" (the asker runs it) or "running"
        self.done = threading.Event()
        self.outcome: tuple[bool, Any] = (False, None)

    def run(self) -> None:
        """The helper thread's part."""
        pool, conn = self.store.pool, None
        waited = 0.0
        while conn is None and self.state == "waiting" and waited < pool.timeout:
            try:
                conn = pool.getconn(SPARE_WAIT_S)
            except PoolTimeout:
                waited += SPARE_WAIT_S
        with self.guard:
            mine = conn is not None and self.state == "waiting"
            self.state = "running" if mine else "claimed"
        if not mine or conn is None:
            if conn is not None:
                pool.putconn(conn)
            return
        try:
            self.outcome = (True, self.store._alongside(conn, self.snapshot, self.work))
        except BaseException as exc:  # the asker's to raise
            self.outcome = (False, exc)
        finally:
            self.done.set()

    def answer(self) -> Any:
        """The asker's part: the work's answer (or its error)."""
        with self.guard:
            if self.state == "waiting":
                self.state = "claimed"
        if self.state == "claimed":
            return self.work(self.tx)
        self.done.wait()
        ok, value = self.outcome
        if not ok:
            raise value
        return value


class PgStore(Transactions):
    """A pool of psycopg connections to one PostgreSQL database holding a memors store.

    Each outermost transaction takes a connection from the pool for its
    duration, so threads sharing the store (the MCP HTTP server's) read at
    once; writers queue on the store's write lock in the database, across
    processes and hosts. The pool holds ``MEMORS_PG_POOL_SIZE`` connections
    at most (default 4), and one while idle. A connection found broken
    when a transaction starts is replaced before anything is sent (the one
    retry that is always safe); one lost inside a transaction rolls it back
    and says so in one line.
    """

    engine = "postgres"
    driver_error = psycopg.Error

    def __init__(self, pool: Any, url: str, readonly: bool, busy_ms: int = 15_000) -> None:
        self.pool = pool
        #: How long a writer waits for its turn (``MEMORS_BUSY_TIMEOUT_MS``).
        self.busy_ms = busy_ms
        self.url = url
        self.location = safe_location(url)
        self.path = self.location
        self.readonly = readonly
        self._local = threading.local()
        # Maintenance outside transactions (purge's VACUUM) runs one at a time.
        self._lock = threading.RLock()
        #: Why the last finishing step of a purge was left for later.
        self.purge_held: str | None = None
        # Each lock's writers of this process wait here for their turn, not
        # on a pooled connection each: while one waits for the database's
        # lock, the pool's other connections stay free for reads.
        # (Re-entrant: what runs after a commit may write again.)
        self._turns: dict[object, threading.RLock | _SharedTurn] = {
            WRITE_LOCK: threading.RLock(),
            MIGRATE_LOCK: threading.RLock(),
        }
        self._turns_guard = threading.Lock()
        #: The threads that run :meth:`alongside` work (made at its first use).
        self._helpers: ThreadPoolExecutor | None = None
        self._helpers_guard = threading.Lock()
        self._statistics_checked = float("-inf")
        #: The words this process has had stemmed, where it writes (a bulk
        #: insert's terms are counted here: ``storage/postgres/terms.py``).
        self.terms: TermCache | None = None
        #: Why this store keeps no vectors ("" when it does: pgvector is set up).
        self.vectors_missing = "not checked"

    @property
    def capabilities(self) -> Capabilities:
        from memors_core.storage.api import Capabilities

        return Capabilities(
            secure_erase=False,
            online_backup=True,
            shared=True,
            scans_beside_writes=True,
            vectors=not self.vectors_missing,
            vectors_missing=self.vectors_missing,
            # (a batch's flush writes a row per term: 2,000 documents at
            # once took a 100,000-passage load from 24 s to 19 s)
            bulk_documents=2000,
        )

    # --- opening ---------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, readonly: bool = False) -> PgStore:
        secret = _password(url)
        timeout_ms = busy_timeout_ms()

        # Waiting for another writer's lock is bounded like SQLite's busy
        # timeout. Sent as one message when the pool makes a connection.
        settings = f"SET lock_timeout = {timeout_ms}; SET client_min_messages = warning"
        if readonly:
            settings += "; SET default_transaction_read_only = on"

        def configure(conn: psycopg.Connection) -> None:
            conn.execute(settings)

        connect_args: dict[str, Any] = {
            "autocommit": True,
            "cursor_factory": psycopg.ClientCursor,
            # psycopg prepares a bound statement run five times on its own,
            # and at a rollback it deallocates every prepared statement of
            # the connection, memors' own (:meth:`PgStore.prepared`) too.
            "prepare_threshold": None,
            "connect_timeout": max(1, timeout_ms // 1000),
        }
        if not _names_itself(url):  # each host may name itself (pg_stat_activity, logs)
            connect_args["application_name"] = "memors"
        try:  # one direct attempt first: a bad address fails at once, in the server's words
            psycopg.connect(url, **connect_args).close()
        except psycopg.Error as exc:
            raise MemorsError(
                f"cannot connect to {safe_location(url)}: {one_line(exc, secret)}"
            ) from None
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=_pool_size(),
            kwargs=connect_args,
            configure=configure,
            open=False,
            name="memors",
            timeout=max(1.0, timeout_ms / 1000),
            reconnect_timeout=max(1.0, timeout_ms / 1000),
        )
        try:
            # The pool's first connection, made and configured, is its proof
            # the address works: a bad one fails here, in one line.
            pool.open(wait=True, timeout=max(1.0, timeout_ms / 1000))
        except (psycopg.Error, PoolTimeout) as exc:
            pool.close()
            raise MemorsError(
                f"cannot connect to {safe_location(url)}: {one_line(exc, secret)}"
            ) from None
        store = cls(pool, url, readonly, timeout_ms)
        try:
            if readonly:
                version = store._version()
                if version == 0:
                    raise NoStoreYet(
                        f"{store.location} holds no memors store yet "
                        "(any command that writes creates it)"
                    )
                store._check_version(version)
            else:
                store._migrate()
                if SCHEMA_VERSION >= STAGED_TERMS:  # (a test may write as an older memors did)
                    store.terms = TermCache()
                conn = store._getconn(None)
                try:
                    store._keep_statistics(conn)  # before this process plans a query
                finally:
                    store.pool.putconn(conn)
            from memors_core.storage.postgres.vectors import prepare

            store.vectors_missing = prepare(store, readonly, MIGRATE_LOCK)
        except BaseException:
            store.close()
            raise
        return store

    def _version(self) -> int:
        """The store's schema version; 0 where there is no store yet."""
        ask = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"
        if self._session.depth:  # in the migration's write, where an error would end it
            if not self.scalar("SELECT to_regclass('schema_migrations') IS NOT NULL"):
                return 0
            return int(self.scalar(ask))
        try:  # one statement where a store is (the common case), its read rolled back where not
            with self.read():
                version: int = self.scalar(ask)
        except pg_errors.UndefinedTable:
            return 0
        return version

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
            self._regrant()
            if version < SCHEMA_VERSION:
                self.after_commit(
                    log.info,
                    "schema_migrated",
                    path=self.location,
                    from_version=version,
                    to_version=SCHEMA_VERSION,
                )

    def read_ahead(
        self, namespace: str, documents: Sequence[tuple[str | None, Sequence[str]]]
    ) -> Ahead | None:
        """The search terms of the new documents' texts counted on a
        connection of the pool (their new words stemmed: one round trip),
        outside any transaction, the documents already there looked up first:
        :meth:`memors_core.storage.api.Storage.read_ahead`."""
        if self.terms is None:
            return None
        uris = [uri for uri, _ in documents if uri is not None]
        known = (
            self.brief_read(lambda tx: tx.documents.latest_by_uris(namespace, uris)) if uris else {}
        )
        texts = [t for uri, pieces in documents if uri is None or uri not in known for t in pieces]
        conn = self._getconn(None)
        try:
            return self.terms.ahead(conn, namespace, texts)
        finally:
            self.pool.putconn(conn)

    def migrate_kinds(self, migrations: dict[str, list[str]]) -> None:
        """Each kind's own state at its newest version (see
        :meth:`memors_core.storage.api.Storage.migrate_kinds`); a step is an
        SQL script for PostgreSQL."""
        from memors_core.storage.sql.kind_schema import migrate_kinds

        def run_step(script: str) -> None:
            with self.write():  # a savepoint: the failing step's transaction stays usable
                self.conn.execute(script)
                self._regrant()  # (the kind's new tables)

        migrate_kinds(self, migrations, run_step, psycopg.Error)

    def _regrant(self) -> None:
        """Grant every recorded application role (``application_roles``,
        which :func:`~memors_core.storage.postgres.privileges.grant_application_role`
        fills) what the grant's rules give it on the schema as it is now, in
        the migrating transaction: a migration that adds tables needs no
        grant run again by hand."""
        from memors_core.storage.postgres.privileges import regrant

        roles = regrant(self.conn)
        if roles:
            self.after_commit(
                log.info, "application_roles_granted", path=self.location, roles=roles
            )

    def close(self) -> None:
        with self._helpers_guard:
            helpers, self._helpers = self._helpers, None
        if helpers is not None:
            helpers.shutdown()
        self.pool.close()

    # --- the current thread's session ------------------------------------------

    @property
    def _session(self) -> _Session:
        session = getattr(self._local, "session", None)
        if session is None:
            from memors_core.storage.postgres.tx import PgTx

            session = self._local.session = _Session(PgTx(self))
        return session

    @property
    def tx(self) -> PgTx:
        """This thread's repositories (:class:`memors_core.storage.api.Tx`)."""
        tx: PgTx = self._session.tx
        return tx

    @property
    def conn(self) -> psycopg.Connection:
        """The connection of this thread's transaction (or maintenance step)."""
        session = self._session
        conn = session.conn
        if conn is None:
            raise RuntimeError("a PostgreSQL store's connection is used inside a transaction only")
        if session.brief == "sent":  # (its transaction ended with its one statement)
            raise _NotBrief
        if self._holding(session):  # used as is: what it holds back is sent first
            self._begin_with(session)
            conn = session.conn
            assert conn is not None
        return conn

    @contextlib.contextmanager
    def _checked_out(
        self,
        session: _Session,
        begin: str | Callable[[], str] = "SELECT 1",
        timeout: float | None = None,
        *,
        deferred: bool = False,
        taken: psycopg.Connection | None = None,
    ) -> Iterator[psycopg.Connection]:
        """A connection of the pool for one transaction, its first statements
        (``begin``, or what it returns when called: one round trip) sent;
        a connection that turns out lost there is replaced
        (:meth:`_first_round_trip`). ``timeout``: seconds to wait for a
        free connection (the pool's own by default). ``deferred`` (``begin``
        a string): nothing is sent here; ``begin`` goes with the
        transaction's first statement, in one message
        (:meth:`_begin_with`). ``taken``: a connection already taken from
        the pool, used instead (and given back the same way)."""
        if session.conn is not None:  # a maintenance step's own connection
            session.conn.execute(begin() if callable(begin) else begin)
            yield session.conn
            return
        session.conn = self._getconn(timeout) if taken is None else taken
        try:
            if deferred:
                assert isinstance(begin, str)
                session.begin = begin
            else:
                try:
                    self._first_round_trip(
                        session, lambda c: c.execute(begin() if callable(begin) else begin), timeout
                    )
                except BaseException:
                    if session.conn is not None:  # (None: it was lost, and given back)
                        with contextlib.suppress(psycopg.Error):
                            session.conn.execute("ROLLBACK")
                    raise
            yield session.conn
        finally:
            session.begin = session.snapshot = None
            session.queued, session.later = [], 0
            conn, session.conn = session.conn, None
            if conn is not None:  # (None: no connection came free to replace a lost one)
                self.pool.putconn(conn)

    def _getconn(self, timeout: float | None) -> psycopg.Connection:
        """A connection of the pool, waited for ``timeout`` seconds (the pool's own by default)."""
        try:
            conn: psycopg.Connection = self.pool.getconn(timeout)
        except PoolTimeout:
            self._reachable()
            raise StoreBusy(
                f"no connection to {self.location} came free in time; nothing was stored, try again"
            ) from None
        return conn

    def _begin_with(
        self,
        session: _Session,
        sql: str | None = None,
        params: Any = None,
        prepare: Sequence[tuple[str, str]] = (),
    ) -> psycopg.Cursor:
        """Send what the transaction holds back, with ``sql`` (its next
        statement, bound client-side) when there is one, as one message: one
        round trip where there were more. What it holds back: its first
        statements (``session.begin``: its BEGIN, a write's locks) until its
        first statement, and the writes of :meth:`PgTx.later` blocks
        (``session.queued``). The cursor is left on ``sql``'s (first)
        result. A connection found lost at the first message is replaced as
        :meth:`_checked_out`'s is (:meth:`_first_round_trip`): nothing
        committed on it, so nothing of the transaction stayed (a read
        changes nothing in any case). ``prepare``: the ``(name, PREPARE
        statement)`` of each statement ``sql`` executes, sent first, alone,
        on a connection that has not prepared it."""
        begin, session.begin = session.begin, None
        queued, session.queued = session.queued, []
        held = [begin] if begin is not None else []
        if queued:
            # (rendered already: a ``%`` of theirs is no placeholder of ``sql``'s)
            held += [q.replace("%", "%%") for q in queued] if params is not None else queued
        skip = (0 if begin is None else begin.count(";") + 1) + len(queued)
        text = "; ".join(held) if sql is None else "; ".join([*held, sql])
        if sql is not None and begin is not None and session.brief == "waiting":
            text, session.brief = f"{text}; COMMIT", "sent"  # (the read's one statement)

        def send(conn: psycopg.Connection) -> psycopg.Cursor:
            for name, statement in prepare:
                self._prepare(conn, name, statement)
            return conn.execute(text, params)

        if begin is not None:
            cur = self._first_round_trip(session, send, None)
        else:
            assert session.conn is not None
            cur = send(session.conn)
        if sql is not None:  # past the results of what was held back
            for _ in range(skip):
                cur.nextset()
        return cur

    @staticmethod
    def _holding(session: _Session) -> bool:
        """Whether the transaction holds back statements to send first."""
        return session.begin is not None or bool(session.queued)

    @staticmethod
    def _holds_back(session: _Session) -> bool:
        """Whether the statement being sent is a :meth:`PgTx.later` block's
        write, to hold back."""
        return bool(session.later) and PgStore._may_hold(session)

    @staticmethod
    def _may_hold(session: _Session) -> bool:
        """Whether a write's statement may be held back to go with the next
        (not in the driver's pipeline mode, where each goes on in it alone)."""
        conn = session.conn
        return session.in_write and conn is not None and not conn.pgconn.pipeline_status

    def _hold(
        self, session: _Session, sql: str, params: Any, prepare: Sequence[tuple[str, str]] = ()
    ) -> psycopg.Cursor:
        """``sql`` held back, rendered, until the transaction's next
        statement (a :meth:`PgTx.later` block's write); ``prepare`` as
        :meth:`_begin_with`'s, sent now."""
        conn = session.conn
        assert conn is not None
        for name, statement in prepare:
            self._prepare(conn, name, statement)
        # (the connections' cursors bind client-side: rendered as they would be sent)
        session.queued.append(psycopg.ClientCursor(conn).mogrify(sql, params))
        return cast(psycopg.Cursor, _HELD)

    def _first_round_trip(
        self,
        session: _Session,
        send: Callable[[psycopg.Connection], psycopg.Cursor],
        timeout: float | None,
    ) -> psycopg.Cursor:
        """``send``'s answer on ``session.conn``, a transaction's first round
        trip. A connection found lost there (the server restarted, a proxy
        dropped it) goes back to the pool, which drops it, and ``send`` is
        tried on the next one (waited for ``timeout`` seconds): nothing was
        sent that could have changed anything. Any other error, a lock
        timeout above all, is the answer, never tried again on another
        connection (it would wait as long again each time)."""
        for attempt in range(self.pool.max_size + 1):
            conn = session.conn
            assert conn is not None
            try:
                return send(conn)
            except psycopg.OperationalError:
                if not (conn.broken or conn.closed):
                    raise
                session.conn = None
                self.pool.putconn(conn)
                if attempt == self.pool.max_size:
                    self._reachable()
                    raise
                session.conn = self._getconn(timeout)
        raise AssertionError("unreachable")  # pragma: no cover

    def _reachable(self) -> None:
        """Raise :class:`StoreUnavailable` when the server does not take a
        new connection now (it is down, or refuses us): an outage, which a
        pool that stays empty would otherwise report as a busy store."""
        try:
            psycopg.connect(
                self.url, connect_timeout=max(1, busy_timeout_ms() // 1000), autocommit=True
            ).close()
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot reach the database {self.location} "
                f"({one_line(exc, _password(self.url))}); nothing was stored, try again when "
                "it is back"
            ) from None

    # --- transactions ------------------------------------------------------

    @contextlib.contextmanager
    def write(
        self, *, lock: int = WRITE_LOCK, namespace: str | None = None, role: str = "all"
    ) -> Iterator[PgTx]:
        """A write transaction (or a savepoint inside one). With ``namespace``
        it waits only for that namespace's writers of its ``role`` (and a
        store-wide write); the transaction must then change nothing of
        another namespace."""
        if role not in ROLE_LOCKS:
            raise ValueError(f"unknown role of a write: {role!r}")
        if self.readonly:
            raise MemorsError(
                f"the store {self.location} was opened read-only; this would change it"
            )
        if lock != WRITE_LOCK:
            namespace = None
        session = self._session
        if session.depth:
            yield from self._savepoint_in(session, namespace, role)
            return
        deadline = time.monotonic() + self.busy_ms / 1000

        turns = (
            [lock]
            if namespace is None
            else [(space, namespace, shared) for space, shared in ROLE_LOCKS[role]]
        )
        with self._translated(), contextlib.ExitStack() as held:
            for turn in turns:
                held.enter_context(self._turn(turn, deadline))
            left = max(0.001, deadline - time.monotonic())
            # The transaction and its locks first in it, waited for as long
            # as this writer has left, go with its first statement, in one
            # message: the server runs that statement the moment the lock
            # is granted, where the writer used to hold the lock a round
            # trip longer to learn it had it (under load, a millisecond or
            # more of every write's turn: docs/performance.md).
            begin = (
                "BEGIN ISOLATION LEVEL READ COMMITTED; "
                f"SET LOCAL lock_timeout = {max(1, int(left * 1000))}; "
                f"{_lock_sql(lock, namespace, role)}; "
                f"SET LOCAL lock_timeout = {int(self.busy_ms)}"
            )
            with self._checked_out(session, begin, left, deferred=True):
                session.scope = None if namespace is None else frozenset((namespace,))
                session.role = role
                try:
                    yield from self._outermost_write(session)
                finally:
                    session.scope = None
                    session.role = "all"

    @contextlib.contextmanager
    def _turn(self, key: object, deadline: float) -> Iterator[None]:
        """This process's turn among its writers for ``key`` (a lock, or a
        namespace's lock space and whether it is taken shared), waited for
        until ``deadline``: one of them at a time holds a pooled connection
        waiting for (then holding) the database's lock; of a lock taken
        shared, which its writers hold together, all but one of the pool's
        connections."""
        with self._turns_guard:
            turn = self._turns.get(key)
            if turn is None:
                shared = isinstance(key, tuple) and key[-1] is True
                turn = _SharedTurn(self.pool.max_size - 1) if shared else threading.RLock()
                self._turns[key] = turn
        if not turn.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise self._busy()
        try:
            yield
        finally:
            turn.release()

    def _savepoint_in(self, session: _Session, namespace: str | None, role: str) -> Iterator[PgTx]:
        scope = session.scope
        if namespace is not None and scope is not None and not covers(session.role, role):
            # (taking more of a namespace's locks inside a transaction could
            # wait for a scan waiting for this transaction's)
            raise ValueError(
                f"a savepoint of role {role!r} inside a write of role {session.role!r}: "
                "open the transaction with the role it needs"
            )

        def enter() -> Callable[[], None] | None:
            if scope is None or namespace is None or namespace in scope:
                return None
            # Another namespace than the transaction's: its lock too, until
            # the transaction ends. (A savepoint that names none is part of
            # its transaction's work, in its namespace.)
            self._send(session, _lock_sql(WRITE_LOCK, namespace, role, shared_held=True))
            session.scope = scope | {namespace}

            def undo() -> None:  # (a rolled-back savepoint's locks are released)
                session.scope = scope

            return undo

        # (a lock waited for in vain is the store's trouble at once, not
        # the savepoint's caller's: a compaction's kind reports its own)
        with self._translated():
            yield from self._savepoint(session, enter)

    # (the transaction machine's driver calls)

    def _send(self, session: Session, sql: str) -> None:
        if isinstance(session, _Session) and session.queued:  # (what it holds goes first)
            self._begin_with(session, sql)
            return
        self.conn.execute(sql)

    def _open_savepoint(self, session: Session, name: str) -> None:
        if isinstance(session, _Session) and self._may_hold(session):
            # (held back: it goes with the savepoint's first statement, or
            # with what follows it, where it was a round trip of its own;
            # a compaction's turn set one a kind)
            session.queued.append(f"SAVEPOINT {name}")
            return
        super()._open_savepoint(session, name)

    def _release_savepoint(self, session: Session, name: str) -> None:
        if isinstance(session, _Session) and self._may_hold(session):
            # (held back like a later block's write: it goes with the next
            # statement or the COMMIT, where it was a round trip of its own)
            session.queued.append(f"RELEASE SAVEPOINT {name}")
            return
        super()._release_savepoint(session, name)

    def _roll_back_to(self, session: Session, name: str) -> None:
        if isinstance(session, _Session):
            opened = f"SAVEPOINT {name}"
            if opened in session.queued:
                # Never sent: the server knows nothing of it, and what the
                # transaction held back before it stays held.
                at = len(session.queued) - 1 - session.queued[::-1].index(opened)
                del session.queued[at:]
                return
            # (held back inside the savepoint, undone with it: its entry
            # sent what was held before it)
            session.queued = []
        super()._roll_back_to(session, name)

    def _rollback(self, session: Session) -> None:
        if isinstance(session, _Session):
            session.queued = []  # (undone with the rest)
        if isinstance(session, _Session) and (session.begin is not None or session.conn is None):
            # (nothing was sent, or the connection was lost sending the
            # first message: nothing to roll back, no lock to take)
            session.begin = None
            return
        super()._rollback(session)

    def _commit(self, session: Session) -> None:
        if isinstance(session, _Session) and session.begin is not None and session.queued:
            # Writes held back and nothing sent: they go with the BEGIN,
            # alone, as a first message may be sent again on another
            # connection (:meth:`_first_round_trip`); one that commits
            # writes never is (it may have landed).
            self._begin_with(session)
        if isinstance(session, _Session) and self._holding(session):
            # A write that sent nothing still takes its turn (its locks),
            # begun and committed in one message; the writes it held back
            # (:meth:`PgTx.later`) go with its COMMIT.
            begun, wrote = session.begin is None, bool(session.queued)
            try:
                self._begin_with(session, "COMMIT")
            except psycopg.OperationalError as exc:
                if begun:
                    raise self._lost_commit(exc) from None
                raise
            except psycopg.Error:
                if session.conn is not None:  # (a statement held back failed: none stays)
                    with contextlib.suppress(psycopg.Error):
                        session.conn.execute("ROLLBACK")
                raise
            if (begun or wrote) and session.conn is not None:
                self._keep_statistics(session.conn)
            return
        conn = self.conn
        try:
            conn.execute("COMMIT")
        except psycopg.OperationalError as exc:
            raise self._lost_commit(exc) from None
        self._keep_statistics(conn)

    def _lost_commit(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"lost the connection to {self.location} while committing "
            f"({one_line(exc, _password(self.url))}): the write may or may not have been "
            "stored, whole or not at all; run it again to be sure (remembering the same "
            "text twice stores it once)"
        )

    def _keep_statistics(self, conn: psycopg.Connection) -> None:
        """ANALYZE the tables that changed much since their statistics were taken.

        The planner needs row counts to pick the index look-ups the shared SQL
        is written for (without them a keyed join over the namespace's
        passages becomes a scan per call). Autovacuum does this where it is
        on; where it is off, or has not caught up after a bulk load, this
        does, with autovacuum's own rule (50 rows plus 10% of the table
        changed). Checked after a write at most every few seconds per
        process; the statistics views lag by up to a second, which is fine."""
        now_s = time.monotonic()
        if now_s - self._statistics_checked < STATISTICS_EVERY_S:
            return
        self._statistics_checked = now_s
        try:
            stale = [r[0] for r in conn.execute(STALE_STATISTICS)]
            for table in stale:
                # (another writer analyzing it now is enough: never wait for it)
                verb = (
                    "VACUUM (SKIP_LOCKED, ANALYZE)"
                    if table in VACUUMED
                    else "ANALYZE (SKIP_LOCKED)"
                )
                conn.execute(sql.SQL(verb + " {}").format(sql.Identifier(table)))
        except psycopg.Error as exc:  # a role that may not analyze: the owner's turn
            log.debug("statistics_not_kept", path=self.location, error=one_line(exc))

    @contextlib.contextmanager
    def read(self) -> Iterator[PgTx]:
        """A read transaction: one snapshot, in which every write is refused."""
        session = self._session
        if session.depth:
            yield session.tx
            return
        with self._outermost(session, READ_BEGIN) as tx:
            yield tx

    @contextlib.contextmanager
    def _outermost(
        self, session: _Session, begin: str, taken: psycopg.Connection | None = None
    ) -> Iterator[PgTx]:
        # Begun with its first statement, in one message (PostgreSQL takes a
        # repeatable read's snapshot at its first statement in any case); a
        # read that sent none ends without a word. (A refused write rolls
        # back to the savepoint, so the snapshot stays usable.)
        with self._translated(), self._checked_out(session, begin, deferred=True, taken=taken):
            try:
                yield from self._outermost_read(session)
            finally:
                conn = session.conn
                if conn is not None and conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("COMMIT")

    def alongside(self, work: Callable[[PgTx], T]) -> Callable[[], T]:
        """``work(tx)`` on another connection of the pool, in a read that
        imports this one's snapshot (``pg_export_snapshot``), while this
        thread goes on; what it returns gives the answer
        (:meth:`memors_core.storage.api.Search.alongside`). Outside a read,
        in a brief one, or where the pool has no second connection free
        before the answer is asked for, ``work`` runs here, when asked."""
        session = self._session
        if not session.reading or session.brief or self.pool.max_size < 2:
            return functools.partial(work, session.tx)
        if session.snapshot is None:
            # (a snapshot is exported from the transaction, not its savepoint)
            cur = self.execute(
                "RELEASE SAVEPOINT memors_read; SELECT pg_export_snapshot(); SAVEPOINT memors_read"
            )
            cur.nextset()
            row = cur.fetchone()
            assert row is not None
            session.snapshot = row[0]
        job = _Alongside(self, session.snapshot, work, session.tx)
        with self._helpers_guard:
            if self._helpers is None:
                self._helpers = ThreadPoolExecutor(
                    self.pool.max_size, thread_name_prefix="memors-alongside"
                )
            self._helpers.submit(job.run)
        return job.answer

    def _alongside(self, conn: psycopg.Connection, snapshot: str, work: Callable[[PgTx], T]) -> T:
        """``work(tx)`` in a read of ``conn`` (taken from the pool) that
        sees the exported ``snapshot``."""
        session = self._session
        assert not session.depth
        begin = (
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
            f"SET TRANSACTION SNAPSHOT '{snapshot}'; SAVEPOINT memors_read"
        )
        with self._outermost(session, begin, conn) as tx:
            return work(tx)

    def brief_read(self, read: Callable[[PgTx], T]) -> T:
        """``read(tx)`` with the read's begin, its first statement and its
        end in one message (:meth:`memors_core.storage.api.Storage.brief_read`);
        a read that sends a second statement is run again in a whole read."""
        session = self._session
        if not session.depth:
            session.brief = "waiting"
            try:
                with self.read() as tx:
                    return read(tx)
            except _NotBrief:
                pass
            finally:
                session.brief = None
        with self.read() as tx:
            return read(tx)

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors a user can act on, as one line."""
        try:
            yield
        except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected):
            raise self._busy() from None
        except pg_errors.QueryCanceled as exc:  # a statement_timeout of the server or role
            raise MemorsError(
                f"the server cancelled a statement on {self.location} "
                f"({one_line(exc, _password(self.url))}); the transaction was rolled back, "
                "nothing of it was stored"
            ) from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"lost the connection to {self.location} ({one_line(exc, _password(self.url))}); "
                "the transaction was rolled back, nothing of it was stored"
            ) from None

    def _busy(self) -> StoreBusy:
        return StoreBusy(
            f"the store {self.location} stayed locked by another writer; "
            "nothing was stored, try again"
        )

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

        session = self._session
        if session.depth:
            raise MemorsError("a purge step runs outside a transaction")
        self.purge_held = None
        with self._lock, self._translated(), self._checked_out(session):
            return run_step(self, step, wait=wait)

    def database_failed(self, exc: BaseException) -> bool:
        # DB-API: "errors related to the database's operation, not under the
        # programmer's control" (a lost connection, a lock timeout).
        return isinstance(exc, psycopg.OperationalError)

    def purge_hold(self, target: str) -> str:
        from memors_core.storage.postgres.purge import hold

        return hold(self, target)

    def backup(self, path: str) -> dict[str, Any]:
        from memors_core.storage.postgres.transfer import backup

        return backup(self, path)

    # --- helpers: SQL in the shared repositories' spelling ---------------------

    def execute(self, sql: str, params: Any = ()) -> psycopg.Cursor:
        r = render(sql)
        session = self._session
        try:
            if self._holds_back(session):
                return self._hold(session, r.sql, r.params(params))
            if self._holding(session):  # with its BEGIN, or the writes held back
                return self._begin_with(session, r.sql, r.params(params))
            return self.conn.execute(r.sql, r.params(params))
        except pg_errors.ReadOnlySqlTransaction:
            if session.reading:
                self.conn.execute("ROLLBACK TO SAVEPOINT memors_read")
            raise MemorsError(
                f"the store {self.location} is read-only in this transaction; nothing was written"
            ) from None

    def prepared(self, sql: str, params: Any = ()) -> psycopg.Cursor:
        """:meth:`execute` of a query prepared on the connection: planned
        once per connection, where a statement sent as text is parsed and
        planned on every call (for a join, planning costs more than running
        it). The parameters are bound client-side into its ``EXECUTE``, so
        it still goes with a read's ``BEGIN`` in one message; the first use
        on a connection sends the ``PREPARE`` before it (one round trip, once
        per connection; a prepared statement outlives a rolled-back
        transaction, so it is counted prepared once that message returns)."""
        return self._executed([(sql, params)])

    def _executed(self, queries: Sequence[tuple[str, Any]]) -> psycopg.Cursor:
        """The ``EXECUTE``s of ``queries``, each prepared on the connection,
        sent as one message (with the transaction's deferred first
        statements when it has them); the cursor on the first's result."""
        runs: list[str] = []
        values: list[Any] = []
        preparing: list[tuple[str, str]] = []
        for query, params in queries:
            if query is _SETTLED:  # (settled_row's script: its statement written in)
                namespace, written = params
                name, statement = _preparation(written)
                runs.append(_settled_script(namespace, name))
                preparing.append((name, statement))
                continue
            r = render(query)
            name, statement = _preparation(r.sql)
            bound = r.params(params)
            runs.append(
                f"EXECUTE {name}({', '.join(['%s'] * len(bound))})" if bound else f"EXECUTE {name}"
            )
            values.extend(bound)
            preparing.append((name, statement))
        run = "; ".join(runs)
        session = self._session
        if self._holds_back(session):
            return self._hold(session, run, values, preparing)
        if self._holding(session):
            return self._begin_with(session, run, values, preparing)
        conn = self.conn
        for name, statement in preparing:
            self._prepare(conn, name, statement)
        return conn.execute(run, values)

    def all_planned(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """:meth:`all` of a query :meth:`prepared`: for the reads a view
        makes on every request whose planning costs more than their running
        (a namespace's home: the stale pages' count planned 1.1 ms, ran in
        0.2). Its parameters need types the server can tell from the text
        (``CAST(? AS text) IS NULL``, not ``? IS NULL``)."""
        session = self._session
        if session.recording is not None:
            session.recording.append((sql, params))
            raise _Learned
        if session.replaying is not None:
            query, values, rows = session.replaying
            session.replaying = None
            if (query, values) == (sql, params):
                return rows
        return self.prepared(sql, params).fetchall()

    def together(self, reads: Sequence[Callable[[], T]]) -> list[T]:
        """The answers of independent reads, the planned read each begins
        with sent in one message (:meth:`all_planned_many`): each read runs
        once to say its statement (stopped there), then again, handed its
        rows. A read that makes no planned read answers the first time; one
        that makes another statement first makes that one twice."""
        session = self._session
        if len(reads) < 2 or session.recording is not None or session.replaying is not None:
            return [read() for read in reads]
        asked: list[tuple[str, Any]] = []
        learned: list[tuple[str, Any] | None] = []
        out: list[Any] = []
        session.recording = asked
        try:
            for read in reads:
                try:
                    out.append(read())
                except _Learned:
                    learned.append(asked[-1])
                    out.append(None)
                else:
                    learned.append(None)
        finally:
            session.recording = None
        answers = iter(self.all_planned_many(asked))
        for n, first in enumerate(learned):
            if first is not None:
                session.replaying = (*first, next(answers))
                try:
                    out[n] = reads[n]()
                finally:
                    session.replaying = None
        return out

    def all_planned_many(self, queries: Sequence[tuple[str, Any]]) -> list[list[tuple[Any, ...]]]:
        """:meth:`all_planned` of several independent reads, sent as one
        message: one round trip where each was one."""
        if not queries:
            return []
        cur = self._executed(queries)
        out = []
        for n, (query, _) in enumerate(queries):
            if n:
                cur.nextset()
            if query is _SETTLED:
                out.append(_settled_rows(cur))
                cur.nextset()  # (past the savepoint's rollback and release)
                cur.nextset()
            else:
                out.append(cur.fetchall())
        return out

    @staticmethod
    def _prepare(conn: psycopg.Connection, name: str, statement: str) -> None:
        """``statement`` (``PREPARE name AS …``) sent on ``conn`` unless it was."""
        done: set[str] | None = getattr(conn, "_memors_prepared", None)
        if done is None:
            done = set()
            setattr(conn, "_memors_prepared", done)  # noqa: B010  (the connection's own, for its life)
        if name not in done:
            conn.execute(statement)
            if conn.pgconn.pipeline_status:
                # In a pipeline it runs once what was sent before it has:
                # known prepared only then (a statement before it that fails
                # aborts the rest, the PREPARE with it). Once a connection.
                with conn.pipeline() as pipeline:
                    pipeline.sync()
            done.add(name)

    def executemany(self, sql: str, rows: Iterable[Any]) -> None:
        r = render(sql)
        with self.conn.cursor() as cur:
            cur.executemany(r.sql, [r.params(p) for p in rows])

    def run(self, sql: str, params: Any = ()) -> int:
        """Execute one statement; how many rows it changed."""
        return self.execute(sql, params).rowcount

    def one(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        return self.execute(sql, params).fetchone()

    def settled_row(self, namespace: str, sql: str) -> tuple[Any, ...] | None:
        """The row of ``sql`` (one statement, no parameters) read when no
        content write of ``namespace`` is under way, in a scan's transaction
        (role ``"scan"``, which runs beside them): the lock its writers under
        way hold shared (:data:`WRITING_SPACE`) is taken in a savepoint, for
        that statement alone, then given back (a rolled-back savepoint
        releases the locks taken in it, and an error ends the transaction,
        its locks with it). A writer holds it until its rows are visible, so
        every number the clocks drew at or below what the statement reads is
        committed; a writer beginning meanwhile queues behind the request
        and waits for that statement at most. None in any other
        transaction: its own locks settle it."""
        session = self._session
        if session.role != "scan" or session.scope is None or namespace not in session.scope:
            return None
        if session.recording is not None:  # (:meth:`together` learning its reads)
            session.recording.append((_SETTLED, (namespace, sql)))
            raise _Learned
        if session.replaying is not None:
            query, values, rows = session.replaying
            session.replaying = None
            if query is _SETTLED and values == (namespace, sql):
                return rows[0] if rows else None
        # (the statement prepared once per connection: planning it was half
        # of the savepoint's round trip)
        name, statement = _preparation(sql)
        self._prepare(self.conn, name, statement)
        rows = _settled_rows(self.execute(_settled_script(namespace, name)))
        return rows[0] if rows else None

    def all(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return self.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.execute(sql, params).fetchone()
        return None if row is None else row[0]


#: The tables :meth:`PgStore._keep_statistics` vacuums as well: a bulk
#: load's staged terms are all dead rows once committed (vacuumed, their
#: pages serve the next batches), and the work queue's open items are
#: counted on every namespace home and metrics scrape, from its index alone
#: once its pages are marked all-visible (1.6 -> 0.6 ms for 6,800 open
#: items; its rows carry their payloads, ten times the index's pages).
VACUUMED = frozenset({STAGED, "work_items"})

#: The store's tables whose planner statistics are stale by autovacuum's
#: rule. Read from the statistics functions: ``pg_stat_user_tables`` groups
#: every table's index figures first, several times the cost.
STALE_STATISTICS = (
    "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
    "AND relkind IN ('r', 'm', 'p') "
    "AND pg_stat_get_mod_since_analyze(oid) > 50 + 0.1 * GREATEST(pg_stat_get_live_tuples(oid), 0)"
)


def _lock_sql(
    lock: int, namespace: str | None, role: str = "all", *, shared_held: bool = False
) -> str:
    """The statement taking a write's advisory locks: ``namespace``'s locks
    of ``role`` (:data:`ROLE_LOCKS`) under the store's lock shared, or the
    store's (``lock``) exclusively. ``shared_held``: the store's is held
    shared already."""
    if namespace is None:
        return f"SELECT pg_advisory_xact_lock({LOCK_SPACE}, {int(lock)})"
    key = namespace_key(namespace)
    ns = "; ".join(
        f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}({space}, {key})"
        for space, shared in ROLE_LOCKS[role]
    )
    if any(space == NAMESPACE_SPACE for space, _shared in ROLE_LOCKS[role]):
        ns += f"; SELECT pg_advisory_xact_lock_shared({WRITING_SPACE}, {key})"
    if shared_held:
        return ns
    return f"SELECT pg_advisory_xact_lock_shared({LOCK_SPACE}, {int(lock)}); {ns}"


_PLACEHOLDER = re.compile(r"%%|%s")


#: A read of :meth:`PgStore.together` that is :meth:`PgStore.settled_row`'s
#: script, not a planned statement (its parameters: the namespace and the
#: statement, written in).
_SETTLED = "settled_row"


def _settled_script(namespace: str, name: str) -> str:
    """The prepared statement ``name`` run while no content write of
    ``namespace`` is under way (:meth:`PgStore.settled_row`): five
    statements, its row the third's."""
    return (
        "SAVEPOINT memors_settled; "
        f"SELECT pg_advisory_xact_lock({WRITING_SPACE}, {namespace_key(namespace)}); "
        f"EXECUTE {name}; ROLLBACK TO SAVEPOINT memors_settled; "
        "RELEASE SAVEPOINT memors_settled"
    )


def _settled_rows(cur: psycopg.Cursor) -> list[tuple[Any, ...]]:
    """The statement's rows of :func:`_settled_script`'s results, the
    cursor on its first (the savepoint's, then the lock's, then these)."""
    cur.nextset()
    cur.nextset()
    return cur.fetchall()


@functools.lru_cache(maxsize=256)
def _preparation(rendered: str) -> tuple[str, str]:
    """The name and ``PREPARE`` statement of a rendered query (``%s``
    placeholders become ``$1``, ``$2``…, ``%%`` a ``%``); the name is the
    text's digest, so a changed text is prepared anew."""
    name = "memors_" + hashlib.sha1(rendered.encode("utf-8")).hexdigest()[:16]
    numbers = itertools.count(1)
    body = _PLACEHOLDER.sub(lambda m: "%" if m[0] == "%%" else f"${next(numbers)}", rendered)
    return name, f"PREPARE {name} AS {body}"


def _names_itself(url: str) -> bool:
    """Whether the address (``?application_name=…``) or ``$PGAPPNAME`` names
    the connections' application."""
    if os.environ.get("PGAPPNAME"):
        return True
    try:
        return bool(conninfo_to_dict(url).get("application_name"))
    except psycopg.Error:
        return False


def _pool_size() -> int:
    raw = os.environ.get("MEMORS_PG_POOL_SIZE")
    if raw is None:
        return DEFAULT_POOL_SIZE
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise BadInput(f"MEMORS_PG_POOL_SIZE must be a whole number of at least 1, got {raw!r}")
    return size
