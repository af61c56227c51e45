"""Queries and state changes shared by the service, the kinds and lint.

Everything here runs inside a transaction the caller opened; nothing here
opens one. One definition of each rule (what is live, what needs a page,
which facts disagree, which pages are stale) lives here, so the kinds that
act on a rule and the lint that reports it cannot drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from memors_core.domain import dates, text
from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address, uuid7
from memors_core.domain.model import EntityRef, FactRef, PageRef, PassageRef
from memors_core.errors import BadInput, NotFound
from memors_core.log import get_logger
from memors_core.storage.sqlite.connection import Store

log = get_logger("memors")

NAMESPACE_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")

PAGES_MARKED_STALE = "memors_store_pages_marked_stale_total"
WORK_ITEMS_TOTAL = "memors_store_work_items_total"


def live(alias: str) -> str:
    """SQL: the row ``alias`` (with an ``id`` column) has no tombstone."""
    return f"NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = {alias}.id)"


def check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace):
        shown = repr(namespace) if not isinstance(namespace, str) else repr(namespace[:70])
        raise BadInput(f"bad namespace {shown}: use 1-64 letters, digits, '-', '_' or '.'")
    return namespace


def _only(column: str, only: Iterable[str] | None) -> tuple[str, tuple]:
    """An SQL restriction of ``column`` to the ids in ``only`` (none: no restriction)."""
    if only is None:
        return "", ()
    return f"AND {column} IN (SELECT value FROM json_each(?))", (json.dumps(sorted(only)),)


#: SQL over ``pages pg JOIN entities e ON e.id = pg.entity``: the page is
#: stale — it was marked stale (a cited passage changed, a merge), a passage
#: it cites is forgotten or superseded, or its entity gained two or more live
#: passages since it was built. The ``stale`` kind, lint's ``stale-page`` and
#: the ``memors_kb_pages_stale`` gauge all use this one definition.
STALE_PAGE = f"""(
    EXISTS (SELECT 1 FROM page_stale s WHERE s.page = pg.id)
    OR EXISTS (SELECT 1 FROM page_sources ps JOIN tombstones t ON t.target = ps.passage
               WHERE ps.page = pg.id)
    OR (SELECT COUNT(*) FROM (
            SELECT DISTINCT p.rowid FROM entities x JOIN mentions m ON m.entity = x.id
            JOIN passages p ON p.id = m.passage
            WHERE x.canonical = e.canonical AND p.rowid > pg.built_seq AND {live("p")}
            LIMIT 2)) >= 2
)"""


class Operations:
    """Shared queries over one :class:`Store`."""

    def __init__(self, store: Store, limits: Any = None) -> None:
        self.store = store
        self.limits = limits

    # --- liveness ------------------------------------------------------------

    def state_of(self, ident: str) -> str:
        row = self.store.one("SELECT state FROM tombstones WHERE target = ?", (ident,))
        return "live" if row is None else row[0]

    def is_live(self, ident: str) -> bool:
        return self.store.one("SELECT 1 FROM tombstones WHERE target = ?", (ident,)) is None

    def version_passages(self, document: str, version: int) -> list[str]:
        """The passage ids of one version of a document, in order.

        Version 1 is the passages' own order (no link rows are written for
        it, which keeps bulk loads lean); later versions are link rows in
        ``version_passages``, since they reuse unchanged passages.
        """
        if version == 1:
            sql = "SELECT id FROM passages WHERE document = ? AND version = ? ORDER BY position"
        else:
            sql = (
                "SELECT passage FROM version_passages WHERE document = ? AND version = ? "
                "ORDER BY position"
            )
        return [r[0] for r in self.store.all(sql, (document, version))]

    # --- entities --------------------------------------------------------------

    def find_entity(self, name: str, namespace: str) -> str | None:
        """The canonical id of the entity called ``name`` (or with that alias)."""
        key = text.match_key(name)
        row = self.store.one(
            "SELECT canonical FROM entities WHERE namespace = ? AND key = ?", (namespace, key)
        )
        if row is None:
            row = self.store.one(
                "SELECT e.canonical FROM aliases a JOIN entities e ON e.id = a.entity "
                "WHERE a.namespace = ? AND a.key = ? LIMIT 1",
                (namespace, key),
            )
        return None if row is None else row[0]

    def entity_id(self, name_or_address: str, namespace: str) -> str:
        """Resolve a name or an entity address to its canonical id, or raise."""
        if name_or_address.startswith("memo://"):
            _, ident = parse_address(name_or_address, expect=("entity",))
            row = self.store.one(
                "SELECT canonical FROM entities WHERE id = ? AND namespace = ?", (ident, namespace)
            )
            if row is None:
                raise NotFound(f"no entity {name_or_address} in namespace {namespace!r}")
            return row[0]
        found = self.find_entity(name_or_address, namespace)
        if found is None:
            raise NotFound(f"no entity named {name_or_address!r} in namespace {namespace!r}")
        return found

    def ensure_entity(self, name: str, namespace: str) -> tuple[str, bool]:
        """The canonical id for ``name``, creating the entity if needed."""
        clean = " ".join(name.split())
        if not clean:
            raise BadInput("an entity name must not be empty")
        if len(clean) > 200:
            raise BadInput(f"entity name too long ({len(clean)} characters; at most 200)")
        found = self.find_entity(clean, namespace)
        if found is not None:
            return found, False
        ident = uuid7()
        self.store.conn.execute(
            "INSERT INTO entities(id, namespace, name, key, folded, canonical, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (ident, namespace, clean, text.match_key(clean), text.fold_name(clean), ident, now()),
        )
        self.store.after_commit(
            log.info, "entity_created", namespace=namespace, entity=address("entity", ident)
        )
        return ident, True

    def entity_row(self, ident: str) -> tuple[str, str, str, str]:
        """(id, namespace, name, canonical)"""
        row = self.store.one(
            "SELECT id, namespace, name, canonical FROM entities WHERE id = ?", (ident,)
        )
        if row is None:
            raise NotFound(f"no entity {address('entity', ident)}")
        return row

    def aliases(self, canonical: str) -> list[str]:
        """Other names of a canonical entity: its aliases and merged entities' names."""
        names = [
            r[0]
            for r in self.store.all(
                "SELECT alias FROM aliases WHERE entity = ? ORDER BY created_at, alias",
                (canonical,),
            )
        ]
        own = self.entity_row(canonical)[2]
        seen = {text.match_key(own)}
        out = []
        for n in names:
            k = text.match_key(n)
            if k not in seen:
                seen.add(k)
                out.append(n)
        return out

    def entity_ref(self, canonical: str) -> EntityRef:
        return EntityRef(
            address=address("entity", canonical),
            name=self.entity_row(canonical)[2],
            aliases=self.aliases(canonical),
        )

    def add_alias(self, entity: str, namespace: str, alias: str) -> None:
        self.store.conn.execute(
            "INSERT OR IGNORE INTO aliases(entity, namespace, alias, key, folded, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (entity, namespace, alias, text.match_key(alias), text.fold_name(alias), now()),
        )

    # --- passages and facts of an entity --------------------------------------

    def entity_passages(self, canonical: str) -> list[PassageRef]:
        rows = self.store.all(
            f"""SELECT DISTINCT p.rowid, p.id, p.document, p.text
                FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.canonical = ? AND {live("p")} ORDER BY p.rowid""",
            (canonical,),
        )
        return [PassageRef(address("passage", r[1]), address("document", r[2]), r[3]) for r in rows]

    def entity_passage_ids(self, canonical: str) -> list[tuple[int, str]]:
        return self.store.all(
            f"""SELECT DISTINCT p.rowid, p.id FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.canonical = ? AND {live("p")} ORDER BY p.rowid""",
            (canonical,),
        )

    def fact_ref(self, row: tuple) -> FactRef:
        ident, subject_name, predicate, value, vf, vt = row[:6]
        return FactRef(address("fact", ident), subject_name, predicate, value, vf, vt)

    _FACT_COLS = "f.id, ce.name, f.predicate, f.value, f.valid_from, f.valid_to"

    def entity_facts(self, canonical: str) -> list[FactRef]:
        rows = self.store.all(
            f"""SELECT {self._FACT_COLS} FROM entities e JOIN facts f ON f.subject = e.id
                JOIN entities ce ON ce.id = e.canonical
                WHERE e.canonical = ? AND {live("f")} ORDER BY f.rowid""",
            (canonical,),
        )
        return [self.fact_ref(r) for r in rows]

    def fact_refs(self, ids: Iterable[str]) -> list[FactRef]:
        out = []
        for ident in ids:
            row = self.store.one(
                f"""SELECT {self._FACT_COLS} FROM facts f JOIN entities e ON e.id = f.subject
                    JOIN entities ce ON ce.id = e.canonical WHERE f.id = ?""",
                (ident,),
            )
            if row is not None:
                out.append(self.fact_ref(row))
        return out

    def passage_refs(self, ids: Iterable[str]) -> list[PassageRef]:
        """Payload references for passages, in the order given (missing ones left out)."""
        ids = list(ids)
        rows = {
            r[0]: r
            for r in self.store.all(
                "SELECT id, document, text FROM passages "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            )
        }
        return [
            PassageRef(address("passage", i), address("document", rows[i][1]), rows[i][2])
            for i in ids
            if i in rows
        ]

    # --- pages -------------------------------------------------------------------

    _PAGE_COLS = "pg.id, pg.title, pg.content, pg.version, pg.built_seq, pg.entity"

    def current_page(self, canonical: str) -> tuple | None:
        """(id, title, content, version, built_seq, entity) of the entity's live page."""
        return self.store.one(
            f"""SELECT {self._PAGE_COLS} FROM pages pg JOIN entities e ON e.id = pg.entity
                WHERE e.canonical = ? AND {live("pg")} ORDER BY pg.rowid DESC LIMIT 1""",
            (canonical,),
        )

    def page_ref(self, row: tuple) -> PageRef:
        return PageRef(address("page", row[0]), row[1], row[2], row[3])

    def page_sources(self, page: str) -> list[tuple[str, str]]:
        """(passage id, hash at build time) of the passages a page cites."""
        return self.store.all(
            "SELECT passage, hash FROM page_sources WHERE page = ? ORDER BY passage", (page,)
        )

    def mark_page_stale(self, page: str, cause: str, target: str | None = None) -> bool:
        """Record that a page is stale; counts the page the first time only."""
        already = self.store.one("SELECT 1 FROM page_stale WHERE page = ? LIMIT 1", (page,))
        self.store.conn.execute(
            "INSERT INTO page_stale(page, cause, target, created_at) VALUES (?, ?, ?, ?)",
            (page, cause, target, now()),
        )
        if already is None:
            self.store.bump(PAGES_MARKED_STALE)
            self.store.after_commit(
                log.info,
                "page_marked_stale",
                namespace=self.store.scalar("SELECT namespace FROM pages WHERE id = ?", (page,)),
                page=address("page", page),
                cause=cause,
                target=target,
            )
            return True
        return False

    def mark_pages_citing(self, passage: str, cause: str) -> int:
        """Mark stale every live page that cites ``passage``."""
        rows = self.store.all(
            f"""SELECT pg.id FROM page_sources s JOIN pages pg ON pg.id = s.page
                WHERE s.passage = ? AND {live("pg")}""",
            (passage,),
        )
        return sum(self.mark_page_stale(r[0], cause, address("passage", passage)) for r in rows)

    # --- facts -------------------------------------------------------------------------

    def record_fact(
        self,
        namespace: str,
        subject: str,
        predicate: str,
        value: str,
        valid_from: str | None = None,
        valid_to: str | None = None,
        source: str | None = None,
    ) -> str:
        """Store a fact about the entity named ``subject`` (created if new);
        returns the fact's id. Dates are ISO 8601 (``valid_from`` before
        ``valid_to``); ``source`` is a passage address in ``namespace``.
        Facts are append-only: this is the one way a kind adds one."""
        from_ts, to_ts = dates.interval(valid_from, valid_to)
        source_id = None
        if source is not None:
            _, source_id = parse_address(source, expect=("passage",))
            if not self.store.one(
                "SELECT 1 FROM passages WHERE id = ? AND namespace = ?", (source_id, namespace)
            ):
                raise NotFound(f"no passage {source} in namespace {namespace!r}")
        entity, _ = self.ensure_entity(subject, namespace)
        ident = uuid7()
        self.store.conn.execute(
            "INSERT INTO facts(id, namespace, subject, predicate, value, predicate_folded, "
            "value_folded, valid_from, valid_to, from_ts, to_ts, source, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ident,
                namespace,
                entity,
                predicate.strip(),
                value.strip(),
                text.fold_value(predicate),
                text.fold_value(value),
                valid_from.strip() if valid_from else None,
                valid_to.strip() if valid_to else None,
                from_ts,
                to_ts,
                source_id,
                now(),
            ),
        )
        return ident

    # --- tombstones ----------------------------------------------------------------

    def tombstone(
        self,
        namespace: str,
        kind: str,
        ident: str,
        state: str,
        reason: str | None = None,
        item: int | None = None,
        at: str | None = None,
    ) -> bool:
        """Forget or supersede one row; returns False if it already was.
        ``at`` is the tombstone's time (default now): a fact superseded by a
        copy shares its copy's ``recorded_at``, which is how ``get`` finds it."""
        return self.store.tx.tombstones.add(namespace, kind, ident, state, reason, item, at)

    def tombstone_record(self, ident: str) -> tuple[str, dict[str, Any]] | None:
        """``(state, record)`` of a forgotten or superseded row, None if live:
        the record says when (``at``), why (``reason``, as given), by what
        newer row (``by``, when there is one) and which work item did it
        (``item``). Raw rows are never modified, so ``by`` is read off the
        rows themselves: the next page version, the document version that
        dropped a passage, the fact a conflict kept or the bounded copy."""
        row = self.store.one(
            "SELECT namespace, type, state, reason, item, created_at FROM tombstones "
            "WHERE target = ?",
            (ident,),
        )
        if row is None:
            return None
        namespace, kind, state, reason, item, at = row
        record: dict[str, Any] = {"at": at, "reason": reason}
        if state == "superseded":
            by = self._superseded_by(namespace, kind, ident, item, at)
            if by:
                record.update(by)
        if item is not None:
            record["item"] = address("item", item)
        return state, record

    def _superseded_by(
        self, namespace: str, kind: str, ident: str, item: int | None, at: str
    ) -> dict[str, Any]:
        if kind == "page":
            newer = self.store.scalar("SELECT id FROM pages WHERE previous = ? LIMIT 1", (ident,))
            return {"by": address("page", newer)} if newer else {}
        if kind == "passage":
            row = self.store.one(
                """SELECT p.document, MIN(v.version) FROM passages p
                   JOIN document_versions v ON v.document = p.document AND v.version > p.version
                   WHERE p.id = ?1 AND NOT EXISTS (
                       SELECT 1 FROM version_passages l WHERE l.document = p.document
                       AND l.version = v.version AND l.passage = ?1)""",
                (ident,),
            )
            if row is None or row[1] is None:
                return {}
            return {"by": address("document", row[0]), "version": row[1]}
        if kind == "fact":
            copy = self.store.scalar(
                "SELECT c.id FROM facts f JOIN facts c ON c.subject = f.subject "
                "AND c.predicate = f.predicate AND c.value = f.value "
                "WHERE f.id = ? AND c.id <> f.id AND c.recorded_at = ? ORDER BY c.rowid LIMIT 1",
                (ident, at),
            )
            if copy is not None:  # a bounded copy, recorded in the same instant
                return {"by": address("fact", copy)}
            if item is not None:
                resolution = self.store.scalar(
                    "SELECT resolution FROM work_items WHERE id = ? AND namespace = ?",
                    (item, namespace),
                )
                keep = (json.loads(resolution) if resolution else {}).get("keep")
                if isinstance(keep, str):
                    keep = [keep]
                if isinstance(keep, list) and len(keep) == 1 and isinstance(keep[0], str):
                    return {"by": keep[0]}
        return {}

    def copy_fact(self, ident: str, valid_from: str | None, valid_to: str | None, at: str) -> str:
        """A new fact row like ``ident`` (subject, predicate, value, source)
        with other validity bounds, recorded at ``at``; returns its id. The
        original row is untouched (the caller supersedes it)."""
        from_ts, to_ts = dates.interval(valid_from, valid_to)
        copy = uuid7()
        self.store.conn.execute(
            "INSERT INTO facts(id, namespace, subject, predicate, value, predicate_folded, "
            "value_folded, valid_from, valid_to, from_ts, to_ts, source, recorded_at) "
            "SELECT ?, namespace, subject, predicate, value, predicate_folded, value_folded, "
            "?, ?, ?, ?, source, ? FROM facts WHERE id = ?",
            (copy, valid_from, valid_to, from_ts, to_ts, at, ident),
        )
        return copy

    # --- shared rules ----------------------------------------------------------------

    def entities_needing_page(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[tuple[str, int]]:
        """(canonical entity, live passages) for entities with >= 3 live
        passages and no live page — the ``page`` kind and lint's
        ``missing-page`` rule both use this. ``only`` limits it to those
        canonical entities (an incremental scan)."""
        restrict, params = _only("e.canonical", only)
        return self.store.all(
            f"""SELECT e.canonical, COUNT(DISTINCT p.rowid) AS n
                FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.namespace = ? AND {live("p")} {restrict}
                GROUP BY e.canonical
                HAVING n >= 3 AND NOT EXISTS (
                    SELECT 1 FROM pages pg JOIN entities pe ON pe.id = pg.entity
                    WHERE pe.canonical = e.canonical AND {live("pg")})
                ORDER BY MIN(e.rowid)""",
            (namespace, *params),
        )

    def page_changes(self, page: tuple) -> list[dict[str, str]]:
        """What changed since a page was built: cited passages that were
        forgotten or superseded, and live passages of its entity newer than
        the page (``change`` = ``forgotten``, ``superseded`` or ``new``)."""
        page_id, _t, _c, _v, built_seq, entity = page
        canonical = self.entity_row(entity)[3]
        changes = []
        for passage, _hash in self.page_sources(page_id):
            state = self.state_of(passage)
            if state != "live":
                changes.append({"address": address("passage", passage), "change": state})
        for rowid, ident in self.entity_passage_ids(canonical):
            if rowid > built_seq:
                changes.append({"address": address("passage", ident), "change": "new"})
        return changes

    def stale_reasons(self, page: tuple) -> list[dict[str, str]] | None:
        """The changes that make a live page stale, or None if it is fresh
        (the rule is :data:`STALE_PAGE`; this lists what changed)."""
        stale = self.store.one(
            f"""SELECT 1 FROM pages pg JOIN entities e ON e.id = pg.entity
                WHERE pg.id = ? AND {STALE_PAGE}""",
            (page[0],),
        )
        return None if stale is None else self.page_changes(page)

    def live_pages(self, namespace: str, only: Iterable[str] | None = None) -> list[tuple]:
        """Live pages (of the canonical entities ``only``, if given)."""
        restrict, params = _only("e.canonical", only)
        return self.store.all(
            f"""SELECT {self._PAGE_COLS} FROM pages pg JOIN entities e ON e.id = pg.entity
                WHERE pg.namespace = ? AND {live("pg")} {restrict} ORDER BY pg.rowid""",
            (namespace, *params),
        )

    def stale_pages(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[tuple[tuple, list[dict[str, str]]]]:
        """Live stale pages (of the canonical entities ``only``, if given)
        with what changed — found by SQL over the indexes, not page by page."""
        restrict, params = _only("e.canonical", only)
        pages = self.store.all(
            f"""SELECT {self._PAGE_COLS} FROM pages pg JOIN entities e ON e.id = pg.entity
                WHERE pg.namespace = ? AND {live("pg")} AND {STALE_PAGE} {restrict}
                ORDER BY pg.rowid""",
            (namespace, *params),
        )
        return [(page, self.page_changes(page)) for page in pages]

    def stale_page_counts(self) -> dict[str, int]:
        """Live stale pages per namespace (for the ``memors_kb_pages_stale`` gauge)."""
        return dict(
            self.store.all(
                f"""SELECT pg.namespace, COUNT(*) FROM pages pg JOIN entities e ON e.id = pg.entity
                    WHERE {live("pg")} AND {STALE_PAGE} GROUP BY pg.namespace"""
            )
        )

    def conflicting_facts(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[tuple[str, str]]:
        """Pairs of live facts about one subject (after merges) whose
        predicates fold equal, whose values do not, and whose half-open
        validity intervals overlap — the ``conflict`` kind and lint's
        ``contradiction`` rule both use this. ``only`` limits it to subjects
        whose canonical entity is listed."""
        restrict, params = _only("ea.canonical", only)
        return self.store.all(
            f"""SELECT a.id, b.id
                FROM facts a JOIN entities ea ON ea.id = a.subject
                JOIN entities eb ON eb.canonical = ea.canonical
                JOIN facts b ON b.subject = eb.id AND b.predicate_folded = a.predicate_folded
                WHERE a.namespace = ? AND a.rowid < b.rowid
                  AND a.value_folded <> b.value_folded
                  AND (a.from_ts IS NULL OR b.to_ts IS NULL OR a.from_ts < b.to_ts)
                  AND (b.from_ts IS NULL OR a.to_ts IS NULL OR b.from_ts < a.to_ts)
                  AND {live("a")} AND {live("b")} {restrict}
                ORDER BY a.rowid, b.rowid""",
            (namespace, *params),
        )

    def facts_conflict(self, a: str, b: str) -> bool:
        return (
            self.store.one(
                f"""SELECT 1 FROM facts a JOIN entities ea ON ea.id = a.subject,
                facts b JOIN entities eb ON eb.id = b.subject
                WHERE a.id = ? AND b.id = ? AND ea.canonical = eb.canonical
                  AND a.predicate_folded = b.predicate_folded AND a.value_folded <> b.value_folded
                  AND (a.from_ts IS NULL OR b.to_ts IS NULL OR a.from_ts < b.to_ts)
                  AND (b.from_ts IS NULL OR a.to_ts IS NULL OR b.from_ts < a.to_ts)
                  AND {live("a")} AND {live("b")}""",
                (a, b),
            )
            is not None
        )

    def expired_facts(self, namespace: str) -> list[tuple[str, str]]:
        return self.store.all(
            f"""SELECT f.id, f.valid_to FROM facts f WHERE f.namespace = ? AND f.to_ts IS NOT NULL
                AND f.to_ts <= ? AND {live("f")} ORDER BY f.rowid""",
            (namespace, dates.now_ts()),
        )

    def orphan_entities(self, namespace: str) -> list[str]:
        """Canonical entities with no live passages and no live facts."""
        rows = self.store.all(
            f"""SELECT e.id FROM entities e WHERE e.namespace = ? AND e.canonical = e.id
                AND NOT EXISTS (
                    SELECT 1 FROM entities x JOIN mentions m ON m.entity = x.id
                    JOIN passages p ON p.id = m.passage
                    WHERE x.canonical = e.id AND {live("p")})
                AND NOT EXISTS (
                    SELECT 1 FROM entities x JOIN facts f ON f.subject = x.id
                    WHERE x.canonical = e.id AND {live("f")})
                ORDER BY e.rowid""",
            (namespace,),
        )
        return [r[0] for r in rows]

    # --- merges -----------------------------------------------------------------------

    def open_merge_candidate(
        self, namespace: str, first: str, second: str, origin: str
    ) -> tuple[int, str]:
        """Open (or find) the candidate for a pair; returns (id, status)."""
        pair = "|".join(sorted((first, second)))
        self.store.conn.execute(
            "INSERT OR IGNORE INTO merge_candidates(namespace, first, second, pair, origin, "
            "status, created_at) VALUES (?, ?, ?, ?, ?, 'open', ?)",
            (namespace, first, second, pair, origin, now()),
        )
        opened = self.store.conn.changes() > 0
        row = self.store.one(
            "SELECT id, status FROM merge_candidates WHERE namespace = ? AND pair = ?",
            (namespace, pair),
        )
        if opened:
            self.store.after_commit(
                log.info,
                "merge_proposed",
                namespace=namespace,
                candidate=row[0],
                entities=[address("entity", first), address("entity", second)],
                origin=origin,
            )
        return row[0], row[1]

    # --- writing pages ---------------------------------------------------------------------

    def write_page(
        self,
        namespace: str,
        canonical: str,
        title: str,
        content: str,
        cites: list[str],
        previous: tuple | None,
        item: int | None,
        flags: dict[str, Any],
    ) -> str:
        """Store a page version citing ``cites`` (passage addresses); the
        previous version, if any, is superseded. Returns the page address."""
        ident = uuid7()
        version = previous[3] + 1 if previous else 1
        built_seq = self.store.scalar("SELECT COALESCE(MAX(rowid), 0) FROM passages")
        self.store.conn.execute(
            "INSERT INTO pages(id, namespace, entity, title, content, version, previous, item, "
            "flags, built_seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ident,
                namespace,
                canonical,
                title,
                content,
                version,
                previous[0] if previous else None,
                item,
                self.dumps(flags),
                built_seq,
                now(),
            ),
        )
        for cite in dict.fromkeys(cites):
            _, passage = parse_address(cite, expect=("passage",))
            row = self.store.one("SELECT hash FROM passages WHERE id = ?", (passage,))
            if row is None:
                raise NotFound(f"no passage {cite}")
            self.store.conn.execute(
                "INSERT INTO page_sources(page, passage, hash) VALUES (?, ?, ?)",
                (ident, passage, row[0]),
            )
        if previous:
            self.tombstone(
                namespace, "page", previous[0], "superseded", f"page version {version}", item
            )
        self.store.after_commit(
            log.info,
            "page_stored",
            namespace=namespace,
            page=address("page", ident),
            version=version,
            item=item,
            forced=bool(flags),
        )
        return address("page", ident)

    # --- JSON columns --------------------------------------------------------------------

    @staticmethod
    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
