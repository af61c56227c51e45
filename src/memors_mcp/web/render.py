"""What the web view computes from the store's views before a template shows
them: URLs of addresses, a page's Markdown with each sentence linked to its
sources, diffs as lines, a fact timeline, the five metrics of a namespace.

Nothing here writes HTML by hand except :func:`page_html`, which renders
Markdown with raw HTML turned off (so a page's ``<script>`` is text) and
escapes every value it adds itself.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

from memors_core.domain.text import SPACED_MARKERS

_ADDRESS = re.compile(r"memo://([a-z]+)/([^\s\"'<>]+)")
_WORD = re.compile(r"[^\W_]+")
# After a sentence's last word: closing emphasis, quotes, brackets and its stop.
_TAIL = re.compile(r"[*_`\"'’”)\]]*[.!?:;,]?[*_`\"'’”)]*")
#: Where the character that marks a sentence's end is drawn from: the Private Use Areas.
_PRIVATE = (range(0xE000, 0xF900), range(0xF0000, 0xFFFFE), range(0x100000, 0x10FFFE))


def clip(text: str | None, n: int) -> str:
    """``text`` cut to at most ``n`` characters, ``…`` marking the cut."""
    text = text or ""
    return text if len(text) <= n else text[: n - 1] + "…"


def short(address: str) -> str:
    """``memo://passage/01a2…c09d8`` -> ``passage …c09d8``: a label a person can scan."""
    m = _ADDRESS.fullmatch(address or "")
    if not m:
        return address or ""
    ident = m.group(2)
    return f"{m.group(1)} {ident if len(ident) <= 8 else '…' + ident[-6:]}"


# --- a page's Markdown, each sentence linked to what it cites ---------------------


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # "commonmark" with raw HTML off: a page's <script> or <img onerror> is shown
    # as text. Tables are on; links keep markdown-it's own URL check
    # (javascript:, vbscript:, data: other than images are refused).
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


_MD: Any = None


def markdown_html(text: str) -> str:
    """Markdown rendered to HTML, raw HTML escaped."""
    global _MD
    if _MD is None:
        _MD = _markdown()
    return _MD.render(text)


def _sentence_ends(content: str, sentences: Sequence[str]) -> list[int | None]:
    """Where each sentence ends in ``content`` (an offset), found by its words
    in order; None for one that cannot be placed."""
    tokens = [(m.group(0).casefold(), m.end()) for m in _WORD.finditer(content)]
    ends: list[int | None] = []
    at = 0
    for sentence in sentences:
        wanted = [w.casefold() for w in _WORD.findall(sentence)]
        i, end = at, None
        for word in wanted:
            while i < len(tokens) and tokens[i][0] != word:
                i += 1
            if i == len(tokens):
                end = None
                break
            end = tokens[i][1]
            i += 1
        if end is None or not wanted:
            ends.append(None)
            continue
        tail = _TAIL.match(content, end)
        ends.append(tail.end() if tail else end)
        at = i
    return ends


def page_html(
    content: str,
    sentences: Sequence[tuple[Any, ...]],
    numbers: dict[str, int],
    link: Any,
    title_of: Any,
    entity_link: Any = None,
) -> tuple[str, list[int]]:
    """A page's Markdown as HTML, each recorded sentence followed by links to
    the passages it cites, numbered as in ``numbers`` (address -> n); and the
    indices of the sentences it could not place in the text.

    ``sentences`` are the page's recorded sentences with their sources, in
    order, each ``(text, sources)`` or ``(text, sources, flags)``: a sentence
    with flags (its page was stored over them) is followed not by citation
    links but by an *unverified* mark with the flags' reasons
    (:func:`unverified_html`); ``link(address)`` is a source's URL and ``title_of(address)`` the
    text shown when it is hovered. The citation markers the author wrote are
    replaced by these links (they numbered the payload, not the page).
    With ``entity_link(name)`` (an entity's URL by its name), ``[[Name]]``
    and ``[[Name|label]]`` are links to the entity (:func:`wiki_links`).
    """
    marked = SPACED_MARKERS.sub("", content)
    # A slot is a sentence's number between two of a private-use character the
    # page's text does not hold, so no text can pass for a slot and show
    # another sentence's links.
    mark = _unused(marked)
    if mark is None:  # (a text holding all 137,000 of them: one is shown as �)
        mark = chr(_PRIVATE[0][0])
        marked = marked.replace(mark, "\ufffd")
    ends = _sentence_ends(marked, [s[0] for s in sentences])
    slot = re.compile(f"{re.escape(mark)}(\\d+){re.escape(mark)}")
    pieces: list[str] = []
    last = 0
    for i, end in sorted(((i, e) for i, e in enumerate(ends) if e is not None), key=lambda x: x[1]):
        pieces.append(marked[last:end])
        pieces.append(f"{mark}{i}{mark}")
        last = end
    pieces.append(marked[last:])
    rendered = markdown_html("".join(pieces))
    if entity_link is not None:
        rendered = wiki_links(rendered, entity_link)

    def cites(m: re.Match[str]) -> str:
        i = int(m.group(1))
        flags = sentences[i][2] if len(sentences[i]) > 2 else ()
        if flags:
            return unverified_html(flags, i)
        links = []
        for source in sentences[i][1]:
            n = numbers.get(source)
            label = str(n) if n is not None else short(source)
            links.append(
                f'<a class="cite" href="{html.escape(link(source))}" '
                f'title="{html.escape(title_of(source))}" data-source="{html.escape(source)}">'
                f"{html.escape(label)}</a>"
            )
        if not links:
            return '<sup class="cites uncited" title="no source shares its words">?</sup>'
        return f'<sup class="cites" data-sentence="{i}">{"".join(links)}</sup>'

    return slot.sub(cites, rendered), [i for i, e in enumerate(ends) if e is None]


