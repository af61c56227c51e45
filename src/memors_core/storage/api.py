"""The storage boundary: what an engine implements, what the rest may call.

Everything above this line (the engine, the kinds, :class:`Memory`) talks
to a store through these protocols only; everything below it (one package
per engine: :mod:`memors_core.storage.sqlite`, later PostgreSQL) owns its
SQL. Methods are shaped by the domain — "the entity's current page", "the
entities that need a page" — never by a table, and take and return the
typed rows of :mod:`memors_core.domain.rows`.

A transaction is a :class:`Tx`: ``with storage.write() as tx:`` (nested
writes are savepoints) or ``with storage.read() as tx:`` (one snapshot).
Every method of a repository runs inside the transaction it came from and
opens none of its own. State-change log events go through
:meth:`Tx.after_commit`, so a log never reports what did not happen.

The rules the kinds, lint and metrics share ("needs a page", "stale",
"disagree") are named queries here, with their thresholds in
:mod:`memors_core.domain.rules`: one definition each, per engine.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import attrs

from memors_core.domain.rows import (
    BadPendingPurge,
    Correction,
    Document,
    DocumentListed,
    DocumentVersion,
    Dropped,
    Ensured,
    Entity,
    Fact,
    IdPair,
    Item,
    LatestDocument,
    MergeCandidate,
    NeedsPage,
    NewPassage,
    Opened,
    OpenKey,
    Page,
    PageListed,
    PageSentence,
    PageSource,
    Passage,
    PassageShingles,
    PendingPurge,
    PurgeRecord,
    ScanMark,
    StalePage,
    Tombstone,
    VersionSize,
)
from memors_core.domain.search import Hit, Ranked, SearchQuery
from memors_core.semantic import KIND

#: What a brief read returns (:meth:`Storage.brief_read`).
_T = TypeVar("_T")


@attrs.frozen
class Capabilities:
    """What an engine promises beyond the protocol. The contract suite
    asserts a guarantee only where the engine declares it."""

    #: Purge overwrites the freed space, so erased text is not in the file.
    secure_erase: bool = False
    #: ``backup`` copies a live store consistently while it is in use.
    online_backup: bool = False
    #: A read-only open that takes no lock and writes nothing (lint).
    immutable_read: bool = False
    #: Many processes on many hosts share the store.
    shared: bool = False
    #: Passages' vectors are kept and searched (:class:`Vectors`,
    #: :meth:`Search.passages_like`); SQLite always, PostgreSQL where the
    #: server has pgvector.
    vectors: bool = False
    #: Why not, when :attr:`vectors` is False: one line a user can act on.
    vectors_missing: str = ""
    #: A namespace's compaction scans wait only for each other, never for
    #: its other writers (a scan's turn is a lock of its own): a compaction
    #: scans all its kinds in one turn, each kind in a savepoint. Where a
    #: scan takes the writers' turn too (SQLite's one write lock), each
    #: kind is a transaction of its own, so writers go between them.
    scans_beside_writes: bool = False
    #: Documents a bulk load stores per transaction by default (a server
    #: engine's index work at commit costs less per document in larger ones).
    bulk_documents: int = 500


class Namespaces(Protocol):
    """The namespaces of a store: separate memories that share nothing."""

    def touch(self, namespace: str) -> None:
        """Record that ``namespace`` is in use (idempotent; write)."""

    def names(self) -> list[str]:
        """Every namespace that was ever written to, sorted."""


class Documents(Protocol):
    """Ingested documents and their versions (a re-ingest of a changed text adds one)."""

    def get(self, ident: str, namespace: str) -> Document | None:
        """The document ``ident`` of ``namespace``, forgotten or not; None if there is none."""

    def labels(
        self, idents: Iterable[str], namespace: str
    ) -> dict[str, tuple[str | None, str | None]]:
        """id -> (the latest version's title, the uri) of the documents of
        ``namespace`` among ``idents``, forgotten or not, in one look-up."""

    def latest_by_uri(self, namespace: str, uri: str) -> LatestDocument | None:
        """The newest live document with ``uri``, its latest version number
        and that version's row (``LatestDocument(document, version, last)``)."""

    def latest_by_uris(self, namespace: str, uris: Iterable[str]) -> dict[str, LatestDocument]:
        """:meth:`latest_by_uri` of many uris in one look-up: each uri that
        names a live document, with that document and its latest version number."""

    def insert(self, document: Document) -> None:
        """Store a new document (write); its versions are added with :meth:`add_version`."""

    def insert_many(self, documents: Sequence[Document]) -> None:
        """Store new documents (write), in one statement on a server engine."""

    def version(self, document: str, version: int) -> DocumentVersion | None:
        """One version of a document; None if the document has no such version."""

    def latest_version(self, document: str) -> DocumentVersion:
        """The document's newest version; NotFound if it has none."""

    def add_version(self, version: DocumentVersion) -> None:
        """Store one version of a document (write); its number must be new for the document."""

    def add_versions(self, versions: Sequence[DocumentVersion]) -> None:
        """Store versions (write), in one statement on a server engine: :meth:`add_version` each."""

    def versions(self, document: str) -> list[VersionSize]:
        """Every version, oldest first, with how many passages it has
        (``VersionSize(version, passages)``)."""

    def version_passages(self, document: str, version: int) -> list[str]:
        """The passage ids of one version of a document, in order."""

    def link_passage(self, document: str, version: int, position: int, passage: str) -> None:
        """Place ``passage`` at ``position`` of a later version (version 1's
        order is its passages' own)."""

    def link_passages(self, links: Sequence[tuple[str, int, int, str]]) -> None:
        """:meth:`link_passage` of many ``(document, version, position,
        passage)``, in one statement where the engine pays a round trip
        for each."""

    def version_dropping(self, passage: str) -> Dropped | None:
        """The document version that no longer holds ``passage``, if one does
        not: ``Dropped(document, version)``, the first such version."""

    def listing(self, namespace: str, sort: str, offset: int, limit: int) -> list[DocumentListed]:
        """One page of the namespace's live documents, each with its latest
        version and how many live passages it has (``DocumentListed(document,
        latest, passages)``); ``sort`` is one of
        :data:`~memors_core.domain.rows.DOCUMENT_SORTS`."""

    def live_count(self, namespace: str) -> int:
        """How many live documents the namespace has."""


class Passages(Protocol):
    """The passages of documents: append-only, numbered by the passage clock (``seq``)."""

    def head(self) -> int:
        """The passage clock: the ``seq`` of the newest passage ever stored
        (0 for none); never goes back, not even after a purge."""

    def insert(self, namespace: str, passage: NewPassage, created_at: str) -> int:
        """Store one passage (write); returns its ``seq``, the next value of the clock."""

    def get(self, ident: str, namespace: str | None = None) -> Passage | None:
        """The passage ``ident``, forgotten and superseded ones too (only in ``namespace``
        if given); None if there is none."""

    def get_shown(
        self, ident: str, namespace: str
    ) -> tuple[Passage, Tombstone | None, list[str]] | None:
        """What ``get`` shows of the passage ``ident`` of ``namespace``
        (forgotten and superseded ones too) in one look-up: the row, its
        tombstone (None while it is live) and :meth:`entities_of`; None if
        there is none."""

    def get_many(self, idents: Iterable[str], namespace: str) -> dict[str, Passage]:
        """:meth:`get` of many passages of ``namespace`` in one look-up (id -> row;
        those that are not there left out)."""

    def hash_of(self, ident: str) -> str | None:
        """The content hash of the passage ``ident``, live or not; None if there is none."""

    def by_ids(self, ids: Iterable[str]) -> list[Passage]:
        """The passages with these ids, in the order given (missing ones left out)."""

    def live_of_document(self, document: str) -> list[str]:
        """The ids of the document's live passages (of every version), in ``seq`` order."""

    def insert_many(
        self, namespace: str, passages: Iterable[NewPassage], created_at: str
    ) -> list[int]:
        """Store passages in order (write), as :meth:`insert` would one by one, in
        one batch however many (a bulk load's round trips); their ``seq`` values."""

    def coming(self, namespace: str, texts: Sequence[str], ahead: object = None) -> None:
        """Say which passage texts this transaction is about to add (a bulk
        load's batch): a server engine reads once, now, what storing them
        will need, so its later inserts wait for nothing. A hint: nothing is
        stored, and texts never added cost nothing but the reading.
        ``ahead``: what :meth:`Storage.read_ahead` answered for the documents
        of these texts (read before the transaction began; what it holds is
        not read again)."""

    def add_many(self, namespace: str, passages: Iterable[NewPassage], created_at: str) -> None:
        """:meth:`insert_many` without the ``seq`` values back: a server engine
        sends the rows and goes on without waiting for their answer (the
        transaction's next read or its commit waits), so the caller can build
        the next rows while the server stores these."""

    def mention(self, passage: str, entities: Iterable[str]) -> None:
        """Link ``passage`` to each entity (idempotent; write)."""

    def mention_many(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Link each (passage, entity) pair, as :meth:`mention` would, in one batch
        (idempotent; write)."""

    def entities_of(self, passage: str) -> list[str]:
        """The canonical entities ``passage`` mentions (after merges, each once)."""

    def entities_of_many(self, passages: Iterable[str]) -> dict[str, list[str]]:
        """:meth:`entities_of` of many passages in one look-up (a passage that
        mentions none is left out)."""

    def live_of_version(self, document: str, version: int) -> list[tuple[str, list[str]]]:
        """The live passages of a document's version in their order, each with
        :meth:`entities_of` it: what a remember answers, in one look-up."""

    def live_hashes_of_version(self, document: str, version: int) -> list[tuple[str, str]]:
        """The live passages of a document's version in their order, each with
        its text's hash, in one look-up: what a new version may keep."""

    def live_shingles(
        self,
        namespace: str,
        after: int = 0,
        seqs: Iterable[int] | None = None,
        ids: Iterable[str] | None = None,
    ) -> Iterator[PassageShingles]:
        """Live passages of ``namespace`` after the clock value ``after``
        (and, if given, only those with these ``seqs`` or these ``ids``), in
        ``seq`` order, with their shingles (empty for a passage too short to
        have any). One query however many: the duplicate scan reads every
        passage through it."""

    def live_count(self, namespace: str) -> int:
        """How many live passages ``namespace`` has."""

    def live(self, namespace: str) -> Iterator[Passage]:
        """The live passages of ``namespace``, in ``seq`` order (read as
        they are iterated: fine for a whole namespace)."""

    def profiles(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored profiles of these passages (id -> data), the per-passage
        token data a check computes once; a passage without one is left out."""

    def add_profiles(self, rows: Sequence[tuple[str, str]]) -> None:
        """Store ``(passage id, data)`` profiles (write); a passage that has
        one keeps it. Derived state: purge erases a passage's profile with it,
        export leaves profiles out (they are computed again when missing)."""


class Entities(Protocol):
    """Named entities; a merge points an entity at a survivor, its canonical id."""

    def find(self, name: str, namespace: str) -> str | None:
        """The canonical id of the entity called ``name`` (or with that alias), matched
        case- and space-insensitively; None if there is none."""

    def resolve(self, name_or_address: str, namespace: str) -> str:
        """A name or an entity address to its canonical id; NotFound if none."""

    def named(self, namespace: str, folded: Iterable[str]) -> dict[str, str]:
        """Which of the folded names (:func:`memors_core.domain.text.fold_name`) are an
        entity's name or alias in ``namespace``: folded name -> canonical id (the oldest
        entity's when several fold equal)."""

    def ensure(self, name: str, namespace: str) -> Ensured:
        """``Ensured(id, created)``: the canonical id for ``name``, creating the
        entity if needed (write), and whether it was created; BadInput for an
        empty or too long name."""

    def get(self, ident: str, namespace: str | None = None) -> Entity | None:
        """The entity ``ident`` as stored, merged ones too (see its ``canonical``), only in
        ``namespace`` if given; None if there is none."""

    def require(self, ident: str) -> Entity:
        """The entity ``ident``; NotFound if there is none."""

    def get_many(self, ids: Iterable[str]) -> dict[str, Entity]:
        """:meth:`get` of each of ``ids`` in one look-up: id -> entity as
        stored (merged ones too); an unknown id is left out."""

    def canonical_of(self, ids: Iterable[str]) -> set[str]:
        """The canonical ids the entities ``ids`` resolve to now (unknown ids left out)."""

    def canonical_list(self, namespace: str) -> list[Entity]:
        """The canonical (unmerged) entities of a namespace, by name."""

    def listed(
        self, namespace: str, offset: int = 0, limit: int | None = None
    ) -> tuple[list[Entity], int]:
        """One page of :meth:`canonical_list` (``offset`` entities skipped,
        at most ``limit``; None: to the end) and how many there are, in one
        look-up however many the namespace has."""

    def count(self, namespace: str) -> int:
        """How many entities ``namespace`` has, merged ones included."""

    def aliases(self, canonical: str) -> list[str]:
        """Other names of a canonical entity: its aliases and merged entities' names."""

    def add_alias(
        self, entity: str, namespace: str, alias: str, correction: int | None = None
    ) -> bool:
        """Give ``entity`` the other name ``alias`` (idempotent; write); whether it
        was not one before (a retracted alias is restored)."""

    def retract_alias(self, entity: str, namespace: str, alias: str, correction: int) -> bool:
        """Take the alias back from ``entity`` (an undone merge; write): it no longer
        names the entity, until given again; False if it was not one."""

    def rename(self, entity: str, namespace: str, name: str, correction: int) -> None:
        """Give the canonical ``entity`` the name ``name`` (write): its names stay
        aliases, and ``name`` becomes one too, so every name resolves."""

    def separate(self, ids: Iterable[str], canonical: str) -> list[str]:
        """Point the entities ``ids`` at ``canonical`` again (an undone merge; write);
        the ids that moved."""

    def merged_ids(self, canonical: str) -> list[str]:
        """The entities that resolve to ``canonical`` (itself included), oldest first."""

    def live_passages(self, canonical: str) -> list[Passage]:
        """Live passages mentioning the entity or one merged into it, by ``seq``."""

    def live_passages_of(self, canonicals: Iterable[str]) -> dict[str, list[Passage]]:
        """:meth:`live_passages` of each entity, in one read; an entity without any is left out."""

    def live_passage_count(self, canonical: str) -> int:
        """How many passages :meth:`live_passages` returns, counted in the store."""

    def live_passage_counts(self, canonicals: Iterable[str]) -> dict[str, int]:
        """:meth:`live_passage_count` of many entities in one look-up (one with
        none left out)."""

    def aliases_of(self, entities: Iterable[Entity]) -> dict[str, list[str]]:
        """:meth:`aliases` of many canonical entities (their rows, as
        :meth:`canonical_list` gives them) in one look-up: id -> other names."""

    def absorbed(self, canonical: str) -> list[Entity]:
        """The entities merged into ``canonical`` (directly or through another), oldest first."""

    def needing_page(
        self, namespace: str, min_passages: int, only: Iterable[str] | None = None
    ) -> list[NeedsPage]:
        """The entities with at least ``min_passages`` live passages and no
        live page, first created first, each ``NeedsPage(entity, passages)``:
        its canonical id and live passages; ``only`` limits it to those
        canonical entities."""

    def orphans(self, namespace: str) -> list[str]:
        """Canonical entities with no live passage and no live fact."""

    def merge(self, survivor: str, absorbed: str, namespace: str) -> None:
        """Make ``absorbed`` (and what was merged into it) point at ``survivor`` (write)."""

    def same_name_pairs(self, namespace: str, only: Iterable[str] | None = None) -> list[IdPair]:
        """Pairs (``IdPair(first, second)``) of canonical entities that look
        like one: their folded names are equal (``quorum-replication`` ~
        ``Quorum Replication``), or the second's folds equal to an alias of
        the first; ``only`` limits it to pairs with one of those canonical
        entities."""


class Facts(Protocol):
    """Facts about entities, append-only: a correction is a new fact plus a tombstone."""

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
        """Store a fact about the entity named ``subject`` (created if new; write);
        returns its id. Dates are ISO 8601; ``source`` a passage address."""

    def copy(self, ident: str, valid_from: str | None, valid_to: str | None, at: str) -> str:
        """A new fact like ``ident`` with other validity bounds, recorded at ``at``
        (write); returns its id. ``ident`` itself is left as it is."""

    def get(self, ident: str, namespace: str | None = None) -> Fact | None:
        """The fact ``ident``, forgotten and superseded ones too (only in ``namespace`` if
        given); None if there is none."""

    def by_ids(self, ids: Iterable[str]) -> list[Fact]:
        """The facts with these ids, live or not, in the order given (missing ones left out)."""

    def of_entity(self, canonical: str) -> list[Fact]:
        """Live facts about the entity (after merges), oldest first."""

    def of_entities(self, canonicals: Iterable[str]) -> dict[str, list[Fact]]:
        """:meth:`of_entity` of each entity, in one read; an entity without any is left out."""

    def live_counts_of(self, canonicals: Iterable[str]) -> dict[str, int]:
        """How many live facts :meth:`of_entity` returns, for many entities in
        one look-up (one with none left out)."""

    def history(self, canonical: str) -> list[Fact]:
        """Every fact about the entity (after merges), forgotten and superseded
        ones too, oldest first: the record its timeline is drawn from."""

    def live(self, namespace: str) -> list[Fact]:
        """The live facts of ``namespace``, oldest first."""

    def conflicting(self, namespace: str, only: Iterable[str] | None = None) -> list[IdPair]:
        """Pairs (``IdPair(first, second)``) of live facts that disagree: one
        subject (after merges), predicates that fold equal, values that do
        not, overlapping half-open validity; ``only`` limits it to those
        canonical subjects."""

    def disagree(self, a: str, b: str) -> bool:
        """Whether the live facts ``a`` and ``b`` are such a pair."""

    def expired(self, namespace: str, now_ts: str, *, history: bool = True) -> list[Fact]:
        """Live facts of ``namespace`` whose validity ended at or before ``now_ts`` (a
        timestamp like ``to_ts``), oldest first. ``history=False`` leaves out the
        facts that are history rather than news: recorded once their validity had
        ended (a fact about the past, the bounded copy a conflict's ``bound``
        makes), or followed by a live fact on the same subject (after merges) and
        predicate whose validity reaches past their end (``expired-fact``)."""

    def bounded_copy(self, ident: str, at: str) -> str | None:
        """The copy of ``ident`` with other bounds recorded at ``at``, if any."""


class Pages(Protocol):
    """Entity pages: versioned summaries citing passages; a new version supersedes the last."""

    def current(self, canonical: str) -> Page | None:
        """The entity's live page (one written for an entity merged into it counts);
        None if it has none."""

    def current_of(self, canonicals: Iterable[str]) -> dict[str, Page]:
        """:meth:`current` of many entities in one look-up (one with no page left out)."""

    def get(self, ident: str, namespace: str | None = None) -> Page | None:
        """The page version ``ident``, superseded and forgotten ones too (only in
        ``namespace`` if given); None if there is none."""

    def last_written(self, canonical: str) -> str | None:
        """The id of the newest page ever written about the entity (or one
        merged into it), live or not."""

    def last_written_of(self, canonicals: Iterable[str]) -> dict[str, str]:
        """:meth:`last_written` of each entity, in one read; one never written about is left out."""

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
        """Store a page version citing ``cites`` (passage addresses; NotFound for an
        unknown one); the previous version, if any, is superseded (write).
        ``sentences`` are its checked sentences in order, each ``(text,
        sources)`` — the addresses it cites (passages or facts) — or ``(text,
        sources, flags)`` with what the checks flagged in it (a page stored
        over its flags), ``facts`` the addresses of the
        facts it was built with (NotFound for an unknown passage or fact).
        Returns the page address."""

    def sources(self, page: str) -> list[PageSource]:
        """The passages a page version cites, with their hash when it was built, by passage id."""

    def flagged(self, namespace: str) -> list[Page]:
        """The namespace's live pages stored over their checks' flags
        (``force``: their ``flags`` are not empty), oldest first."""

    def sentences(self, page: str) -> list[PageSentence]:
        """The page version's checked sentences with their sources, in order
        (none for a page written without them)."""

    def facts(self, page: str) -> list[str]:
        """The addresses of the facts the page version was built with, in the order written."""

    def newer(self, page: str) -> str | None:
        """The id of the version that superseded ``page``; None for a newest version."""

    def mark_stale(self, page: str, cause: str, target: str | None = None) -> bool:
        """Record that a page is stale because of ``cause`` (``target``: the address of
        what changed); each call adds a mark (write), True the first time only."""

    def mark_citing(self, passage: str, cause: str) -> int:
        """Mark stale every live page that cites ``passage`` (write); returns how many
        were not stale before."""

    def mark_citing_many(self, passages: Sequence[str], cause: str) -> int:
        """:meth:`mark_citing` for many passages, in one look-up (write)."""

    def mark_built_with(self, fact: str, cause: str) -> int:
        """Mark stale every live page built with the fact ``fact`` (an id; write);
        returns how many were not stale before."""

    def live(self, namespace: str, only: Iterable[str] | None = None) -> list[Page]:
        """The live pages of ``namespace``, oldest first; ``only`` limits them to the pages
        of those canonical entities."""

    def is_stale(self, page: str) -> bool:
        """The stale rule: marked stale, a cited passage or a fact it was built
        with forgotten or superseded, or ``STALE_NEW_PASSAGES`` new live
        passages of its entity."""

    def changes(self, page: Page) -> list[dict[str, str]]:
        """What changed since the page was built, each ``{"address", "change",
        "text"}`` with the changed row's text: a cited passage or a fact it was
        built with that is ``forgotten`` or ``superseded`` (the passage's text,
        the fact written out; a fact since purged is ``purged``, with no
        text), an entity ``merged`` into the page's (its name), and each
        ``new`` passage of the entity (after a merge, every live passage of
        the entity the page does not cite). Never empty for a stale page."""

    def stale(self, namespace: str, only: Iterable[str] | None = None) -> list[StalePage]:
        """Live stale pages (:meth:`is_stale`), oldest first, each
        ``StalePage(page, changes)``: with what changed (:meth:`changes`);
        ``only`` limits them to those canonical entities."""

    def counts(self, namespace: str | None = None) -> dict[str, tuple[int, int]]:
        """(live pages, live stale pages) per namespace, in one look-up (one
        without a live page left out; only ``namespace``'s if given)."""

    def listing(
        self, namespace: str, sort: str, offset: int, limit: int, *, stale: bool = False
    ) -> list[PageListed]:
        """One page of the namespace's live pages (only the stale ones if
        ``stale``), each with its canonical entity's id and name and whether
        it is stale (:meth:`is_stale`): ``PageListed(page, entity, name, stale)``;
        ``sort`` is one of :data:`~memors_core.domain.rows.PAGE_SORTS`."""

    def of_item(self, item: int, namespace: str) -> str | None:
        """The id of the page version the work item ``item`` wrote; None if it wrote none."""

    def live_count(self, namespace: str, *, stale: bool = False) -> int:
        """How many live pages (only stale ones if ``stale``) the namespace has."""


class Tombstones(Protocol):
    """Forgetting and superseding: at most one tombstone per row; only a purge erases one."""

    def head(self) -> int:
        """The tombstone clock (see :meth:`Passages.head`)."""

    def state(self, ident: str) -> str:
        """``live``, ``forgotten`` or ``superseded`` (an unknown id is ``live``)."""

    def is_live(self, ident: str) -> bool:
        """Whether ``ident`` has no tombstone (an unknown id is live)."""

    def get(self, ident: str) -> Tombstone | None:
        """The tombstone of ``ident``; None while it is live."""

    def get_many(self, idents: Iterable[str]) -> dict[str, Tombstone]:
        """The tombstones of those of ``idents`` that have one, in one look-up."""

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
        """Forget or supersede one row (write); False, and nothing changes, if it
        already was. A passage's tombstone marks the pages citing it stale."""

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
        """:meth:`add` for many rows of one kind in a few statements (write);
        the ids that were live and now have their tombstone, in the order given."""

    def by_item(self, namespace: str, item: int) -> list[Tombstone]:
        """The tombstones the work item ``item`` wrote, oldest first."""

    def since(self, namespace: str, after: int) -> list[Tombstone]:
        """Tombstones of ``namespace`` newer than the clock value ``after``, oldest first."""


class MergeCandidates(Protocol):
    """Proposed merges of two entities: one per pair, whatever the order."""

    def open(self, namespace: str, first: str, second: str, origin: str) -> Opened:
        """Open the candidate for a pair, in either order (write); returns
        ``Opened(id, status)``.
        A pair already proposed keeps its id, origin and status."""

    def get(self, ident: int) -> MergeCandidate | None:
        """The candidate ``ident``; None if there is none."""

    def set_status(self, ident: int, status: str) -> None:
        """Decide a candidate: set its status (``accepted``, ``rejected``; ``open`` again
        when a person proposes it again) and when (write)."""

    def in_namespace(self, namespace: str, status: str | None = None) -> list[MergeCandidate]:
        """The candidates of ``namespace``, oldest first; ``status`` keeps those in it."""


class Corrections(Protocol):
    """The audit of corrections (renames, merges and their undoing, items reopened)."""

    def record(self, namespace: str, action: str, target: str, detail: dict[str, Any]) -> int:
        """Append one correction about the address ``target`` (write); its id."""

    def list(
        self, namespace: str, action: str | None = None, target: str | None = None
    ) -> list[Correction]:
        """The corrections of ``namespace``, oldest first, of that action and target if given."""

    def newest(self, namespace: str, limit: int) -> tuple[builtins.list[Correction], int]:
        """The namespace's ``limit`` newest corrections, newest first, and
        how many it has: one look-up, however many there are."""


class Items(Protocol):
    """The work queue: items compaction opens and agents resolve, numbered by ``id``."""

    def get(self, ident: int, namespace: str) -> Item | None:
        """The item ``ident`` of ``namespace``, whatever its status; None if there is none there."""

    def count(self, namespace: str, kind: str | None = None, status: str | None = None) -> int:
        """How many items :meth:`list` would return without ``after`` and ``limit``."""

    def open_keys(self, namespace: str, kind: str) -> dict[str, OpenKey]:
        """key -> ``OpenKey(id, fingerprint)`` of the kind's open items."""

    def last_for_key(self, namespace: str, kind: str, key: str) -> Item | None:
        """The newest item of the kind for ``key``, whatever its status; None if there is none."""

    def last_for_keys(self, namespace: str, kind: str, keys: Sequence[str]) -> dict[str, Item]:
        """:meth:`last_for_key` of each of ``keys`` that has an item, in one read."""

    def create(
        self, namespace: str, kind: str, key: str, fingerprint: str, payload: Any, at: str
    ) -> int:
        """Open a new item (write); returns its id, the item number users see."""

    def create_many(
        self, namespace: str, kind: str, rows: Sequence[tuple[str, str, Any]], at: str
    ) -> dict[str, int]:
        """:meth:`create` of each ``(key, fingerprint, payload)`` (distinct keys),
        in their order, in one write; key -> the new item's id."""

    def refresh(self, ident: int, fingerprint: str, payload: Any, at: str) -> None:
        """Give an item a new fingerprint and payload (write); its status stays as it is."""

    def obsolete(self, ident: int, at: str) -> None:
        """Set an item's status to ``obsolete`` (write), unchecked: callers pass open items."""

    def finish(self, ident: int, status: str, resolution: Any, at: str) -> bool:
        """Close an open item with ``status`` and ``resolution`` (write); False, and
        nothing changes, if it was not open (an item is closed once)."""

    def count_open(self, namespace: str, kinds: list[str], after: int = 0) -> int:
        """How many open items of those kinds ``namespace`` has with an id above ``after``."""

    def open_after(
        self, namespace: str, kinds: list[str], after: int, limit: int | None
    ) -> list[Item]:
        """Open items of those kinds with an id above ``after``, by id, at most ``limit``
        (None: all)."""

    def open_counts(self, namespace: str | None = None) -> dict[tuple[str, str], int]:
        """(namespace, kind) -> open items (pairs with none left out; only
        ``namespace``'s if given)."""

    def resolution(self, ident: int, namespace: str) -> Any:
        """The resolution stored with the item ``ident`` of ``namespace``; None if it has none
        or there is no such item."""

    def list(
        self,
        namespace: str,
        kind: str | None = None,
        status: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Item]:
        """The items of ``namespace``, by id; ``kind`` and ``status`` keep those
        matching; ``after`` and ``limit`` page through them (ids above ``after``,
        at most ``limit`` of them)."""


class ChangeLog(Protocol):
    """Which canonical entities changed, for incremental scans."""

    def head(self) -> int:
        """The change-log clock: the number of the newest entry ever logged (0 for none);
        pruning never lowers it."""

    def heads(self) -> ScanMark:
        """The three clocks a scan's mark records, read at once: the change
        log's (:meth:`head`), the passages' and the tombstones'
        (``passages.head()``, ``tombstones.head()``)."""

    def settled_heads(self, namespace: str) -> ScanMark:
        """:meth:`heads` read when no write of ``namespace`` is under way:
        every number at or below them is committed (a scan's mark taken from
        them skips nothing a write commits later). In a compaction's scan
        (``Storage.write(role="scan")``), which runs beside the namespace's
        content writes, an engine waits for the one under way; in any other
        write of the namespace its own turn settles them."""

    def entities_since(self, namespace: str, after: int) -> set[str]:
        """Entities touched after ``after``, by their id then and their canonical id now."""

    def mark(self, namespace: str, kind: str) -> ScanMark | None:
        """Where ``kind``'s last scan of ``namespace`` stopped; None before its first
        (or after :meth:`forget_marks`)."""

    def set_mark(self, namespace: str, kind: str, mark: ScanMark) -> None:
        """Record where ``kind``'s scan of ``namespace`` stopped (write), replacing its mark."""

    def forget_marks(self, namespace: str) -> None:
        """The next compact of ``namespace`` rescans everything (after a purge; write)."""

    def prune(self, namespace: str) -> None:
        """Drop the part of the log every kind with a mark has read (write); nothing
        while no kind has one."""


class Counters(Protocol):
    """Persisted counters (the metrics' totals), keyed by name, kind and event."""

    def bump(self, name: str, kind: str = "", event: str = "", by: int = 1) -> None:
        """Add ``by`` to the counter (``name``, ``kind``, ``event``) (write; ``by=0`` writes
        nothing)."""

    def read(self, name: str) -> dict[tuple[str, str], int]:
        """(kind, event) -> value of one counter (empty if it was never bumped)."""

    def read_many(self, names: Iterable[str]) -> dict[str, dict[tuple[str, str], int]]:
        """:meth:`read` of each of ``names`` in one look-up (a name never bumped: empty)."""


class Search(Protocol):
    """Ranked full-text search over live rows, one index per kind of row and
    namespace, scored as :mod:`memors_core.domain.search` says: BM25 with a
    positive term weight and the statistics of the namespace searched, over
    the rows' stemmed words and the entity terms of the canonical entities
    each row is about (a passage's mentions, a fact's subject, a page's
    entity, an entity itself). Each method returns a
    :class:`~memors_core.domain.search.Ranked`: hits best first (at most
    ``limit``) and the query's ceiling in that index; a query with no words
    and no entities finds nothing."""

    def passages(self, namespace: str, query: str | SearchQuery, limit: int) -> Ranked:
        """Live passages of ``namespace`` matching ``query``; a hit's text is the passage's."""

    def pages(self, namespace: str, query: str | SearchQuery, limit: int) -> Ranked:
        """Live pages of ``namespace`` matching ``query``; a hit's text is ``title: snippet``."""

    def facts(
        self, namespace: str, query: str | SearchQuery, limit: int, as_of: str | None
    ) -> Ranked:
        """Live facts of ``namespace`` matching ``query``, and with ``as_of`` (a timestamp
        like ``to_ts``) only those valid then; a hit's text is the fact with its dates."""

    def entities(self, namespace: str, query: str | SearchQuery, limit: int) -> Ranked:
        """Canonical entities of ``namespace`` whose name or an alias matches ``query``; a
        hit's text is the name with the aliases."""

    def passages_like(
        self, namespace: str, vector: bytes, limit: int, entities: Sequence[str] = ()
    ) -> Ranked:
        """Live passages of ``namespace`` that have a vector, by the cosine of
        their vector with ``vector`` (a unit vector of float32 bytes, see
        :mod:`memors_core.semantic`), best first; a hit's score is the cosine.
        With ``entities`` (canonical entity ids), only the passages that
        mention one of them. Empty on an engine without
        :attr:`Capabilities.vectors`."""

    def alongside(self, work: Callable[[Search], _T]) -> Callable[[], _T]:
        """``work`` done on this read's snapshot while the caller goes on:
        its answer is had by calling what this returns (once, before the
        read ends). An engine may run it at once on another connection that
        sees exactly what this read sees (PostgreSQL, where the pool has one
        free: a search's vector steps beside its words' ranking); otherwise
        it runs, in this transaction, when its answer is asked for. ``work``
        must only read."""

    def passages_beside(
        self, namespace: str, ids: Sequence[str], vector: bytes | None = None
    ) -> dict[str, list[Hit]]:
        """For each live passage of ``namespace`` among ``ids``, the live
        passages of ``namespace`` remembered just before and just after it
        (one each, where there is one), as hits with their text and a score
        of 0, or with ``vector`` their vector's cosine with it (0 without a
        vector): the context :func:`memors_core.domain.search.with_neighbours`
        lends scores to."""


class Vectors(Protocol):
    """Passages' vectors (:mod:`memors_core.semantic`): derived data, kept for
    live passages only (a forgotten, superseded or purged passage's vector
    goes with it), never exported."""

    def add(self, namespace: str, vectors: Iterable[tuple[str, bytes]], kind: str = KIND) -> int:
        """Store ``(passage id, vector)`` pairs of ``kind`` (write: the model
        and the form of its input, :data:`memors_core.semantic.KIND`); a
        passage that is not live in ``namespace``, or has a vector of that
        kind already, is skipped, and one with a vector of another kind has
        it replaced. Returns how many were stored."""

    def missing(
        self, namespace: str, after: int, limit: int, kind: str = KIND
    ) -> list[tuple[int, str, str]]:
        """Up to ``limit`` live passages of ``namespace`` without a vector of
        ``kind`` (none, or one of another kind), as ``(clock, passage id,
        text)`` with ``clock`` above ``after``, in clock order."""

    def missing_count(self, namespace: str, kind: str = KIND) -> int:
        """How many live passages of ``namespace`` have no vector of ``kind``."""

    def any_waiting(self, namespace: str) -> bool:
        """Whether a live passage of ``namespace`` newer than its newest
        passage with a vector has none: cheap enough for every search (it
        reads only the passages after that one). Vectors are made oldest
        first, so this is :meth:`missing_count` > 0 except after a run that
        failed on one chunk and went on (none does)."""

    def count(self, namespace: str) -> int:
        """How many passages of ``namespace`` have a vector."""


class Purges(Protocol):
    """Erasing content for good, the one audited way (SPEC §2).

    The engine decides what goes and in which order; the erase methods run
    inside :meth:`Storage.erasing` (elsewhere the raw tables refuse to lose
    a row). What the file may still hold after the commit is the engine's
    business: it declares its own finishing steps
    (:attr:`Storage.purge_steps`), recorded here with the audit record and
    run one at a time by :meth:`Storage.run_purge_step`.
    """

    def passages_of(self, document: str) -> list[Passage]:
        """Every passage the document ever had (forgotten and superseded too), by ``seq``."""

    def mentioned(self, passages: Iterable[str]) -> set[str]:
        """The entities (as recorded, not resolved) the passages mention."""

    def pages_citing(self, passages: Iterable[str]) -> set[str]:
        """Every page version that cites one of the passages (or one of whose
        sentences does)."""

    def pages_built_with(self, facts: Iterable[str]) -> set[str]:
        """Every page version built with one of the facts (ids)."""

    def later_pages(self, pages: Iterable[str]) -> set[str]:
        """The page versions whose previous version is one of ``pages``."""

    def unnamed_entities(self, candidates: Iterable[str]) -> list[str]:
        """Those of the candidate entities that nothing names any more (no
        mention, fact, page, merge candidate or merged entity), by ``seq``: its
        own names (aliases, renames) go with it."""

    def erase_page(self, ident: str) -> None:
        """Erase one page version with its sources, sentences, facts, stale
        marks and tombstone; the item that wrote it no longer counts as done
        for its inputs."""

    def erase_passage(self, ident: str) -> None:
        """Erase a passage with its mentions, version links, profile and tombstone."""

    def erase_passages(self, idents: Sequence[str]) -> None:
        """:meth:`erase_passage` for many passages, a few statements in all."""

    def erase_document(self, ident: str) -> None:
        """Erase a document with its versions and tombstone (its passages apart)."""

    def erase_fact(self, ident: str) -> None:
        """Erase a fact with its tombstone."""

    def erase_entity(self, ident: str) -> None:
        """Erase an entity with its names (aliases, renames, alias retractions)
        and its change-log entries."""

    def redact_items(self, ident: str, replacement: Any) -> None:
        """Replace the payload (and any resolution) of every work item that
        mentions ``ident`` by ``replacement``; an open one gets a fingerprint
        no scan yields, so the next compact refreshes or obsoletes it."""

    def redact_items_many(self, idents: Sequence[str], replacement: Any) -> None:
        """:meth:`redact_items` for every work item that mentions any of ``idents``."""

    def record(self, namespace: str, target: str, erased: list[str]) -> int:
        """The audit record (what was erased, never the content) with every
        finishing step still to run; returns its id."""

    def last(self, namespace: str, target: str) -> PurgeRecord | None:
        """The newest audit record of ``target``."""

    def pending(self, namespace: str | None = None) -> list[PendingPurge]:
        """The purges with finishing steps left, oldest first: only entries
        memors could have written (an audit row of a purgeable address that
        is gone from the store, and steps this engine leaves behind)."""

    def unreadable(self, namespace: str | None = None) -> list[BadPendingPurge]:
        """The entries of unfinished-purge state that are not a purge's (junk
        written by another connection, an audit row whose address is still
        in the store): nothing acts on them; lint reports them. Entries of no
        audit row belong to every namespace."""

    def step_done(self, step: str, purges: Iterable[int]) -> None:
        """Record ``step`` done for those purges; one with none left is finished."""

    def finisher(self) -> str | None:
        """None when the connected role may run every finishing step; else
        the role that may (PostgreSQL: the tables' owner)."""


class Transfer(Protocol):
    """Export and import: the rows of a store, replayable into an empty one.

    Rows are ``(table, {column: value})`` with the engine's own table and
    column names, ids and sequences kept (so addresses, item numbers and
    page build marks stay valid); ``bytes`` values are bytes.
    """

    #: The schema version an export is written with.
    schema: int
    #: The schema versions whose exports :meth:`restore` reads.
    reads_schemas: frozenset[int]
    #: The table names an export holds.
    tables: frozenset[str]

    def export(self, namespace: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every row of the store (or of ``namespace``), each after the rows
        it refers to. Derived state (search indexes, compaction's change log
        and marks, a kind's own index, the passages' profiles) is left out."""

    def is_empty(self) -> bool:
        """Whether the store holds no content (only what opening it, or a
        compact of nothing, wrote)."""

    def restore(self, table: str, row: dict[str, Any]) -> None:
        """Insert one exported row (a namespaces, counters or clock row the
        store holds already is met, not refused); BadInput (one line, no
        position) if it does not fit or holds what a store cannot."""

    def restored(self) -> None:
        """After the last row: BadInput naming the first row that refers to
        a row the store lacks; then every kind's next scan is a full one."""


class Tx(Protocol):
    """One transaction and its repositories."""

    namespaces: Namespaces
    documents: Documents
    passages: Passages
    entities: Entities
    facts: Facts
    pages: Pages
    tombstones: Tombstones
    merges: MergeCandidates
    items: Items
    changes: ChangeLog
    counters: Counters
    corrections: Corrections
    search: Search
    vectors: Vectors
    purges: Purges
    transfer: Transfer

    #: The engine's name (``"sqlite"``), as :meth:`native` and
    #: :meth:`memors_core.plugins.kinds.Kind.migrations` are asked for it.
    engine: str

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Call ``fn`` once the transaction commits (at once outside one)."""

    def pipelined(self) -> AbstractContextManager[None]:
        """A block whose statements need not wait for each other's answers:
        on a server engine they go to the server together (PostgreSQL's
        pipeline mode), until one's answer is read; on SQLite nothing
        changes. An error of any of them is raised when the block ends at
        the latest, and the transaction rolls back as it would have."""

    def later(self) -> AbstractContextManager[None]:
        """A block of writes that need no answer (no read, no row count):
        a server engine holds them back and sends them with the
        transaction's next statement or its commit, in one message (no
        round trip of their own); on SQLite they run at once. An error of
        one is raised by that statement or the commit, and the transaction
        rolls back as it would have; a savepoint rolled back drops those
        made inside it."""

    def together(self, *reads: Callable[[], Any]) -> list[Any]:
        """The answers of independent reads (each a call of this
        transaction's repositories, none needing another's answer): a
        server engine sends the statement each begins with together, in
        one round trip where each was one; on SQLite they simply run."""

    def native(self, engine: str) -> Any:
        """The escape hatch for a kind's own per-engine module: the engine's
        native handle (``"sqlite"``: the ``apsw.Connection``, inside this
        transaction), for the kind's own tables only. Asking for another
        engine than the store's raises :class:`memors_core.errors.PluginError`
        naming both, so a kind's module for one engine never runs on another.
        ``"sql"``, on either SQL engine: a handle that runs statements written
        in SQLite's spelling, rendered for the store's engine (``execute``,
        ``executemany``, ``one``, ``all``, ``scalar``; ``engine``; ``conn``,
        the engine's own handle), so the statements a kind's engines share
        are written once."""


class Storage(Protocol):
    """An open store."""

    #: Where the store is, for messages (a path or a URL without password).
    location: str
    readonly: bool

    @property
    def capabilities(self) -> Capabilities:
        """What the engine promises beyond the protocol."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read transaction: one consistent snapshot (inside an open transaction, that one)."""

    def brief_read(self, read: Callable[[Tx], _T]) -> _T:
        """``read(tx)`` in a read transaction (the open one, inside one), for
        a read that is usually one statement: an engine may send the
        transaction's begin, that statement and its end as one message (on
        PostgreSQL one round trip where there were two). Should ``read``
        send a second statement, it is run again in a whole read
        transaction, so it must only read."""

    def write(
        self, *, namespace: str | None = None, role: str = "all"
    ) -> AbstractContextManager[Tx]:
        """A write transaction (a savepoint inside one); MemorsError on a store opened
        read-only. ``namespace``: the one namespace it changes, which lets an
        engine with many writers (PostgreSQL) run it beside writes to other
        namespaces; without it the write may change any of them.

        ``role``, with ``namespace``: which of the namespace's writes it may
        run beside, on an engine with many writers. ``"all"`` (the default)
        takes turns with every one. ``"content"``: a write that remembers,
        records facts or forgets and decides no work item; it takes turns
        with the other content writes and not with a compaction's scan.
        ``"add"``: a content write that only adds (a document at a uri it
        claims, or with none, its passages, the entities they name, a fact);
        it runs beside the other "add" writes and a compaction's scan, and
        takes turns with the rest; on such an engine looking a uri up claims
        it until the write ends, and an entity it makes waits for the others
        being made. Its clocks' numbers then need not follow its commits.
        ``"scan"``: a compaction's scans (work items, marks, the change
        log's pruning); it takes turns with the other scans and "all"
        writes, and reads its clocks with :meth:`ChangeLog.settled_heads`
        (once no content write is under way). A savepoint's role is its
        transaction's or within it ("content", "add" and "scan" within
        "all"; "add" within "content")."""

    #: The engine's name (``"sqlite"``), as :attr:`Tx.engine`.
    engine: str

    def read_ahead(
        self, namespace: str, documents: Sequence[tuple[str | None, Sequence[str]]]
    ) -> object:
        """Read, outside any transaction, what a later write adding these
        documents to ``namespace`` will need (each its uri and its passages'
        texts: a bulk load's next batch, read on a thread of its own while
        the batch before it commits): the answer goes to that write's
        :meth:`Passages.coming`. A server engine counts here the search
        terms of the documents no uri of the namespace names yet (another's
        passages are mostly the ones it has: counted if added); SQLite
        answers None (nothing to read). Safe to call from another thread
        while this one writes."""

    def migrate_kinds(self, migrations: dict[str, list[str]]) -> None:
        """Bring each kind's own state to its newest version: ``migrations``
        maps a kind's name to its steps for this engine (step ``n`` takes
        version ``n - 1`` to ``n``). The steps not yet recorded run in
        order, in one write transaction that records each kind's version
        and when (``kind_schema``); a kind already there costs no write.
        A recorded version above what the kind knows raises
        :class:`memors_core.errors.MemorsError`; a step that fails raises
        :class:`memors_core.errors.PluginError` and nothing is applied.
        Called when a store is opened for writing with its plugins."""

    @property
    def purge_steps(self) -> tuple[str, ...]:
        """The finishing steps of a purge after its erasure commits, in the
        order they run (SQLite: merging each FTS index, VACUUM, a WAL checkpoint)."""

    def erasing(self) -> AbstractContextManager[Tx]:
        """A write transaction in which :class:`Purges` may erase raw rows
        (clock values already handed out are kept from coming round again)."""

    def run_purge_step(self, step: str, *, wait: bool) -> bool:
        """Run one finishing step of the unfinished purges, outside a
        transaction; False when a busy store leaves it for later. With
        ``wait`` it waits within the busy timeout, and may raise StoreBusy."""

    def database_failed(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a statement, is the database's own
        failure (on PostgreSQL a lost connection, a server gone) rather than
        an error of the code that sent it: a caller that blames a plugin for
        what its code raised lets it through, and the transaction reports it
        as what it is."""

    def purge_hold(self, target: str) -> str:
        """After :meth:`run_purge_step` answered False: what kept the purge of
        ``target`` from finishing and what finishes it, one phrase for the
        user (on PostgreSQL a role that may not rewrite the tables is told
        that their owner finishes it, and how)."""

    def backup(self, path: str) -> dict[str, Any]:
        """Copy the whole store to a new file at ``path``: ``{"path", "pages"}``.
        Consistent while others write only with ``Capabilities.online_backup``."""

    def close(self) -> None:
        """Close the store; it is not to be used afterwards."""
