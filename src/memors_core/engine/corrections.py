"""Corrections people make to memory, each reversible and recorded.

Rename an entity (its old names stay aliases), undo a merge (the two
entities separate again and the aliases the merge gave are taken back),
propose a rejected merge again, and reopen a finished item (a skip, a
settled conflict, a decided merge). Every correction appends a row to
``corrections`` (the audit), marks the pages involved stale so a refresh
item comes, and modifies no raw row: what a correction brings back is a new
row (a fact restored is a copy of it), what it takes back gets a tombstone
or a retraction row of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memors_core.domain import text
from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address, uuid7
from memors_core.domain.model import (
    Corrected,
    CorrectionEntry,
    CorrectionList,
    MergeProposed,
)
from memors_core.domain.rows import Correction, DocumentVersion, Entity, NewPassage, Passage
from memors_core.errors import BadInput, NotFound, Refused
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.engine.services import Services
    from memors_core.plugins.kinds import Item
    from memors_core.storage.api import Tx

log = get_logger("memors")


#: The corrections the audit records, as its ``action`` column names them.
ACTIONS = ("rename", "merge", "unmerge", "reopen", "propose_again")


def listing(tx: Tx, namespace: str, action: str | None, target: str | None) -> CorrectionList:
    """The namespace's corrections, oldest first (of ``action``, about ``target``)."""
    return CorrectionList(
        namespace=namespace,
        corrections=[_entry(c) for c in tx.corrections.list(namespace, action, target)],
    )


def newest(tx: Tx, namespace: str, limit: int) -> tuple[list[CorrectionEntry], int]:
    """The namespace's ``limit`` newest corrections, newest first, and how many it has."""
    rows, total = tx.corrections.newest(namespace, limit)
    return [_entry(c) for c in rows], total


def _entry(c: Correction) -> CorrectionEntry:
    return CorrectionEntry(c.id, c.action, c.target, c.detail, c.created_at, _summary(c))


def _summary(c: Correction) -> str:
    """One line saying what the correction ``c`` did."""
    d = c.detail
    if c.action == "rename":
        return f"renamed {d.get('from')!r} to {d.get('to')!r}"
    if c.action == "merge":
        via = f" (item {d['item']})" if d.get("item") else ""
        return f"merged {d.get('absorbed')} into {c.target}{via}"
    if c.action == "unmerge":
        return f"separated {c.target} from {d.get('survivor')}"
    if c.action == "propose_again":
        return "proposed again: " + " + ".join(map(str, d.get("entities") or []))
    line = f"reopened {c.target}"
    if d.get("item"):
        line += f" as item {d['item']}"
    restored = d.get("restored") or []
    if restored:
        line += f"; {len(restored)} row(s) restored"
    if d.get("reason"):
        line += f": {d['reason']}"
    return line


def clean_name(name: str) -> str:
    clean = " ".join(name.split())
    if not clean:
        raise BadInput("an entity name must not be empty")
    if len(clean) > 200:
        raise BadInput(f"entity name too long ({len(clean)} characters; at most 200)")
    return clean


def _stale(tx: Tx, canonicals: list[str], cause: str, target: str | None) -> list[str]:
    """Mark the current page of each entity stale; their addresses."""
    marked = []
    for canonical in dict.fromkeys(canonicals):
        page = tx.pages.current(canonical)
        if page is not None:
            tx.pages.mark_stale(page.id, cause, target)
            marked.append(address("page", page.id))
    return marked


def rename(tx: Tx, namespace: str, entity: str, name: str) -> Corrected:
    """Give an entity a new name; every name it had still resolves to it."""
    canonical = tx.entities.resolve(entity, namespace)
    name = clean_name(name)
    owner = tx.entities.find(name, namespace)
    if owner is not None and owner != canonical:
        raise BadInput(
            f"{name!r} already names another entity ({address('entity', owner)}); "
            "propose a merge instead"
        )
    old = tx.entities.require(canonical).name
    if name == old:
        raise BadInput(f"the entity is already named {old!r}")
    target = address("entity", canonical)
    ident = tx.corrections.record(namespace, "rename", target, {"from": old, "to": name})
    tx.entities.rename(canonical, namespace, name, ident)
    stale = _stale(tx, [canonical], "rename", target)
    return Corrected(
        correction=ident,
        action="rename",
        address=target,
        message=f"renamed {old!r} to {name!r}; {old!r} stays an alias",
        stale=stale,
    )


