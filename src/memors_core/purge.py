"""Purge: the one audited way to erase content for good.

Raw tables refuse DELETE unless the purge gate is open; purge opens it
inside its own transaction, erases the rows (with SQLite's secure_delete so
freed pages are zeroed), leaves an audit row naming what was erased (never
the content), then rebuilds the FTS indexes and vacuums so no copy of the
text survives in the file.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .errors import BadInput, NotFound
from .ids import address
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
            erased = _erase(store, kind, ident)
            conn.execute("DELETE FROM purge_gate")
            # Erased rows leave no tombstones behind for incremental scans to
            # see: the next compact of this namespace rescans everything.
            conn.execute("DELETE FROM compact_marks WHERE namespace = ?", (namespace,))
            cur = conn.execute(
                "INSERT INTO purges(namespace, target, erased, created_at) VALUES (?, ?, ?, ?) "
                "RETURNING id",
                (namespace, address(kind, ident), json.dumps(erased), now()),
            )
            audit = cur.fetchall()[0][0]  # step RETURNING to the end, or COMMIT fails
        for fts in ("passages_fts", "pages_fts", "facts_fts", "entities_fts"):
            with store.write():
                conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.execute("PRAGMA secure_delete = OFF")
    log.info(
        "purged", namespace=namespace, address=address(kind, ident), erased=len(erased), audit=audit
    )
    return Purged(address=address(kind, ident), erased=erased, audit=audit)


def _erase(store, kind: str, ident: str) -> list[str]:
    conn = store.conn
    erased: list[str] = []
    passages: list[str] = []
    if kind == "document":
        passages = [r[0] for r in store.all("SELECT id FROM passages WHERE document = ?", (ident,))]
    elif kind == "passage":
        passages = [ident]
    pages: set[str] = set()
    if kind == "page":
        pages.add(ident)
    for p in passages:
        pages.update(
            r[0] for r in store.all("SELECT page FROM page_sources WHERE passage = ?", (p,))
        )
    for page in sorted(pages):
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
    return erased


def _redact_items(store, ident: str) -> None:
    """Work items copy text into payloads and resolutions: redact those."""
    note = json.dumps({"purged": "this item referred to content that was purged"})
    store.conn.execute(
        "UPDATE work_items SET payload = ?, resolution = CASE WHEN resolution IS NULL THEN NULL "
        "ELSE ? END WHERE instr(payload, ?) > 0 OR instr(coalesce(resolution, ''), ?) > 0",
        (note, note, ident, ident),
    )
