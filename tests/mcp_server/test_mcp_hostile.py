"""The MCP server against hostile clients: every request answered, resources bounded.

Over stdio (the raw wire, as a broken or malicious client writes it): a request
nested too deeply, a malformed envelope or bytes that are not UTF-8 get a
JSON-RPC error with their id (a parse error when no id can be read), nothing is
stored, and requests in flight when stdin closes are finished and answered. An
unknown prompt is a -32602 error and one log line. Over HTTP (a real server on
127.0.0.1): bodies that are not UTF-8 are refused, a client that hangs up
mid-body is one log line, idle sessions expire (404), the number of sessions is
capped (the longest-idle is evicted, else 503), and a huge document limit does
not lift the body limit past its ceiling.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jsonrpc import initialize
from mcp_clients.harness import ServerProcess, http_post, server_env
from memors_core import BadInput, Memory
from memors_mcp.http import HTTP_BODY_CEILING, body_limit
from memors_mcp.sessions import SessionRegistry
from store_checks import rows_of

#: Far above anything measured here (a reply takes milliseconds), even on a
#: loaded machine: only a hang reaches it.
DEADLINE = 600.0

INITIALIZE = initialize("hostile")
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HTTP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def tool_call(n: int, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


class RawStdio:
    """``memors-mcp serve`` over stdio, driven byte by byte; replies collected by id.
    While ``reading`` is clear, the server's output is left in the pipe."""

    def __init__(self, db: Path) -> None:
        self.reading = threading.Event()
        self.reading.set()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memors_cli", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(db),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.replies: list[dict[str, Any]] = []
        self.err = b""
        self.drains = [
            threading.Thread(target=self._drain, daemon=True),
            threading.Thread(target=self._drain_err, daemon=True),
        ]
        for drain in self.drains:
            drain.start()
        self.send(INITIALIZE)
        assert "result" in self.reply(0)
        self.send(INITIALIZED)

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        while self.reading.wait() and (line := self.proc.stdout.readline()):
            self.lines.put(line)

    def _drain_err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def send(self, message: dict[str, Any] | bytes, end: bytes = b"\n") -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + end)
        self.proc.stdin.flush()

    def _take(self, timeout: float) -> dict[str, Any] | None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        reply = json.loads(line)  # stdout carries nothing but JSON-RPC
        self.replies.append(reply)
        return reply

    def reply(self, request_id: Any) -> dict[str, Any]:
        """The reply to ``request_id``; fails (never hangs) if none comes."""
        deadline = time.monotonic() + DEADLINE
        while True:
            for reply in self.replies:
                if reply.get("id") == request_id and ("result" in reply or "error" in reply):
                    return reply
            left = deadline - time.monotonic()
            if left <= 0 or self._take(left) is None:
                raise AssertionError(f"no reply to {request_id!r}; got {self.replies}")

    def close(self) -> str:
        """Close stdin, wait for the exit, collect every remaining reply; stderr."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(DEADLINE)
        self.reading.set()
        for drain in self.drains:  # (each ends at its stream's end: every byte read)
            drain.join(DEADLINE)
        assert not [d for d in self.drains if d.is_alive()], "a drain of the server's output hung"
        while self._take(0) is not None:
            pass
        assert self.proc.returncode == 0, self.err.decode()
        return self.err.decode()


def error_of(reply: dict[str, Any]) -> tuple[int, str]:
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["message"]


def documents(db: Path) -> int:
    with Memory.open(db) as memory:
        return rows_of(memory, "SELECT count(*) FROM documents")[0][0]


# --- stdio: every request gets an answer --------------------------------------------------


def test_stdio_answers_requests_the_sdk_cannot_take(fresh_store, tmp_path: Path) -> None:
    wire = RawStdio(fresh_store("deep.db"))
    depth = 250
    deep = (
        '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"remember",'
        '"arguments":{"text":"x","metadata":' + "[" * depth + "]" * depth + "}}}"
    )
    wire.send(deep.encode())
    code, message = error_of(wire.reply(5))
    assert code == -32600 and "nested too deeply" in message
    wire.send(b'{"jsonrpc":"2.0","id":6,"method":5}')  # a malformed envelope, its id readable
    code, message = error_of(wire.reply(6))
    assert code == -32600 and message.startswith("invalid request: method")
    wire.send(b'{"jsonrpc":"2.0","id":"seven","method":"ping","params":{"a":"\\ud800"}}')
    code, message = error_of(wire.reply("seven"))
    assert "not valid JSON" in message
    wire.send(b"{not json")
    wire.send(b"[]")
    wire.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
    assert wire.reply(8)["result"] == {}  # still serving
    unnamed = [r for r in wire.replies if r.get("id") is None]
    assert [r["error"]["code"] for r in unnamed] == [-32700, -32600], unnamed
    err = wire.close()
    assert "Traceback" not in err
    assert documents(fresh_store("deep.db")) == 0


def test_stdio_finishes_requests_in_flight_when_stdin_closes(fresh_store, tmp_path: Path) -> None:
    db = fresh_store("eof.db")
    wire = RawStdio(db)
    sent = list(range(1, 21))
    for n in sent:  # all at once, then hang up without waiting
        wire.send(tool_call(n, "remember", {"text": f"[[Disk{n}]] holds block {n}. " * 200}))
    err = wire.close()
    answers = {r["id"]: r for r in wire.replies if r.get("id") in sent}
    assert sorted(answers) == sent, wire.replies
    assert all(not r["result"].get("isError") for r in answers.values()), answers
    # every write that committed was acknowledged, and the other way round
    assert documents(db) == len(sent)
    assert "Traceback" not in err


def test_stdio_reads_requests_however_the_pipe_splits_them(fresh_store, tmp_path: Path) -> None:
    """Lines cut anywhere, several in one write, the last with no newline
    before end of input: each request is read whole, once, and answered."""
    wire = RawStdio(fresh_store("split.db"))
    remember = json.dumps(tool_call(11, "remember", {"text": "[[Nile]] floods each summer."}))
    ping = json.dumps({"jsonrpc": "2.0", "id": 12, "method": "ping"})
    wire.send(remember[:30].encode(), end=b"")  # half a request: nothing to answer yet
    time.sleep(0.2)  # (so that the server is likely to read the half alone)
    wire.send(remember[30:].encode() + b"\n" + ping.encode() + b"\n" + ping[:9].encode(), end=b"")
    assert not wire.reply(11)["result"].get("isError")
    assert wire.reply(12)["result"] == {}
    wire.send(ping[9:].replace("12", "13").encode(), end=b"")  # the last line: no newline
    err = wire.close()
    assert sorted(r["id"] for r in wire.replies if r.get("id") in (11, 12, 13)) == [11, 12, 13]
    assert not [r for r in wire.replies if "error" in r], wire.replies
    assert documents(fresh_store("split.db")) == 1
    assert "Traceback" not in err


def test_stdio_answers_longer_than_the_pipe_holds_arrive_whole(fresh_store, tmp_path: Path) -> None:
    """A client that reads its answers late: more than the pipe holds waits
    for it, and every answer arrives whole, one per line, in the order made."""
    db = fresh_store("late.db")
    wire = RawStdio(db)
    wire.send(tool_call(2, "remember", {"text": "[[Harbour]] lights burn all night. " * 1200}))
    address = wire.reply(2)["result"]["structuredContent"]["document"]
    wire.reading.clear()  # the client stops reading: its pipe fills
    wire.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})  # (the read of its answer waits)
    asked = list(range(4, 204))
    for n in asked:
        wire.send(tool_call(n, "get", {"address": address}))
    time.sleep(0.5)  # (the server writes what the pipe holds, then waits)
    wire.reading.set()
    answers = [wire.reply(n) for n in asked]
    assert all(a["result"]["structuredContent"]["address"] == address for a in answers)
    assert sum(len(json.dumps(a)) for a in answers) > 3 * 65536  # far more than a pipe holds
    in_order = [r["id"] for r in wire.replies if r.get("id") in asked]
    assert in_order == asked  # (one client's gets are answered in turn)
    assert "Traceback" not in wire.close()


def test_stdio_serves_a_file_of_requests_into_a_file(fresh_store, tmp_path: Path) -> None:
    """``memors-mcp serve < requests > answers``: ends that are files, not
    pipes, are read and written too; every request is answered."""
    db = fresh_store("files.db")
    requests = [
        INITIALIZE,
        INITIALIZED,
        tool_call(2, "remember", {"text": "[[Danube]] reaches the Black Sea."}),
        tool_call(3, "get", {"address": "memo://passage/nonsense"}),
        {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    ]
    asked = tmp_path / "requests.jsonl"
    asked.write_text("".join(json.dumps(r) + "\n" for r in requests))
    answered = tmp_path / "answers.jsonl"
    with asked.open("rb") as source, answered.open("wb") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "memors_cli", "serve"],
            stdin=source,
            stdout=sink,
            stderr=subprocess.PIPE,
            env=server_env(db),
            timeout=DEADLINE,
        )
    assert done.returncode == 0, done.stderr.decode()
    replies = {r["id"]: r for r in map(json.loads, answered.read_text().splitlines())}
    assert sorted(replies) == [0, 2, 3, 4]
    assert not replies[2]["result"].get("isError")
    assert replies[3]["result"]["isError"]  # a tool error, answered
    assert replies[4]["result"] == {}
    assert documents(db) == 1


def test_stdio_refuses_text_that_is_not_utf8_as_the_cli_does(fresh_store, tmp_path: Path) -> None:
    db = fresh_store("utf8.db")
    wire = RawStdio(db)
    bad = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remember",'
    bad += b'"arguments":{"text":"\xff\xfe bad"}}}'
    wire.send(bad)
    code, message = error_of(wire.reply(9))
    assert code == -32600
    assert message == "request is not UTF-8 text (bad byte at offset 95); nothing was done"
    wire.send(b"\xff\xfe{")  # no id to be read: a parse error
    wire.send({"jsonrpc": "2.0", "id": 10, "method": "ping"})
    assert wire.reply(10)["result"] == {}
    assert [error_of(r)[0] for r in wire.replies if r.get("id") is None] == [-32700]
    wire.close()
    assert documents(db) == 0
    # the CLI refuses the same bytes
    cli = subprocess.run(
        [sys.executable, "-m", "memors_cli", "remember", "-"],
        input=b"\xff\xfe bad",
        capture_output=True,
        env=server_env(db),
        timeout=DEADLINE,
    )
    assert cli.returncode == 2 and b"not UTF-8 text (bad byte at offset 0)" in cli.stderr
    assert documents(db) == 0


def test_an_unknown_prompt_is_invalid_params_and_one_log_line(fresh_store, tmp_path: Path) -> None:
    wire = RawStdio(fresh_store("prompt.db"))
    wire.send({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "x"}})
    code, message = error_of(wire.reply(3))
    assert code == -32602
    assert message == "unknown prompt 'x'; this server has work_compaction_queue"
    wire.send(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "prompts/get",
            "params": {"name": "work_compaction_queue", "arguments": {"nmespace": "a"}},
        }
    )
    code, message = error_of(wire.reply(4))
    assert code == -32602 and "unknown argument 'nmespace'" in message
    err = wire.close()
    assert "Traceback" not in err
    logged = [line for line in err.splitlines() if line.strip()]
    assert len(logged) == 2, err
    assert json.loads(logged[0])["event"] == "unknown_prompt"


# --- HTTP: bodies -------------------------------------------------------------------------


def open_session(url: str) -> str:
    import urllib.request

    req = urllib.request.Request(
        url, data=json.dumps(INITIALIZE).encode(), headers=HTTP_HEADERS, method="POST"
    )
    with urllib.request.urlopen(req, timeout=DEADLINE) as resp:
        assert resp.status == 200
        session = resp.headers["mcp-session-id"]
    assert session
    post(url, session, INITIALIZED)
    return session


def post(url: str, session: str, message: dict[str, Any]) -> tuple[int, str]:
    headers = {**HTTP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return http_post(url, json.dumps(message).encode(), headers)


def ping(url: str, session: str) -> int:
    return post(url, session, {"jsonrpc": "2.0", "id": 1, "method": "ping"})[0]


def wait_for(server: ServerProcess, needle: str, count: int = 1) -> None:
    deadline = time.monotonic() + DEADLINE
    while server.stderr.count(needle) < count:
        assert time.monotonic() < deadline, f"never logged {needle!r}: {server.stderr}"
        time.sleep(0.05)


def test_http_refuses_a_body_that_is_not_utf8(fresh_store, tmp_path: Path) -> None:
    db = fresh_store("h8.db")
    with ServerProcess(db) as server:
        session = open_session(server.url)
        bad = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember",'
        bad += b'"arguments":{"text":"\xff\xfe bad"}}}'
        headers = {**HTTP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        status, body = http_post(server.url, bad, headers)
        assert status == 400
        assert json.loads(body)["error"] == {
            "code": -32700,
            "message": "request body is not UTF-8 text (bad byte at offset 95); nothing was done",
        }
        assert ping(server.url, session) == 200  # the session goes on
    assert documents(db) == 0


def test_http_client_hanging_up_mid_body_is_one_log_line(fresh_store, tmp_path: Path) -> None:
    with ServerProcess(fresh_store("hangup.db")) as server:
        session = open_session(server.url)
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE) as conn:
                conn.sendall(
                    (
                        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                        "Content-Type: application/json\r\n"
                        "Accept: application/json, text/event-stream\r\n"
                        f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n"
                        'Content-Length: 1000\r\n\r\n{"jsonrpc"'
                    ).encode()
                )
        wait_for(server, '"event": "http_client_disconnected"', 3)
        assert ping(server.url, session) == 200
    err = server.stderr
    assert "Traceback" not in err and "ClientDisconnect" not in err, err
    assert len([line for line in err.splitlines() if "disconnect" in line.lower()]) == 3, err


def read_response(conn: socket.socket) -> str:
    """One whole HTTP response: its head, then as many bytes as it says."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return data.decode()
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.decode().split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(4096)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode()


