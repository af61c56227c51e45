"""Kind ``conflict``: two live facts about one subject overlap in time and
disagree (their predicates fold equal, their values do not).

Payload: ``facts`` (both) and ``sources`` (the passages they cite). Submit:
``keep`` = the address of the fact to keep; the other is superseded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from memors_core import hookimpl
from memors_core.errors import BadInput
from memors_core.ids import address, parse_address
from memors_core.kinds import Candidate, Item, Kind, KindContext, fingerprint
from memors_core.wire import to_json


@attrs.frozen
class ConflictResolution:
    keep: list[str]


class ConflictKind(Kind):
    name = "conflict"
    description = "settle two facts about one subject that overlap in time and disagree"
    resolution = ConflictResolution
    hint = "keep = one fact address (--keep memo://fact/…)"
    incremental = True

    def _candidate(self, ctx: KindContext, a: str, b: str) -> Candidate:
        def payload() -> dict[str, Any]:
            sources = []
            for fact in (a, b):
                src = ctx.store.scalar("SELECT source FROM facts WHERE id = ?", (fact,))
                for ref in ctx.ops.passage_refs([src] if src else []):
                    sources.append({"fact": address("fact", fact), **to_json(ref)})
            return {"facts": to_json(ctx.ops.fact_refs([a, b])), "sources": sources}

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

    def validate(self, ctx: KindContext, item: Item, resolution: ConflictResolution) -> None:
        facts = [f["address"] for f in item.payload["facts"]]
        if len(resolution.keep) != 1:
            raise BadInput(f"a conflict keeps exactly one fact: one of {', '.join(facts)}")
        parse_address(resolution.keep[0], expect=("fact",))
        if resolution.keep[0] not in facts:
            raise BadInput(
                f"{resolution.keep[0]} is not one of item {item.id}'s facts: {', '.join(facts)}"
            )

    def apply(self, ctx: KindContext, item: Item, resolution: ConflictResolution) -> str:
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


@hookimpl
def memors_register_kinds(registry) -> None:
    registry.add(ConflictKind())
