"""The stdio transport, made strict: every request gets an answer.

The SDK's own :func:`mcp.server.stdio.stdio_server` is used, fed through the
explicit-stream arguments it offers: :class:`CheckedStdin` hands it only lines
it will accept, and answers the others itself — a JSON-RPC error with the
request's id when the id can be read, else a parse error with id null — so a
client never waits on a line the SDK would have dropped. Invalid UTF-8 is
refused (as the CLI refuses it), never replaced and stored. At end of input
the requests still in flight are finished and answered before the stream
ends.

Where the wire's ends are pipes or sockets (as a client that starts the
server makes them), lines are read on the event loop as they come and an
answer that fits the pipe's free room is written there at once: no worker
thread wakes for a line or for an answer (two thread round trips a call,
0.15-0.2 ms of a 1 ms call here). Other ends (a file, a terminal) are read
and written on a worker thread, as a blocking read or write must be.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import re
import stat
import termios
from collections.abc import AsyncIterator, Iterator
from typing import IO, Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from memors_core.log import get_logger

log = get_logger("memors.mcp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603

# How the SDK serialises a response: `{"jsonrpc":"2.0","id":…,"result"|"error"…`.
_RESPONSE_HEAD = re.compile(
    rb'^\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"'
)
# The id of a request too deep (or too broken) for a full parse, when it comes early.
_EARLY_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}]'
)


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _readable_id(raw: bytes) -> Any:
    """The request's id if it can be read from ``raw`` at all, else None."""
    try:
        parsed = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        match = _EARLY_ID.match(raw)
        if match is None:
            return None
        try:
            return json.loads(match[1].decode("utf-8", "replace"))
        except ValueError:
            return None
    if isinstance(parsed, dict) and _valid_id(parsed.get("id")):
        return parsed["id"]
    return None


def _is_notification(raw: str) -> bool:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and "method" in parsed and "id" not in parsed


def describe_refusal(error: ValidationError) -> tuple[int, str]:
    """The JSON-RPC error code and one readable line for a message the SDK cannot take."""
    errors = error.errors(include_url=False)
    first = errors[0] if errors else {"type": "", "msg": str(error)}
    if first["type"] == "json_invalid":
        detail = str(first.get("ctx", {}).get("error") or first["msg"])
        if "recursion limit" in detail:
            return INVALID_REQUEST, (
                "request is nested too deeply (JSON-RPC messages may nest about 200 levels); "
                "nothing was done"
            )
        return PARSE_ERROR, f"parse error: not valid JSON ({detail}); nothing was done"
    if first["type"] == "model_type":
        return INVALID_REQUEST, "invalid request: a JSON-RPC message must be a JSON object"
    shown = []
    for err in errors[:3]:
        where = ".".join(str(p) for p in err["loc"][1:]) or "message"
        shown.append(f"{where}: {err['msg']}")
    return INVALID_REQUEST, "invalid request: " + "; ".join(dict.fromkeys(shown))


#: Bytes of a pipe's room not counted on: a pipe holds its bytes in pages,
#: and a page the reader has partly read keeps its read part until it has
#: read the rest.
PIPE_SLACK = 4096


def _kind(fd: int) -> str:
    """What the descriptor is: "pipe", "socket" or "other"."""
    mode = os.fstat(fd).st_mode
    return "pipe" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "other"


def pipe_room(fd: int) -> int:
    """Bytes a write to the pipe ``fd`` can take now without waiting for its reader."""
    unread = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, unread)
    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)) - unread[0] - PIPE_SLACK


