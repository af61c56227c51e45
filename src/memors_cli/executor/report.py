"""What a run reports: each item's outcome (text and JSON) and the summary."""

from __future__ import annotations

from typing import Any

from ..output import check_lines

OUTCOME_TEXT = {
    "would-write": "would be written (dry run: checks passed, nothing stored)",
    "written": "written",
    "refused": "refused by the checks (not stored)",
    "failed": "failed (nothing stored)",
    "not-attempted": "not attempted",
}


#: The fields a submission's report fills in (SPEC §10), blank before one.
SUBMIT_FIELDS = {
    "status": "open",
    "stored": False,
    "address": None,
    "diff": None,
    "checks": None,
    "message": None,
}


def label(item: dict[str, Any]) -> str:
    entity = (item["payload"].get("entity") or {}).get("name", "?")
    return f"item {item['id']} ({item['kind']}) {entity}"


def blank_report(item: dict[str, Any], outcome: str, error: str | None = None) -> dict[str, Any]:
    return {
        "item": item["id"],
        "kind": item["kind"],
        "entity": (item["payload"].get("entity") or {}).get("name"),
        "outcome": outcome,
        "error": error,
        "title": None,
        "content": None,
        **SUBMIT_FIELDS,
        "revisions": 0,
        "seconds": 0.0,
    }


def outcome_text(report: dict[str, Any]) -> str:
    """The outcome in words, saying whether the model was asked to revise."""
    text = OUTCOME_TEXT[report["outcome"]]
    if report.get("revisions"):
        text += " after one revision"
    return text


def render_item(report: dict[str, Any]) -> str:
    head = f"item {report['item']} ({report['kind']}) {report['entity']}: {outcome_text(report)}"
    if report["outcome"] == "failed" and report["error"]:
        head = f"{head}: {report['error']}"
    lines = [head]
    if report["title"] is not None:
        lines.append(f"  title: {report['title']}")
    if report["address"]:
        lines.append(f"  stored: {report['address']}")
    if report.get("revisions"):
        lines.append(
            f"  revisions: {report['revisions']} (the first draft was refused; the model was "
            "told what the checks flagged and wrote the page again)"
        )
    lines.extend(check_lines(report["checks"] or {}, indent="  "))
    if report["diff"]:
        lines.append("  diff:")
        lines.extend(f"    {line}" for line in report["diff"].rstrip("\n").split("\n"))
    return "\n".join(lines)


def summarize(reports: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"items": len(reports), "written": 0, "would_write": 0, "refused": 0, "failed": 0}
    counts["not_attempted"] = 0
    for r in reports:
        counts[r["outcome"].replace("-", "_")] += 1
    return counts


def summary_line(result: dict[str, Any]) -> str:
    s = result["summary"]
    if result["dry_run"]:
        head = f"dry run with {result['model']}"
        done = f"{s['would_write']} would be written"
    else:
        head = f"applied with {result['model']}"
        done = f"{s['written']} written"
    parts = [done, f"{s['refused']} refused by checks", f"{s['failed']} failed"]
    if s["not_attempted"]:
        parts.append(f"{s['not_attempted']} not attempted")
    line = f"{head}: {s['items']} item(s): " + ", ".join(parts)
    if result["open"] > s["items"]:
        line += f" ({result['open']} open; --limit took {s['items']})"
    if result["dry_run"] and s["items"]:
        line += "; nothing stored (add --apply to submit)"
    if result.get("fallback"):
        line += "; pages asked for as Markdown (the server gave no structured output)"
    return line
