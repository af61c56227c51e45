"""Work items for people: an item's line and its whole text (``items``), and
a submission's report (``submit``), in its kind's words."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from memors_core import Memory
from memors_core.errors import MemorsError
from memors_core.wire import to_json

from ..output import check_lines, render

if TYPE_CHECKING:
    from memors_core.plugins.kinds import KindRegistry


def _summary(item: dict[str, Any], kinds: KindRegistry) -> str:
    """What an item asks for, in its kind's words (:meth:`Kind.summary`)."""
    payload = item["payload"]
    kind = kinds.get(item["kind"])
    if kind is None:  # its plugin is disabled or failed to load: the payload's own words
        given = payload.get("summary")
        return given if isinstance(given, str) else ", ".join(sorted(payload))[:80]
    try:
        about = kind.summary(payload)
    except Exception as exc:  # a plugin's bug is named on its line, the listing goes on
        plugin = kinds.owner(kind.name)
        return (
            f"(kind {kind.name} (plugin {plugin}) failed in summary: {type(exc).__name__}: {exc})"
        )
    return about if isinstance(about, str) else ""


def item_line(item: dict[str, Any], kinds: KindRegistry) -> str:
    about = " ".join(_summary(item, kinds).split())[:120]
    return f"#{item['id']:<5} {item['kind']:<10} {item['status']:<8} {about}"


def command_usage(kinds: KindRegistry, kind_name: str, item_id: int) -> str | None:
    """How an item is completed on the command line, from its kind's ``usage``."""
    kind = kinds.get(kind_name)
    if kind is None or not kind.usage:
        return None
    return kind.usage.replace("{id}", str(item_id))


def _merge_lines(memory: Memory, args: argparse.Namespace, report: dict[str, Any]) -> list[str]:
    """What accepting a merge does (or would do), with both entities' names."""
    survivor, merged = report.get("survivor"), report.get("merged")
    if not isinstance(survivor, str) or not isinstance(merged, str):
        return []
    names = {}
    for addr in (survivor, merged):
        try:
            names[addr] = to_json(memory.get(addr, namespace=args.ns)).get("name") or addr
        except MemorsError:  # (nothing a report names is missing; never fail over a label)
            names[addr] = addr
    done = report["stored"]
    return [
        f"{'merged' if done else 'would merge'} {names[merged]!r} ({merged}) into "
        f"{names[survivor]!r} ({survivor}): {names[merged]!r} "
        f"{'is now' if done else 'would become'} an alias, its passages and facts "
        f"{'follow' if done else 'would follow'}, and a page about either "
        f"{'is' if done else 'would be'} marked stale"
    ]


def _fact_text(f: dict[str, Any], recorded: bool = True) -> str:
    text = f"{f.get('subject')} | {f.get('predicate')} | {f.get('value')}"
    if f.get("valid_from") or f.get("valid_to"):
        text += f"  [{f.get('valid_from') or '…'}, {f.get('valid_to') or '…'})"
    else:
        text += "  (valid at all times)"
    if recorded and f.get("recorded_at"):
        text += f"  recorded {f['recorded_at']}"
    return text


def _entity_name(entity: dict[str, Any]) -> str:
    aliases = entity.get("aliases") or []
    return f"{entity.get('name')}" + (f" (also {', '.join(aliases)})" if aliases else "")


def _indented(text: str, pad: str = "      ") -> list[str]:
    return [pad + line for line in str(text).splitlines()] or [pad]


def _payload_lines(payload: dict[str, Any]) -> list[str]:
    """A work item's payload for people: the shapes of SPEC §10 by name,
    anything else (a plugin's own fields) rendered generically."""
    lines: list[str] = []
    for key, value in payload.items():
        if key == "summary" and isinstance(value, str):
            lines.append(f"summary: {value}")
        elif key == "entity" and isinstance(value, dict):
            lines.append(f"entity: {_entity_name(value)}  {value.get('address')}")
        elif key == "entities" and isinstance(value, list):
            lines.append(f"entities ({len(value)}):")
            lines.extend(
                f"  {e.get('address')}  {_entity_name(e)}" if isinstance(e, dict) else f"  {e}"
                for e in value
            )
        elif key == "passages" and isinstance(value, list):
            lines.append(f"passages ({len(value)}):" if value else "passages: none")
            for n, ps in enumerate(value, 1):
                if not isinstance(ps, dict):
                    lines.append(f"  {ps}")
                    continue
                ref = ps.get("ref", n)
                lines.append(f"  [{ref}] {ps.get('address')}  (document {ps.get('document')})")
                if ps.get("best_match"):
                    lines.append(
                        f"      closest: {ps['best_match']} "
                        f"(jaccard {_number(ps.get('best_jaccard'))})"
                    )
                if ps.get("same_text_as") and "text" not in ps:
                    lines.append(f"      (the same text as {ps['same_text_as']})")
                else:
                    lines.extend(_indented(ps.get("text", "")))
        elif key == "facts" and isinstance(value, list):
            lines.append(f"facts ({len(value)}):" if value else "facts: none")
            for f in value:
                shown = _fact_text(f) if isinstance(f, dict) else ""
                lines.append(f"  {f.get('address') if isinstance(f, dict) else f}  {shown}")
        elif key == "page" and isinstance(value, dict):
            lines.append(
                f"page: {value.get('title')} (version {value.get('version')})  "
                f"{value.get('address')}"
            )
            lines.extend(_indented(value.get("content", ""), "    "))
        elif key == "changes" and isinstance(value, list):
            lines.append(f"changes ({len(value)}):" if value else "changes: none")
            for c in value:
                if not isinstance(c, dict):
                    lines.append(f"  {c}")
                    continue
                lines.append(f"  {c.get('change')}: {c.get('address')}")
                if c.get("text"):
                    lines.extend(_indented(c["text"]))
        elif key == "pairs" and isinstance(value, list):
            total = payload.get("pair_count", len(value))
            lines.append(f"pairs ({len(value)} of {total}):" if value else "pairs: none")
            lines.extend(
                f"  {pr.get('a')} ~ {pr.get('b')}  jaccard {_number(pr.get('jaccard'))}"
                if isinstance(pr, dict)
                else f"  {pr}"
                for pr in value
            )
        elif key == "sources" and isinstance(value, list):
            lines.append("sources: " + (", ".join(map(str, value)) if value else "none"))
        elif isinstance(value, dict | list):
            if value:
                lines.append(f"{key}:")
                lines.append(render(value, 1))
            else:
                lines.append(f"{key}: none")
        elif value is not None:
            lines.append(f"{key}: {_number(value)}")
    return lines


