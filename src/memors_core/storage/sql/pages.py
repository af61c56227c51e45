"""Pages in the shared SQL: versions, their sources, sentences and facts,
stale marks, the stale rule and what changed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memors_core.domain.counters import PAGES_MARKED_STALE
from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address, uuid7
from memors_core.domain.rows import Fact, Page, PageListed, PageSentence, PageSource, StalePage
from memors_core.domain.rules import STALE_NEW_PASSAGES
from memors_core.errors import NotFound
from memors_core.log import get_logger
from memors_core.storage.sql.records import dumps, live, restrict_to
from memors_core.storage.sql.repo import Repo

log = get_logger("memors")

#: SQL over ``pages pg JOIN entities e ON e.id = pg.entity``: the page is
#: stale — it was marked stale (a cited passage or a fact it was built with
#: changed, a merge), a passage it cites or a fact it was built with is
#: forgotten or superseded, or its entity gained STALE_NEW_PASSAGES or more
#: live passages since it was built. The ``stale`` kind, lint's
#: ``stale-page`` and the ``memors_kb_pages_stale`` gauge all use this one
#: definition.
STALE_PAGE = f"""(
    EXISTS (SELECT 1 FROM page_stale s WHERE s.page = pg.id)
    OR EXISTS (SELECT 1 FROM page_sources ps JOIN tombstones t ON t.target = ps.passage
               WHERE ps.page = pg.id)
    OR EXISTS (SELECT 1 FROM page_facts pf JOIN tombstones t ON t.target = pf.fact
               WHERE pf.page = pg.id)
    OR (SELECT COUNT(*) FROM (
            SELECT DISTINCT p.rowid FROM entities x JOIN mentions m ON m.entity = x.id
            JOIN passages p ON p.id = m.passage
            WHERE x.canonical = e.canonical AND p.rowid > pg.built_seq AND {live("p")}
            LIMIT {STALE_NEW_PASSAGES}) AS recent) >= {STALE_NEW_PASSAGES}
)"""

_COLS = (
    "pg.rowid, pg.id, pg.namespace, pg.entity, pg.title, pg.content, pg.version, pg.previous, "
    "pg.item, pg.flags, pg.built_seq, pg.created_at"
)
_FROM = "pages pg JOIN entities e ON e.id = pg.entity"
#: ORDER BY of each of PAGE_SORTS (the row id breaks ties, so paging is stable).
_PAGE_ORDER = {
    "title": "lower(pg.title), pg.rowid",
    "entity": "lower(c.name), pg.rowid",
    "newest": "pg.rowid DESC",
    "oldest": "pg.rowid",
}


def _page(row: tuple[Any, ...]) -> Page:
    return Page(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        row[7],
        row[8],
        json.loads(row[9]),
        row[10],
        row[11],
    )


def fact_text(fact: Fact) -> str:
    """A fact written out: ``Raft leader n1 (from 2024-01-01 to 2024-06-01)``."""
    bounds = []
    if fact.valid_from:
        bounds.append(f"from {fact.valid_from}")
    if fact.valid_to:
        bounds.append(f"to {fact.valid_to}")
    when = f" ({' '.join(bounds)})" if bounds else ""
    return f"{fact.subject_name} {fact.predicate} {fact.value}{when}"


#: The last page version a work item wrote (``pages_item`` serves it).
OF_ITEM = "SELECT id FROM pages WHERE item = ? AND namespace = ? ORDER BY rowid DESC LIMIT 1"


class SqlPages(Repo):
    def current(self, canonical: str) -> Page | None:
        row = self.one(
            f"""SELECT {_COLS} FROM {_FROM}
                WHERE e.canonical = ? AND {live("pg")} ORDER BY pg.rowid DESC LIMIT 1""",
            (canonical,),
        )
        return None if row is None else _page(row)

    def current_of(self, canonicals: Iterable[str]) -> dict[str, Page]:
        out: dict[str, Page] = {}
        for row in self.planned(
            f"""SELECT {_COLS}, e.canonical FROM {_FROM}
                WHERE e.canonical IN (SELECT value FROM json_each(?)) AND {live("pg")}
                ORDER BY pg.rowid""",
            (json.dumps(sorted(set(canonicals))),),
        ):
            out[row[12]] = _page(row[:12])  # (the newest live version last)
        return out

    def get(self, ident: str, namespace: str | None = None) -> Page | None:
        row = self.one(
            f"SELECT {_COLS} FROM pages pg WHERE pg.id = ?1 AND (?2 IS NULL OR pg.namespace = ?2)",
            (ident, namespace),
        )
        return None if row is None else _page(row)

    def last_written(self, canonical: str) -> str | None:
        return self.text(
            f"SELECT pg.id FROM {_FROM} WHERE e.canonical = ? ORDER BY pg.rowid DESC LIMIT 1",
            (canonical,),
        )

    def last_written_of(self, canonicals: Iterable[str]) -> dict[str, str]:
        # (by row id: the newest of each entity is the last one kept;
        # planned: a compaction's page kind reads it with the entities'
        # passages and facts, in one message on a server engine)
        return dict(
            self.planned(
                f"SELECT e.canonical, pg.id FROM {_FROM} "
                "WHERE e.canonical IN (SELECT value FROM json_each(?)) ORDER BY pg.rowid",
                (json.dumps(sorted(set(canonicals))),),
            )
        )

    def write(
        self,
        namespace: str,
        canonical: str,
        title: str,
        content: str,
        cites: list[str],
        previous: Page | None,
        item: int | None,
        flags: dict[str, Any],
        *,
        sentences: Sequence[tuple[Any, ...]] = (),
        facts: Sequence[str] = (),
    ) -> str:
        ident = uuid7()
        version = previous.version + 1 if previous else 1
        self.run(
            "INSERT INTO pages(id, namespace, entity, title, content, version, previous, item, "
            "flags, built_seq, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ident,
                namespace,
                canonical,
                title,
                content,
                version,
                previous.id if previous else None,
                item,
                dumps(flags),
                self.tx.passages.head(),
                now(),
            ),
        )
        for cite in dict.fromkeys(cites):
            _, passage = parse_address(cite, expect=("passage",))
            phash = self.tx.passages.hash_of(passage)
            if phash is None:
                raise NotFound(f"no passage {cite}")
            self.run(
                "INSERT INTO page_sources(page, passage, hash) VALUES (?, ?, ?)",
                (ident, passage, phash),
            )
        fact_rows = [
            (ident, self._known(namespace, fact, ("fact",))[1], position)
            for position, fact in enumerate(dict.fromkeys(facts))
        ]
        if fact_rows:
            self.db.executemany(
                "INSERT INTO page_facts(page, fact, position) VALUES (?, ?, ?)", fact_rows
            )
        self._write_sentences(namespace, ident, sentences)
        if previous:
            self.tx.tombstones.add(
                namespace, "page", previous.id, "superseded", f"page version {version}", item
            )
        self.tx.after_commit(
            log.info,
            "page_stored",
            namespace=namespace,
            page=address("page", ident),
            version=version,
            item=item,
            forced=bool(flags),
        )
        return address("page", ident)

    def _write_sentences(
        self, namespace: str, page: str, sentences: Sequence[tuple[Any, ...]]
    ) -> None:
        rows = []
        for position, (sentence, sources, *flagged) in enumerate(sentences):
            cited = [address(*self._known(namespace, s, ("passage", "fact"))) for s in sources]
            flags = list(flagged[0]) if flagged else []
            rows.append((page, position, sentence, dumps(list(dict.fromkeys(cited))), flags))
        if not rows:
            return
        if any(flags for *_, flags in rows):
            self.db.executemany(
                "INSERT INTO page_sentences(page, position, text, sources, flags) "
                "VALUES (?, ?, ?, ?, ?)",
                [(*row[:4], dumps(row[4])) for row in rows],
            )
        else:  # (the column's default: a page that passed its checks)
            self.db.executemany(
                "INSERT INTO page_sentences(page, position, text, sources) VALUES (?, ?, ?, ?)",
                [row[:4] for row in rows],
            )

    def _known(self, namespace: str, where: str, types: tuple[str, ...]) -> tuple[str, str]:
        """(type, id) of the address ``where`` of a passage or fact that
        exists (a fact: in ``namespace``); NotFound otherwise."""
        kind, ident = parse_address(where, expect=types)
        if kind == "passage":
            found = self.tx.passages.hash_of(ident) is not None
        else:
            found = self.tx.facts.get(ident, namespace) is not None
        if not found:
            raise NotFound(f"no {kind} {where}")
        return kind, ident

    def sentences(self, page: str) -> list[PageSentence]:
        return [
            PageSentence(text, tuple(json.loads(sources)), tuple(json.loads(flags)))
            for text, sources, flags in self.all(
                "SELECT text, sources, flags FROM page_sentences WHERE page = ? ORDER BY position",
                (page,),
            )
        ]

    def facts(self, page: str) -> list[str]:
        return [
            address("fact", r[0])
            for r in self.all(
                "SELECT fact FROM page_facts WHERE page = ? ORDER BY position", (page,)
            )
        ]

    def sources(self, page: str) -> list[PageSource]:
        return [
            PageSource(*r)
            for r in self.all(
                "SELECT passage, hash FROM page_sources WHERE page = ? ORDER BY passage", (page,)
            )
        ]

    def newer(self, page: str) -> str | None:
        return self.text("SELECT id FROM pages WHERE previous = ? LIMIT 1", (page,))

    def mark_stale(self, page: str, cause: str, target: str | None = None) -> bool:
        already = self.one("SELECT 1 FROM page_stale WHERE page = ? LIMIT 1", (page,))
        self.run(
            "INSERT INTO page_stale(page, cause, target, created_at) VALUES (?, ?, ?, ?)",
            (page, cause, target, now()),
        )
        if already is not None:
            return False
        self.tx.counters.bump(PAGES_MARKED_STALE)
        self.tx.after_commit(
            log.info,
            "page_marked_stale",
            namespace=self.scalar("SELECT namespace FROM pages WHERE id = ?", (page,)),
            page=address("page", page),
            cause=cause,
            target=target,
        )
        return True

    def mark_citing(self, passage: str, cause: str) -> int:
        return self.mark_citing_many([passage], cause)

    def mark_citing_many(self, passages: Sequence[str], cause: str) -> int:
        """:meth:`mark_citing` for many passages, in one look-up."""
        order = {p: n for n, p in enumerate(passages)}
        rows = self.all(
            f"""SELECT s.passage, pg.id FROM page_sources s JOIN pages pg ON pg.id = s.page
                WHERE s.passage IN (SELECT value FROM json_each(?)) AND {live("pg")}""",
            (json.dumps(list(order)),),
        )
        rows.sort(key=lambda r: order[r[0]])
        return sum(self.mark_stale(page, cause, address("passage", p)) for p, page in rows)

    def mark_built_with(self, fact: str, cause: str) -> int:
        rows = self.all(
            f"""SELECT pg.id FROM page_facts f JOIN pages pg ON pg.id = f.page
                WHERE f.fact = ? AND {live("pg")} ORDER BY pg.rowid""",
            (fact,),
        )
        return sum(self.mark_stale(r[0], cause, address("fact", fact)) for r in rows)

    def live(self, namespace: str, only: Iterable[str] | None = None) -> list[Page]:
        restrict, params = restrict_to("e.canonical", only, self.tx.keys_in)
        return [
            _page(r)
            for r in self.all(
                f"""SELECT {_COLS} FROM {_FROM}
                    WHERE pg.namespace = ? AND {live("pg")} {restrict} ORDER BY pg.rowid""",
                (namespace, *params),
            )
        ]

    def flagged(self, namespace: str) -> list[Page]:
        """The namespace's live pages stored over their checks' flags (``force``)."""
        return [
            _page(r)
            for r in self.all(
                f"""SELECT {_COLS} FROM {_FROM}
                    WHERE pg.namespace = ? AND {live("pg")} AND pg.flags <> '{{}}'
                    ORDER BY pg.rowid""",
                (namespace,),
            )
        ]

    def is_stale(self, page: str) -> bool:
        return bool(
            self.planned(f"SELECT 1 FROM {_FROM} WHERE pg.id = ? AND {STALE_PAGE}", (page,))
        )

    def changes(self, page: Page) -> list[dict[str, str]]:
        return self._changes(page, self.tx.entities.require(page.entity).canonical)

    def _changes(self, page: Page, canonical: str) -> list[dict[str, str]]:
        # (a fixed number of look-ups, however many passages and facts the
        # page cites: their tombstones, rows and the entities named read
        # together)
        changes = []
        sources = self.sources(page.id)
        cited = {source.passage for source in sources}
        fact_addresses = self.facts(page.id)
        fact_ids = [a.rsplit("/", 1)[1] for a in fact_addresses]
        gone = self.tx.tombstones.get_many([*cited, *fact_ids]) if cited or fact_ids else {}
        ended = [s.passage for s in sources if s.passage in gone]
        texts = {p.id: p.text for p in self.tx.passages.by_ids(ended)} if ended else {}
        for source in sources:
            tombstone = gone.get(source.passage)
            if tombstone is not None:
                changes.append(
                    {
                        "address": address("passage", source.passage),
                        "change": tombstone.state,
                        "text": texts.get(source.passage, ""),
                    }
                )
        facts = {f.id: f for f in self.tx.facts.by_ids(fact_ids)} if fact_ids else {}
        for fact_address, ident in zip(fact_addresses, fact_ids, strict=True):
            fact = facts.get(ident)
            if fact is None:  # purged since: its words are gone, say only that
                changes.append({"address": fact_address, "change": "purged", "text": ""})
            elif ident in gone:
                changes.append(
                    {"address": fact_address, "change": gone[ident].state, "text": fact_text(fact)}
                )
        marks = self.all(
            "SELECT cause, target FROM page_stale WHERE page = ? "
            "AND cause IN ('merge', 'rename', 'unmerge') AND target IS NOT NULL ORDER BY rowid",
            (page.id,),
        )
        merged = list(dict.fromkeys(target for cause, target in marks if cause == "merge"))
        # A person's corrections: the entity renamed, a merge undone.
        corrected = [(cause, target) for cause, target in marks if cause != "merge"]
        named = [
            parse_address(t, expect=("entity",))[1] for t in (*merged, *(t for _, t in corrected))
        ]
        entities = self.tx.entities.get_many(named) if named else {}

        def name_of(target: str) -> str:
            entity = entities.get(parse_address(target, expect=("entity",))[1])
            return entity.name if entity is not None else ""

        for target in merged:
            changes.append({"address": target, "change": "merged", "text": name_of(target)})
        for cause, target in corrected:
            change = "renamed" if cause == "rename" else "separated"
            changes.append({"address": target, "change": change, "text": name_of(target)})
        # New since the page was built; after a merge, every passage of the
        # (merged) entity the page does not cite, since the merged entity's
        # passages are older than the page.
        for passage in self.tx.entities.live_passages(canonical):
            if passage.seq > page.built_at or (merged and passage.id not in cited):
                changes.append(
                    {
                        "address": address("passage", passage.id),
                        "change": "new",
                        "text": passage.text,
                    }
                )
        return changes

    def stale(self, namespace: str, only: Iterable[str] | None = None) -> list[StalePage]:
        restrict, params = restrict_to("e.canonical", only, self.tx.keys_in)
        rows = self.planned(
            f"""SELECT {_COLS}, e.canonical FROM {_FROM}
                WHERE pg.namespace = ? AND {live("pg")} AND {STALE_PAGE} {restrict}
                ORDER BY pg.rowid""",
            (namespace, *params),
        )
        return [
            StalePage(page, self._changes(page, r[12])) for r in rows for page in [_page(r[:12])]
        ]

    def listing(
        self, namespace: str, sort: str, offset: int, limit: int, *, stale: bool = False
    ) -> list[PageListed]:
        only = f"AND {STALE_PAGE}" if stale else ""
        rows = self.all(
            f"""SELECT {_COLS}, c.id, c.name, {STALE_PAGE}
                FROM {_FROM} JOIN entities c ON c.id = e.canonical
                WHERE pg.namespace = ? AND {live("pg")} {only}
                ORDER BY {_PAGE_ORDER[sort]} LIMIT ? OFFSET ?""",
            (namespace, limit, offset),
        )
        return [PageListed(_page(r[:12]), r[12], r[13], bool(r[14])) for r in rows]

    def of_item(self, item: int, namespace: str) -> str | None:
        return self.text(OF_ITEM, (item, namespace))

    def live_count(self, namespace: str, *, stale: bool = False) -> int:
        only = f"AND {STALE_PAGE}" if stale else ""
        return self.number(
            f"SELECT COUNT(*) FROM {_FROM} WHERE pg.namespace = ? AND {live('pg')} {only}",
            (namespace,),
        )

    def counts(self, namespace: str | None = None) -> dict[str, tuple[int, int]]:
        return {
            ns: (int(live), int(stale))
            for ns, live, stale in self.planned(
                f"""SELECT pg.namespace, COUNT(*),
                           SUM(CASE WHEN {STALE_PAGE} THEN 1 ELSE 0 END)
                    FROM {_FROM}
                    WHERE (CAST(?1 AS text) IS NULL OR pg.namespace = ?1) AND {live("pg")}
                    GROUP BY pg.namespace""",
                (namespace,),
            )
        }
