"""The chat messages for one page or stale item, within a passage budget, the
sampling options they are sent with, and the follow-up turn that asks the
model to fix what the checks flagged."""

from __future__ import annotations

import re
from typing import Any

from memors_core.domain.text import SPACED_MARKERS, citation_refs

#: Passage text put into one prompt, at most (about 8k tokens); a larger
#: item's page cites only the passages its prompt showed.
PASSAGE_BUDGET = 24_000
PREVIOUS_PAGE_BUDGET = 12_000
NUM_PREDICT = 4096

# The rules of SPEC §5 as a model must follow them: cite with markers, keep to
# the cited passages' words and specifics, state every fact.
_INTRO = """\
You write one page of a knowledge base about one subject, using only the source \
material in the user's message: numbered passages and recorded facts. Every page is \
checked by a program before it is stored, so follow these rules exactly.

1. Use only what the passages and facts say. Add nothing from your own knowledge: no \
background, no opinions, no advice, no introduction, no conclusion, no remarks about \
the sources, the page or these instructions.
"""

# The rules that say how the page is written down: as Markdown with markers,
# or as the JSON object of structured output (:mod:`.structured`).
_MARKDOWN_RULES = """\
2. Write each sentence in the words of the passages it draws on (copying a passage's \
sentence word for word is fine), and end it with their markers: a passage's ref in \
square brackets, before the full stop, as in "Raft elects a leader [2]." A sentence \
may combine at most three passages and must cite each of them: "... [1][3]." Every \
number, date and name in a sentence must appear in the passages it cites.
3. State every recorded fact, if any are listed. Put them in a section "## Facts" as a \
bulleted list, one fact per bullet and no marker, written as the subject, the \
predicate and the value with their words exactly as given (you may add small words \
like "is", "was" or "the"): the fact "X | designed by | Y" becomes the bullet \
"- X was designed by Y."
4. Cover what the passages say, briefly; group it under short "## " headings if that \
helps. Do not name the passages or facts in words (no "passage 2", no "F1").
5. Answer in Markdown and nothing else. The first line is "# " followed by the page \
title (the subject's name), then a blank line, then the page body. No code fences \
around the page, no JSON, no text before or after the page.
"""

_JSON_RULES = """\
2. Write each sentence in the words of the passages it draws on (copying a passage's \
sentence word for word is fine), and list their refs in the sentence's "cites": \
{"text": "Raft elects a leader.", "cites": [2]}. A sentence may combine at most three \
passages and must cite each of them: "cites": [1, 3]. Every number, date and name in \
a sentence must appear in the passages it cites. Put no markers in the text.
3. State every recorded fact, if any are listed, in "facts": one string per fact, \
written as the subject, the predicate and the value with their words exactly as given \
(you may add small words like "is", "was" or "the"): the fact "X | designed by | Y" \
becomes "X was designed by Y."
4. Cover what the passages say, briefly, in "sections": each a short "heading" (or "" \
for none) and its "sentences". Do not name the passages or facts in words (no \
"passage 2", no "F1").
5. Answer with one JSON object and nothing else: {"title": the page title (the \
subject's name), "sections": [{"heading": "...", "sentences": [{"text": "...", \
"cites": [1]}]}], "facts": ["..."]}.
"""

_OUTRO = """\
6. Do not think out loud and do not write a <think> block: answer with the page \
directly.
7. Write in the language of the passages."""


def system_prompt(structured: bool) -> str:
    """The rules, with the page written as Markdown or as structured JSON."""
    return _INTRO + (_JSON_RULES if structured else _MARKDOWN_RULES) + _OUTRO


SYSTEM_PROMPT = system_prompt(structured=False)

STALE_RULES = """\
This page already exists and needs an update: the previous version is below, without \
its citation markers (they used an older numbering). Keep what the current passages \
and facts still say, drop every statement that only the forgotten or superseded \
passages supported, and add what the new passages say. Cite the current passages by \
their ref. Answer with the complete new page, not with a list of changes."""

# A run of citation markers, as memors reads them (``[1]``, ``[1, 3]``,
# ``[1][3]``, ``[memo://passage/ID]``), with the blanks before it: taken out
# of a previous page, whose numbers named the passages of an older payload.


def _one_line(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split())


def _fence_safe(text: str, tag: str) -> str:
    return text.replace(f"</{tag}>", f"</ {tag}>")


