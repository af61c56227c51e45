"""The page as structured output: the JSON schema a server constrains the
model's answer to (a title, sections of sentences each with the refs of the
passages it draws on, the facts) and that answer rendered into the Markdown
page the checks read, markers and all."""

from __future__ import annotations

import json
from typing import Any

from memors_core.domain.text import SPACED_MARKERS

from .answer import strip_thinking, unfence
from .errors import ItemFailed, short

#: At most this many passages cited by one sentence (the checks' window).
MAX_CITES = 3


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    # OpenAI's strict mode wants every property required and no others.
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def page_schema(refs: list[int]) -> dict[str, Any]:
    """The schema of one item's page: its cites may name only ``refs``, the
    passages its prompt showed, and at most three per sentence."""
    ref: dict[str, Any] = {"type": "integer", "enum": sorted(set(refs))}
    cites = {"type": "array", "items": ref, "minItems": 1, "maxItems": MAX_CITES}
    sentence = _object({"text": {"type": "string"}, "cites": cites})
    section = _object(
        {"heading": {"type": "string"}, "sentences": {"type": "array", "items": sentence}}
    )
    return _object(
        {
            "title": {"type": "string"},
            "sections": {"type": "array", "items": section},
            "facts": {"type": "array", "items": {"type": "string"}},
        }
    )


def _not_structured(why: str) -> ItemFailed:
    return ItemFailed(f"the answer is not the page as JSON: {why}", code="not-structured")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _not_structured(f"{where} is not a string")
    return " ".join(value.split())


def _sentence(obj: Any) -> str:
    """One sentence with its markers before its closing punctuation."""
    if not isinstance(obj, dict):
        raise _not_structured("a sentence is not an object")
    text = SPACED_MARKERS.sub("", _text(obj.get("text"), "a sentence's text")).strip()
    cites = obj.get("cites")
    if not isinstance(cites, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) for c in cites
    ):
        raise _not_structured("a sentence's cites are not a list of passage refs")
    markers = "".join(f"[{c}]" for c in dict.fromkeys(cites))
    if not text or not markers:
        return text
    if text[-1] in ".!?":
        return f"{text[:-1].rstrip()} {markers}{text[-1]}"
    return f"{text} {markers}."


def _sections(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _not_structured("sections is not a list")
    blocks = []
    for section in value:
        if not isinstance(section, dict) or not isinstance(section.get("sentences"), list):
            raise _not_structured("a section has no list of sentences")
        heading = _text(section.get("heading", ""), "a heading").lstrip("#").strip()
        sentences = [s for s in map(_sentence, section["sentences"]) if s]
        if heading and sentences:
            blocks.append(f"## {heading}")
        if sentences:
            blocks.append(" ".join(sentences))
    return blocks


def render_page(answer: str) -> tuple[str, str]:
    """The title and Markdown body of a structured answer, or ItemFailed
    (code ``not-structured``) when it is not that JSON."""
    text = unfence(strip_thinking(answer).strip())
    try:
        obj = json.loads(text)
    except ValueError:
        raise _not_structured(f"it does not parse ({short(text, 40)!r})") from None
    if not isinstance(obj, dict):
        raise _not_structured("it is not a JSON object")
    title = _text(obj.get("title"), "the title").lstrip("#").strip()
    if not title:
        raise _not_structured("the title is empty")
    blocks = _sections(obj.get("sections"))
    facts = obj.get("facts", [])
    if not isinstance(facts, list):
        raise _not_structured("facts is not a list")
    bullets = [f"- {t}" for t in (_text(f, "a fact") for f in facts) if t]
    if bullets:
        blocks.extend(["## Facts", "\n".join(bullets)])
    if not blocks:
        raise ItemFailed("the answer has a title but no page body", code="bad-answer")
    return title, "\n\n".join(blocks) + "\n"
