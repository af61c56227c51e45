"""Hostile input: arbitrary text, bytes, JSON, Markdown, addresses, dates and queries.

Fed to the library (``Memory``), the CLI (real subprocesses) and the MCP
tools (in-process ``mcp.Client``). Whatever comes in: no traceback, no
crash, a clear error or a normal answer, and a refused call writes nothing
(every table's row count unchanged; ``integrity_check`` ok). The explicit
limits (``memors_core.memory.Limits``) each give a clear error naming their
environment variable, and the variable moves them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from jsonrpc import initialize
from memors_core import MemorsError, Memory
from memors_core.domain import text
from memors_core.settings import Limits
from memors_core.storage.sqlite.search import fts_query
from memors_core.testing import passages_about
from memors_mcp.server import build_server
from store_checks import (
    connect,
    is_postgres,
    open_store_problems,
    rows_of,
    store_problems,
    value_of,
)

# --- strategies --------------------------------------------------------------------------------

WEIRD = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\u202e",
    "\ufeff",
    "🙂" * 3,
    "日本語",
    "NaN",
    "null",
    "-1",
    "0",
    "99999999999999999999",
    "1e3",
    "[[x]]",
    "[[",
    "]]",
    "[[a|b]]",
    "memo://",
    "memo://page/",
    "memo://item/0",
    "memo://item/-1",
    "memo://item/99999999999999999999",
    "memo://fact/00000000-0000-7000-8000-000000000000",
    "memo://passage/../../etc/passwd",
    "MEMO://PAGE/X",
    '"',
    "'; DROP TABLE passages; --",
    "NEAR(a b)",
    "a OR",
    "*",
    "^x",
    "col:x",
    "0001-01-01",
    "9999-12-31",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "2024-02-30",
    "2024-01-01T25:00",
    "2024-W01",
    "2024-01-01T00:00:00+99:00",
    "\n# heading\n",
    "```\ncode",
    "<!-- x -->",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "x" * 300,
    "word " * 500,
]

MARKDOWN_PIECES = [
    "# Title",
    "## Sub heading",
    "######",
    "```python\nprint(1)\n```",
    "```\nunclosed fence",
    "    indented code",
    "<!-- comment -->",
    "| a | b |",
    "|---|---|",
    "- item one",
    "1. item",
    "> quote",
    "![img](http://x.invalid/a.png)",
    "[link](memo://page/x)",
    "[[Wiki Link]]",
    "[[Name|label]]",
    "[[ ]]",
    "Sentence one. Sentence two! Really?",
    "\u202eevil",
    "\r\n\r\n",
    "\t\t",
]

text_like = st.one_of(
    st.text(max_size=200),
    st.text(min_size=1, max_size=200).map(lambda t: f"{t} [[{t[:20]}]] words"),
    st.sampled_from(WEIRD),
    st.lists(st.sampled_from(MARKDOWN_PIECES), max_size=8).map("\n\n".join),
    st.lists(st.one_of(st.sampled_from(MARKDOWN_PIECES), st.text(max_size=30)), max_size=6).map(
        "\n".join
    ),
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text_like,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
anything = st.one_of(text_like, st.binary(max_size=40), json_value)
maybe = st.one_of(st.none(), anything)
mostly_text = st.one_of(text_like, text_like, text_like, anything)  # valid more often than not
maybe_text = st.one_of(st.none(), mostly_text)


def often_none(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), st.none(), strategy)


def mostly(valid: st.SearchStrategy, hostile: st.SearchStrategy) -> st.SearchStrategy:
    """Valid three times in four, so calls get past the first check often enough."""
    return st.one_of(valid, valid, valid, hostile)


words = st.lists(
    st.sampled_from(["raft", "leader", "Raft", "n1", "log", "quorum", "é", "日本"]),
    min_size=1,
    max_size=4,
).map(" ".join)


TYPES = ["document", "passage", "entity", "fact", "page", "item", "nope", ""]
address_like = st.one_of(
    text_like,
    st.builds(lambda t, i: f"memo://{t}/{i}", st.sampled_from(TYPES), text_like),
    st.integers(),
    anything,
)
WEIRD_DATES = [w for w in WEIRD if w[:1].isdigit()]
date_like = st.one_of(
    st.none(),
    text_like,
    st.sampled_from(WEIRD_DATES),
    st.dates().map(str),
    st.datetimes().map(lambda d: d.isoformat()),
    st.builds(
        lambda d, h: f"{d.isoformat()}{h}",
        st.datetimes(),
        st.sampled_from(["Z", "+14:00", "-14:00", "+00:00", "+23:59"]),
    ),
)
namespace_like = st.one_of(
    st.just("default"),
    st.just("default"),
    st.sampled_from(["other", "a" * 64, "a" * 65, "bad ns", ""]),
    anything,
)

# --- the store: a snapshot of every table -------------------------------------------------------


def row_counts(memory: Memory) -> dict[str, int]:
    """Rows of every table except the counters' (refusals are counted, on purpose)."""
    names = [r[0] for r in rows_of(memory, TABLES[memory.store.engine])]
    return {n: value_of(memory, f'SELECT COUNT(*) FROM "{n}"') for n in names}


