"""Structured logs: an event for every state change, configured only by
the frontends (JSON lines off a terminal, console lines on one)."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from structlog.testing import capture_logs

from jsonrpc import initialize
from memors_core import Memory
from memors_core.testing import passages_about
from paths import ROOT

STATE_CHANGES = {
    "item_created",
    "item_refreshed",
    "item_done",
    "item_skipped",
    "item_obsolete",
    "item_refused",
    "page_stored",
    "page_marked_stale",
    "merge_proposed",
    "merge_accepted",
    "fact_superseded",
    "purged",
    "document_remembered",
    "entity_created",
    "fact_recorded",
    "passage_forgotten",
    "page_superseded",
}
ID_FIELDS = {"item", "page", "address", "document", "fact", "entity", "candidate"}


def page_content(payload: dict) -> str:
    parts = [p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"]]
    parts += [f"The {f['subject']} {f['predicate']} is {f['value']}." for f in payload["facts"]]
    return "\n\n".join(parts) + "\n"


def first(items, kind, entity=None):
    for item in items:
        if item.kind == kind and (entity is None or item.payload["entity"]["name"] == entity):
            return item
    raise AssertionError(f"no open {kind} item")


@pytest.fixture
def info_level():
    """Let INFO through the library's stdlib logger for the test's duration."""
    logger = logging.getLogger("memors")
    old = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(old)


def run_every_state_change(memory: Memory) -> None:
    for text in passages_about("Raft", 3, "consensus"):
        memory.remember(text)
    for text in passages_about("Zab", 3, "broadcast"):
        memory.remember(text)
    n1 = memory.record_fact("Raft", "leader", "n1").fact
    memory.record_fact("Raft", "leader", "n2")
    items = memory.compact().items
    memory.submit(first(items, "conflict").id, keep=[n1])  # fact superseded
    raft = first(memory.compact(kinds=["page"]).items, "page", "Raft")  # refreshed
    page = memory.submit(raft.id, content=page_content(raft.payload), title="Raft").address
    with pytest.raises(Exception, match="not open"):
        memory.submit(raft.id, content=page_content(raft.payload), title="Raft")  # refused
    zab = first(items, "page", "Zab")
    memory.submit(zab.id, skip=True, reason="later")  # skipped
    memory.forget(memory.get(page).sources[0])  # page marked stale
    memory.remember("[[Quorum]] is a majority of the replicas.")
    memory.remember("[[quorum]] replication waits for a majority.")
    items = memory.compact().items  # stale item, merge item
    stale = first(items, "stale")
    memory.submit(stale.id, content=page_content(stale.payload), title="Raft")  # page superseded
    memory.propose_merge(["Raft", "Zab"])
    for item in memory.compact(kinds=["merge"]).items:
        memory.submit(item.id, accept=True)  # merge accepted
    memory.remember("[[Paxos]] note one.", uri="p")
    memory.remember("[[Paxos]] note two.", uri="q")
    memory.remember("[[Paxos]] note three.", uri="r")
    memory.compact(kinds=["page"])
    memory.forget(memory.entity("Paxos").passages[0].address)
    memory.compact(kinds=["page"])  # obsolete
    memory.purge(memory.entity("Paxos").passages[0].document)


def test_every_state_change_logs_an_event_with_namespace_and_ids(memory, info_level):
    with capture_logs() as logs:
        run_every_state_change(memory)
    events = {e["event"] for e in logs}
    assert events >= STATE_CHANGES, STATE_CHANGES - events
    for entry in logs:
        if entry["event"] in STATE_CHANGES:
            assert entry["namespace"] == "default", entry
            assert ID_FIELDS & set(entry), entry
            assert entry["log_level"] == "info", entry
    refused = [e for e in logs if e["event"] == "item_refused"]
    assert refused and refused[0]["kind"] == "page" and isinstance(refused[0]["item"], int)
    marked = [e for e in logs if e["event"] == "page_marked_stale"]
    assert marked[0]["page"].startswith("memo://page/")
    assert marked[0]["target"].startswith("memo://passage/")


def test_nothing_is_logged_for_what_was_rolled_back(memory, info_level):
    memory.record_fact("Raft", "leader", "n1")
    with capture_logs() as logs, pytest.raises(Exception, match="bad namespace"):
        memory.remember("[[Ghost]] text", namespace="not ok!")
    with capture_logs() as logs:
        memory.compact(kinds=["page"])
        with pytest.raises(Exception, match="no work item"):
            memory.submit(99, skip=True, reason="x")
    assert logs == []


def test_the_library_configures_no_logging_and_prints_nothing(fresh_store, tmp_path):
    """Importing memors_core and running operations in a fresh interpreter
    writes nothing to stdout or stderr and leaves logging unconfigured."""
    code = textwrap.dedent(
        f"""
        import logging, sys
        import structlog
        from memors_core import Memory
        from memors_core.testing import passages_about

        with Memory.open({str(fresh_store("lib.db"))!r}) as m:
            for text in passages_about("Raft", 3):
                m.remember(text)
            m.record_fact("Raft", "leader", "n1")
            m.record_fact("Raft", "leader", "n2")
            items = m.compact().items
            m.submit(items[0].id, skip=True, reason="later")
            m.lint()
            m.metrics()
            m.search("raft")
        untouched = (
            not structlog.is_configured()
            and logging.getLogger().handlers == []
            and logging.getLogger("memors").handlers == []
            and logging.getLogger("memors").level == logging.NOTSET
        )
        sys.exit(0 if untouched else 3)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


