"""Lint: a read-only report of problems, with addresses.

The built-in rules use the same definitions as the kinds that act on them
(:mod:`memors_core.ops`), so lint and compaction never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .hookspecs import hookimpl
from .ids import address
from .kinds import LintContext
from .model import Finding, LintReport
from .ops import Operations
from .plugins import call_each
from .store import Store


def _fact_line(ops: Operations, fact_id: str) -> str:
    refs = ops.fact_refs([fact_id])
    if not refs:
        return fact_id
    f = refs[0]
    return f"{f.subject} {f.predicate} {f.value!r}"


@hookimpl
def memors_lint_rules(context: LintContext) -> list[Finding]:
    ops, ns = context.ops, context.namespace
    findings: list[Finding] = []
    for a, b in ops.conflicting_facts(ns):
        findings.append(
            Finding(
                "contradiction",
                address("fact", a),
                f"{_fact_line(ops, a)} contradicts {_fact_line(ops, b)} over an overlapping time",
                [address("fact", b)],
            )
        )
    for entity in ops.orphan_entities(ns):
        name = ops.entity_row(entity)[2]
        findings.append(
            Finding(
                "orphan-entity",
                address("entity", entity),
                f"entity {name!r} has no live passages and no live facts",
            )
        )
    for entity, count in ops.entities_needing_page(ns):
        name = ops.entity_row(entity)[2]
        findings.append(
            Finding(
                "missing-page",
                address("entity", entity),
                f"entity {name!r} has {count} live passages and no page",
            )
        )
    for page, changes in ops.stale_pages(ns):
        findings.append(
            Finding(
                "stale-page",
                address("page", page[0]),
                f"page {page[1]!r} is stale: {len(changes)} change(s) since it was written",
                [c["address"] for c in changes],
            )
        )
    for fact, valid_to in ops.expired_facts(ns):
        findings.append(
            Finding(
                "expired-fact",
                address("fact", fact),
                f"{_fact_line(ops, fact)} expired at {valid_to}",
            )
        )
    return findings


def run_lint(path: Path, namespace: str, pm: Any) -> LintReport:
    """Open ``path`` read-only and run every lint rule on ``namespace``."""
    if not Path(path).exists():
        return LintReport(namespace=namespace, findings=[])
    store = Store.open(path, readonly=True)
    try:
        ctx = LintContext(store, namespace, Operations(store))
        with store.read():
            results, errors = call_each(pm.hook.memors_lint_rules, context=ctx)
    finally:
        store.close()
    findings: list[Finding] = []
    for _plugin, value in results:
        findings.extend(value)
    for plugin, error in errors:
        findings.append(
            Finding(
                "plugin-error",
                f"plugin:{plugin}",
                f"lint rules of plugin {plugin!r} failed: {error}",
            )
        )
    return LintReport(namespace=namespace, findings=findings)
