"""Just enough of the OpenAI-compatible chat-completions API, as llama.cpp's
``llama-server``, vLLM, LM Studio, LocalAI and Ollama (at ``/v1``) serve it:
``GET {base}/models`` and ``POST {base}/chat/completions``, streamed as
server-sent events or answered as one JSON object, with the page asked for as
JSON-schema-constrained output while the server takes it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

from .errors import EndpointFailed, ItemFailed, short
from .ollama import listed
from .prompt import NUM_PREDICT
from .protocol import Answer, ChatRequest
from .settings import Settings
from .transport import Response, Transport, error_text

#: What a server that cannot constrain its output names when it refuses.
STRUCTURED_WORDS = ("response_format", "json_schema", "schema", "grammar")


def _same_model(asked: str, listed_id: str) -> bool:
    a, b = asked.strip().casefold(), listed_id.strip().casefold()
    return a == b or (":" not in a and b == f"{a}:latest")  # Ollama's default tag


class OpenAIClient:
    """``GET /models`` (the model check) and ``POST /chat/completions``."""

    #: Pages are asked for as JSON-schema-constrained output, while the server takes it.
    structured_output = True

    def __init__(self, settings: Settings) -> None:
        self.http = Transport(settings, "text/event-stream, application/json")
        self.settings = settings
        self.endpoint = settings.endpoint
        self.model = settings.model

    # --- errors ------------------------------------------------------------------------------

    def _status_error(self, what: str, status: int, body: bytes, structured: bool) -> ItemFailed:
        message, code = error_text(body)
        message = self.http.scrub(short(message)) or http.client.responses.get(status, "")
        url, flavor = self.endpoint.url, self.settings.flavor
        if status in (401, 403):
            return EndpointFailed(
                f"{url} refused {what} ({status}: {message}); check {flavor.key_var}",
                code="unauthorized",
            )
        if status == 404 and (code == "model_not_found" or "model" in message.casefold()):
            return EndpointFailed(
                f"model {self.model!r} not found at {url}: {message}", code="model-not-found"
            )
        if status == 404:
            return EndpointFailed(
                f"{url} answered 404 to {what} ({message}); is {flavor.url_var} an "
                "OpenAI-compatible base URL (such as http://127.0.0.1:8080/v1)?",
                code="not-openai",
            )
        said = message.casefold()
        if structured and status >= 400 and any(w in said for w in STRUCTURED_WORDS):
            return ItemFailed(f"HTTP {status}: {message}", code="no-structured-output")
        return ItemFailed(f"the server answered {status} to {what}: {message}", code="http-error")

    def _reported(self, obj: dict[str, Any]) -> ItemFailed:
        message, _ = error_text(json.dumps(obj).encode("utf-8"))
        text = self.http.scrub(short(message))
        return ItemFailed(f"the server reported an error: {text}", code="server-error")

    def _json(self, what: str, raw: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(raw)
        except ValueError:
            text = self.http.scrub(short(raw.decode("utf-8", "replace"), 60))
            raise ItemFailed(
                f"the answer to {what} is malformed JSON: {text!r}", code="bad-response"
            ) from None
        if not isinstance(obj, dict):
            raise ItemFailed(f"the answer to {what} is not a JSON object", code="bad-response")
        if obj.get("error") or obj.get("object") == "error":
            raise self._reported(obj)
        return obj

    # --- the model check ---------------------------------------------------------------------

    def check_model(self) -> None:
        """``GET /models``: the endpoint answers and lists the model. A server
        without that route (404) is not checked: its chat answer will say."""
        what = "GET /models"
        found: dict[str, Any] = {}

        def handle(resp: Response) -> None:
            body = resp.read_all(what)
            if resp.status == 404:
                return
            if resp.status != 200:
                raise self._status_error(what, resp.status, body, structured=False)
            found.update(self._json(what, body))

        self.http.request("GET", "/models", None, handle)
        if not found:
            return
        data = found.get("data")
        if not isinstance(data, list):
            raise EndpointFailed(
                f"{self.endpoint.url}/models did not list models; is "
                f"{self.settings.flavor.url_var} an OpenAI-compatible base URL?",
                code="not-openai",
            )
        ids = [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None]
        if not any(_same_model(self.model, i) for i in ids):
            raise EndpointFailed(
                f"model {self.model!r} not found at {self.endpoint.url} (it has: "
                f"{listed(sorted(ids))}); set {self.settings.flavor.model_var} to one of them",
                code="model-not-found",
            )

    # --- the chat ----------------------------------------------------------------------------

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": 0,
            "max_tokens": NUM_PREDICT,
            "stream": True,
        }
        if request.schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "page", "strict": True, "schema": request.schema},
            }
        return payload

    def chat(self, request: ChatRequest, on_progress: Callable[[int], None]) -> Answer:
        what = "POST /chat/completions"
        payload = self.payload(request)
        reading = _Reading(self, on_progress)

        def handle(resp: Response) -> None:
            if resp.status != 200:
                body = resp.read_all(what)
                raise self._status_error(what, resp.status, body, "response_format" in payload)
            if resp.content_type == "text/event-stream":
                reading.events(what, resp)
            else:  # a server that answers in one object although asked to stream
                reading.whole(self._json(what, resp.read_all(what)))

        self.http.request("POST", "/chat/completions", payload, handle)
        return reading.answer()


class _Reading:
    """One chat answer as it arrives: its content, why it ended, its usage."""

    def __init__(self, client: OpenAIClient, on_progress: Callable[[int], None]) -> None:
        self.client, self.on_progress = client, on_progress
        self.parts: list[str] = []
        self.finish: str | None = None
        self.done = False
        self.usage: dict[str, Any] = {}

    def _choice(self, obj: dict[str, Any], key: str) -> str:
        """The first choice's ``message`` or ``delta`` content, its finish reason noted."""
        choices = obj.get("choices")
        if choices == [] and "usage" in obj:  # the usage chunk after the last choice
            return ""
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ItemFailed("the server's answer has no choices", code="bad-response")
        choice = choices[0]
        message = choice.get(key) or {}
        content = message.get("content") if isinstance(message, dict) else None
        if content is not None and not isinstance(content, str):
            raise ItemFailed("the server's answer has malformed content", code="bad-response")
        if isinstance(choice.get("finish_reason"), str):
            self.finish = choice["finish_reason"]
        return content or ""

    def _take_usage(self, obj: dict[str, Any]) -> None:
        usage = obj.get("usage")
        if isinstance(usage, dict):
            for ours, theirs in (
                ("prompt_eval_count", "prompt_tokens"),
                ("eval_count", "completion_tokens"),
            ):
                if isinstance(usage.get(theirs), int):
                    self.usage[ours] = usage[theirs]

    def whole(self, obj: dict[str, Any]) -> None:
        self.parts.append(self._choice(obj, "message"))
        self._take_usage(obj)
        self.done = True

    def _event(self, what: str, data: str) -> bool:
        if data.strip() == "[DONE]":
            self.done = True
            return True
        obj = self.client._json(what, data.encode("utf-8"))
        self._take_usage(obj)
        content = self._choice(obj, "delta")
        if content:
            self.parts.append(content)
            self.on_progress(sum(map(len, self.parts)))
        return False

    def events(self, what: str, resp: Response) -> None:
        """Server-sent events: ``data:`` lines, a blank line ending each event,
        ``: comments`` ignored, ``data: [DONE]`` ending the stream."""
        data: list[str] = []
        for raw in resp.lines(what):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if data and self._event(what, "\n".join(data)):
                    return
                data = []
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
        if data and self._event(what, "\n".join(data)):
            return
        if self.finish is not None:  # a server that ends the stream without [DONE]
            self.done = True

    def answer(self) -> Answer:
        if not self.done:
            raise ItemFailed(
                "the server's answer ended before it was complete (no finish_reason, no [DONE])",
                code="bad-response",
            )
        return Answer("".join(self.parts), self.finish, self.usage)
