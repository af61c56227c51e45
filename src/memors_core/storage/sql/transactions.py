"""The transaction state machine both SQL engines share.

A store runs one transaction at a time per :class:`Session` (SQLite: the
store's one connection; PostgreSQL: each thread's). The bookkeeping is
the same on both and written here once:

- ``depth``: 0 outside a transaction, 1 in the outermost one, one more
  per savepoint inside it (a nested write is a savepoint; a read inside
  any transaction is part of it);
- the callbacks to run once the outermost write commits
  (:meth:`Transactions.after_commit`): all dropped when it rolls back,
  those of a savepoint dropped when the savepoint rolls back;
- whether a write transaction is open (``in_write``), or a read one
  (``reading``);
- the transaction object's counted clocks, forgotten when a transaction
  begins, rolls back or commits (:meth:`memors_core.storage.sql.tx.SqlTx.reset_clocks`).

An engine opens and ends its transactions (its driver calls, locks and
connection) and supplies the few statements in between:
:meth:`Transactions._send`, :meth:`Transactions._commit`,
:meth:`Transactions._rollback` and :meth:`Transactions._before_commit`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar


class Session:
    """One transaction's bookkeeping (see the module's docstring)."""

    __slots__ = ("after_commit", "depth", "in_write", "reading", "tx")

    def __init__(self, tx: Any) -> None:
        self.tx = tx
        self.depth = 0
        self.after_commit: list[tuple[Any, ...]] = []
        self.in_write = False
        self.reading = False


class Transactions:
    """The transaction state machine of a store (a mixin of both engines' stores).

    The engine says where its current :class:`Session` is (``_session``),
    sends one statement of it (:meth:`_send`), commits (:meth:`_commit`:
    a driver's failure there becomes the engine's one-line error), and may
    finish the transaction's work before it commits (:meth:`_before_commit`).
    It begins a transaction itself (its locks, its connection), then hands
    over to :meth:`_outermost_write` or :meth:`_outermost_read`.
    """

    #: The driver's error class: what a rollback may raise, and is ignored.
    driver_error: ClassVar[type[BaseException]]

    @property
    def _session(self) -> Session:
        raise NotImplementedError

    def _send(self, session: Session, sql: str) -> None:
        """Execute one statement of the session's transaction, as is."""
        raise NotImplementedError

    def _before_commit(self, session: Session) -> None:
        """The transaction's last work before its COMMIT (nothing by default)."""

    def _commit(self, session: Session) -> None:
        """COMMIT the session's transaction."""
        self._send(session, "COMMIT")

    def _rollback(self, session: Session) -> None:
        """ROLLBACK the session's transaction (a driver's failure is ignored)."""
        with contextlib.suppress(self.driver_error):
            self._send(session, "ROLLBACK")

    def _open_savepoint(self, session: Session, name: str) -> None:
        """Set the savepoint ``name``."""
        self._send(session, f"SAVEPOINT {name}")

    def _release_savepoint(self, session: Session, name: str) -> None:
        """End the savepoint ``name``, its work kept."""
        self._send(session, f"RELEASE SAVEPOINT {name}")

    def _roll_back_to(self, session: Session, name: str) -> None:
        """Undo the savepoint ``name`` and end it (a driver's failure is ignored)."""
        with contextlib.suppress(self.driver_error):
            self._send(session, f"ROLLBACK TO SAVEPOINT {name}")
            self._send(session, f"RELEASE SAVEPOINT {name}")

    # --- the machine ------------------------------------------------------------------

    @property
    def in_write(self) -> bool:
        """Whether a write transaction is open (on this thread's session)."""
        return self._session.in_write

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Call ``fn(*args, **kwargs)`` once the current write transaction
        commits (at once outside one); dropped if it rolls back. State-change
        log events go through here, so a log never reports what did not happen."""
        session = self._session
        if session.in_write:
            session.after_commit.append((fn, args, kwargs))
        else:
            fn(*args, **kwargs)

    def _outermost_write(self, session: Session) -> Iterator[Any]:
        """The outermost write transaction, begun by the engine: yields the
        transaction object, then commits (and runs the callbacks) or rolls back."""
        session.depth = 1
        session.after_commit = []
        session.in_write = True
        session.tx.reset_clocks()
        try:
            yield session.tx
            self._before_commit(session)
        except BaseException:
            self._end(session)
            self._rollback(session)
            raise
        pending = self._end(session)
        self._commit(session)
        for fn, args, kwargs in pending:
            fn(*args, **kwargs)

    def _end(self, session: Session) -> list[tuple[Any, ...]]:
        """The session's state back to no transaction; the callbacks it held."""
        session.depth = 0
        session.in_write = False
        session.tx.reset_clocks()
        pending, session.after_commit = session.after_commit, []
        return pending

    def _savepoint(
        self, session: Session, enter: Callable[[], Callable[[], None] | None] | None = None
    ) -> Iterator[Any]:
        """A savepoint inside the session's transaction. ``enter``: the
        engine's work once it is set (its locks), returning what undoes that
        work's bookkeeping if the savepoint rolls back."""
        session.depth += 1
        name = f"memors_{session.depth}"
        mark = len(session.after_commit)
        undo = None
        self._open_savepoint(session, name)
        try:
            if enter is not None:
                undo = enter()
            yield session.tx
        except BaseException:
            del session.after_commit[mark:]  # (the savepoint's work is undone)
            session.tx.reset_clocks()
            if undo is not None:
                undo()
            self._roll_back_to(session, name)
            raise
        else:
            self._release_savepoint(session, name)
        finally:
            session.depth -= 1

    def _outermost_read(self, session: Session) -> Iterator[Any]:
        """The outermost read transaction, begun by the engine (which ends it
        once this returns)."""
        session.depth = 1
        session.reading = True
        try:
            yield session.tx
        finally:
            session.depth = 0
            session.reading = False
