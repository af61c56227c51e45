"""Purge: the one audited way to erase content for good.

Raw tables refuse DELETE on every connection; purge drops those triggers
inside its own write transaction, erases the rows (with SQLite's
secure_delete so freed pages are zeroed), creates the triggers again, and
commits the erasure together with an audit row naming what was erased
(never the content) and a ``purge_pending`` row listing the steps still to
run: merging each FTS index (deleted terms stay in its segments until
then), VACUUM (free pages) and a truncating WAL checkpoint (the WAL held the
old pages). Each step is idempotent and recorded when done, so a purge
killed at any point is finished by the next purge, by any command that
opens the store (:func:`finish_pending`), and reported by lint until then.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import apsw

from memors_core.domain.dates import now
from memors_core.domain.ids import address
from memors_core.domain.model import Purged
from memors_core.errors import BadInput, Interrupted, MemorsError, NotFound, PluginError, StoreBusy
from memors_core.plugins.kinds import KindContext
from memors_core.storage.sqlite.connection import Store
from memors_core.storage.sqlite.schema import PURGEABLE, no_delete_triggers

if TYPE_CHECKING:
    from memors_core.memory import Memory

from memors_core.log import get_logger

log = get_logger("memors")

FTS_TABLES = ("passages_fts", "pages_fts", "facts_fts", "entities_fts")
#: The erasure steps after the delete commits, in the order they run.
STEPS = (*(f"fts:{t}" for t in FTS_TABLES), "vacuum", "checkpoint")


def _reached(stage: str) -> None:
    """Fault injection for the reliability tests only: with
    ``MEMORS_TEST_PURGE_STOP=STAGE[@SIGNAL]`` the process sends itself that
    signal (SIGKILL by default) when purge reaches STAGE."""
    want = os.environ.get("MEMORS_TEST_PURGE_STOP")
    if want:
        name, _, sig = want.partition("@")
        if name == stage:
            os.kill(os.getpid(), getattr(signal, sig or "SIGKILL"))


@contextlib.contextmanager
def _secure_delete(store: Store) -> Iterator[None]:
    store.conn.execute("PRAGMA secure_delete = ON")
    try:
        yield
    finally:
        store.conn.execute("PRAGMA secure_delete = OFF")


def purge(memory: Memory, namespace: str, kind: str, ident: str) -> Purged:
    store = memory.store
    if kind not in ("document", "passage", "fact", "page"):
        raise BadInput(f"only documents, passages, facts and pages can be purged, not a {kind}")
    table = {"document": "documents", "passage": "passages", "fact": "facts", "page": "pages"}[kind]
    target = address(kind, ident)
    if memory.plugin_errors:
        # A kind that did not load cannot erase what it derived from the text.
        name, reason = sorted(memory.plugin_errors.items())[0]
        raise PluginError(
            f"plugin {name!r} failed to load ({reason}), so it cannot erase what it may hold "
            f"of the text; nothing was purged: fix it, or disable it "
            f"(MEMORS_DISABLE_PLUGINS={name}) to purge without it"
        )
    with _secure_delete(store):
        try:
            with store.write():
                if store.one(
                    f"SELECT 1 FROM {table} WHERE id = ? AND namespace = ?", (ident, namespace)
                ):
                    audit, erased = _erase_committed(memory, namespace, kind, ident)
                    earlier = False
                else:
                    # Erased by an earlier run (which may not have finished).
                    prior = store.one(
                        "SELECT id, erased FROM purges WHERE namespace = ? AND target = ? "
                        "ORDER BY id DESC LIMIT 1",
                        (namespace, target),
                    )
                    if prior is None:
                        raise NotFound(f"nothing at {target} in namespace {namespace!r}")
                    audit, erased, earlier = prior[0], json.loads(prior[1]), True
                _reached("erase")
        except KeyboardInterrupt:
            raise Interrupted(
                "interrupted; nothing was purged (the erasure is one transaction, rolled back)"
            ) from None
    try:
        _reached("committed")
        left = finish_pending(store, wait=True)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: {target} was erased (audit record {audit}), but the file may "
            f"still hold its text until the purge finishes: run `memors-mcp purge {target} "
            "--yes` again (any command that opens the store also finishes it)"
        ) from None
    finished = audit not in left
    log.info(
        "purged" if not earlier else "purge_finished",
        namespace=namespace,
        address=target,
        erased=len(erased),
        audit=audit,
        finished=finished,
    )
    return Purged(address=target, erased=erased, audit=audit, earlier=earlier, finished=finished)


def _erase_committed(memory: Memory, namespace: str, kind: str, ident: str) -> tuple[int, list]:
    """Inside the caller's write transaction: erase, audit, and record what is left to do."""
    store = memory.store
    conn = store.conn
    store.tx.hold_clocks()  # the erased rows' numbers are never handed out again
    for t in PURGEABLE:
        conn.execute(no_delete_triggers(t)[0])
    erased = _erase(memory, namespace, kind, ident)
    for t in PURGEABLE:
        conn.execute(no_delete_triggers(t)[1])
    # Erased rows leave no tombstones behind for incremental scans to
    # see: the next compact of this namespace rescans everything.
    conn.execute("DELETE FROM compact_marks WHERE namespace = ?", (namespace,))
    cur = conn.execute(
        "INSERT INTO purges(namespace, target, erased, created_at) VALUES (?, ?, ?, ?) "
        "RETURNING id",
        (namespace, address(kind, ident), json.dumps(erased), now()),
    )
    audit = cur.fetchall()[0][0]  # step RETURNING to the end, or COMMIT fails
    conn.execute(
        "INSERT INTO purge_pending(purge, steps) VALUES (?, ?)", (audit, json.dumps(list(STEPS)))
    )
    return audit, erased


