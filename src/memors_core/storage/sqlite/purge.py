"""Purge on SQLite: erasing rows, the audit record and the finishing steps.

Raw tables refuse DELETE on every connection; :func:`erasing` drops those
triggers inside its own write transaction (with ``secure_delete``, so freed
pages are zeroed) and creates them again before it commits. After the
commit the file may still hold the text: each FTS index keeps deleted terms
in its segments until it is merged, the free pages hold the old rows until
VACUUM, and the WAL holds the old pages until a truncating checkpoint. Those
are this engine's finishing steps (:data:`STEPS`), recorded in
``purge_pending`` and run one at a time by :func:`run_step`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import apsw

from memors_core.errors import StoreBusy
from memors_core.log import get_logger
from memors_core.storage.sql.purges import SqlPurges
from memors_core.storage.sql.tables import PURGEABLE
from memors_core.storage.sqlite.indexing import index_tables
from memors_core.storage.sqlite.schema import NAME_TABLES, no_delete_triggers

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import SqliteStore
    from memors_core.storage.sqlite.tx import SqliteTx

log = get_logger("memors")

#: The finishing steps after the erasure commits, in the order they run
#: ("fts": merging every search index; a purge recorded before schema 6
#: named each old index, "fts:passages_fts" …, and runs the same step).
STEPS = ("fts", "vacuum", "checkpoint")


#: Why a finishing step was left for later (:func:`hold`).
BUSY = "another process kept the store busy, so its file was not rewritten yet"
READER = "another process still reads old pages of the file"


def hold(store: SqliteStore, target: str) -> str:
    """What kept the purge of ``target`` from finishing, and what finishes it."""
    why = store.purge_held or READER
    return f"{why}: the next memors command finishes erasing them"


def _ids(values: Iterable[str]) -> str:
    return json.dumps(sorted(values))


@contextlib.contextmanager
def secure_delete(store: SqliteStore) -> Iterator[None]:
    store.conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        store.conn.execute("PRAGMA secure_delete = OFF")


@contextlib.contextmanager
def erasing(store: SqliteStore) -> Iterator[SqliteTx]:
    """A write transaction in which raw rows may be erased."""
    with secure_delete(store), store.write() as tx:
        tx.hold_clocks()  # the erased rows' numbers are never handed out again
        for table in (*PURGEABLE, *NAME_TABLES):
            store.conn.execute(no_delete_triggers(table)[0])
        yield tx
        for table in (*PURGEABLE, *NAME_TABLES):
            store.conn.execute(no_delete_triggers(table)[1])


class SqlitePurges(SqlPurges):
    """:class:`memors_core.storage.api.Purges` on SQLite."""

    legacy_step_prefix = "fts"

    def erase_index_of_entity(self, ident: str) -> None:
        pass  # (the entity's delete trigger takes it out of its search index)

    def finished(self) -> None:
        # Empty the WAL of this last write too (its frames hold no text).
        self.tx.after_commit(checkpoint, self.db, wait=False)


# --- the finishing steps (outside a transaction) ------------------------------------


def run_step(store: SqliteStore, step: str, *, wait: bool) -> bool:
    """Run one finishing step for the unfinished purges; False when a busy
    store leaves it for later. With ``wait``, a VACUUM that another process
    keeps from running raises :class:`StoreBusy`."""
    with secure_delete(store):
        if step == "fts" or step.startswith("fts:"):
            with store.write():
                # 'optimize' merges every segment into one, leaving deleted terms out.
                for fts in index_tables(store.conn):
                    store.conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
            return True
        if step == "vacuum":
            # VACUUM rewrites the file without its free pages.
            try:
                store.conn.execute("VACUUM")
            except apsw.BusyError:
                with store.read() as tx:
                    todo = sorted(p.purge for p in tx.purges.pending() if step in p.steps)
                if not todo:
                    return True  # another process finished it meanwhile
                if not wait:
                    store.purge_held = BUSY
                    return False
                audits = ", ".join(str(a) for a in todo)
                raise StoreBusy(
                    f"erased (audit record {audits}), but another process kept the store "
                    "busy, so its file was not rewritten yet: the next purge or any memors "
                    "command finishes it when the store is idle"
                ) from None
            return True
        if step == "checkpoint":
            # The checkpoint copies the pages back from the WAL and truncates
            # it: the WAL held the old pages.
            done = checkpoint(store, wait=wait)
            if not done:
                store.purge_held = READER
            return done
    raise ValueError(f"no purge step {step!r} on SQLite")


def checkpoint(store: SqliteStore, *, wait: bool) -> bool:
    """Empty the WAL into the file and truncate it, waiting (within the busy
    timeout, when ``wait``) for readers whose snapshots still need the old
    pages; False if one still did."""
    timeout = store.scalar("PRAGMA busy_timeout") / 1000 if wait else 0
    deadline = time.monotonic() + timeout
    while True:
        busy, _log, _done = store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        if not busy:
            return True
        if time.monotonic() >= deadline:
            # Erased in the database; the old pages leave the WAL at the next
            # checkpoint once that reader lets go (closing the store does one).
            log.warning("purge_checkpoint_incomplete", path=str(store.path))
            return False
        time.sleep(0.05)
