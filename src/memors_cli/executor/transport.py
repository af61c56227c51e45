"""HTTP for the executors, over ``http.client`` (never a proxy from the
environment): one deadline per request (connecting, waiting and reading all
count), the checked loopback addresses connected to, bounded reads, and one
way to say each failure. The API key, if any, goes only into the
``Authorization`` header and is scrubbed from every message built from what
the server said."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from .errors import EndpointFailed, ItemFailed, short
from .settings import Settings

MAX_BODY_BYTES = 16 * 1024 * 1024
HIDDEN = "[hidden]"


class Response:
    """A response being read, each read within the request's deadline."""

    def __init__(
        self, transport: Transport, resp: http.client.HTTPResponse, sock: Any, deadline: float
    ) -> None:
        self._transport, self._resp, self._sock, self._deadline = transport, resp, sock, deadline
        self.status = resp.status
        self.content_type = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        self.size = 0

    def _arm(self) -> None:
        self._sock.settimeout(self._transport.remaining(self._deadline))

    def _count(self, n: int, what: str) -> None:
        self.size += n
        if self.size > MAX_BODY_BYTES:
            raise ItemFailed(f"the answer to {what} is too large", code="bad-response")

    def read_all(self, what: str) -> bytes:
        chunks = []
        while True:
            self._arm()
            chunk = self._resp.read1(65536)
            if not chunk:
                return b"".join(chunks)
            self._count(len(chunk), what)
            chunks.append(chunk)

    def lines(self, what: str) -> Iterator[bytes]:
        while True:
            self._arm()
            line = self._resp.readline(MAX_BODY_BYTES + 1 - self.size)
            if not line:
                return
            self._count(len(line), what)
            yield line


def error_text(body: bytes) -> tuple[str, str | None]:
    """What an error answer says, and its code if it gives one: OpenAI's
    ``{"error": {"message", "type", "param", "code"}}``, Ollama's
    ``{"error": "…"}``, vLLM's ``{"object": "error", "message", …}``, a
    validation error's ``{"detail": …}``, or the text."""
    text = body.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except ValueError:
        return text, None
    if not isinstance(obj, dict):
        return text, None
    if obj.get("object") == "error" and "error" not in obj:
        err: Any = obj  # vLLM's older shape: the error's fields at the top
    else:
        err = obj.get("error", obj.get("detail"))
    if isinstance(err, dict):
        code = err.get("code") or err.get("type")
        message = err.get("message") or json.dumps(err)
        return str(message), str(code) if code is not None else None
    if isinstance(err, str) and err:
        return err, None
    return (json.dumps(err) if err else text), None


class Transport:
    """One server: requests to ``base_path + path`` with the headers the
    executor sends every time."""

    def __init__(self, settings: Settings, accept: str) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint
        self.timeout = settings.timeout
        self.accept = accept

    def scrub(self, text: str) -> str:
        """Text from the server without the API key (a server may echo it)."""
        key = self.settings.api_key
        return text.replace(key, HIDDEN) if key else text

    def remaining(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return left

    def timed_out(self) -> ItemFailed:
        return ItemFailed(
            f"timed out after {self.timeout:g} s waiting for {self.endpoint.url} "
            f"(raise {self.settings.flavor.timeout_var} for a slow model)",
            code="timeout",
        )

    def _connect(self, deadline: float) -> http.client.HTTPConnection:
        cls = (
            http.client.HTTPSConnection
            if self.endpoint.scheme == "https"
            else http.client.HTTPConnection
        )
        last: OSError | None = None
        for target in self.endpoint.addresses or (self.endpoint.host,):
            conn = cls(target, self.endpoint.port, timeout=self.remaining(deadline))
            try:
                conn.connect()
                return conn
            except TimeoutError:
                conn.close()
                raise self.timed_out() from None
            except OSError as exc:
                conn.close()
                last = exc
        flavor = self.settings.flavor
        if isinstance(last, socket.gaierror):
            reason = f"its host name does not resolve (check {flavor.url_var})"
        else:
            detail = getattr(last, "strerror", None) or str(last) or type(last).__name__
            reason = f"{detail.lower()} ({flavor.start_hint})"
        raise EndpointFailed(
            f"cannot reach {flavor.server} at {self.endpoint.url}: {reason}", code="unreachable"
        )

    def headers(self, has_body: bool) -> dict[str, str]:
        headers = {
            "Host": self.endpoint.host_header,
            "Accept": self.accept,
            "User-Agent": "memors-mcp executor",
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        handle: Callable[[Response], None],
    ) -> None:
        """Send one request and let ``handle`` read the response (any status)."""
        deadline = time.monotonic() + self.timeout
        conn = self._connect(deadline)
        sock = conn.sock
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        what = f"{method} {path}"
        try:
            url = self.endpoint.base_path + path
            conn.request(method, url, body=body, headers=self.headers(body is not None))
            sock.settimeout(self.remaining(deadline))
            handle(Response(self, conn.getresponse(), sock, deadline))
        except TimeoutError:
            raise self.timed_out() from None
        except ItemFailed:
            raise
        except (OSError, http.client.HTTPException) as exc:
            detail = self.scrub(short(str(exc), 80)) or "no detail"
            raise ItemFailed(
                f"the connection to {self.endpoint.url} broke during {what} "
                f"({type(exc).__name__}: {detail}); nothing stored",
                code="connection-lost",
            ) from None
        finally:
            conn.close()
