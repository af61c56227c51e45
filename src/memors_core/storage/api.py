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

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs

from memors_core.domain.model import SearchHit
from memors_core.domain.rows import (
    Document,
    DocumentVersion,
    Entity,
    Fact,
    Item,
    MergeCandidate,
    NewPassage,
    Page,
    PageSource,
    Passage,
    PassageShingles,
    ScanMark,
    Tombstone,
)


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


class Namespaces(Protocol):
    def touch(self, namespace: str) -> None:
        """Record that ``namespace`` is in use (idempotent)."""

    def names(self) -> list[str]:
        """Every namespace that was ever written to, sorted."""


class Documents(Protocol):
    def get(self, ident: str, namespace: str) -> Document | None: ...

    def latest_by_uri(self, namespace: str, uri: str) -> tuple[Document, int] | None:
        """The newest live document with ``uri``, and its latest version number."""

    def insert(self, document: Document) -> None: ...

    def version(self, document: str, version: int) -> DocumentVersion | None: ...

    def latest_version(self, document: str) -> DocumentVersion: ...

    def add_version(self, version: DocumentVersion) -> None: ...

    def versions(self, document: str) -> list[tuple[DocumentVersion, int]]:
        """Every version, oldest first, with how many passages it has."""

    def version_passages(self, document: str, version: int) -> list[str]:
        """The passage ids of one version of a document, in order."""

    def link_passage(self, document: str, version: int, position: int, passage: str) -> None:
        """Place ``passage`` at ``position`` of a later version (version 1's
        order is its passages' own)."""

    def version_dropping(self, passage: str) -> tuple[str, int] | None:
        """(document, first version) of the document version that no longer
        holds ``passage``, if one does not."""


class Passages(Protocol):
    def head(self) -> int:
        """The passage clock: the ``seq`` of the newest passage ever stored
        (0 for none); never goes back, not even after a purge."""

    def insert(self, namespace: str, passage: NewPassage, created_at: str) -> int:
        """Store one passage; returns its ``seq``."""

    def get(self, ident: str, namespace: str | None = None) -> Passage | None: ...

    def hash_of(self, ident: str) -> str | None: ...

    def by_ids(self, ids: Iterable[str]) -> list[Passage]:
        """The passages with these ids, in the order given (missing ones left out)."""

    def live_of_document(self, document: str) -> list[str]: ...

    def mention(self, passage: str, entities: Iterable[str]) -> None:
        """Link ``passage`` to each entity (idempotent)."""

    def entities_of(self, passage: str) -> list[str]:
        """The canonical entities ``passage`` mentions."""

    def live_shingles(
        self, namespace: str, after: int = 0, seqs: Iterable[int] | None = None
    ) -> Iterator[PassageShingles]:
        """Live passages of ``namespace`` after the clock value ``after``
        (or with the given ``seqs``), in ``seq`` order, with their shingles."""

    def live_count(self, namespace: str) -> int: ...


class Entities(Protocol):
    def find(self, name: str, namespace: str) -> str | None:
        """The canonical id of the entity called ``name`` (or with that alias)."""

    def resolve(self, name_or_address: str, namespace: str) -> str:
        """A name or an entity address to its canonical id; NotFound if none."""

    def ensure(self, name: str, namespace: str) -> tuple[str, bool]:
        """The canonical id for ``name``, creating the entity if needed
        (and whether it was created)."""

    def get(self, ident: str, namespace: str | None = None) -> Entity | None: ...

    def require(self, ident: str) -> Entity:
        """The entity ``ident``; NotFound if there is none."""

    def canonical_of(self, ids: Iterable[str]) -> set[str]: ...

    def canonical_list(self, namespace: str) -> list[Entity]:
        """The canonical (unmerged) entities of a namespace, by name."""

    def count(self, namespace: str) -> int: ...

    def aliases(self, canonical: str) -> list[str]:
        """Other names of a canonical entity: its aliases and merged entities' names."""

    def add_alias(self, entity: str, namespace: str, alias: str) -> None: ...

    def live_passages(self, canonical: str) -> list[Passage]:
        """Live passages mentioning the entity or one merged into it, by ``seq``."""

    def needing_page(
        self, namespace: str, min_passages: int, only: Iterable[str] | None = None
    ) -> list[tuple[str, int]]:
        """(canonical entity, live passages) for entities with at least
        ``min_passages`` live passages and no live page, first created
        first; ``only`` limits it to those canonical entities."""

    def orphans(self, namespace: str) -> list[str]:
        """Canonical entities with no live passage and no live fact."""

    def merge(self, survivor: str, absorbed: str, namespace: str) -> None:
        """Make ``absorbed`` (and what was merged into it) point at ``survivor``."""