def _entity_row(tx: Tx, namespace: str, ref: str) -> Entity:
    """The entity ``ref`` names itself (not the one it was merged into)."""
    if ref.startswith("memo://"):
        _, ident = parse_address(ref, expect=("entity",))
        found = tx.entities.get(ident, namespace)
        if found is None:
            raise NotFound(f"no entity {ref} in namespace {namespace!r}")
        return found
    key = text.match_key(ref)
    for row in tx.entities.absorbed(tx.entities.resolve(ref, namespace)):
        if text.match_key(row.name) == key:
            return row
    return tx.entities.require(tx.entities.resolve(ref, namespace))


def _merge_record(tx: Tx, namespace: str, entity: Entity) -> Correction | None:
    """The newest merge, not undone, that took ``entity`` into another."""
    undone = {c.detail.get("merge") for c in tx.corrections.list(namespace, "unmerge")}
    target = address("entity", entity.id)
    for rec in reversed(tx.corrections.list(namespace, "merge")):
        if rec.id in undone:
            continue
        if rec.detail.get("absorbed") == target or entity.id in rec.detail.get("moved", []):
            return rec
    return None


def undo_merge(tx: Tx, namespace: str, entity: str) -> Corrected:
    """Separate an entity from the one it was merged into (``entity``: the
    name or address of the one merged away)."""
    row = _entity_row(tx, namespace, entity)
    rec = _merge_record(tx, namespace, row)
    if rec is None:
        if row.canonical == row.id:
            raise BadInput(f"{entity!r} was not merged into another entity: nothing to undo")
        # A merge made before merges were recorded: this entity alone separates.
        absorbed, survivor_row, moved, aliases, candidate = (
            row.id,
            row.canonical,
            [row.id],
            [],
            None,
        )
    else:
        _, absorbed = parse_address(rec.detail["absorbed"], expect=("entity",))
        _, survivor_row = parse_address(rec.target, expect=("entity",))
        moved, aliases = rec.detail.get("moved", [absorbed]), rec.detail.get("aliases", [])
        candidate = rec.detail.get("candidate")
    survivor = tx.entities.require(survivor_row).canonical
    if tx.entities.require(absorbed).canonical != survivor:
        raise BadInput(f"{entity!r} is not merged into another entity now: nothing to undo")
    target = address("entity", absorbed)
    ident = tx.corrections.record(
        namespace,
        "unmerge",
        target,
        {
            "merge": rec.id if rec else None,
            "survivor": address("entity", survivor),
            "moved": moved,
            "aliases": aliases,
        },
    )
    tx.entities.separate(moved, absorbed)
    for alias in aliases:
        tx.entities.retract_alias(survivor_row, namespace, alias, ident)
    if candidate is None:
        for cand in tx.merges.in_namespace(namespace, "accepted"):
            if absorbed in (cand.first, cand.second):
                candidate = cand.id
    if candidate is not None:
        # Undone is decided: the scanner does not propose the pair again; a person may.
        tx.merges.set_status(candidate, "rejected")
    stale = _stale(tx, [survivor], "unmerge", target)
    stale += _stale(tx, [absorbed], "unmerge", address("entity", survivor))
    name = tx.entities.require(absorbed).name
    return Corrected(
        correction=ident,
        action="unmerge",
        address=target,
        message=(
            f"{name!r} is an entity of its own again, apart from "
            f"{tx.entities.require(survivor).name!r}"
        ),
        stale=stale,
    )


def propose_again(
    services: Services, tx: Tx, namespace: str, candidate: int, entities: list[str]
) -> MergeProposed:
    """Open a rejected merge candidate again (a person's explicit proposal),
    with its merge item: the scan would see the decided item unchanged."""
    tx.merges.set_status(candidate, "open")
    last = tx.items.last_for_key(namespace, "merge", str(candidate))
    kind = services.kinds.get("merge")
    if last is not None and kind is not None:
        _open_for_key(services, tx, namespace, kind, last)
    cand = tx.merges.get(candidate)
    tx.corrections.record(
        namespace,
        "propose_again",
        address("entity", cand.first),
        {"candidate": candidate, "entities": entities},
    )
    return MergeProposed(candidate=candidate, entities=entities, status="open")


