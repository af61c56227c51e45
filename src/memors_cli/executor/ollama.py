"""Just enough of Ollama's native HTTP API: the model check and the
streamed chat."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

from .errors import EndpointFailed, ItemFailed, short
from .prompt import chat_options
from .protocol import Answer, ChatRequest
from .settings import Settings
from .transport import Response, Transport, error_text


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

    #: Ollama's native API is asked for Markdown pages (no JSON schema).
    structured_output = False

    def __init__(self, settings: Settings) -> None:
        self.http = Transport(settings, "application/x-ndjson, application/json")
        self.endpoint = settings.endpoint
        self.model = settings.model
        self.send_think = True

    def _request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        on_object: Callable[[dict[str, Any]], bool],
    ) -> None:
        """Send one request and feed each JSON object of a 200 answer to
        ``on_object`` (which returns True when the answer is complete)."""
        what = f"{method} {path}"

        def handle(resp: Response) -> None:
            if resp.status != 200:
                self._raise_status(what, resp.status, resp.read_all(what))
            self._read_objects(what, resp, on_object)

        self.http.request(method, path, payload, handle)

    def _raise_status(self, what: str, status: int, body: bytes) -> None:
        message = short(error_text(body)[0]) or http.client.responses.get(status, "")
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
        self, what: str, resp: Response, on_object: Callable[[dict[str, Any]], bool]
    ) -> None:
        # A streamed answer is one JSON object a line; a non-streamed one is one
        # object (normally one line too). Lines that do not parse alone are
        # gathered and parsed as one document at the end.
        pending: list[bytes] = []
        for line in resp.lines(what):
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
            raise EndpointFailed(
                f"model {self.model!r} not found at {self.endpoint.url} (it has: "
                f"{listed(have)}); pull it first: ollama pull {self.model}",
                code="model-not-found",
            )

    def chat(self, request: ChatRequest, on_progress: Callable[[int], None]) -> Answer:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "options": chat_options(request.messages),
        }
        if self.send_think:
            payload["think"] = False  # ask a thinking-capable model not to think
        parts: list[str] = []
        final: dict[str, Any] = {}

        def take(obj: dict[str, Any]) -> bool:
            message = obj.get("message")
            if message is not None and not isinstance(message, dict):
                raise ItemFailed("Ollama's answer has a malformed message", code="bad-response")
            content = (message or {}).get("content") or ""
            if not isinstance(content, str):
                raise ItemFailed("Ollama's answer has malformed content", code="bad-response")
            if content:
                parts.append(content)
                on_progress(sum(map(len, parts)))
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
                return self.chat(request, on_progress)
            raise
        stats = {
            k: final[k]
            for k in ("total_duration", "prompt_eval_count", "eval_count")
            if isinstance(final.get(k), int)
        }
        reason = final.get("done_reason")
        return Answer("".join(parts), reason if isinstance(reason, str) else None, stats)


def listed(names: list[str]) -> str:
    """Up to eight names, for a message."""
    return ", ".join(names[:8]) + (" …" if len(names) > 8 else "") if names else "none"
