"""Streamable HTTP: MCP at ``/mcp``, Prometheus metrics at ``/metrics``.

Loopback only unless ``--allow-remote``; then every request needs
``Authorization: Bearer $MEMORS_HTTP_TOKEN`` (compared in constant time,
never logged; wrong ones are throttled per client address) or, for the web
view, a login cookie. What one request or connection can cost is bounded
(``bounds.py``): bodies, heads, idle connections. DNS-rebinding protection (Host and Origin checks) stays on in
both cases: the bind host and the loopback names are allowed, plus any
``host[:port]`` listed in ``MEMORS_HTTP_ALLOWED_HOSTS`` (comma-separated) for
a server reached under another name.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memors_core import BadInput, Memory
from memors_core.log import get_logger

from .bounds import (
    LOGIN_BODY_LIMIT,
    TOKEN_ENV,
    BodyLimit,
    Throttle,
    check_settings,
    check_token,
    client_key,
    header_timeout_from_env,
    keepalive_from_env,
    login_ttl_from_env,
    protocol_class,
    throttle_from_env,
    too_many,
)
from .server import MemorsMCPServer, build_server
from .sessions import (
    MAX_SESSIONS_ENV,
    SessionRegistry,
    idle_timeout_from_env,
    max_sessions_from_env,
)
from .stdio import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from .web.security import LOGIN_COOKIE, SECURITY_HEADERS, Logins, cookie_value

log = get_logger("memors.mcp")

ALLOWED_HOSTS_ENV = "MEMORS_HTTP_ALLOWED_HOSTS"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: The request-body limit follows the document limit, but never past this.
HTTP_BODY_CEILING = 64 * 1024 * 1024
SESSION_HEADER = b"mcp-session-id"


def body_limit(document_bytes: int) -> int:
    """Room for a document at the store's limit, JSON-escaped; at most :data:`HTTP_BODY_CEILING`."""
    wanted = max(DEFAULT_MAX_REQUEST_BODY_SIZE, 2 * document_bytes + (1 << 20))
    return min(wanted, HTTP_BODY_CEILING)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (127.0.0.0/8, ::1)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_pattern(host: str) -> str:
    name = host.strip().strip("[]")
    return f"[{name}]" if ":" in name else name


