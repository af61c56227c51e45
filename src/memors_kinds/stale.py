"""Kind ``stale``: a page's sources changed or were forgotten, or its
entity gained 2 or more live passages since the page was built.

Payload: ``entity``, the previous ``page``, ``changes`` (forgotten,
superseded and new passages), the current ``passages`` and ``facts``.
Submit as for ``page``; a new version is stored, linked to the old one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memors_core import hookimpl
from memors_core.domain.model import PageResolution
from memors_core.plugins.kinds import Candidate, Item, Kind, KindContext
from memors_core.wire import to_json

from . import _pages


class StaleKind(Kind):
    name = "stale"
    description = "refresh a page whose sources changed or whose entity gained passages"
    resolution = PageResolution
    hint = "content + title (--content-file F --title T [--cite ADDR]…)"
    incremental = True

    def _candidate(self, ctx: KindContext, page: tuple, changes: list[dict]) -> Candidate:
        canonical = ctx.ops.entity_row(page[5])[3]
        passages, facts = _pages.entity_inputs(ctx, canonical)

        def payload() -> dict[str, Any]:
            out = _pages.base_payload(ctx, canonical, passages, facts)
            out["page"] = to_json(ctx.ops.page_ref(page))
            out["changes"] = changes
            return out

        fp = _pages.inputs_fingerprint(passages, facts, page[0], changes)
        return Candidate(canonical, fp, payload)

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        only = None
        if ctx.changes is not None:  # incremental: only the entities something touched
            only = ctx.scope = set(ctx.changes.entities)
        for page, changes in ctx.ops.stale_pages(ctx.namespace, only):
            yield self._candidate(ctx, page, changes)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        canonical = ctx.ops.entity_row(item.key)[3]
        page = ctx.ops.current_page(canonical)
        if page is None:
            return None
        changes = ctx.ops.stale_reasons(page)
        if changes is None:
            return None
        return self._candidate(ctx, page, changes)

    def validate(self, ctx: KindContext, item: Item, resolution: PageResolution) -> None:
        _pages.validate_page(ctx, item, resolution)

    def apply(self, ctx: KindContext, item: Item, resolution: PageResolution) -> str:
        previous = ctx.ops.current_page(item.key)
        return _pages.write(ctx, item, resolution, previous=previous)


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(StaleKind())
