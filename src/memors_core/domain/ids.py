"""Identifiers and addresses.

Stored things are named ``memo://<type>/<id>``; ids are UUIDv7 (time ordered,
lowercase, dashed), except work items whose ids are small integers.
"""

from __future__ import annotations

import os
import re
import threading
import time

from memors_core.errors import BadAddress

TYPES = ("document", "passage", "entity", "fact", "page", "item")

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_ADDRESS = re.compile(r"memo://([a-z]+)/(.+)")
_UUID_RE = re.compile(_UUID)
_ITEM_RE = re.compile(r"[0-9]{1,18}")

_lock = threading.Lock()
_last = [0, 0]  # last millisecond, counter within it


def uuid7() -> str:
    """A UUIDv7 string; monotonic within this process (a counter in rand_a)."""
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last[0]:
            ms = _last[0]
            _last[1] += 1
            if _last[1] > 0xFFF:  # counter exhausted: borrow the next millisecond
                ms += 1
                _last[1] = 0
        else:
            _last[1] = int.from_bytes(os.urandom(2), "big") & 0x3FF
        _last[0] = ms
        counter = _last[1]
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def address(kind: str, ident: str | int) -> str:
    return f"memo://{kind}/{ident}"


#: The types of address the web view has a page for (all of them).
WEB_TYPES = ("document", "passage", "fact", "entity", "page", "item")


def web_path(address: str, namespace: str) -> str:
    """Where the web view (``memors-mcp serve --http``) shows ``address``:
    ``memo://page/ID`` in namespace ``default`` is ``/ns/default/page/ID``."""
    from urllib.parse import quote

    m = _ADDRESS.fullmatch(address or "")
    if not m or m.group(1) not in WEB_TYPES:
        return f"/ns/{quote(namespace, safe='')}/"
    return f"/ns/{quote(namespace, safe='')}/{m.group(1)}/{quote(m.group(2), safe='')}"


def parse_address(text: object, *, expect: tuple[str, ...] | None = None) -> tuple[str, str]:
    """Split an address into (type, id), or raise :class:`BadAddress`.

    A bare integer (``42``) is accepted as a work item's address.
    """
    if not isinstance(text, str):
        raise BadAddress(f"an address must be a string like memo://fact/<id>, not {text!r}")
    raw = text.strip()
    if _ITEM_RE.fullmatch(raw):
        kind, ident = "item", str(int(raw))
    else:
        m = _ADDRESS.fullmatch(raw)
        if not m:
            shown = raw if len(raw) <= 80 else raw[:77] + "..."
            raise BadAddress(
                f"malformed address {shown!r}: expected memo://<type>/<id> "
                f"with type one of {', '.join(TYPES)}"
            )
        kind, ident = m.group(1), m.group(2)
        if kind not in TYPES:
            raise BadAddress(
                f"unknown address type {kind!r} in {raw!r}: expected one of {', '.join(TYPES)}"
            )
        if kind == "item":
            if not _ITEM_RE.fullmatch(ident):
                raise BadAddress(f"malformed item address {raw!r}: item ids are integers")
            ident = str(int(ident))
        elif not _UUID_RE.fullmatch(ident):
            raise BadAddress(f"malformed address {raw!r}: the id must be a lowercase UUIDv7")
    if expect is not None and kind not in expect:
        raise BadAddress(f"{raw!r} is a {kind} address; expected a {' or '.join(expect)} address")
    return kind, ident
