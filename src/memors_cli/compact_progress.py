"""The progress line of a compaction scan: ``compact`` shows it, and so does
the executor while it finds the items it writes pages for."""

from __future__ import annotations

from typing import Any

from .output import Shown


def compact_line(state: Any) -> Shown:
    """Compaction: the kind that runs, its step with done of total, items created."""
    if isinstance(state, str):
        return Shown(state)
    text = state.phase + (f": {state.step}" if state.step else "")
    unit = "" if state.step.endswith(state.unit) else f" {state.unit}"  # not "items 5 items"
    if state.total is not None and state.done:
        text += f" {state.done:,}/{state.total:,}{unit}"
    elif state.total is not None:  # starting, or a step that cannot count: its size
        text += f" ({state.total:,} {state.unit})"
    elif state.done:
        text += f" {state.done:,}{unit}"
    new = f"{state.created:,} new item{'' if state.created == 1 else 's'}"
    return Shown(f"{text} · {new}", state.done, state.total, state.unit, (state.phase, state.step))
