"""Text rules (SPEC §3, §5): words, names, wiki links and passage splitting."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memors_core import text
from memors_core.text import MAX_PASSAGE_WORDS, split_passages

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
    assert text.content_words("The leader of the cluster is elected") == {
        "leader",
        "cluster",
        "elected",
    }


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
