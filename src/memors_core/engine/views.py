"""The read side: what ``get``, the listings and ``search`` show, built from
typed repository calls inside the caller's transaction.

Every function takes a :class:`~memors_core.storage.api.Tx` and returns the
attrs views of :mod:`memors_core.domain.model`; none opens a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memors_core.domain import dates
from memors_core.domain import search as rank
from memors_core.domain.counters import PAGES_MARKED_STALE, WORK_ITEMS_TOTAL
from memors_core.domain.grounding import flags_by_sentence
from memors_core.domain.ids import address
from memors_core.domain.model import (
    DocumentList,
    DocumentSummary,
    DocumentView,
    EntityList,
    EntityRef,
    EntitySummary,
    EntityView,
    FactList,
    FactView,
    ItemList,
    ItemSummary,
    ItemView,
    NamespaceFigures,
    PageList,
    PageSummary,
    PageView,
    PassageRef,
    PassageView,
    SearchHit,
    SentenceView,
)
from memors_core.domain.refs import fact_ref, passage_ref
from memors_core.domain.rows import Passage, Tombstone

if TYPE_CHECKING:
    from memors_core.domain.rows import Entity
    from memors_core.storage.api import Tx

GRANULARITIES = rank.GRANULARITIES


# --- the record of change ------------------------------------------------------


def record_of_change(tx: Tx, ident: str) -> tuple[str, dict[str, Any] | None]:
    """``(state, record)`` of a row: ``("live", None)``, or the state of a
    forgotten or superseded row with its record — when (``at``), why
    (``reason``, as given), by what newer row (``by``, when there is one)
    and which work item did it (``item``). Raw rows are never modified, so
    ``by`` is read off the rows themselves."""
    return record_of_stone(tx, tx.tombstones.get(ident))


def record_of_stone(tx: Tx, stone: Tombstone | None) -> tuple[str, dict[str, Any] | None]:
    """:func:`record_of_change` of a row whose tombstone (None: it is live) was read."""
    if stone is None:
        return "live", None
    record: dict[str, Any] = {"at": stone.created_at, "reason": stone.reason}
    if stone.state == "superseded":
        record.update(_superseded_by(tx, stone))
    if stone.item is not None:
        record["item"] = address("item", stone.item)
    return stone.state, record


def _superseded_by(tx: Tx, stone: Tombstone) -> dict[str, Any]:
    """The newer row: the next page version, the document version that
    dropped a passage, the bounded copy of a fact or the fact a conflict kept."""
    if stone.type == "page":
        newer = tx.pages.newer(stone.target)
        return {"by": address("page", newer)} if newer else {}
    if stone.type == "passage":
        dropped = tx.documents.version_dropping(stone.target)
        if dropped is None:
            return {}
        return {"by": address("document", dropped.document), "version": dropped.version}
    if stone.type == "fact":
        # A bounded copy is recorded in the same instant as the tombstone.
        copy = tx.facts.bounded_copy(stone.target, stone.created_at)
        if copy is not None:
            return {"by": address("fact", copy)}
        if stone.item is not None:
            resolution = tx.items.resolution(stone.item, stone.namespace)
            keep = resolution.get("keep") if isinstance(resolution, dict) else None
            if isinstance(keep, str):
                keep = [keep]
            if isinstance(keep, list) and len(keep) == 1 and isinstance(keep[0], str):
                return {"by": keep[0]}
    return {}


# --- get -------------------------------------------------------------------------


def document(tx: Tx, ident: str, namespace: str) -> DocumentView | None:
    doc = tx.documents.get(ident, namespace)
    if doc is None:
        return None
    latest = tx.documents.latest_version(ident)
    passages = tx.documents.version_passages(ident, latest.version)
    versions = [
        {
            "version": s.version.version,
            "created_at": s.version.created_at,
            "title": s.version.title,
            "passages": s.passages,
        }
        for s in tx.documents.versions(ident)
    ]
    state, record = record_of_change(tx, ident)
    return DocumentView(
        address=address("document", ident),
        type="document",
        status=state,
        uri=doc.uri,
        title=latest.title,
        metadata=latest.metadata,
        version=latest.version,
        created_at=doc.created_at,
        passages=[address("passage", p) for p in passages],
        versions=versions,
        forgotten=record,
    )


def passage(tx: Tx, ident: str, namespace: str) -> PassageView | None:
    shown = tx.passages.get_shown(ident, namespace)
    if shown is None:
        return None
    return _passage_view(tx, *shown)


def _passage_view(
    tx: Tx, row: Passage, stone: Tombstone | None, entities: list[str]
) -> PassageView:
    state, record = record_of_stone(tx, stone)
    return PassageView(
        address=address("passage", row.id),
        type="passage",
        status=state,
        document=address("document", row.document),
        position=row.position,
        text=row.text,
        hash=row.hash,
        entities=[address("entity", e) for e in entities],
        created_at=row.created_at,
        **{state: record} if record else {},
    )


def fact(tx: Tx, ident: str, namespace: str) -> FactView | None:
    row = tx.facts.get(ident, namespace)
    if row is None:
        return None
    state, record = record_of_change(tx, ident)
    return FactView(
        address=address("fact", ident),
        type="fact",
        status=state,
        subject=address("entity", row.canonical),
        subject_name=row.subject_name,
        predicate=row.predicate,
        value=row.value,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        source=address("passage", row.source) if row.source else None,
        recorded_at=row.recorded_at,
        expired=row.to_ts is not None and row.to_ts <= dates.now_ts(),
        **{state: record} if record else {},
    )


def entity(tx: Tx, ident: str, namespace: str) -> EntityView | None:
    row = tx.entities.get(ident, namespace)
    if row is None:
        return None
    canonical = row.canonical
    page = tx.pages.current(canonical)
    merged = canonical != ident
    return EntityView(
        address=address("entity", ident),
        type="entity",
        status="superseded" if merged else "live",
        name=row.name,
        aliases=[] if merged else tx.entities.aliases(ident),
        passages=[passage_ref(p) for p in tx.entities.live_passages(canonical)],
        facts=[fact_ref(f) for f in tx.facts.of_entity(canonical)],
        page=address("page", page.id) if page else None,
        merged_into=address("entity", canonical) if merged else None,
    )


def page(tx: Tx, ident: str, namespace: str) -> PageView | None:
    row = tx.pages.get(ident, namespace)
    if row is None:
        return None
    status, record = record_of_change(tx, ident)
    return PageView(
        address=address("page", ident),
        type="page",
        status=status,
        entity=address("entity", tx.entities.require(row.entity).canonical),
        title=row.title,
        content=row.content,
        version=row.version,
        previous=address("page", row.previous) if row.previous else None,
        is_inference=1,
        sources=[address("passage", s.passage) for s in tx.pages.sources(ident)],
        facts=tx.pages.facts(ident),
        sentences=sentence_views(tx.pages.sentences(ident), row.flags),
        stale=status == "live" and tx.pages.is_stale(ident),
        flags=row.flags,
        created_at=row.created_at,
        **{status: record} if record else {},
    )


def sentence_views(sentences: Iterable[Any], flags: Any) -> list[SentenceView]:
    """A page's recorded sentences with what the checks flagged in each. A
    page stored over flags before its sentences recorded them (schema 8)
    has them on the page only: they are matched to its sentences by text."""
    rows = list(sentences)
    if flags and not any(s.flags for s in rows):
        by_text = flags_by_sentence(flags if isinstance(flags, dict) else {})
        return [SentenceView(s.text, list(s.sources), by_text.get(s.text, [])) for s in rows]
    return [SentenceView(s.text, list(s.sources), [dict(f) for f in s.flags]) for s in rows]


def item(tx: Tx, ident: str, namespace: str) -> ItemView | None:
    row = tx.items.get(int(ident), namespace)
    if row is None:
        return None
    return ItemView(
        address=address("item", row.id),
        type="item",
        status=row.status,
        id=row.id,
        kind=row.kind,
        fingerprint=row.fingerprint,
        payload=row.payload,
        resolution=row.resolution,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


VIEWS: dict[str, Callable[[Tx, str, str], Any]] = {
    "document": document,
    "passage": passage,
    "fact": fact,
    "entity": entity,
    "page": page,
    "item": item,
}


def get(tx: Tx, kind: str, ident: str, namespace: str) -> Any:
    """The view of one thing by its address's kind and id; None if there is none."""
    return VIEWS[kind](tx, ident, namespace)