def passage_refs(payload: dict[str, Any]) -> dict[str, int]:
    """Each payload passage's address -> its ``ref``, the number a marker uses."""
    passages = payload.get("passages") or []
    return {p["address"]: int(p.get("ref") or n) for n, p in enumerate(passages, 1)}


def fact_labels(payload: dict[str, Any]) -> dict[str, str]:
    """Each payload fact's address -> its label in the prompt (``F1``, …)."""
    return {f.get("address"): f"F{n}" for n, f in enumerate(payload.get("facts") or [], 1)}


def _renumbered(previous: str, refs: dict[str, int]) -> str:
    """A previous page without its markers: a number named a passage of an
    older payload; a passage address still in the payload becomes its ref."""

    def marker(m: re.Match[str]) -> str:
        kept = [refs[r] for r in citation_refs(m.group(0)) if r in refs]
        return f" [{', '.join(map(str, dict.fromkeys(kept)))}]" if kept else ""

    return SPACED_MARKERS.sub(marker, previous)


def build_prompt(
    item: dict[str, Any], structured: bool = False
) -> tuple[list[dict[str, str]], list[str] | None, int]:
    """The chat messages for one page or stale item, the passages the page
    will cite (None: all of the payload's) and how many passages were shown.
    Passages are shown with their payload ``ref``, the number the page's
    markers use. ``structured``: the page is asked for as JSON."""
    payload = item["payload"]
    entity = payload.get("entity") or {}
    name = _one_line(entity.get("name")) or "the subject"
    aliases = [_one_line(a) for a in entity.get("aliases") or [] if _one_line(a)]
    passages = payload.get("passages") or []
    refs = passage_refs(payload)
    stale = isinstance(payload.get("page"), dict)  # it rewrites the page it holds
    changes = payload.get("changes") or []

    out = [f"Subject: {name}" + (f" (also known as: {', '.join(aliases)})" if aliases else "")]
    out.append("")
    shown = _passages_section(out, passages, refs, changes)
    out.append("")
    _facts_section(out, payload.get("facts") or [], name)
    system = system_prompt(structured)
    if stale:
        system = f"{system}\n\n{STALE_RULES}"
        _previous_page_section(out, payload.get("page") or {}, refs, changes)
    out.append("")
    if structured:
        out.append(f'Write the page about {name} now, titled "{name}".')
    else:
        out.append(f'Write the page about {name} now. Start with the line "# {name}".')
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(out)},
    ]
    cites = None if len(shown) == len(passages) else shown
    return messages, cites, len(shown)


def _passages_section(
    out: list[str],
    passages: list[dict[str, Any]],
    refs: dict[str, int],
    changes: list[dict[str, Any]],
) -> list[str]:
    """The passages, within :data:`PASSAGE_BUDGET` (the first always), a new
    one marked so; returns the addresses shown."""
    new = {c.get("address") for c in changes if c.get("change") == "new"}
    out.append("PASSAGES (the only text you may draw on; cite each by its ref):")
    shown: list[str] = []
    used = 0
    for p in passages:
        text = str(p.get("text", "")).strip()
        if shown and used + len(text) > PASSAGE_BUDGET:
            break
        used += len(text)
        shown.append(p["address"])
        status = ' status="new"' if p.get("address") in new else ""
        out.append(
            f'<passage ref="{refs[p["address"]]}"{status}>\n'
            f"{_fence_safe(text, 'passage')}\n</passage>"
        )
    if len(shown) < len(passages):
        out.append(f"({len(passages) - len(shown)} more passages left out for length.)")
    return shown


def _facts_section(out: list[str], facts: list[dict[str, Any]], name: str) -> None:
    if facts:
        out.append("FACTS (state every one of them, keeping their words):")
        for n, f in enumerate(facts, 1):
            out.append(
                f"F{n}: {_one_line(f.get('subject') or name)} | {_one_line(f.get('predicate'))} "
                f"| {_one_line(f.get('value'))}"
            )
    else:
        out.append("FACTS: none recorded (write no Facts section).")


def _previous_page_section(
    out: list[str], page: dict[str, Any], refs: dict[str, int], changes: list[dict[str, Any]]
) -> None:
    """For a stale item: the page it rewrites (its markers renumbered) and what changed."""
    previous = _renumbered(str(page.get("content", "")), refs).strip()
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


