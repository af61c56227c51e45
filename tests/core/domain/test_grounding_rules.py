"""The grounding rules as properties (hypothesis): the citation-marker
grammar, numbers and dates read by value whatever their spelling, and a
verbatim copy of the sources with correct markers never flagged by any
check; then the substitution rules one by one on examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memors_core.domain.grounding import (
    cited_passages,
    corruption,
    omission,
    read_citations,
    sources_of,
    substitution,
)
from memors_core.domain.specifics import (
    dump_profile,
    load_profile,
    profile,
    sentence_specifics,
)
from memors_core.domain.text import read_page
from memors_core.errors import BadInput

pytestmark = pytest.mark.engine_independent("pure functions of the domain layer, no store")

WORDS = ["leader", "cluster", "replica", "vote", "term", "log", "quorum", "snapshot", "commit"]
NAMES = ["Ongaro", "Ousterhout", "Melanie", "Caroline", "Lamport", "Zanzibar"]
ADDRESS = st.uuids().map(lambda u: f"memo://passage/{u}")


def _keys(text: str) -> list[tuple]:
    specifics, _names = sentence_specifics(text)
    return [k for s in specifics for k in s.keys]


# --- citation markers -------------------------------------------------------------------


@st.composite
def marked_sentence(draw):
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    refs = draw(st.lists(st.integers(1, 99) | ADDRESS, min_size=1, max_size=4))
    style = draw(st.sampled_from(["groups", "comma", "mixed"]))
    if style == "groups":
        marker = "".join(f"[{r}]" for r in refs)
    elif style == "comma":
        marker = "[" + ", ".join(str(r) for r in refs) + "]"
    else:
        marker = f"[{refs[0]}]" + (
            "[" + ",".join(str(r) for r in refs[1:]) + "]" if refs[1:] else ""
        )
    after_stop = draw(st.booleans())
    text = " ".join(words).capitalize()
    md = f"{text}. {marker}" if after_stop else f"{text} {marker}."
    return md, f"{text}.", list(dict.fromkeys(refs))


@settings(max_examples=300, deadline=None)
@given(st.lists(marked_sentence(), min_size=1, max_size=5))
def test_markers_are_read_per_sentence_and_are_not_text(sentences):
    markdown = " ".join(md for md, _, _ in sentences)
    got = read_page(markdown)
    assert [s.text for s in got] == [text for _, text, _ in sentences]
    assert [list(s.refs) for s in got] == [refs for _, _, refs in sentences]
    for s in got:
        assert "[" not in s.text and "memo://" not in s.text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), st.integers(1, 5))
def test_a_reference_link_a_link_and_a_footnote_are_not_markers(words, n):
    text = " ".join(words)
    for markdown in (
        f"See [{text}][{n}] here.\n\n[{n}]: https://example.invalid/x",
        f"See [{n}](https://example.invalid/x) here {text}.",
        f"Said {text}[^{n}].",
    ):
        assert all(not s.refs for s in read_page(markdown)), markdown


def test_a_marker_naming_no_payload_passage_is_bad_input():
    payload = {"passages": [{"address": "memo://passage/a", "text": "x"}]}
    assert read_citations("Leaders vote [1].", payload)[0].cites == ("memo://passage/a",)
    with pytest.raises(BadInput, match=r"marker \[2\] names no passage"):
        read_citations("Leaders vote [2].", payload)
    with pytest.raises(BadInput, match=r"marker \[memo://passage/b\]"):
        read_citations("Leaders vote [memo://passage/b].", payload)


# --- numbers and dates by value ----------------------------------------------------------

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def spell(n: int) -> str:
    """An independent speller: 2 -> 'two', 25 -> 'twenty five', 500 -> 'five hundred'."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + spell(rest))
    rest = n % 1000
    return spell(n // 1000) + " thousand" + ("" if rest == 0 else " " + spell(rest))


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 999_999))
def test_a_number_in_words_is_the_same_number_in_digits(n):
    worded = _keys(f"The cluster had {spell(n)} replicas")
    assert worded == _keys(f"The cluster had {n} replicas") == [("n", n)]
    assert _keys(f"The cluster had {n:,} replicas") == [("n", n)]  # commas dropped


def test_numbers_never_required_and_support_only():
    assert _keys("One replica votes first, once") == []
    assert _keys("The two of them vote") == []
    window = profile("Both replicas voted.")
    assert 2 in window.numbers  # "both" supports 2 ...
    assert _keys("Both replicas voted") == []  # ... and is never required


