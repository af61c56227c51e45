"""Answers that fit an agent: the long lists of an answer, cut into pages.

An MCP answer stays within a byte budget (``MEMORS_MCP_COMPACT_BYTES``,
32 KiB by default). When a thing is larger — a duplicate cluster of 200
passages, an entity with hundreds of passages, a thousand search results —
its lists are cut into pages: page 1 comes first, with a ``paged`` note that
counts what each list holds and which part is shown, and ``next`` says how
to ask for the rest (the same call with ``page``). An element is shown
whole or on another page, unless it alone is larger than its page's room:
then its longest texts are cut by characters and it says so in ``cut``,
with the address whose ``get`` shows it whole. A long text (a page's
``content``, a one-paragraph document's passage) is cut the same way as a
list, by characters. :func:`fit` is the last guard every answer passes:
whatever a tool built, what it returns stays within the budget.

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


#: Bytes an element cut to fit keeps aside for its ``cut`` note.
CUT_NOTE_BYTES = 192
#: A field smaller than this (an address, a name, a score) is never cut.
SMALL_BYTES = 256


def _cut_text(text: str, room: int) -> str:
    """The longest start of ``text`` whose JSON takes at most ``room`` bytes."""
    if json_bytes(text) <= room:
        return text
    low, high = 0, min(len(text), max(room, 0))
    while low < high:
        mid = (low + high + 1) // 2
        if json_bytes(text[:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def _whole(value: Any, whole: str | None) -> str | None:
    """Where ``value`` is shown whole: its own address, else the answer's."""
    if isinstance(value, dict):
        own = value.get("address")
        if isinstance(own, str) and own.startswith("memo://"):
            return own
    return whole