def get_many(tx: Tx, wanted: Iterable[tuple[str, str, str]], namespace: str) -> dict[str, Any]:
    """:func:`get` of each ``(address, kind, id)``: address -> view, those
    that are not there left out. Passages (a page's citations) are read in
    three look-ups however many; the other kinds one at a time."""
    wanted = list(wanted)
    ids = [ident for _a, kind, ident in wanted if kind == "passage"]
    rows = tx.passages.get_many(ids, namespace) if ids else {}
    stones = tx.tombstones.get_many(rows) if rows else {}
    mentions = tx.passages.entities_of_many(rows) if rows else {}
    out: dict[str, Any] = {}
    for addr, kind, ident in wanted:
        if kind == "passage":
            row = rows.get(ident)
            view = row and _passage_view(tx, row, stones.get(ident), mentions.get(ident, []))
        else:
            view = get(tx, kind, ident, namespace)
        if view is not None:
            out[addr] = view
    return out


# --- listings -------------------------------------------------------------------------


def entities(tx: Tx, namespace: str, offset: int = 0, limit: int | None = None) -> EntityList:
    """The canonical entities of a namespace by name; ``offset`` and ``limit``
    take one page of them (the counts are made for that page only, in a
    few look-ups however long the page)."""
    return entities_of(tx, namespace, tx.entities.listed(namespace, offset, limit))