def chat_options(messages: list[dict[str, str]]) -> dict[str, Any]:
    """Sampling and context for one prompt: deterministic, and a context
    window large enough that Ollama does not silently cut the prompt."""
    tokens = sum(len(m["content"]) for m in messages) // 3 + NUM_PREDICT
    num_ctx = next((n for n in (8192, 16384, 32768) if n >= tokens), 32768)
    return {"temperature": 0, "num_ctx": num_ctx, "num_predict": NUM_PREDICT}


# --- the follow-up turn: what the checks flagged, for one revision ---------------------------

REVISION_HEAD = (
    "The program's checks refused this page, so it was not stored. Fix what they "
    "flagged below and answer with the complete corrected page, in the same format "
    "({form}), keeping every sentence that was not flagged."
)


def _revision_head(title: str, structured: bool) -> str:
    form = "the same JSON object" if structured else f'first line "# {_one_line(title)}"'
    return REVISION_HEAD.format(form=form)


REVISION_TAIL = "Use only the passages and facts above. Answer with the page and nothing else."

_CLASS_TEXT = {"number": "the number", "date": "the date", "time": "the time", "name": "the name"}


def _sources(addresses: Any, refs: dict[str, int], facts: dict[str, str]) -> str:
    """Addresses as the model knows them: passages as ``[2]``, facts as ``F1``."""
    if addresses is None:
        return "none"
    items = [addresses] if isinstance(addresses, str) else list(addresses)
    shown = [f"[{refs[a]}]" if a in refs else facts.get(a, str(a)) for a in items]
    return ", ".join(shown) if shown else "none"


def _flag_advice(
    check: str, flag: dict[str, Any], payload: dict[str, Any], refs: dict[str, int]
) -> list[str]:
    facts = fact_labels(payload)
    sentence = flag.get("sentence")
    if check == "corruption" and sentence is not None:
        share = f"{float(flag.get('overlap') or 0):.0%}"
        best = flag.get("best_source")
        missing = ", ".join(flag.get("missing") or []) or "none"
        where = (
            f"the passages it cites, {_sources(best, refs, facts)}; in none of them"
            if isinstance(best, list) and len(best) > 1
            else f"its closest source, {_sources(best, refs, facts)}; not there"
        )
        return [
            f'- Sentence: "{sentence}"',
            f"  Only {share} of its content words are in {where}: {missing}.",
            "  Change: write it in the words of the passages it draws on and end it with "
            "the marker of each (at most three, e.g. [1][3]), or split it into one sentence "
            "per passage; leave out what no passage says.",
        ]
    if check == "substitution" and sentence is not None:
        what = _CLASS_TEXT.get(str(flag.get("class")), str(flag.get("class") or "the token"))
        return [
            f'- Sentence: "{sentence}"',
            f'  {what.capitalize()} "{flag.get("token")}" is in none of its sources '
            f"({_sources(flag.get('window'), refs, facts)}).",
            f"  Change: write {what} exactly as a passage it cites gives it, cite the "
            "passage that gives it, or leave it out.",
        ]
    if check == "omission" and "fact" in flag:
        fact = next((f for f in payload.get("facts") or [] if f.get("address") == flag["fact"]), {})
        label = facts.get(flag["fact"], str(flag["fact"]))
        stated = " | ".join(_one_line(fact.get(k)) for k in ("subject", "predicate", "value"))
        share = f"{float(flag.get('coverage') or 0):.0%}"
        return [
            f"- Fact {label} ({stated}) is missing: only {share} of its words are on the page.",
            '  Change: state it as a bullet in the "## Facts" list, with its words as given.',
        ]
    return [f"- {check}: " + ", ".join(f"{k}={v}" for k, v in flag.items())]


def revision_request(
    item: dict[str, Any], title: str, checks: dict[str, Any], structured: bool = False
) -> str:
    """The follow-up user message after a refusal: each flag in words the
    model can act on (the sentence, what is missing or which token is in
    none of which sources, what to change), passages named by their ref."""
    payload = item["payload"]
    refs = passage_refs(payload)
    lines = [_revision_head(title, structured), ""]
    for name, check in checks.items():
        if check.get("passed", True):
            continue
        for flag in check.get("flagged") or []:
            lines.extend(_flag_advice(name, flag, payload, refs))
    lines.extend(["", REVISION_TAIL])
    return "\n".join(lines)


def bad_input_request(title: str, message: str, structured: bool = False) -> str:
    """The follow-up user message after a page was refused as bad input
    (a marker naming no passage, …)."""
    return "\n".join(
        [
            _revision_head(title, structured),
            "",
            f"- {message}",
            "",
            REVISION_TAIL,
        ]
    )
