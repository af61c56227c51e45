"""Purge's rows in the shared SQL: what depends on what, erasing, the audit
record and its finishing steps (the engines' own parts are in their purge modules)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address
from memors_core.domain.purging import check_audit, read_steps
from memors_core.domain.rows import BadPendingPurge, Passage, PendingPurge, PurgeRecord
from memors_core.errors import BadAddress
from memors_core.storage.sql.repo import Repo


def _ids(values: Iterable[str]) -> str:
    return json.dumps(sorted(values))


def _address_or_none(value: object) -> str | None:
    try:
        parse_address(value)
    except BadAddress:
        return None
    return str(value)


class SqlPurges(Repo):
    """:class:`memors_core.storage.api.Purges` in the shared SQL; an engine adds
    how its search index of entities loses one and what follows a finished purge."""

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
        passages = sorted(set(passages))
        if not passages:
            return set()
        pages = {
            r[0]
            for r in self.all(
                "SELECT page FROM page_sources WHERE passage IN (SELECT value FROM json_each(?))",
                (_ids(passages),),
            )
        }
        # A sentence's sources are among its page's cited passages; a page
        # whose sentence cites one anyway goes with it all the same.
        addresses = json.dumps(sorted(address("passage", p) for p in passages))
        pages |= {
            r[0]
            for r in self.all(
                "SELECT DISTINCT s.page FROM page_sentences s, json_each(s.sources) j "
                "WHERE j.value IN (SELECT value FROM json_each(?))",
                (addresses,),
            )
        }
        return pages

    def pages_built_with(self, facts: Iterable[str]) -> set[str]:
        return {
            r[0]
            for r in self.all(
                "SELECT page FROM page_facts WHERE fact IN (SELECT value FROM json_each(?))",
                (_ids(sorted(set(facts))),),
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
        for table, column in (
            ("page_sources", "page"),
            ("page_sentences", "page"),
            ("page_facts", "page"),
            ("page_stale", "page"),
            ("tombstones", "target"),
            ("pages", "id"),
        ):
            self.erase_rows(table, column, ident)

    def erase_passage(self, ident: str) -> None:
        self.erase_passages([ident])

    def erase_passages(self, idents: Sequence[str]) -> None:
        # Table by table, not passage by passage: a document of thousands of
        # passages is a few statements, not thousands of round trips.
        for table, column in (
            ("version_passages", "passage"),
            ("mentions", "passage"),
            ("passage_profiles", "passage"),
            ("tombstones", "target"),
            ("passages", "id"),
        ):
            self.erase_rows_many(table, column, idents)

    def erase_document(self, ident: str) -> None:
        for table, column in (
            ("version_passages", "document"),
            ("document_versions", "document"),
            ("tombstones", "target"),
            ("documents", "id"),
        ):
            self.erase_rows(table, column, ident)

    def erase_fact(self, ident: str) -> None:
        self.erase_rows("tombstones", "target", ident)
        self.erase_rows("facts", "id", ident)

    def erase_entity(self, ident: str) -> None:
        self.erase_index_of_entity(ident)
        # Its names go with it: the aliases it was given, its renames and the
        # aliases taken back or given again (the rows of people's corrections).
        for table in ("alias_changes", "entity_names", "aliases"):
            self.erase_rows(table, "entity", ident)
        self.erase_rows("corrections", "target", address("entity", ident))
        self.erase_rows("changes", "entity", ident)
        self.erase_rows("entities", "id", ident)

    def erase_rows(self, table: str, column: str, value: str) -> None:
        """Delete the rows of ``table`` whose ``column`` is ``value``; an engine
        whose raw tables refuse a plain DELETE from the connected role routes
        it its own way."""
        self.run(f"DELETE FROM {table} WHERE {column} = ?", (value,))

    def erase_rows_many(self, table: str, column: str, values: Sequence[str]) -> None:
        """:meth:`erase_rows` for every one of ``values``."""
        if not values:
            return
        self.run(
            f"DELETE FROM {table} WHERE {column} IN (SELECT value FROM json_each(?))",
            (json.dumps(list(values)),),
        )

    def redact_items(self, ident: str, replacement: Any) -> None:
        self.redact_items_many([ident], replacement)

    def redact_items_many(self, idents: Sequence[str], replacement: Any) -> None:
        if not idents:
            return
        note = json.dumps(replacement)
        self.run(
            "UPDATE work_items SET payload = ?1, resolution = CASE WHEN resolution IS NULL "
            "THEN NULL ELSE ?1 END, "
            "fingerprint = CASE WHEN status = 'open' THEN 'purged' ELSE fingerprint END "
            "WHERE EXISTS (SELECT 1 FROM json_each(?2) j WHERE instr(payload, j.value) > 0 "
            "OR instr(coalesce(resolution, ''), j.value) > 0)",
            (note, json.dumps(list(idents))),
        )

    # --- the audit record and the steps left -------------------------------------

    def record(self, namespace: str, target: str, erased: list[str]) -> int:
        cur = self.db.execute(
            "INSERT INTO purges(namespace, target, erased, created_at) VALUES (?, ?, ?, ?) "
            "RETURNING id",
            (namespace, target, json.dumps(erased), now()),
        )
        audit: int = cur.fetchall()[0][0]  # step RETURNING to the end, or COMMIT fails
        self.mark_pending(audit)
        return audit

    def mark_pending(self, audit: int) -> None:
        """Record that purge ``audit`` (this transaction's) has its finishing steps to run."""
        self.run(
            "INSERT INTO purge_pending(purge, steps) VALUES (?, ?)",
            (audit, json.dumps(self.db.purge_steps)),
        )

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
        return [p for p in self._entries(namespace) if isinstance(p, PendingPurge)]

    def unreadable(self, namespace: str | None = None) -> list[BadPendingPurge]:
        return [p for p in self._entries(namespace) if isinstance(p, BadPendingPurge)]

    #: A step name prefix an older schema wrote once per index (SQLite: ``fts``).
    legacy_step_prefix = ""

    def _entries(self, namespace: str | None) -> list[PendingPurge | BadPendingPurge]:
        """Every ``purge_pending`` entry of ``namespace`` (and those of no
        audit row, which belong to none), read as untrusted: any connection
        to a SQLite file, and a PostgreSQL role granted the table, can write
        one, and what it says runs at the next open."""
        read: list[PendingPurge | BadPendingPurge] = []
        for audit, has_audit, target, erased, steps in self.all(
            "SELECT q.purge, p.id IS NOT NULL, p.target, p.erased, q.steps "
            "FROM purge_pending q LEFT JOIN purges p ON p.id = q.purge "
            "WHERE ?1 IS NULL OR p.namespace = ?1 OR p.id IS NULL ORDER BY q.purge",
            (namespace,),
        ):
            try:
                if not has_audit:
                    raise ValueError("it has no audit row")
                target = check_audit(target, erased)
                if self._still_there(target):
                    raise ValueError(f"{target} is still in the store: no purge erased it")
                names = read_steps(
                    steps, self.db.purge_steps, legacy_prefix=self.legacy_step_prefix
                )
            except ValueError as exc:
                read.append(BadPendingPurge(audit, _address_or_none(target), str(exc)))
            else:
                read.append(PendingPurge(audit, target, names))
        return read

    def _still_there(self, target: str) -> bool:
        kind, ident = parse_address(target)
        table = {"document": "documents", "passage": "passages", "fact": "facts"}.get(kind, "pages")
        return self.one(f"SELECT 1 FROM {table} WHERE id = ?", (ident,)) is not None

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
            self.finished()

    def finisher(self) -> str | None:
        return None

    def erase_index_of_entity(self, ident: str) -> None:
        """Drop the entity from a search index that has no delete trigger."""

    def finished(self) -> None:
        """The last purge has no steps left (in its transaction)."""
