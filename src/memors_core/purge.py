"""Purge: the one audited way to erase content for good.

Raw tables refuse DELETE unless the purge gate is open; purge opens it
inside its own transaction, erases the rows (with SQLite's secure_delete so
freed pages are zeroed), leaves an audit row naming what was erased (never
the content), then rebuilds the FTS indexes and vacuums so no copy of the
text survives in the file.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import apsw

from .errors import BadInput, MemorsError, NotFound, PluginError, StoreBusy
from .ids import address
from .kinds import KindContext
from .model import Purged
from .store import now

if TYPE_CHECKING:
    from .memory import Memory

from .log import get_logger

log = get_logger("memors")


def purge(memory: Memory, namespace: str, kind: str, ident: str) -> Purged:
    store = memory.store
    conn = store.conn
    if kind not in ("document", "passage", "fact", "page"):
        raise BadInput(f"only documents, passages, facts and pages can be purged, not a {kind}")
    table = {"document": "documents", "passage": "passages", "fact": "facts", "page": "pages"}[kind]
    conn.execute("PRAGMA secure_delete = ON")
    try:
        with store.write():
            if not store.one(
                f"SELECT 1 FROM {table} WHERE id = ? AND namespace = ?", (ident, namespace)
            ):
                raise NotFound(f"nothing at {address(kind, ident)} in namespace {namespace!r}")
            conn.execute("INSERT INTO purge_gate(opened_at) VALUES (?)", (now(),))
            erased = _erase(memory, namespace, kind, ident)
            conn.execute("DELETE FROM purge_gate")
            # Erased rows leave no tombstones behind for incremental scans to
            # see: the next compact of this namespace rescans everything.
            conn.execute("DELETE FROM compact_marks WHERE namespace = ?", (namespace,))
            # SQLite hands the row ids above the highest that remains out
            # again: every namespace's marks come down to it, so that the
            # rows that get them count as new.
            for column, rows in (("passage_seq", "passages"), ("tombstone_seq", "tombstones")):
                top = store.scalar(f"SELECT COALESCE(MAX(rowid), 0) FROM {rows}")
                conn.execute(
                    f"UPDATE compact_marks SET {column} = ? WHERE {column} > ?", (top, top)
                )
            cur = conn.execute(
                "INSERT INTO purges(namespace, target, erased, created_at) VALUES (?, ?, ?, ?) "
                "RETURNING id",
                (namespace, address(kind, ident), json.dumps(erased), now()),
            )
            audit = cur.fetchall()[0][0]  # step RETURNING to the end, or COMMIT fails
        # FTS5 keeps deleted terms in its segments until they are merged:
        # 'optimize' merges every segment into one, leaving them out.
        for fts in ("passages_fts", "pages_fts", "facts_fts", "entities_fts"):
            with store.write():
                conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
        # VACUUM rewrites the file without free pages; the checkpoint copies it
        # back from the WAL and truncates the WAL, which held the old pages.
        try:
            conn.execute("VACUUM")
        except apsw.BusyError:
            raise StoreBusy(
                f"{address(kind, ident)} was erased (audit record {audit}), but another process "
                "kept the store busy, so its file was not rewritten: freed pages may still hold "
                "the text until the next purge or `VACUUM`; try again when it is idle"
            ) from None
        _checkpoint(store)
    finally:
        conn.execute("PRAGMA secure_delete = OFF")
    log.info(
        "purged", namespace=namespace, address=address(kind, ident), erased=len(erased), audit=audit
    )
    return Purged(address=address(kind, ident), erased=erased, audit=audit)


def _checkpoint(store) -> None:
    """Empty the WAL into the file and truncate it, waiting (within the busy
    timeout) for readers whose snapshots still need the old pages."""
    timeout = store.conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
    deadline = time.monotonic() + timeout
    while True:
        busy, _log, _done = store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return
        if time.monotonic() >= deadline:
            # Erased in the database; the old pages leave the WAL at the next
            # checkpoint once that reader lets go (closing the store does one).
            log.warning("purge_checkpoint_incomplete", path=str(store.path))
            return
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
