"""What a stranger can cost the HTTP server, bounded.

- :func:`check_token`: remote mode's bearer token is long enough and can be
  sent in a header as it is (no surrounding whitespace), or the server does not
  start.
- :class:`BodyLimit`: every request body is counted as it streams in, chunked
  or not, and refused (413) once past its limit, without being buffered.
- :class:`Throttle`: wrong tokens from one client address are answered 401 up
  to a burst, then 429 with ``Retry-After``, one more attempt being allowed
  every so many seconds; its memory is bounded.
- :func:`protocol_class`: uvicorn's h11 protocol with a deadline for a
  request's head (a connection that sends half a header, or nothing, is closed).

The settings come from ``MEMORS_HTTP_*`` variables, read (and refused when
nonsense) before the server starts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memors_core import BadInput
from memors_core.log import get_logger

log = get_logger("memors.mcp")

TOKEN_ENV = "MEMORS_HTTP_TOKEN"
#: Remote mode refuses a shorter token (``openssl rand -hex 32`` gives 64).
MIN_TOKEN_CHARS = 16

HEADER_TIMEOUT_ENV = "MEMORS_HTTP_HEADER_TIMEOUT_S"
KEEPALIVE_ENV = "MEMORS_HTTP_KEEPALIVE_S"
AUTH_FAILURES_ENV = "MEMORS_HTTP_AUTH_FAILURES"
AUTH_WAIT_ENV = "MEMORS_HTTP_AUTH_WAIT_S"
LOGIN_TTL_ENV = "MEMORS_HTTP_LOGIN_TTL_S"

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_KEEPALIVE_S = 5.0
DEFAULT_AUTH_FAILURES = 10
DEFAULT_AUTH_WAIT_S = 30.0
DEFAULT_LOGIN_TTL_S = 12 * 3600.0
#: Client addresses the throttle remembers at most (the oldest are forgotten).
MAX_THROTTLED_ADDRESSES = 10_000
#: The body of a request that is not signed in yet (the ``/login`` form).
LOGIN_BODY_LIMIT = 64 * 1024
#: After answering a request whose body is still coming, the server stops
#: sending and reads (and drops) at most this long and this much before it
#: closes, so the client reads the answer instead of a reset.
LINGER_S = 2.0
LINGER_BYTES = 16 * 1024 * 1024


def check_token(raw: str | None) -> str:
    """Remote mode's token as given, or a one-line :class:`BadInput` saying what is wrong."""
    if raw is None or not raw.strip():
        raise BadInput(
            f"--allow-remote requires a bearer token: set {TOKEN_ENV} to a long random secret"
        )
    if raw != raw.strip():
        raise BadInput(
            f"{TOKEN_ENV} has whitespace around it (a space, tab or line break), which no "
            "client sends in its Authorization header: remove it"
        )
    for at, char in enumerate(raw):
        if not "!" <= char <= "~":
            raise BadInput(
                f"{TOKEN_ENV} holds a character a header cannot carry as it is (at position "
                f"{at + 1}): use ASCII letters, digits and punctuation, e.g. openssl rand -hex 32"
            )
    if len(raw) < MIN_TOKEN_CHARS:
        raise BadInput(
            f"{TOKEN_ENV} is {len(raw)} characters; remote mode needs at least "
            f"{MIN_TOKEN_CHARS} (a long random secret, e.g. openssl rand -hex 32)"
        )
    return raw


def _positive(name: str, default: float, *, whole: bool = False) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(int(raw)) if whole else float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        what = "a positive integer" if whole else "a positive number of seconds"
        raise BadInput(f"{name} must be {what}, got {raw!r}")
    return value


def header_timeout_from_env() -> float:
    return _positive(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT_S)


def keepalive_from_env() -> float:
    return _positive(KEEPALIVE_ENV, DEFAULT_KEEPALIVE_S)


def login_ttl_from_env() -> float:
    return _positive(LOGIN_TTL_ENV, DEFAULT_LOGIN_TTL_S)


def throttle_from_env() -> Throttle:
    failures = int(_positive(AUTH_FAILURES_ENV, DEFAULT_AUTH_FAILURES, whole=True))
    return Throttle(failures, _positive(AUTH_WAIT_ENV, DEFAULT_AUTH_WAIT_S))


def check_settings() -> None:
    """Refuse a nonsense setting before anything starts."""
    header_timeout_from_env()
    keepalive_from_env()
    login_ttl_from_env()
    throttle_from_env()


# --- wrong tokens, per client address ------------------------------------------------------