MONTH_NAMES = (
    "January February March April May June July August September October November December"
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12), st.integers(1, 28), st.sampled_from(["th", ""]))
def test_a_day_and_a_month_in_any_order_are_one_date(month, day, suffix):
    name = MONTH_NAMES.split()[month - 1]
    forms = [
        f"on {day}{suffix} {name}",
        f"on {name} {day}{suffix}",
        f"on the {day}{suffix} of {name}",
    ]
    keys = [_keys(f"They met {form} at noon") for form in forms]
    assert keys[0] == keys[1] == keys[2] == [("dm", day, month)]
    # ...and a source saying it either way supports it.
    for form in forms:
        assert (day, month) in profile(f"Meeting {form}.").days


def test_iso_dates_clock_times_and_years():
    assert _keys("Released on 2024-01-05") == [("n", 2024), ("dm", 5, 1)]
    assert _keys("at 1:56 pm") == [("t", 1, 56)] == _keys("at 13:56")
    assert _keys("at 10am") == [("t", 10, 0)]
    assert _keys("in 2014") == [("n", 2014)]
    p = profile("Posted 2024-01-05.")
    assert 2024 in p.numbers and (5, 1) in p.days and 1 in p.months
    # Nothing computed from it: not its weekday, not its month or day as plain numbers.
    assert p.weekdays == () and 5 not in p.numbers


def test_profiles_round_trip():
    p = profile("Mel: On Monday, 8 May 2023 at 1:56 pm we paid $50 to DoorDash [[Raft]].")
    assert load_profile(dump_profile(p)) == p


# --- a verbatim copy with correct markers is never flagged ---------------------------------


@st.composite
def source_sentence(draw):
    parts = [draw(st.sampled_from(NAMES))]
    for _ in range(draw(st.integers(2, 8))):
        kind = draw(st.sampled_from(["word", "word", "name", "number", "date", "year", "ago"]))
        if kind == "word":
            parts.append(draw(st.sampled_from(WORDS)))
        elif kind == "name":
            parts.append(draw(st.sampled_from(NAMES)))
        elif kind == "number":
            parts.append(
                draw(st.sampled_from([str(draw(st.integers(2, 5000))), "twelve", "forty two"]))
            )
        elif kind == "date":
            parts.append(f"{draw(st.integers(1, 28))} {draw(st.sampled_from(MONTH_NAMES.split()))}")
        elif kind == "year":
            parts.append(str(draw(st.integers(1900, 2100))))
        else:
            parts.append(f"{draw(st.sampled_from(['two', '3', 'several']))} weeks ago")
    return " ".join(parts) + "."


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(source_sentence(), min_size=1, max_size=3), min_size=1, max_size=8))
def test_a_verbatim_copy_with_correct_markers_is_never_flagged(texts):
    passages = [
        {
            "address": f"memo://passage/{i}",
            "document": "memo://document/d",
            "text": " ".join(t),
            "ref": i,
        }
        for i, t in enumerate(texts, 1)
    ]
    payload = {"entity": {"name": "Raft", "aliases": []}, "passages": passages, "facts": []}
    order = list(range(len(passages)))[::-1]  # any order, each sentence cites its passage
    content = "\n\n".join(" ".join(f"{s[:-1]} [{i + 1}]." for s in texts[i]) for i in order)
    sentences = read_citations(content, payload)
    assert all(s.cites for s in sentences)
    passages_, facts = sources_of(payload, cited_passages(sentences, payload, None))
    assert corruption(sentences, [*passages_, *facts]).passed
    assert substitution(sentences, passages_, facts, ["Raft"]).flagged == []
    assert omission("Raft", content, []).passed
    # And uncited, the same copy passes too: every sentence is in its best sources.
    bare = "\n\n".join(" ".join(texts[i]) for i in order)
    sentences = read_citations(bare, payload)
    passages_, facts = sources_of(payload, cited_passages(sentences, payload, None))
    assert corruption(sentences, [*passages_, *facts]).passed
    assert substitution(sentences, passages_, facts, ["Raft"]).flagged == []


# --- the substitution rules on examples ---------------------------------------------------


def _flags(page: str, sources: list[str], facts: list[dict] | None = None) -> list[tuple]:
    passages = [
        {"address": f"memo://passage/{i}", "document": "memo://document/d", "text": t, "ref": i}
        for i, t in enumerate(sources, 1)
    ]
    payload = {
        "entity": {"name": "Raft", "aliases": ["raft consensus"]},
        "passages": passages,
        "facts": facts or [],
    }
    sentences = read_citations(page, payload)
    ps, fs = sources_of(payload, cited_passages(sentences, payload, None))
    result = substitution(sentences, ps, fs, ["Raft", "raft consensus"])
    return [(f["token"], f["class"]) for f in result.flagged]


