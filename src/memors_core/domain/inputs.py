"""Checks of what a caller hands in: one-line errors, before anything is stored."""

from __future__ import annotations

import re

from memors_core.domain import text, valid_text
from memors_core.errors import BadInput
from memors_core.settings import FIELD_SETTING

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``memors-mcp search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from memors_core.settings import Limits

NAMESPACE_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
METADATA_DEPTH = 64


def check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace):
        shown = repr(namespace) if not isinstance(namespace, str) else repr(namespace[:70])
        raise BadInput(f"bad namespace {shown}: use 1-64 letters, digits, '-', '_' or '.'")
    return namespace


def field_value(text: str) -> Any:
    """A resolution field given as text (``submit --set KEY=VALUE``, the web
    view's form for any kind): its JSON value when it parses, else the text."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare word is a string


def resolution_object(text: str, name: str) -> dict[str, Any]:
    """A whole resolution given as JSON text (``name`` says where, in errors):
    a JSON object, or :class:`BadInput` in one line."""
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{name} is not valid JSON ({getattr(exc, 'msg', exc)})") from None
    if not isinstance(value, dict):
        raise BadInput(f"{name} must be a JSON object")
    return value


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels
    (counted without recursion, so any depth can be asked about)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def opt_str(value: Any, field: str, limit: int, setting: str = "") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInput(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise BadInput(
            f"{field} is too long ({len(value)} characters; at most {limit}"
            f"{', ' + setting if setting else ''})"
        )
    why = valid_text.problem(value)  # e.g. undecodable bytes in a command-line argument
    if why:
        raise BadInput(f"{field} is not valid text ({why})")
    return value


def req_str(value: Any, field: str, limit: int, setting: str = "") -> str:
    out = opt_str(value, field, limit, setting)
    if out is None or not out.strip():
        raise BadInput(f"{field} must not be empty")
    return out


def check_document(
    limits: Limits, text_: Any, uri: Any, title: Any, entities: Any, metadata: Any
) -> tuple[str, str | None, str | None, list[str], dict]:
    if not isinstance(text_, str):
        raise BadInput(f"text must be a string, got {type(text_).__name__}")
    size = len(text_.encode("utf-8", "surrogatepass"))
    if size > limits.document_bytes:
        raise BadInput(
            f"document too large ({size} bytes; the limit is {limits.document_bytes}, "
            "set MEMORS_MAX_DOCUMENT_BYTES to change it)"
        )
    if "\x00" in text_:
        raise BadInput("text contains NUL characters (binary data is not text)")
    try:
        text_.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("text contains unpaired surrogates (not valid Unicode)") from None
    if not text_.strip():
        raise BadInput("text is empty: there is nothing to remember")
    uri = opt_str(uri, "uri", limits.field_chars, FIELD_SETTING)
    title = opt_str(title, "title", limits.field_chars, FIELD_SETTING)
    if title is None:  # a Markdown document's first `# Heading`
        title = text.first_heading(text_, min(500, limits.field_chars))
    if entities is None:
        entities = []
    if isinstance(entities, str):
        entities = [entities]
    if not isinstance(entities, list | tuple):
        raise BadInput("entities must be a list of names")
    names = [req_str(e, "an entity name", 200) for e in entities]
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise BadInput("metadata must be a JSON object")
    if nested_deeper_than(metadata, METADATA_DEPTH):
        # Deeper would be stored, then fail every read (recursion limits).
        raise BadInput(f"metadata is nested too deeply (at most {METADATA_DEPTH} levels)")
    bad = valid_text.first_problem(metadata, "metadata")
    if bad:
        raise BadInput(bad)
    try:
        import json

        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"metadata must be plain JSON: {exc}") from None
    return text_, uri, title, names, metadata