# In rendered HTML (where markdown-it escaped the text): a [[Name]] or
# [[Name|label]] link, and the code spans and blocks it is left alone in.
_WIKI_HTML = re.compile(r"\[\[([^\[\]|<>\n]+?)(?:\|([^\[\]<>\n]*))?\]\]")
_TAG_HTML = re.compile(r"(<[^>]*>)")
_CODE_TAG = re.compile(r"<(/?)(?:code|pre)\b")


def wiki_links(rendered: str, entity_link: Any) -> str:
    """``[[Name]]`` and ``[[Name|label]]`` in rendered HTML as links to the
    entity (``entity_link(name)`` is its URL), showing the label or the
    name. Only text is read: code, and the attributes of tags, are left
    as written."""

    def one(m: re.Match[str]) -> str:
        name = html.unescape(m.group(1)).strip()
        shown = m.group(2) if m.group(2) and m.group(2).strip() else m.group(1)
        if not name:
            return m.group(0)
        url = html.escape(entity_link(name))
        return f'<a class="wiki" href="{url}" title="entity: {html.escape(name)}">{shown}</a>'

    out = []
    in_code = 0
    for i, part in enumerate(_TAG_HTML.split(rendered)):
        if i % 2:  # a tag
            code = _CODE_TAG.match(part)
            if code:
                in_code = max(in_code + (-1 if code.group(1) else 1), 0)
            out.append(part)
        else:
            out.append(part if in_code else _WIKI_HTML.sub(one, part))
    return "".join(out)


def unverified_html(flags: Sequence[dict[str, Any]], sentence: int | None = None) -> str:
    """The mark an unverified sentence carries instead of citations: a
    label and each flag's check and reason, escaped."""
    reasons = "".join(
        f'<span class="why"><b>{html.escape(str(f.get("check") or ""))}</b>: '
        f"{html.escape(str(f.get('message') or ''))}</span>"
        for f in flags
    )
    at = "" if sentence is None else f' data-sentence="{sentence}"'
    return (
        f'<span class="unverified" role="note"{at}><span class="label" '
        'title="stored over its checks\' flags (force): no source vouches for it">'
        f"unverified</span>{reasons}</span>"
    )


def _unused(text: str) -> str | None:
    """A private-use character that ``text`` does not contain (None: it holds them all)."""
    present = set(text)
    for area in _PRIVATE:
        for code in area:
            if chr(code) not in present:
                return chr(code)
    return None


def without_title(content: str, title: str) -> str:
    """The page's Markdown without a first ``# Title`` line that repeats its
    title (the view shows the title as its heading already)."""
    head, _, rest = content.lstrip("\n").partition("\n")
    if head.startswith("# ") and head[2:].strip().casefold() == (title or "").strip().casefold():
        return rest
    return content


# --- diffs -------------------------------------------------------------------------


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff as ``(class, line)`` pairs: ``add``, ``del``, ``hunk``, ``meta``, ``same``."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "same"
        out.append((cls, line))
    return out


def unified(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified line diff of two texts ("" when they are the same)."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=old_name,
            tofile=new_name,
        )
    )


# --- a fact timeline -------------------------------------------------------------------


def timeline(facts: Iterable[Any], today: str | None = None) -> dict[str, Any]:
    """Facts grouped by predicate, each drawn as a bar over the span of all
    the dated bounds (and today, when a fact is still open): ``left`` and
    ``width`` in whole percent, open ends running to the edge; superseded,
    forgotten and expired facts are marked; facts whose times overlap get
    lanes of their own. Returns ``{"lo", "hi", "rows": [{"predicate",
    "lanes": [[bar…]…]}…]}``."""
    from datetime import UTC, datetime

    facts = list(facts)
    bounds = {b[:10] for f in facts for b in (f.valid_from, f.valid_to) if b and len(b) >= 4}
    if bounds and any(f.valid_to is None for f in facts):
        bounds.add(today or datetime.now(UTC).date().isoformat())
    ordered = sorted(bounds)
    lo, hi = (ordered[0], ordered[-1]) if ordered else (None, None)
    span = max(_days(lo, hi), 1) if lo and hi else 1

    def position(bound: str | None, default: int) -> int:
        if bound is None or lo is None or lo == hi:
            return default
        return round(100 * _days(lo, bound[:10]) / span)

    groups: dict[str, list[dict[str, Any]]] = {}
    for f in facts:
        left = min(max(position(f.valid_from, 0), 0), 98)
        right = min(max(position(f.valid_to, 100), left + 2), 100)
        state = f.status if f.status != "live" else ("expired" if f.expired else "live")
        groups.setdefault(f.predicate, []).append(
            {"fact": f, "state": state, "left": left, "width": right - left}
        )
    rows = [{"predicate": p, "lanes": _lanes(bars)} for p, bars in groups.items()]
    return {"lo": lo, "hi": hi, "rows": rows}


def _lanes(bars: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Bars that overlap in time go on lanes of their own, so none hides another."""
    lanes: list[list[dict[str, Any]]] = []
    for bar in sorted(bars, key=lambda b: (b["left"], b["width"])):
        for lane in lanes:
            last = lane[-1]
            if last["left"] + last["width"] <= bar["left"]:
                lane.append(bar)
                break
        else:
            lanes.append([bar])
    return lanes


def _days(a: str, b: str) -> int:
    from datetime import date

    def parse(s: str) -> date:
        parts = [int(p) for p in re.findall(r"\d+", s)[:3]]
        while len(parts) < 3:
            parts.append(1)
        try:
            return date(*parts)
        except ValueError:
            return date(parts[0], 1, 1)

    return (parse(b) - parse(a)).days