def test_the_body_limit_has_its_own_ceiling(fresh_store, tmp_path: Path) -> None:
    assert body_limit(10 * 1024 * 1024) == 21 * 1024 * 1024  # a 10 MiB document fits
    assert body_limit(10**12) == HTTP_BODY_CEILING
    with ServerProcess(fresh_store("ceiling.db"), MEMORS_MAX_DOCUMENT_BYTES=str(10**12)) as server:
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE)
        with conn:
            conn.sendall(
                (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    "Content-Type: application/json\r\n"
                    "Accept: application/json, text/event-stream\r\n"
                    f"Content-Length: {HTTP_BODY_CEILING + 1}\r\n\r\n{{"
                ).encode()
            )
            answer = read_response(conn)  # refused before the body is read
    assert answer.startswith("HTTP/1.1 413"), answer
    assert "request body too large" in answer


# --- HTTP: sessions -----------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_session_registry_expires_idle_sessions_and_makes_room() -> None:
    clock = Clock()
    registry = SessionRegistry(idle_s=60, max_sessions=2, clock=clock)
    for sid in ("a", "b"):
        assert registry.admit() == (True, [])
        registry.settle(sid)
    assert registry.begin("a")  # a request to a is in flight
    clock.now += 61
    assert not registry.expired("a")  # busy: never expires
    assert registry.expired("b") and not registry.begin("b")
    registry.end("a")  # idle from now
    assert registry.admit() == (True, ["b"])  # the expired one makes room
    registry.settle("c")
    clock.now += 10
    assert registry.begin("c")
    registry.end("c")
    clock.now += 10
    # full: the longest-idle (a) is evicted, never a busy one
    assert registry.admit() == (True, ["a"])
    registry.settle(None)  # that new session never opened
    assert registry.begin("c")
    registry.admit()
    registry.settle("d")
    assert registry.begin("d")
    assert registry.admit() == (False, [])  # every session busy: refused
    registry.end("c")
    assert registry.admit() == (True, ["c"])
    assert "c" not in registry and len(registry) == 1