#: Every table but the counters', per engine.
TABLES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
    "AND name <> 'counters'",
    "postgres": "SELECT table_name FROM information_schema.tables WHERE table_schema = "
    "current_schema() AND table_type = 'BASE TABLE' "
    "AND table_name NOT IN ('counters', 'counter_shards')",
}
#: The counters as one row each (PostgreSQL's namespaces' shards summed in).
COUNTERS = {
    "sqlite": "SELECT name, kind, event, value FROM counters",
    "postgres": "SELECT name, kind, event, SUM(value)::bigint FROM (SELECT name, kind, event, "
    "value FROM counters UNION ALL SELECT name, kind, event, value FROM counter_shards) c "
    "GROUP BY name, kind, event",
}


def counter_values(memory: Memory) -> dict[tuple, int]:
    return {(n, k, e): v for n, k, e, v in rows_of(memory, COUNTERS[memory.store.engine])}


def assert_untouched(memory: Memory, before: dict[str, int], counters_before: dict) -> None:
    assert row_counts(memory) == before, "a refused call wrote rows"
    after = counter_values(memory)
    changed = {
        k for k in set(after) | set(counters_before) if after.get(k) != counters_before.get(k)
    }
    assert all(k[2] == "refused" for k in changed), changed


def integrity_ok(memory: Memory) -> None:
    assert open_store_problems(memory) == []


def seeded(path: Path) -> tuple[Memory, dict[str, Any]]:
    """A store with one of everything, and the addresses to aim at."""
    memory = Memory.open(path)
    doc = memory.remember("\n\n".join(passages_about("Raft", 3)), uri="raft", entities=["Raft"])
    fact = memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01")
    memory.record_fact("Raft", "leader", "n2")
    memory.remember("A log replication protocol.", entities=["Raft consensus"])
    memory.propose_merge(["Raft", "Raft consensus"])
    queue = memory.compact()
    page_item = next(i for i in queue.items if i.kind == "page")
    content = "\n".join(p.replace("[[", "").replace("]]", "") for p in passages_about("Raft", 3))
    page = memory.submit(
        page_item.id, content=content + "\nleader n1. leader n2.", title="Raft", force=True
    )
    memory.compact()
    known = {
        "addresses": [doc.document, *doc.passages, *doc.entities, fact.fact, page.address],
        "items": [i.id for i in memory.items().items],
    }
    known["addresses"] += [f"memo://item/{i}" for i in known["items"]]
    return memory, known


# --- the library ---------------------------------------------------------------------------------


