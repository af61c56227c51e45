"""The raw records on SQLite: namespaces, documents, passages, entities,
facts and tombstones (the append-only tables of schema.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memors_core.domain import dates, text
from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address, uuid7
from memors_core.domain.rows import (
    Document,
    DocumentListed,
    DocumentVersion,
    Dropped,
    Ensured,
    Entity,
    Fact,
    IdPair,
    LatestDocument,
    NeedsPage,
    NewPassage,
    Passage,
    PassageShingles,
    Tombstone,
    VersionSize,
)
from memors_core.errors import BadInput, NotFound
from memors_core.log import get_logger
from memors_core.storage.sql.repo import Repo, entity_name, live_alias, named_entities

if TYPE_CHECKING:
    pass

log = get_logger("memors")


#: What :func:`in_order` makes of a row.
T = TypeVar("T")


def live(alias: str) -> str:
    """SQL: the row ``alias`` (with an ``id`` column) has no tombstone."""
    return f"NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = {alias}.id)"


def version_rows(version: int) -> str:
    """SQL: a document's version's passages, ``(passage, position)``, for
    the parameters (document, version). Version 1 is the passages' own
    order (no link rows are written for it, which keeps bulk loads lean);
    later versions are link rows."""
    if version == 1:
        return "SELECT id AS passage, position FROM passages WHERE document = ?1 AND version = ?2"
    return "SELECT passage, position FROM version_passages WHERE document = ?1 AND version = ?2"


def restrict_to(
    column: str, ids: Iterable[str] | None, keys_in: str
) -> tuple[str, tuple[Any, ...]]:
    """An SQL restriction of ``column`` to ``ids`` (None: no restriction),
    matched as the engine matches a key against a list (``tx.keys_in``)."""
    if ids is None:
        return "", ()
    return f"AND {column} {keys_in}", (json.dumps(sorted(ids)),)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SqlNamespaces(Repo):
    def touch(self, namespace: str) -> None:
        with self.tx.later():  # (no answer: it goes with the next statement)
            self.run(
                "INSERT OR IGNORE INTO namespaces(name, created_at) VALUES (?, ?)",
                (namespace, now()),
            )

    def names(self) -> list[str]:
        return [r[0] for r in self.all("SELECT name FROM namespaces ORDER BY name")]


def in_order(repo: Repo, select: str, make: Callable[..., T], ids: Iterable[str]) -> list[T]:
    """The rows of ``select`` (ending ``WHERE ….id IN``, its id second) for
    ``ids``, read in one statement, each made by ``make``: in the order of
    ``ids``, missing ones left out."""
    ids = list(ids)
    if not ids:
        return []
    wanted = json.dumps(sorted(set(ids)))
    rows = {
        r[1]: make(*r)
        for r in repo.planned(f"{select} (SELECT value FROM json_each(?))", (wanted,))
    }
    return [rows[i] for i in ids if i in rows]


def _version(row: tuple[Any, ...]) -> DocumentVersion:
    return DocumentVersion(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5])


_VERSION_COLS = "document, version, text_hash, title, metadata, created_at"
#: A version's columns as ``v``, and the join of a document's row (``d``)
#: to its latest version as ``v``. (Every document has a version 1, written
#: with it.)
_LATEST_COLS = ", ".join(f"v.{c.strip()}" for c in _VERSION_COLS.split(","))
_LATEST_JOIN = """LEFT JOIN document_versions v ON v.document = d.id
    AND v.version = (SELECT MAX(x.version) FROM document_versions x WHERE x.document = d.id)"""


def _latest(row: tuple[Any, ...]) -> LatestDocument:
    """A document's row and its latest version's (``_LATEST_COLS``) as one."""
    last = None if row[4] is None else _version(row[4:])
    return LatestDocument(Document(*row[:4]), row[5], last)


#: The latest version's title, else the URI, else the id: what a document is called.
_DOC_NAME = "lower(COALESCE(v.title, d.uri, d.id))"
#: ORDER BY of each of DOCUMENT_SORTS (the row id breaks ties, so paging is stable).
_DOCUMENT_ORDER = {
    "title": f"{_DOC_NAME}, d.rowid",
    "newest": "d.rowid DESC",
    "oldest": "d.rowid",
}


class SqlDocuments(Repo):
    def get(self, ident: str, namespace: str) -> Document | None:
        row = self.one(
            "SELECT id, namespace, uri, created_at FROM documents WHERE id = ? AND namespace = ?",
            (ident, namespace),
        )
        return None if row is None else Document(*row)

    def labels(
        self, idents: Iterable[str], namespace: str
    ) -> dict[str, tuple[str | None, str | None]]:
        """id -> (its latest version's title, its uri), for the documents of
        ``namespace`` among ``idents``: what a list of citations shows."""
        # (the namespace checked here, as in passages.get_many)
        rows = self.planned(
            f"""SELECT d.id, (SELECT v.title FROM document_versions v WHERE v.document = d.id
                             ORDER BY v.version DESC LIMIT 1), d.uri, d.namespace
               FROM documents d WHERE d.id {self.tx.keys_in}""",
            (json.dumps(sorted(set(idents))),),
        )
        return {r[0]: (r[1], r[2]) for r in rows if r[3] == namespace}

    def latest_by_uri(self, namespace: str, uri: str) -> LatestDocument | None:
        row = self.planned_one(  # (every remember with a uri asks: planned once)
            f"""SELECT d.id, d.namespace, d.uri, d.created_at, {_LATEST_COLS}
                FROM documents d {_LATEST_JOIN}
                WHERE d.namespace = ? AND d.uri = ? AND {live("d")}
                ORDER BY d.rowid DESC LIMIT 1""",
            (namespace, uri),
        )
        return None if row is None else _latest(row)

    def latest_by_uris(self, namespace: str, uris: Iterable[str]) -> dict[str, LatestDocument]:
        wanted = sorted(set(uris))
        if not wanted:
            return {}
        found: dict[str, LatestDocument] = {}
        for row in self.all(
            f"""SELECT d.id, d.namespace, d.uri, d.created_at, {_LATEST_COLS}
                FROM documents d {_LATEST_JOIN}
                WHERE d.namespace = ? AND d.uri IN (SELECT value FROM json_each(?))
                  AND {live("d")}
                ORDER BY d.rowid""",
            (namespace, json.dumps(wanted)),
        ):
            found[row[2]] = _latest(row)  # the newest of a uri wins
        return found

    def listing(self, namespace: str, sort: str, offset: int, limit: int) -> list[DocumentListed]:
        rows = self.all(
            f"""SELECT d.id, d.namespace, d.uri, d.created_at, {_LATEST_COLS}
                FROM documents d JOIN document_versions v ON v.document = d.id
                WHERE d.namespace = ? AND {live("d")}
                  AND v.version = (SELECT MAX(x.version) FROM document_versions x
                                   WHERE x.document = d.id)
                ORDER BY {_DOCUMENT_ORDER[sort]} LIMIT ? OFFSET ?""",
            (namespace, limit, offset),
        )
        # Counted for the rows shown only (in the query above, the rows an
        # OFFSET skips would be counted too).
        counts = dict(
            self.all(
                f"""SELECT p.document, COUNT(*) FROM passages p
                    WHERE p.document IN (SELECT value FROM json_each(?)) AND {live("p")}
                    GROUP BY p.document""",
                (json.dumps([r[0] for r in rows]),),
            )
        )
        return [
            DocumentListed(Document(*r[:4]), _version(r[4:10]), counts.get(r[0], 0)) for r in rows
        ]

    def live_count(self, namespace: str) -> int:
        return self.number(
            f"SELECT COUNT(*) FROM documents d WHERE d.namespace = ? AND {live('d')}",
            (namespace,),
        )

    def insert(self, document: Document) -> None:
        self.insert_many((document,))

    def insert_many(self, documents: Sequence[Document]) -> None:
        if documents:
            self.db.executemany(
                "INSERT INTO documents(id, namespace, uri, created_at) VALUES (?, ?, ?, ?)",
                [(d.id, d.namespace, d.uri, d.created_at) for d in documents],
            )

    def version(self, document: str, version: int) -> DocumentVersion | None:
        row = self.one(
            f"SELECT {_VERSION_COLS} FROM document_versions WHERE document = ? AND version = ?",
            (document, version),
        )
        return None if row is None else _version(row)

    def latest_version(self, document: str) -> DocumentVersion:
        row = self.one(
            f"SELECT {_VERSION_COLS} FROM document_versions WHERE document = ? "
            "ORDER BY version DESC LIMIT 1",
            (document,),
        )
        if row is None:
            raise NotFound(f"no document {address('document', document)}")
        return _version(row)

    def add_version(self, version: DocumentVersion) -> None:
        self.add_versions((version,))

    def add_versions(self, versions: Sequence[DocumentVersion]) -> None:
        if versions:
            self.db.executemany(
                f"INSERT INTO document_versions({_VERSION_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (v.document, v.version, v.text_hash, v.title, dumps(v.metadata), v.created_at)
                    for v in versions
                ],
            )

    def versions(self, document: str) -> list[VersionSize]:
        rows = self.all(
            f"""SELECT {_VERSION_COLS},
                      CASE WHEN v.version = 1
                           THEN (SELECT COUNT(*) FROM passages p
                                 WHERE p.document = v.document AND p.version = 1)
                           ELSE (SELECT COUNT(*) FROM version_passages l
                                 WHERE l.document = v.document AND l.version = v.version)
                      END
               FROM document_versions v WHERE v.document = ? ORDER BY v.version""",
            (document,),
        )
        return [VersionSize(_version(r[:6]), r[6]) for r in rows]

    def version_passages(self, document: str, version: int) -> list[str]:
        sql = f"{version_rows(version)} ORDER BY position"
        return [r[0] for r in self.all(sql, (document, version))]

    def link_passage(self, document: str, version: int, position: int, passage: str) -> None:
        self.link_passages([(document, version, position, passage)])

    def link_passages(self, links: Sequence[tuple[str, int, int, str]]) -> None:
        if links:
            self.db.executemany(
                "INSERT INTO version_passages(document, version, position, passage) "
                "VALUES (?, ?, ?, ?)",
                links,
            )

    def version_dropping(self, passage: str) -> Dropped | None:
        row = self.one(
            """SELECT p.document, MIN(v.version) FROM passages p
               JOIN document_versions v ON v.document = p.document AND v.version > p.version
               WHERE p.id = ?1 AND NOT EXISTS (
                   SELECT 1 FROM version_passages l WHERE l.document = p.document
                   AND l.version = v.version AND l.passage = ?1)
               GROUP BY p.document""",
            (passage,),
        )
        return None if row is None or row[1] is None else Dropped(row[0], row[1])


#: A passage row's columns (alias ``p``) in the order of
#: :class:`Passage`'s fields; an engine's own statements that return passages select these.
PASSAGE_COLS = (
    "p.rowid, p.id, p.namespace, p.document, p.version, p.position, p.text, p.hash, p.created_at"
)


_INSERT_PASSAGE = (
    "INSERT INTO passages(rowid, id, namespace, document, version, position, text, hash, "
    "shingles, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class SqlPassages(Repo):
    def head(self) -> int:
        return self.tx.clock("passages")

    def insert(self, namespace: str, passage: NewPassage, created_at: str) -> int:
        return self.insert_many(namespace, (passage,), created_at)[0]

    def insert_many(
        self, namespace: str, passages: Iterable[NewPassage], created_at: str
    ) -> list[int]:
        passages = list(passages)
        self.tx.reserve("passages", len(passages))
        tick = self.tx.tick
        rows = [
            (
                tick("passages"),
                p.id,
                namespace,
                p.document,
                p.version,
                p.position,
                p.text,
                p.hash,
                p.shingles,
                created_at,
            )
            for p in passages
        ]
        if rows:
            self.db.executemany(_INSERT_PASSAGE, rows)
        return [row[0] for row in rows]

    def add_many(self, namespace: str, passages: Iterable[NewPassage], created_at: str) -> None:
        self.insert_many(namespace, passages, created_at)

    def coming(self, namespace: str, texts: Sequence[str], ahead: object = None) -> None:
        """(SQLite indexes a passage as it is inserted: nothing to read ahead.)"""

    def get(self, ident: str, namespace: str | None = None) -> Passage | None:
        row = self.one(
            f"SELECT {PASSAGE_COLS} FROM passages p WHERE p.id = ?1 "
            "AND (?2 IS NULL OR p.namespace = ?2)",
            (ident, namespace),
        )
        return None if row is None else Passage(*row)

    def get_shown(
        self, ident: str, namespace: str
    ) -> tuple[Passage, Tombstone | None, list[str]] | None:
        # Three look-ups: on SQLite each costs microseconds, and one
        # statement joining them (a LEFT JOIN, a grouped subquery) measured
        # slower than the three. PostgreSQL, paying a round trip for each,
        # asks once (PgPassages).
        row = self.get(ident, namespace)
        if row is None:
            return None
        return row, self.tx.tombstones.get(ident), self.entities_of(ident)

    def get_many(self, idents: Iterable[str], namespace: str) -> dict[str, Passage]:
        # (the namespace is checked here: in the WHERE clause, SQLite's
        # planner walked the namespace's index instead of the ids)
        rows = self.all(
            f"SELECT {PASSAGE_COLS} FROM passages p WHERE p.id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(idents))),),
        )
        return {r[1]: Passage(*r) for r in rows if r[2] == namespace}

    def hash_of(self, ident: str) -> str | None:
        return self.text("SELECT hash FROM passages WHERE id = ?", (ident,))

    def by_ids(self, ids: Iterable[str]) -> list[Passage]:
        return in_order(self, f"SELECT {PASSAGE_COLS} FROM passages p WHERE p.id IN", Passage, ids)

    def live_of_document(self, document: str) -> list[str]:
        return [
            r[0]
            for r in self.all(
                f"SELECT p.id FROM passages p WHERE p.document = ? AND {live('p')} ORDER BY p.rowid",
                (document,),
            )
        ]

    def mention(self, passage: str, entities: Iterable[str]) -> None:
        self.mention_many((passage, e) for e in entities)

    def mention_many(self, pairs: Iterable[tuple[str, str]]) -> None:
        rows = list(pairs)
        if rows:
            self.db.executemany(
                "INSERT OR IGNORE INTO mentions(passage, entity) VALUES (?, ?)", rows
            )

    def entities_of(self, passage: str) -> list[str]:
        return [
            r[0]
            for r in self.all(
                "SELECT e.canonical FROM mentions m JOIN entities e ON e.id = m.entity "
                "WHERE m.passage = ? GROUP BY e.canonical ORDER BY MIN(e.rowid)",
                (passage,),
            )
        ]

    def entities_of_many(self, passages: Iterable[str]) -> dict[str, list[str]]:
        wanted = sorted(set(passages))
        found: dict[str, list[str]] = {}
        if wanted:
            for passage, canonical in self.planned(
                "SELECT m.passage, e.canonical FROM mentions m JOIN entities e ON e.id = m.entity "
                "WHERE m.passage IN (SELECT value FROM json_each(?)) "
                "GROUP BY m.passage, e.canonical ORDER BY m.passage, MIN(e.rowid)",
                (json.dumps(wanted),),
            ):
                found.setdefault(passage, []).append(canonical)
        return found

    def live_of_version(self, document: str, version: int) -> list[tuple[str, list[str]]]:
        # One statement where a remember's answer took three: on a server
        # engine each is a round trip. Planned once per connection: on
        # PostgreSQL planning it took 0.43 ms of a small remember's 3.8,
        # running it 0.03.
        found: dict[str, list[str]] = {}
        for passage, canonical in self.planned(
            f"""SELECT x.passage, e.canonical FROM ({version_rows(version)}) x
                LEFT JOIN mentions m ON m.passage = x.passage
                LEFT JOIN entities e ON e.id = m.entity
                WHERE NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = x.passage)
                GROUP BY x.position, x.passage, e.canonical
                ORDER BY x.position, MIN(e.rowid)""",
            (document, version),
        ):
            named = found.setdefault(passage, [])
            if canonical is not None:
                named.append(canonical)
        return list(found.items())

    def live_hashes_of_version(self, document: str, version: int) -> list[tuple[str, str]]:
        # (planned once per connection: every new version of a document asks)
        return [
            (passage, digest)
            for passage, digest in self.planned(
                f"""SELECT x.passage, p.hash FROM ({version_rows(version)}) x
                    JOIN passages p ON p.id = x.passage
                    WHERE NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = x.passage)
                    ORDER BY x.position""",
                (document, version),
            )
        ]

    def live_shingles(
        self,
        namespace: str,
        after: int = 0,
        seqs: Iterable[int] | None = None,
        ids: Iterable[str] | None = None,
    ) -> Iterator[PassageShingles]:
        if seqs is None and ids is None:
            cur = self.db.execute(
                f"""SELECT p.rowid, p.id, p.document, p.shingles FROM passages p
                    WHERE p.namespace = ? AND p.rowid > ? AND {live("p")} ORDER BY p.rowid""",
                (namespace, after),
            )
        else:
            # The wanted rows drive the join (each one found by its key),
            # never a walk of the namespace's passages.
            column = "rowid" if ids is None else "id"
            wanted: Iterable[int | str] = (seqs or ()) if ids is None else ids
            key = "CAST(j.value AS INTEGER)" if ids is None else "j.value"
            cur = self.db.execute(
                f"""SELECT p.rowid, p.id, p.document, p.shingles
                    FROM json_each(?) j CROSS JOIN passages p ON p.{column} = {key}
                    WHERE p.namespace = ? AND p.rowid > ? AND {live("p")} ORDER BY p.rowid""",
                (json.dumps(sorted(set(wanted))), namespace, after),
            )
            if ids is not None and seqs is not None:
                keep = set(seqs)
                cur = (row for row in cur if row[0] in keep)
        return map(PassageShingles._make, cur)

    def live_count(self, namespace: str) -> int:
        return self.number(
            f"SELECT COUNT(*) FROM passages p WHERE p.namespace = ? AND {live('p')}", (namespace,)
        )

    def profiles(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        return dict(
            self.all(
                "SELECT passage, data FROM passage_profiles "
                "WHERE passage IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(set(ids))),),
            )
        )

    def add_profiles(self, rows: Sequence[tuple[str, str]]) -> None:
        rows = list(rows)
        if rows:
            self.db.executemany(
                "INSERT OR IGNORE INTO passage_profiles(passage, data) VALUES (?, ?)", rows
            )

    def live(self, namespace: str) -> Iterator[Passage]:
        cur = self.db.execute(
            f"SELECT {PASSAGE_COLS} FROM passages p WHERE p.namespace = ? AND {live('p')} "
            "ORDER BY p.rowid",
            (namespace,),
        )
        for row in cur:
            yield Passage(*row)


_ENTITY_COLS = f"e.rowid, e.id, e.namespace, {entity_name('e')}, e.canonical, e.created_at"


#: A LIMIT that keeps every row (both engines take it; SQLite's -1 is not PostgreSQL's).
_ALL = 2**62


class SqlEntities(Repo):
    def find(self, name: str, namespace: str) -> str | None:
        key = text.match_key(name)
        # (a remember asks for each name it links: planned once a connection)
        row = self.planned_one(
            "SELECT canonical FROM entities WHERE namespace = ? AND key = ?", (namespace, key)
        )
        if row is None:
            row = self.planned_one(
                "SELECT e.canonical FROM aliases a JOIN entities e ON e.id = a.entity "
                f"WHERE a.namespace = ? AND a.key = ? AND {live_alias('a')} "
                "ORDER BY e.rowid LIMIT 1",
                (namespace, key),
            )
        return None if row is None else row[0]

    def named(self, namespace: str, folded: Iterable[str]) -> dict[str, str]:
        return named_entities(self.planned, namespace, folded)

    def resolve(self, name_or_address: str, namespace: str) -> str:
        if name_or_address.startswith("memo://"):
            _, ident = parse_address(name_or_address, expect=("entity",))
            entity = self.get(ident, namespace)
            if entity is None:
                raise NotFound(f"no entity {name_or_address} in namespace {namespace!r}")
            return entity.canonical
        found = self.find(name_or_address, namespace)
        if found is None:
            raise NotFound(f"no entity named {name_or_address!r} in namespace {namespace!r}")
        return found

    def ensure(self, name: str, namespace: str) -> Ensured:
        clean = " ".join(name.split())
        if not clean:
            raise BadInput("an entity name must not be empty")
        if len(clean) > 200:
            raise BadInput(f"entity name too long ({len(clean)} characters; at most 200)")
        found = self.find(clean, namespace)
        if found is None:
            found = self._found_once_claimed(clean, namespace)
        if found is not None:
            return Ensured(found, False)
        ident = uuid7()
        self.run(
            "INSERT INTO entities(id, namespace, name, key, folded, canonical, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (ident, namespace, clean, text.match_key(clean), text.fold_name(clean), ident, now()),
        )
        self.tx.after_commit(
            log.info, "entity_created", namespace=namespace, entity=address("entity", ident)
        )
        return Ensured(ident, True)

    def _found_once_claimed(self, name: str, namespace: str) -> str | None:
        """The entity ``name`` (found new) names once this write may make
        it, where its engine runs writes of the namespace together (None:
        it may make it now)."""
        return None

    def get(self, ident: str, namespace: str | None = None) -> Entity | None:
        row = self.planned_one(
            f"SELECT {_ENTITY_COLS} FROM entities e WHERE e.id = ?1 "
            "AND (CAST(?2 AS text) IS NULL OR e.namespace = ?2)",
            (ident, namespace),
        )
        return None if row is None else Entity(*row)

    def get_many(self, ids: Iterable[str]) -> dict[str, Entity]:
        rows = self.planned(
            f"SELECT {_ENTITY_COLS} FROM entities e WHERE e.id {self.tx.keys_in}",
            (json.dumps(sorted(set(ids))),),
        )
        return {r[1]: Entity(*r) for r in rows}

    def require(self, ident: str) -> Entity:
        entity = self.get(ident)
        if entity is None:
            raise NotFound(f"no entity {address('entity', ident)}")
        return entity

    def canonical_of(self, ids: Iterable[str]) -> set[str]:
        ids = list(ids)
        if not ids:
            return set()
        return {
            r[0]
            for r in self.planned(
                "SELECT DISTINCT canonical FROM entities "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(ids)),),
            )
        }

    def canonical_list(self, namespace: str) -> list[Entity]:
        return self.listed(namespace)[0]

    def listed(
        self, namespace: str, offset: int = 0, limit: int | None = None
    ) -> tuple[list[Entity], int]:
        if limit != 0:
            rows = self.planned(
                f"SELECT {_ENTITY_COLS}, COUNT(*) OVER () FROM entities e WHERE e.namespace = ? "
                "AND e.canonical = e.id ORDER BY 4, e.rowid LIMIT ? OFFSET ?",
                (namespace, _ALL if limit is None else limit, offset),
            )
            if rows:
                return [Entity(*r[:6]) for r in rows], int(rows[0][6])
        # (the count alone, or past the last page: no row carries it)
        total = self.number(
            "SELECT COUNT(*) FROM entities WHERE namespace = ? AND canonical = id", (namespace,)
        )
        return [], total

    def count(self, namespace: str) -> int:
        return self.number("SELECT COUNT(*) FROM entities WHERE namespace = ?", (namespace,))

    def aliases(self, canonical: str) -> list[str]:
        return self.aliases_of([self.require(canonical)]).get(canonical, [])

    def aliases_of(self, entities: Iterable[Entity]) -> dict[str, list[str]]:
        # Aliases first, then the names of entities merged into this one
        # (the merge kind also records those as aliases; the dedup below keeps one).
        # A renamed entity's name as first written is one of its other names.
        name_of = {e.id: e.name for e in entities}
        names: dict[str, list[str]] = {}
        for entity, *_order, name in self.planned(
            f"""SELECT a.entity, 0, a.created_at, a.alias FROM aliases a
                WHERE a.entity IN (SELECT value FROM json_each(?1)) AND {live_alias("a")}
                UNION ALL SELECT canonical, 1, created_at, name FROM entities
                WHERE canonical IN (SELECT value FROM json_each(?1)) ORDER BY 1, 2, 3, 4""",
            (json.dumps(sorted(name_of)),),
        ):
            names.setdefault(entity, []).append(name)
        out: dict[str, list[str]] = {}
        for entity, name in name_of.items():
            seen = {text.match_key(name)}
            kept = out[entity] = []
            for n in names.get(entity, ()):
                k = text.match_key(n)
                if k not in seen:
                    seen.add(k)
                    kept.append(n)
        return out

    def add_alias(
        self, entity: str, namespace: str, alias: str, correction: int | None = None
    ) -> bool:
        key = text.match_key(alias)
        added = self.run(
            "INSERT OR IGNORE INTO aliases(entity, namespace, alias, key, folded, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (entity, namespace, alias, key, text.fold_name(alias), now()),
        )
        if added:
            return True
        if self._alias_state(entity, key) == "retracted":
            self._alias_change(entity, namespace, key, "restored", correction)
            return True
        return False

    def _alias_state(self, entity: str, key: str) -> str:
        return (
            self.scalar(
                "SELECT state FROM alias_changes WHERE entity = ? AND key = ? "
                "ORDER BY rowid DESC LIMIT 1",
                (entity, key),
            )
            or "restored"
        )

    def _alias_change(
        self, entity: str, namespace: str, key: str, state: str, correction: int | None
    ) -> None:
        self.run(
            "INSERT INTO alias_changes(entity, namespace, key, state, correction, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (entity, namespace, key, state, correction, now()),
        )

    def retract_alias(self, entity: str, namespace: str, alias: str, correction: int) -> bool:
        key = text.match_key(alias)
        if (
            self.one("SELECT 1 FROM aliases WHERE entity = ? AND key = ?", (entity, key)) is None
            or self._alias_state(entity, key) == "retracted"
        ):
            return False
        self._alias_change(entity, namespace, key, "retracted", correction)
        return True

    def rename(self, entity: str, namespace: str, name: str, correction: int) -> None:
        self.run(
            "INSERT INTO entity_names(entity, namespace, name, correction, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (entity, namespace, name, correction, now()),
        )
        self.add_alias(entity, namespace, name, correction)

    def separate(self, ids: Iterable[str], canonical: str) -> list[str]:
        ids = sorted(set(ids))
        moved = [
            r[0]
            for r in self.all(
                "SELECT id FROM entities WHERE id IN (SELECT value FROM json_each(?)) "
                "AND canonical <> ? ORDER BY rowid",
                (json.dumps(ids), canonical),
            )
        ]
        if moved:
            self.run(
                "UPDATE entities SET canonical = ? WHERE id IN (SELECT value FROM json_each(?))",
                (canonical, json.dumps(moved)),
            )
        return moved

    def merged_ids(self, canonical: str) -> list[str]:
        return [
            r[0]
            for r in self.all(
                "SELECT id FROM entities WHERE canonical = ? ORDER BY rowid", (canonical,)
            )
        ]

    def live_passages(self, canonical: str) -> list[Passage]:
        return [
            Passage(*r)
            for r in self.all(
                f"""SELECT DISTINCT {PASSAGE_COLS}
                    FROM entities e JOIN mentions m ON m.entity = e.id
                    JOIN passages p ON p.id = m.passage
                    WHERE e.canonical = ? AND {live("p")} ORDER BY p.rowid""",
                (canonical,),
            )
        ]

    def live_passages_of(self, canonicals: Iterable[str]) -> dict[str, list[Passage]]:
        found: dict[str, list[Passage]] = {}
        for r in self.planned(
            f"""SELECT DISTINCT e.canonical, {PASSAGE_COLS}
                FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.canonical {self.tx.keys_in} AND {live("p")}
                ORDER BY e.canonical, p.rowid""",
            (json.dumps(sorted(set(canonicals))),),
        ):
            found.setdefault(r[0], []).append(Passage(*r[1:]))
        return found

    def live_passage_count(self, canonical: str) -> int:
        return self.number(
            f"""SELECT COUNT(DISTINCT p.id)
                FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.canonical = ? AND {live("p")}""",
            (canonical,),
        )

    def live_passage_counts(self, canonicals: Iterable[str]) -> dict[str, int]:
        # The mentions alone (their index holds both columns): a purged
        # passage's mentions go with it, so each mention names a stored passage.
        return dict(
            self.planned(
                """SELECT e.canonical, COUNT(DISTINCT m.passage)
                   FROM entities e JOIN mentions m ON m.entity = e.id
                   WHERE e.canonical IN (SELECT value FROM json_each(?))
                   AND NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = m.passage)
                   GROUP BY e.canonical""",
                (json.dumps(sorted(set(canonicals))),),
            )
        )

    def absorbed(self, canonical: str) -> list[Entity]:
        return [
            Entity(*r)
            for r in self.all(
                f"SELECT {_ENTITY_COLS} FROM entities e WHERE e.canonical = ?1 AND e.id <> ?1 "
                "ORDER BY e.rowid",
                (canonical,),
            )
        ]

    def needing_page(
        self, namespace: str, min_passages: int, only: Iterable[str] | None = None
    ) -> list[NeedsPage]:
        restrict, params = restrict_to("e.canonical", only, self.tx.keys_in)
        return [
            NeedsPage(canonical, n)
            for canonical, n in self.planned(
                f"""SELECT e.canonical, COUNT(DISTINCT p.rowid) AS n
                FROM entities e JOIN mentions m ON m.entity = e.id
                JOIN passages p ON p.id = m.passage
                WHERE e.namespace = ? AND {live("p")} {restrict}
                GROUP BY e.canonical
                HAVING COUNT(DISTINCT p.rowid) >= ? AND NOT EXISTS (
                    SELECT 1 FROM pages pg JOIN entities pe ON pe.id = pg.entity
                    WHERE pe.canonical = e.canonical AND {live("pg")})
                ORDER BY MIN(e.rowid)""",
                (namespace, *params, min_passages),
            )
        ]

    def orphans(self, namespace: str) -> list[str]:
        rows = self.all(
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

    def merge(self, survivor: str, absorbed: str, namespace: str) -> None:
        self.run(
            "UPDATE entities SET canonical = ? WHERE canonical = ? AND namespace = ?",
            (survivor, absorbed, namespace),
        )

    def same_name_pairs(self, namespace: str, only: Iterable[str] | None = None) -> list[IdPair]:
        params: tuple[Any, ...] = ()
        restrict = ""
        if only is not None:
            ids = json.dumps(sorted(only))
            restrict = (
                "AND (a.id IN (SELECT value FROM json_each(?)) "
                "OR b.id IN (SELECT value FROM json_each(?)))"
            )
            params = (ids, ids)
        return [
            IdPair(a, b)
            for a, b in self.planned(
                f"""SELECT a.id, b.id FROM entities a JOIN entities b
                 ON b.namespace = a.namespace AND b.folded = a.folded AND b.rowid > a.rowid
               WHERE a.namespace = ? AND a.canonical = a.id AND b.canonical = b.id
                 AND a.folded <> '' {restrict}
               UNION
               SELECT al.entity, b.id FROM aliases al JOIN entities b
                 ON b.namespace = al.namespace AND b.folded = al.folded
               JOIN entities a ON a.id = al.entity
               WHERE al.namespace = ? AND a.canonical = a.id AND b.canonical = b.id
                 AND {live_alias("al")}
                 AND b.id <> a.id AND al.folded <> '' {restrict}""",
                (namespace, *params, namespace, *params),
            )
        ]


_FACT_COLS = (
    f"f.rowid, f.id, f.namespace, f.subject, ce.id, {entity_name('ce')}, f.predicate, f.value, "
    "f.valid_from, f.valid_to, f.from_ts, f.to_ts, f.source, f.recorded_at"
)
_FACT_FROM = "facts f JOIN entities e ON e.id = f.subject JOIN entities ce ON ce.id = e.canonical"
#: Two facts ``a`` and ``b`` disagree (both live): one subject after merges,
#: predicates fold equal, values do not, half-open validity overlaps.
_DISAGREE = f"""a.predicate_folded = b.predicate_folded AND a.value_folded <> b.value_folded
    AND (a.from_ts IS NULL OR b.to_ts IS NULL OR a.from_ts < b.to_ts)
    AND (b.from_ts IS NULL OR a.to_ts IS NULL OR b.from_ts < a.to_ts)
    AND {live("a")} AND {live("b")}"""

#: A live fact ``n`` takes over from ``f`` (of ``_FACT_FROM``): one subject after
#: merges, predicates that fold equal, a validity that reaches past ``f``'s end.
_FOLLOWED = f"""SELECT 1 FROM facts n JOIN entities en ON en.id = n.subject
    WHERE en.canonical = e.canonical AND n.predicate_folded = f.predicate_folded
    AND n.id <> f.id AND (n.to_ts IS NULL OR n.to_ts > f.to_ts) AND {live("n")}"""


class SqlFacts(Repo):
    def record(
        self,
        namespace: str,
        subject: str,
        predicate: str,
        value: str,
        valid_from: str | None = None,
        valid_to: str | None = None,
        source: str | None = None,
    ) -> str:
        from_ts, to_ts = dates.interval(valid_from, valid_to)
        source_id = None
        if source is not None:
            _, source_id = parse_address(source, expect=("passage",))
            if self.tx.passages.get(source_id, namespace) is None:
                raise NotFound(f"no passage {source} in namespace {namespace!r}")
        entity = self.tx.entities.ensure(subject, namespace).id
        ident = uuid7()
        with self.tx.later():  # (no answer: it goes with the next statement or the commit)
            self.run(
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

    def copy(self, ident: str, valid_from: str | None, valid_to: str | None, at: str) -> str:
        from_ts, to_ts = dates.interval(valid_from, valid_to)
        copy = uuid7()
        self.run(
            "INSERT INTO facts(id, namespace, subject, predicate, value, predicate_folded, "
            "value_folded, valid_from, valid_to, from_ts, to_ts, source, recorded_at) "
            "SELECT ?, namespace, subject, predicate, value, predicate_folded, value_folded, "
            "?, ?, ?, ?, source, ? FROM facts WHERE id = ?",
            (copy, valid_from, valid_to, from_ts, to_ts, at, ident),
        )
        return copy

    def get(self, ident: str, namespace: str | None = None) -> Fact | None:
        row = self.planned_one(
            f"SELECT {_FACT_COLS} FROM {_FACT_FROM} WHERE f.id = ?1 "
            "AND (CAST(?2 AS text) IS NULL OR f.namespace = ?2)",
            (ident, namespace),
        )
        return None if row is None else Fact(*row)

    def by_ids(self, ids: Iterable[str]) -> list[Fact]:
        return in_order(self, f"SELECT {_FACT_COLS} FROM {_FACT_FROM} WHERE f.id IN", Fact, ids)

    def of_entity(self, canonical: str) -> list[Fact]:
        return [
            Fact(*r)
            for r in self.all(
                f"SELECT {_FACT_COLS} FROM {_FACT_FROM} "
                f"WHERE e.canonical = ? AND {live('f')} ORDER BY f.rowid",
                (canonical,),
            )
        ]

    def of_entities(self, canonicals: Iterable[str]) -> dict[str, list[Fact]]:
        found: dict[str, list[Fact]] = {}
        for r in self.planned(
            f"SELECT e.canonical, {_FACT_COLS} FROM {_FACT_FROM} "
            f"WHERE e.canonical IN (SELECT value FROM json_each(?)) AND {live('f')} "
            "ORDER BY f.rowid",
            (json.dumps(sorted(set(canonicals))),),
        ):
            found.setdefault(r[0], []).append(Fact(*r[1:]))
        return found

    def live_counts_of(self, canonicals: Iterable[str]) -> dict[str, int]:
        return dict(
            self.planned(
                f"""SELECT e.canonical, COUNT(*) FROM facts f JOIN entities e ON e.id = f.subject
                    WHERE e.canonical IN (SELECT value FROM json_each(?)) AND {live("f")}
                    GROUP BY e.canonical""",
                (json.dumps(sorted(set(canonicals))),),
            )
        )

    def history(self, canonical: str) -> list[Fact]:
        return [
            Fact(*r)
            for r in self.all(
                f"SELECT {_FACT_COLS} FROM {_FACT_FROM} WHERE e.canonical = ? ORDER BY f.rowid",
                (canonical,),
            )
        ]

    def live(self, namespace: str) -> list[Fact]:
        return [
            Fact(*r)
            for r in self.all(
                f"SELECT {_FACT_COLS} FROM {_FACT_FROM} "
                f"WHERE f.namespace = ? AND {live('f')} ORDER BY f.rowid",
                (namespace,),
            )
        ]

    def conflicting(self, namespace: str, only: Iterable[str] | None = None) -> list[IdPair]:
        restrict, params = restrict_to("ea.canonical", only, self.tx.keys_in)
        return [
            IdPair(a, b)
            for a, b in self.planned(
                f"""SELECT a.id, b.id
                FROM facts a JOIN entities ea ON ea.id = a.subject
                JOIN entities eb ON eb.canonical = ea.canonical
                JOIN facts b ON b.subject = eb.id AND b.predicate_folded = a.predicate_folded
                WHERE a.namespace = ? AND a.rowid < b.rowid AND {_DISAGREE} {restrict}
                ORDER BY a.rowid, b.rowid""",
                (namespace, *params),
            )
        ]

    def disagree(self, a: str, b: str) -> bool:
        return (
            self.one(
                f"""SELECT 1 FROM facts a JOIN entities ea ON ea.id = a.subject,
                facts b JOIN entities eb ON eb.id = b.subject
                WHERE a.id = ? AND b.id = ? AND ea.canonical = eb.canonical AND {_DISAGREE}""",
                (a, b),
            )
            is not None
        )

    def expired(self, namespace: str, now_ts: str, *, history: bool = True) -> list[Fact]:
        # History: recorded once its validity had ended (a bounded copy, a fact
        # about the past), or followed by a live fact on the same subject and
        # predicate whose validity reaches past its end.
        past = "" if history else f"AND f.to_ts > f.recorded_at AND NOT EXISTS ({_FOLLOWED})"
        return [
            Fact(*r)
            for r in self.all(
                f"SELECT {_FACT_COLS} FROM {_FACT_FROM} WHERE f.namespace = ? "
                f"AND f.to_ts IS NOT NULL AND f.to_ts <= ? AND {live('f')} {past} "
                "ORDER BY f.rowid",
                (namespace, now_ts),
            )
        ]

    def bounded_copy(self, ident: str, at: str) -> str | None:
        return self.text(
            "SELECT c.id FROM facts f JOIN facts c ON c.subject = f.subject "
            "AND c.predicate = f.predicate AND c.value = f.value "
            "WHERE f.id = ? AND c.id <> f.id AND c.recorded_at = ? ORDER BY c.rowid LIMIT 1",
            (ident, at),
        )


#: A tombstone row's columns in the order of :class:`Tombstone`'s fields.
TOMBSTONE_COLS = "rowid, namespace, target, type, state, reason, item, created_at"


class SqlTombstones(Repo):
    def head(self) -> int:
        return self.tx.clock("tombstones")

    def state(self, ident: str) -> str:
        row = self.one("SELECT state FROM tombstones WHERE target = ?", (ident,))
        return "live" if row is None else row[0]

    def is_live(self, ident: str) -> bool:
        return self.one("SELECT 1 FROM tombstones WHERE target = ?", (ident,)) is None

    def get(self, ident: str) -> Tombstone | None:
        row = self.one(f"SELECT {TOMBSTONE_COLS} FROM tombstones WHERE target = ?", (ident,))
        return None if row is None else Tombstone(*row)

    def get_many(self, idents: Iterable[str]) -> dict[str, Tombstone]:
        rows = self.all(
            f"SELECT {TOMBSTONE_COLS} FROM tombstones WHERE target {self.tx.keys_in}",
            (json.dumps(sorted(set(idents))),),
        )
        return {r[2]: Tombstone(*r) for r in rows}

    def add(
        self,
        namespace: str,
        kind: str,
        ident: str,
        state: str,
        reason: str | None = None,
        item: int | None = None,
        at: str | None = None,
    ) -> bool:
        return bool(self.add_many(namespace, kind, [ident], state, reason, item, at))

    def add_many(
        self,
        namespace: str,
        kind: str,
        idents: Iterable[str],
        state: str,
        reason: str | None = None,
        item: int | None = None,
        at: str | None = None,
    ) -> list[str]:
        # A few statements whatever the number of rows: forgetting a document
        # of thousands of passages is not thousands of round trips.
        idents = list(dict.fromkeys(idents))
        if not idents:
            return []
        dead = {
            r[0]
            for r in self.all(
                "SELECT target FROM tombstones WHERE target IN (SELECT value FROM json_each(?))",
                (json.dumps(idents),),
            )
        }
        fresh = [i for i in idents if i not in dead]
        if not fresh:
            return []
        when = at or now()
        self.tx.reserve("tombstones", len(fresh))
        self.db.executemany(
            "INSERT INTO tombstones(rowid, namespace, target, type, state, reason, item, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self.tx.tick("tombstones"), namespace, i, kind, state, reason, item, when)
                for i in fresh
            ],
        )
        if kind == "passage":
            self.tx.pages.mark_citing_many(fresh, state)
        elif kind == "fact":
            for ident in fresh:
                self.tx.pages.mark_built_with(ident, state)
        event = "fact_superseded" if (kind == "fact" and state == "superseded") else None
        for ident in fresh:
            self.tx.after_commit(
                log.info,
                event or f"{kind}_{state}",
                namespace=namespace,
                address=address(kind, ident),
                reason=reason,
                item=item,
            )
        return fresh

    def by_item(self, namespace: str, item: int) -> list[Tombstone]:
        return [
            Tombstone(*r)
            for r in self.all(
                f"SELECT {TOMBSTONE_COLS} FROM tombstones WHERE namespace = ? AND item = ? "
                "ORDER BY rowid",
                (namespace, item),
            )
        ]

    def since(self, namespace: str, after: int) -> list[Tombstone]:
        return [
            Tombstone(*r)
            for r in self.all(
                f"SELECT {TOMBSTONE_COLS} FROM tombstones WHERE namespace = ? AND rowid > ? "
                "ORDER BY rowid",
                (namespace, after),
            )
        ]