# --- reopening a finished item ---------------------------------------------------------


def reopen(services: Services, tx: Tx, namespace: str, item_id: int, reason: str | None):
    """Reopen a finished item: undo what it did and put it back on the queue."""
    from memors_core.engine.compaction import rescan

    item = tx.items.get(item_id, namespace)
    if item is None:
        raise NotFound(f"no work item {item_id} in namespace {namespace!r}")
    if item.status not in ("done", "skipped"):
        raise BadInput(f"item {item_id} is {item.status}: only a done or skipped item reopens")
    kind = services.kinds.get(item.kind)
    if kind is None:
        raise BadInput(f"item {item_id} is of kind {item.kind!r}, which is not installed")
    target = address("item", str(item_id))
    earlier = tx.corrections.list(namespace, "reopen", target)
    if earlier:
        again = earlier[-1].detail.get("item")
        raise BadInput(
            f"item {item_id} was reopened before"
            + (f" (as item {again}): reopen that one" if again else "")
        )
    detail: dict = {"status": item.status, "reason": reason}
    message = f"item {item_id} reopened"
    stale: list[str] = []
    if item.status == "done":
        undo = _UNDO.get(item.kind)
        if undo is None:
            raise Refused(_NOT_UNDONE.get(item.kind, f"a done {item.kind} item cannot be reopened"))
        detail.update(undo(tx, namespace, item))
        stale = detail.pop("stale", [])
    new = _open_again(services, tx, namespace, kind, item, rescan)
    detail["item"] = new
    ident = tx.corrections.record(namespace, "reopen", target, detail)
    if new is None:
        message += "; it no longer applies, so no item is open for it"
    else:
        message += f" as item {new}"
    tx.after_commit(log.info, "item_reopened", namespace=namespace, item=item_id, reopened=new)
    return Corrected(
        correction=ident,
        action="reopen",
        address=target,
        message=message,
        stale=stale,
        item=new,
    )


def _open_again(services: Services, tx: Tx, namespace: str, kind, item: Item, rescan):
    """The open item for what ``item`` was about, after the undo: the scan's
    (a conflict's facts restored are new rows), else one made here for its key
    (a skip: the scan would leave it skipped)."""
    if item.status == "done":
        found = rescan(services, tx, namespace, kind, item)
        if found is not None:
            return found
    return _open_for_key(services, tx, namespace, kind, item)


def _open_for_key(services: Services, tx: Tx, namespace: str, kind, item: Item) -> int | None:
    """The open item of ``item``'s kind and key, made now if there is none."""
    from memors_core.plugins.kinds import KindContext

    ctx = KindContext(tx, namespace, True, services.limits)
    current = kind.current(ctx, item)
    if current is None:
        return None
    existing = tx.items.open_keys(namespace, kind.name).get(item.key)
    if existing is not None:
        return existing.id
    return tx.items.create(
        namespace, kind.name, item.key, current.fingerprint, current.payload(), now()
    )


def _undo_conflict(tx: Tx, namespace: str, item: Item) -> dict:
    """Bring back the facts the item superseded (as copies, new rows) and
    supersede the bounded copy it made, if any."""
    restored, superseded = [], []
    for tomb in tx.tombstones.by_item(namespace, item.id):
        if tomb.type != "fact" or tomb.state != "superseded":
            continue
        fact = tx.facts.get(tomb.target)
        if fact is None:
            continue
        bounded = tx.facts.bounded_copy(fact.id, tomb.created_at)
        if bounded is not None and tx.tombstones.add(
            namespace, "fact", bounded, "superseded", f"item {item.id} reopened"
        ):
            superseded.append(address("fact", bounded))
        copy = tx.facts.copy(fact.id, fact.valid_from, fact.valid_to, now())
        restored.append(address("fact", copy))
    if not restored:
        raise Refused(f"item {item.id} superseded no fact: nothing to undo")
    return {"restored": restored, "superseded": superseded}