@st.composite
def library_calls(draw, known: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    addr = st.one_of(address_like, st.sampled_from(known["addresses"]))
    addr = st.one_of(addr, st.sampled_from(known["addresses"]))
    item = st.one_of(st.sampled_from(known["items"]), address_like)
    ns = namespace_like
    name = draw(
        st.sampled_from(
            [
                "remember",
                "record_fact",
                "propose_merge",
                "search",
                "get",
                "forget",
                "compact",
                "submit",
                "entity",
                "facts",
                "items",
                "purge",
            ]
        )
    )
    calls = {
        "remember": lambda: {
            "text": draw(mostly_text),
            "uri": draw(maybe_text),
            "title": draw(maybe_text),
            "entities": draw(st.one_of(st.none(), st.lists(mostly_text, max_size=3), anything)),
            "metadata": draw(st.one_of(st.none(), json_value)),
        },
        "record_fact": lambda: {
            "subject": draw(mostly(words, anything)),
            "predicate": draw(mostly(words, anything)),
            "value": draw(mostly_text),
            "valid_from": draw(mostly(st.none(), date_like)),
            "valid_to": draw(mostly(st.none(), date_like)),
            "source": draw(mostly(st.none(), addr)),
        },
        "propose_merge": lambda: {
            "entities": draw(st.one_of(st.lists(anything, max_size=3), anything))
        },
        "search": lambda: {
            "query": draw(mostly(words, anything)),
            "granularity": draw(
                mostly(st.sampled_from(["passage", "page", "fact", "entity", "all"]), anything)
            ),
            "limit": draw(mostly(st.integers(1, 1000), st.one_of(st.integers(), anything))),
            "as_of": draw(mostly(st.none(), date_like)),
        },
        "get": lambda: {"address": draw(addr)},
        "forget": lambda: {"address": draw(addr), "reason": draw(maybe_text)},
        "compact": lambda: {
            "kinds": draw(st.one_of(st.none(), st.lists(anything, max_size=3), anything)),
            "limit": draw(st.one_of(st.none(), st.integers(), anything)),
        },
        "submit": lambda: {
            "item": draw(item),
            "resolution": draw(st.one_of(st.none(), json_value)),
            "dry_run": draw(st.one_of(st.booleans(), anything)),
            "force": draw(st.one_of(st.booleans(), anything)),
            **draw(
                st.dictionaries(
                    st.sampled_from(
                        ["content", "title", "cites", "keep", "accept", "reject", "skip", "reason"]
                    ),
                    anything,
                    max_size=4,
                )
            ),
        },
        "entity": lambda: {"name": draw(mostly_text)},
        "facts": lambda: {"subject": draw(maybe_text)},
        "items": lambda: {"kind": draw(maybe), "status": draw(maybe)},
        "purge": lambda: {"address": draw(addr)},
    }
    args = calls[name]()
    if draw(st.integers(0, 3)) == 0:
        args["namespace"] = draw(ns)
    return name, args


def test_the_library_answers_or_refuses_cleanly_and_a_refusal_writes_nothing(
    fresh_store, tmp_path: Path
):
    memory, known = seeded(fresh_store("hostile.db"))
    outcomes: Counter[str] = Counter()

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
    @given(call=library_calls(known))
    def run(call: tuple[str, dict[str, Any]]) -> None:
        name, args = call
        before, counters_before = row_counts(memory), counter_values(memory)
        try:
            getattr(memory, name)(**args)
        except MemorsError as exc:
            outcomes[f"{name} refused"] += 1
            assert exc.message and "\n" not in exc.message.strip(), exc.message
            assert_untouched(memory, before, counters_before)
        else:
            outcomes[f"{name} ok"] += 1

    try:
        run()
        integrity_ok(memory)
    finally:
        memory.close()
    print(dict(sorted(outcomes.items())))
    assert sum(n for k, n in outcomes.items() if k.endswith("ok")) >= 5, outcomes


def test_bulk_remember_of_hostile_documents_stores_whole_batches_or_names_the_bad_one(
    fresh_store,
    tmp_path: Path,
):
    memory = Memory.open(fresh_store("bulk.db"))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        docs=st.lists(
            st.one_of(
                json_value,
                st.fixed_dictionaries(
                    {"text": anything},
                    optional={"uri": maybe, "entities": anything, "metadata": json_value},
                ),
            ),
            max_size=6,
        )
    )
    def run(docs: list[Any]) -> None:
        before = row_counts(memory)
        try:
            out = memory.remember_many(docs, batch=2)
        except MemorsError as exc:
            # the bad one is named, and everything before it (nothing after) was stored
            bad = int(re.match(r"document (\d+): ", exc.message)[1])
            said = re.search(r"the (\d+) document\(s\) before it were stored", exc.message)
            assert said and int(said[1]) == bad - 1, exc.message
            assert row_counts(memory)["documents"] - before["documents"] <= bad - 1
        else:
            assert out.documents == len(docs)

    try:
        run()
        integrity_ok(memory)
    finally:
        memory.close()


