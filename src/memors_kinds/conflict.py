"""Kind ``conflict``: two live facts about one subject overlap in time and
disagree (their predicates fold equal, their values do not).

Payload: ``facts`` (both, each with its ``recorded_at``) and ``sources``
(the passages they cite). Submit either ``keep`` = the address of the fact to
keep (the other is superseded), or ``bound`` = ``{"fact", "valid_from"?,
"valid_to"?}``: the named fact is superseded by a copy with the new bound (the
value changed over time: end the older fact where the newer begins instead
of discarding history), refused if the two facts would still overlap.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from memors_core import hookimpl
from memors_core.domain.dates import interval, normalise, now, overlaps
from memors_core.domain.ids import address, parse_address
from memors_core.errors import BadInput
from memors_core.plugins.kinds import Candidate, Item, Kind, KindContext, fingerprint
from memors_core.wire import structure, to_json


@attrs.frozen
class FactBound:
    """The new validity of one of the item's facts (absent bounds stay as they were)."""

    fact: str
    valid_from: str | None = None
    valid_to: str | None = None


@attrs.frozen
class ConflictResolution:
    keep: list[str] | None = None
    #: A :class:`FactBound` as JSON (structured by :func:`_bound`, for a readable error).
    bound: Any = None


def _bound(resolution: ConflictResolution) -> FactBound:
    try:
        return structure(resolution.bound, FactBound, "bound")
    except BadInput as exc:
        raise BadInput(
            f'{exc.message}; bound is {{"fact": ADDR, "valid_from"?: T, "valid_to"?: T}}'
        ) from None


def _interval(fact: dict[str, Any]) -> tuple[str | None, str | None]:
    return normalise(fact["valid_from"], "valid_from"), normalise(fact["valid_to"], "valid_to")


def _shown(valid_from: str | None, valid_to: str | None) -> str:
    return f"[{valid_from or '-inf'}, {valid_to or '+inf'})"


class ConflictKind(Kind):
    name = "conflict"
    description = "settle two facts about one subject that overlap in time and disagree"
    resolution = ConflictResolution
    hint = (
        "keep = one fact address (--keep memo://fact/…), or bound = "
        '{"fact": ADDR, "valid_from"?: T, "valid_to"?: T} to end one fact where the other '
        "begins (--bound memo://fact/… --to T)"
    )
    incremental = True

    def _candidate(self, ctx: KindContext, a: str, b: str) -> Candidate:
        def payload() -> dict[str, Any]:
            sources = []
            for fact in (a, b):
                src = ctx.store.scalar("SELECT source FROM facts WHERE id = ?", (fact,))
                for ref in ctx.ops.passage_refs([src] if src else []):
                    sources.append({"fact": address("fact", fact), **to_json(ref)})
            facts = to_json(ctx.ops.fact_refs([a, b]))
            for fact in facts:  # which was recorded first helps decide which to keep
                _, ident = parse_address(fact["address"])
                fact["recorded_at"] = ctx.store.scalar(
                    "SELECT recorded_at FROM facts WHERE id = ?", (ident,)
                )
            return {"facts": facts, "sources": sources}

        return Candidate(f"{a}|{b}", fingerprint(a, b), payload)

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        only = None
        if ctx.changes is not None:  # incremental: only subjects something touched
            only = set(ctx.changes.entities)
            ctx.scope = set()
            for (key,) in ctx.store.all(
                "SELECT key FROM work_items WHERE namespace = ? AND kind = ? AND status = 'open'",
                (ctx.namespace, self.name),
            ):
                subjects = ctx.store.all(
                    "SELECT e.canonical FROM facts f JOIN entities e ON e.id = f.subject "
                    "WHERE f.id IN (?, ?)",
                    tuple(key.split("|")),
                )
                if any(s in only for (s,) in subjects):
                    ctx.scope.add(key)
        for a, b in ctx.ops.conflicting_facts(ctx.namespace, only):
            if ctx.scope is not None:
                ctx.scope.add(f"{a}|{b}")
            yield self._candidate(ctx, a, b)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        a, b = item.key.split("|")
        return self._candidate(ctx, a, b) if ctx.ops.facts_conflict(a, b) else None

    def _member(self, item: Item, fact: str) -> None:
        facts = [f["address"] for f in item.payload["facts"]]
        parse_address(fact, expect=("fact",))
        if fact not in facts:
            raise BadInput(f"{fact} is not one of item {item.id}'s facts: {', '.join(facts)}")

    def validate(self, ctx: KindContext, item: Item, resolution: ConflictResolution) -> None:
        facts = [f["address"] for f in item.payload["facts"]]
        if (resolution.keep is None) == (resolution.bound is None):
            raise BadInput(
                f"a conflict takes either keep (one of {', '.join(facts)}) or bound "
                '({"fact": ADDR, "valid_from"?: T, "valid_to"?: T}), not both or neither'
            )
        if resolution.keep is not None:
            if len(resolution.keep) != 1:
                raise BadInput(f"a conflict keeps exactly one fact: one of {', '.join(facts)}")
            self._member(item, resolution.keep[0])
            ctx.report["superseded"] = [f for f in facts if f != resolution.keep[0]]
            return
        bound = _bound(resolution)
        self._member(item, bound.fact)
        if bound.valid_from is None and bound.valid_to is None:
            raise BadInput("bound needs valid_from or valid_to (--from T or --to T)")
        other = next(f for f in item.payload["facts"] if f["address"] != bound.fact)
        valid_from, valid_to = _new_bounds(item, bound)
        if overlaps(*interval(valid_from, valid_to), *_interval(other)):
            raise BadInput(
                f"refused: {bound.fact} bounded to {_shown(valid_from, valid_to)} would still "
                f"overlap {other['address']} {_shown(other['valid_from'], other['valid_to'])}; "
                "nothing was stored"
            )
        ctx.report["superseded"] = [bound.fact]

    def apply(self, ctx: KindContext, item: Item, resolution: ConflictResolution) -> str:
        if resolution.bound is not None:
            return self._apply_bound(ctx, item, _bound(resolution))
        kept = resolution.keep[0]
        for fact in item.payload["facts"]:
            if fact["address"] != kept:
                _, ident = parse_address(fact["address"])
                ctx.ops.tombstone(
                    ctx.namespace,
                    "fact",
                    ident,
                    "superseded",
                    f"conflict settled by item {item.id}: kept {kept}",
                    item.id,
                )
        return kept

    def _apply_bound(self, ctx: KindContext, item: Item, bound: FactBound) -> str:
        valid_from, valid_to = _new_bounds(item, bound)
        _, ident = parse_address(bound.fact)
        at = now()  # the copy and the tombstone share it: `get` links them by it
        copy = address(
            "fact",
            ctx.ops.copy_fact(
                ident,
                valid_from.strip() if valid_from else None,
                valid_to.strip() if valid_to else None,
                at,
            ),
        )
        ctx.ops.tombstone(
            ctx.namespace,
            "fact",
            ident,
            "superseded",
            f"conflict settled by item {item.id}: bounded to {_shown(valid_from, valid_to)} "
            f"as {copy}",
            item.id,
            at=at,
        )
        ctx.report["bounded"] = copy
        return copy


def _new_bounds(item: Item, bound: FactBound) -> tuple[str | None, str | None]:
    """The bounded fact's new validity: each bound given, else the fact's own."""
    named = next(f for f in item.payload["facts"] if f["address"] == bound.fact)
    valid_from = bound.valid_from if bound.valid_from is not None else named["valid_from"]
    valid_to = bound.valid_to if bound.valid_to is not None else named["valid_to"]
    return valid_from, valid_to


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(ConflictKind())
