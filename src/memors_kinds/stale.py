"""Kind ``stale``: a page's sources changed or were forgotten (a cited
passage or a fact it was built with), its entity was merged with another,
or its entity gained 2 or more live passages since the page was built.

Payload: ``entity``, the previous ``page``, ``changes`` (each with the
changed row's ``text``: forgotten and superseded passages and facts, the
merged entity, new passages), the current ``passages`` and ``facts``.
Submit as for ``page``; a new version is stored, linked to the old one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from memors_core.plugins import (
    Candidate,
    Finding,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    Page,
    PageResolution,
    Scan,
    hookimpl,
    page_ref,
    parse_address,
    to_json,
)

from . import _pages


class StaleKind(Kind):
    name = "stale"
    description = "refresh a page whose sources changed or whose entity gained passages"
    resolution = PageResolution
    hint = _pages.HINT
    usage = _pages.USAGE
    instructions = (
        "rewrite the page `payload.page` of `payload.entity`: `payload.changes` says what "
        "changed, each with its `text` (passages and facts forgotten or superseded, an "
        "entity merged in, new passages); write the whole page again, with a `title`, from "
        "`payload.passages` and `payload.facts` only (drop what no longer has a source); "
        "end each sentence with markers `[n]` naming the passages it draws on by their "
        "`ref`: a passage keeps the number the old page's markers gave it, so an unchanged "
        "sentence keeps its markers; a change with a `ref` is a passage gone since, and a "
        "marker naming it is flagged (`citations`): drop or re-cite that sentence"
    )
    writes_page = True
    incremental = True

    def summary(self, payload: dict[str, Any]) -> str:
        return _pages.summary(payload) or super().summary(payload)

    def diff(self, item: Item, resolution: PageResolution) -> str:
        return _pages.diff(item, resolution)

    def _candidate(
        self,
        ctx: KindContext,
        page: Page,
        changes: list[dict[str, Any]],
        canonical: str,
        inputs: _pages.Inputs,
    ) -> Candidate:
        passages, facts = inputs.of(canonical)

        def payload() -> dict[str, Any]:
            # The previous version's markers keep meaning what they meant:
            # each passage keeps its number, a number is never reused, and
            # a change to a passage it cited says which number it had.
            refs = _pages.previous_refs(ctx, page)
            out = _pages.base_payload(inputs.entity(canonical), passages, facts, refs)
            out["page"] = to_json(page_ref(page))
            out["changes"] = [
                {**c, "ref": refs[c["address"]]} if c["address"] in refs else c for c in changes
            ]
            return out

        fp = _pages.inputs_fingerprint(passages, facts, page.id, changes)
        return Candidate(canonical, fp, payload)

    def scan(self, ctx: KindContext) -> Scan:
        only = None
        if ctx.changes is not None:  # incremental: only the entities something touched
            only = set(ctx.changes.entities)
        stale = ctx.store.pages.stale(ctx.namespace, only)
        return Scan(self._candidates(ctx, stale), only)

    def _candidates(self, ctx: KindContext, stale: Sequence[Any]) -> Iterator[Candidate]:
        # (each run's entities and page inputs read together: a few reads
        # a run of 256 where there were three a page)
        for start in range(0, len(stale), _pages.INPUTS_BATCH):
            run = stale[start : start + _pages.INPUTS_BATCH]
            entities = ctx.store.entities.get_many([s.page.entity for s in run])
            canonical = {
                s.page.entity: (
                    entities.get(s.page.entity) or ctx.store.entities.require(s.page.entity)
                ).canonical
                for s in run
            }
            inputs = _pages.Inputs(ctx, list(dict.fromkeys(canonical.values())))
            for s in run:
                yield self._candidate(ctx, s.page, s.changes, canonical[s.page.entity], inputs)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        canonical = ctx.store.entities.require(item.key).canonical
        page = ctx.store.pages.current(canonical)
        if page is None or not ctx.store.pages.is_stale(page.id):
            return None
        changes = ctx.store.pages.changes(page)
        return self._candidate(ctx, page, changes, canonical, _pages.Inputs(ctx, [canonical]))

    def settles(self, ctx: KindContext, finding: Finding) -> str | None:
        if finding.rule != "stale-page":
            return None
        page = ctx.store.pages.get(parse_address(finding.address)[1], ctx.namespace)
        return None if page is None else ctx.store.entities.require(page.entity).canonical

    def validate(self, ctx: KindContext, item: Item, resolution: PageResolution) -> None:
        _pages.validate_page(ctx, item, resolution)

    def apply(self, ctx: KindContext, item: Item, resolution: PageResolution) -> str:
        previous = ctx.store.pages.current(item.key)
        return _pages.write(ctx, item, resolution, previous=previous)


@hookimpl
def memors_register_kinds(registry: KindRegistry) -> None:
    registry.add(StaleKind())
