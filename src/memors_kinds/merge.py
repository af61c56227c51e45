"""Kind ``merge``: an open merge candidate exists.

Candidates come from ``propose_merge`` or from this kind's scanner: two
entities whose folded names are equal (``quorum-replication`` ~ ``Quorum
Replication``), or one's name is the other's alias. Payload: both
``entities`` with their passages, facts and pages. Submit ``accept`` (the
second becomes an alias of the first — or the other way round, given
``survivor``, the name or address of the one that survives; ``name`` gives
the survivor a name of its own; its mentions and facts follow; the
survivor's page goes stale) or ``reject`` (the scanner never proposes the
pair again; a person may, ``propose_merge`` with ``again``). An accepted
merge is recorded in ``corrections`` with what it moved, so it can be undone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from memors_core.plugins import (
    BadInput,
    Candidate,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    NotFound,
    Scan,
    address,
    entity_ref,
    fact_ref,
    fingerprint,
    get_logger,
    hookimpl,
    page_ref,
    passage_ref,
    to_json,
)

log = get_logger("memors")


@attrs.frozen
class MergeResolution:
    accept: bool = False
    reject: bool = False
    #: With accept: which of the two survives (a name or an address; default the first).
    survivor: str | None = None
    #: With accept: the survivor's name from now on (default: the survivor's own name).
    name: str | None = None


def clean_name(name: str) -> str:
    """An entity name as stored: white space folded; BadInput if empty or too long."""
    clean = " ".join(str(name).split())
    if not clean:
        raise BadInput("an entity name must not be empty")
    if len(clean) > 200:
        raise BadInput(f"entity name too long ({len(clean)} characters; at most 200)")
    return clean


#: Merge candidates whose sides a scan reads together.
SIDES_BATCH = 256


class _Sides:
    """What a merge candidate's fingerprint reads of each of its two
    entities (their live passages, live facts, other names and page), for
    a batch of candidates at once, in two round trips on a server engine
    (a read each was ten a candidate)."""

    def __init__(self, ctx: KindContext, canonicals: set[str]) -> None:
        store, wanted = ctx.store, sorted(canonicals)
        entities: dict[str, Any] = {}
        self.passages: dict[str, list[Any]] = {}
        self.facts: dict[str, list[Any]] = {}
        self.aliases: dict[str, list[str]] = {}
        self.pages: dict[str, Any] = {}
        if wanted:
            entities, self.passages, self.facts, self.pages = store.together(
                lambda: store.entities.get_many(wanted),
                lambda: store.entities.live_passages_of(wanted),
                lambda: store.facts.of_entities(wanted),
                lambda: store.pages.current_of(wanted),
            )
            self.aliases = store.entities.aliases_of([_entity_in(entities, i) for i in wanted])

    def state(self, side: str) -> tuple[Any, ...]:
        """What the fingerprint of a candidate with this side holds of it."""
        page = self.pages.get(side)
        return (
            side,
            [p.id for p in self.passages.get(side, [])],
            [address("fact", f.id) for f in self.facts.get(side, [])],
            self.aliases.get(side, []),
            page.id if page else None,
        )


def _entity_in(known: dict[str, Any], ident: str) -> Any:
    """Entity ``ident``, read among ``known`` (as ``entities.require`` says
    when it is not there)."""
    entity = known.get(ident)
    if entity is None:
        raise NotFound(f"no entity {address('entity', ident)}")
    return entity


def discover(ctx: KindContext, only: set[str] | None = None) -> None:
    """Open candidates for entities whose names fold equal or match an alias
    (involving the canonical entities ``only``, if given)."""
    for pair in ctx.store.entities.same_name_pairs(ctx.namespace, only):
        ctx.store.merges.open(ctx.namespace, pair.first, pair.second, "scanner")


class MergeKind(Kind):
    name = "merge"
    description = "confirm or reject that two entities are one"
    resolution = MergeResolution
    hint = (
        "accept or reject, set to true (accept: the second entity becomes the first's alias; "
        "survivor names the one that survives, name gives it a new name)"
    )
    usage = "submit {id} --accept [--survivor NAME] [--name NAME] | --reject"
    instructions = (
        "`accept` if the two entities in `payload.entities` are one subject (the second "
        "becomes an alias of the first; its passages and facts follow; `survivor`, the name "
        "or address of the other, keeps that one instead, and `name` gives the survivor the "
        "name a reader would look for), else `reject` (the pair is not proposed again)"
    )
    incremental = True

    def summary(self, payload: dict[str, Any]) -> str:
        entities = [e for e in payload.get("entities") or [] if isinstance(e, dict)]
        if not entities:
            return super().summary(payload)
        return " + ".join(str(e.get("name")) for e in entities)

    def _side(self, ctx: KindContext, canonical: str) -> dict[str, Any]:
        entities = ctx.store.entities
        page = ctx.store.pages.current(canonical)
        passages, facts = entities.live_passages(canonical), ctx.store.facts.of_entity(canonical)
        return {
            **to_json(entity_ref(entities.require(canonical), entities.aliases(canonical))),
            "passages": to_json([passage_ref(p) for p in passages]),
            "facts": to_json([fact_ref(f) for f in facts]),
            "page": to_json(page_ref(page)) if page else None,
        }

    def _candidate(
        self, ctx: KindContext, cid: int, a: str, b: str, sides: _Sides | None = None
    ) -> Candidate | None:
        """The candidate for merge candidate ``cid`` of the canonical entities
        ``a`` and ``b`` (``sides``: what its fingerprint reads of them, read
        for a batch of candidates; else read here)."""
        if a == b:
            return None
        sides = sides if sides is not None else _Sides(ctx, {a, b})
        state = [sides.state(a), sides.state(b)]

        def payload() -> dict[str, Any]:
            return {"candidate": cid, "entities": [self._side(ctx, a), self._side(ctx, b)]}

        return Candidate(str(cid), fingerprint(state), payload)

    def _found(
        self, ctx: KindContext, pairs: list[tuple[int, str, str]]
    ) -> Iterator[Candidate | None]:
        """The candidates of ``pairs``, their sides read a batch at a time."""
        for start in range(0, len(pairs), SIDES_BATCH):
            batch = pairs[start : start + SIDES_BATCH]
            sides = _Sides(ctx, {s for _cid, a, b in batch if a != b for s in (a, b)})
            for cid, a, b in batch:
                yield self._candidate(ctx, cid, a, b, sides)

    def _canonical(self, ctx: KindContext, ident: str) -> str:
        return ctx.store.entities.require(ident).canonical

    def scan(self, ctx: KindContext) -> Scan:
        only = scope = None
        if ctx.changes is not None:  # incremental: only candidates touching what changed
            only = set(ctx.changes.entities)
            scope = set()
        discover(ctx, only)
        pairs = []
        open_ = ctx.store.merges.in_namespace(ctx.namespace, "open")
        # Every candidate's two entities read at once (on a server engine a
        # read each was two round trips a candidate, every compaction).
        known = ctx.store.entities.get_many({e for c in open_ for e in (c.first, c.second)})
        for cand in open_:
            a = _entity_in(known, cand.first).canonical
            b = _entity_in(known, cand.second).canonical
            if only is not None:
                if not {cand.first, cand.second, a, b} & only:
                    continue
                scope.add(str(cand.id))
            pairs.append((cand.id, a, b))
        return Scan((c for c in self._found(ctx, pairs) if c is not None), scope)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        cand = ctx.store.merges.get(int(item.key))
        if cand is None or cand.status != "open":
            return None
        a, b = self._canonical(ctx, cand.first), self._canonical(ctx, cand.second)
        return self._candidate(ctx, cand.id, a, b)

    def validate(self, ctx: KindContext, item: Item, resolution: MergeResolution) -> None:
        if resolution.accept == resolution.reject:
            raise BadInput("a merge item takes exactly one of accept or reject")
        if resolution.reject and (resolution.survivor is not None or resolution.name is not None):
            raise BadInput("survivor and name go with accept, not reject")
        if resolution.accept:  # what accepting does, so a dry run can say it
            survivor, absorbed, _ = self._sides(ctx, item, resolution)
            ctx.report["survivor"] = address("entity", survivor)
            ctx.report["merged"] = address("entity", absorbed)

    def _sides(
        self, ctx: KindContext, item: Item, resolution: MergeResolution
    ) -> tuple[str, str, str | None]:
        """(survivor, absorbed, new name or None) of an accepted merge item."""
        cand = ctx.store.merges.get(int(item.key))
        if cand is None:  # (an item's candidate is never erased while the item is open)
            raise NotFound(f"no merge candidate {item.key}")
        first, second = self._canonical(ctx, cand.first), self._canonical(ctx, cand.second)
        survivor, absorbed = first, second
        if resolution.survivor is not None:
            chosen = self._one_of(ctx, resolution.survivor, (first, second))
            if chosen == second:
                survivor, absorbed = second, first
        name = None
        if resolution.name is not None:
            name = clean_name(resolution.name)
            owner = ctx.store.entities.find(name, ctx.namespace)
            if owner is not None and owner not in (first, second):
                raise BadInput(
                    f"{name!r} is the name of another entity ({address('entity', owner)}); "
                    "choose another name, or merge that one too"
                )
            if name == ctx.store.entities.require(survivor).name:
                name = None
        return survivor, absorbed, name

    def _one_of(self, ctx: KindContext, ref: str, pair: tuple[str, str]) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise BadInput("survivor must be the name or address of one of the two entities")
        try:
            found = ctx.store.entities.resolve(ref.strip(), ctx.namespace)
        except (BadInput, NotFound):
            found = None
        if found not in pair:
            names = " or ".join(repr(ctx.store.entities.require(e).name) for e in pair)
            raise BadInput(f"survivor {ref.strip()!r} is neither entity of this merge ({names})")
        return found

    def apply(self, ctx: KindContext, item: Item, resolution: MergeResolution) -> str | None:
        store, ns = ctx.store, ctx.namespace
        cand = store.merges.get(int(item.key))
        if cand is None:
            raise NotFound(f"no merge candidate {item.key}")
        store.merges.set_status(cand.id, "accepted" if resolution.accept else "rejected")
        if resolution.reject:
            store.after_commit(
                log.info, "merge_rejected", namespace=ns, candidate=cand.id, item=item.id
            )
            return None
        survivor, loser, new_name = self._sides(ctx, item, resolution)
        # Read before the merge: afterwards both pages are the survivor's.
        survivor_page = store.pages.current(survivor)
        loser_page = store.pages.current(loser)
        names = [store.entities.require(loser).name, *store.entities.aliases(loser)]
        moved = store.entities.merged_ids(loser)
        store.entities.merge(survivor, loser, ns)
        added = [name for name in names if store.entities.add_alias(survivor, ns, name)]
        superseded = None
        if survivor_page and loser_page:
            reason = f"entity merged into {address('entity', survivor)}"
            store.tombstones.add(ns, "page", loser_page.id, "superseded", reason, item.id)
            superseded = address("page", loser_page.id)
        page = survivor_page or loser_page
        if page:
            store.pages.mark_stale(page.id, "merge", address("entity", loser))
        correction = store.corrections.record(
            ns,
            "merge",
            address("entity", survivor),
            {
                "candidate": cand.id,
                "item": item.id,
                "absorbed": address("entity", loser),
                "moved": moved,
                "aliases": added,
                "page_superseded": superseded,
            },
        )
        if new_name is not None:
            old = store.entities.require(survivor).name
            renamed = store.corrections.record(
                ns, "rename", address("entity", survivor), {"from": old, "to": new_name}
            )
            store.entities.rename(survivor, ns, new_name, renamed)
        ctx.report["survivor"] = address("entity", survivor)
        ctx.report["name"] = store.entities.require(survivor).name
        ctx.report["correction"] = correction
        store.after_commit(
            log.info,
            "merge_accepted",
            namespace=ns,
            candidate=cand.id,
            item=item.id,
            survivor=address("entity", survivor),
            merged=address("entity", loser),
        )
        return address("entity", survivor)


@hookimpl
def memors_register_kinds(registry: KindRegistry) -> None:
    registry.add(MergeKind())
