"""Typed rows: what crosses the storage boundary, in and out.

Frozen attrs classes, one per stored thing, named by the domain and not by
a table. ``seq`` is the engine's logical clock for rows that are ordered by
arrival (passages, tombstones, entities, facts, pages): it only grows, and
a number is never handed out twice, not even after a purge erased the row
that had it. Ids are the uuid7 strings of SPEC §2 (work items and merge
candidates: whole numbers).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

JSON = dict[str, Any]

#: How a list of pages can be ordered: by title, by entity name, newest or
#: oldest version first.
PAGE_SORTS = ("title", "entity", "newest", "oldest")
#: How a list of documents can be ordered: by title (its URI when it has
#: none), newest or oldest first.
DOCUMENT_SORTS = ("title", "newest", "oldest")


@attrs.frozen
class Document:
    id: str
    namespace: str
    uri: str | None
    created_at: str


@attrs.frozen
class DocumentVersion:
    document: str
    version: int
    text_hash: str
    title: str | None
    metadata: JSON
    created_at: str


@attrs.frozen
class NewPassage:
    """A passage to store (``passages.insert_many``)."""

    id: str
    document: str
    version: int
    position: int
    text: str
    hash: str
    shingles: bytes


@attrs.frozen
class Passage:
    seq: int
    id: str
    namespace: str
    document: str
    version: int
    position: int
    text: str
    hash: str
    created_at: str


class PassageShingles(NamedTuple):
    """A live passage with its packed shingle hashes (for near-duplicate scans).

    A named tuple, not an attrs class like the other rows: a full scan reads
    every passage of a namespace, and tuples of plain values drop out of the
    garbage collector's tracking, attrs instances do not — in a process that
    holds much else, that was a third of the scan's time."""

    seq: int
    id: str
    document: str
    shingles: bytes


@attrs.frozen
class Entity:
    seq: int
    id: str
    namespace: str
    name: str
    #: The entity this one was merged into (its own id when it was not).
    canonical: str
    created_at: str


@attrs.frozen
class Fact:
    seq: int
    id: str
    namespace: str
    #: The entity the fact was recorded about, and its canonical entity now.
    subject: str
    canonical: str
    #: The canonical entity's name.
    subject_name: str
    predicate: str
    value: str
    valid_from: str | None
    valid_to: str | None
    #: ``valid_from`` / ``valid_to`` as sortable UTC timestamps (None: open).
    from_ts: str | None
    to_ts: str | None
    source: str | None
    recorded_at: str


@attrs.frozen
class Page:
    seq: int
    id: str
    namespace: str
    entity: str
    title: str
    content: str
    version: int
    previous: str | None
    item: int | None
    flags: JSON
    #: The passage clock (``passages.head()``) when the page was stored.
    built_at: int
    created_at: str


@attrs.frozen
class PageSource:
    passage: str
    #: The passage's content hash when the page was built.
    hash: str


@attrs.frozen
class PageSentence:
    """One checked sentence of a page, as it was stored."""

    text: str
    #: The addresses it cites (``memo://passage/…``, ``memo://fact/…``), in order.
    sources: tuple[str, ...]
    #: What the checks flagged in it when its page was stored over them
    #: (``force``): ``{"check", "message", …the flag's own fields}`` each;
    #: empty for a sentence that passed (it is unverified when not).
    flags: tuple[dict[str, Any], ...] = ()


@attrs.frozen
class Tombstone:
    seq: int
    namespace: str
    target: str
    type: str
    state: str
    reason: str | None
    item: int | None
    created_at: str


@attrs.frozen
class MergeCandidate:
    id: int
    namespace: str
    first: str
    second: str
    origin: str
    status: str
    created_at: str


@attrs.frozen
class Correction:
    """One correction a person or an agent made (a rename, a merge undone,
    an item reopened …): its audit row."""

    id: int
    namespace: str
    action: str
    #: The address the correction was about.
    target: str
    detail: dict
    created_at: str


@attrs.frozen
class Item:
    """A stored work item."""

    id: int
    namespace: str
    kind: str
    key: str
    status: str
    fingerprint: str
    payload: JSON
    resolution: JSON | None
    created_at: str
    updated_at: str


@attrs.frozen
class ScanMark:
    """How far a kind's last scan of a namespace read: the change log, the
    passage clock and the tombstone clock."""

    changes: int
    passages: int
    tombstones: int


@attrs.frozen
class PurgeRecord:
    id: int
    namespace: str
    target: str
    erased: list[str]
    created_at: str


@attrs.frozen
class PendingPurge:
    """A purge whose erasure committed, with the steps still to run."""

    purge: int
    target: str
    steps: list[str]


@attrs.frozen
class BadPendingPurge:
    """A ``purge_pending`` entry that memors could not have written as it
    stands: no command acts on it, and lint reports it."""

    purge: int
    #: The audit row's address (None: no audit row, or none that is an address).
    target: str | None
    #: Why it is not a purge's state, one phrase.
    reason: str


# --- what some queries answer: a row with what was found or counted beside it ---


@attrs.frozen
class Ensured:
    """The canonical id for a name (:meth:`~memors_core.storage.api.Entities.ensure`),
    and whether the entity was created for it."""

    id: str
    created: bool


@attrs.frozen
class NeedsPage:
    """An entity that needs a page
    (:meth:`~memors_core.storage.api.Entities.needing_page`): its canonical
    id and how many live passages it has."""

    entity: str
    passages: int


@attrs.frozen
class IdPair:
    """Two rows found together, by id, in the order found: canonical
    entities that look like one
    (:meth:`~memors_core.storage.api.Entities.same_name_pairs`), live facts
    that disagree (:meth:`~memors_core.storage.api.Facts.conflicting`)."""

    first: str
    second: str


@attrs.frozen
class StalePage:
    """A live stale page and what changed since it was built, each
    ``{"address", "change", "text"}``
    (:meth:`~memors_core.storage.api.Pages.changes`)."""

    page: Page
    changes: list[dict[str, str]]


@attrs.frozen
class LatestDocument:
    """A live document with the number of its latest version
    (:meth:`~memors_core.storage.api.Documents.latest_by_uri`), and that
    version's row when the look-up read it (``last``)."""

    document: Document
    version: int
    last: DocumentVersion | None = None


@attrs.frozen
class VersionSize:
    """One version of a document and how many passages it has
    (:meth:`~memors_core.storage.api.Documents.versions`)."""

    version: DocumentVersion
    passages: int


@attrs.frozen
class Dropped:
    """The document version that no longer holds a passage: the document
    and the first version without it
    (:meth:`~memors_core.storage.api.Documents.version_dropping`)."""

    document: str
    version: int


@attrs.frozen
class DocumentListed:
    """A live document as a listing shows it: with its latest version and
    how many live passages it has
    (:meth:`~memors_core.storage.api.Documents.listing`)."""

    document: Document
    latest: DocumentVersion
    passages: int


@attrs.frozen
class PageListed:
    """A live page as a listing shows it: with its canonical entity's id
    and name and whether it is stale
    (:meth:`~memors_core.storage.api.Pages.listing`)."""

    page: Page
    entity: str
    name: str
    stale: bool


@attrs.frozen
class Opened:
    """A merge candidate as :meth:`~memors_core.storage.api.MergeCandidates.open`
    left it: its id and status (a pair proposed before keeps both)."""

    id: int
    status: str


@attrs.frozen
class OpenKey:
    """An open work item of a kind, by its key
    (:meth:`~memors_core.storage.api.Items.open_keys`): its id and fingerprint."""

    id: int
    fingerprint: str