def pending_purges(store: Store, namespace: str | None = None) -> list[tuple[int, str, list[str]]]:
    """The unfinished purges: (audit record, target address, steps left)."""
    rows = store.all(
        "SELECT p.id, p.target, q.steps FROM purge_pending q JOIN purges p ON p.id = q.purge "
        "WHERE ?1 IS NULL OR p.namespace = ?1 ORDER BY p.id",
        (namespace,),
    )
    return [(audit, target, json.loads(steps)) for audit, target, steps in rows]


def finish_pending(store: Store, *, wait: bool) -> set[int]:
    """Run every erasure step an unfinished purge still needs; returns the
    audit records still unfinished (empty when all is done).

    ``wait`` (purge itself) waits out other processes within the busy
    timeout and raises :class:`StoreBusy` when VACUUM cannot run; without
    it (opening the store) a busy store leaves the rest for later.
    """
    if not store.scalar("SELECT EXISTS (SELECT 1 FROM purge_pending)"):
        return set()
    with _secure_delete(store):
        for step in STEPS:
            todo = {audit for audit, _t, steps in pending_purges(store) if step in steps}
            if not todo:
                continue
            _reached(step)
            if step.startswith("fts:"):
                fts = step[4:]
                with store.write():
                    # 'optimize' merges every segment into one, leaving deleted terms out.
                    store.conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
                    _step_done(store, step)
            elif step == "vacuum":
                # VACUUM rewrites the file without its free pages.
                try:
                    store.conn.execute("VACUUM")
                except apsw.BusyError:
                    if not any(step in s for _a, _t, s in pending_purges(store)):
                        continue  # another process finished it meanwhile
                    if not wait:
                        return _unfinished(store)
                    audits = ", ".join(str(a) for a in sorted(todo))
                    raise StoreBusy(
                        f"erased (audit record {audits}), but another process kept the store "
                        "busy, so its file was not rewritten yet: the next purge or any memors "
                        "command finishes it when the store is idle"
                    ) from None
                with store.write():
                    _step_done(store, step)
            else:
                # The checkpoint copies the pages back from the WAL and truncates
                # it: the WAL held the old pages.
                if not _checkpoint(store, wait=wait):
                    return _unfinished(store)
                _reached("done")
                with store.write():
                    store.conn.execute(
                        "DELETE FROM purge_pending WHERE purge IN (SELECT value FROM json_each(?))",
                        (json.dumps(sorted(todo)),),
                    )
                _checkpoint(store, wait=False)  # (those frames hold no text)
    return _unfinished(store)


def _unfinished(store: Store) -> set[int]:
    return {audit for audit, _target, _steps in pending_purges(store)}


def _step_done(store: Store, step: str) -> None:
    for audit, _target, steps in pending_purges(store):
        if step in steps:
            store.conn.execute(
                "UPDATE purge_pending SET steps = ? WHERE purge = ?",
                (json.dumps([s for s in steps if s != step]), audit),
            )


def _checkpoint(store: Store, *, wait: bool) -> bool:
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


def _ids(values) -> str:
    return json.dumps(sorted(values))


