"""Answers that fit an agent: the long lists of an answer, cut into pages.

An MCP answer stays within a byte budget (``MEMORS_MCP_COMPACT_BYTES``,
32 KiB by default). When a thing is larger — a duplicate cluster of 200
passages, an entity with hundreds of passages, a thousand search results —
its lists are cut into pages: page 1 comes first, with a ``paged`` note that
counts what each list holds and which part is shown, and ``next`` says how
to ask for the rest (the same call with ``page``). Nothing is trimmed
inside an element: an element is shown whole or on another page.

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


def _cut(container: dict[str, Any], budget: int) -> dict[str, list[list[Any]]]:
    """Each non-empty list of ``container`` cut into pages: the small lists
    whole on page 1, the room they leave shared among the large ones."""
    lists = {k: v for k, v in container.items() if isinstance(v, list) and v}
    rest = {k: v for k, v in container.items() if k not in lists}
    room = max(budget - json_bytes(rest) - NOTE_BYTES, budget // 4)
    out: dict[str, list[list[Any]]] = {}
    by_size = sorted(lists, key=lambda k: (json_bytes(lists[k]), k))
    for n, key in enumerate(by_size):
        share = room // (len(by_size) - n)
        size = json_bytes(lists[key])
        if size <= share:
            out[key] = [lists[key]]
            room -= size
        else:
            out[key] = _chunks(lists[key], share)
            room -= share
    return out


def page_of(
    container: dict[str, Any], budget: int, page: int = 1
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Page ``page`` (from 1) of ``container``'s lists within ``budget``
    bytes, and the note that says so (None when it fits whole on one page).
    A page past the last is bad input."""
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
    shown = dict(container)
    lists: dict[str, dict[str, int]] = {}
    for key, chunks in cut.items():
        before = sum(len(c) for c in chunks[: page - 1])
        part = chunks[page - 1] if page <= len(chunks) else []
        shown[key] = part
        lists[key] = {"total": sum(len(c) for c in chunks), "first": before + 1, "shown": len(part)}
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
