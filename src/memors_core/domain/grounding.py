"""What a page sentence is grounded in: its citations, its sources, and the
three checks that read them (omission, corruption, substitution; SPEC §5).

A page is read once into :class:`Cited` sentences (text, role, the passage
addresses its markers name). Its *sources* are its cited passages and the
subject's live facts, each a :class:`Source` with its content words and its
:class:`~memors_core.domain.specifics.Profile`. Everything here reads only
the item's payload (and the per-passage profiles the store keeps), so a page
is judged against exactly what its author could see.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from functools import lru_cache
from typing import Any, NamedTuple

from memors_core.domain.model import CheckResult
from memors_core.domain.specifics import (
    Profile,
    english_words,
    profile,
    sentence_specifics,
)
from memors_core.domain.text import check_words, content_words, read_page, stem, stop_words
from memors_core.errors import BadInput

OMISSION_THRESHOLD = 0.75
CORRUPTION_THRESHOLD = 0.5
#: A cited sentence is compared with the union of at most this many of its passages.
UNION_LIMIT = 3
#: An uncited sentence's specifics are looked for in its best-aligned sources:
#: at most WINDOW_SIZE of them, each aligning at least WINDOW_SHARE as well as the best.
WINDOW_SIZE = 8
WINDOW_SHARE = 0.85
#: A name's short form ("Eva" for "Evangeline") is at most this much shorter.
SHORT_FORM_SPAN = 8
#: How to cite, and what each check asks of a page: the few lines an agent
#: reads before it writes (the MCP ``submit`` tool, the compaction prompt, the
#: executor's prompt and docs/compaction.md say this).
WRITING_RULES = (
    "Cite: end each sentence with markers naming the payload passages it draws on, [n] "
    "for the passage whose `ref` is n, several as [1][3] or [1, 3]. "
    "`corruption`: at least half of a sentence's content words must be in the passages it "
    "cites (at most three together), or, uncited, in one single source; a flag names "
    "`best_source` and the `missing` words. "
    "`substitution`: every number, date, relative time and name a sentence states must be in "
    "its cited passages (uncited: the sources it matches best), the subject's names or the "
    "facts; a flag names the `token` and the `window` it was looked for in. "
    "`omission`: state each fact's predicate and value (75% of their words). "
    "A `stale` item keeps the previous page's numbers; `citations` flags a marker naming a "
    "passage gone since (drop or re-cite that sentence)."
)
_MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


class Cited(NamedTuple):
    """A page sentence: its text, role (``prose``, ``heading``, ``header``)
    and the addresses its citation markers name (empty: none); ``lost``:
    its markers that name a passage forgotten or superseded since the
    previous page version (a stale item's ``changes``), as ``(marker,
    address)``."""

    text: str
    role: str
    cites: tuple[str, ...]
    lost: tuple[tuple[str, str], ...] = ()


class Source(NamedTuple):
    """One source a sentence may draw on: a payload passage or a fact."""

    address: str
    words: frozenset[str]  # content words (stems)
    profile: Profile | None  # None where only the words are needed


# --- citations ------------------------------------------------------------------


def read_citations(content: str, payload: dict[str, Any]) -> list[Cited]:
    """The page's sentences with their markers resolved to passage addresses.

    ``[n]`` names the payload's n-th passage (its ``ref``), and
    ``[memo://passage/ID]`` a payload passage by address; a marker naming
    no passage of the payload is :class:`BadInput` naming the marker. (A
    submission reads its page here three times — validation and two check
    plugins — so the last few answers are kept.)
    """
    passages = payload.get("passages") or []
    refs = tuple((int(p.get("ref") or i), p["address"]) for i, p in enumerate(passages, 1))
    return list(_read_citations(content, refs, lost_refs(payload)))


def lost_refs(payload: dict[str, Any]) -> tuple[tuple[int | None, str], ...]:
    """The passages a stale item's previous page cited that are forgotten or
    superseded since (its ``changes``): ``(ref, address)``, ``ref`` the
    number the previous page's markers gave it (None if it had none)."""
    out = []
    for change in payload.get("changes") or []:
        if not isinstance(change, dict) or change.get("change") not in LOST_CHANGES:
            continue
        where = change.get("address")
        if isinstance(where, str) and where.startswith("memo://passage/"):
            ref = change.get("ref")
            out.append((ref if isinstance(ref, int) else None, where))
    return tuple(out)


#: The changes after which a passage a page cited is no longer a source.
LOST_CHANGES = ("forgotten", "superseded")


@lru_cache(maxsize=8)
def _read_citations(
    content: str, refs: tuple[tuple[int, str], ...], lost: tuple[tuple[int | None, str], ...] = ()
) -> tuple[Cited, ...]:
    by_ref = dict(refs)
    offered = set(by_ref.values())
    lost_by_ref = {ref: a for ref, a in lost if ref is not None and ref not in by_ref}
    lost_addresses = {a for _ref, a in lost} - offered
    out = []
    for sentence in read_page(content):
        cites, gone = [], []
        for ref in sentence.refs:
            if isinstance(ref, int):
                if ref in lost_by_ref:
                    gone.append((f"[{ref}]", lost_by_ref[ref]))
                    continue
                if ref not in by_ref:
                    numbers = sorted(by_ref)
                    span = f"{numbers[0]} to {numbers[-1]}" if numbers else "none"
                    raise BadInput(
                        f"citation marker [{ref}] names no passage of this item (its passages "
                        f"are numbered {span}, the payload's `ref`)"
                    )
                cites.append(by_ref[ref])
            elif ref in offered:
                cites.append(ref)
            elif ref in lost_addresses:
                gone.append((f"[{ref}]", ref))
            else:
                raise BadInput(f"citation marker [{ref}] names no passage of this item's payload")
        out.append(Cited(sentence.text, sentence.role, tuple(dict.fromkeys(cites)), tuple(gone)))
    return tuple(out)


def lost_citations(sentences: Sequence[Cited], payload: dict[str, Any]) -> CheckResult:
    """Flag each marker that names a passage the previous page version
    cited and that is forgotten or superseded since: ``[5] names a passage
    forgotten since: …`` (its text), not a corruption of the sentence."""
    changes = {c.get("address"): c for c in payload.get("changes") or [] if isinstance(c, dict)}
    flagged = []
    for sentence in sentences:
        for marker, where in sentence.lost:
            change = changes.get(where) or {}
            text = " ".join(str(change.get("text") or "").split())
            if len(text) > 160:
                text = text[:159] + "…"
            flagged.append(
                {
                    "sentence": sentence.text,
                    "marker": marker,
                    "passage": where,
                    "change": change.get("change"),
                    "message": f"{marker} names a passage {change.get('change') or 'forgotten'} "
                    f"since: {text or where}",
                }
            )
    return CheckResult(passed=not flagged, flagged=flagged)


def cited_passages(
    sentences: Sequence[Cited], payload: dict[str, Any], cites: list[str] | None
) -> list[str]:
    """The page's cited passages: those its markers name (plus ``cites``)
    when it uses markers; otherwise ``cites``, or every payload passage."""
    marked = [a for s in sentences for a in s.cites]
    if marked:
        return list(dict.fromkeys([*marked, *(cites or [])]))
    if cites is not None:
        return list(dict.fromkeys(cites))
    return [p["address"] for p in payload.get("passages") or []]


# --- sources --------------------------------------------------------------------


def _written_out(value: str | None) -> str:
    """A bound as a page may state it: ``2024-01-01`` also as
    ``1 January 2024``, ``January 2024``, ``2024``."""
    if not value:
        return ""
    try:
        d = date.fromisoformat(value[:10])
    except ValueError:
        return value
    month = _MONTH_NAMES[d.month - 1]
    return f"{value} {d.day} {month} {d.year}, {month} {d.year}, {d.year}"


def fact_as_source(fact: dict[str, Any]) -> str:
    """A fact as a source reads: subject, predicate, value, its bounds written out."""
    parts = [str(fact.get(k) or "") for k in ("subject", "predicate", "value")]
    if fact.get("valid_from"):
        parts.append(f"from {_written_out(fact['valid_from'])}")
    if fact.get("valid_to"):
        parts.append(f"to {_written_out(fact['valid_to'])}")
    return " ".join(p for p in parts if p)


def fact_words(fact: dict[str, Any]) -> set[str]:
    """The content words omission looks for: the fact's predicate and value."""
    return content_words(f"{fact.get('predicate', '')} {fact.get('value', '')}")


@lru_cache(maxsize=4096)
def _source_words(text: str) -> frozenset[str]:
    """A source's content words (kept for the few submissions to come: one
    reads its sources for each check and again to record its sentences)."""
    return frozenset(content_words(text))


def sources_of(
    payload: dict[str, Any],
    passages: Iterable[str],
    profiles: Callable[[list[dict[str, Any]]], dict[str, Profile]] | None = None,
    *,
    with_profiles: bool = True,
) -> tuple[list[Source], list[Source]]:
    """The page's passage sources (those named, in payload order) and its fact
    sources. ``profiles`` gives stored profiles by address (the others are
    computed from the payload's text); without ``with_profiles`` (the word
    checks need none) no profile is read or computed."""
    wanted = set(passages)
    rows = [p for p in payload.get("passages") or [] if p["address"] in wanted]
    known = profiles(rows) if profiles and rows else {}

    def profile_of(p: dict[str, Any]) -> Profile | None:
        if not with_profiles:
            return None
        return known.get(p["address"]) or profile(p["text"])

    out = [Source(p["address"], _source_words(p["text"]), profile_of(p)) for p in rows]
    facts = []
    for fact in payload.get("facts") or []:
        text = fact_as_source(fact)
        stamps = [v for v in (fact.get("valid_from"), fact.get("valid_to")) if v]
        data = profile(text, stamps) if with_profiles else None
        facts.append(Source(fact["address"], _source_words(text), data))
    return out, facts


# --- omission ---------------------------------------------------------------------


def omission(title: str, content: str, facts: list[dict[str, Any]]) -> CheckResult:
    """Flag each fact whose content words (predicate and value) are less
    than 75% present in the page (its title and visible text: a citation
    marker ``[3]`` does not state a 3)."""
    page = content_words("\n".join([title, *(s.text for s in read_page(content))]))
    flagged = []
    for fact in facts:
        words = fact_words(fact)
        coverage = 1.0 if not words else len(words & page) / len(words)
        if coverage < OMISSION_THRESHOLD:
            flagged.append({"fact": fact["address"], "coverage": round(coverage, 4)})
    return CheckResult(passed=not flagged, flagged=flagged)


# --- corruption ---------------------------------------------------------------------


def _surface(text: str) -> dict[str, str]:
    """Each content word's stem -> the word as the sentence first writes it."""
    stops = stop_words()
    out: dict[str, str] = {}
    for w in check_words(text):
        if w not in stops:
            out.setdefault(stem(w), w)
    return out


_CAPITALISED = re.compile(r"(?<![\w'’])[A-Z][^\W\d_]{2,}")


def _short_forms(text: str, words: set[str], pool: set[str]) -> list[str]:
    """Which of ``words`` are capitalised in ``text`` and a short form (a
    prefix of three letters or more) of a word in ``pool``, or it of them."""
    if not words:
        return []
    capitalised = {stem(m.group(0).lower()) for m in _CAPITALISED.finditer(text)}
    out = []
    for word in words & capitalised:
        if len(word) >= 3 and any(
            len(other) >= 3 and (other.startswith(word) or word.startswith(other)) for other in pool
        ):
            out.append(word)
    return out


def best_union(words: set[str], sources: Sequence[Source], limit: int) -> list[Source]:
    """Greedily, the up to ``limit`` sources that together cover most of ``words``."""
    chosen: list[Source] = []
    left = set(words)
    pool = list(sources)
    while pool and left and len(chosen) < limit:
        best = max(pool, key=lambda s: len(left & s.words))
        if not left & best.words:
            break
        chosen.append(best)
        left -= best.words
        pool.remove(best)
    return chosen


def corruption(
    sentences: Sequence[Cited], sources: Sequence[Source], names: Sequence[str] = ()
) -> CheckResult:
    """Flag each prose sentence sharing fewer than half of its content words
    with its sources: an uncited sentence with its best single source, a
    cited one with the union of its (up to three best) cited passages. A
    flag names ``best_source`` (an address, or a list of them for a union)
    and ``missing`` (the sentence's content words none of them has). In a
    cited sentence the words of the subject's ``names`` are the page's own
    (not counted) and a capitalised short form ("Mel") meets the name it
    shortens ("Melanie"); an uncited one is judged exactly as the seed says."""
    by_address = {s.address: s for s in sources}
    own = content_words(" ".join(names))
    flagged = []
    for sentence in sentences:
        if sentence.role != "prose" or sentence.lost:  # (a lost marker is flagged as such)
            continue
        surface = _surface(sentence.text)
        if sentence.cites and own and set(surface) - own:
            surface = {w: v for w, v in surface.items() if w not in own}
        words = set(surface)
        if not words:
            continue
        if sentence.cites:
            union = best_union(
                words, [by_address[a] for a in sentence.cites if a in by_address], UNION_LIMIT
            )
            best = union or [by_address[a] for a in sentence.cites[:1] if a in by_address]
        else:
            best = [max(sources, key=lambda s: len(words & s.words))] if sources else []
        pool = set().union(*(s.words for s in best)) if best else set()
        covered = pool & words
        if sentence.cites:  # an uncited sentence is judged exactly as the seed says
            covered.update(_short_forms(sentence.text, words - covered, pool))
        overlap = len(covered) / len(words)
        if overlap < CORRUPTION_THRESHOLD:
            addresses = [s.address for s in best]
            flagged.append(
                {
                    "sentence": sentence.text,
                    "overlap": round(overlap, 4),
                    "best_source": addresses[0] if len(addresses) == 1 else (addresses or None),
                    "missing": [surface[w] for w in surface if w not in covered],
                }
            )
    return CheckResult(passed=not flagged, flagged=flagged)


def sentence_sources(
    sentences: Sequence[Cited],
    sources: Sequence[Source],
    flags: dict[str, Any] | None = None,
) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
    """What each checked (prose) sentence draws on, as the page records it,
    with what the checks flagged in it (``flags``: check -> its flagged
    list, as a forced submission recorded them): its cited passages, or for
    an uncited one the single source it shares most content words with
    (none when it shares none). An uncited sentence that was flagged draws
    on nothing the checks could find, so it records no source (a guess is
    not a citation); a flagged heading or table cell is recorded too."""
    flagged = flags_by_sentence(flags or {})
    out = []
    for sentence in sentences:
        found = flagged.get(sentence.text, [])
        if sentence.role != "prose" and not found:
            continue
        if sentence.cites or found:
            out.append((sentence.text, list(sentence.cites), found))
            continue
        words = content_words(sentence.text)
        best = max(sources, key=lambda s: len(words & s.words), default=None)
        out.append((sentence.text, [best.address] if best and words & best.words else [], []))
    return out


def flags_by_sentence(flags: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The flags of a submission's checks (check -> flagged list) that name
    a sentence, by the sentence's text: each ``{"check", "message", …}``
    with the flag's other fields (a fact's omission names no sentence)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for check, flagged in flags.items():
        for flag in flagged if isinstance(flagged, list) else ():
            if not isinstance(flag, dict) or not isinstance(flag.get("sentence"), str):
                continue
            rest = {k: v for k, v in flag.items() if k not in ("sentence", "check", "message")}
            record = {"check": check, "message": flag_message(check, flag), **rest}
            out.setdefault(flag["sentence"], []).append(record)
    return out


def flag_message(check: str, flag: dict[str, Any]) -> str:
    """One flag in a line a person reads: what its check found wrong."""
    if isinstance(flag.get("message"), str):
        return flag["message"]
    if check == "corruption" and "overlap" in flag:
        missing = ", ".join(str(w) for w in flag.get("missing") or []) or "none"
        share = f"{float(flag.get('overlap') or 0):.0%}"
        return f"shares only {share} of its content words with its sources (missing: {missing})"
    if check == "substitution" and "token" in flag:
        return f"the {flag.get('class') or 'token'} {flag['token']!r} is in none of its sources"
    if check == "omission" and "fact" in flag:
        share = f"{float(flag.get('coverage') or 0):.0%}"
        return f"the fact {flag['fact']} is only {share} on the page"
    rest = ", ".join(f"{k}={v}" for k, v in flag.items() if k != "sentence")
    return rest or "flagged"


# --- substitution -----------------------------------------------------------------


class _Window:
    """The union of some sources' profiles (plus the subject's names)."""

    def __init__(self, profiles: Iterable[Profile], names: Iterable[str]) -> None:
        self.words: set[str] = set()
        self.numbers: set[float] = set()
        self.months: set[int] = set()
        self.weekdays: set[int] = set()
        self.days: set[tuple[int, int]] = set()
        self.clocks: set[tuple[int, int]] = set()
        self.capitals: set[str] = set()
        self.joined: set[str] = set()
        for p in profiles:
            self.words.update(p.words)
            self.numbers.update(p.numbers)
            self.months.update(p.months)
            self.weekdays.update(p.weekdays)
            self.days.update(p.days)
            self.clocks.update(p.clocks)
            self.capitals.update(p.capitals)
            self.joined.update(p.joined)
        for name in names:
            low = [w.lower() for w in name.split()]
            self.words.update(low)
            self.capitals.update(low)
            self.joined.update("".join(low[i : i + 2]) for i in range(len(low) - 1))
        self.stems = {stem(w) for w in self.words}

    def holds(self, key: tuple) -> bool:
        tag = key[0]
        if tag == "n":
            return key[1] in self.numbers
        if tag == "dm":
            return (key[1], key[2]) in self.days
        if tag == "m":
            return key[1] in self.months
        if tag == "w":
            return key[1] in self.weekdays
        if tag == "t":
            return (key[1], key[2]) in self.clocks
        if tag == "u":
            return key[1] in self.stems
        return False  # pragma: no cover

    def has_name(self, word: str, before: str | None, after: str | None) -> bool:
        low = word.lower()
        if low in self.words or low in self.joined:
            return True
        if before and before.lower() + low in self.words:  # "Door Dash" ~ "DoorDash"
            return True
        if after and low + after.lower() in self.words:
            return True
        if len(low) >= 3:
            for cap in self.capitals:
                if (
                    len(cap) >= 3
                    and abs(len(cap) - len(low)) <= SHORT_FORM_SPAN
                    and (cap.startswith(low) or low.startswith(cap))
                ):
                    return True
        return False


def _idf(sources: Sequence[Source]) -> dict[str, float]:
    df: dict[str, int] = {}
    for s in sources:
        for w in s.words:
            df[w] = df.get(w, 0) + 1
    n = len(sources)
    return {w: math.log(1 + n / c) for w, c in df.items()}


def _aligned(
    words: set[str], critical: set[str], sources: Sequence[Source], idf: dict[str, float]
) -> list[Source]:
    """The sources best aligned with a sentence: the top WINDOW_SIZE by
    idf-weighted overlap of its content words (its specifics weigh half),
    leaving out those scoring under WINDOW_SHARE of the best (a sentence
    copied from one passage is not vouched for by eight that merely share
    its template); all of them when none overlaps."""
    scored = []
    for i, s in enumerate(sources):
        shared = words & s.words
        if shared:
            score = sum(idf.get(w, 0.0) * (0.5 if w in critical else 1.0) for w in shared)
            scored.append((-score, i, s))
    if not scored:
        return list(sources)
    scored.sort()
    floor = -scored[0][0] * WINDOW_SHARE
    return [s for score, _, s in scored[:WINDOW_SIZE] if -score >= floor]


def substitution(
    sentences: Sequence[Cited],
    passages: Sequence[Source],
    facts: Sequence[Source],
    names: Sequence[str] = (),
) -> CheckResult:
    """Flag every number, date, relative time and name a sentence states that
    its window does not: its cited passages, or its best-aligned sources,
    with the subject's ``names``, the facts and the passages' documents'
    dates. A flag names the ``sentence``, the ``token``, its ``class`` and
    the ``window`` (addresses) it was looked for in."""
    everything = [*passages, *facts]
    known = set().union(*(s.profile.known for s in everything)) if everything else set()
    known.update(w.lower() for n in names for w in n.split())
    ordinary = english_words()
    idf = _idf(passages)
    by_address = {s.address: s for s in passages}
    flagged = []
    for sentence in sentences:
        if sentence.lost:  # a marker naming a passage gone since is flagged as such
            continue
        specifics, found = sentence_specifics(sentence.text, title_case=sentence.role != "prose")
        named = []
        for word, first in found:
            if first and word.lower() not in known and word.lower() in ordinary:
                continue  # "Overall", "Leader": an ordinary word in first place
            named.append(word)
        if not specifics and not named:
            continue
        if sentence.cites:
            window = [by_address[a] for a in sentence.cites if a in by_address]
        else:
            words = content_words(sentence.text)
            critical = {stem(w.lower()) for w in named} | {
                stem(w) for s in specifics for w in check_words(s.token)
            }
            window = _aligned(words, critical, passages, idf)
        sources = [*window, *facts]
        union = _Window((s.profile for s in sources), names)
        addresses = [s.address for s in sources]
        for spec in specifics:
            if not all(union.holds(k) for k in spec.keys):
                flagged.append(_flag(sentence, spec.token, spec.cls, addresses))
        for i, word in enumerate(named):
            before = named[i - 1] if i else None
            after = named[i + 1] if i + 1 < len(named) else None
            if not union.has_name(word, before, after):
                flagged.append(_flag(sentence, word, "name", addresses))
    return CheckResult(passed=not flagged, flagged=flagged)


def _flag(sentence: Cited, token: str, cls: str, window: list[str]) -> dict[str, Any]:
    return {"sentence": sentence.text, "token": token, "class": cls, "window": window}
