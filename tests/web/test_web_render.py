"""The web view's page rendering (``memors_mcp.web.render``), as a function:
each recorded sentence gets its own citation links and no others, whatever
characters the page's text holds."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memors_mcp.web.render import page_html, unverified_html

pytestmark = pytest.mark.engine_independent("the page renderer on strings, no store")

SENTENCES = [
    ("Alpha ships on Monday.", ["memo://passage/a"]),
    ("Beta ships on Tuesday.", ["memo://passage/b"]),
]
NUMBERS = {"memo://passage/a": 1, "memo://passage/b": 2}


def render(content: str) -> str:
    body, unplaced = page_html(content, SENTENCES, NUMBERS, lambda a: f"/x/{a[-1]}", str)
    assert unplaced == []
    return body


def cited(body: str) -> list[str]:
    return re.findall(r'data-source="([^"]+)"', body)


def test_text_shaped_like_the_renderers_slot_shows_no_other_sentences_links() -> None:
    """The renderer marked each sentence's end with U+E010 n U+E011; a page
    holding those characters itself showed sentence n's links there (the
    issue's third web fault). Now the text is shown as it is."""
    forged = "\ue0101\ue011"
    body = render(f"Alpha ships on Monday. {forged} Beta ships on Tuesday.")
    assert cited(body) == ["memo://passage/a", "memo://passage/b"], body
    assert forged in body


# Private-use characters (the ones the renderer could use), digits and spaces.
NOISE = st.text(
    alphabet=st.sampled_from(["\ue000", "\ue001", "\ue010", "\ue011", "\uf8ff", "0", "1", " "]),
    max_size=30,
)


@settings(deadline=None)  # (the first example loads the Markdown renderer)
@given(NOISE, NOISE)
def test_any_private_use_text_keeps_each_sentence_to_its_own_links(a: str, b: str) -> None:
    body = render(f"{a} Alpha ships on Monday. {a}{b} Beta ships on Tuesday. {b}")
    assert cited(body) == ["memo://passage/a", "memo://passage/b"], body
    assert body.count('class="cites"') == 2
    for text in (a.strip(), b.strip()):
        assert text in body


def test_an_unverified_sentence_gets_its_reasons_escaped_and_no_citation() -> None:
    flags = [{"check": "<i>x</i>", "message": "the name '<script>' is in none of its sources"}]
    sentences = [SENTENCES[0], ("Beta ships on Tuesday.", ["memo://passage/b"], flags)]
    body, _ = page_html(
        "Alpha ships on Monday. Beta ships on Tuesday.", sentences, NUMBERS, str, str
    )
    assert cited(body) == ["memo://passage/a"]
    assert body.count('class="cites"') == 1
    assert "<script>" not in body and "&lt;script&gt;" in body and "&lt;i&gt;x" in body
    assert unverified_html(flags, 1) in body