def test_odd_but_valid_text_is_stored_whole_and_found_again(fresh_store, tmp_path: Path):
    memory = Memory.open(fresh_store("valid.db"))
    valid = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=1,
        max_size=300,
    ).filter(str.strip)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=valid, title=st.one_of(st.none(), valid), uri=st.one_of(st.none(), valid))
    def run(body: str, title: str | None, uri: str | None) -> None:
        stored = memory.remember(body, uri=uri, title=title)
        doc = memory.get(stored.document)
        assert doc.title == title and doc.uri == uri
        # every word of the text is in its passages, in order
        kept = " ".join(memory.get(p).text for p in doc.passages)
        assert text.words(kept) == text.words(body)
        # a search for its words finds it (checked for ASCII text: FTS5's unicode61
        # tokenizer knows Unicode 6.1, so newer letters split words differently)
        if body.isascii() and fts_query(body[:200]):
            hits = memory.search(body[:200], limit=1000).results
            assert set(doc.passages) & {h.address for h in hits}

    try:
        run()
        integrity_ok(memory)
    finally:
        memory.close()


# --- the limits -----------------------------------------------------------------------------------


def open_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Memory:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Memory.open(tmp_path / "limits.db")


def refused_cleanly(memory: Memory, call, setting: str) -> str:
    before, counters_before = row_counts(memory), counter_values(memory)
    with pytest.raises(MemorsError) as err:
        call()
    assert setting in err.value.message, err.value.message
    assert_untouched(memory, before, counters_before)
    return err.value.message


def test_the_default_limits_are_generous():
    limits = Limits()
    assert limits.document_bytes == 10 * 1024 * 1024
    assert limits.passages_per_document == 100_000
    assert limits.page_bytes == 1024 * 1024
    assert limits.query_chars == 10_000
    assert limits.field_chars == 10_000


def test_document_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(tmp_path, monkeypatch, MEMORS_MAX_DOCUMENT_BYTES="100")
    memory.remember("x" * 100)  # at the limit: fine
    message = refused_cleanly(
        memory, lambda: memory.remember("x" * 101), "MEMORS_MAX_DOCUMENT_BYTES"
    )
    assert "101 bytes" in message
    # bytes of UTF-8, not characters
    refused_cleanly(memory, lambda: memory.remember("é" * 51), "MEMORS_MAX_DOCUMENT_BYTES")
    with pytest.raises(MemorsError, match="document 2: document too large"):
        memory.remember_many([{"text": "ok"}, {"text": "y" * 101}])
    memory.close()


def test_passages_per_document_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(tmp_path, monkeypatch, MEMORS_MAX_PASSAGES="3")
    memory.remember("one.\n\ntwo.\n\nthree.")
    message = refused_cleanly(
        memory, lambda: memory.remember("one.\n\ntwo.\n\nthree.\n\nfour."), "MEMORS_MAX_PASSAGES"
    )
    assert "4 passages" in message
    memory.close()