def entities_of(tx: Tx, namespace: str, listed: tuple[list[Entity], int]) -> EntityList:
    """:func:`entities` of a page of entities read (``entities.listed``)."""
    shown, total = listed
    ids = [row.id for row in shown]
    # (what the list shows of each entity: four reads sent together)
    aliases, passages, facts, pages = (
        tx.together(
            lambda: tx.entities.aliases_of(shown),
            lambda: tx.entities.live_passage_counts(ids),
            lambda: tx.facts.live_counts_of(ids),
            lambda: tx.pages.current_of(ids),
        )
        if shown
        else ({}, {}, {}, {})
    )
    out = [
        EntitySummary(
            address=address("entity", row.id),
            name=row.name,
            aliases=aliases.get(row.id, []),
            passages=passages.get(row.id, 0),
            facts=facts.get(row.id, 0),
            page=address("page", pages[row.id].id) if row.id in pages else None,
        )
        for row in shown
    ]
    return EntityList(namespace=namespace, total=total, entities=out)


def figures(tx: Tx, kinds: Iterable[str], namespace: str | None = None) -> list[NamespaceFigures]:
    """The figures of ``namespace`` (every namespace's, and ``default``'s
    even when empty, if None), as the metrics count them, in three look-ups
    sent together."""
    return figures_of(tx, kinds, namespace, tx.together(*figure_reads(tx, namespace)))


def figure_reads(tx: Tx, namespace: str | None) -> tuple[Callable[[], Any], ...]:
    """The reads :func:`figures_of` counts from (for :meth:`Tx.together`)."""
    return (
        lambda: tx.items.open_counts(namespace),
        lambda: tx.pages.counts(namespace),
        lambda: tx.counters.read_many((WORK_ITEMS_TOTAL, PAGES_MARKED_STALE)),
    )


def figures_of(
    tx: Tx, kinds: Iterable[str], namespace: str | None, read: Sequence[Any]
) -> list[NamespaceFigures]:
    """:func:`figures` from the answers of :func:`figure_reads`."""
    open_counts, pages, counters = read
    names = [namespace] if namespace is not None else sorted({"default", *tx.namespaces.names()})
    done = sum(n for (_kind, event), n in counters[WORK_ITEMS_TOTAL].items() if event == "done")
    marked = counters[PAGES_MARKED_STALE].get(("", ""), 0)
    return [
        NamespaceFigures(
            namespace=ns,
            pages=pages.get(ns, (0, 0))[0],
            stale=pages.get(ns, (0, 0))[1],
            open={
                kind: open_counts.get((ns, kind), 0)
                for kind in sorted({*kinds, *(k for (n, k) in open_counts if n == ns)})
            },
            done=done,
            marked_stale=marked,
        )
        for ns in names
    ]


