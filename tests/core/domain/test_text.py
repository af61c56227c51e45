"""Text rules (SPEC §3, §5): words, names, wiki links and passage splitting."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memors_core.domain import text
from memors_core.domain.text import MAX_PASSAGE_WORDS, split_passages

pytestmark = pytest.mark.engine_independent("pure functions of the domain layer, no store")

# --- words, names, links ---------------------------------------------------------


def test_words_are_casefolded_runs_of_letters_and_digits():
    assert text.words("Quorum-replication, v2_final: ÉTÉ straße 42!") == [
        "quorum",
        "replication",
        "v2",
        "final",
        "été",
        "strasse",
        "42",
    ]


def test_content_words_drop_the_shipped_stop_words():
    stops = text.stop_words()
    assert 100 <= len(stops) <= 200  # "about 150 words, kept as data in the package"
    assert {"the", "of", "and", "is", "it"} <= stops
    # Content words are Porter stems, so "elected" meets "elect".
    assert text.content_words("The leader of the cluster is elected") == {
        "leader",
        "cluster",
        "elect",
    }
    assert text.content_words("elects") == text.content_words("elected") == {"elect"}


def test_negations_and_quantifiers_are_content_words():
    for word in [*text.NEGATIONS, *text.QUANTIFIERS]:
        assert word not in text.stop_words()
        assert text.content_words(word) == {text.stem(word)}
    # A contraction in n't reads as "not": "doesn't" is not "does".
    assert "not" in text.content_words("It doesn't elect a leader")
    assert text.content_words("It does elect a leader") == {"elect", "leader"}


def test_names_match_case_insensitively_with_white_space_folded():
    assert text.match_key("  Quorum \t  Replication ") == text.match_key("quorum replication")
    assert text.match_key("Quorum-Replication") != text.match_key("quorum replication")
    assert text.fold_name("Quorum-Replication") == text.fold_name("quorum   replication")


def test_wiki_links_name_the_target_not_the_label():
    body = "See [[Raft]] and [[Quorum Replication|quorums]], again [[raft]], [[ Log   Shipping ]]."
    assert text.wiki_links(body) == ["Raft", "Quorum Replication", "Log Shipping"]
    assert text.wiki_links("no links [here] or [[]] or [[|label]]") == []


# --- passage splitting --------------------------------------------------------------


def test_blank_lines_separate_paragraphs():
    body = "First paragraph,\nstill first.\n\n\n  \nSecond one.\r\n\r\nThird."
    assert split_passages(body) == ["First paragraph,\nstill first.", "Second one.", "Third."]


def test_an_atx_heading_travels_with_the_paragraph_after_it():
    body = "# Raft\n\n## Elections\n\nA leader is elected.\n\nAnother paragraph.\n\n### Trailing"
    assert split_passages(body) == [
        "# Raft\n## Elections\nA leader is elected.",
        "Another paragraph.",
        "### Trailing",
    ]


def test_only_real_atx_headings_travel():
    # "#tag" (no space) and seven hashes are not headings: they are paragraphs.
    body = "#tag line\n\nText.\n\n####### seven\n\nMore."
    assert split_passages(body) == ["#tag line", "Text.", "####### seven", "More."]


def test_a_paragraph_of_400_words_is_one_passage_and_401_are_split_at_a_sentence_end():
    sentence = " ".join(["word"] * 9) + " end."  # 10 words
    exact = " ".join([sentence] * 40)  # 400 words
    assert split_passages(exact) == [exact]
    longer = exact + " Last one."
    parts = split_passages(longer)
    assert parts == [exact, "Last one."]


def test_a_heading_counts_towards_the_limit_of_the_first_chunk():
    sentence = " ".join(["word"] * 9) + " end."
    body = "# Title words\n" + " ".join([sentence] * 41)  # 3 + 410 words
    parts = split_passages(body)
    assert parts[0].startswith("# Title words\n")
    assert all(len(p.split()) <= MAX_PASSAGE_WORDS for p in parts), [len(p.split()) for p in parts]
    assert " ".join(parts).split() == body.split()


def test_a_single_sentence_longer_than_the_limit_is_cut_but_nothing_is_lost():
    body = " ".join(f"w{i}" for i in range(1000))
    parts = split_passages(body)
    assert [len(p.split()) for p in parts] == [400, 400, 200]
    assert " ".join(parts).split() == body.split()


# Documents made of realistic pieces: words, sentence ends, headings, blank lines.
_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzÀé0123456789-'’,", min_size=1, max_size=8)
_sentence = st.builds(
    lambda ws, end: " ".join(ws) + end,
    st.lists(_word, min_size=1, max_size=60),
    st.sampled_from([".", "!", "?", "", ";"]),
)
_paragraph = st.builds(
    lambda ss, nl: ("\n" if nl else " ").join(ss),
    st.lists(_sentence, min_size=1, max_size=30),
    st.booleans(),
)
_heading = st.builds(
    lambda n, ws: "#" * n + " " + " ".join(ws), st.integers(1, 6), st.lists(_word, max_size=6)
)
_block = st.one_of(_paragraph, _paragraph, _paragraph, _heading)
_document = st.builds(
    lambda blocks, seps: "".join(b + s for b, s in zip(blocks, seps, strict=False)),
    st.lists(_block, min_size=1, max_size=12),
    st.lists(st.sampled_from(["\n\n", "\n\n\n", "\n \n", "\r\n\r\n"]), min_size=12, max_size=12),
)


@settings(max_examples=150, deadline=None)
@given(_document)
def test_splitting_loses_and_reorders_no_words(document):
    parts = split_passages(document)
    assert " ".join(parts).split() == document.split()
    assert all(p.strip() for p in parts)


@settings(max_examples=150, deadline=None)
@given(_document)
def test_every_passage_is_at_most_400_words(document):
    for part in split_passages(document):
        assert len(part.split()) <= MAX_PASSAGE_WORDS


_ended_sentence = st.builds(
    lambda ws, end: " ".join(ws) + end,
    st.lists(_word, min_size=1, max_size=60),
    st.sampled_from([".", "!", "?"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ended_sentence, min_size=1, max_size=120))
def test_long_paragraphs_are_split_only_at_sentence_ends(sentences):
    paragraph = " ".join(sentences)
    parts = split_passages(paragraph)
    if len(paragraph.split()) <= MAX_PASSAGE_WORDS:
        assert parts == [paragraph]
        return
    # Every cut falls after . ! or ? (sentences here are shorter than the limit).
    for part in parts[:-1]:
        assert re.search(r"[.!?]$", part), part[-40:]


@given(st.text(max_size=300))
def test_splitting_never_fails_on_arbitrary_text(body):
    parts = split_passages(body)
    assert " ".join(parts).split() == body.split()


def test_a_pile_of_headings_longer_than_the_limit_keeps_every_word():
    body = "\n\n".join(f"# heading {i} " + "word " * 20 for i in range(30)) + "\n\nThe end."
    parts = split_passages(body)
    assert " ".join(parts).split() == body.split()


def test_a_pile_of_headings_longer_than_the_limit_is_split_too():
    # 1,000 heading lines and no paragraph: one passage of 3,000 words before.
    body = "\n".join(f"## part {i} of many" for i in range(1000))
    parts = split_passages(body)
    assert all(len(p.split()) <= MAX_PASSAGE_WORDS for p in parts)
    assert " ".join(parts).split() == body.split()
    assert len(parts) == 13  # 5,000 words in cuts of 400


# --- the splitter against a straightforward reference ----------------------------------
#
# The splitter before it was made linear (issue 13): it cut an endless sentence
# by re-slicing what was left of it (`toks = toks[room:]`), quadratic in the
# sentence's length. Its passages are the reference wherever it kept every
# passage within 400 words (a pile of headings past the limit was one passage).

_REF_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_REF_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")


def _reference_split_long(paragraph: str, reserved: int = 0) -> list[str]:
    sentences = [s for s in _REF_SENTENCE_END.split(paragraph) if s.strip()]
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    for sentence in sentences:
        toks = sentence.split()
        room = MAX_PASSAGE_WORDS - (0 if chunks else reserved)
        if current and count + len(toks) > room:
            chunks.append(" ".join(current))
            current, count = [], 0
            room = MAX_PASSAGE_WORDS
        if len(toks) <= room:
            current.append(sentence)
            count += len(toks)
            continue
        while len(toks) > room:
            chunks.append(" ".join(toks[:room]))
            toks = toks[room:]
            room = MAX_PASSAGE_WORDS
        if toks:
            current, count = [" ".join(toks)], len(toks)
    if current:
        chunks.append(" ".join(current))
    return chunks


def _reference_split_passages(text_: str) -> list[str]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text_.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    paragraphs: list[str] = []
    pending: list[str] = []
    for block in blocks:
        if all(_REF_HEADING.match(line) for line in block):
            pending.extend(block)
            continue
        paragraphs.append("\n".join([*pending, *block]))
        pending = []
    if pending:
        paragraphs.append("\n".join(pending))
    passages: list[str] = []
    for paragraph in paragraphs:
        if len(paragraph.split()) <= MAX_PASSAGE_WORDS:
            passages.append(paragraph)
            continue
        lines = paragraph.split("\n")
        head = []
        while lines and _REF_HEADING.match(lines[0]):
            head.append(lines.pop(0))
        body = " ".join(line.strip() for line in lines)
        reserved = len(" ".join(head).split())
        if head and (not body or reserved >= MAX_PASSAGE_WORDS):
            passages.append("\n".join(head))
            head, reserved = [], 0
        chunks = _reference_split_long(body, reserved)
        if head:
            chunks[0] = "\n".join([*head, chunks[0]])
        passages.extend(chunks)
    return passages


# Long sentences (up to three times the limit, ended or not), heading lines at the
# head of a block, piles of long headings, odd white space inside and between lines.
_space = st.sampled_from([" ", " ", " ", "  ", "\t", "\n", " \n", "\u00a0"])
_long_sentence = st.builds(
    lambda ws, k, end: " ".join((ws * (k // len(ws) + 1))[:k]) + end,
    st.lists(_word, min_size=1, max_size=5),
    st.integers(1, 1300),
    st.sampled_from([".", "!", "?", "", ",", ".)"]),
)
_any_sentence = st.one_of(_sentence, _sentence, _long_sentence)
_long_paragraph = st.builds(
    lambda ss, spaces: "".join(s + sp for s, sp in zip(ss, spaces, strict=False)).strip(),
    st.lists(_any_sentence, min_size=1, max_size=12),
    st.lists(_space, min_size=12, max_size=12),
)
_long_heading = st.builds(
    lambda n, w, k: "#" * n + " " + " ".join([w] * k), st.integers(1, 6), _word, st.integers(0, 450)
)
_headed_paragraph = st.builds(
    lambda hs, p: "\n".join([*hs, p]),
    st.lists(_long_heading, min_size=1, max_size=3),
    _long_paragraph,
)
_any_block = st.one_of(_long_paragraph, _long_paragraph, _headed_paragraph, _heading, _long_heading)
_any_document = st.builds(
    lambda blocks, seps: "".join(b + s for b, s in zip(blocks, seps, strict=False)),
    st.lists(_any_block, min_size=1, max_size=6),
    st.lists(st.sampled_from(["\n\n", "\n", "\n \n", "\r\n\r\n", "\r\r"]), min_size=6, max_size=6),
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_document, _any_document))
def test_the_linear_splitter_gives_the_reference_passages(document):
    expected = _reference_split_passages(document)
    parts = split_passages(document)
    if all(len(p.split()) <= MAX_PASSAGE_WORDS for p in expected):
        assert parts == expected
    else:  # only a pile of headings past the limit: now split as well
        assert all(len(p.split()) <= MAX_PASSAGE_WORDS for p in parts)
        assert " ".join(parts).split() == document.split()