def test_page_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(tmp_path, monkeypatch, MEMORS_MAX_PAGE_BYTES="300")
    for p in passages_about("Raft", 3):
        memory.remember(p)
    item = memory.compact(kinds=["page"]).items[0]
    first = item.payload["passages"][0]["text"].replace("[[", "").replace("]]", "")
    big = (first + "\n") * (301 // len(first) + 1)
    message = refused_cleanly(
        memory, lambda: memory.submit(item.id, content=big, title="Raft"), "MEMORS_MAX_PAGE_BYTES"
    )
    assert "page too large" in message
    assert memory.get(f"memo://item/{item.id}").status == "open"
    assert memory.submit(item.id, content=first, title="Raft").stored
    memory.close()


def test_query_length_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(tmp_path, monkeypatch, MEMORS_MAX_QUERY_CHARS="20")
    assert memory.search("q" * 20).results == []
    message = refused_cleanly(memory, lambda: memory.search("q" * 21), "MEMORS_MAX_QUERY_CHARS")
    assert "query too long (21 characters; at most 20" in message
    memory.close()


def test_field_length_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(tmp_path, monkeypatch, MEMORS_MAX_FIELD_CHARS="10")
    memory.remember("text", title="t" * 10)
    refused_cleanly(
        memory, lambda: memory.remember("text", title="t" * 11), "MEMORS_MAX_FIELD_CHARS"
    )
    refused_cleanly(
        memory, lambda: memory.record_fact("Raft", "p", "v" * 11), "MEMORS_MAX_FIELD_CHARS"
    )
    memory.close()


@pytest.mark.parametrize(
    "setting",
    [
        "MEMORS_MAX_DOCUMENT_BYTES",
        "MEMORS_MAX_PASSAGES",
        "MEMORS_MAX_PAGE_BYTES",
        "MEMORS_MAX_QUERY_CHARS",
        "MEMORS_MAX_FIELD_CHARS",
    ],
)
@pytest.mark.parametrize("value", ["lots", "0", "-5", "1.5"])
def test_a_bad_limit_setting_is_a_clear_error(
    fresh_store, tmp_path: Path, monkeypatch, setting, value
):
    monkeypatch.setenv(setting, value)
    with pytest.raises(MemorsError, match=setting):
        Memory.open(fresh_store("bad.db"))


# --- the CLI, as real processes ---------------------------------------------------------------------

arg_text = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=60,
    ),
    st.sampled_from(
        [w for w in WEIRD if "\x00" not in w and not any(0xD800 <= ord(c) < 0xE000 for c in w)]
    ),
    st.sampled_from(["--json", "--yes", "-", "--ns", "--db", "--limit", "--", "-x", "--help"]),
)
arg_bytes = st.binary(min_size=1, max_size=20).filter(lambda b: b"\x00" not in b)


def _stays_in_cwd(arg: str | bytes) -> bool:
    """An argument taken as a path (--db, backup) must land in the test's folder."""
    text = arg.decode("latin-1") if isinstance(arg, bytes) else arg
    return not text.startswith(("/", "~", ".."))


an_arg = st.one_of(arg_text, arg_text, arg_text, arg_bytes).filter(_stays_in_cwd)

SUBCOMMANDS = [
    ["remember", "-"],
    ["remember", "FILE"],
    ["remember", "--jsonl", "FILE"],
    ["search"],
    ["get"],
    ["forget"],
    ["fact", "add"],
    ["fact", "list"],
    ["entity", "list"],
    ["entity", "show"],
    ["entity", "propose-merge"],
    ["compact", "--limit"],
    ["compact", "--kinds"],
    ["items"],
    ["items", "show"],
    ["submit"],
    ["submit", "ITEM", "--content-file", "FILE", "--title"],
    ["submit", "ITEM", "--keep"],
    ["submit", "ITEM", "--skip", "--reason"],
    ["purge"],
    ["import", "FILE"],
    ["lint"],
    ["metrics"],
]

jsonl_line = st.one_of(
    json_value.map(lambda v: json.dumps(v)),
    st.fixed_dictionaries({"text": mostly_text}, optional={"uri": maybe, "entities": anything}).map(
        lambda d: json.dumps(d, default=repr)
    ),
    st.text(max_size=40),
)


