"""The specifics a sentence states, and what a source offers to support them.

The substitution check (SPEC §5) needs, for every page sentence, the
numbers, dates, relative times and names it states, and for every source
what it could support them with. Everything here is a pure function of its
input. A source's side is a :class:`Profile`, computed once when a passage is
stored (:func:`profile`, serialised with :func:`dump_profile`) so a
submission never parses its sources' text again.

Rules, as measured in ``shared/research/grounding.md``:

- **numbers**: digit runs (commas dropped; ``$50`` 50, ``5K`` 5, ``50%`` 50,
  ``8th`` 8, ``1990s`` 1990), number words (``two`` … ``nineteen``, tens,
  compounds: ``twenty five`` 25, ``five hundred`` 500; ``dozen`` 12;
  ordinals ``second`` … ``tenth``; ``twice`` 2). ``one``, ``first``,
  ``once`` and ``the two`` are never required; as support one/first/once
  are 1 and couple/pair/both are 2. Digits inside a word (``ES2015``) are
  part of that word, not a number.
- **dates**: month names (and abbreviations next to a day), weekdays, a
  day and a month in either order (``8 May``, ``May 8th``, ``8th of May``),
  years, ISO dates, clock times (hour modulo 12 and minute).
- **relative times**: ``yesterday``, ``today``, ``tomorrow``, ``tonight``,
  and a unit (day, week, weekend, month, year, decade) after ``last``,
  ``next``, ``a``, a number … or before ``ago``: only the unit is required.
- **names**: capitalised words that are not stop words, months, weekdays
  or number words; at the start of a sentence (or of a heading's or table
  header's every word: title case) only a word the sources know as a name
  or one that is not an ordinary English word.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from datetime import date
from functools import cache
from importlib import resources
from typing import NamedTuple

from memors_core.domain.text import (
    NEGATIONS,
    NUMBER_WORDS,
    QUANTIFIERS,
    SCALES,
    number_value,
    stem,
    stop_words,
)

_UNITS = NUMBER_WORDS
_SCALES = SCALES

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6,
    "july": 7, "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
}  # fmt: skip
MONTH_ABBREVIATIONS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4,
    "saturday": 5, "sunday": 6,
}  # fmt: skip
WEEKDAY_ABBREVIATIONS = {
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3,
    "fri": 4, "sat": 5, "sun": 6,
}  # fmt: skip
_ORDINALS = {
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip
#: Numbers a sentence may say without a source saying them.
NEVER_REQUIRED = frozenset({"one", "first", "once"})
#: Words a source supports a number with, beyond the number words.
SUPPORT_ONLY = {"one": 1, "first": 1, "once": 1, "couple": 2, "pair": 2, "both": 2}
RELATIVE_DAYS = frozenset({"yesterday", "today", "tomorrow", "tonight"})
TIME_UNITS = frozenset(
    {"day", "days", "week", "weeks", "weekend", "weekends", "month", "months"}
    | {"year", "years", "decade", "decades"}
)
_BEFORE_UNIT = frozenset(
    {"last", "next", "this", "past", "coming", "a", "an", "few", "couple", "several", "that"}
    | {"previous", "following", "every", "each"}
)

# Words first: the commonest token, and no other kind starts with a letter.
_TOKEN = re.compile(
    r"""(?P<word>[^\W\d_][^\W_]*(?:['’][^\W\d_]+)?)
      | (?P<iso>(?<![\d-])\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?
            (?:Z|[+-]\d{2}:?\d{2})?)?(?![\d-]))
      | (?P<clock>(?<![\d:.])\d{1,2}(?::(?P<min>\d{2}))?\s*(?P<ampm>[ap])\.?m\b\.?
               | (?<![\d:.])\d{1,2}:\d{2}(?![\d:]))
      | (?P<num>\$?(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?P<suffix>[A-Za-z%]{0,3})(?![\w]))
      | (?P<mark>[:;"“(])""",
    re.X,
)
_TAIL = re.compile(r"['’].*$")
_DIGITS = re.compile(r"\d+")
_SPEAKER = re.compile(r"^\s*([A-Z][\w.'’ -]{0,40}?):\s", re.M)


@cache
def english_words() -> frozenset[str]:
    """Ordinary English words (the shipped list, lowercase; about 64,000)."""
    blob = resources.files("memors_core").joinpath("data/english_words.txt.gz").read_bytes()
    lines = gzip.decompress(blob).decode("utf-8").splitlines()
    return frozenset(w for w in lines if w and not w.startswith("#"))


@cache
def _not_names() -> frozenset[str]:
    return (
        stop_words()
        | NEGATIONS
        | QUANTIFIERS
        | set(MONTHS)
        | set(MONTH_ABBREVIATIONS)
        | set(WEEKDAYS)
        | set(WEEKDAY_ABBREVIATIONS)
        | set(_UNITS)
        | set(_SCALES)
        | set(_ORDINALS)
        | RELATIVE_DAYS
        | {"first", "once", "twice", "dozen"}
    )


class Token(NamedTuple):
    kind: str  # iso, clock, num, word
    text: str
    initial: bool  # at the start of a sentence (or after a colon, a quote, ...)
    groups: tuple = ()


def tokens(text: str) -> list[Token]:
    """The tokens of a sentence the rules read, each marked initial or not."""
    out: list[Token] = []
    initial = True
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "mark":
            initial = True
            continue
        if kind == "clock":
            groups = (m.group("min"), m.group("ampm"))
        elif kind == "num":
            groups = (m.group("suffix"),)
        else:
            kind = "word" if kind not in ("iso",) else kind
            groups = ()
        out.append(Token(kind, m.group(0), initial, groups))
        initial = False
    return out


def _num(token: Token) -> float | None:
    suffix = token.groups[0] if token.groups else ""
    digits = token.text.lstrip("$")
    if suffix:
        digits = digits[: -len(suffix)]
    try:
        value = float(digits.replace(",", ""))
    except ValueError:
        return None
    return value


def _norm(value: float) -> float | int:
    return int(value) if value == int(value) else round(value, 6)


def _clock(token: Token) -> tuple[int, int]:
    digits = re.findall(r"\d+", token.text)
    hour = int(digits[0]) % 12
    minute = int(digits[1]) if len(digits) > 1 else 0
    return hour, minute


def _iso(text: str) -> tuple[int, int, int] | None:
    try:
        y, m, d = int(text[:4]), int(text[5:7]), int(text[8:10])
        date(y, m, d)
    except ValueError:
        return None
    return y, m, d


def _month(word: str, near_day: bool) -> int | None:
    low = word.lower()
    if low in MONTHS:
        return MONTHS[low]
    if near_day and low in MONTH_ABBREVIATIONS:
        return MONTH_ABBREVIATIONS[low]
    return None


class Specific(NamedTuple):
    """One thing a sentence states that its window must support: its class
    (``number``, ``date``, ``time``, ``name``), its text as written, and the
    keys a window must hold (all of them; a name has its own rule)."""

    cls: str
    token: str
    keys: tuple = ()


_RUN_STARTS = frozenset({*_UNITS, *_SCALES, *_ORDINALS, "dozen", "twice"})


def _number_runs(toks: list[Token]) -> tuple[list[tuple[int, int, float, str]], set[int]]:
    """Runs of number words: (start, end, value, text), and every index used.

    A run is number words (``and`` between them: ``two hundred and five``),
    ``dozen`` counting as twelve of what comes before; an ordinal or
    ``twice`` stands alone (``twenty second`` is not read)."""
    runs = []
    used: set[int] = set()
    i, n = 0, len(toks)
    lows = [t.text.lower() if t.kind == "word" else "" for t in toks]
    while i < n:
        if lows[i] not in _RUN_STARTS:
            i += 1
            continue
        start = i
        if lows[i] in _ORDINALS or lows[i] == "twice":
            value, i = _ORDINALS.get(lows[i], 2), i + 1
        else:
            counted: list[str] = []  # the run's words but "and"
            while i < n:
                w = lows[i]
                if w in _UNITS or w in _SCALES or w == "dozen":
                    counted.append(w)
                elif not (w == "and" and counted and i + 1 < n and lows[i + 1] in _UNITS):
                    break
                i += 1
            value = number_value(counted)
        runs.append((start, i, float(value), " ".join(lows[start:i])))
        used.update(range(start, i))
    return runs, used


# Long: one left-to-right pass over a sentence's tokens; each branch reads its
# neighbours and marks the tokens it consumed (``used``), so its cases stay in
# the order they are tried rather than spread over helpers sharing that state.
def sentence_specifics(
    text: str, title_case: bool = False
) -> tuple[list[Specific], list[tuple[str, bool]]]:
    """What one sentence states, in order: its specifics (numbers, dates,
    relative times) and, apart, its capitalised words that may be names,
    each with whether it stands first (a first word is a name only if the
    sources know it or it is no ordinary English word).

    ``title_case`` reads every capitalised word as a sentence's first
    (headings and table header cells are written in title case).
    """
    toks = tokens(text)
    specifics: list[Specific] = []
    names: list[tuple[str, bool]] = []
    runs, in_run = _number_runs(toks)
    run_at = {start: (end, value, words) for start, end, value, words in runs}
    used: set[int] = set()
    n = len(toks)
    lows = [t.text.lower() if t.kind == "word" else "" for t in toks]

    def day_at(j: int) -> int | None:
        if 0 <= j < n and toks[j].kind == "num":
            suffix = (toks[j].groups[0] or "").lower()
            if suffix in ("", "st", "nd", "rd", "th"):
                v = _num(toks[j])
                if v is not None and v == int(v) and 1 <= v <= 31 and "," not in toks[j].text:
                    return int(v)
        return None

    for i, t in enumerate(toks):
        if i in used:
            continue
        if t.kind == "iso":
            ymd = _iso(t.text)
            if ymd:
                y, m, d = ymd
                specifics.append(Specific("date", t.text[:10], (("n", y), ("dm", d, m))))
            continue
        if t.kind == "clock":
            specifics.append(Specific("date", t.text.strip().rstrip("."), (("t", *_clock(t)),)))
            continue
        if t.kind == "num":
            # A day of a month: "8 May", "8th of May".
            j = i + 2 if i + 2 < n and lows[i + 1] == "of" else i + 1
            month = _month(toks[j].text, True) if j < n and toks[j].kind == "word" else None
            day = day_at(i)
            if month and day:
                used.update(range(i, j + 1))
                surface = " ".join(x.text for x in toks[i : j + 1])
                specifics.append(Specific("date", surface, (("dm", day, month),)))
                continue
            value = _num(t)
            if value is None:
                continue
            suffix = (t.groups[0] or "").lower()
            if suffix not in ("", "k", "m", "%", "s", "st", "nd", "rd", "th", "b", "bn"):
                continue  # 3GB, 10x: a number with a unit glued on is still a number
            cls = (
                "date" if value == int(value) and 1000 <= value <= 2999 and not suffix else "number"
            )
            specifics.append(Specific(cls, t.text, (("n", _norm(value)),)))
            continue
        low = lows[i]
        if i in run_at:
            end, value, words = run_at[i]
            used.update(range(i, end))
            prev = lows[i - 1] if i else ""
            if words in NEVER_REQUIRED or (words == "two" and prev == "the"):
                continue
            # "two weeks ago": the unit is read below too.
            specifics.append(
                Specific("number", " ".join(x.text for x in toks[i:end]), (("n", _norm(value)),))
            )
            continue
        if i in in_run:
            continue
        near_day = day_at(i + 1) is not None or day_at(i - 1) is not None
        month = _month(t.text, near_day) if t.text[:1].isupper() else None
        if month and (near_day or not t.initial or (low != "may" and low in MONTHS)):
            day = day_at(i + 1)
            if day:
                used.add(i + 1)
                surface = f"{t.text} {toks[i + 1].text}"
                specifics.append(Specific("date", surface, (("dm", day, month),)))
            else:
                specifics.append(Specific("date", t.text, (("m", month),)))
            continue
        if t.text[:1].isupper() and low in WEEKDAYS:
            specifics.append(Specific("date", t.text, (("w", WEEKDAYS[low]),)))
            continue
        if low in RELATIVE_DAYS:
            specifics.append(Specific("time", t.text, (("u", stem(low)),)))
            continue
        if low in TIME_UNITS:
            prev = lows[i - 1] if i else ""
            after = lows[i + 1] if i + 1 < n else ""
            counted = i and (toks[i - 1].kind == "num" or (i - 1) in in_run)
            if prev in _BEFORE_UNIT or after == "ago" or counted:
                unit = low[:-1] if low.endswith("s") else low
                surface = " ".join(x.text for x in toks[max(i - 1, 0) : i + 1])
                specifics.append(Specific("time", surface, (("u", stem(unit)),)))
            continue
        if t.kind == "word" and t.text[:1].isupper():
            word = _TAIL.sub("", t.text)
            if len(word) >= 2 and word.lower() not in _not_names():
                names.append((word, t.initial or title_case))
    return specifics, names


class Profile(NamedTuple):
    """What one source can support: its distinct casefolded words (``words``:
    possessives stripped too), numbers, months, weekdays, (day, month)
    pairs, clock times, capitalised words (casefolded), names it knows
    (capitalised mid-sentence, or a speaker's label), and the joined forms
    of adjacent capitalised words (``Door Dash`` -> ``doordash``)."""

    words: tuple[str, ...]
    numbers: tuple[float, ...]
    months: tuple[int, ...] = ()
    weekdays: tuple[int, ...] = ()
    days: tuple[tuple[int, int], ...] = ()
    clocks: tuple[tuple[int, int], ...] = ()
    capitals: tuple[str, ...] = ()
    known: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()


def _date_keys(y: int, m: int, d: int, keys: dict[str, set]) -> None:
    # The year, the month and the day of the month: not the weekday (a page
    # that computes one states something its source does not), and not the
    # month or the day as plain numbers (2015-09-01 says nothing of "9 nodes").
    keys["numbers"].add(y)
    keys["months"].add(m)
    keys["days"].add((d, m))


def profile(text: str, stamps: Iterable[str] = ()) -> Profile:
    """Everything the substitution check needs of a source text; ``stamps``
    are its document's own dates (its date-like metadata), whose date keys
    count as the source's (not their words)."""
    keys: dict[str, set] = {
        k: set() for k in ("numbers", "months", "weekdays", "days", "clocks", "capitals", "known")
    }
    words: dict[str, None] = {}
    joined: set[str] = set()
    for line in text.splitlines() or [text]:
        toks = tokens(line)
        runs, _ = _number_runs(toks)
        for _s, _e, value, _w in runs:
            keys["numbers"].add(value)
        prev_cap: str | None = None
        for i, t in enumerate(toks):
            if t.kind == "iso":
                ymd = _iso(t.text)
                if ymd:
                    _date_keys(*ymd, keys)
                prev_cap = None
                continue
            if t.kind == "clock":  # a time of day, not its digits as numbers
                keys["clocks"].add(_clock(t))
                prev_cap = None
                continue
            if t.kind == "num":
                value = _num(t)
                if value is not None:
                    keys["numbers"].add(value)
                    # A day next to a month, either side.
                    for j in (i - 1, i + 1, i + 2):
                        if 0 <= j < len(toks) and toks[j].kind == "word":
                            month = _month(toks[j].text, True)
                            if month and value == int(value) and 1 <= value <= 31:
                                keys["days"].add((int(value), month))
                prev_cap = None
                continue
            low = t.text.lower()
            words[low] = None
            if "'" in low or "’" in low:
                base = _TAIL.sub("", low)
                words[base] = None
            else:
                base = low
            if not low.isalpha():
                for digits in _DIGITS.findall(low):  # ES2015, v2: numbers for support
                    keys["numbers"].add(int(digits))
            if low in SUPPORT_ONLY:
                keys["numbers"].add(SUPPORT_ONLY[low])
            if t.initial:
                prev_cap = None
            if t.text[:1].isupper():
                if base in MONTHS or base in MONTH_ABBREVIATIONS:
                    keys["months"].add(MONTHS.get(base) or MONTH_ABBREVIATIONS[base])
                if base in WEEKDAYS or base in WEEKDAY_ABBREVIATIONS:
                    keys["weekdays"].add(WEEKDAYS.get(base, WEEKDAY_ABBREVIATIONS.get(base)))
                keys["capitals"].add(base)
                if not t.initial:
                    keys["known"].add(base)
                if prev_cap:
                    joined.add(prev_cap + base)
                prev_cap = base
            else:
                prev_cap = None
    for m in _SPEAKER.finditer(text):
        for part in m.group(1).split():
            keys["known"].add(_TAIL.sub("", part.lower()))
    made = Profile(
        tuple(words),
        tuple(sorted(_norm(v) for v in keys["numbers"])),
        tuple(sorted(keys["months"])),
        tuple(sorted(keys["weekdays"])),
        tuple(sorted(keys["days"])),
        tuple(sorted(keys["clocks"])),
        tuple(sorted(keys["capitals"])),
        tuple(sorted(keys["known"])),
        tuple(sorted(joined)),
    )
    return dated(made, stamps) if stamps else made


def dated(p: Profile, stamps: Iterable[str]) -> Profile:
    """``p`` with the date keys of its document's ``stamps`` added (not their words)."""
    d = profile("\n".join(stamps))
    return p._replace(
        numbers=tuple(sorted({*p.numbers, *d.numbers})),
        months=tuple(sorted({*p.months, *d.months})),
        weekdays=tuple(sorted({*p.weekdays, *d.weekdays})),
        days=tuple(sorted({*p.days, *d.days})),
        clocks=tuple(sorted({*p.clocks, *d.clocks})),
    )


def dump_profile(p: Profile) -> str:
    """A profile as compact JSON (what the store keeps per passage)."""
    return json.dumps([list(f) for f in p], separators=(",", ":"), ensure_ascii=False)


def load_profile(data: str) -> Profile:
    fields = json.loads(data)
    fields[4] = [tuple(x) for x in fields[4]]
    fields[5] = [tuple(x) for x in fields[5]]
    return Profile(*(tuple(f) for f in fields))


_DATED_KEY = re.compile(r"date|time|when|day|created|updated|session", re.I)


def document_stamps(metadata: dict | None) -> list[str]:
    """A document's own dates, as its passages' profiles count them: its
    metadata's string values under date-like keys (``date``, ``timestamp``,
    ``session_time``…). Not when it was remembered: that would vouch for
    today's date in every page."""
    stamps = []
    for key, value in (metadata or {}).items():
        if isinstance(value, str) and _DATED_KEY.search(str(key)) and len(value) <= 200:
            stamps.append(value)
    return stamps
