"""What an unfinished purge's stored state must look like before memors acts on it.

A purge records, with its audit row (``purges``), the finishing steps its
engine still has to run (``purge_pending``); every command that opens the
store for writing runs them. Those rows drive heavy work (a VACUUM of the
file, a rewrite of every table), so they are read as untrusted input: an
entry memors could not have written is skipped, and lint names it, rather
than failing every command or rewriting the store for nothing.
"""

from __future__ import annotations

import json

from memors_core.domain.ids import parse_address
from memors_core.errors import BadAddress

#: What purge erases (the address types an audit row may name).
PURGED_TYPES = ("document", "passage", "fact", "page")

#: Up to how many characters of a bad value a reason quotes.
_SHOWN = 40


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def read_steps(raw: object, order: tuple[str, ...], *, legacy_prefix: str = "") -> list[str]:
    """The finishing steps a ``purge_pending`` entry names, checked.

    Memors records every step of ``order`` and drops each as it runs, in
    order, deleting the entry with the last: what it leaves is always the
    last n steps of ``order`` (n at least 1), in order. ``legacy_prefix``
    (SQLite: ``"fts"``) also reads ``fts:<index>`` entries, one per search
    index, as written before SQLite schema 6, as that one step. Anything
    else raises :class:`ValueError` with the reason (one phrase).
    """
    if not isinstance(raw, str):
        raise ValueError(f"its steps are not text ({_shown(raw)})")
    try:
        steps = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"its steps are not JSON ({_shown(raw)})") from None
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise ValueError(f"its steps are not a list of names ({_shown(raw)})")
    read: list[str] = []
    for step in steps:
        legacy = bool(legacy_prefix) and step.startswith(legacy_prefix + ":")
        if legacy:
            step = legacy_prefix
        if step not in order:
            raise ValueError(
                f"it names a step this engine does not have ({_shown(step)}; "
                f"its steps are {', '.join(order)})"
            )
        if step in read and not (legacy and read[-1] == step):
            raise ValueError(f"it names the step {step} twice")
        if step not in read:
            read.append(step)
    if not read or tuple(read) != order[len(order) - len(read) :]:
        raise ValueError(
            f"its steps ({', '.join(read) or 'none'}) are not what a purge leaves "
            f"(the last of {', '.join(order)}, in that order)"
        )
    return read


def check_audit(target: object, erased: object) -> str:
    """The purged address of an audit row, checked: a document, passage,
    fact or page address that its list of erased addresses (JSON) names.
    Anything else raises :class:`ValueError` with the reason."""
    try:
        parse_address(target, expect=PURGED_TYPES)
    except BadAddress:
        raise ValueError(f"its audit row names no purgeable address ({_shown(target)})") from None
    assert isinstance(target, str)
    try:
        listed = json.loads(erased) if isinstance(erased, str) else None
    except (ValueError, RecursionError):
        listed = None
    if not isinstance(listed, list) or target not in listed:
        raise ValueError(f"its audit row does not list {target} among what it erased")
    return target
