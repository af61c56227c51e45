"""memors-expired: a third-party work-item kind, check and lint rule.

A fact whose ``valid_to`` has passed while a live page about its subject
still covers it becomes an ``expired`` work item. Its resolution either
renews the fact (``{"renew_until": DATE}`` records the same statement, valid
from the old end until DATE) or retires it (``{"retire": true}`` forgets
it; facts are append-only, so this is a tombstone).

Two more hooks keep pages honest about such facts: the ``expired-value``
check refuses a page submission that states an expired value as if it still
held, and the ``expired-on-page`` lint rule finds live pages that already do.
A sentence may mention an expired value when it says when it ended (the
year of its ``valid_to``): "Raft's leader was node 3 until 2024."

Everything here comes from the one plugin API, :mod:`memors_core.plugins`:
``hookimpl``, :class:`~memors_core.plugins.Kind` and the typed store
``ctx.store`` (a :class:`~memors_core.plugins.PluginStore`): no SQL, so it
runs on any storage engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from memors_core.plugins import (
    BadInput,
    Candidate,
    CheckResult,
    Finding,
    Item,
    Kind,
    KindContext,
    PageResolution,
    address,
    content_words,
    fact_ref,
    fingerprint,
    fold_value,
    hookimpl,
    normalise,
    now_ts,
    page_ref,
    page_sentences,
    parse_address,
    to_json,
    words,
)

KIND = "expired"
CHECK = "expired-value"
RULE = "expired-on-page"

JSON = dict[str, Any]


@attrs.frozen
class ExpiredResolution:
    """An ``expired`` item is settled by exactly one of these."""

    #: Renew: the same fact holds from the old ``valid_to`` until this date.
    renew_until: str | None = None
    #: Retire: the fact is forgotten.
    retire: bool = False


# --- the rule, shared by the kind, the check and the lint rule ----------------------


def _statement(fact: JSON) -> tuple[str, str]:
    return fold_value(fact["predicate"]), fold_value(fact["value"])


def is_expired(fact: JSON, now: str) -> bool:
    end = normalise(fact.get("valid_to"), "valid_to")
    return end is not None and end <= now


def is_current(fact: JSON, now: str) -> bool:
    start = normalise(fact.get("valid_from"), "valid_from")
    end = normalise(fact.get("valid_to"), "valid_to")
    return (start is None or start <= now) and (end is None or now < end)


def outdated(facts: list[JSON], now: str) -> list[JSON]:
    """The expired facts among ``facts`` that no current fact carries on
    (a renewal: the same predicate and value, holding now)."""
    carried = {_statement(f) for f in facts if is_current(f, now)}
    return [f for f in facts if is_expired(f, now) and _statement(f) not in carried]


def stated_as_current(content: str, fact: JSON) -> list[str]:
    """Sentences of a page that state ``fact``'s value (its value's content
    words and one of its predicate's) without the year it ended."""
    value = content_words(fact["value"])
    predicate = content_words(fact["predicate"])
    if not value:
        return []
    year = words(fact["valid_to"])[0]
    found = []
    for sentence in page_sentences(content):
        said = content_words(sentence)
        if value <= said and (not predicate or predicate & said) and year not in said:
            found.append(sentence)
    return found


# --- the kind ----------------------------------------------------------------------


