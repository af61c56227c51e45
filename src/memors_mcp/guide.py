"""What the server tells an agent about the kinds of work items, in the kinds' own words.

Nothing here knows a kind by name: the tool descriptions, the ``compact``
text and the prompt are built from the installed kinds (a plugin's as well
as a built-in one) through :class:`memors_core.plugins.kinds.Kind`'s
``description``, ``instructions``, ``hint`` and :meth:`summary`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memors_core.plugins.kinds import Kind, KindRegistry

#: How long an item's summary may be in ``compact``'s text (as the CLI cuts it).
SUMMARY_CHARS = 120


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if not text or text[-1] in ".!?" else text + "."


def resolve_with(kind: Kind) -> str:
    """How an item of ``kind`` is done: its ``instructions``, else what its
    ``description`` and ``hint`` say."""
    if kind.instructions.strip():
        return _sentence(kind.instructions)
    parts = [kind.description.strip(), f"resolve with {kind.hint}" if kind.hint.strip() else ""]
    return _sentence("; ".join(p for p in parts if p) or "see its payload")


def about(kind: Kind) -> str:
    """``name (description; resolve with hint)``: a kind in a parameter's description."""
    parts = [kind.description, f"resolve with {kind.hint}" if kind.hint else ""]
    parts = [p for p in parts if p]
    return f"{kind.name} ({'; '.join(parts)})" if parts else kind.name


def kinds_guide(kinds: KindRegistry) -> str:
    """How an item of each installed kind is done, for ``compact``'s description
    (what each kind is, :func:`about`, goes with its ``kinds`` argument)."""
    lines = [f"{n}: {resolve_with(k)}" for n in kinds.names() if (k := kinds.get(n)) is not None]
    return " ".join(lines) or "(no kind is installed)"


def item_summary(item: dict[str, Any], kinds: KindRegistry) -> str:
    """One line saying what ``item`` asks for, from its kind's :meth:`Kind.summary`."""
    payload = item.get("payload")
    payload = payload if isinstance(payload, dict) else {}
    kind = kinds.get(item["kind"])
    if kind is None:  # its plugin is disabled or failed to load: the payload's own words
        given = payload.get("summary")
        about_it = given if isinstance(given, str) else ""
    else:
        try:
            about_it = kind.summary(payload)
        except Exception as exc:  # a plugin's bug is named on its line; the answer goes on
            about_it = (
                f"(kind {kind.name} (plugin {kinds.owner(kind.name)}) failed in summary: "
                f"{type(exc).__name__}: {exc})"
            )
        about_it = about_it if isinstance(about_it, str) else ""
    return " ".join(about_it.split())[:SUMMARY_CHARS]
