"""The chat messages for one page or stale item, within a passage budget, and
the sampling options they are sent with."""

from __future__ import annotations

from typing import Any

#: Passage text put into one prompt, at most (about 8k tokens); a larger
#: item's page cites only the passages its prompt showed.
PASSAGE_BUDGET = 24_000
PREVIOUS_PAGE_BUDGET = 12_000
NUM_PREDICT = 4096

SYSTEM_PROMPT = """\
You write one page of a knowledge base about one subject, using only the source \
material in the user's message: numbered passages and recorded facts. Every page is \
checked by a program before it is stored, so follow these rules exactly.

1. Use only what the passages and facts say. Add nothing from your own knowledge: no \
background, no opinions, no advice, no introduction, no conclusion, no remarks about \
the sources, the page or these instructions.
2. Write each sentence from one single passage or one single fact, reusing that \
source's own words (copying a passage's sentence word for word is fine). Never merge \
two passages into one sentence. Do not mention passage or fact labels such as P1 or F1.
3. State every recorded fact, if any are listed. Put them in a section "## Facts" as a \
bulleted list, one fact per bullet, written as the subject, the predicate and the value \
with their words exactly as given (you may add small words like "is", "was" or "the"): \
the fact "X | designed by | Y" becomes the bullet "- X was designed by Y."
4. Cover what the passages say, briefly; group it under short "## " headings if that \
helps.
5. Answer in Markdown and nothing else. The first line is "# " followed by the page \
title (the subject's name), then a blank line, then the page body. No code fences \
around the page, no JSON, no text before or after the page.
6. Do not think out loud and do not write a <think> block: answer with the page \
directly.
7. Write in the language of the passages."""

STALE_RULES = """\
This page already exists and needs an update: the previous version is below. Keep what \
the current passages and facts still say, drop every statement that only the \
forgotten or superseded passages supported, and add what the new passages say. Answer \
with the complete new page, not with a list of changes."""


def _one_line(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split())


def _fence_safe(text: str, tag: str) -> str:
    return text.replace(f"</{tag}>", f"</ {tag}>")


def build_prompt(item: dict[str, Any]) -> tuple[list[dict[str, str]], list[str] | None, int]:
    """The chat messages for one page or stale item, the passages the page
    will cite (None: all of the payload's) and how many passages were shown."""
    payload = item["payload"]
    entity = payload.get("entity") or {}
    name = _one_line(entity.get("name")) or "the subject"
    aliases = [_one_line(a) for a in entity.get("aliases") or [] if _one_line(a)]
    passages = payload.get("passages") or []
    facts = payload.get("facts") or []
    stale = isinstance(payload.get("page"), dict)  # it rewrites the page it holds
    changes = payload.get("changes") or []
    new = {c.get("address") for c in changes if c.get("change") == "new"}

    out = [f"Subject: {name}" + (f" (also known as: {', '.join(aliases)})" if aliases else "")]
    out.append("")
    out.append("PASSAGES (the only text you may draw on):")
    shown: list[str] = []
    used = 0
    for n, p in enumerate(passages, 1):
        text = str(p.get("text", "")).strip()
        if shown and used + len(text) > PASSAGE_BUDGET:
            break
        used += len(text)
        shown.append(p["address"])
        status = ' status="new"' if p.get("address") in new else ""
        out.append(f'<passage id="P{n}"{status}>\n{_fence_safe(text, "passage")}\n</passage>')
    if len(shown) < len(passages):
        out.append(f"({len(passages) - len(shown)} more passages left out for length.)")
    out.append("")
    if facts:
        out.append("FACTS (state every one of them, keeping their words):")
        for n, f in enumerate(facts, 1):
            out.append(
                f"F{n}: {_one_line(f.get('subject') or name)} | {_one_line(f.get('predicate'))} "
                f"| {_one_line(f.get('value'))}"
            )
    else:
        out.append("FACTS: none recorded (write no Facts section).")
    system = SYSTEM_PROMPT
    if stale:
        system = f"{SYSTEM_PROMPT}\n\n{STALE_RULES}"
        page = payload.get("page") or {}
        previous = str(page.get("content", "")).strip()
        if len(previous) > PREVIOUS_PAGE_BUDGET:
            previous = previous[:PREVIOUS_PAGE_BUDGET] + "\n[…]"
        out.append("")
        out.append(
            f"PREVIOUS PAGE (version {page.get('version', '?')}, titled "
            f'"{_one_line(page.get("title"))}"; it may hold statements that are no longer '
            "supported):"
        )
        out.append(f"<previous_page>\n{_fence_safe(previous, 'previous_page')}\n</previous_page>")
        counts: dict[str, int] = {}
        for c in changes:
            counts[c.get("change", "?")] = counts.get(c.get("change", "?"), 0) + 1
        said = []
        if counts.get("new"):
            said.append(f'{counts["new"]} new passage(s), marked status="new" above')
        for change in ("forgotten", "superseded"):
            if counts.get(change):
                said.append(
                    f"{counts[change]} passage(s) the previous page drew on were {change} "
                    "and are no longer sources"
                )
        out.append("WHAT CHANGED: " + ("; ".join(said) if said else "its sources changed") + ".")
    out.append("")
    out.append(f'Write the page about {name} now. Start with the line "# {name}".')
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(out)},
    ]
    cites = None if len(shown) == len(passages) else shown
    return messages, cites, len(shown)


def chat_options(messages: list[dict[str, str]]) -> dict[str, Any]:
    """Sampling and context for one prompt: deterministic, and a context
    window large enough that Ollama does not silently cut the prompt."""
    tokens = sum(len(m["content"]) for m in messages) // 3 + NUM_PREDICT
    num_ctx = next((n for n in (8192, 16384, 32768) if n >= tokens), 32768)
    return {"temperature": 0, "num_ctx": num_ctx, "num_predict": NUM_PREDICT}
