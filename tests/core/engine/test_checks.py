"""The checks on page submissions: the math (hypothesis), the page-sentence
rules (hypothesis), and what a flag does to a submission (refused, forced,
dry run) through the engine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memors_core.domain.grounding import Source, corruption, omission, read_citations
from memors_core.domain.specifics import profile
from memors_core.domain.text import content_words, page_sentences, stop_words
from memors_core.errors import BadInput
from memors_core.wire import to_json
from store_checks import value_of

# Content words that are certainly not stop words, and words that must never
# reach a sentence (they sit in headings, code, comments and URLs).
SHOWN = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
]
HIDDEN = ["zzhead", "zzcode", "zzcomment", "zzurl", "zzpath", "zzsetext"]


def test_word_lists_are_what_the_tests_assume():
    assert not set(SHOWN) & stop_words()
    assert {"the", "of", "and", "is", "a"} <= stop_words()


# --- omission and corruption: thresholds at the exact boundaries ----------------


def _words(n: int, tag: str = "w") -> list[str]:
    return [f"{tag}{i}word" for i in range(n)]


def _fact(words: list[str]) -> dict:
    half = len(words) // 2
    return {
        "address": "memo://fact/0199",
        "subject": "Thing",
        "predicate": " ".join(words[:half]),
        "value": " ".join(words[half:]),
    }


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_omission_flags_exactly_below_three_quarters(n_k):
    n, k = n_k
    words = _words(n)
    result = omission("Title", "Intro the of.\n" + " ".join(words[:k]), [_fact(words)])
    flagged = 4 * k < 3 * n
    assert result.passed is not flagged
    if flagged:
        assert result.flagged == [{"fact": "memo://fact/0199", "coverage": round(k / n, 4)}]


def test_omission_boundaries():
    four = _words(4)
    assert omission("T", " ".join(four[:3]), [_fact(four)]).passed  # 0.75 exactly
    hundred = _words(100)
    res = omission("T", " ".join(hundred[:74]), [_fact(hundred)])  # 0.74
    assert not res.passed and res.flagged[0]["coverage"] == 0.74
    # The title counts as part of the page; stop words in the fact do not count.
    assert omission("w0word w1word w2word", "", [_fact(four)]).passed
    fact = {"address": "memo://fact/1", "predicate": "is the", "value": "of a w0word"}
    assert omission("T", "w0word", [fact]).passed


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n), min_size=0, max_size=4))
    )
)
def test_corruption_flags_exactly_below_half_of_every_source(n_ks):
    n, ks = n_ks
    words = _words(n, "s")
    sentence = " ".join(words) + "."
    sources = [_source(i, [*words[:k], "unrelated"]) for i, k in enumerate(ks)]
    result = _corruption(sentence, sources)
    best = max(ks, default=0)
    flagged = 2 * best < n
    assert result.passed is not flagged
    if flagged:
        assert result.flagged == [
            {
                "sentence": sentence,
                "overlap": round(best / n, 4),
                "best_source": f"memo://passage/{ks.index(best)}" if ks else None,
                "missing": words[best:],
            }
        ]


def _source(i: int, words: list[str]) -> Source:
    return Source(f"memo://passage/{i}", frozenset(content_words(" ".join(words))), profile(""))


def _corruption(content: str, sources: list[Source]):
    return corruption(read_citations(content, {"passages": []}), sources)


def test_corruption_boundaries():
    two = _words(2, "c")
    assert _corruption(" ".join(two), [_source(0, two[:1])]).passed  # exactly half
    many = _words(101, "c")
    res = _corruption(" ".join(many), [_source(0, many[:50])])  # 50/101
    assert not res.passed and res.flagged[0]["overlap"] == round(50 / 101, 4)
    # Headings are not sentences, so they are never flagged.
    assert _corruption("# Completely invented heading words", [_source(0, [])]).passed


# --- page sentences -------------------------------------------------------------------

sentence_words = st.lists(st.sampled_from(SHOWN), min_size=1, max_size=4)


@st.composite
def inline_sentence(draw) -> tuple[str, str]:
    """(markdown, visible text) of one sentence, maybe with a link or image."""
    ws = draw(sentence_words)
    md, vis = list(ws), list(ws)
    style = draw(st.sampled_from(["plain", "link", "image"]))
    if style != "plain":
        label = draw(sentence_words)
        target = "http://zzurl.invalid/zzpath" if style == "link" else "zzpath/zzurl.png"
        bang = "!" if style == "image" else ""
        at = draw(st.integers(0, len(md)))
        md.insert(at, f"{bang}[{' '.join(label)}]({target})")
        vis.insert(at, " ".join(label))
    return " ".join(md), " ".join(vis)


@st.composite
def prose(draw) -> tuple[str, list[str]]:
    lines, expected = [], []
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(inline_sentence(), min_size=1, max_size=3))
        md_line, ends = [], draw(st.lists(st.sampled_from(".!?"), min_size=3, max_size=3))
        last_end = draw(st.sampled_from([".", "!", "?", ""]))
        for n, (md, vis) in enumerate(parts):
            end = ends[n] if n < len(parts) - 1 else last_end
            md_line.append(md + end)
            expected.append(vis + end)
        lines.append(" ".join(md_line))
    return "\n".join(lines), expected


def _hidden_line(draw) -> str:
    return " ".join(draw(st.lists(st.sampled_from(HIDDEN), min_size=1, max_size=3)))


@st.composite
def block(draw) -> tuple[str, list[str]]:
    kind = draw(
        st.sampled_from(
            [
                "prose",
                "heading",
                "setext",
                "fenced",
                "indented",
                "comment",
                "table",
                "pipeless-table",
                "list",
                "stopwords",
            ]
        )
    )
    if kind == "prose":
        return draw(prose())
    if kind == "heading":
        return "#" * draw(st.integers(1, 6)) + " " + _hidden_line(draw), []
    if kind == "setext":
        return _hidden_line(draw) + "\n" + draw(st.sampled_from(["===", "---", "-----"])), []
    if kind == "fenced":
        fence = draw(st.sampled_from(["```", "~~~", "````"]))
        body = "\n".join(_hidden_line(draw) for _ in range(draw(st.integers(0, 3))))
        return f"{fence}python\n{body}\n\n{_hidden_line(draw)}\n{fence}", []
    if kind == "indented":
        return "\n".join("    " + _hidden_line(draw) for _ in range(draw(st.integers(1, 3)))), []
    if kind == "comment":
        return f"<!-- {_hidden_line(draw)}\n{_hidden_line(draw)} -->", []
    if kind in ("table", "pipeless-table"):
        cols = draw(st.integers(1, 3))
        rows = [[" ".join(draw(sentence_words)) for _ in range(cols)] for _ in range(3)]
        if kind == "table" or cols == 1:
            fmt = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
            sep = "|" + "|".join([draw(st.sampled_from(["---", ":--", ":-:", "--:"]))] * cols) + "|"
        else:
            fmt = lambda cells: " | ".join(cells)  # noqa: E731
            sep = " | ".join(["---"] * cols)
        text = "\n".join([fmt(rows[0]), sep, *(fmt(r) for r in rows[1:])])
        return text, [c for r in rows[1:] for c in r]  # the header row is not read
    if kind == "list":
        items = draw(st.lists(sentence_words, min_size=1, max_size=4))
        marker = draw(st.sampled_from(["- ", "* ", "+ ", "1. ", "2) "]))
        return "\n".join(marker + " ".join(i) for i in items), [" ".join(i) for i in items]
    return "the of and. It is a", []  # no content words: never a sentence


@settings(max_examples=400, deadline=None)
@given(st.lists(block(), min_size=1, max_size=6))
def test_page_sentences_follow_the_markdown_rules(blocks):
    parts = []
    for n, (md, _) in enumerate(blocks):
        if n and md.startswith("    ") and blocks[n - 1][0][:1] in "-*+12<":
            # After a list (or a comment after one), an indented block continues
            # the last item (CommonMark): a heading ends the list, so it is code.
            parts.append("# zzhead")
        parts.append(md)
    markdown = "\n\n".join(parts)
    expected = [s for _, sentences in blocks for s in sentences]
    got = page_sentences(markdown)
    assert got == expected
    for s in got:
        assert not set(s.split()) & set(HIDDEN)
        assert content_words(s)


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("# Raft\nRaft elects leaders. It keeps logs!", ["Raft elects leaders.", "It keeps logs!"]),
        ("Raft\n===\n\nBody words here.", ["Body words here."]),
        ("Raft consensus\n---\nBody words here.", ["Body words here."]),
        ("Intro words.\n\n---\n\nOutro words.", ["Intro words.", "Outro words."]),
        (
            "Version 3.5 shipped today. Next one soon",
            ["Version 3.5 shipped today.", "Next one soon"],
        ),
        ("Line one words\nline two words", ["Line one words", "line two words"]),
        ("See [the Raft paper](https://x.invalid/raft.pdf).", ["See the Raft paper."]),
        ("![Leader diagram](img/leader.png)", ["Leader diagram"]),
        ("Logs <!-- secret notes --> replicate.", ["Logs replicate."]),
        (
            "- Leaders replicate logs.\n- Followers vote",
            ["Leaders replicate logs.", "Followers vote"],
        ),
        # A table's header row is not read by the corruption check.
        ("| Term | Leader |\n|---|---|\n| 3 | node one |", ["3", "node one"]),
        ("```\nraft.start()\n```\n\n    indented.code()\n\nDone here.", ["Done here."]),
        ("It is what it is.", []),
    ],
)
def test_page_sentences_examples(markdown, expected):
    assert page_sentences(markdown) == expected


# --- what a flag does to a submission -------------------------------------------------


RAFT = [
    "[[Raft]] elects a leader with randomized election timeouts.",
    "Followers in [[Raft]] append log entries sent by the leader.",
    "[[Raft]] commits an entry once a majority has stored it.",
]


@pytest.fixture
def page_item(memory):
    for i, text in enumerate(RAFT):
        memory.remember(text, uri=f"raft-{i}")
    fact = memory.record_fact("Raft", "snapshot interval", "ten minutes").fact
    item = to_json(memory.compact(kinds=["page"]))["items"][0]
    good = "\n\n".join(p["text"] for p in item["payload"]["passages"])
    good += "\n\nThe Raft snapshot interval is ten minutes."
    return memory, item, good, fact


def _visible(text: str) -> str:
    return text.replace("[[", "").replace("]]", "")


def _page_count(memory) -> int:
    return value_of(memory, "SELECT COUNT(*) FROM pages")


def _counter(memory, kind: str, event: str) -> float:
    for line in memory.metrics().splitlines():
        if line.startswith(f'memors_store_work_items_total{{event="{event}",kind="{kind}"}}'):
            return float(line.split()[-1])
    raise AssertionError("counter missing")


def test_report_has_the_spec_shape(page_item):
    memory, item, good, _fact = page_item
    report = to_json(memory.submit(item["id"], content=good, title="Raft", dry_run=True))
    report.pop("message", None)
    assert set(report) == {"item", "kind", "status", "stored", "address", "diff", "checks"}
    assert report["item"] == item["id"] and report["kind"] == "page"
    assert report["stored"] is False and report["address"] is None
    assert set(report["checks"]) == {"omission", "corruption", "substitution"}
    for check in report["checks"].values():
        assert check == {"passed": True, "flagged": []}
    # A first page's diff is against "": every line added.
    assert report["diff"].startswith("--- previous\n+++ submitted\n")
    added = [line[1:] for line in report["diff"].splitlines()[3:]]
    assert added == good.split("\n")


def test_a_flag_refuses_and_stores_nothing(page_item):
    memory, item, good, fact = page_item
    # Drops the fact and adds an invented sentence.
    bad = good.replace(
        "The Raft snapshot interval is ten minutes.", "Zebras juggle purple volcanoes."
    )
    report = to_json(memory.submit(item["id"], content=bad, title="Raft"))
    assert report["stored"] is False and report["status"] == "open"
    assert report["checks"]["omission"]["flagged"] == [{"fact": fact, "coverage": 0.0}]
    assert report["checks"]["corruption"]["flagged"] == [
        {
            "sentence": "Zebras juggle purple volcanoes.",
            "overlap": 0.0,
            "best_source": item["payload"]["passages"][0]["address"],
            "missing": ["zebras", "juggle", "purple", "volcanoes"],
        }
    ]
    assert _page_count(memory) == 0
    assert to_json(memory.get(f"memo://item/{item['id']}"))["status"] == "open"
    assert _counter(memory, "page", "refused") == 1


def test_force_stores_with_the_flags_recorded(page_item):
    memory, item, good, _fact = page_item
    bad = good + "\n\nZebras juggle purple volcanoes."
    report = to_json(memory.submit(item["id"], content=bad, title="Raft", force=True))
    assert report["stored"] is True and report["status"] == "done"
    page = to_json(memory.get(report["address"]))
    assert page["flags"] == {
        "corruption": [
            {
                "sentence": "Zebras juggle purple volcanoes.",
                "overlap": 0.0,
                "best_source": item["payload"]["passages"][0]["address"],
                "missing": ["zebras", "juggle", "purple", "volcanoes"],
            }
        ]
    }
    assert to_json(memory.get(f"memo://item/{item['id']}"))["resolution"]["force"] is True


def test_dry_run_runs_everything_and_stores_nothing(page_item):
    memory, item, good, _fact = page_item
    before = memory.metrics()
    flagged = to_json(memory.submit(item["id"], content="Zebras juggle.", title="R", dry_run=True))
    assert flagged["stored"] is False
    assert not flagged["checks"]["corruption"]["passed"]
    clean = to_json(memory.submit(item["id"], content=good, title="Raft", dry_run=True))
    assert clean["stored"] is False and clean["status"] == "open"
    assert _page_count(memory) == 0
    assert memory.metrics() == before  # not even a refusal is counted
    # …and the real submission still goes through afterwards.
    assert memory.submit(item["id"], content=good, title="Raft").stored


def test_cites_narrow_the_sources_of_the_corruption_check(page_item):
    memory, item, good, _fact = page_item
    first = item["payload"]["passages"][0]["address"]
    report = to_json(
        memory.submit(item["id"], content=good, title="Raft", cites=[first], dry_run=True)
    )
    flagged = [f["sentence"] for f in report["checks"]["corruption"]["flagged"]]
    assert flagged == [_visible(p["text"]) for p in item["payload"]["passages"][1:]]
    with pytest.raises(BadInput, match="not among item"):
        memory.submit(item["id"], content=good, title="Raft", cites=["memo://passage/0199-x"])


def test_checks_run_on_stale_submissions_with_a_diff_against_the_old_page(page_item):
    memory, item, good, _fact = page_item
    page = memory.submit(item["id"], content=good, title="Raft").address
    first = item["payload"]["passages"][0]["address"]
    memory.forget(first, reason="wrong")
    stale = to_json(memory.compact(kinds=["stale"]))["items"][0]
    assert stale["payload"]["page"]["address"] == page
    new = good.replace(item["payload"]["passages"][0]["text"] + "\n\n", "")
    refused = to_json(
        memory.submit(stale["id"], content=new + "\n\nInvented zebra text.", title="Raft")
    )
    assert refused["stored"] is False
    assert refused["checks"]["corruption"]["flagged"][0]["sentence"] == "Invented zebra text."
    # The removed passage is no longer a source: restating it is corruption now.
    report = to_json(memory.submit(stale["id"], content=good, title="Raft", dry_run=True))
    assert [f["sentence"] for f in report["checks"]["corruption"]["flagged"]] == [
        _visible(item["payload"]["passages"][0]["text"])
    ]
    done = to_json(memory.submit(stale["id"], content=new, title="Raft"))
    assert done["stored"] is True
    assert done["diff"].startswith("--- previous\n+++ submitted\n")
    assert "-" + item["payload"]["passages"][0]["text"] in done["diff"].splitlines()
