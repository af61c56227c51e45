"""A Markdown document's first `# Heading` is its default title (issue 19)."""

from __future__ import annotations

import json

import pytest

from memors_core.domain.text import first_heading


@pytest.mark.parametrize(
    ("body", "title"),
    [
        ("# Raft consensus\n\nRaft elects a leader.", "Raft consensus"),
        ("Intro line.\n\n#   Raft   consensus  ##\n\nBody.", "Raft consensus"),
        ("## Only a second level\n\nBody.", None),
        ("```\n# not a heading: code\n```\n\n# Real title\n", "Real title"),
        ("~~~~\n# in a tilde fence\n~~~\n# still fenced\n~~~~\n", None),
        ("#hashtag is not a heading\n", None),
        ("    # indented code\n", None),
        ("# \n\nAn empty heading.", None),
        ("No heading at all.", None),
    ],
)
def test_the_first_level_one_heading_outside_code_is_the_title(body, title):
    assert first_heading(body) == title


def test_remember_of_a_markdown_file_takes_its_heading_as_title(cli, tmp_path):
    doc = tmp_path / "raft.md"
    doc.write_text("# Raft consensus\n\n[[Raft]] elects a leader by majority vote.\n")
    r = cli("remember", str(doc), "--json")
    assert r.code == 0, r
    shown = cli("get", r.json["document"], "--json").json
    assert shown["title"] == "Raft consensus"
    # A title given by the caller wins.
    other = tmp_path / "paxos.md"
    other.write_text("# Paxos\n\nPaxos agrees on one value.\n")
    r = cli("remember", str(other), "--title", "Lamport's Paxos", "--json")
    assert cli("get", r.json["document"], "--json").json["title"] == "Lamport's Paxos"
    # Bulk loads do the same per document.
    lines = [{"text": "# Zab\n\nZab broadcasts.", "uri": "zab"}, {"text": "plain", "uri": "p"}]
    bulk = tmp_path / "docs.jsonl"
    bulk.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert cli("remember", "--jsonl", str(bulk)).code == 0
    titles = {
        hit["text"]: hit["address"]
        for hit in cli("search", "zab broadcasts plain", "--json").json["results"]
    }
    assert titles
    for address in titles.values():
        doc_addr = cli("get", address, "--json").json["document"]
        got = cli("get", doc_addr, "--json").json
        assert got["title"] == ("Zab" if got["uri"] == "zab" else None)
