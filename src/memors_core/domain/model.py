"""Domain objects: frozen attrs classes with no JSON concerns.

The wire shape of each (SPEC §10) belongs to :mod:`memors_core.wire`; field
names here are the JSON names, so the converter needs no renaming.
"""

from __future__ import annotations

from typing import Any

import attrs

JSON = dict[str, Any]

# --- references inside payloads --------------------------------------------


@attrs.frozen
class PassageRef:
    address: str
    document: str
    text: str


@attrs.frozen
class FactRef:
    address: str
    subject: str
    predicate: str
    value: str
    valid_from: str | None = None
    valid_to: str | None = None


@attrs.frozen
class EntityRef:
    address: str
    name: str
    aliases: list[str] = attrs.field(factory=list)


@attrs.frozen
class PageRef:
    address: str
    title: str
    content: str
    version: int


# --- results of operations ---------------------------------------------------


@attrs.frozen
class Remembered:
    document: str
    passages: list[str]
    entities: list[str]


@attrs.frozen
class RememberedMany:
    """What a bulk load did: ``documents`` = ``new`` + ``new_versions`` +
    ``unchanged`` (first seen; a known uri with changed text; a known uri
    with the same text, nothing stored). ``passages`` counts the documents'
    passages, ``entities`` the entities the load created."""

    documents: int
    passages: int
    entities: int
    new: int = 0
    new_versions: int = 0
    unchanged: int = 0


@attrs.frozen
class FactRecorded:
    fact: str


@attrs.frozen
class MergeProposed:
    candidate: int
    entities: list[str]
    status: str


@attrs.frozen
class SearchHit:
    address: str
    granularity: str
    text: str
    score: float
    #: For a page stored over its checks' flags (``force``): its unverified
    #: sentences (left out of the JSON for every other hit).
    unverified: list[str] | None = None


@attrs.frozen
class SearchResults:
    results: list[SearchHit]
    #: How passages were ranked: ``lexical``, ``semantic`` or ``hybrid``.
    mode: str = "lexical"
    #: Why the mode asked for could not be used (then the words ranked), if so.
    notice: str | None = None


@attrs.frozen
class Reindexed:
    """What ``reindex --vectors`` did in one namespace."""

    namespace: str
    #: Vectors made by this run.
    added: int
    #: Passages of the namespace with a vector now.
    vectors: int
    #: The model they come from.
    model: str


@attrs.frozen
class Forgotten:
    address: str
    status: str
    forgotten: list[str] = attrs.field(factory=list)


@attrs.frozen
class Purged:
    address: str
    erased: list[str]
    audit: int
    #: True when an earlier run had erased the rows (this one finished the file).
    earlier: bool = False
    #: False while an erasure step is left (another process held the WAL;
    #: on PostgreSQL, a role that may not rewrite the tables).
    finished: bool = True
    #: When not finished: what kept it from finishing and what finishes it.
    left: str | None = None


@attrs.frozen
class ItemSummary:
    id: int
    kind: str
    status: str
    #: Of the inputs the payload was built from; echo it to ``submit``.
    fingerprint: str
    payload: JSON


@attrs.frozen
class Compacted:
    namespace: str
    created: int
    open: int
    items: list[ItemSummary]
    #: Kinds whose scanner failed (``kind``, ``plugin``, ``error``); omitted when empty.
    errors: list[JSON] = attrs.field(factory=list)
    #: When paging (``after``): open items after the last one returned; omitted otherwise.
    more: int | None = None


@attrs.frozen
class CheckResult:
    passed: bool
    flagged: list[JSON] = attrs.field(factory=list)


@attrs.frozen
class SubmitReport:
    item: int
    kind: str
    status: str
    stored: bool
    address: str | None
    diff: str
    checks: dict[str, CheckResult]
    message: str = ""
    #: What the kind adds to the report (a duplicate item: ``kept``,
    #: ``forgotten``, ``left``); on the wire these are top-level fields.
    outcome: JSON = attrs.field(factory=dict)


@attrs.frozen
class Finding:
    rule: str
    address: str
    message: str
    related: list[str] = attrs.field(factory=list)


@attrs.frozen
class LintReport:
    namespace: str
    findings: list[Finding]


