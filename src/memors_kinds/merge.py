"""Kind ``merge``: an open merge candidate exists.

Candidates come from ``propose_merge`` or from this kind's scanner: two
entities whose folded names are equal (``quorum-replication`` ~ ``Quorum
Replication``), or one's name is the other's alias. Payload: both
``entities`` with their passages, facts and pages. Submit ``accept`` (the
second becomes an alias of the first; its mentions and facts follow; the
survivor's page goes stale) or ``reject`` (the pair is never proposed again).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs

from memors_core import hookimpl
from memors_core.domain.dates import now
from memors_core.domain.ids import address
from memors_core.errors import BadInput
from memors_core.log import get_logger
from memors_core.plugins.kinds import Candidate, Item, Kind, KindContext, fingerprint
from memors_core.wire import to_json

log = get_logger("memors")


@attrs.frozen
class MergeResolution:
    accept: bool = False
    reject: bool = False


def discover(ctx: KindContext, only: set[str] | None = None) -> None:
    """Open candidates for entities whose names fold equal or match an alias
    (involving the canonical entities ``only``, if given)."""
    ns = ctx.namespace
    restrict, params = "", ()
    if only is not None:
        ids = json.dumps(sorted(only))
        restrict = (
            "AND (a.id IN (SELECT value FROM json_each(?)) "
            "OR b.id IN (SELECT value FROM json_each(?)))"
        )
        params = (ids, ids)
    pairs = ctx.store.all(
        f"""SELECT a.id, b.id FROM entities a JOIN entities b
             ON b.namespace = a.namespace AND b.folded = a.folded AND b.rowid > a.rowid
           WHERE a.namespace = ? AND a.canonical = a.id AND b.canonical = b.id
             AND a.folded <> '' {restrict}
           UNION
           SELECT al.entity, b.id FROM aliases al JOIN entities b
             ON b.namespace = al.namespace AND b.folded = al.folded
           JOIN entities a ON a.id = al.entity
           WHERE al.namespace = ? AND a.canonical = a.id AND b.canonical = b.id
             AND b.id <> a.id AND al.folded <> '' {restrict}""",
        (ns, *params, ns, *params),
    )
    for first, second in pairs:
        ctx.ops.open_merge_candidate(ns, first, second, "scanner")


class MergeKind(Kind):
    name = "merge"
    description = "confirm or reject that two entities are one"
    resolution = MergeResolution
    hint = "accept or reject (--accept | --reject)"
    incremental = True

    def _side(self, ctx: KindContext, canonical: str) -> dict[str, Any]:
        page = ctx.ops.current_page(canonical)
        return {
            **to_json(ctx.ops.entity_ref(canonical)),
            "passages": to_json(ctx.ops.entity_passages(canonical)),
            "facts": to_json(ctx.ops.entity_facts(canonical)),
            "page": to_json(ctx.ops.page_ref(page)) if page else None,
        }

    def _candidate(self, ctx: KindContext, cid: int, first: str, second: str) -> Candidate | None:
        a = ctx.ops.entity_row(first)[3]
        b = ctx.ops.entity_row(second)[3]
        if a == b:
            return None
        state = []
        for side in (a, b):
            page = ctx.ops.current_page(side)
            state.append(
                (
                    side,
                    [p for _r, p in ctx.ops.entity_passage_ids(side)],
                    [f.address for f in ctx.ops.entity_facts(side)],
                    ctx.ops.aliases(side),
                    page[0] if page else None,
                )
            )

        def payload() -> dict[str, Any]:
            return {"candidate": cid, "entities": [self._side(ctx, a), self._side(ctx, b)]}

        return Candidate(str(cid), fingerprint(state), payload)

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        only = None
        if ctx.changes is not None:  # incremental: only candidates touching what changed
            only = set(ctx.changes.entities)
            ctx.scope = set()
        discover(ctx, only)
        for cid, first, second, c1, c2 in ctx.store.all(
            "SELECT m.id, m.first, m.second, a.canonical, b.canonical FROM merge_candidates m "
            "JOIN entities a ON a.id = m.first JOIN entities b ON b.id = m.second "
            "WHERE m.namespace = ? AND m.status = 'open' ORDER BY m.id",
            (ctx.namespace,),
        ):
            if only is not None:
                if not {first, second, c1, c2} & only:
                    continue
                ctx.scope.add(str(cid))
            cand = self._candidate(ctx, cid, first, second)
            if cand is not None:
                yield cand

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        row = ctx.store.one(
            "SELECT id, first, second FROM merge_candidates WHERE id = ? AND status = 'open'",
            (int(item.key),),
        )
        return None if row is None else self._candidate(ctx, *row)

    def validate(self, ctx: KindContext, item: Item, resolution: MergeResolution) -> None:
        if resolution.accept == resolution.reject:
            raise BadInput("a merge item takes exactly one of accept or reject")

    def apply(self, ctx: KindContext, item: Item, resolution: MergeResolution) -> str | None:
        cid = int(item.key)
        first, second = ctx.store.one(
            "SELECT first, second FROM merge_candidates WHERE id = ?", (cid,)
        )
        status = "accepted" if resolution.accept else "rejected"
        ctx.store.conn.execute(
            "UPDATE merge_candidates SET status = ?, decided_at = ? WHERE id = ?",
            (status, now(), cid),
        )
        if resolution.reject:
            ctx.store.after_commit(
                log.info, "merge_rejected", namespace=ctx.namespace, candidate=cid, item=item.id
            )
            return None
        ops = ctx.ops
        survivor = ops.entity_row(first)[3]
        loser = ops.entity_row(second)[3]
        survivor_page = ops.current_page(survivor)
        loser_page = ops.current_page(loser)
        names = [ops.entity_row(loser)[2], *ops.aliases(loser)]
        ctx.store.conn.execute(
            "UPDATE entities SET canonical = ? WHERE canonical = ?", (survivor, loser)
        )
        for name in names:
            ops.add_alias(survivor, ctx.namespace, name)
        if survivor_page and loser_page:
            ops.tombstone(
                ctx.namespace,
                "page",
                loser_page[0],
                "superseded",
                f"entity merged into {address('entity', survivor)}",
                item.id,
            )
        page = survivor_page or loser_page
        if page:
            ops.mark_page_stale(page[0], "merge", address("entity", loser))
        ctx.store.after_commit(
            log.info,
            "merge_accepted",
            namespace=ctx.namespace,
            candidate=cid,
            item=item.id,
            survivor=address("entity", survivor),
            merged=address("entity", loser),
        )
        return address("entity", survivor)


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(MergeKind())
