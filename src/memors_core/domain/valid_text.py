"""Whether a string can be stored as text, on every route in.

Two things cannot: a NUL character (PostgreSQL refuses it in ``text`` and
``jsonb``, and it is binary data, not writing) and a lone surrogate, which
UTF-8 cannot encode. Python makes lone surrogates of the bytes of a command
line or a file name that are not UTF-8 (``surrogateescape``: byte 0xE9 becomes
U+DCE9), and a JSON ``"\\ud800"`` escape decodes to one. Both are refused
before anything is stored, in one line naming where they were.

This module imports nothing, so a quick command can use it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``memors-mcp search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


def problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, in words (to follow "is not
    valid text"), or None when it can."""
    at = value.find("\x00")
    if at >= 0:
        return f"it contains a NUL character, at character {at + 1}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        return f"it contains an unpaired surrogate, U+{code:04X} at character {exc.start + 1}"
    return None


def first_problem(value: Any, where: str) -> str | None:
    """The first string in a JSON-like ``value`` (a key or a value, at any
    depth) that cannot be stored, as ``WHERE.KEY[N] is not valid text (…)``;
    None when there is none. Walked without recursion, so any depth is safe."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            why = problem(item)
            if why:
                return f"{path} is not valid text ({why})"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if isinstance(key, str):
                    why = problem(key)
                    if why:
                        return f"a key of {path} is not valid text ({why})"
                children.append((child, f"{path}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(c, f"{path}[{i}]") for i, c in enumerate(item)]))
    return None
