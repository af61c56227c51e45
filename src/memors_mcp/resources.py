"""MCP resources: every address type as a template, read as readable text.

``memo://page/{id}`` is the page's Markdown; an entity comes with its
passages, facts and page; a document with its passages' text; an item with
its payload. A missing or malformed address is ``ResourceNotFoundError``
(JSON-RPC -32602). Resources read the namespace the server was started with.
A thing larger than one answer is read in pages, ``memo://item/7?page=2``,
as ``get`` pages it (its lists cut; the last line says where the rest is).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from memors_core import BadInput, MemorsError, Memory, NotFound
from memors_core.wire import to_json

from .paging import NOTE_BYTES, page_answer
from .tools import compact_budget

ADDRESS_TYPES = ("page", "entity", "passage", "fact", "document", "item")


def _status(view: dict[str, Any]) -> str:
    return view.get("status", "live")


def _record_lines(v: dict[str, Any]) -> list[str]:
    """When, why and by what a forgotten or superseded row changed (none if live)."""
    state = _status(v)
    record = v.get(state) if state in ("forgotten", "superseded") else None
    if not isinstance(record, dict):
        return []
    line = f"{state.capitalize()} at {record['at']}"
    if record.get("by"):
        version = f" (version {record['version']})" if record.get("version") else ""
        line += f" by {record['by']}{version}"
    if record.get("item"):
        line += f", through {record['item']}"
    if record.get("reason"):
        line += f": {record['reason']}"
    return [line]


def _fact_line(f: dict[str, Any]) -> str:
    when = ""
    if f.get("valid_from") or f.get("valid_to"):
        when = f" (from {f.get('valid_from') or 'always'} to {f.get('valid_to') or 'now'})"
    return f"- {f['predicate']}: {f['value']}{when} — {f['address']}"


def render_page(v: dict[str, Any]) -> str:
    content = v["content"].rstrip()
    head = "" if content.lstrip().startswith("#") else f"# {v['title']}\n\n"
    state = _status(v) + (", stale" if v.get("stale") else "")
    lines = [
        f"{head}{content}",
        "",
        "---",
        f"Page {v['address']} — title {v['title']!r}, version {v['version']}, {state}; "
        f"an inference about {v['entity']}.",
    ]
    lines += _record_lines(v)
    unverified = sum(1 for s in v.get("sentences") or [] if s.get("flags"))
    if unverified:
        lines.append(
            f"Unverified: {unverified} sentence(s) stored over the checks' flags "
            "(force), marked UNVERIFIED below; not vouched for by any source."
        )
    if v.get("previous"):
        lines.append(f"Previous version: {v['previous']}")
    if v.get("sources"):
        lines.append("Sources: " + ", ".join(v["sources"]))
    if v.get("facts"):
        lines.append("Built with the facts: " + ", ".join(v["facts"]))
    if v.get("sentences"):
        lines += ["", "Sentences and the sources each cites:"]
        for n, s in enumerate(v["sentences"], 1):
            flags = s.get("flags") or []
            cited = ", ".join(s["sources"]) if s["sources"] else "none (no marker)"
            if flags:
                why = "; ".join(f"{f.get('check')}: {f.get('message')}" for f in flags)
                cited = f"UNVERIFIED (stored over its checks' flags: {why})" + (
                    f"; it cites {', '.join(s['sources'])}" if s["sources"] else ""
                )
            lines.append(f"{n}. {' '.join(s['text'].split())} — {cited}")
    return "\n".join(lines) + "\n"


def render_entity(v: dict[str, Any]) -> str:
    lines = [f"# {v['name']}", "", f"Entity {v['address']} ({_status(v)})"]
    if v.get("merged_into"):
        lines.append(f"Merged into {v['merged_into']}")
    if v.get("aliases"):
        lines.append("Aliases: " + ", ".join(v["aliases"]))
    lines.append(f"Page: {v['page']}" if v.get("page") else "Page: none yet")
    lines += ["", f"## Facts ({len(v['facts'])})"]
    lines += [_fact_line(f) for f in v["facts"]] or ["(none)"]
    lines += ["", f"## Passages ({len(v['passages'])})"]
    if not v["passages"]:
        lines.append("(none)")
    for p in v["passages"]:
        lines += ["", f"### {p['address']} (from {p['document']})", "", p["text"].rstrip()]
    return "\n".join(lines) + "\n"


def render_passage(v: dict[str, Any]) -> str:
    lines = [
        v["text"].rstrip(),
        "",
        "---",
        f"Passage {v['address']} ({_status(v)}), position {v['position']} of {v['document']}",
        *_record_lines(v),
    ]
    if v.get("entities"):
        lines.append("Mentions: " + ", ".join(v["entities"]))
    return "\n".join(lines) + "\n"


def render_fact(v: dict[str, Any]) -> str:
    lines = [
        f"{v['subject_name']} — {v['predicate']}: {v['value']}",
        "",
        f"Fact {v['address']} ({_status(v)}{', expired' if v.get('expired') else ''})",
        f"Subject: {v['subject']}",
        f"Valid from: {v.get('valid_from') or 'always'}",
        f"Valid to: {v.get('valid_to') or 'still holds'}",
        f"Recorded at: {v['recorded_at']}",
        *_record_lines(v),
    ]
    if v.get("source"):
        lines.append(f"Source: {v['source']}")
    return "\n".join(lines) + "\n"


def render_document(v: dict[str, Any], passages: list[dict[str, Any]]) -> str:
    lines = [f"# {v['title'] or v['uri'] or v['address']}", ""]
    lines.append(f"Document {v['address']} ({_status(v)}), version {v['version']}")
    lines += _record_lines(v)
    if len(v.get("versions") or []) > 1:
        lines.append(
            "Versions: "
            + "; ".join(
                f"{x['version']} ({x['created_at']}, {x['passages']} passages)"
                for x in v["versions"]
            )
        )
    if v.get("uri"):
        lines.append(f"URI: {v['uri']}")
    if v.get("metadata"):
        lines.append("Metadata: " + json.dumps(v["metadata"], ensure_ascii=False, sort_keys=True))
    for p in passages:
        marker = "" if p["status"] == "live" else f" [{p['status']}]"
        lines += ["", f"<!-- {p['address']}{marker} -->", p["text"].rstrip()]
    return "\n".join(lines) + "\n"


def render_item(v: dict[str, Any]) -> str:
    lines = [
        f"# Work item {v['id']}: {v['kind']} ({v['status']})",
        "",
        f"Item {v['address']}, created {v['created_at']}, updated {v['updated_at']}.",
        "Complete it with the `submit` tool (dry_run first); everything needed is in the payload.",
        f"Its fingerprint is `{v['fingerprint']}`: send it as `fingerprint` with `submit`.",
        "",
        "## Payload",
        "",
        "```json",
        json.dumps(v["payload"], ensure_ascii=False, indent=2),
        "```",
    ]
    if v.get("resolution") is not None:
        lines += [
            "",
            "## Resolution",
            "",
            "```json",
            json.dumps(v["resolution"], ensure_ascii=False, indent=2),
            "```",
        ]
    return "\n".join(lines) + "\n"


def _paging_footer(address: str, paged: dict[str, Any] | None) -> str:
    """The last lines of a paged resource: what this page shows, where the rest is."""
    if not paged:
        return ""
    shown = ", ".join(
        f"{key} {p['first']}-{p['first'] + p['shown'] - 1} of {p['total']}"
        if p["shown"]
        else f"{key}: none of {p['total']} here"
        for key, p in paged["lists"].items()
    )
    line = f"\n---\nPage {paged['page']} of {paged['pages']} ({shown})."
    if "next" in paged:
        line += f" Next: {address}?page={paged['next']['page']}"
    return line + "\n"


def _within_cap(text: str, address: str) -> str:
    """A resource's text within the cap (the budget and its note's room),
    whatever its rendering added: past that it is cut, and says where the
    whole is (``get`` pages it)."""
    cap = compact_budget() + NOTE_BYTES
    if len(text.encode()) <= cap:
        return text
    tail = f"\n\n[… cut at {{}} of {len(text):,} characters: get {address} shows it whole, page by page]\n"
    room = cap - len(tail.encode()) - 16
    kept = text.encode()[:room].decode("utf-8", "ignore")
    return kept + tail.format(f"{len(kept):,}")


class AddressReader:
    """Reads an address of the server's namespace as text."""

    def __init__(self, memory: Memory, namespace: str) -> None:
        self.memory = memory
        self.namespace = namespace
        # Markdown (indented JSON, headings) takes more room than an answer's
        # JSON: a resource's lists are cut to two thirds of the budget.
        self.budget = compact_budget() * 2 // 3

    def _get(self, address: str) -> dict[str, Any]:
        try:
            return to_json(self.memory.get(address, namespace=self.namespace))
        except (NotFound, BadInput) as exc:
            raise ResourceNotFoundError(exc.message) from None
        except MemorsError as exc:
            raise ResourceError(exc.message) from None

    def read(self, kind: str, ident: str, page: str | None = None) -> str:
        address = f"memo://{kind}/{ident}"
        view = self._get(address)
        if kind == "document":  # its passages' texts are paged with it, not fetched after
            view = {**view, "passages": [self._passage(p) for p in view["passages"]]}
        try:
            number = 1 if page is None else int(page)
            view = page_answer(view, self.budget, number)
        except ValueError:
            raise ResourceNotFoundError(f"page must be a whole number, got {page!r}") from None
        except BadInput as exc:
            raise ResourceNotFoundError(exc.message) from None
        text = self._render(kind, view) + _paging_footer(address, view.get("paged"))
        return _within_cap(text, address)

    def _passage(self, address: str) -> dict[str, Any]:
        p = self._get(address)
        return {"address": p["address"], "status": p["status"], "text": p["text"]}

    def _render(self, kind: str, view: dict[str, Any]) -> str:
        if kind == "page":
            return render_page(view)
        if kind == "entity":
            return render_entity(view)
        if kind == "passage":
            return render_passage(view)
        if kind == "fact":
            return render_fact(view)
        if kind == "document":
            return render_document(view, view["passages"])
        return render_item(view)

    def live_pages(self) -> list[tuple[str, str, str, int]]:
        """(address, title, entity name, version) of the namespace's live pages."""
        out = []
        for entity in self.memory.entities(namespace=self.namespace).entities:
            if entity.page is None:
                continue
            page = self._get(entity.page)
            if page["status"] == "live":
                out.append((page["address"], page["title"], entity.name, page["version"]))
        return out


_DESCRIPTIONS = {
    "page": "A compacted page: its Markdown, then its version, entity and source passages.",
    "entity": "An entity with its aliases, facts, passages (full text) and page.",
    "passage": "A passage's text, its document, position and the entities it mentions.",
    "fact": "A fact: subject, predicate, value, validity, source and status.",
    "document": "A remembered document with the text of all its passages.",
    "item": "A compaction work item with its complete payload (and resolution once done).",
}


def register_resources(server: MCPServer, reader: AddressReader) -> None:
    """One template per address type; each function's parameter matches ``{id}``."""
    for kind in ADDRESS_TYPES:

        def make(kind: str):
            def read(id: str, page: str | None = None) -> str:
                return reader.read(kind, id, page)

            read.__name__ = f"read_{kind}"
            return read

        server.resource(
            f"memo://{kind}/{{id}}{{?page}}",
            name=f"{kind}",
            title=f"memors {kind}",
            description=_DESCRIPTIONS[kind],
            mime_type="text/markdown",
        )(make(kind))