def entity_count(tx: Tx, namespace: str) -> int:
    """How many canonical entities the namespace has."""
    return tx.entities.listed(namespace, 0, 0)[1]


def pages(
    tx: Tx, namespace: str, sort: str, offset: int, limit: int, stale: bool = False
) -> PageList:
    """One page of the namespace's live pages (only the stale ones if ``stale``)."""
    rows = tx.pages.listing(namespace, sort, offset, limit, stale=stale)
    out = [
        PageSummary(
            address=address("page", row.page.id),
            title=row.page.title,
            entity=address("entity", row.entity),
            entity_name=row.name,
            version=row.page.version,
            created_at=row.page.created_at,
            stale=row.stale,
            unverified=bool(row.page.flags),
        )
        for row in rows
    ]
    return PageList(namespace, tx.pages.live_count(namespace, stale=stale), out)


def documents(tx: Tx, namespace: str, sort: str, offset: int, limit: int) -> DocumentList:
    """One page of the namespace's live documents, each with its latest version."""
    out = [
        DocumentSummary(
            address=address("document", row.document.id),
            title=row.latest.title,
            uri=row.document.uri,
            version=row.latest.version,
            passages=row.passages,
            created_at=row.document.created_at,
        )
        for row in tx.documents.listing(namespace, sort, offset, limit)
    ]
    return DocumentList(namespace, tx.documents.live_count(namespace), out)


def labels(tx: Tx, namespace: str, wanted: Iterable[tuple[str, str, str]]) -> dict[str, str]:
    """What a person calls each ``(address, kind, id)``: an entity's name, a
    document's title (else its URI), a page's title, a fact written out;
    passages, items and what is not there are left out."""
    wanted = list(wanted)
    docs = tx.documents.labels([i for _a, kind, i in wanted if kind == "document"], namespace)
    out: dict[str, str] = {}
    for addr, kind, ident in wanted:
        name: str | None = None
        if kind == "entity":
            row = tx.entities.get(ident, namespace)
            name = row.name if row else None
        elif kind == "document" and ident in docs:
            title, uri = docs[ident]
            name = title or uri
        elif kind == "page":
            page_row = tx.pages.get(ident, namespace)
            name = page_row.title if page_row else None
        elif kind == "fact":
            fact_row = tx.facts.get(ident, namespace)
            if fact_row is not None:
                name = f"{fact_row.subject_name} {fact_row.predicate} {fact_row.value}"
        if name:
            out[addr] = name
    return out


def fact_history(tx: Tx, namespace: str, subject: str) -> list[FactView]:
    """Every fact about ``subject`` (a name or address; after merges), live or
    not, oldest first, each with its state and record of change."""
    canonical = tx.entities.resolve(subject, namespace)
    return [fact(tx, f.id, namespace) for f in tx.facts.history(canonical)]


def absorbed(tx: Tx, namespace: str, subject: str) -> list[EntityRef]:
    """The entities merged into ``subject`` (a name or address), oldest first."""
    canonical = tx.entities.resolve(subject, namespace)
    return [EntityRef(address("entity", e.id), e.name) for e in tx.entities.absorbed(canonical)]


def entity_named(tx: Tx, name: str, namespace: str) -> EntityView | None:
    """The entity called ``name`` (or an entity address); NotFound if none."""
    return entity(tx, tx.entities.resolve(name, namespace), namespace)


def facts(tx: Tx, namespace: str, subject: str | None = None) -> FactList:
    """Live facts of a namespace, or of the entity ``subject`` (a name or address)."""
    if subject is not None:
        rows = tx.facts.of_entity(tx.entities.resolve(subject, namespace))
    else:
        rows = tx.facts.live(namespace)
    return FactList(namespace, [fact_ref(f) for f in rows])


