"""What the ``page`` and ``stale`` kinds share: payloads and page writing."""

from __future__ import annotations

from typing import Any

from memors_core.errors import BadInput
from memors_core.plugins.kinds import Item, KindContext, fingerprint
from memors_core.wire import to_json


def entity_inputs(ctx: KindContext, canonical: str) -> tuple[list, list]:
    return ctx.ops.entity_passages(canonical), ctx.ops.entity_facts(canonical)


def inputs_fingerprint(passages: list, facts: list, *extra: Any) -> str:
    return fingerprint(
        [p.address for p in passages],
        [(f.address, f.predicate, f.value, f.valid_from, f.valid_to, f.subject) for f in facts],
        *extra,
    )


def base_payload(ctx: KindContext, canonical: str, passages: list, facts: list) -> dict[str, Any]:
    return {
        "entity": to_json(ctx.ops.entity_ref(canonical)),
        "passages": to_json(passages),
        "facts": to_json(facts),
    }


def validate_page(ctx: KindContext, item: Item, resolution: Any) -> None:
    if not resolution.title.strip():
        raise BadInput("a page needs a title (--title T)")
    if not resolution.content.strip():
        raise BadInput("a page needs content (--content-file F): the page is empty")
    size = len(resolution.content.encode("utf-8", "surrogatepass"))
    limit = ctx.ops.limits.page_bytes
    if size > limit:
        raise BadInput(f"page too large ({size} bytes; at most {limit}, MEMORS_MAX_PAGE_BYTES)")
    if len(resolution.title) > 500:
        raise BadInput("a page title must be at most 500 characters")
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


def write(ctx: KindContext, item: Item, resolution: Any, previous: tuple | None) -> str:
    cites = resolution.cites
    if cites is None:
        cites = [p["address"] for p in item.payload.get("passages", [])]
    return ctx.ops.write_page(
        ctx.namespace,
        item.key,
        resolution.title.strip(),
        resolution.content,
        cites,
        previous,
        item.id,
        ctx.flags,
    )
