"""A model's answer read as a page: thinking removed, a fence unwrapped, the
``# Title`` line and the Markdown body, or the item fails."""

from __future__ import annotations

import json
import re

from .errors import ItemFailed, short

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_FENCED = re.compile(r"\A(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*)\n\1[ \t]*\Z", re.S)
_TITLE = re.compile(r"\A#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*\Z")


def strip_thinking(text: str) -> str:
    """Remove ``<think>…</think>`` blocks a model may still emit (and a
    thought whose opening tag was in the prompt template: everything up to a
    lone ``</think>``)."""
    text = _THINK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opening = _THINK_OPEN.search(text)
    if opening:  # a thought that never ended: no answer after it
        text = text[: opening.start()]
    return text


def unfence(text: str) -> str:
    """The text inside a fence around the whole of it (any language), else the text."""
    fenced = _FENCED.match(text)
    return fenced.group(3).strip() if fenced else text


def parse_page(answer: str) -> tuple[str, str]:
    """The title and Markdown body of a model's answer, or :class:`ItemFailed`.

    The defined format: first line ``# Title``, then the Markdown body. A
    fence around the whole answer (```markdown … ```) is unwrapped; JSON,
    an empty answer or one without the title line fail the item."""
    text = strip_thinking(answer).strip()
    if not text:
        raise ItemFailed("the model answered nothing (an empty page)", code="bad-answer")
    fenced = _FENCED.match(text)
    if fenced:
        lang = fenced.group(2).lower()
        if lang in ("json", "jsonc", "json5"):
            raise ItemFailed(
                "the model answered JSON, not a Markdown page ('# Title' then the body)",
                code="bad-answer",
            )
        if lang in ("", "markdown", "md"):
            text = fenced.group(3).strip()
    if text[:1] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise ItemFailed(
                "the model answered JSON, not a Markdown page ('# Title' then the body)",
                code="bad-answer",
            )
    first, _, body = text.partition("\n")
    title = _TITLE.match(first.strip())
    if not title:
        raise ItemFailed(
            f"the answer has no title: its first line must be '# Title', got {short(first, 60)!r}",
            code="bad-answer",
        )
    body = body.strip()
    if not body:
        raise ItemFailed("the answer has a title but no page body", code="bad-answer")
    return title.group(1).strip(), body + "\n"
