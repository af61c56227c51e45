"""Streamable HTTP: MCP at ``/mcp``, Prometheus metrics at ``/metrics``.

Loopback only unless ``--allow-remote``; then every request needs
``Authorization: Bearer $MEMORS_HTTP_TOKEN`` (compared in constant time,
never logged). DNS-rebinding protection (Host and Origin checks) stays on in
both cases: the bind host and the loopback names are allowed, plus any
``host[:port]`` listed in ``MEMORS_HTTP_ALLOWED_HOSTS`` (comma-separated) for
a server reached under another name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import anyio
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memors_core import BadInput, Memory
from memors_core.log import get_logger

from .server import MemorsMCPServer, build_server

log = get_logger("memors.mcp")

TOKEN_ENV = "MEMORS_HTTP_TOKEN"
ALLOWED_HOSTS_ENV = "MEMORS_HTTP_ALLOWED_HOSTS"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


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
    """Refuse every HTTP request without the right bearer token (401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.expected):
            client = scope.get("client") or ("?", 0)
            log.warning("unauthorized_request", path=scope.get("path"), client=client[0])
            response = JSONResponse(
                {"error": {"code": "unauthorized", "message": "a valid bearer token is required"}},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="memors"'},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_http_app(
    server: MemorsMCPServer, memory: Memory, host: str, token: str | None = None
) -> ASGIApp:
    """The ASGI app: ``/mcp`` and ``/metrics``, behind the bearer check when ``token``."""
    security = security_settings(host)
    guard = TransportSecurityMiddleware(security)

    async def metrics(request: Request) -> Response:
        refused = await guard.validate_request(request)
        if refused is not None:
            return refused
        text = await anyio.to_thread.run_sync(memory.metrics)
        return Response(text, headers={"Content-Type": METRICS_CONTENT_TYPE})

    server.custom_route("/metrics", methods=["GET"], include_in_schema=False)(metrics)
    # A 10 MB document is accepted (SPEC §3); the body limit must not refuse it first.
    body_limit = max(DEFAULT_MAX_REQUEST_BODY_SIZE, 2 * memory.limits.document_bytes + (1 << 20))
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=security,
        host=host,
        max_request_body_size=body_limit,
    )
    if token is not None:
        app = BearerTokenAuth(app, token)
    return app


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
    # uvicorn's own loggers go to stderr through the root handler (no access log on stdout).
    numeric = getattr(logging, level.upper(), logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler] if name == "uvicorn" else []
        logger.setLevel(numeric)
        logger.propagate = name != "uvicorn"


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


def serve_http(args: argparse.Namespace, level: str) -> int:
    host, port = args.host, args.port
    token: str | None = None
    if not is_loopback(host) and not args.allow_remote:
        raise BadInput(
            f"refusing to serve on {host}: not a loopback address (add --allow-remote, "
            f"which then requires a bearer token from {TOKEN_ENV})"
        )
    if args.allow_remote:
        token = os.environ.get(TOKEN_ENV, "")
        if not token.strip():
            raise BadInput(
                f"--allow-remote requires a bearer token: set {TOKEN_ENV} to a long random secret"
            )
    sock = bind(host, port)
    memory = Memory.open(args.db)
    try:
        server = build_server(memory, args.ns, log_level=level)
        app = build_http_app(server, memory, host, token)
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
        )
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        print(
            f"memors-mcp: serving MCP at http://{shown}:{bound[1]}/mcp "
            f"(metrics at /metrics, namespace {args.ns}"
            f"{', bearer token required' if token else ''})",
            file=sys.stderr,
            flush=True,
        )
        asyncio.run(_uvicorn_server(config).serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        memory.close()
    return 0


__all__ = ["BearerTokenAuth", "build_http_app", "is_loopback", "serve_http"]
