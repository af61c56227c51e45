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
from typing import TYPE_CHECKING, Any

import apsw

from memors_core.domain.dates import now
from memors_core.domain.rows import Passage, PendingPurge, PurgeRecord
from memors_core.errors import StoreBusy
from memors_core.log import get_logger
from memors_core.storage.sqlite.records import Repo
from memors_core.storage.sqlite.schema import PURGEABLE, no_delete_triggers

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import Store
    from memors_core.storage.sqlite.engine import SqliteTx

log = get_logger("memors")

FTS_TABLES = ("passages_fts", "pages_fts", "facts_fts", "entities_fts")
#: The finishing steps after the erasure commits, in the order they run.
STEPS = (*(f"fts:{t}" for t in FTS_TABLES), "vacuum", "checkpoint")


def _ids(values: Iterable[str]) -> str:
    return json.dumps(sorted(values))


@contextlib.contextmanager
def secure_delete(store: Store) -> Iterator[None]:
    store.conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        store.conn.execute("PRAGMA secure_delete = OFF")


@contextlib.contextmanager
def erasing(store: Store) -> Iterator[SqliteTx]:
    """A write transaction in which raw rows may be erased."""
    with secure_delete(store), store.write() as tx:
        tx.hold_clocks()  # the erased rows' numbers are never handed out again
        for table in PURGEABLE:
            store.conn.execute(no_delete_triggers(table)[0])
        yield tx
        for table in PURGEABLE:
            store.conn.execute(no_delete_triggers(table)[1])