SOURCE = "Raft was published in 2014 by Diego Ongaro and John Ousterhout at Stanford."


@pytest.mark.parametrize(
    ("page", "flags"),
    [
        ("Raft was published in 2014 by Ongaro.", []),
        ("Raft was published in 2015 by Ongaro.", [("2015", "date")]),
        (
            "Raft was published in 2014 by Leslie Lamport.",
            [("Leslie", "name"), ("Lamport", "name")],
        ),
        ("Raft was published by Ongaro at Berkeley.", [("Berkeley", "name")]),
        ("Ongaro's Raft was published in 2014.", []),  # a possessive
        ("Raft was published in 2014 by Diego and John.", []),
        ("Raft was published in 2014 by Dieg Ongaro.", []),  # a short form: prefix of a capital
        ("Raft was published two years ago by Ongaro.", [("two", "number"), ("two years", "time")]),
        ("Overall, Raft was published by Ongaro.", []),  # an ordinary word in first place
        ("Raft was published by Ongaro on Monday.", [("Monday", "date")]),
        ("Raft was published in May 2014 by Ongaro.", [("May", "date")]),
    ],
)
def test_substitution_flags_what_the_sources_do_not_say(page, flags):
    assert _flags(page, [SOURCE]) == flags


def test_split_and_joined_spellings_and_facts_with_their_dates():
    assert _flags("Mel ordered from Door Dash.", ["Melanie ordered from DoorDash."]) == []
    assert _flags("Mel ordered from DoorDash.", ["Melanie ordered from Door Dash."]) == []
    fact = {
        "address": "memo://fact/f",
        "subject": "Raft",
        "predicate": "stable since",
        "value": "version two",
        "valid_from": "2016-03-01",
        "valid_to": None,
    }
    # A fact's bounds written out are source words: March 2016, 2016.
    assert _flags("Raft is stable since March 2016.", [SOURCE], [fact]) == []
    assert _flags("Raft is stable since April 2016.", [SOURCE], [fact]) == [("April", "date")]


def test_a_cited_sentence_is_looked_up_in_its_cited_passages_only():
    sources = [SOURCE, "Paxos was published in 1998 by Leslie Lamport."]
    assert _flags("Raft came out in 1998 [1].", sources) == [("1998", "date")]
    assert _flags("Lamport published Paxos in 1998 [2].", sources) == []
    assert _flags("Raft came out in 2014 [1], after Paxos in 1998 [2].", sources) == []


def test_headings_and_table_cells_are_checked_for_substitution():
    assert _flags("# Raft in 2015\n\nRaft was published in 2014.", [SOURCE]) == [("2015", "date")]
    table = "| Year | Author |\n|---|---|\n| 2014 | Lamport |"
    assert _flags(table, [SOURCE]) == [("Lamport", "name")]


def test_a_citation_marker_never_states_a_fact():
    fact = {"address": "memo://fact/f", "predicate": "write quorum", "value": "3"}
    assert not omission("Quorum", "The write quorum is set [3].", [fact]).passed
    assert not omission("Quorum", "Write quorum [memo://passage/3a-3].", [fact]).passed
    assert omission("Quorum", "The write quorum is 3 [1].", [fact]).passed


def _corrupt(page: str, sources: list[str], name: str = "Shrike Index") -> list[str]:
    passages = [
        {"address": f"memo://passage/{i}", "document": "memo://document/d", "text": t, "ref": i}
        for i, t in enumerate(sources, 1)
    ]
    payload = {"entity": {"name": name, "aliases": []}, "passages": passages, "facts": []}
    sentences = read_citations(page, payload)
    ps, fs = sources_of(payload, cited_passages(sentences, payload, None), with_profiles=False)
    return [f["sentence"] for f in corruption(sentences, [*ps, *fs], [name]).flagged]


def test_corruption_reads_numbers_by_value_and_cited_names_kindly():
    source = "Shrike processes 6100 jobs per minute from Melanie's team."
    # Numbers by value: words and digit groups meet digits, in cited and uncited sentences.
    assert _corrupt("Shrike processes six thousand one hundred jobs per minute.", [source]) == []
    assert _corrupt("Shrike processes 6,100 jobs per minute.", [source]) == []
    # Cited: the subject's own name is not counted, and "Mel" meets "Melanie".
    assert _corrupt("Shrike Index quickly handles 6100 jobs from Mel [1].", [source]) == []
    # Uncited, the seed's rule as it is: the same sentence is under half.
    assert _corrupt("Shrike Index quickly handles 6100 jobs from Mel.", [source]) == [
        "Shrike Index quickly handles 6100 jobs from Mel."
    ]