# --- things by address (get) -------------------------------------------------

#: A forgotten row's view carries ``forgotten`` = ``{"at", "reason", "item"?}``
#: and a superseded one ``superseded`` = ``{"at", "reason", "by"?, "item"?}``
#: (``by`` the newer row, ``item`` the work item that did it); a live row has
#: neither key on the wire (:data:`TOMBSTONE_FIELDS`).
TOMBSTONE_FIELDS = ("forgotten", "superseded")


@attrs.frozen
class DocumentView:
    address: str
    type: str
    status: str
    uri: str | None
    title: str | None
    metadata: JSON
    version: int
    created_at: str
    passages: list[str]
    #: Every version, oldest first: ``{"version", "created_at", "title", "passages": N}``.
    versions: list[JSON] = attrs.field(factory=list)
    forgotten: JSON | None = None


@attrs.frozen
class PassageView:
    address: str
    type: str
    status: str
    document: str
    position: int
    text: str
    hash: str
    entities: list[str]
    created_at: str
    forgotten: JSON | None = None
    superseded: JSON | None = None


@attrs.frozen
class FactView:
    address: str
    type: str
    status: str
    subject: str
    subject_name: str
    predicate: str
    value: str
    valid_from: str | None
    valid_to: str | None
    source: str | None
    recorded_at: str
    expired: bool
    forgotten: JSON | None = None
    superseded: JSON | None = None


@attrs.frozen
class EntityView:
    address: str
    type: str
    status: str
    name: str
    aliases: list[str]
    passages: list[PassageRef]
    facts: list[FactRef]
    page: str | None
    merged_into: str | None = None


@attrs.frozen
class SentenceView:
    """A checked sentence of a page and the addresses it cites; ``flags``
    is what the checks flagged in it when its page was stored over them
    (``force``): such a sentence is *unverified*, whatever it cites."""

    text: str
    sources: list[str]
    flags: list[dict[str, Any]] = attrs.field(factory=list)


@attrs.frozen
class PageView:
    address: str
    type: str
    status: str
    entity: str
    title: str
    content: str
    version: int
    previous: str | None
    is_inference: int
    sources: list[str]
    #: The facts the page was built with (empty for a page written before
    #: pages recorded them).
    facts: list[str]
    sentences: list[SentenceView]
    stale: bool
    flags: JSON
    created_at: str
    forgotten: JSON | None = None
    superseded: JSON | None = None


@attrs.frozen
class ItemView:
    address: str
    type: str
    status: str
    id: int
    kind: str
    fingerprint: str
    payload: JSON
    resolution: JSON | None
    created_at: str
    updated_at: str


@attrs.frozen
class EntitySummary:
    address: str
    name: str
    aliases: list[str]
    passages: int
    facts: int
    page: str | None


@attrs.frozen
class EntityList:
    namespace: str
    entities: list[EntitySummary]


@attrs.frozen
class PageSummary:
    """One line of a list of pages: a live page and what it is about."""

    address: str
    title: str
    #: The page's entity (the one it was merged into, if so) and its name.
    entity: str
    entity_name: str
    version: int
    created_at: str
    stale: bool
    #: Stored over its checks' flags (``force``).
    unverified: bool


@attrs.frozen
class PageList:
    namespace: str
    #: How many there are in all (not only on this page of the list).
    total: int
    pages: list[PageSummary]


@attrs.frozen
class DocumentSummary:
    """One line of a list of documents: a live document and its latest version."""

    address: str
    title: str | None
    uri: str | None
    version: int
    #: Its live passages.
    passages: int
    created_at: str


@attrs.frozen
class DocumentList:
    namespace: str
    #: How many there are in all (not only on this page of the list).
    total: int
    documents: list[DocumentSummary]


@attrs.frozen
class FactList:
    namespace: str
    facts: list[FactRef]


@attrs.frozen
class ItemList:
    namespace: str
    items: list[ItemSummary]


# --- resolutions -------------------------------------------------------------


@attrs.frozen
class SkipResolution:
    """Every kind accepts ``skip`` with a reason."""

    reason: str


@attrs.frozen
class PageResolution:
    """A page written from an item's payload (kinds ``page`` and ``stale``)."""

    content: str
    title: str
    cites: list[str] | None = None
