"""``memors-mcp remember`` (SPEC §9): files, directories, standard input and
JSON lines; bulk loads one transaction per batch, with progress on a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_cli import one_line_error
from test_progress import run_on_a_terminal

from store_checks import connect


def count(cli, table: str) -> int:
    if isinstance(cli.db, Path) and not cli.db.exists():
        return 0
    conn = connect(cli.db)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_one_file_is_one_document_whose_uri_is_its_path(cli):
    note = cli.tmp / "raft.md"
    note.write_text("# Raft\n\n[[Raft]] elects a leader.\n\nLeaders send heartbeats.\n")
    r = cli("remember", "raft.md", "--entity", "Consensus", "--title", "Raft notes", "--json")
    assert r.code == 0, r
    assert set(r.json) == {"document", "passages", "entities"}
    assert len(r.json["passages"]) == 2 and len(r.json["entities"]) == 2
    doc = cli("get", r.json["document"], "--json").json
    assert (doc["uri"], doc["title"], doc["version"]) == (str(note.resolve()), "Raft notes", 1)

    # Changed text, same path: a new version; the unchanged passage stays live.
    note.write_text("# Raft\n\n[[Raft]] elects a leader.\n\nLeaders send heartbeats often.\n")
    again = cli("remember", "raft.md", "--title", "Raft notes", "--json").json
    assert again["document"] == r.json["document"]
    assert again["passages"][0] == r.json["passages"][0]
    assert cli("get", r.json["passages"][1], "--json").json["status"] == "superseded"
    assert cli("get", r.json["document"], "--json").json["version"] == 2
    # The same text again: no new version.
    cli("remember", "raft.md", "--title", "Raft notes")
    assert cli("get", r.json["document"], "--json").json["version"] == 2
    text = cli("remember", "raft.md", "--title", "Raft notes")
    assert text.out.startswith("remembered memo://document/")


def test_standard_input_with_dash_or_by_default_when_piped(cli):
    r = cli("remember", "-", "--uri", "stdin://note", "--json", input="Piped words.")
    assert r.code == 0 and len(r.json["passages"]) == 1, r
    assert cli("get", r.json["document"], "--json").json["uri"] == "stdin://note"
    r = cli("remember", "--json", input="Also piped.")
    assert r.code == 0 and len(r.json["passages"]) == 1, r
    assert count(cli, "documents") == 2


def test_directories_are_read_recursively_text_and_markdown_only(cli):
    root = cli.tmp / "notes"
    (root / "deep" / "er").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "a.md").write_text("Alpha about [[Raft]].")
    (root / "b.txt").write_text("Beta plain text.")
    (root / "deep" / "c.markdown").write_text("Gamma.\n\nDelta.")
    (root / "deep" / "er" / "d.rst").write_text("Epsilon.")
    (root / "deep" / "empty.md").write_text("  \n")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / "data.bin").write_bytes(bytes(range(256)))
    (root / "script.py").write_text("print('not a note')")
    (root / ".hidden.md").write_text("Hidden.")
    (root / ".git" / "HEAD.md").write_text("Git internals.")
    single = cli.tmp / "single.md"
    single.write_text("Zeta, given on its own.")
    r = cli("remember", "notes", "single.md", "--entity", "Notes", "--json")
    assert r.code == 0, r
    assert r.json == {
        "documents": 5,
        "passages": 6,
        "entities": 2,
        "new": 5,
        "new_versions": 0,
        "unchanged": 0,
    }
    uris = {row[0] for row in connect(cli.db).execute("SELECT uri FROM documents")}
    assert uris == {
        str(p.resolve())
        for p in [
            root / "a.md",
            root / "b.txt",
            root / "deep" / "c.markdown",
            root / "deep" / "er" / "d.rst",
            single,
        ]
    }
    assert cli("search", "hidden internals print", "--json").json["results"] == []
    text = cli("remember", "notes")  # again: nothing new, and it says so plainly
    assert text.code == 0 and "skipped 1 empty file" in text.out, text
    assert count(cli, "document_versions") == 5


def test_bad_inputs_are_one_line_errors_and_store_nothing(cli):
    (cli.tmp / "dir").mkdir()
    (cli.tmp / "dir" / "ok.md").write_text("Fine text.")
    (cli.tmp / "dir" / "binary.txt").write_bytes(b"looks like text\x00\x01\x02")
    (cli.tmp / "latin1.md").write_bytes("café crème".encode("latin-1"))
    (cli.tmp / "empty.md").write_text("")
    (cli.tmp / "blank.md").write_text("\n  \n\t\n")
    (cli.tmp / "fine.md").write_text("Fine.")
    cases = [
        (["missing.md"], "missing.md: no such file or directory"),
        (["fine.md", "missing.md"], "missing.md: no such file or directory"),
        (["dir"], "binary.txt looks binary"),
        (["latin1.md"], "latin1.md is not UTF-8 text"),
        (["empty.md"], "text is empty"),
        (["blank.md"], "text is empty"),
        (["-", "-"], "standard input (-) can be read only once"),
        (["dir", "--uri", "u"], "--uri and --title apply to one document"),
        (["--jsonl", "missing.jsonl"], "missing.jsonl: no such file"),
        (["--jsonl", "dir"], "dir is a directory"),
        (["fine.md", "--entity", " "], "an entity name must not be empty"),
        (["fine.md", "--uri", "u" * 10_001], "uri is too long"),
    ]
    for args, says in cases:
        r = cli("remember", *args, "--json", input="")
        line = one_line_error(r)
        assert says in line, (args, r)
        assert json.loads(r.out)["error"]["message"] in line
    proc = subprocess.run(
        [sys.executable, "-m", "memors_cli", "remember", "-"],
        input=b"\xff\xfe not utf-8",
        capture_output=True,
        env={**os.environ, "MEMORS_DB": str(cli.db)},
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == (
        "memors-mcp: standard input is not UTF-8 text (bad byte at offset 0)"
    )
    assert count(cli, "documents") == 0


def _jsonl(path: Path, n: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            doc = {
                "text": f"Document {i} covers replication round {i} on [[Node {i % 25}]].",
                "uri": f"doc-{i}",
            }
            if i % 10 == 0:
                doc["metadata"] = {"n": i}
            f.write(json.dumps(doc) + "\n")


def test_a_5000_document_jsonl_file_loads_and_is_searchable(cli):
    _jsonl(cli.tmp / "big.jsonl", 5000)
    r = cli("remember", "--jsonl", "big.jsonl", "--json")
    assert r.code == 0, r
    assert r.json == {
        "documents": 5000,
        "passages": 5000,
        "entities": 25,
        "new": 5000,
        "new_versions": 0,
        "unchanged": 0,
    }
    # (That a load commits once per batch, not per document, is counted by
    # tests/core/test_memory.py::test_remember_many_returns_counts_and_commits_once_per_batch;
    # speed is measured in benchmarks/.)
    assert count(cli, "passages") == 5000
    hits = cli("search", "round 4321", "--json").json["results"]
    assert hits and "round 4321 " in hits[0]["text"]


def test_a_malformed_jsonl_line_is_named_file_colon_line(cli):
    lines = [json.dumps({"text": f"Line {i}."}) for i in range(1, 8)]
    cases = {
        4: ('{"text": "unterminated', "not valid JSON"),
        5: ('["a", "list"]', "each line must be a JSON object"),
        6: ('{"text": ""}', "text is empty"),
        7: ('{"text": "x", "colour": "red"}', "unexpected field(s) colour"),
        3: ('{"text": "x", "entities": [7]}', "an entity name must be a string"),
    }
    for n, (bad, says) in cases.items():
        body = [*lines[: n - 1], bad, *lines[n:]]
        if n == 6:
            body.insert(1, "")  # blank lines are skipped but still counted
            n += 1
        path = cli.tmp / f"bad{n}.jsonl"
        path.write_text("\n".join(body) + "\n")
        before = count(cli, "documents")
        r = cli("remember", "--jsonl", path.name)
        line = one_line_error(r)
        assert line.startswith(f"memors-mcp: {path.name}:{n}: "), line
        assert says in line, line
        stored = n - 1 - (1 if "" in body[: n - 1] else 0)
        assert f"the {stored} document(s) before it were stored" in line, line
        assert count(cli, "documents") - before == stored


def test_jsonl_from_stdin_and_entities_added_to_each(cli):
    body = "\n".join(
        [
            json.dumps({"text": "One about [[Raft]].", "entities": "Paxos", "title": "t1"}),
            json.dumps({"text": "Two.", "metadata": {"source": "test"}}),
        ]
    )
    r = cli("remember", "--jsonl", "-", "--entity", "Consensus", "--json", input=body)
    assert r.json == {
        "documents": 2,
        "passages": 2,
        "entities": 3,
        "new": 2,
        "new_versions": 0,
        "unchanged": 0,
    }, r
    names = {e["name"]: e["passages"] for e in cli("entity", "list", "--json").json["entities"]}
    assert names == {"Consensus": 2, "Paxos": 1, "Raft": 1}


# --- progress on a terminal ------------------------------------------------------------------


def test_a_bulk_load_shows_progress_on_a_terminal_and_none_otherwise(cli):
    _jsonl(cli.tmp / "big.jsonl", 1500)
    status, _frames, screen, _out = run_on_a_terminal(cli, "remember", "--jsonl", "big.jsonl")
    assert status == 0, screen
    assert "\rremembering: " in screen, screen  # rewritten in place (tests/cli/test_progress.py)
    assert "remembering: 1,500 documents" in screen, screen
    assert "remembered 1500 document(s)" in screen

    # Not a terminal: the same load prints no progress at all.
    _jsonl(cli.tmp / "more.jsonl", 1500)
    (cli.tmp / "more.jsonl").write_text((cli.tmp / "more.jsonl").read_text().replace("doc-", "x-"))
    r = cli("remember", "--jsonl", "more.jsonl")
    assert r.code == 0, r
    assert r.err == ""
    assert "remembering" not in r.out and "\r" not in r.out
