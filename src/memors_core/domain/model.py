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
    """A passage as a payload or an entity lists it: its address, its document's and
    its text."""

    address: str
    document: str
    text: str


@attrs.frozen
class FactRef:
    """A fact as a payload or a list gives it; an absent bound is open (``None``)."""

    address: str
    subject: str
    predicate: str
    value: str
    valid_from: str | None = None
    valid_to: str | None = None


@attrs.frozen
class EntityRef:
    """An entity as a payload names it: address, canonical name and aliases."""

    address: str
    name: str
    aliases: list[str] = attrs.field(factory=list)


@attrs.frozen
class PageRef:
    """A page version as a payload carries it (the page a ``stale`` item rewrites)."""

    address: str
    title: str
    content: str
    version: int


# --- results of operations ---------------------------------------------------


@attrs.frozen
class Remembered:
    """What :meth:`Memory.remember` stored: the document's address, its passages'
    and the entities they mention."""

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
    """The address of the fact :meth:`Memory.record_fact` stored."""

    fact: str


@attrs.frozen
class MergeProposed:
    """The merge candidate :meth:`Memory.propose_merge` opened (or found open), the
    two entities and its ``status``."""

    candidate: int
    entities: list[str]
    status: str


@attrs.frozen
class Corrected:
    """What a correction did (rename, unmerge, reopen): its audit row's id,
    the address it was about, the pages it marked stale and, for a reopened
    item, the item now open for it."""

    correction: int
    action: str
    address: str
    message: str
    stale: list[str] = attrs.field(factory=list)
    item: int | None = None


@attrs.frozen
class CorrectionEntry:
    """One row of the audit of corrections (:meth:`Memory.corrections`)."""

    #: The audit row's number (what ``Corrected.correction`` returned).
    id: int
    #: ``rename``, ``merge``, ``unmerge``, ``reopen`` or ``propose_again``.
    action: str
    #: The address the correction was about (an entity, an item).
    target: str
    #: What it did, as recorded: the names before and after, what moved,
    #: the rows a reopened item restored or superseded, its reason …
    detail: dict
    created_at: str
    #: What it did in one line (``renamed 'A' to 'B'``).
    summary: str


@attrs.frozen
class CorrectionList:
    """A namespace's corrections, oldest first (:meth:`Memory.corrections`)."""

    namespace: str
    corrections: list[CorrectionEntry]


@attrs.frozen
class SearchHit:
    """One result of a search: the row's address, its granularity, its text (or a
    snippet) and its score."""

    address: str
    granularity: str
    text: str
    score: float
    #: For a page stored over its checks' flags (``force``): its unverified
    #: sentences (left out of the JSON for every other hit).
    unverified: list[str] | None = None


@attrs.frozen
class SearchResults:
    """What :meth:`Memory.search` found, best first."""

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
    """What :meth:`Memory.forget` did: the address, its ``status`` now, and every
    address it forgot (a document's passages too)."""

    address: str
    status: str
    forgotten: list[str] = attrs.field(factory=list)


@attrs.frozen
class Purged:
    """What :meth:`Memory.purge` erased for good, and its audit record."""

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
    """An open work item as :meth:`Memory.compact` and :meth:`Memory.items` hand it
    out, with its payload."""

    id: int
    kind: str
    status: str
    #: Of the inputs the payload was built from; echo it to ``submit``.
    fingerprint: str
    payload: JSON


@attrs.frozen
class Compacted:
    """What :meth:`Memory.compact` did: items created, how many are open, and the
    open items (as many as ``limit``)."""

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
    """One check's verdict on a submission: ``passed``, and what it ``flagged`` when
    not."""

    passed: bool
    flagged: list[JSON] = attrs.field(factory=list)


@attrs.frozen
class SubmitReport:
    """What :meth:`Memory.submit` did with a resolution: the item's ``status`` now,
    whether it was ``stored`` (and where), the diff against the previous page, each
    check's result and a one-line ``message``."""

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
    """One lint finding: its ``rule``, the main ``address``, a readable ``message``
    and the other addresses involved (``related``)."""

    rule: str
    address: str
    message: str
    related: list[str] = attrs.field(factory=list)


@attrs.frozen
class LintReport:
    """What :meth:`Memory.lint` found in a namespace (no findings: clean)."""

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
    """A document as :meth:`Memory.get` shows it: its latest version's passages and
    every version."""

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
    """A passage as :meth:`Memory.get` shows it, with the entities it mentions."""

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
    """A fact as :meth:`Memory.get` shows it; ``expired`` once its ``valid_to`` has
    passed."""

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
    """An entity as :meth:`Memory.get` and :meth:`Memory.entity` show it: its live
    passages and facts, and its page."""

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
    """A page version as :meth:`Memory.get` shows it: its content, the passages it
    cites, its checked sentences and whether it is stale."""

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
    """A work item as :meth:`Memory.get` shows it (``memo://item/N``), whatever its
    status, with its resolution once done."""

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
    """An entity in a list: its counts of live passages and facts, and its page."""

    address: str
    name: str
    aliases: list[str]
    passages: int
    facts: int
    page: str | None


@attrs.frozen
class EntityList:
    """One page of a namespace's entities (:meth:`Memory.entities`), with how many there are."""

    namespace: str
    #: How many there are in all (not only on this page of the list).
    total: int
    entities: list[EntitySummary]


@attrs.frozen
class NamespaceFigures:
    """A namespace's figures, as the metrics of SPEC §7 count them (:meth:`Memory.figures`)."""

    namespace: str
    #: Live pages, and those of them that are stale.
    pages: int
    stale: int
    #: Open work items by kind (every registered kind, 0 when it has none).
    open: dict[str, int]
    #: Store-wide counters: work items done, pages marked stale.
    done: int
    marked_stale: int


@attrs.frozen
class NamespaceOverview:
    """What a namespace's home shows, read at once (:meth:`Memory.overview`)."""

    namespace: str
    figures: NamespaceFigures
    #: The first page of its entities, with how many there are.
    entities: EntityList
    #: Its newest corrections, newest first, and how many there are in all.
    corrections: list[CorrectionEntry]
    corrections_total: int


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
    """One page of a namespace's live pages (:meth:`Memory.pages`), with how many there are."""

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
    """One page of a namespace's live documents (:meth:`Memory.documents`), with how many there are."""

    namespace: str
    #: How many there are in all (not only on this page of the list).
    total: int
    documents: list[DocumentSummary]


@attrs.frozen
class FactList:
    """A namespace's live facts (:meth:`Memory.facts`)."""

    namespace: str
    facts: list[FactRef]


@attrs.frozen
class ItemList:
    """Work items of a namespace (:meth:`Memory.items`)."""

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