class ExpiredKind(Kind):
    name = KIND
    description = "a fact expired while a page still covers it: renew it or retire it"
    resolution = ExpiredResolution
    hint = "renew_until = a future date or retire = true"
    usage = "submit {id} --set renew_until=DATE | --set retire=true"
    instructions = (
        "the fact in `payload.fact` stopped holding at its `valid_to`, but the page in "
        "`payload.page` still covers it (`payload.stated_as_current` lists the sentences "
        "that state it as current): if it still holds, `renew_until` a future date (the "
        "same fact is recorded again from its old end until then); if not, `retire: true` "
        "forgets it"
    )

    def summary(self, payload: JSON) -> str:
        fact, page = payload.get("fact"), payload.get("page")
        if not isinstance(fact, dict) or not isinstance(page, dict):
            return super().summary(payload)
        return (
            f"{fact.get('subject')} {fact.get('predicate')} {fact.get('value')!r} expired at "
            f"{fact.get('valid_to')}; page {page.get('title')!r} covers it"
        )

    def scan(self, ctx: KindContext) -> Iterator[Candidate]:
        for expired in ctx.store.facts.expired(ctx.namespace, now_ts()):
            candidate = self._candidate(ctx, expired.id)
            if candidate is not None:
                yield candidate

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        return self._candidate(ctx, item.key)  # the key is the fact's id: no rescan

    def _candidate(self, ctx: KindContext, fact_id: str) -> Candidate | None:
        row = ctx.store.facts.get(fact_id, ctx.namespace)
        if row is None or not ctx.store.tombstones.is_live(fact_id):
            return None
        fact = to_json(fact_ref(row))
        page = ctx.store.pages.current(row.canonical)
        if page is None:
            return None  # no page covers it: the built-in lint rule expired-fact is enough
        now = now_ts()
        live = to_json([fact_ref(f) for f in ctx.store.facts.of_entity(row.canonical)])
        if fact["address"] not in {f["address"] for f in outdated(live, now)}:
            return None  # not expired, or renewed
        shown = to_json(page_ref(page))

        def payload() -> JSON:
            return {
                "fact": fact,
                "page": shown,
                "stated_as_current": stated_as_current(shown["content"], fact),
            }

        return Candidate(fact_id, fingerprint(fact_id, fact["valid_to"], page.id), payload)

    def validate(self, ctx: KindContext, item: Item, resolution: ExpiredResolution) -> None:
        if resolution.retire and resolution.renew_until is not None:
            raise BadInput("renew_until and retire exclude each other: renew the fact or retire it")
        if not resolution.retire and resolution.renew_until is None:
            raise BadInput(f"an {KIND} item needs renew_until = a date, or retire = true")
        if resolution.renew_until is not None:
            until = normalise(resolution.renew_until, "renew_until")
            if until <= now_ts():
                raise BadInput(
                    f"renew_until {resolution.renew_until} is not in the future: "
                    "a renewed fact must still hold"
                )

    def apply(self, ctx: KindContext, item: Item, resolution: ExpiredResolution) -> str:
        fact = item.payload["fact"]
        if resolution.retire:
            _, fact_id = parse_address(fact["address"], expect=("fact",))
            ctx.store.tombstones.add(
                ctx.namespace,
                "fact",
                fact_id,
                "forgotten",
                f"retired by item {item.id}: expired at {fact['valid_to']}",
                item.id,
            )
            return fact["address"]
        renewed = ctx.store.facts.record(
            ctx.namespace,
            fact["subject"],
            fact["predicate"],
            fact["value"],
            valid_from=fact["valid_to"],
            valid_to=resolution.renew_until,
        )
        return address("fact", renewed)


# --- hooks --------------------------------------------------------------------------


@hookimpl
def memors_register_kinds(registry: Any) -> None:
    registry.add(ExpiredKind())


@hookimpl
def memors_check_submission(resolution: Any, payload: JSON) -> dict[str, CheckResult] | None:
    """``expired-value``: a page must not state an expired value as current."""
    if not isinstance(resolution, PageResolution):
        return None
    flagged = [
        {"fact": fact["address"], "expired": fact["valid_to"], "sentence": sentence}
        for fact in outdated(payload.get("facts") or [], now_ts())
        for sentence in stated_as_current(resolution.content, fact)
    ]
    return {CHECK: CheckResult(passed=not flagged, flagged=flagged)}


@hookimpl
def memors_lint_rules(context: Any) -> list[Finding]:
    """``expired-on-page``: live pages that state an expired value as current."""
    store, now = context.store, now_ts()
    findings = []
    for page in store.pages.live(context.namespace):
        shown = to_json(page_ref(page))
        canonical = store.entities.require(page.entity).canonical
        facts = [fact_ref(f) for f in store.facts.of_entity(canonical)]
        for fact in outdated(to_json(facts), now):
            sentences = stated_as_current(shown["content"], fact)
            if sentences:
                findings.append(
                    Finding(
                        RULE,
                        shown["address"],
                        f"page {shown['title']!r} states {fact['subject']} {fact['predicate']} "
                        f"{fact['value']!r} as current, but it expired at {fact['valid_to']}: "
                        f"{sentences[0]!r}",
                        [fact["address"]],
                    )
                )
    return findings
