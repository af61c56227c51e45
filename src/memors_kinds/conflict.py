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

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from memors_core.plugins import (
    BadInput,
    Candidate,
    Fact,
    Finding,
    Item,
    Kind,
    KindContext,
    KindRegistry,
    Passage,
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


#: Pairs whose facts (and the passages those cite) are read together (:class:`_Facts`).
PAIRS_BATCH = 256


class _Facts:
    """The facts of a run of pairs and the passages they cite, read for all
    of them at the first payload asked for: two statements a run where there
    were three a pair (a candidate whose item stands reads nothing). One
    subject's facts can make many pairs: each new value disagrees with
    every other."""

    def __init__(self, ctx: KindContext, ids: Iterable[str]) -> None:
        self.ctx = ctx
        self.wanted = sorted(set(ids))
        self.rows: dict[str, Fact] | None = None
        self.cited: dict[str, Passage] = {}

    def payload(self, a: str, b: str) -> dict[str, Any]:
        """A conflict item's payload: both facts, oldest first as given, and
        the passages they cite."""
        if self.rows is None:
            self.rows = {f.id: f for f in self.ctx.store.facts.by_ids(self.wanted)}
            cited = sorted({f.source for f in self.rows.values() if f.source})
            self.cited = {p.id: p for p in self.ctx.store.passages.by_ids(cited)}
        rows = [self.rows[i] for i in (a, b) if i in self.rows]
        sources = [
            {"fact": address("fact", fact.id), **to_json(passage_ref(self.cited[fact.source]))}
            for fact in rows
            if fact.source in self.cited
        ]
        # (which was recorded first helps decide which to keep)
        facts = [{**to_json(fact_ref(fact)), "recorded_at": fact.recorded_at} for fact in rows]
        return {"facts": facts, "sources": sources}


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

    def _candidate(self, a: str, b: str, facts: _Facts) -> Candidate:
        return Candidate(f"{a}|{b}", fingerprint(a, b), lambda: facts.payload(a, b))

    def _candidates(self, ctx: KindContext, pairs: list[tuple[str, str]]) -> Iterator[Candidate]:
        for start in range(0, len(pairs), PAIRS_BATCH):
            run = pairs[start : start + PAIRS_BATCH]
            facts = _Facts(ctx, (i for pair in run for i in pair))
            for a, b in run:
                yield self._candidate(a, b, facts)

    def scan(self, ctx: KindContext) -> Scan:
        only = scope = None
        if ctx.changes is not None:  # incremental: only subjects something touched
            only = set(ctx.changes.entities)
            # The open items about a touched subject are re-examined too: one
            # that is no longer found is settled (obsolete). (Their facts read
            # at once: a subject's conflicts can be many.)
            keys = ctx.open_keys
            if keys is None:  # (scanned outside the engine's compaction)
                keys = ctx.store.items.open_keys(ctx.namespace, self.name)
            subject = {
                f.id: f.canonical
                for f in ctx.store.facts.by_ids({i for key in keys for i in key.split("|")})
            }
            scope = {key for key in keys if any(subject.get(i) in only for i in key.split("|"))}
        pairs = ctx.store.facts.conflicting(ctx.namespace, only)
        return Scan(self._candidates(ctx, [(p.first, p.second) for p in pairs]), scope)

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        a, b = item.key.split("|")
        return (
            self._candidate(a, b, _Facts(ctx, (a, b))) if ctx.store.facts.disagree(a, b) else None
        )

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
