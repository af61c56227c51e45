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

from typing import Any

import attrs

from memors_core.plugins import (
    BadInput,
    Candidate,
    Finding,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    Scan,
    address,
    fact_ref,
    fingerprint,
    hookimpl,
    interval,
    normalise,
    now,
    overlaps,
    parse_address,
    passage_ref,
    structure,
    to_json,
)


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
        "keep = one fact address, or bound = "
        '{"fact": ADDR, "valid_from"?: T, "valid_to"?: T} to end one fact where the other '
        "begins"
    )
    usage = "submit {id} --keep FACT-ADDR | --bound FACT-ADDR [--from T] [--to T]"
    instructions = (
        "the two facts in `payload.facts` disagree: `keep` the address of the one that is "
        "right (the other is superseded), or, when the value changed over time (compare "
        "their `valid_from` and `recorded_at`), `bound` the older one where the newer "
        'begins: {"fact": ADDRESS, "valid_to": T} (a copy with that bound replaces it; '
        "history stays)"
    )
    incremental = True

    def summary(self, payload: dict[str, Any]) -> str:
        facts = [f for f in payload.get("facts") or [] if isinstance(f, dict)]
        if not facts:
            return super().summary(payload)
        return " vs ".join(
            f"{f.get('subject')} {f.get('predicate')} {f.get('value')!r}" for f in facts
        )

    def _candidate(self, ctx: KindContext, a: str, b: str) -> Candidate:
        def payload() -> dict[str, Any]:
            rows = ctx.store.facts.by_ids([a, b])
            sources = []
            for fact in rows:
                for passage in ctx.store.passages.by_ids([fact.source] if fact.source else []):
                    sources.append(
                        {"fact": address("fact", fact.id), **to_json(passage_ref(passage))}
                    )
            facts = []
            for fact in rows:  # which was recorded first helps decide which to keep
                facts.append({**to_json(fact_ref(fact)), "recorded_at": fact.recorded_at})
            return {"facts": facts, "sources": sources}

        return Candidate(f"{a}|{b}", fingerprint(a, b), payload)

    def scan(self, ctx: KindContext) -> Scan:
        only = scope = None
        if ctx.changes is not None:  # incremental: only subjects something touched
            only = set(ctx.changes.entities)
            # The open items about a touched subject are re-examined too: one
            # that is no longer found is settled (obsolete).
            scope = {
                key
                for key in ctx.store.items.open_keys(ctx.namespace, self.name)
                if any(f.canonical in only for f in ctx.store.facts.by_ids(key.split("|")))
            }
        pairs = ctx.store.facts.conflicting(ctx.namespace, only)
        return Scan((self._candidate(ctx, p.first, p.second) for p in pairs), scope)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        a, b = item.key.split("|")
        return self._candidate(ctx, a, b) if ctx.store.facts.disagree(a, b) else None

    def settles(self, ctx: KindContext, finding: Finding) -> str | None:
        if finding.rule != "contradiction" or len(finding.related) != 1:
            return None
        return "|".join(parse_address(a)[1] for a in (finding.address, finding.related[0]))

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
        # The new validity, so a dry run can say what would change.
        ctx.report["bound"] = {"fact": bound.fact, "valid_from": valid_from, "valid_to": valid_to}

    def apply(self, ctx: KindContext, item: Item, resolution: ConflictResolution) -> str:
        if resolution.bound is not None:
            return self._apply_bound(ctx, item, _bound(resolution))
        kept = (resolution.keep or [""])[0]  # (validate: keep, when there is no bound)
        for fact in item.payload["facts"]:
            if fact["address"] != kept:
                _, ident = parse_address(fact["address"])
                ctx.store.tombstones.add(
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
            ctx.store.facts.copy(
                ident,
                valid_from.strip() if valid_from else None,
                valid_to.strip() if valid_to else None,
                at,
            ),
        )
        ctx.store.tombstones.add(
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
def memors_register_kinds(registry: KindRegistry) -> None:
    registry.add(ConflictKind())