class Facts(Protocol):
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
        """Store a fact about the entity named ``subject`` (created if new);
        returns its id. Dates are ISO 8601; ``source`` a passage address."""

    def copy(self, ident: str, valid_from: str | None, valid_to: str | None, at: str) -> str:
        """A new fact like ``ident`` with other validity bounds, recorded at ``at``."""

    def get(self, ident: str, namespace: str | None = None) -> Fact | None: ...

    def by_ids(self, ids: Iterable[str]) -> list[Fact]: ...

    def of_entity(self, canonical: str) -> list[Fact]:
        """Live facts about the entity (after merges), oldest first."""

    def live(self, namespace: str) -> list[Fact]: ...

    def conflicting(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[tuple[str, str]]:
        """Pairs of live facts that disagree: one subject (after merges),
        predicates that fold equal, values that do not, overlapping
        half-open validity; ``only`` limits it to those canonical subjects."""

    def disagree(self, a: str, b: str) -> bool:
        """Whether the live facts ``a`` and ``b`` are such a pair."""

    def expired(self, namespace: str, now_ts: str) -> list[Fact]: ...

    def bounded_copy(self, ident: str, at: str) -> str | None:
        """The copy of ``ident`` with other bounds recorded at ``at``, if any."""


class Pages(Protocol):
    def current(self, canonical: str) -> Page | None:
        """The entity's live page."""

    def get(self, ident: str, namespace: str | None = None) -> Page | None: ...

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
    ) -> str:
        """Store a page version citing ``cites`` (passage addresses); the
        previous version, if any, is superseded. Returns the page address."""

    def sources(self, page: str) -> list[PageSource]: ...

    def newer(self, page: str) -> str | None:
        """The id of the version that superseded ``page``."""

    def mark_stale(self, page: str, cause: str, target: str | None = None) -> bool:
        """Record that a page is stale; True the first time only."""

    def mark_citing(self, passage: str, cause: str) -> int:
        """Mark stale every live page that cites ``passage``."""

    def live(self, namespace: str, only: Iterable[str] | None = None) -> list[Page]: ...

    def is_stale(self, page: str) -> bool:
        """The stale rule: marked stale, a cited passage forgotten or
        superseded, or ``STALE_NEW_PASSAGES`` new live passages of its entity."""

    def changes(self, page: Page) -> list[dict[str, str]]:
        """What changed since the page was built (``change`` = forgotten,
        superseded or new, with the passage ``address``)."""

    def stale(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[tuple[Page, list[dict[str, str]]]]:
        """Live stale pages with what changed."""

    def live_counts(self) -> dict[str, int]:
        """Live pages per namespace."""

    def stale_counts(self) -> dict[str, int]:
        """Live stale pages per namespace."""


class Tombstones(Protocol):
    def head(self) -> int:
        """The tombstone clock (see :meth:`Passages.head`)."""

    def state(self, ident: str) -> str:
        """``live``, ``forgotten`` or ``superseded``."""

    def is_live(self, ident: str) -> bool: ...

    def get(self, ident: str) -> Tombstone | None: ...

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
        """Forget or supersede one row; False if it already was. A passage's
        tombstone marks the pages citing it stale."""

    def since(self, namespace: str, after: int) -> list[Tombstone]:
        """Tombstones of ``namespace`` newer than the clock value ``after``."""


class MergeCandidates(Protocol):
    def open(self, namespace: str, first: str, second: str, origin: str) -> tuple[int, str]:
        """Open (or find) the candidate for a pair; returns (id, status)."""

    def get(self, ident: int) -> MergeCandidate | None: ...

    def set_status(self, ident: int, status: str) -> None: ...

    def in_namespace(self, namespace: str, status: str | None = None) -> list[MergeCandidate]: ...


class Items(Protocol):
    def get(self, ident: int, namespace: str) -> Item | None: ...

    def list(
        self, namespace: str, kind: str | None = None, status: str | None = None
    ) -> list[Item]: ...

    def open_keys(self, namespace: str, kind: str) -> dict[str, tuple[int, str]]:
        """key -> (id, fingerprint) of the kind's open items."""

    def last_for_key(self, namespace: str, kind: str, key: str) -> Item | None: ...

    def create(
        self, namespace: str, kind: str, key: str, fingerprint: str, payload: Any, at: str
    ) -> int: ...

    def refresh(self, ident: int, fingerprint: str, payload: Any, at: str) -> None: ...

    def obsolete(self, ident: int, at: str) -> None: ...

    def finish(self, ident: int, status: str, resolution: Any, at: str) -> bool:
        """Close an open item; False if it was not open (it is closed once)."""

    def count_open(self, namespace: str, kinds: list[str], after: int = 0) -> int: ...

    def open_after(
        self, namespace: str, kinds: list[str], after: int, limit: int | None
    ) -> list[Item]: ...

    def open_counts(self) -> dict[tuple[str, str], int]:
        """(namespace, kind) -> open items."""

    def resolution(self, ident: int, namespace: str) -> Any: ...


class ChangeLog(Protocol):
    """Which canonical entities changed, for incremental scans."""

    def head(self) -> int: ...

    def entities_since(self, namespace: str, after: int) -> set[str]:
        """Entities touched after ``after``, by their id then and their canonical id now."""

    def mark(self, namespace: str, kind: str) -> ScanMark | None: ...

    def set_mark(self, namespace: str, kind: str, mark: ScanMark) -> None: ...

    def forget_marks(self, namespace: str) -> None:
        """The next compact of ``namespace`` rescans everything (after a purge)."""

    def prune(self, namespace: str) -> None:
        """Drop the part of the log every kind has read."""


class Counters(Protocol):
    def bump(self, name: str, kind: str = "", event: str = "", by: int = 1) -> None: ...

    def read(self, name: str) -> dict[tuple[str, str], int]:
        """(kind, event) -> value of one counter."""


class Search(Protocol):
    """Ranked full-text search over live rows; ``query`` is the user's text
    (each engine builds its own query syntax from it)."""

    def passages(self, namespace: str, query: str, limit: int) -> list[SearchHit]: ...

    def pages(self, namespace: str, query: str, limit: int) -> list[SearchHit]: ...

    def facts(
        self, namespace: str, query: str, limit: int, as_of: str | None
    ) -> list[SearchHit]: ...

    def entities(self, namespace: str, query: str, limit: int) -> list[SearchHit]: ...


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
    search: Search

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Call ``fn`` once the transaction commits (at once outside one)."""


class Storage(Protocol):
    """An open store."""

    #: Where the store is, for messages (a path or a URL without password).
    location: str
    readonly: bool
    capabilities: Capabilities

    def read(self) -> AbstractContextManager[Tx]: ...

    def write(self) -> AbstractContextManager[Tx]: ...

    def close(self) -> None: ...
