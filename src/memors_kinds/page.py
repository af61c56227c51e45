"""Kind ``page``: an entity has 3 or more live passages and no page.

Payload: ``entity``, its live ``passages``, its live ``facts``. Submit:
``content`` + ``title`` (+ optional ``cites``, a subset of the payload's
passages; all of them by default). The page is stored as an inference with
the passages it cites.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memors_core.plugins import (
    PAGE_MIN_PASSAGES,
    Candidate,
    Finding,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    PageResolution,
    Scan,
    hookimpl,
    parse_address,
)

from . import _pages

#: Entities whose page inputs are read together (:class:`_pages.Inputs`).
INPUTS_BATCH = _pages.INPUTS_BATCH


class PageKind(Kind):
    name = "page"
    description = "write a first page for an entity with 3 or more live passages"
    resolution = PageResolution
    hint = _pages.HINT
    usage = _pages.USAGE
    instructions = (
        "write a Markdown page about `payload.entity` from `payload.passages` and "
        "`payload.facts` only, and give it a `title`; end each sentence with markers naming "
        "the passages it draws on, `[n]` for the passage whose `ref` is n (`[1][3]` for two)"
    )
    writes_page = True
    incremental = True

    def summary(self, payload: dict[str, Any]) -> str:
        return _pages.summary(payload) or super().summary(payload)

    def diff(self, item: Item, resolution: PageResolution) -> str:
        return _pages.diff(item, resolution)

    def _candidate(self, ctx: KindContext, canonical: str, inputs: _pages.Inputs) -> Candidate:
        passages, facts = inputs.of(canonical)

        def payload() -> dict[str, Any]:
            return _pages.base_payload(inputs.entity(canonical), passages, facts)

        # The last page written (now forgotten) is an input too: without it a
        # forgotten page would never be asked for again, because the done item
        # that wrote it has the same passages and facts.
        last = inputs.last.get(canonical)
        extra = (last,) if last else ()
        return Candidate(canonical, _pages.inputs_fingerprint(passages, facts, *extra), payload)

    def scan(self, ctx: KindContext) -> Scan:
        only = None
        if ctx.changes is not None:  # incremental: only the entities something touched
            only = set(ctx.changes.entities)
        needing = [
            n.entity
            for n in ctx.store.entities.needing_page(ctx.namespace, PAGE_MIN_PASSAGES, only)
        ]
        return Scan(self._candidates(ctx, needing), only)

    def _candidates(self, ctx: KindContext, canonicals: list[str]) -> Iterator[Candidate]:
        for start in range(0, len(canonicals), INPUTS_BATCH):
            run = canonicals[start : start + INPUTS_BATCH]
            inputs = _pages.Inputs(ctx, run)
            for canonical in run:
                yield self._candidate(ctx, canonical, inputs)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        canonical = ctx.store.entities.require(item.key).canonical
        if canonical != item.key or ctx.store.pages.current(canonical) is not None:
            return None
        inputs = _pages.Inputs(ctx, [canonical])
        if len(inputs.passages.get(canonical, [])) < PAGE_MIN_PASSAGES:
            return None
        return self._candidate(ctx, canonical, inputs)

    def settles(self, ctx: KindContext, finding: Finding) -> str | None:
        if finding.rule != "missing-page":
            return None
        return ctx.store.entities.require(parse_address(finding.address)[1]).canonical

    def validate(self, ctx: KindContext, item: Item, resolution: PageResolution) -> None:
        _pages.validate_page(ctx, item, resolution)

    def apply(self, ctx: KindContext, item: Item, resolution: PageResolution) -> str:
        return _pages.write(ctx, item, resolution, previous=None)


@hookimpl
def memors_register_kinds(registry: KindRegistry) -> None:
    registry.add(PageKind())
