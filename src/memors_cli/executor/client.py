"""Just enough of Ollama's HTTP API, over ``http.client`` (never a proxy from
the environment): the model check and the streamed chat."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .endpoint import Endpoint
from .errors import EndpointFailed, ItemFailed, short

MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass
class Answer:
    content: str
    done_reason: str | None
    stats: dict[str, Any] = field(default_factory=dict)


def _canonical_model(name: str) -> str:
    """Ollama's model name with its defaults spelled out (tag ``latest``,
    registry ``registry.ollama.ai``, namespace ``library``)."""
    name = name.strip().casefold()
    for prefix in ("registry.ollama.ai/", "library/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


class OllamaClient:
    """Just enough of Ollama's HTTP API: ``GET /api/tags``, ``POST /api/chat``
    (streamed NDJSON or one JSON object, whichever the server sends)."""

    def __init__(self, endpoint: Endpoint, model: str, timeout: float) -> None:
        self.endpoint = endpoint
        self.model = model
        self.timeout = timeout
        self.send_think = True

    # Each request has one deadline: connecting, waiting and reading all count.
    def _remaining(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        return left

    def _timed_out(self) -> ItemFailed:
        return ItemFailed(
            f"timed out after {self.timeout:g} s waiting for {self.endpoint.url} "
            "(raise MEMORS_OLLAMA_TIMEOUT for a slow model)",
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
            conn = cls(target, self.endpoint.port, timeout=self._remaining(deadline))
            try:
                conn.connect()
                return conn
            except TimeoutError:
                conn.close()
                raise self._timed_out() from None
            except OSError as exc:
                conn.close()
                last = exc
        if isinstance(last, socket.gaierror):
            reason = "its host name does not resolve (check MEMORS_OLLAMA_URL)"
        else:
            detail = getattr(last, "strerror", None) or str(last) or type(last).__name__
            reason = f"{detail.lower()} (is `ollama serve` running there?)"
        raise EndpointFailed(
            f"cannot reach Ollama at {self.endpoint.url}: {reason}", code="unreachable"
        )

    def _request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        on_object: Callable[[dict[str, Any]], bool],
    ) -> None:
        """Send one request and feed each JSON object of a 200 answer to
        ``on_object`` (which returns True when the answer is complete)."""
        deadline = time.monotonic() + self.timeout
        conn = self._connect(deadline)
        sock = conn.sock
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {
            "Host": self.endpoint.host_header,
            "Accept": "application/x-ndjson, application/json",
            "User-Agent": "memors-mcp executor",
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {path}"
        try:
            conn.request(method, self.endpoint.base_path + path, body=body, headers=headers)
            sock.settimeout(self._remaining(deadline))
            resp = conn.getresponse()
            if resp.status != 200:
                self._raise_status(what, resp.status, self._read_all(resp, sock, deadline))
            self._read_objects(what, resp, sock, deadline, on_object)
        except TimeoutError:
            raise self._timed_out() from None
        except ItemFailed:
            raise
        except (OSError, http.client.HTTPException) as exc:
            raise ItemFailed(
                f"the connection to {self.endpoint.url} broke during {what} "
                f"({type(exc).__name__}: {short(str(exc), 80) or 'no detail'}); nothing stored",
                code="connection-lost",
            ) from None
        finally:
            conn.close()

    def _read_all(self, resp: http.client.HTTPResponse, sock: Any, deadline: float) -> bytes:
        chunks, size = [], 0
        while True:
            sock.settimeout(self._remaining(deadline))
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ItemFailed("Ollama's answer is too large", code="bad-response")
            chunks.append(chunk)

    def _raise_status(self, what: str, status: int, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        try:
            message = json.loads(text).get("error") or text
        except (ValueError, AttributeError):
            message = text
        message = short(message) or http.client.responses.get(status, "")
        if status == 404:
            if "/api/chat" in what and "not found" in message.lower():
                raise EndpointFailed(
                    f"Ollama at {self.endpoint.url}: {message}; pull it first: "
                    f"ollama pull {self.model}",
                    code="model-not-found",
                )
            raise EndpointFailed(
                f"{self.endpoint.url} answered 404 to {what} ({message}); "
                "is MEMORS_OLLAMA_URL an Ollama endpoint?",
                code="not-ollama",
            )
        raise ItemFailed(f"Ollama answered {status} to {what}: {message}", code="http-error")

    def _read_objects(
        self,
        what: str,
        resp: http.client.HTTPResponse,
        sock: Any,
        deadline: float,
        on_object: Callable[[dict[str, Any]], bool],
    ) -> None:
        # A streamed answer is one JSON object a line; a non-streamed one is one
        # object (normally one line too). Lines that do not parse alone are
        # gathered and parsed as one document at the end.
        pending: list[bytes] = []
        size = 0
        while True:
            sock.settimeout(self._remaining(deadline))
            line = resp.readline(MAX_BODY_BYTES + 1 - size)
            if not line:
                break
            size += len(line)
            if size > MAX_BODY_BYTES:
                raise ItemFailed(f"the answer to {what} is too large", code="bad-response")
            if pending or not line.strip():
                if line.strip():
                    pending.append(line)
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                pending.append(line)
                continue
            if self._feed(what, obj, on_object):
                return
        if pending:
            text = b"".join(pending).decode("utf-8", "replace")
            try:
                obj = json.loads(text)
            except ValueError:
                raise ItemFailed(
                    f"Ollama's answer to {what} is malformed JSON: {short(text, 60)!r}",
                    code="bad-response",
                ) from None
            if self._feed(what, obj, on_object):
                return
        raise ItemFailed(
            f'Ollama\'s answer to {what} ended before it was complete (no "done": true)',
            code="bad-response",
        )

    def _feed(self, what: str, obj: Any, on_object: Callable[[dict[str, Any]], bool]) -> bool:
        if not isinstance(obj, dict):
            raise ItemFailed(
                f"Ollama's answer to {what} is not a JSON object: {short(json.dumps(obj), 60)}",
                code="bad-response",
            )
        if obj.get("error"):
            raise ItemFailed(
                f"Ollama reported an error: {short(obj['error'])}", code="ollama-error"
            )
        return on_object(obj)

    # --- the two calls ---------------------------------------------------------------------

    def check_model(self) -> None:
        """``GET /api/tags``: the endpoint answers and has the model."""
        found: dict[str, Any] = {}

        def take(obj: dict[str, Any]) -> bool:
            found.update(obj)
            return True

        self._request("GET", "/api/tags", None, take)
        models = found.get("models")
        if not isinstance(models, list):
            raise EndpointFailed(
                f"{self.endpoint.url}/api/tags did not list models; "
                "is MEMORS_OLLAMA_URL an Ollama endpoint?",
                code="not-ollama",
            )
        names = set()
        for m in models:
            if isinstance(m, dict):
                names.update(_canonical_model(str(m[k])) for k in ("name", "model") if m.get(k))
        if _canonical_model(self.model) not in names:
            have = sorted(str(m.get("name")) for m in models if isinstance(m, dict))
            listed = ", ".join(have[:8]) + (" …" if len(have) > 8 else "") if have else "none"
            raise EndpointFailed(
                f"model {self.model!r} not found at {self.endpoint.url} (it has: {listed}); "
                f"pull it first: ollama pull {self.model}",
                code="model-not-found",
            )

    def chat(
        self,
        messages: list[dict[str, str]],
        options: dict[str, Any],
        on_progress: Callable[[int], None] = lambda n: None,
    ) -> Answer:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "options": options,
        }
        if self.send_think:
            payload["think"] = False  # ask a thinking-capable model not to think
        parts: list[str] = []
        final: dict[str, Any] = {}
        count = [0]

        def take(obj: dict[str, Any]) -> bool:
            message = obj.get("message")
            if message is not None and not isinstance(message, dict):
                raise ItemFailed("Ollama's answer has a malformed message", code="bad-response")
            content = (message or {}).get("content") or ""
            if not isinstance(content, str):
                raise ItemFailed("Ollama's answer has malformed content", code="bad-response")
            if content:
                parts.append(content)
                count[0] += len(content)
                on_progress(count[0])
            if obj.get("done") is True:
                final.update(obj)
                return True
            return False

        try:
            self._request("POST", "/api/chat", payload, take)
        except ItemFailed as exc:
            if self.send_think and exc.code == "http-error" and "think" in exc.message.lower():
                # An Ollama that does not take "think" for this model: ask plainly.
                self.send_think = False
                return self.chat(messages, options, on_progress)
            raise
        stats = {
            k: final[k]
            for k in ("total_duration", "prompt_eval_count", "eval_count")
            if isinstance(final.get(k), int)
        }
        reason = final.get("done_reason")
        return Answer("".join(parts), reason if isinstance(reason, str) else None, stats)
