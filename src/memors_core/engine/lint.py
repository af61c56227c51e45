"""Lint: a read-only report of problems, with addresses.

The built-in rules use the same named queries of the storage protocol as
the kinds that act on them (:mod:`memors_core.storage.api`), so lint and
compaction never disagree: one definition each decides which facts disagree
(``contradiction`` and the ``conflict`` kind), which entities need a page
(``missing-page`` and the ``page`` kind) and which pages are stale
(``stale-page``, the ``stale`` kind and the ``memors_kb_pages_stale`` gauge).

Lint reads a store opened read-only (:meth:`memors_core.Memory.open` with
``readonly=True``; on SQLite the directory is left exactly as it was found)
and never writes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memors_core.domain.dates import now_ts
from memors_core.domain.grounding import flag_message
from memors_core.domain.ids import address
from memors_core.domain.model import Finding, LintReport
from memors_core.domain.rules import PAGE_MIN_PASSAGES
from memors_core.engine.views import sentence_views
from memors_core.errors import BadInput
from memors_core.log import get_logger
from memors_core.plugins.hookspecs import hookimpl
from memors_core.plugins.kinds import Kind, KindContext, LintContext
from memors_core.plugins.manager import Plugins

if TYPE_CHECKING:
    from memors_core.storage.api import Tx

log = get_logger("memors.lint")

#: The plugin name core's own rules are registered as (``plugins.manager``).
_PLUGIN = "memors.lint"

#: The rules core ships, in the order they run.
BUILTIN_RULES = (
    "contradiction",
    "orphan-entity",
    "missing-page",
    "stale-page",
    "unverified-page",
    "expired-fact",
    "unfinished-purge",
    "bad-purge-state",
)


def _fact_line(tx: Tx, fact_id: str) -> str:
    fact = tx.facts.get(fact_id)
    if fact is None:
        return fact_id
    return f"{fact.subject_name} {fact.predicate} {fact.value!r}"


@hookimpl
def memors_lint_rules(context: LintContext) -> list[Finding]:
    tx, ns = cast("Tx", context.store), context.namespace  # core's rules read purges too
    findings: list[Finding] = []
    for a, b in ((p.first, p.second) for p in tx.facts.conflicting(ns)):
        findings.append(
            Finding(
                "contradiction",
                address("fact", a),
                f"{_fact_line(tx, a)} contradicts {_fact_line(tx, b)} over an overlapping time",
                [address("fact", b)],
            )
        )
    for entity in tx.entities.orphans(ns):
        name = tx.entities.require(entity).name
        findings.append(
            Finding(
                "orphan-entity",
                address("entity", entity),
                f"entity {name!r} has no live passages and no live facts",
            )
        )
    for need in tx.entities.needing_page(ns, PAGE_MIN_PASSAGES):
        name = tx.entities.require(need.entity).name
        findings.append(
            Finding(
                "missing-page",
                address("entity", need.entity),
                f"entity {name!r} has {need.passages} live passages and no page",
            )
        )
    for page, changes in ((s.page, s.changes) for s in tx.pages.stale(ns)):
        findings.append(
            Finding(
                "stale-page",
                address("page", page.id),
                f"page {page.title!r} is stale: {_changes_line(changes)}",
                [c["address"] for c in changes],
            )
        )
    findings.extend(unverified_pages(tx, ns))
    for fact in tx.facts.expired(ns, now_ts(), history=False):
        findings.append(
            Finding(
                "expired-fact",
                address("fact", fact.id),
                f"{_fact_line(tx, fact.id)} expired at {fact.valid_to}",
            )
        )
    pending = tx.purges.pending(ns)
    owner = tx.purges.finisher() if pending else None
    for purge in pending:
        target = purge.target
        if owner is None:
            advice = f"run `memors-mcp purge {target} --yes` again to finish it"
        else:
            advice = (
                f"the role lint connects as may not rewrite the store's tables: only their "
                f"owner ({owner}) can finish it, by running `memors-mcp purge {target} --yes` "
                f"(or any memors command that opens the store) connected as {owner}"
            )
        findings.append(
            Finding(
                "unfinished-purge",
                target,
                f"the purge of {target} (audit record {purge.purge}) did not finish: the file "
                f"may still hold its text ({', '.join(purge.steps)} left); {advice}",
            )
        )
    for bad in tx.purges.unreadable(ns):
        findings.append(
            Finding(
                "bad-purge-state",
                bad.target or f"purge_pending/{bad.purge}",
                f"the unfinished-purge entry of audit record {bad.purge} is not one memors "
                f"wrote ({bad.reason}); no command acts on it. If no purge of yours left it, "
                f"delete it as the store's owner: DELETE FROM purge_pending WHERE purge = "
                f"{bad.purge}",
            )
        )
    return findings


def unverified_pages(tx: Tx, ns: str) -> list[Finding]:
    """``unverified-page``: each live page stored over its checks' flags
    (``force``), with its flagged sentences and what flagged them; a clean
    resubmission (a new version that passes) supersedes it and ends it."""
    out = []
    for page in tx.pages.flagged(ns):
        sentences = [s for s in sentence_views(tx.pages.sentences(page.id), page.flags) if s.flags]
        parts = [
            f"{' '.join(s.text.split())!r} ({'; '.join(_flag_line(f) for f in s.flags)})"
            for s in sentences
        ]
        omitted = [f for f in page.flags.get("omission") or [] if isinstance(f, dict)]
        parts += [flag_message("omission", f) for f in omitted]
        what = f"{len(sentences)} unverified sentence(s)" if sentences else "flags"
        out.append(
            Finding(
                "unverified-page",
                address("page", page.id),
                f"page {page.title!r} was stored over its checks' flags, with {what}: "
                + ("; ".join(parts) or ", ".join(page.flags))
                + " (a clean resubmission clears it)",
                [f["fact"] for f in omitted if isinstance(f.get("fact"), str)],
            )
        )
    return out


def _flag_line(flag: dict) -> str:
    return f"{flag.get('check')}: {flag.get('message')}"


def _changes_line(changes: list[dict[str, str]]) -> str:
    if not changes:
        return "marked stale (its entity was merged)"
    counts: dict[tuple[str, str], int] = {}
    for c in changes:
        what = c["address"].split("/")[2] if c["address"].startswith("memo://") else "passage"
        counts[c["change"], what] = counts.get((c["change"], what), 0) + 1
    nouns = {"passage": "passage(s)", "fact": "fact(s)", "entity": "entit(ies)"}
    parts = [f"{n} {change} {nouns.get(what, what)}" for (change, what), n in counts.items()]
    return ", ".join(parts) + " since it was written"


# --- running the rules ------------------------------------------------------------

#: The rule plugins' failures are reported under.
PLUGIN_ERROR = "plugin-error"


def check_rules(rules: object, plugins: Plugins) -> None:
    """Bad input unless ``rules`` is None or a list of rule names. A name no
    rule reports is refused when only core's rules are installed (a plugin's
    rules are known by their findings alone, so with plugins any name goes)."""
    if rules is None:
        return
    if not isinstance(rules, list | tuple) or not all(
        isinstance(r, str) and r.strip() for r in rules
    ):
        raise BadInput(f"rules must be a list of lint rule names, like {BUILTIN_RULES[0]!r}")
    if any(name != _PLUGIN for name in plugins.lint_plugins):
        return
    unknown = [r for r in rules if r not in (*BUILTIN_RULES, PLUGIN_ERROR)]
    if unknown:
        raise BadInput(
            f"unknown lint rule {unknown[0]!r}: the rules are {', '.join(BUILTIN_RULES)}"
        )


def run_lint(
    tx: Tx, namespace: str, plugins: Plugins, rules: Collection[str] | None = None
) -> LintReport:
    """Run every lint rule on ``namespace`` in the read-only transaction ``tx``
    and report the findings of ``rules`` (None: every rule's).

    A plugin whose rules raise, or return something that is not a list of
    :class:`Finding`, is reported as a ``plugin-error`` finding naming the
    plugin; the other rules still run. A finding whose work item was skipped,
    with nothing it depends on changed since, is acknowledged: left out.
    """
    findings = plugins.lint_rules(LintContext(tx, namespace))
    if rules is not None:
        findings = [f for f in findings if f.rule in rules]
    findings = _unacknowledged(tx, namespace, plugins, findings)
    log.debug("lint_ran", namespace=namespace, findings=len(findings))
    return LintReport(namespace=namespace, findings=findings)


def _unacknowledged(
    tx: Tx, namespace: str, plugins: Plugins, findings: list[Finding]
) -> list[Finding]:
    """The findings no skipped item acknowledges: an item of a kind that
    settles the finding (:meth:`Kind.settles`), skipped, whose inputs are as
    they were then. Each kind is asked in turn about the findings no kind
    before it acknowledged; the last items of their keys are read in one
    statement per kind. A kind that fails here acknowledges nothing."""
    ctx = KindContext(tx, namespace)
    acknowledged: set[int] = set()
    for kind in plugins.kinds:
        keys: dict[int, str] = {}
        for n, finding in enumerate(findings):
            if n not in acknowledged:
                key = _guarded(kind, kind.settles, ctx, finding)
                if key is not None:
                    keys[n] = key
        if not keys:
            continue
        last = tx.items.last_for_keys(namespace, kind.name, sorted(set(keys.values())))
        for n, key in keys.items():
            item = last.get(key)
            if item is None or item.status != "skipped":
                continue
            now = _guarded(kind, kind.current, ctx, item)
            if now is not None and now.fingerprint == item.fingerprint:
                acknowledged.add(n)
    return [f for n, f in enumerate(findings) if n not in acknowledged]


T = TypeVar("T")


def _guarded(kind: Kind, method: Callable[..., T], *args: Any) -> T | None:
    """``method(*args)``, a method of ``kind``; None, logged, when the
    kind's code raised (its finding then stays reported)."""
    try:
        return method(*args)
    except Exception as exc:  # a plugin's kind
        log.warning("lint_settles_failed", kind=kind.name, error=f"{type(exc).__name__}: {exc}")
        return None