def _number(value: Any) -> Any:
    """A float for people: two decimals (a Jaccard of 7/9 reads 0.78)."""
    return f"{value:.2f}" if isinstance(value, float) else value


def item_text(data: dict[str, Any], kinds: KindRegistry) -> str:
    """``items show`` for people: what the item is, its payload, how to complete it."""
    lines = [
        f"item {data['id']} ({data['kind']}): {data['status']}",
        f"fingerprint: {data['fingerprint']}",
        f"created {data['created_at']}, updated {data['updated_at']}",
    ]
    payload = data.get("payload")
    if isinstance(payload, dict) and payload:
        lines.append("")
        lines.extend(_payload_lines(payload))
    if data.get("resolution"):
        lines.append("")
        lines.append("resolution:")
        lines.append(render(data["resolution"], 1))
    if data["status"] == "open":
        lines.append("")
        how = (
            command_usage(kinds, data["kind"], data["id"])
            or f"submit {data['id']} --set KEY=VALUE..."
        )
        lines.append(
            f"complete it with: memors-mcp {how} --fingerprint {data['fingerprint']}"
            f" (or: submit {data['id']} --skip --reason R)"
        )
    return "\n".join(lines)


def submit_text(
    memory: Memory, args: argparse.Namespace, resolution: dict[str, Any], report: dict[str, Any]
) -> str:
    """A submission's report for people: every address it kept, superseded,
    forgot or left, and the diff (or why there is none)."""
    lines = [f"item {report['item']} ({report['kind']}): {report.get('message', '')}"]
    would = "" if report["stored"] else "would be "  # a dry run says what it would do
    listed = [f for f in ("kept", "forgotten", "left") if isinstance(report.get(f), list)]
    keep = resolution.get("keep")
    kept = report["address"] or (keep[0] if isinstance(keep, list) and keep else None)
    superseded = report.get("superseded")  # a kind that settles facts says which go
    bound = report.get("bound")  # a conflict's --bound: the fact's new validity
    if isinstance(bound, dict):
        rng = f"[{bound.get('valid_from') or '…'}, {bound.get('valid_to') or '…'})"
        if report["stored"]:
            lines.append(f"bounded {bound.get('fact')} to {rng} as {report['address']}")
        else:
            lines.append(f"would bound {bound.get('fact')} to {rng}: a copy would replace it")
    merge = _merge_lines(memory, args, report)
    lines.extend(merge)
    settles = kept or isinstance(bound, dict)
    if isinstance(superseded, list) and superseded and settles and not resolution.get("skip"):
        # The kept fact and what became of the others, each with what it said.
        facts = to_json(memory.get(f"memo://item/{report['item']}", namespace=args.ns))
        facts = [
            f
            for f in (facts.get("payload") or {}).get("facts", [])
            if isinstance(f, dict) and "address" in f
        ]
        new_row = report["address"] and report["address"] not in [f["address"] for f in facts]
        if new_row and not isinstance(bound, dict):  # (a bounded copy is named above)
            lines.append(f"stored {report['address']}")
        for f in facts:
            if f["address"] == kept:
                label = f"{would}kept"
            elif report["stored"]:
                label = to_json(memory.get(f["address"], namespace=args.ns))["status"]
            elif f["address"] in superseded:
                label = "would be superseded"
            else:
                label = "would stay live"
            lines.append(f"{label} {f['address']}: {_fact_text(f, recorded=False)}")
    elif report["address"] and not listed and not merge:
        lines.append(f"stored {report['address']}")
    for field, label in (("kept", "kept"), ("forgotten", "forgotten"), ("left", "left live")):
        if field in listed:
            lines.append(f"{would}{label} ({len(report[field])}):")
            lines.extend(f"  {a}" for a in report[field])
    lines.extend(check_lines(report["checks"]))
    if report["diff"]:
        lines.append("diff:")
        lines.append(report["diff"].rstrip("\n"))
    elif "content" in resolution and not report["message"].startswith("skipped"):
        # Say why there is no diff rather than leave the section out.
        lines.append("diff: none (the submitted content is the same as the current page's)")
    return "\n".join(lines)