class SqlitePurges(Repo):
    """:class:`memors_core.storage.api.Purges` on SQLite."""

    # --- what depends on what ----------------------------------------------------

    def passages_of(self, document: str) -> list[Passage]:
        ids = [
            r[0]
            for r in self.all(
                "SELECT id FROM passages WHERE document = ? ORDER BY rowid", (document,)
            )
        ]
        return self.tx.passages.by_ids(ids)

    def mentioned(self, passages: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.all(
                "SELECT entity FROM mentions WHERE passage IN (SELECT value FROM json_each(?))",
                (_ids(passages),),
            )
        }

    def pages_citing(self, passages: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.all(
                "SELECT page FROM page_sources WHERE passage IN (SELECT value FROM json_each(?))",
                (_ids(passages),),
            )
        }

    def later_pages(self, pages: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.all(
                "SELECT id FROM pages WHERE previous IN (SELECT value FROM json_each(?))",
                (_ids(pages),),
            )
        }

    def unnamed_entities(self, candidates: Iterable[str]) -> list[str]:
        return [
            r[0]
            for r in self.all(
                """SELECT e.id FROM entities e WHERE e.id IN (SELECT value FROM json_each(?))
                   AND NOT EXISTS (SELECT 1 FROM mentions WHERE entity = e.id)
                   AND NOT EXISTS (SELECT 1 FROM facts WHERE subject = e.id)
                   AND NOT EXISTS (SELECT 1 FROM aliases WHERE entity = e.id)
                   AND NOT EXISTS (SELECT 1 FROM pages WHERE entity = e.id)
                   AND NOT EXISTS (SELECT 1 FROM merge_candidates
                                   WHERE first = e.id OR second = e.id)
                   AND NOT EXISTS (SELECT 1 FROM entities o
                                   WHERE o.canonical = e.id AND o.id <> e.id)
                   AND e.canonical = e.id
                   ORDER BY e.rowid""",
                (_ids(candidates),),
            )
        ]

    # --- erasing (inside :func:`erasing`) ----------------------------------------

    def erase_page(self, ident: str) -> None:
        # The item that wrote the page no longer stands: without this its
        # unchanged fingerprint would keep compact from asking for a new page.
        self.run(
            "UPDATE work_items SET fingerprint = 'purged' WHERE status = 'done' "
            "AND id = (SELECT item FROM pages WHERE id = ?)",
            (ident,),
        )
        for sql in (
            "DELETE FROM page_sources WHERE page = ?",
            "DELETE FROM page_stale WHERE page = ?",
            "DELETE FROM tombstones WHERE target = ?",
            "DELETE FROM pages WHERE id = ?",
        ):
            self.run(sql, (ident,))

    def erase_passage(self, ident: str) -> None:
        for sql in (
            "DELETE FROM version_passages WHERE passage = ?",
            "DELETE FROM mentions WHERE passage = ?",
            "DELETE FROM tombstones WHERE target = ?",
            "DELETE FROM passages WHERE id = ?",
        ):
            self.run(sql, (ident,))

    def erase_document(self, ident: str) -> None:
        for sql in (
            "DELETE FROM version_passages WHERE document = ?",
            "DELETE FROM document_versions WHERE document = ?",
            "DELETE FROM tombstones WHERE target = ?",
            "DELETE FROM documents WHERE id = ?",
        ):
            self.run(sql, (ident,))

    def erase_fact(self, ident: str) -> None:
        self.run("DELETE FROM tombstones WHERE target = ?", (ident,))
        self.run("DELETE FROM facts WHERE id = ?", (ident,))

    def erase_entity(self, ident: str) -> None:
        # entities_fts has no delete trigger (entities were never deleted).
        self.run(
            "DELETE FROM entities_fts WHERE rowid = (SELECT rowid FROM entities WHERE id = ?)",
            (ident,),
        )
        self.run("DELETE FROM changes WHERE entity = ?", (ident,))
        self.run("DELETE FROM entities WHERE id = ?", (ident,))

    def redact_items(self, ident: str, replacement: Any) -> None:
        note = json.dumps(replacement)
        self.run(
            "UPDATE work_items SET payload = ?1, resolution = CASE WHEN resolution IS NULL "
            "THEN NULL ELSE ?1 END, "
            "fingerprint = CASE WHEN status = 'open' THEN 'purged' ELSE fingerprint END "
            "WHERE instr(payload, ?2) > 0 OR instr(coalesce(resolution, ''), ?2) > 0",
            (note, ident),
        )

    # --- the audit record and the steps left -------------------------------------

    def record(self, namespace: str, target: str, erased: list[str]) -> int:
        cur = self.db.conn.execute(
            "INSERT INTO purges(namespace, target, erased, created_at) VALUES (?, ?, ?, ?) "
            "RETURNING id",
            (namespace, target, json.dumps(erased), now()),
        )
        audit = cur.fetchall()[0][0]  # step RETURNING to the end, or COMMIT fails
        self.run(
            "INSERT INTO purge_pending(purge, steps) VALUES (?, ?)", (audit, json.dumps(STEPS))
        )
        return audit

    def last(self, namespace: str, target: str) -> PurgeRecord | None:
        row = self.one(
            "SELECT id, namespace, target, erased, created_at FROM purges "
            "WHERE namespace = ? AND target = ? ORDER BY id DESC LIMIT 1",
            (namespace, target),
        )
        if row is None:
            return None
        ident, ns, tgt, erased, created_at = row
        return PurgeRecord(ident, ns, tgt, json.loads(erased), created_at)

    def pending(self, namespace: str | None = None) -> list[PendingPurge]:
        return [
            PendingPurge(audit, target, json.loads(steps))
            for audit, target, steps in self.all(
                "SELECT p.id, p.target, q.steps FROM purge_pending q "
                "JOIN purges p ON p.id = q.purge "
                "WHERE ?1 IS NULL OR p.namespace = ?1 ORDER BY p.id",
                (namespace,),
            )
        ]

    def step_done(self, step: str, purges: Iterable[int]) -> None:
        finished = False
        wanted = set(purges)
        for p in self.pending():
            if p.purge in wanted and step in p.steps:
                left = [s for s in p.steps if s != step]
                if left:
                    self.run(
                        "UPDATE purge_pending SET steps = ? WHERE purge = ?",
                        (json.dumps(left), p.purge),
                    )
                else:
                    self.run("DELETE FROM purge_pending WHERE purge = ?", (p.purge,))
                    finished = True
        if finished:
            # Empty the WAL of this last write too (its frames hold no text).
            self.tx.after_commit(checkpoint, self.db, wait=False)


# --- the finishing steps (outside a transaction) ------------------------------------


def run_step(store: Store, step: str, *, wait: bool) -> bool:
    """Run one finishing step for the unfinished purges; False when a busy
    store leaves it for later. With ``wait``, a VACUUM that another process
    keeps from running raises :class:`StoreBusy`."""
    with secure_delete(store):
        if step.startswith("fts:"):
            fts = step[4:]
            with store.write():
                # 'optimize' merges every segment into one, leaving deleted terms out.
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
            return checkpoint(store, wait=wait)
    raise ValueError(f"no purge step {step!r} on SQLite")


def checkpoint(store: Store, *, wait: bool) -> bool:
    """Empty the WAL into the file and truncate it, waiting (within the busy
    timeout, when ``wait``) for readers whose snapshots still need the old
    pages; False if one still did."""
    timeout = store.conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000 if wait else 0
    deadline = time.monotonic() + timeout
    while True:
        busy, _log, _done = store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return True
        if time.monotonic() >= deadline:
            # Erased in the database; the old pages leave the WAL at the next
            # checkpoint once that reader lets go (closing the store does one).
            log.warning("purge_checkpoint_incomplete", path=str(store.path))
            return False
        time.sleep(0.05)
