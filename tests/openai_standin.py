"""A stand-in for an OpenAI-compatible model server (llama.cpp's
``llama-server``, vLLM, LM Studio, Ollama at ``/v1``), for the executor's
tests.

Real HTTP on 127.0.0.1, with the chat-completions API's shapes:

- ``GET /v1/models`` → ``{"object": "list", "data": [{"id", "object":
  "model", "created", "owned_by"}…]}`` (``models_route = False``: 404, as
  on a server without that route);
- ``POST /v1/chat/completions`` → with ``"stream": false`` one
  ``chat.completion`` object (``choices[0].message.content``,
  ``finish_reason``, ``usage``); streamed as server-sent events over chunked
  transfer encoding: ``data: {chat.completion.chunk}`` events whose
  ``choices[0].delta`` carries the content, a last one with its
  ``finish_reason``, then ``data: [DONE]``;
- errors in the API's shape, ``{"error": {"message", "type", "param",
  "code"}}``: 404 ``model_not_found`` for an unknown model, 401
  ``invalid_api_key`` when a key is required and the one sent differs (its
  message echoes what was sent, as OpenAI's does), 400 naming
  ``response_format`` from a server without structured output
  (``structured = "refuse"``);
- ``response_format: {"type": "json_schema", …}`` answered with the page as
  that JSON (``structured = "json_schema"``, the default), or ignored
  (``structured = "ignore"``: the Markdown page comes back).

The pages are the Ollama stand-in's (:func:`ollama_standin.write_page`), in
the same modes, per subject and per turn.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ollama_standin import INVENTED, OllamaStandIn, _Handler, read_prompt, write_page

_MARKERS = re.compile(r"((?:\s*\[\d+\])+)\s*$")


def page_as_json(page: str) -> dict[str, Any]:
    """A Markdown page of :func:`write_page` as the structured answer: each
    line of a paragraph a sentence with the refs of its markers."""
    lines = page.strip().split("\n")
    out: dict[str, Any] = {"title": lines[0].lstrip("# ").strip(), "sections": [], "facts": []}
    section: dict[str, Any] = {"heading": "", "sentences": []}
    out["sections"].append(section)
    in_facts = False
    for line in lines[1:]:
        line = line.strip()
        if not line:
            continue
        if line == "## Facts":
            in_facts = True
        elif in_facts and line.startswith("- "):
            out["facts"].append(line[2:])
        else:
            m = _MARKERS.search(line)
            cites = [int(r) for r in re.findall(r"\d+", m.group(1))] if m else []
            text = line[: m.start()] if m else line
            section["sentences"].append({"text": text.strip(), "cites": cites})
    return out


class OpenAIStandIn(OllamaStandIn):
    """``with OpenAIStandIn() as server: server.url …`` (the base URL, with
    ``/v1``); ``mode``/``modes`` as for :class:`OllamaStandIn`."""

    def __init__(self, models: tuple[str, ...] = ("test-model",)) -> None:
        super().__init__(models)
        self.structured = "json_schema"  # json_schema | refuse | ignore
        self.api_key: str | None = None  # required when set
        self.models_route = True
        self.error_shape = "openai"  # or "vllm": the error's fields at the top level

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chats(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"] == "/v1/chat/completions"]


def _error(message: str, type_: str, code: str | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class _OpenAIHandler(_Handler):
    owner: OpenAIStandIn
    server_version = "openai-standin"

    def _error(self, message: str, type_: str, code: str | None, param: str | None = None) -> dict:
        """An error body in the API's shape (``{"error": {…}}``), or in vLLM's
        older one (``{"object": "error", "message", …}``)."""
        body = _error(message, type_, code, param)
        return {"object": "error", **body["error"]} if self.owner.error_shape == "vllm" else body

    def _authorized(self) -> bool:
        key = self.owner.api_key
        sent = self.headers.get("Authorization") or ""
        if key is None or sent == f"Bearer {key}":
            return True
        given = sent.removeprefix("Bearer ") or "(none)"
        self._json(
            401,
            self._error(
                f"Incorrect API key provided: {given}. You can find your API key in your "
                "server's settings.",
                "invalid_request_error",
                "invalid_api_key",
            ),
        )
        return False

    def do_GET(self) -> None:
        self.owner.requests.append({"method": "GET", "path": self.path, "body": None})
        if not self._authorized():
            return
        if self.path == "/v1/models" and self.owner.models_route:
            if self.owner.tags_mode == "slow":
                self._wait()
            data = [
                {"id": m, "object": "model", "created": 1700000000, "owned_by": "standin"}
                for m in self.owner.models
            ]
            self._json(200, {"object": "list", "data": data})
            return
        self._json(404, self._error(f"Not Found: {self.path}", "not_found_error", None))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.owner.requests.append(
            {"method": "POST", "path": self.path, "body": body, "headers": dict(self.headers)}
        )
        if not self._authorized():
            return
        if self.path != "/v1/chat/completions":
            self._json(404, self._error(f"Not Found: {self.path}", "not_found_error", None))
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._json(
                400,
                self._error("'messages' is required", "invalid_request_error", None, "messages"),
            )
            return
        model = body.get("model")
        if model not in self.owner.models:
            self._json(
                404,
                self._error(
                    f"The model `{model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )
            return
        fmt = body.get("response_format")
        if fmt is not None and self.owner.structured == "refuse":
            self._json(
                400,
                self._error(
                    "Invalid parameter: 'response_format' of type 'json_schema' is not "
                    "supported by this server.",
                    "invalid_request_error",
                    None,
                    "response_format",
                ),
            )
            return
        self._answer_chat(
            body, model, structured=fmt is not None and self.owner.structured != "ignore"
        )

    def _answer_chat(self, body: dict[str, Any], model: str, structured: bool) -> None:
        messages = body["messages"]
        prompt = next((m["content"] for m in messages if m.get("role") == "user"), "")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        mode = self.owner.mode_for(read_prompt(prompt)[0], turn)
        _, page = write_page(prompt, mode)
        if mode == "model-gone":
            self._json(
                404,
                self._error(
                    f"The model `{model}` does not exist.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )
            return
        if mode == "error500":
            sent = self.headers.get("Authorization") or ""
            message = f"the model crashed while serving the request ({sent})"
            self._json(500, self._error(message, "server_error", None))
            return
        if mode == "malformed":
            self._raw(200, b'{"choices": [{"message": {"content": "# Oops', "application/json")
            return
        if mode == "slow":
            self._wait()
        content, reason = self._content(mode, page, structured)
        stream = body.get("stream", False) if self.owner.stream is None else self.owner.stream
        if stream:
            self._stream(model, content, reason, mode)
        else:
            self._json(200, self._completion(model, content, reason))

    def _content(self, mode: str, page: str, structured: bool) -> tuple[str, str]:
        reason = "length" if mode == "cut-off" else "stop"
        if not structured or mode in ("empty", "think-only", "malformed"):
            content, _ = self._answer(mode, page)
            return content, reason
        if mode == "invent":
            page = page.replace("\n## Facts", f"\n{INVENTED}\n\n## Facts", 1)
            if INVENTED not in page:
                page += f"\n{INVENTED}\n"
        content = json.dumps(
            page_as_json(page) if mode != "omit-facts" else {**page_as_json(page), "facts": []}
        )
        if mode == "think":
            content = "<think>\nI will invent nothing.\n</think>\n" + content
        if mode == "fenced":
            content = "```json\n" + content + "\n```\n"
        return content, reason

    @staticmethod
    def _completion(model: str, content: str, reason: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": reason,
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
        }

    def _send(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _event(self, data: str) -> None:
        self._send(f"data: {data}\n\n".encode())

    def _stream(self, model: str, content: str, reason: str, mode: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "model": model}
        head["created"] = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return json.dumps({**head, "choices": [choice]})

        self._event(chunk({"role": "assistant", "content": ""}))
        self._send(b": keep-alive\n\n")  # a comment line, as servers send
        pieces = [content[i : i + 24] for i in range(0, len(content), 24)] or [""]
        for n, piece in enumerate(pieces):
            self._event(chunk({"content": piece}))
            if n == 0 and mode == "stall":
                self._wait()
                return
            if n == 0 and mode == "error-line":
                self._event(
                    json.dumps(self._error("the model ran out of memory", "server_error", None))
                )
                self.wfile.write(b"0\r\n\r\n")
                return
        self._event(chunk({}, reason))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


OpenAIStandIn.handler = _OpenAIHandler