def db_rows(db: Path) -> dict[str, int]:
    conn = connect(db)
    try:
        names = [r[0] for r in conn.execute(TABLES["postgres" if is_postgres(db) else "sqlite"])]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def test_the_cli_answers_hostile_arguments_with_one_line_and_no_partial_write(
    fresh_store, tmp_path: Path
):
    db = fresh_store("cli.db")
    memory, known = seeded(db)
    memory.close()
    env = {**os.environ, "MEMORS_DB": str(db)}
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    seen: Counter[int] = Counter()

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        command=st.sampled_from(SUBCOMMANDS),
        args=st.lists(st.one_of(an_arg, st.sampled_from(known["addresses"])), max_size=4),
        file_body=st.one_of(
            st.binary(max_size=300),
            mostly_text.map(lambda t: t if isinstance(t, str) else repr(t)).map(
                lambda t: t.encode("utf-8", "surrogatepass")
            ),
            st.lists(jsonl_line, max_size=5).map(
                lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")
            ),
        ),
        stdin=st.binary(max_size=200),
        item=st.one_of(st.sampled_from([str(i) for i in known["items"]]), an_arg),
        json_flag=st.booleans(),
    )
    def run(command, args, file_body, stdin, item, json_flag) -> None:
        path = tmp_path / "input.txt"
        path.write_bytes(file_body)
        argv = [str(path) if a == "FILE" else item if a == "ITEM" else a for a in command]
        argv += args + (["--json"] if json_flag else [])
        before = db_rows(db)
        proc = subprocess.run(
            [sys.executable.encode(), b"-m", b"memors_cli", *map(_arg_bytes, argv)],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=tmp_path,  # a stray PATH argument (backup, files) lands here
            timeout=120,
        )
        err = proc.stderr.decode("utf-8", "replace")
        seen[proc.returncode] += 1
        assert proc.returncode in (0, 1, 2), err
        assert "Traceback" not in err and "internal error" not in err, err
        if proc.returncode == 2 and "--help" not in argv:
            assert len(err.strip().splitlines()) == 1, err
        if proc.returncode != 0:
            after = db_rows(db)
            said = re.search(r"the (\d+) document\(s\) before it were stored", err)
            if said:  # a bulk load keeps what came before the bad document, and says so
                assert after["documents"] - before["documents"] <= int(said[1])
            else:
                assert after == before, (argv, err)

    run()
    print(dict(seen))
    assert store_problems(db) == []


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _arg_bytes(arg: str | bytes) -> bytes:
    return arg if isinstance(arg, bytes) else arg.encode("utf-8", "surrogateescape")


# --- the MCP tools, in-process ------------------------------------------------------------------

TOOL_ARGS = {
    "remember": ["text", "uri", "title", "entities", "metadata"],
    "record_fact": ["subject", "predicate", "value", "valid_from", "valid_to", "source"],
    "propose_merge": ["entities"],
    "search": ["query", "granularity", "limit", "as_of"],
    "get": ["address"],
    "forget": ["address", "reason"],
    "compact": ["kinds", "limit"],
    "submit": [
        "item", "content", "title", "cites", "keep", "accept", "reject", "skip", "reason",
        "dry_run", "force", "resolution", "fingerprint",
    ],
    "lint": [],
}  # fmt: skip


REQUIRED = {
    "remember": ["text"],
    "record_fact": ["subject", "predicate", "value"],
    "propose_merge": ["entities"],
    "search": ["query"],
    "get": ["address"],
    "forget": ["address"],
    "submit": ["item"],
}


@st.composite
def tool_calls(draw, known: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(sorted(TOOL_ARGS)))
    names = TOOL_ARGS[tool] + ["namespace"]
    chosen = REQUIRED.get(tool, []) + draw(
        st.lists(st.sampled_from(names), unique=True, max_size=3)
    )
    addresses = st.sampled_from(known["addresses"])
    valid = {
        "address": addresses,
        "source": addresses,
        "keep": st.one_of(addresses, st.lists(addresses, max_size=2)),
        "cites": st.lists(addresses, max_size=2),
        "item": st.sampled_from(known["items"]),
        "limit": st.integers(0, 50),
        "granularity": st.sampled_from(["passage", "page", "fact", "entity", "all"]),
        "entities": st.lists(words, min_size=2, max_size=2),
        "kinds": st.lists(st.sampled_from(["page", "stale", "merge", "conflict"]), max_size=2),
        "valid_from": date_like,
        "valid_to": date_like,
        "as_of": date_like,
        "namespace": namespace_like,
        "metadata": st.dictionaries(st.text(max_size=5), json_value, max_size=2),
        "resolution": st.dictionaries(st.sampled_from(["keep", "reject", "skip"]), json_value),
    }
    args = {}
    for name in dict.fromkeys(chosen):
        good = valid.get(name, st.booleans() if name in FLAGS else words)
        args[name] = draw(mostly(good, st.one_of(json_value, addresses)))
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.text(max_size=8))] = draw(json_value)  # an unknown argument
    return tool, _sendable(args)