# --- the CLI ------------------------------------------------------------------------


@pytest.fixture
def raft_store(cli, tmp_path):
    for i, text in enumerate(passages_about("Raft", 3)):
        (tmp_path / f"r{i}.md").write_text(text + "\n")
    r = cli("remember", "r0.md", "r1.md", "r2.md")
    assert r.code == 0 and r.err == "", r
    return cli


def test_cli_is_quiet_by_default(raft_store):
    r = raft_store("compact")
    assert r.code == 0 and r.err == "", r
    r = raft_store("compact", "--log-level", "warning")
    assert r.err == "", r


def test_cli_log_level_info_writes_json_lines_to_stderr(raft_store):
    r = raft_store("compact", "--json", "--log-level", "info")
    assert r.code == 0, r
    assert r.json["created"] == 1  # stdout stays pure JSON
    lines = [json.loads(line) for line in r.err.splitlines()]
    [created] = [e for e in lines if e["event"] == "item_created"]
    assert created["namespace"] == "default"
    assert created["kind"] == "page"
    assert created["item"] == r.json["items"][0]["id"]
    assert created["level"] == "info"
    assert created["timestamp"].endswith("Z")


def test_log_level_from_the_environment_and_bad_levels(raft_store):
    r = raft_store("compact", extra_env={"MEMORS_LOG_LEVEL": "info"})
    assert '"event": "item_created"' in r.err, r
    r = raft_store("compact", "--log-level", "loud")
    assert r.code == 2 and r.err.count("\n") == 1 and "--log-level" in r.err, r


def test_cli_logs_readable_console_lines_on_a_terminal(raft_store):
    """With stderr on a terminal (a pty), events are console lines, not JSON."""
    master, slave = pty.openpty()
    env = {**os.environ, "MEMORS_DB": str(raft_store.db), "TERM": "dumb"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "compact", "--log-level", "info"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=raft_store.tmp,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read().decode()
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    err = b"".join(chunks).decode()
    assert "1 new item" in out
    lines = [line for line in err.replace("\r", "\n").splitlines() if "item_created" in line]
    assert len(lines) == 1, err
    line = lines[0]
    assert "[info" in line and "namespace=default" in line and "kind=page" in line, line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line.strip())
    # No colour codes (SGR sequences); the progress line may erase itself with ESC[K.
    assert not re.search("\x1b\\[[0-9;]*m", err), err