def items(
    tx: Tx,
    namespace: str,
    kind: str | None,
    status: str | None,
    after: int = 0,
    limit: int | None = None,
) -> ItemList:
    return ItemList(
        namespace,
        [
            ItemSummary(i.id, i.kind, i.status, i.fingerprint, i.payload)
            for i in tx.items.list(namespace, kind, status, after, limit)
        ],
    )


def passage_refs(tx: Tx, ids: Iterable[str]) -> list[PassageRef]:
    """Payload references for passages, in the order given (missing ones left out)."""
    return [passage_ref(p) for p in tx.passages.by_ids(ids)]


# --- search -------------------------------------------------------------------------


def search_mode(
    tx: Tx, namespace: str, granularity: str, asked: str | None, unwanted: str | None
) -> tuple[str, str | None]:
    """The mode a search runs in, and a notice when the user should know
    why not the one ``asked``, or that some passages are ranked by words.

    Asked nothing, a search ranks by both words and meaning (``hybrid``)
    wherever the namespace's passages have vectors and this process can
    embed the question (``unwanted``: why it cannot, else None), and by
    words otherwise. A mode asked for that cannot be used falls back to the
    words, with a notice saying why. Where this process makes vectors and
    passages of the namespace are still waiting for theirs (they are made
    off the write path), the notice says so: those are found by their
    words only until then."""
    if asked == "lexical":
        return "lexical", None
    reason = None
    if granularity not in ("passage", "all"):
        plural = {"page": "pages", "fact": "facts", "entity": "entities"}[granularity]
        reason = f"only passages have vectors: {plural} are ranked by their words"
    elif unwanted is not None:
        reason = unwanted
    elif tx.vectors.count(namespace) == 0:
        if tx.vectors.any_waiting(namespace):
            return "lexical", (
                f"searched by words only: no passage of namespace {namespace!r} has its "
                f"vector yet ({WAITING})"
            )
        reason = (
            f"no passage of namespace {namespace!r} has a vector yet "
            "(memors-mcp reindex --vectors makes them)"
        )
    if reason is None:
        used, notice = asked or "hybrid", None
        if tx.vectors.any_waiting(namespace):
            fare = "left out" if used == "semantic" else "ranked by their words only"
            notice = (
                f"some passages of namespace {namespace!r} have no vector yet: they are "
                f"{fare} until they have one ({WAITING})"
            )
        return used, notice
    return "lexical", None if asked is None else f"searched by words only: {reason}"


#: How passages waiting for their vectors get them, said in a search's notice.
WAITING = "vectors are made in the background; memors-mcp reindex --vectors makes them now"


def search(
    tx: Tx,
    namespace: str,
    query: str,
    granularity: str,
    limit: int,
    as_of: str | None,
    mode: str = "lexical",
    vector: bytes | Callable[[], bytes] | None = None,
) -> list[SearchHit]:
    """Ranked hits of one granularity, or of all of them merged by their
    share of what the query could score in their own index
    (:func:`memors_core.domain.search.run`, which every engine's search
    shares: ``memors-mcp search`` runs it on a lean read of a SQLite file);
    passages by meaning too in ``semantic`` and ``hybrid`` mode, given the
    question's ``vector`` (or a call that waits for it)."""
    found = rank.run(
        tx.search,
        namespace,
        query,
        granularity,
        limit,
        as_of,
        lambda names: tx.entities.named(namespace, names),
        mode,
        vector,
    )
    return [SearchHit(*hit.fields(), unverified=_unverified(tx, hit)) for hit in found]


def _unverified(tx: Tx, hit: Any) -> list[str] | None:
    """A page hit's unverified sentences, if it was stored over its checks' flags."""
    if hit.granularity != "page":
        return None
    row = tx.pages.get(hit.address.rsplit("/", 1)[1])
    if row is None or not row.flags:
        return None
    return [s.text for s in sentence_views(tx.pages.sentences(row.id), row.flags) if s.flags]