def test_http_idle_sessions_expire_with_404(fresh_store, tmp_path: Path) -> None:
    db = fresh_store("idle.db")
    # A session answers while it is used (on a server whose sessions stay
    # for the default half hour: on one whose sessions expire after half a
    # second, a loaded machine could let one expire between two requests).
    with ServerProcess(db) as lasting:
        assert ping(lasting.url, open_session(lasting.url)) == 200
        with ServerProcess(db, "--log-level", "info", MEMORS_HTTP_SESSION_IDLE_S="0.5") as server:
            session = open_session(server.url)
            wait_for(server, '"event": "http_session_expired"')  # nothing touched it since
            assert ping(server.url, session) == 404  # the spec's answer: initialise again
            open_session(server.url)  # (initialising again is answered 200)
        again = open_session(lasting.url)
        assert ping(lasting.url, again) == 200


def _hold_get_stream(port: int, session: str) -> socket.socket:
    """A GET event stream on ``session``, open (in flight) until the socket closes."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    conn.sendall(
        (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n"
        ).encode()
    )
    assert conn.recv(4096).startswith(b"HTTP/1.1 200"), "the stream did not open"
    return conn


def test_http_sessions_are_capped(fresh_store, tmp_path: Path) -> None:
    with ServerProcess(fresh_store("cap.db"), MEMORS_HTTP_MAX_SESSIONS="2") as server:
        first = open_session(server.url)
        second = open_session(server.url)
        assert ping(server.url, first) == 200  # `second` is now the longest idle
        third = open_session(server.url)
        assert ping(server.url, second) == 404  # evicted to make room
        assert ping(server.url, first) == 200 and ping(server.url, third) == 200
        streams = [_hold_get_stream(server.port, s) for s in (first, third)]
        try:
            import urllib.error
            import urllib.request

            req = urllib.request.Request(
                server.url, data=json.dumps(INITIALIZE).encode(), headers=HTTP_HEADERS
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(req, timeout=DEADLINE)
            assert refused.value.code == 503
            message = json.loads(refused.value.read())["error"]["message"]
            assert "too many open sessions (2" in message and "MEMORS_HTTP_MAX_SESSIONS" in message
        finally:
            for conn in streams:
                conn.close()
        assert ping(server.url, first) == 200  # the busy sessions were never touched
    assert "Traceback" not in server.stderr


@pytest.mark.parametrize(
    ("setting", "value"),
    [("MEMORS_HTTP_SESSION_IDLE_S", "0"), ("MEMORS_HTTP_MAX_SESSIONS", "many")],
)
def test_a_bad_session_setting_is_a_clear_error(cli, setting: str, value: str) -> None:
    r = cli("serve", "--http", "--port", "0", extra_env={setting: value}, timeout=DEADLINE)
    assert r.code == 2, r
    assert setting in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err


def test_session_settings_default_and_refuse_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    from memors_mcp.sessions import idle_timeout_from_env, max_sessions_from_env

    monkeypatch.delenv("MEMORS_HTTP_SESSION_IDLE_S", raising=False)
    monkeypatch.delenv("MEMORS_HTTP_MAX_SESSIONS", raising=False)
    assert idle_timeout_from_env() == 1800 and max_sessions_from_env() == 256
    monkeypatch.setenv("MEMORS_HTTP_SESSION_IDLE_S", "inf")
    with pytest.raises(BadInput):
        idle_timeout_from_env()
