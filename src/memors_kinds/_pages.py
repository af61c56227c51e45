"""What the ``page`` and ``stale`` kinds share: payloads, page writing, and
how they are shown (summary, usage, the diff of a page)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from memors_core.plugins import (
    BadInput,
    FactRef,
    Item,
    KindContext,
    Page,
    PassageRef,
    cited_passages,
    entity_ref,
    fact_ref,
    fingerprint,
    passage_ref,
    read_citations,
    sentence_sources,
    sources_of,
    to_json,
)

#: What a page resolution holds (both kinds take the same one).
HINT = (
    "content + title (+ cites, some of the payload's passage addresses; all by default); "
    "end each sentence with markers [n] naming the payload passages (their ref) it draws on"
)
USAGE = "submit {id} --content-file PAGE.md --title T [--cite ADDR]..."


def summary(payload: dict[str, Any]) -> str:
    """``Raft (3 passages, 1 facts)``: the entity and how much there is to write from."""
    entity = payload.get("entity")
    name = entity.get("name") if isinstance(entity, dict) else None
    if not name:
        return ""
    passages, facts = payload.get("passages") or [], payload.get("facts") or []
    return f"{name} ({len(passages)} passages, {len(facts)} facts)"


def page_diff(previous: str, new: str) -> str:
    """A unified line diff ("" when there is no previous page and nothing new)."""
    if previous == new:
        return ""
    lines = difflib.unified_diff(
        previous.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="previous",
        tofile="submitted",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff(item: Item, resolution: Any) -> str:
    """The submitted content against the page the item's payload replaces
    (none for a first page: the whole content is new)."""
    page = item.payload.get("page")
    previous = page.get("content", "") if isinstance(page, dict) else ""
    return page_diff(previous, resolution.content)


#: Entities whose page inputs are read together (:class:`Inputs`).
INPUTS_BATCH = 256


class Inputs:
    """What the pages of a run of entities are written from, read for all of
    them at once (three statements where there were three an entity, sent
    together: one round trip on a server engine): each entity's live
    passages and live facts, as a payload shows them, and the last page
    written about it."""

    def __init__(self, ctx: KindContext, canonicals: Sequence[str]) -> None:
        store = ctx.store
        self.ctx, self.canonicals = ctx, canonicals
        self.passages, self.facts, self.last = store.together(
            lambda: store.entities.live_passages_of(canonicals),
            lambda: store.facts.of_entities(canonicals),
            lambda: store.pages.last_written_of(canonicals),
        )
        self._entities: dict[str, dict[str, Any]] | None = None

    def entity(self, canonical: str) -> dict[str, Any]:
        """The entity as a payload shows it (:func:`entities_json`): the run's
        entities are read the first time one is asked for (only an item
        opened or refreshed needs it), all of them together; NotFound for
        one that is not there."""
        if self._entities is None:
            self._entities = entities_json(self.ctx, self.canonicals)
        shown = self._entities.get(canonical)
        if shown is None:
            self.ctx.store.entities.require(canonical)  # (NotFound)
            shown = entities_json(self.ctx, [canonical])[canonical]
        return shown

    def of(self, canonical: str) -> tuple[list[PassageRef], list[FactRef]]:
        """One of the entities' live passages and live facts, as its payload shows them."""
        return (
            [passage_ref(p) for p in self.passages.get(canonical, [])],
            [fact_ref(f) for f in self.facts.get(canonical, [])],
        )


def entities_json(ctx: KindContext, canonicals: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each of ``canonicals`` there is as a payload shows it (address,
    name, other names), in two look-ups."""
    found = ctx.store.entities.get_many(canonicals)
    aliases = ctx.store.entities.aliases_of(found.values())
    return {c: to_json(entity_ref(e, aliases.get(c, []))) for c, e in found.items()}


def inputs_fingerprint(passages: list[Any], facts: list[Any], *extra: Any) -> str:
    return fingerprint(
        [p.address for p in passages],
        [(f.address, f.predicate, f.value, f.valid_from, f.valid_to, f.subject) for f in facts],
        *extra,
    )


def base_payload(
    entity: dict[str, Any],
    passages: list[Any],
    facts: list[Any],
    refs: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The payload of a page or stale item about ``entity`` (as
    :meth:`Inputs.entity` shows it). Each passage carries its ``ref``, the
    number a citation marker ``[n]`` uses: 1, 2, 3, … in order, or with
    ``refs`` (address -> the number the previous page version's markers
    gave it) that number kept, the others numbered after the highest of
    them (a number is never given to another passage), the passages listed
    by ``ref``."""
    rows = to_json(passages)
    if not refs:
        numbered = [{**p, "ref": n} for n, p in enumerate(rows, 1)]
    else:
        after = max(refs.values())
        numbered = []
        for p in rows:
            ref = refs.get(p["address"])
            if ref is None:
                after += 1
                ref = after
            numbered.append({**p, "ref": ref})
        numbered.sort(key=lambda p: p["ref"])
    return {
        "entity": entity,
        "passages": numbered,
        "facts": to_json(facts),
    }


def previous_refs(ctx: KindContext, page: Page) -> dict[str, int]:
    """The numbers the markers of ``page`` use: the ``ref`` of each passage
    of the payload it was written from (its item's), by address; empty when
    that is not known (a page written without an item)."""
    if page.item is None:
        return {}
    item = ctx.store.items.get(page.item, ctx.namespace)
    payload = item.payload if item is not None else None
    rows = payload.get("passages") if isinstance(payload, dict) else None
    if not isinstance(rows, list):
        return {}
    out: dict[str, int] = {}
    for n, p in enumerate(rows, 1):
        if isinstance(p, dict) and isinstance(p.get("address"), str):
            ref = p.get("ref")
            out[p["address"]] = ref if isinstance(ref, int) and ref > 0 else n
    return out


def validate_page(ctx: KindContext, item: Item, resolution: Any) -> None:
    if not resolution.title.strip():
        raise BadInput("a page needs a title (--title T)")
    if not resolution.content.strip():
        raise BadInput("a page needs content (--content-file F): the page is empty")
    size = len(resolution.content.encode("utf-8", "surrogatepass"))
    limit = ctx.limits.page_bytes
    if size > limit:
        raise BadInput(f"page too large ({size} bytes; at most {limit}, MEMORS_MAX_PAGE_BYTES)")
    if len(resolution.title) > 500:
        raise BadInput("a page title must be at most 500 characters")
    read_citations(resolution.content, item.payload)  # a marker naming no passage: bad input
    offered = {p["address"] for p in item.payload.get("passages", [])}
    if resolution.cites is not None:
        if not resolution.cites:
            raise BadInput("cites must name at least one passage of the payload (or be left out)")
        stray = [c for c in resolution.cites if c not in offered]
        if stray:
            raise BadInput(
                f"cites {stray[0]} which is not among item {item.id}'s passages; "
                "a page may cite only the passages it was given"
            )


def write(ctx: KindContext, item: Item, resolution: Any, previous: Page | None) -> str:
    payload = item.payload
    sentences = read_citations(resolution.content, payload)
    cites = cited_passages(sentences, payload, resolution.cites)
    passages, facts = sources_of(payload, cites, with_profiles=False)
    return ctx.store.pages.write(
        ctx.namespace,
        item.key,
        resolution.title.strip(),
        resolution.content,
        cites,
        previous,
        item.id,
        ctx.flags,
        sentences=sentence_sources(sentences, [*passages, *facts], ctx.flags),
        facts=[f["address"] for f in payload.get("facts") or []],
    )