def _undo_merge_item(tx: Tx, namespace: str, item: Item) -> dict:
    cand = tx.merges.get(int(item.key))
    if cand.status == "rejected":
        tx.merges.set_status(cand.id, "open")
        return {"candidate": cand.id}
    rec = next(
        (
            c
            for c in reversed(tx.corrections.list(namespace, "merge"))
            if c.detail.get("item") == item.id
        ),
        None,
    )
    absorbed = rec.detail["absorbed"] if rec else address("entity", cand.second)
    done = undo_merge(tx, namespace, absorbed)
    tx.merges.set_status(cand.id, "open")
    return {"candidate": cand.id, "unmerge": done.correction, "stale": done.stale}


def _undo_duplicate(tx: Tx, namespace: str, item: Item) -> dict:
    """Bring back the passages a duplicate item forgot, as new passages.

    A forgotten passage stays as it is (forgotten, through the item); its
    copy (its text, its document, its place there, its entities) is a new
    passage of a new version of the document, which holds the document's
    live passages of its latest version and the copies where the forgotten
    ones were: a written version never gains a passage. The copies are new
    to the duplicate scan, which asks about their cluster again; the pages
    of their entities go stale. A passage whose document was forgotten, or
    changed since so that its latest version no longer holds it, or that was
    purged, is not brought back (``not_restored``)."""
    lost: dict[str, list[Passage]] = {}
    not_restored: list[str] = []
    for tomb in tx.tombstones.by_item(namespace, item.id):
        if tomb.type != "passage" or tomb.state != "forgotten":
            continue
        passage = tx.passages.get(tomb.target, namespace)
        if passage is None:  # purged since
            not_restored.append(address("passage", tomb.target))
            continue
        lost.setdefault(passage.document, []).append(passage)
    restored: list[dict[str, str]] = []
    entities: list[str] = []
    stamp = now()
    for doc_id, passages in lost.items():
        latest = tx.documents.latest_version(doc_id)
        order = tx.documents.version_passages(doc_id, latest.version)
        back = {p.id: p for p in passages if p.id in order}
        if not tx.tombstones.is_live(doc_id) or not back:
            not_restored += [address("passage", p.id) for p in passages]
            continue
        not_restored += [address("passage", p.id) for p in passages if p.id not in back]
        version = latest.version + 1
        tx.documents.add_version(
            DocumentVersion(doc_id, version, latest.text_hash, latest.title, latest.metadata, stamp)
        )
        new: list[NewPassage] = []
        links: list[tuple[str, str]] = []
        placed: list[tuple[int, str]] = []
        for position, ident in enumerate(order):
            old = back.get(ident)
            if old is not None:
                copy = uuid7()
                blob = text.pack_shingles(text.shingle_hashes(old.text))
                new.append(NewPassage(copy, doc_id, version, position, old.text, old.hash, blob))
                mentioned = sorted(tx.purges.mentioned([old.id]))
                links += [(copy, e) for e in mentioned]
                entities += [tx.entities.require(e).canonical for e in mentioned]
                restored.append(
                    {
                        "passage": address("passage", copy),
                        "restored_from": address("passage", old.id),
                    }
                )
                ident = copy
            elif not tx.tombstones.is_live(ident):
                continue  # forgotten otherwise: the new version leaves it out, as it was
            placed.append((position, ident))
        tx.passages.insert_many(namespace, new, stamp)
        tx.passages.mention_many(links)
        tx.documents.link_passages([(doc_id, version, position, i) for position, i in placed])
    if not restored:
        raise Refused(
            f"item {item.id} forgot no passage that can be brought back"
            + (f" ({len(not_restored)} forgotten, since purged or changed)" if not_restored else "")
        )
    return {
        "restored": [r["passage"] for r in restored],
        "restored_from": restored,
        "not_restored": not_restored,
        # (their pages list the copies as new passages of the entity)
        "stale": _stale(tx, entities, "restore", None),
    }


_UNDO = {"conflict": _undo_conflict, "merge": _undo_merge_item, "duplicate": _undo_duplicate}
_NOT_UNDONE = {
    "page": "a done page item wrote a page: to have it written again, forget the page",
    "stale": "a done stale item wrote a page: to have it written again, forget the page",
}
