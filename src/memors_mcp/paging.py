"""Answers that fit an agent: the long lists of an answer, cut into pages.

An MCP answer stays within a byte budget (``MEMORS_MCP_COMPACT_BYTES``,
32 KiB by default). When a thing is larger — a duplicate cluster of 200
passages, an entity with hundreds of passages, a thousand search results —
its lists are cut into pages: page 1 comes first, with a ``paged`` note that
counts what each list holds and which part is shown, and ``next`` says how
to ask for the rest (the same call with ``page``). Nothing is trimmed
inside a list's element: an element is shown whole or on another page. A
long text (a page's ``content``, a one-paragraph document's passage) is
cut the same way, by characters.

The cut depends only on the container and the budget, so ``compact``'s
first page of an item's payload and ``get``'s pages of that item line up.
"""

from __future__ import annotations

import json
from typing import Any

from memors_core import BadInput

#: Bytes kept aside for the ``paged`` note and an answer's small fields.
NOTE_BYTES = 1024


def json_bytes(value: Any) -> int:
    """A value's size in an answer: its JSON in UTF-8."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _chunks(values: list[Any], room: int) -> list[list[Any]]:
    """``values`` in consecutive runs of at most ``room`` bytes (an element
    larger than that runs alone)."""
    out: list[list[Any]] = [[]]
    used = 0
    for value in values:
        size = json_bytes(value) + 1
        if out[-1] and used + size > room:
            out.append([])
            used = 0
        out[-1].append(value)
        used += size
    return out


def _text_chunks(text: str, room: int) -> list[str]:
    """``text`` in consecutive pieces of at most ``room`` bytes of JSON each."""
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + max(room, 16))
        while end - start > 16 and json_bytes(text[start:end]) > room:
            end = start + (end - start) * 9 // 10
        out.append(text[start:end])
        start = end
    return out or [""]


Path = tuple[str, ...]


def _parts(container: dict[str, Any], budget: int) -> dict[Path, list[Any] | str]:
    """What may be cut: the container's non-empty lists, and its long texts
    (more than a quarter of the budget; also one level down, as a stale
    item's previous ``page.content``)."""
    long = budget // 4
    out: dict[Path, list[Any] | str] = {}
    for key, value in container.items():
        if (isinstance(value, list) and value) or (
            isinstance(value, str) and json_bytes(value) > long
        ):
            out[(key,)] = value
        elif isinstance(value, dict):
            for inner, text in value.items():
                if isinstance(text, str) and json_bytes(text) > long:
                    out[(key, inner)] = text
    return out


def _without(container: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
    """``container`` with what lies at ``paths`` emptied (a copy: the original stays)."""
    out = dict(container)
    for path in paths:
        if len(path) == 1:
            out[path[0]] = [] if isinstance(out[path[0]], list) else ""
        else:
            out[path[0]] = {**out[path[0]], path[1]: ""}
    return out


def _cut(container: dict[str, Any], budget: int) -> dict[Path, list[Any]]:
    """Each part (:func:`_parts`) cut into pages: the small ones whole on
    page 1, the room they leave shared among the large ones."""
    parts = _parts(container, budget)
    rest = _without(container, list(parts))
    room = max(budget - json_bytes(rest) - NOTE_BYTES, budget // 4)
    out: dict[Path, list[Any]] = {}
    by_size = sorted(parts, key=lambda k: (json_bytes(parts[k]), k))
    for n, key in enumerate(by_size):
        share = room // (len(by_size) - n)
        value, size = parts[key], json_bytes(parts[key])
        if size <= share:
            out[key] = [value]
            room -= size
        else:
            out[key] = (
                _text_chunks(value, share) if isinstance(value, str) else _chunks(value, share)
            )
            room -= share
    return out


def page_of(
    container: dict[str, Any], budget: int, page: int = 1
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Page ``page`` (from 1) of ``container``'s lists and long texts within
    ``budget`` bytes, and the note that says so (None when it fits whole on
    one page): per part, its ``total`` (elements, or a text's characters),
    the ``first`` shown (from 1) and how many are ``shown``. A page past the
    last is bad input."""
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise BadInput(f"page must be a whole number from 1, got {page!r}")
    if json_bytes(container) <= budget:
        if page > 1:
            raise BadInput(f"page {page} is past the last page (1): it fits in one answer")
        return container, None
    cut = _cut(container, budget)
    pages = max((len(c) for c in cut.values()), default=1)
    if page > pages:
        raise BadInput(f"page {page} is past the last page ({pages})")
    shown = _without(container, list(cut))
    lists: dict[str, dict[str, int]] = {}
    for path, chunks in cut.items():
        before = sum(len(c) for c in chunks[: page - 1])
        part = chunks[page - 1] if page <= len(chunks) else chunks[0][:0]
        if len(path) == 1:
            shown[path[0]] = part
        else:
            shown[path[0]][path[1]] = part
        total = sum(len(c) for c in chunks)
        lists[".".join(path)] = {"total": total, "first": before + 1, "shown": len(part)}
    note: dict[str, Any] = {"page": page, "pages": pages, "lists": lists}
    if page < pages:
        note["next"] = {"page": page + 1}
    return shown, note


def page_answer(
    data: dict[str, Any], budget: int, page: int = 1, **next_args: Any
) -> dict[str, Any]:
    """``data`` with its own lists paged (an item's: its payload's), the
    note as ``paged``; ``next_args`` join the note's ``next`` (what else to
    pass to get the next page, such as the item's ``address``)."""
    inner = "payload" if isinstance(data.get("payload"), dict) else None
    container = data[inner] if inner else data
    shown, note = page_of(container, budget, page)
    if note is None:
        return data
    out = {**data, inner: shown} if inner else shown
    if "next" in note:
        note["next"] = {**next_args, **note["next"]}
    out["paged"] = note
    return out