def _erase(memory: Memory, namespace: str, kind: str, ident: str) -> list[str]:
    store = memory.store
    conn = store.conn
    erased: list[str] = []
    passages: list[str] = []
    if kind == "document":
        passages = [r[0] for r in store.all("SELECT id FROM passages WHERE document = ?", (ident,))]
    elif kind == "passage":
        passages = [ident]
    # Entities that may be left with nothing (erased below if so).
    entities = {
        r[0]
        for r in store.all(
            "SELECT entity FROM mentions WHERE passage IN (SELECT value FROM json_each(?))",
            (_ids(passages),),
        )
    }
    if kind == "fact":
        entities.update(r[0] for r in store.all("SELECT subject FROM facts WHERE id = ?", (ident,)))

    # Pages citing an erased passage, and every later version built on one of
    # them (its payload carried the earlier version's text).
    pages: set[str] = {ident} if kind == "page" else set()
    pages.update(
        r[0]
        for r in store.all(
            "SELECT page FROM page_sources WHERE passage IN (SELECT value FROM json_each(?))",
            (_ids(passages),),
        )
    )
    frontier = set(pages)
    while frontier:
        later = {
            r[0]
            for r in store.all(
                "SELECT id FROM pages WHERE previous IN (SELECT value FROM json_each(?))",
                (_ids(frontier),),
            )
        }
        frontier = later - pages
        pages |= frontier
    # Latest versions first, so no remaining page names an erased one as previous.
    for (page,) in store.all(
        "SELECT id FROM pages WHERE id IN (SELECT value FROM json_each(?)) "
        "ORDER BY version DESC, rowid DESC",
        (_ids(pages),),
    ):
        # The item that wrote the page no longer stands: without this its
        # unchanged fingerprint would keep compact from asking for a new page.
        conn.execute(
            "UPDATE work_items SET fingerprint = 'purged' WHERE status = 'done' "
            "AND id = (SELECT item FROM pages WHERE id = ?)",
            (page,),
        )
        conn.execute("DELETE FROM page_sources WHERE page = ?", (page,))
        conn.execute("DELETE FROM page_stale WHERE page = ?", (page,))
        conn.execute("DELETE FROM tombstones WHERE target = ?", (page,))
        conn.execute("DELETE FROM pages WHERE id = ?", (page,))
        _redact_items(store, page)
        erased.append(address("page", page))

    if passages:
        _erase_kind_state(memory, namespace, passages)
    for p in passages:
        conn.execute("DELETE FROM version_passages WHERE passage = ?", (p,))
        conn.execute("DELETE FROM mentions WHERE passage = ?", (p,))
        conn.execute("DELETE FROM tombstones WHERE target = ?", (p,))
        conn.execute("DELETE FROM passages WHERE id = ?", (p,))
        _redact_items(store, p)
        erased.append(address("passage", p))
    if kind == "document":
        conn.execute("DELETE FROM version_passages WHERE document = ?", (ident,))
        conn.execute("DELETE FROM document_versions WHERE document = ?", (ident,))
        conn.execute("DELETE FROM tombstones WHERE target = ?", (ident,))
        conn.execute("DELETE FROM documents WHERE id = ?", (ident,))
        erased.insert(0, address("document", ident))
    if kind == "fact":
        conn.execute("DELETE FROM tombstones WHERE target = ?", (ident,))
        conn.execute("DELETE FROM facts WHERE id = ?", (ident,))
        _redact_items(store, ident)
        erased.append(address("fact", ident))
    erased += _erase_orphan_entities(store, entities)
    return erased


def _erase_kind_state(memory: Memory, namespace: str, passages: list[str]) -> None:
    """Let every kind forget what it derived from the passages (an index, a cache)."""
    rows = memory.store.all(
        "SELECT rowid, id FROM passages WHERE id IN (SELECT value FROM json_each(?))",
        (_ids(passages),),
    )
    ctx = KindContext(memory.store, namespace, memory.ops, True)
    for kind in memory.kinds:
        try:
            kind.erase(ctx, [(rowid, ident) for rowid, ident in rows])
        except MemorsError:
            raise
        except Exception as exc:
            raise PluginError(
                f"kind {kind.name!r} (plugin {memory.kinds.owner(kind.name)!r}) could not erase "
                f"its state for the purged passages ({type(exc).__name__}: {exc}); nothing was "
                "purged"
            ) from exc


def _erase_orphan_entities(store, candidates: set[str]) -> list[str]:
    """Entities that nothing names any more (no mention, fact, alias, page,
    merge candidate or merged entity): their names go with the content."""
    erased = []
    for (entity,) in store.all(
        """SELECT e.id FROM entities e WHERE e.id IN (SELECT value FROM json_each(?))
           AND NOT EXISTS (SELECT 1 FROM mentions WHERE entity = e.id)
           AND NOT EXISTS (SELECT 1 FROM facts WHERE subject = e.id)
           AND NOT EXISTS (SELECT 1 FROM aliases WHERE entity = e.id)
           AND NOT EXISTS (SELECT 1 FROM pages WHERE entity = e.id)
           AND NOT EXISTS (SELECT 1 FROM merge_candidates WHERE first = e.id OR second = e.id)
           AND NOT EXISTS (SELECT 1 FROM entities o WHERE o.canonical = e.id AND o.id <> e.id)
           AND e.canonical = e.id
           ORDER BY e.rowid""",
        (_ids(candidates),),
    ):
        store.conn.execute(
            "DELETE FROM entities_fts WHERE rowid = (SELECT rowid FROM entities WHERE id = ?)",
            (entity,),
        )
        store.conn.execute("DELETE FROM changes WHERE entity = ?", (entity,))
        store.conn.execute("DELETE FROM entities WHERE id = ?", (entity,))
        _redact_items(store, entity)
        erased.append(address("entity", entity))
    return erased


def _redact_items(store, ident: str) -> None:
    """Work items copy text into payloads and resolutions: redact those. An
    open one gets a fingerprint no scan yields, so the next compact refreshes
    (or obsoletes) it and a submission of the redacted payload is refused."""
    note = json.dumps({"purged": "this item referred to content that was purged"})
    store.conn.execute(
        "UPDATE work_items SET payload = ?, resolution = CASE WHEN resolution IS NULL THEN NULL "
        "ELSE ? END, fingerprint = CASE WHEN status = 'open' THEN 'purged' ELSE fingerprint END "
        "WHERE instr(payload, ?) > 0 OR instr(coalesce(resolution, ''), ?) > 0",
        (note, note, ident, ident),
    )