def _sendable(value: Any) -> Any:
    """What a JSON client can send at all: no bytes, no lone surrogates (the SDK's
    client refuses those before the server sees them)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_sendable(v) for v in value]
    if isinstance(value, dict):
        return {_sendable(k): _sendable(v) for k, v in value.items()}
    return value


FLAGS = {"accept", "reject", "skip", "dry_run", "force"}


def test_mcp_tools_answer_hostile_arguments_with_tool_errors_and_no_partial_write(
    fresh_store, tmp_path: Path
):
    memory, known = seeded(fresh_store("mcp.db"))
    seen: Counter[str] = Counter()

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        calls=st.lists(tool_calls(known), min_size=1, max_size=12),
        uris=st.lists(
            st.builds(lambda t, i: f"memo://{t}/{i}", st.sampled_from(TYPES), text_like).filter(
                _encodable  # (the client cannot send lone surrogates at all)
            ),
            max_size=3,
        ),
    )
    def run(calls, uris) -> None:
        async def session() -> None:
            async with Client(build_server(memory)) as client:
                for tool, args in calls:
                    before, counters_before = row_counts(memory), counter_values(memory)
                    result = await client.call_tool(tool, args)
                    message = " ".join(c.text for c in result.content if hasattr(c, "text"))
                    assert "Error executing tool" not in message, (tool, args, message)
                    if result.is_error:
                        seen["error"] += 1
                        assert message.strip(), (tool, args)
                        assert_untouched(memory, before, counters_before)
                    else:
                        seen["ok"] += 1
                        assert isinstance(result.structured_content, dict)
                for uri in uris:
                    try:
                        await client.read_resource(uri)
                    except MCPError as exc:
                        assert exc.error.code != -32603, (uri, exc)  # not an internal error
                    except ValidationError:
                        pass  # not a URI at all: the client refuses to send it

        anyio.run(session)

    try:
        run()
        integrity_ok(memory)
    finally:
        memory.close()
    print(dict(seen))
    assert seen["ok"] and seen["error"]


def one_line(r) -> str:
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1 and "Traceback" not in r.err, r
    return lines[0]


def test_the_limits_through_the_cli(cli):
    small = {"MEMORS_MAX_DOCUMENT_BYTES": "100"}
    assert cli("remember", "-", input="x" * 100, extra_env=small).code == 0
    assert "MEMORS_MAX_DOCUMENT_BYTES" in one_line(
        cli("remember", "-", input="x" * 101, extra_env=small)
    )
    few = {"MEMORS_MAX_PASSAGES": "2"}
    assert "MEMORS_MAX_PASSAGES" in one_line(
        cli("remember", "-", input="a.\n\nb.\n\nc.", extra_env=few)
    )
    short = {"MEMORS_MAX_QUERY_CHARS": "5"}
    assert cli("search", "abcde", extra_env=short).code == 0
    assert "MEMORS_MAX_QUERY_CHARS" in one_line(cli("search", "abcdef", extra_env=short))
    for p in passages_about("Raft", 3):
        cli("remember", "-", input=p)
    item = cli("compact", "--kinds", "page", "--json").json["items"][0]
    (cli.tmp / "page.md").write_text(item["payload"]["passages"][0]["text"] * 5)
    r = cli(
        "submit", str(item["id"]), "--content-file", "page.md", "--title", "Raft",
        extra_env={"MEMORS_MAX_PAGE_BYTES": "100"},
    )  # fmt: skip
    assert "MEMORS_MAX_PAGE_BYTES" in one_line(r)
    assert cli("items", "show", str(item["id"]), "--json").json["status"] == "open"
    assert "must be a positive integer" in one_line(
        cli("search", "x", extra_env={"MEMORS_MAX_QUERY_CHARS": "0"})
    )
    assert cli("search", "abcdef").code == 0  # the default is generous


def test_the_limits_through_mcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    memory = open_with(
        tmp_path, monkeypatch, MEMORS_MAX_DOCUMENT_BYTES="100", MEMORS_MAX_QUERY_CHARS="5"
    )

    async def session() -> list[str]:
        async with Client(build_server(memory)) as client:
            out = []
            for tool, args in (
                ("remember", {"text": "x" * 101}),
                ("search", {"query": "abcdef"}),
            ):
                result = await client.call_tool(tool, args)
                assert result.is_error
                out.append(result.content[0].text)
            assert not (await client.call_tool("remember", {"text": "x" * 100})).is_error
            return out

    try:
        big, long_query = anyio.run(session)
    finally:
        memory.close()
    assert "MEMORS_MAX_DOCUMENT_BYTES" in big and "MEMORS_MAX_QUERY_CHARS" in long_query


def test_the_stdio_server_survives_hostile_json_rpc_on_the_wire(fresh_store, tmp_path: Path):
    """What the SDK's client would never send: broken JSON, lone surrogates, odd numbers."""
    env = {**os.environ, "MEMORS_DB": str(fresh_store("wire.db"))}
    env.pop("MEMORS_DISABLE_PLUGINS", None)
    init = initialize("hostile")

    def call(n: int, name: str, arguments: Any) -> str:
        return json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call",
             "params": {"name": name, "arguments": arguments}}
        )  # fmt: skip

    # Lines the SDK's transport cannot parse get an error reply (a parse error, or an
    # error with their id when it can be read: tests/mcp_server/test_mcp_hostile.py checks those),
    # and the server must simply go on serving.
    unparseable = [
        "{not json",
        "[]",
        "null",
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", '
        '"arguments": {"text": "lone \\ud800 surrogate"}}}',
    ]
    hostile = [
        call(2, "search", {"query": "\ud83d\ude00 \\u0000 \u202e", "limit": 1e308}),
        call(3, "submit", {"item": 10**30, "skip": True, "reason": "x"}),
        call(4, "get", {"address": {"nested": ["memo://page/x"]}}),
        call(5, "remember", {"text": "x", "metadata": {"a": [[[[[[[[[[1]]]]]]]]]]}}),
        call(6, "no_such_tool", {}),
        call(
            7,
            "record_fact",
            {
                "subject": "S",
                "predicate": "p",
                "value": "v",
                "valid_from": "0001-01-01T00:00:00+14:00",
            },
        ),
        '{"jsonrpc": "2.0", "id": 8, "method": "ping"}',
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(init) + "\n")
    proc.stdin.flush()
    proc.stdout.readline()
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    replies = []
    for line in unparseable:
        proc.stdin.write(line + "\n")
    for line in hostile:  # one at a time, as a client does: wait for each answer
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        wanted = re.match(r'\{"jsonrpc": "2.0", "id": (\d+)', line)
        while wanted:
            replies.append(json.loads(proc.stdout.readline()))  # stdout stays JSON-RPC
            if replies[-1].get("id") == int(wanted[1]):
                break
    out, err = proc.communicate(timeout=60)
    replies += [json.loads(line) for line in out.splitlines()]
    by_id = {r.get("id"): r for r in replies}
    assert by_id[8]["result"] == {}  # still serving after all of it
    for n in (2, 3, 4, 5, 6, 7):
        reply = by_id[n]
        assert (
            "error" in reply
            or reply["result"].get("isError")
            or reply["result"].get("structuredContent")
        ), reply
        text = json.dumps(reply)
        assert "Traceback" not in text and "Error executing tool" not in text, reply
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    with Memory.open(fresh_store("wire.db")) as memory:
        integrity_ok(memory)
