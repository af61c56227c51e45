"""Kind ``page``: an entity has 3 or more live passages and no page.

Payload: ``entity``, its live ``passages``, its live ``facts``. Submit:
``content`` + ``title`` (+ optional ``cites``, a subset of the payload's
passages; all of them by default). The page is stored as an inference with
the passages it cites.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memors_core import hookimpl
from memors_core.domain.model import PageResolution
from memors_core.plugins.kinds import Candidate, Item, Kind, KindContext

from . import _pages


class PageKind(Kind):
    name = "page"
    description = "write a first page for an entity with 3 or more live passages"
    resolution = PageResolution
    hint = "content + title (--content-file F --title T [--cite ADDR]…)"
    incremental = True

    def _candidate(self, ctx: KindContext, canonical: str) -> Candidate:
        passages, facts = _pages.entity_inputs(ctx, canonical)

        def payload() -> dict[str, Any]:
            return _pages.base_payload(ctx, canonical, passages, facts)

        # The last page written (now forgotten) is an input too: without it a
        # forgotten page would never be asked for again, because the done item
        # that wrote it has the same passages and facts.
        last = ctx.store.one(
            "SELECT pg.id FROM pages pg JOIN entities e ON e.id = pg.entity "
            "WHERE e.canonical = ? ORDER BY pg.rowid DESC LIMIT 1",
            (canonical,),
        )
        extra = (last[0],) if last else ()
        return Candidate(canonical, _pages.inputs_fingerprint(passages, facts, *extra), payload)

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        only = None
        if ctx.changes is not None:  # incremental: only the entities something touched
            only = ctx.scope = set(ctx.changes.entities)
        for canonical, _count in ctx.ops.entities_needing_page(ctx.namespace, only):
            yield self._candidate(ctx, canonical)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        canonical = ctx.ops.entity_row(item.key)[3]
        if canonical != item.key or ctx.ops.current_page(canonical) is not None:
            return None
        if len(ctx.ops.entity_passage_ids(canonical)) < 3:
            return None
        return self._candidate(ctx, canonical)

    def validate(self, ctx: KindContext, item: Item, resolution: PageResolution) -> None:
        _pages.validate_page(ctx, item, resolution)

    def apply(self, ctx: KindContext, item: Item, resolution: PageResolution) -> str:
        return _pages.write(ctx, item, resolution, previous=None)


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(PageKind())