def shrink(value: Any, room: int, whole: str | None = None) -> Any:
    """``value`` cut to at most about ``room`` bytes of JSON (itself if it fits).

    A text keeps its start and says where it was cut; an object has its
    largest texts and lists cut first, one at a time, and records each in
    ``cut`` (a text's characters, a list's elements: ``total`` and ``shown``)
    with ``get``, the address that shows it whole (``whole`` unless the
    object has an address of its own)."""
    if json_bytes(value) <= room:
        return value
    whole = _whole(value, whole)
    if isinstance(value, str):
        tail = f" [… cut: {{}} of {len(value):,} characters shown" + (
            f"; get {whole} for the whole]" if whole else "]"
        )
        kept = _cut_text(value, room - json_bytes(tail) - 16)
        return kept + tail.format(f"{len(kept):,}")
    if isinstance(value, list):
        out: list[Any] = []
        used = 2
        for element in value:
            size = json_bytes(element) + 1
            if used + size > room:
                break
            out.append(element)
            used += size
        return out
    if not isinstance(value, dict):
        return value
    out_d = dict(value)
    notes: dict[str, Any] = {}

    def note() -> dict[str, Any]:
        return {**notes, "get": whole} if whole else dict(notes)

    while True:
        over = json_bytes(out_d) + json_bytes({"cut": note()}) + CUT_NOTE_BYTES // 2 - room
        if over <= 0:
            break
        open_keys = [
            k
            for k, v in out_d.items()
            if k not in notes and k != "cut" and isinstance(v, (str, list, dict)) and v
        ]
        if not open_keys:
            break
        key = max(open_keys, key=lambda k: json_bytes(out_d[k]))
        child = out_d[key]
        if json_bytes(child) < SMALL_BYTES:  # an address, a name: never cut
            break
        # (its own entry in the note takes room too)
        target = max(json_bytes(child) - over - CUT_NOTE_BYTES // 2, 2)
        if isinstance(child, str):
            out_d[key] = _cut_text(child, target)
            notes[key] = {"total": len(child), "shown": len(out_d[key])}
        elif isinstance(child, list):
            out_d[key] = shrink(child, target, whole)
            notes[key] = {"total": len(child), "shown": len(out_d[key])}
        else:
            out_d[key] = shrink(child, target, whole)
            notes[key] = {"total": len(child), "shown": len(out_d[key])}
    if notes:
        out_d["cut"] = note()
    return out_d


def _chunks(values: list[Any], room: int, whole: str | None = None) -> list[list[Any]]:
    """``values`` in consecutive runs of at most ``room`` bytes; an element
    larger than that runs alone, cut to fit (:func:`shrink`)."""
    out: list[list[Any]] = [[]]
    used = 0
    for value in values:
        size = json_bytes(value) + 1
        if out[-1] and used + size > room:
            out.append([])
            used = 0
        if size > room:
            value = shrink(value, room, whole)
            size = json_bytes(value) + 1
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

#: How deep :func:`_parts` looks for lists and long texts inside objects
#: (an item's ``payload.page.sentences`` is three keys down).
DEPTH = 3


def _parts(
    container: dict[str, Any], budget: int, prefix: Path = ()
) -> dict[Path, list[Any] | str]:
    """What may be cut: the container's non-empty lists and its long texts
    (more than a quarter of the budget), also inside its objects (a stale
    item's previous ``page.content`` and ``page.sentences``)."""
    long = budget // 4
    out: dict[Path, list[Any] | str] = {}
    for key, value in container.items():
        path = (*prefix, key)
        if (isinstance(value, list) and value) or (
            isinstance(value, str) and json_bytes(value) > long
        ):
            out[path] = value
        elif isinstance(value, dict) and len(path) < DEPTH:
            out.update(_parts(value, budget, path))
    return out


def _put(container: dict[str, Any], path: Path, value: Any) -> None:
    """Set what lies at ``path`` in ``container`` (copying the objects on the
    way, so the original stays as it was)."""
    if len(path) == 1:
        container[path[0]] = value
        return
    inner = dict(container[path[0]])
    container[path[0]] = inner
    _put(inner, path[1:], value)


def _get(container: dict[str, Any], path: Path) -> Any:
    for key in path:
        container = container[key]
    return container


def _without(container: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
    """``container`` with what lies at ``paths`` emptied (a copy: the original stays)."""
    out = dict(container)
    for path in paths:
        _put(out, path, [] if isinstance(_get(out, path), list) else "")
    return out


def _cut(container: dict[str, Any], budget: int, whole: str | None) -> dict[Path, list[Any]]:
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
                _text_chunks(value, share)
                if isinstance(value, str)
                else _chunks(value, share, whole)
            )
            room -= share
    return out


def page_of(
    container: dict[str, Any],
    budget: int,
    page: int = 1,
    *,
    whole: str | None = None,
    root: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Page ``page`` (from 1) of ``container``'s lists and long texts within
    ``budget`` bytes, and the note that says so (None when it fits whole on
    one page): per part, its ``total`` (elements, or a text's characters),
    the ``first`` shown (from 1) and how many are ``shown``. A page past the
    last is bad input. ``whole``: the address that shows an element cut to
    fit whole (unless it has its own); parts under ``root`` are named
    without it (an item's payload lists are ``passages``, not
    ``payload.passages``)."""
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise BadInput(f"page must be a whole number from 1, got {page!r}")
    if json_bytes(container) <= budget:
        if page > 1:
            raise BadInput(f"page {page} is past the last page (1): it fits in one answer")
        return container, None
    cut = _cut(container, budget, whole)
    pages = max((len(c) for c in cut.values()), default=1)
    if page > pages:
        raise BadInput(f"page {page} is past the last page ({pages})")
    shown = _without(container, list(cut))
    lists: dict[str, dict[str, int]] = {}
    for path, chunks in cut.items():
        before = sum(len(c) for c in chunks[: page - 1])
        part = chunks[page - 1] if page <= len(chunks) else chunks[0][:0]
        _put(shown, path, part)
        total = sum(len(c) for c in chunks)
        name = path[1:] if root is not None and path[0] == root and len(path) > 1 else path
        lists[".".join(name)] = {"total": total, "first": before + 1, "shown": len(part)}
    note: dict[str, Any] = {"page": page, "pages": pages, "lists": lists}
    if page < pages:
        note["next"] = {"page": page + 1}
    return shown, note


def page_answer(
    data: dict[str, Any], budget: int, page: int = 1, **next_args: Any
) -> dict[str, Any]:
    """``data`` with its own lists paged (an item's: its payload's and its
    resolution's), the note as ``paged``; ``next_args`` join the note's
    ``next`` (what else to pass to get the next page, such as the item's
    ``address``)."""
    whole = next_args.get("address") or data.get("address")
    whole = whole if isinstance(whole, str) else None
    if isinstance(data.get("payload"), dict):
        container: dict[str, Any] = {"payload": data["payload"]}
        if isinstance(data.get("resolution"), dict) and data["resolution"]:
            container["resolution"] = data["resolution"]
        shown, note = page_of(container, budget, page, whole=whole, root="payload")
        out = {**data, **shown}
    else:
        out, note = page_of(data, budget, page, whole=whole)
    if note is None:
        return data
    if "next" in note:
        note["next"] = {**next_args, **note["next"]}
    out["paged"] = note
    return fit(out, budget + NOTE_BYTES, whole)


def first_page(
    data: dict[str, Any], budget: int, address: str | None, rest: str = ""
) -> dict[str, Any]:
    """A write's answer within ``budget``: its lists' first page, and where
    the rest is (``get`` of ``address``, page by page). With no address
    (nothing was recorded to read back) there is no ``next``: the note
    counts what was left out and ``rest`` says so."""
    out = page_answer(data, budget, 1)
    paged = out.get("paged")
    if isinstance(paged, dict) and "next" in paged:
        if address is None:
            del paged["next"]
            paged["rest"] = rest
        else:
            paged["next"] = {"get": address}
    return out


def fit(data: Any, budget: int, whole: str | None = None) -> Any:
    """The last guard of every answer: ``data`` itself when its JSON fits
    ``budget`` bytes, else cut to fit (:func:`shrink`: its largest texts and
    lists first, each recorded in ``cut`` with where to read it whole)."""
    if json_bytes(data) <= budget:
        return data
    if whole is None and isinstance(data, dict) and isinstance(data.get("address"), str):
        whole = data["address"]
    return shrink(data, budget, whole)