def client_key(scope: Scope) -> str:
    """Whose attempts these are: the client address (an IPv6 one by its /64,
    which one machine usually has whole)."""
    client = scope.get("client") or ("?", 0)
    address = str(client[0])
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Throttle:
    """Wrong tokens per client address: a bucket of ``failures`` attempts,
    refilled by one every ``wait_s`` seconds. While it is empty, every attempt
    from that address is refused (429) unchecked, so guessing runs at one
    token per ``wait_s`` at most. Remembers at most ``max_addresses``
    addresses (a full bucket is forgotten; past the cap, the oldest).

    Not thread-safe: the HTTP app calls it from the event loop only.
    """

    def __init__(
        self,
        failures: int,
        wait_s: float,
        max_addresses: int = MAX_THROTTLED_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = failures
        self.wait_s = wait_s
        self.max_addresses = max_addresses
        self.clock = clock
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.buckets)

    def _left(self, key: str, now: float) -> float:
        held = self.buckets.get(key)
        if held is None:
            return float(self.failures)
        left, at = held
        return min(float(self.failures), left + (now - at) / self.wait_s)

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` may try a token again (0: now)."""
        left = self._left(key, self.clock())
        return 0.0 if left >= 1 else (1 - left) * self.wait_s

    def failed(self, key: str) -> None:
        """Count one wrong token from ``key``."""
        now = self.clock()
        left = max(self._left(key, now) - 1, 0.0)
        self.buckets.pop(key, None)
        if len(self.buckets) >= self.max_addresses:
            for old in [k for k in self.buckets if self._left(k, now) >= self.failures]:
                del self.buckets[old]
            while len(self.buckets) >= self.max_addresses:
                self.buckets.popitem(last=False)
        self.buckets[key] = (left, now)


def too_many(wait: float, *, json_body: bool = True) -> Response:
    """The 429 a throttled address gets, saying when to come back."""
    seconds = max(1, math.ceil(wait))
    message = f"too many wrong tokens from this address: try again in {seconds} s"
    headers = {"Retry-After": str(seconds)}
    if json_body:
        from starlette.responses import JSONResponse

        body = {"error": {"code": "too_many_attempts", "message": message}}
        return JSONResponse(body, status_code=429, headers=headers)
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(message, status_code=429, headers=headers)


# --- request bodies ------------------------------------------------------------------------


class BodyTooLarge(Exception):
    """Raised into the app by :class:`BodyLimit` once a body passes its limit (the
    413 is already sent)."""


class BodyLimit:
    """Count a request's body as it streams in and refuse it (413) past
    ``limit_for(scope)`` bytes: at once when its ``Content-Length`` says so,
    else at the chunk that crosses the limit, which raises :class:`BodyTooLarge`
    into the app (so nothing reads on). The connection then closes (after a
    short linger, see :func:`protocol_class`), so the rest of the body is not
    read either."""

    def __init__(
        self,
        app: ASGIApp,
        limit_for: Callable[[Scope], int],
        refusal: Callable[[Scope, int], Response],
    ) -> None:
        self.app = app
        self.limit_for = limit_for
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = _header(scope, b"content-length").strip()
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, send, limit)
            return
        state: dict[str, Any] = {"read": 0, "started": False, "refused": False}

        async def counted() -> Message:
            if state["refused"]:
                raise BodyTooLarge(limit)
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limit:
                    state["refused"] = True
                    if not state["started"]:
                        await self._refuse(scope, send, limit)
                    raise BodyTooLarge(limit)
            return message

        async def watched(message: Message) -> None:
            if state["refused"]:
                return  # the 413 was the answer
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            pass

    async def _refuse(self, scope: Scope, send: Send, limit: int) -> None:
        client = scope.get("client") or ("?", 0)
        log.warning("http_body_too_large", path=scope.get("path"), limit=limit, client=client[0])
        response = self.refusal(scope, limit)

        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        await response(scope, nothing, send)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


# --- connections ---------------------------------------------------------------------------


# Long: a class made in a factory (uvicorn loads only when HTTP is served); short methods.
def protocol_class(header_timeout: float) -> type:
    """uvicorn's h11 protocol, bounded: a request's head must all arrive within
    ``header_timeout`` seconds of the connection opening (or of its first byte,
    on a kept-alive one), and its body may not stall for longer than that
    while the server waits for it; a body still coming after the answer was
    sent is not read on: the server ends its side, drops what comes for at
    most :data:`LINGER_S` seconds and :data:`LINGER_BYTES` bytes (so the client
    gets to read the answer rather than a reset), then closes. uvicorn's own
    keep-alive timeout closes idle connections between requests."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        deadline: Any = None
        lingered: int | None = None  # bytes dropped since the answer, once lingering

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.lingered is not None:
                self.lingered += len(data)
                if self.lingered > LINGER_BYTES:
                    self.transport.close()
                return
            if self.conn.their_state is h11.IDLE and self.deadline is None:
                self._arm()  # the next request's head is on its way
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self.conn.our_state is h11.DONE and self.conn.their_state is h11.SEND_BODY:
                self._linger()
            elif self.conn.their_state is h11.SEND_BODY:
                self._arm()  # the body goes on: it may stall this long again
            elif self.conn.their_state is not h11.IDLE:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.SEND_BODY:
                self._linger()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self.deadline = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _too_slow(self) -> None:
            self.deadline = None
            if self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is h11.IDLE:
                self._close("http_header_timeout")
            elif state is h11.SEND_BODY:
                if self.flow.read_paused:  # waiting on us, not on the client
                    self._arm()
                else:
                    self._close("http_body_timeout")

        def _linger(self) -> None:
            if self.lingered is not None:
                return
            self.lingered = 0
            self._disarm()
            self._unset_keepalive_if_required()
            log.info("http_body_after_answer", client=self.client[0] if self.client else "?")
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            if self.transport.can_write_eof():
                self.transport.write_eof()  # (after the answer is flushed)
            self.flow.resume_reading()
            self.loop.call_later(LINGER_S, self.transport.close)

        def _close(self, event: str) -> None:
            self._disarm()
            client = self.client[0] if self.client else "?"
            log.warning(event, client=client, timeout_s=header_timeout)
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    return BoundedH11Protocol


__all__ = [
    "BodyLimit",
    "BodyTooLarge",
    "Throttle",
    "check_settings",
    "check_token",
    "client_key",
    "protocol_class",
]