def test_operations_doc_lists_every_event(memory, info_level):
    doc = (ROOT / "docs" / "operations.md").read_text()
    with capture_logs() as logs:
        run_every_state_change(memory)
    for event in {e["event"] for e in logs} | STATE_CHANGES:
        assert f"`{event}`" in doc, event


def test_import_and_backup_are_logged(fresh_store, tmp_path, info_level):
    with Memory.open(fresh_store("a.db")) as source:
        source.remember("[[Raft]] keeps a replicated log.")
        lines = [json.dumps(row) for row in source.export("default")]
        with capture_logs() as logs:
            source.backup(str(tmp_path / "copy.db"))
    with Memory.open(fresh_store("b.db")) as target, capture_logs() as more:
        target.import_(lines, "export.jsonl")
    [backed_up] = [e for e in logs if e["event"] == "store_backed_up"]
    assert backed_up["path"] == str(tmp_path / "copy.db")
    [imported] = [e for e in more if e["event"] == "store_imported"]
    assert imported["namespace"] == "default" and imported["rows"] > 0


# --- serve: every stderr line is one JSON object off a terminal ---------------------------


def _json_lines(err: str) -> list[dict]:
    lines = err.splitlines()
    assert lines, "nothing on stderr at --log-level info"
    parsed = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"not one JSON object: {line!r}\n{err}") from None
        assert isinstance(event, dict) and "event" in event and "level" in event, line
        parsed.append(event)
    return parsed


def test_serve_stdio_off_a_terminal_writes_only_json_lines_sdk_included(fresh_store, tmp_path):
    db = fresh_store("stdio.db")
    with Memory.open(db) as memory:
        memory.remember("Raft elects a leader.")
    env = {**os.environ, "MEMORS_DB": str(db)}
    messages = [
        initialize("logs"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "Raft"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "record_fact", "arguments": {"subject": "Raft"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {
                "name": "record_fact",
                "arguments": {"subject": "Raft", "predicate": "leader", "value": "n1"},
            },
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "serve", "--log-level", "info"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    replies = {}
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                reply = json.loads(proc.stdout.readline())
                replies[reply["id"]] = reply
        proc.stdin.close()
        out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
    import importlib.metadata

    # (the version the server announces is the constant, as pip installed it)
    assert replies[0]["result"]["serverInfo"]["version"] == importlib.metadata.version("memors")
    assert replies[2]["result"]["structuredContent"]["results"], replies[2]
    assert replies[3]["result"]["isError"] is True
    assert out == ""
    events = _json_lines(err)
    names = {e["event"] for e in events}
    assert {"serving_stdio", "fact_recorded"} <= names, names
    # The SDK's own lines (its request handling at INFO) arrive as JSON too.
    foreign = [e for e in events if e.get("logger", "").startswith("mcp")]
    assert foreign, err


def test_serve_http_off_a_terminal_writes_only_json_lines_uvicorn_and_sdk_included(
    fresh_store, tmp_path
):
    import anyio
    from mcp import Client

    from mcp_clients.harness import ServerProcess

    db = fresh_store("http.db")
    with Memory.open(db) as memory:
        memory.remember("Raft elects a leader.")
    with ServerProcess(db, "--log-level", "info") as server:

        async def main():
            async with Client(server.url) as client:
                found = await client.call_tool("search", {"query": "leader"})
                refused = await client.call_tool("get", {"address": "memo://nothing/1"})
                await client.call_tool(
                    "record_fact", {"subject": "Raft", "predicate": "leader", "value": "n1"}
                )
                return found, refused

        found, refused = anyio.run(main)
        assert found.structured_content["results"] and refused.is_error
        urllib.request.urlopen(f"{server.base}/metrics", timeout=30).close()
    events = _json_lines(server.stderr)
    names = {e["event"] for e in events}
    assert "serving_http" in names and "fact_recorded" in names, names
    loggers = {e.get("logger", "").split(".")[0] for e in events}
    assert {"uvicorn", "mcp"} <= loggers, loggers