class Wire:
    """Stdout, one whole line per write, shared by the SDK's writer and the refusals."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        #: Written on the event loop when the line fits the pipe's room.
        self.pipe = _kind(out.fileno()) == "pipe"
        self.lock = anyio.Lock()
        self.pending: set[str] = set()
        self.drained = anyio.Event()
        self.drained.set()

    def expect(self, request_id: Any) -> None:
        self.pending.add(_key(request_id))
        self.drained = anyio.Event() if self.drained.is_set() else self.drained

    def forget(self, request_id: Any) -> None:
        self.pending.discard(_key(request_id))
        if not self.pending:
            self.drained.set()

    async def send_line(self, data: bytes) -> None:
        async with self.lock:
            if self.pipe and len(data) <= pipe_room(self.out.fileno()):
                self._write(data)  # (room for all of it: the write does not wait)
            else:  # a write that may wait for the reader waits on a thread
                await anyio.to_thread.run_sync(self._write, data)
        match = _RESPONSE_HEAD.match(data)
        if match is not None:
            self.forget(json.loads(match[1]))

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    async def refuse(self, request_id: Any, code: int, message: str) -> None:
        reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self.send_line(json.dumps(reply, separators=(",", ":")).encode("utf-8") + b"\n")


class CheckedStdout:
    """What ``stdio_server(stdout=…)`` writes to: text lines onto :class:`Wire`."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    async def write(self, text: str) -> int:
        await self.wire.send_line(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        return None


class CheckedStdin:
    """What ``stdio_server(stdin=…)`` reads: only lines the SDK will accept.

    Every other line is answered here. At end of input, iteration ends only once
    each request handed on has been answered (or cancelled by the client).
    """

    def __init__(self, source: IO[bytes], wire: Wire) -> None:
        self.source = source
        self.wire = wire

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in self._raw_lines():
            line = raw.strip()
            if not line:
                continue
            text = await self._checked(line)
            if text is not None:
                yield text
        if self.wire.pending:
            log.info("stdin_closed_finishing", in_flight=len(self.wire.pending))
        await self.wire.drained.wait()

    async def _raw_lines(self) -> AsyncIterator[bytes]:
        """The input's lines (the last one may lack its newline), until end of input."""
        fd = self.source.fileno()
        if _kind(fd) == "other":  # a file or a terminal: a blocking read, on a thread
            while raw := await anyio.to_thread.run_sync(
                self.source.readline, abandon_on_cancel=True
            ):
                yield raw
            return
        # A pipe or a socket: read on the loop once it has bytes (a read then
        # returns what is there without waiting for more).
        pending, scanned = bytearray(), 0
        while True:
            await anyio.wait_readable(fd)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", scanned)) >= 0:
                yield bytes(pending[start : end + 1])
                start = scanned = end + 1
            del pending[:start]
            scanned = len(pending)
        if pending:
            yield bytes(pending)

    async def _checked(self, line: bytes) -> str | None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            request_id = _readable_id(line)
            code = PARSE_ERROR if request_id is None else INVALID_REQUEST
            message = (
                f"request is not UTF-8 text (bad byte at offset {exc.start}); nothing was done"
            )
            log.warning("stdio_request_refused", reason="not UTF-8", id=request_id)
            await self.wire.refuse(request_id, code, message)
            return None
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValidationError as exc:
            code, reason = describe_refusal(exc)
            if _is_notification(text):  # a notification is never answered, even with an error
                log.warning("stdio_notification_dropped", reason=reason)
                return None
            request_id = _readable_id(line)
            log.warning("stdio_request_refused", reason=reason, id=request_id)
            await self.wire.refuse(request_id, code, reason)
            return None
        if isinstance(message, types.JSONRPCRequest):
            self.wire.expect(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):
            # A cancelled request is never answered: do not wait for it at end of input.
            params = message.params or {}
            if _valid_id(params.get("requestId")):
                self.wire.forget(params["requestId"])
        return text


@contextlib.contextmanager
def claimed_stdio() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The wire's stdin and stdout as private descriptors; fd 0 and fd 1 diverted meanwhile.

    As the SDK does for its own streams: while serving, fd 0 reads the null device
    and fd 1 points at stderr, so stray reads and prints miss the wire.
    """
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    source = os.fdopen(wire_in, "rb", closefd=False)
    sink = os.fdopen(wire_out, "wb", closefd=False)
    try:
        yield source, sink
    finally:
        with contextlib.suppress(OSError, ValueError):
            sink.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        # The reading thread may still block on wire_in: leave that descriptor open.
        os.close(wire_out)


async def run_checked_stdio(server: Any) -> None:
    """Serve ``server`` (an ``MCPServer``) over stdio until end of input, answering every request."""
    from mcp.server.stdio import stdio_server

    with claimed_stdio() as (source, sink):
        wire = Wire(sink)
        stdin: Any = CheckedStdin(source, wire)
        stdout: Any = CheckedStdout(wire)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            lowlevel = server._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