def security_settings(host: str) -> TransportSecuritySettings:
    """Host/Origin allow-lists: loopback names, the bind host, and the extra names."""
    names = list(LOOPBACK_NAMES)
    wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
    if not wildcard:
        names.append(_host_pattern(host))
    extra = [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(names):
        hosts += [name, f"{name}:*"]
        origins += [f"http://{name}", f"http://{name}:*", f"https://{name}", f"https://{name}:*"]
    for entry in extra:
        hosts.append(entry)
        if ":" not in entry.strip("[]") or entry.endswith("]"):
            hosts.append(f"{entry}:*")
        origins += [f"http://{entry}", f"https://{entry}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BearerTokenAuth:
    """Refuse every HTTP request without the right bearer token (401).

    A browser cannot send a bearer header, so the web view also takes the
    login cookie its ``/login`` form sets (a random id per login, see
    :class:`Logins`); ``/login``, ``/logout`` and the static assets need
    neither, and a browser asking for a web page without them is sent to
    ``/login``. ``/mcp`` and ``/metrics`` take the header only. A wrong token
    counts against the client's address in ``throttle``: past its burst, every
    request that carries a token is answered 429 unchecked until it refills.
    """

    def __init__(self, app: ASGIApp, token: str, logins: Logins, throttle: Throttle) -> None:
        self.app = app
        self.expected = token.encode("utf-8")
        self.logins = logins
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path") or "/"
        client = scope.get("client") or ("?", 0)
        header = _header(scope, b"authorization")
        if header is not None:
            key = client_key(scope)
            wait = self.throttle.retry_after(key)
            if wait > 0:
                log.warning("auth_throttled", path=path, client=client[0], retry_after=wait)
                await too_many(wait)(scope, receive, send)
                return
            scheme, _, token = header.encode("latin-1").partition(b" ")
            if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.expected):
                await self.app(scope, receive, send)
                return
            self.throttle.failed(key)
        web = not is_agent_path(path)
        if web and (
            path in ("/login", "/logout")
            or path.startswith("/static/")
            or self.logins.valid(cookie_value(_header(scope, b"cookie"), LOGIN_COOKIE))
        ):
            await self.app(scope, receive, send)
            return
        log.warning("unauthorized_request", path=path, client=client[0])
        if web and scope.get("method") == "GET":
            response: Response = RedirectResponse("/login", status_code=303)
        else:
            response = JSONResponse(
                {"error": {"code": "unauthorized", "message": "a valid bearer token is required"}},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="memors"'},
            )
        await response(scope, receive, send)


def is_agent_path(path: str) -> bool:
    """``/mcp`` and ``/metrics``: the machine routes; everything else is the web view."""
    return path in ("/mcp", "/metrics") or path.startswith("/mcp/")


class WebOrAgents:
    """Send the web view's paths to its app and the rest (and lifespan) to the SDK's."""

    def __init__(self, agents: ASGIApp, web: ASGIApp) -> None:
        self.agents = agents
        self.web = web

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_agent_path(scope.get("path") or "/"):
            await self.web(scope, receive, send)
            return
        await self.agents(scope, receive, send)


def _jsonrpc_error(status: int, code: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _is_initialize(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


class McpGate:
    """In front of the SDK's app: whole, UTF-8 request bodies, and bounded sessions.

    A POST body is read (``BodyLimit``, outside, bounds it) before the SDK sees it: a client
    that hangs up mid-body is one log line, not a traceback, and a body that is not
    UTF-8 is refused (400) as the CLI and stdio refuse it. Sessions are counted in
    :class:`SessionRegistry`: an expired one answers 404, and a new one past the cap
    evicts the expired and longest-idle first, else gets 503.
    """

    def __init__(
        self,
        app: ASGIApp,
        registry: SessionRegistry,
        guard: TransportSecurityMiddleware,
        path: str = "/mcp",
    ) -> None:
        self.app = app
        self.registry = registry
        self.guard = guard
        self.path = path
        self.reaper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.reaper is None:
            self.reaper = asyncio.get_running_loop().create_task(self._reap_forever(scope))
        body = b""
        if scope["method"] == "POST":
            read = await self._read_body(scope, receive, send)
            if read is None:
                return
            body = read
            receive = _replay(body, receive)
        if scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        session_id = _header(scope, SESSION_HEADER)
        if session_id is not None and session_id in self.registry:
            await self._in_session(session_id, scope, receive, send)
        elif session_id is None and scope["method"] == "POST" and _is_initialize(body):
            await self._new_session(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                client = scope.get("client") or ("?", 0)
                log.warning(
                    "http_client_disconnected", path=scope.get("path"), client=client[0], read=size
                )
                return None
            if message["type"] != "http.request":
                continue
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            log.warning("http_request_refused", path=scope.get("path"), reason="not UTF-8")
            refusal = _jsonrpc_error(
                400,
                PARSE_ERROR,
                f"request body is not UTF-8 text (bad byte at offset {exc.start}); "
                "nothing was done",
            )
            await refusal(scope, receive, send)
            return None
        return body

    async def _in_session(self, session_id: str, scope: Scope, receive: Receive, send: Send):
        if not self.registry.begin(session_id):  # idle too long: gone, as the spec says
            self.registry.closed(session_id)
            log.info("http_session_expired", session=session_id[:12])
            await self._end_in_server(session_id, scope)
            refusal = _jsonrpc_error(
                404,
                INVALID_REQUEST,
                f"session not found: it expired after {self.registry.idle_s:g} s idle; "
                "initialize a new session",
            )
            await refusal(scope, receive, send)
            return
        try:
            status, _ = await self._forward(scope, receive, send)
        finally:
            self.registry.end(session_id)
        if status == 404 or (scope["method"] == "DELETE" and status is not None and status < 300):
            self.registry.closed(session_id)

    async def _new_session(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = await self.guard.validate_request(Request(scope, receive))
        if refused is not None:  # a refused Host or Origin must not evict anyone
            await refused(scope, receive, send)
            return
        admitted, victims = self.registry.admit()
        for victim in victims:
            log.info("http_session_ended", session=victim[:12], reason="idle, to make room")
            await self._end_in_server(victim, scope)
        if not admitted:
            log.warning(
                "http_sessions_full", open=len(self.registry), limit=self.registry.max_sessions
            )
            refusal = _jsonrpc_error(
                503,
                INTERNAL_ERROR,
                f"too many open sessions ({self.registry.max_sessions}, all busy; "
                f"{MAX_SESSIONS_ENV} sets the limit): try again later",
            )
            await refusal(scope, receive, send)
            return
        opened: str | None = None
        try:
            status, opened = await self._forward(scope, receive, send)
            if status is None or status >= 400:
                opened = None
        finally:
            self.registry.settle(opened)

    async def _forward(self, scope: Scope, receive: Receive, send: Send):
        """Run the SDK's app; the status and the session id it answered with."""
        seen: dict[str, Any] = {"status": None, "session": None}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for key, value in message.get("headers", ()):
                    if key.lower() == SESSION_HEADER:
                        seen["session"] = value.decode("latin-1")
            await send(message)

        await self.app(scope, receive, watch)
        return seen["status"], seen["session"]

    async def _reap_forever(self, scope: Scope) -> None:
        """End expired sessions even when no request comes to notice them."""
        interval = min(max(self.registry.idle_s / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            for session_id in self.registry.reap():
                log.info("http_session_expired", session=session_id[:12])
                await self._end_in_server(session_id, scope)

    async def _end_in_server(self, session_id: str, scope: Scope) -> None:
        """End the session in the SDK too, the protocol's way: a DELETE with its id."""
        # A loopback Host is always allowed, whatever the request that got here said.
        server = scope.get("server") or ("127.0.0.1", 0)
        headers = [
            (SESSION_HEADER, session_id.encode("latin-1")),
            (b"host", f"127.0.0.1:{server[1]}".encode("latin-1")),
        ]
        delete = {
            "type": "http",
            "asgi": scope.get("asgi", {"version": "3.0"}),
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "server": server,
            "client": ("127.0.0.1", 0),
            "state": dict(scope.get("state") or {}),
        }
        if "app" in scope:
            delete["app"] = scope["app"]

        async def no_body() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        try:
            await self.app(delete, no_body, discard)
        except Exception as exc:  # the session is forgotten either way
            log.warning("http_session_end_failed", session=session_id[:12], error=str(exc)[:200])


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _web_app(
    memory: Memory,
    namespace: str,
    remote: Remote | None,
    max_body: int,
    guard: TransportSecurityMiddleware,
    secure_cookies: bool,
) -> ASGIApp:
    """The web view, behind the same Host and Origin checks as ``/mcp``."""
    from .web import build_web_app

    web = build_web_app(
        memory,
        namespace,
        remote.token if remote else None,
        max_body,
        logins=remote.logins if remote else None,
        throttle=remote.throttle if remote else None,
        secure_cookies=secure_cookies,
    )

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        refused = await guard.validate_request(Request(scope, receive))
        if refused is not None:
            await refused(scope, receive, send)
            return
        await web(scope, receive, send)

    return checked


class Remote:
    """Remote mode's state: the token, the signed-in browsers, the throttle."""

    def __init__(self, token: str, logins: Logins, throttle: Throttle) -> None:
        self.token = token
        self.logins = logins
        self.throttle = throttle


def _too_large(scope: Scope, limit: int) -> Response:
    message = f"request body too large (more than {limit:,} bytes); nothing was done"
    if is_agent_path(scope.get("path") or "/"):
        return _jsonrpc_error(413, INVALID_REQUEST, message)
    return PlainTextResponse(message, status_code=413, headers=SECURITY_HEADERS)


def build_http_app(
    server: MemorsMCPServer,
    memory: Memory,
    host: str,
    token: str | None = None,
    namespace: str = "default",
    *,
    secure_cookies: bool = False,
) -> ASGIApp:
    """The ASGI app: ``/mcp``, ``/metrics`` and the web view at ``/``, behind
    the bearer check when ``token``; every body bounded. ``secure_cookies``:
    the browser reaches it over TLS (a proxy in front), so cookies are Secure."""
    security = security_settings(host)
    guard = TransportSecurityMiddleware(security)

    async def metrics(request: Request) -> Response:
        refused = await guard.validate_request(request)
        if refused is not None:
            return refused
        text = await anyio.to_thread.run_sync(memory.metrics)
        return Response(text, headers={"Content-Type": METRICS_CONTENT_TYPE})

    server.custom_route("/metrics", methods=["GET"], include_in_schema=False)(metrics)
    # A 10 MB document is accepted (SPEC §3); the body limit must not refuse it first,
    # nor grow without bound with MEMORS_MAX_DOCUMENT_BYTES.
    max_body = body_limit(memory.limits.document_bytes)
    registry = SessionRegistry(idle_timeout_from_env(), max_sessions_from_env())
    remote = None
    if token is not None:
        remote = Remote(token, Logins(login_ttl_from_env()), throttle_from_env())
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=security,
        host=host,
        max_request_body_size=max_body,
        session_idle_timeout=registry.idle_s,
        max_sessions=registry.max_sessions,
    )
    app = McpGate(app, registry, guard)
    app = WebOrAgents(app, _web_app(memory, namespace, remote, max_body, guard, secure_cookies))
    if remote is not None:
        app = BearerTokenAuth(app, remote.token, remote.logins, remote.throttle)

    def limit_for(scope: Scope) -> int:
        # Before a browser has signed in, the only body it may send is the login form.
        if remote is not None and scope.get("path") in ("/login", "/logout"):
            return LOGIN_BODY_LIMIT
        return max_body

    return BodyLimit(app, limit_for, _too_large)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a one-line :class:`BadInput`."""
    if not 0 <= port <= 65535:
        raise BadInput(f"--port must be from 0 to 65535, got {port}")
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise BadInput(f"cannot resolve --host {host!r}: {exc.strerror}") from None
    family, socktype, proto, _, address = infos[0]
    sock = socket.socket(family, socktype, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def _configure_http_logging(level: str) -> None:
    # uvicorn's own loggers go to the root handler that ``serve`` set up (one
    # JSON object a line off a terminal; no access log on stdout).
    numeric = getattr(logging, level.upper(), logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.setLevel(numeric)
        logger.propagate = True


def _uvicorn_server(config: Any) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn, but a SIGTERM or SIGINT is a clean stop (exit 0), not re-raised."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {
                sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)
            }
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server(config)


def serve_http(
    *,
    db: str | os.PathLike[str] | None,
    namespace: str,
    host: str,
    port: int,
    allow_remote: bool,
    level: str,
    behind_tls_proxy: bool = False,
) -> int:
    """Serve ``db``'s ``namespace`` at ``http://host:port/mcp`` until a signal."""
    token: str | None = None
    if not is_loopback(host) and not allow_remote:
        raise BadInput(
            f"refusing to serve on {host}: not a loopback address (add --allow-remote, "
            f"which then requires a bearer token from {TOKEN_ENV})"
        )
    if allow_remote:
        token = check_token(os.environ.get(TOKEN_ENV))
    idle_timeout_from_env()  # a bad setting is refused before anything starts
    max_sessions_from_env()
    check_settings()
    sock = bind(host, port)
    memory = Memory.open(db)
    try:
        server = build_server(memory, namespace, log_level=level)
        app = build_http_app(
            server, memory, host, token, namespace, secure_cookies=behind_tls_proxy
        )
        memory.resume_vectors()  # what an earlier run left without vectors, in the background
        import uvicorn

        _configure_http_logging(level)
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level=level.lower(),
            access_log=level.lower() in ("debug", "info"),
            lifespan="on",
            server_header=False,
            timeout_graceful_shutdown=3,
            # h11 with a deadline for a request's head; idle keep-alive connections close.
            http=protocol_class(header_timeout_from_env()),
            timeout_keep_alive=keepalive_from_env(),  # type: ignore[arg-type]
        )
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown}:{bound[1]}/mcp"
        message = (
            f"memors-mcp: serving MCP at {url} (the web view at /, metrics at /metrics, "
            f"namespace {namespace}"
            f"{', bearer token required' if token else ''})"
        )
        if not sys.stderr.isatty():  # off a terminal every stderr line is one JSON object
            message = json.dumps(
                {
                    "event": "serving_http",
                    "url": url,
                    "namespace": namespace,
                    "token_required": bool(token),
                    "message": message,
                    "level": "info",
                    "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                }
            )
        print(message, file=sys.stderr, flush=True)
        asyncio.run(_uvicorn_server(config).serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        memory.close()
    return 0


__all__ = [
    "BearerTokenAuth",
    "McpGate",
    "body_limit",
    "build_http_app",
    "is_loopback",
    "serve_http",
]
