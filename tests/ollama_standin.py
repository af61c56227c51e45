"""A stand-in for Ollama's HTTP API, for the executor's tests.

Real HTTP on 127.0.0.1 (``http.server.ThreadingHTTPServer`` on port 0 in a
thread), with Ollama's request and response shapes:

- ``GET /api/tags`` → ``{"models": [{"name", "model", "modified_at", "size",
  "digest", "details"}…]}``;
- ``POST /api/chat`` → with ``"stream": false`` one object ``{"model",
  "created_at", "message": {"role": "assistant", "content"}, "done_reason",
  "done": true, durations and counts…}``; streamed (the default, as in
  Ollama) as NDJSON over chunked transfer encoding, chunks with
  ``"done": false`` and a final one with ``"done": true``;
- an unknown model → 404 ``{"error": "model 'x' not found"}``.

It writes pages deterministically from the prompt it is sent: it finds the
subject, the ``<passage ref="n">`` blocks and the ``F1: subject | predicate |
value`` fact lines of the executor's prompt (its first user message) and
echoes them as a Markdown page, each passage ending with its marker ``[n]``,
so a "good" answer passes the real checks. Other modes (per subject or for
all) misbehave in the ways a real model or server can. A mode may be a list:
the answer to the n-th turn of a conversation (n counted by the assistant
messages it holds: 0 for the first draft, 1 for a revision) takes the n-th
mode, the last one repeating — ``["invent-date", "good"]`` is a model that
fixes its page when told what the checks flagged.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: What the stand-in can do for a chat request.
MODES = (
    "good",  # a page built from the prompt: passes the checks
    "invent",  # the good page plus a sentence from nowhere (corruption)
    "invent-date",  # the good page with a year no passage gives (substitution)
    "merge",  # the passages merged into one sentence without markers (corruption)
    "merge-cited",  # that sentence ending with the markers of all it merges: passes
    "bad-marker",  # the good page with a marker naming no passage of the item
    "omit-facts",  # the good page without the recorded facts (omission)
    "think",  # a <think> block full of invented claims, then the good page
    "think-only",  # a <think> block and nothing after it
    "fenced",  # the good page wrapped in ```markdown … ```
    "json",  # the page as a JSON object instead of Markdown
    "empty",  # an empty answer
    "no-title",  # the page body without its '# Title' line
    "cut-off",  # the good page, but done_reason "length"
    "malformed",  # HTTP 200 with a body that is not JSON
    "error-line",  # a streamed chunk, then {"error": …} mid-stream
    "error500",  # HTTP 500 {"error": …}
    "model-gone",  # HTTP 404 model not found (as after `ollama rm`)
    "slow",  # waits `delay` seconds before answering at all
    "stall",  # streams the first chunk, then waits `delay` seconds
)

INVENTED = "The moon is made of green cheese and sings to sailors at night."
#: What "invent-date" adds to the first passage's sentence.
INVENTED_YEAR = "1987"

_SUBJECT = re.compile(r"^Subject: (.+?)(?: \(also known as: .*\))?$", re.M)
_PASSAGE = re.compile(r'<passage ref="(\d+)"[^>]*>\n(.*?)\n</passage>', re.S)
_FACT = re.compile(r"^F\d+: (.*?) \| (.*?) \| (.*)$", re.M)


def canonical(name: str) -> str:
    name = name.strip().casefold()
    return name if ":" in name.rsplit("/", 1)[-1] else name + ":latest"


def read_prompt(prompt: str) -> tuple[str, list[tuple[int, str]], list[tuple[str, str, str]]]:
    """The subject, the (ref, text) passages and the facts of the executor's prompt."""
    m = _SUBJECT.search(prompt)
    subject = m.group(1) if m else "Unknown"
    passages = [(int(ref), text.strip()) for ref, text in _PASSAGE.findall(prompt)]
    return subject, passages, _FACT.findall(prompt)


def write_page(prompt: str, mode: str = "good") -> tuple[str, str]:
    """(subject, page) echoed from the executor's prompt: each passage as a
    paragraph ending with its marker, then the facts; as ``mode`` says."""
    subject, passages, facts = read_prompt(prompt)
    parts = [f"# {subject}", ""]
    if mode in ("merge", "merge-cited") and passages:
        merged = "; ".join(text.rstrip(".") for _, text in passages) + "."
        if mode == "merge-cited":
            merged += " " + "".join(f"[{ref}]" for ref, _ in passages)
        parts.extend([merged, ""])
    else:
        for n, (ref, text) in enumerate(passages):
            if mode == "invent-date" and n == 0:
                text = f"{text.rstrip('.')}, since {INVENTED_YEAR}."
            marker = f"[{ref + 100}]" if mode == "bad-marker" and n == 0 else f"[{ref}]"
            parts.extend([f"{text} {marker}", ""])
    if facts:
        parts.extend(["## Facts", ""])
        parts.extend(f"- {s} {p} {v}." for s, p, v in facts)
    return subject, "\n".join(parts).rstrip() + "\n"


def good_page(prompt: str) -> tuple[str, str]:
    """(subject, page) echoed from the executor's prompt: passes the checks."""
    return write_page(prompt)


class _Server(ThreadingHTTPServer):
    """The stand-in's server: a client that hangs up before its answer is
    written (the executor giving up on a stalled stream, a test ending) is
    what some tests are about, not an error to print a traceback for."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # (BrokenPipe, reset, aborted)
            return
        super().handle_error(request, client_address)


class OllamaStandIn:
    """``with OllamaStandIn() as ollama: ollama.url …``; set ``mode`` (all
    subjects) or ``modes[subject]`` (a mode, or a list of them by turn);
    ``requests`` records what arrived."""

    handler: type[BaseHTTPRequestHandler]  # set below, once _Handler is defined

    def __init__(self, models: tuple[str, ...] = ("test-model:latest",)) -> None:
        self.models = list(models)
        self.mode: str | list[str] = "good"
        self.modes: dict[str, str | list[str]] = {}
        self.stream: bool | None = None  # None: as the request asks; else forced
        self.delay = 30.0
        self.tags_mode = "ok"  # ok | malformed | slow
        self.reject_think = False  # 400 "does not support thinking" when think is sent
        self.requests: list[dict[str, Any]] = []
        self.released = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle -----------------------------------------------------------------

    def start(self) -> OllamaStandIn:
        standin = self

        class Handler(self.handler):  # type: ignore[name-defined,misc]
            owner = standin

        self._server = _Server(("127.0.0.1", 0), Handler)
        # (stop() waits for the loop to see the request: half a second at
        # serve_forever's default poll, in the teardown of every test using it)
        server = self._server
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.02), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OllamaStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- what arrived ------------------------------------------------------------------

    def chats(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["path"] == "/api/chat"]

    def mode_for(self, subject: str, turn: int = 0) -> str:
        """The mode for this subject's ``turn`` (0: the first draft, 1: a revision)."""
        mode = self.modes.get(subject.casefold(), self.mode)
        if isinstance(mode, str):
            return mode
        return mode[min(turn, len(mode) - 1)]


class _Handler(BaseHTTPRequestHandler):
    owner: OllamaStandIn
    protocol_version = "HTTP/1.1"
    server_version = "ollama-standin"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    # --- plumbing ---------------------------------------------------------------------

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self._raw(status, body, "application/json; charset=utf-8")

    def _raw(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _start_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, obj: Any) -> None:
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _wait(self) -> None:
        self.owner.released.wait(self.owner.delay)

    # --- routes ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.owner.requests.append({"method": "GET", "path": self.path, "body": None})
        if self.path == "/api/tags":
            if self.owner.tags_mode == "slow":
                self._wait()
            if self.owner.tags_mode == "malformed":
                self._raw(200, b"<html>not json", "text/html")
                return
            self._json(
                200,
                {
                    "models": [
                        {
                            "name": name,
                            "model": name,
                            "modified_at": "2026-01-01T00:00:00.000000000Z",
                            "size": 4683087332,
                            "digest": "0" * 64,
                            "details": {
                                "format": "gguf",
                                "family": "qwen2",
                                "parameter_size": "7.6B",
                                "quantization_level": "Q4_K_M",
                            },
                        }
                        for name in self.owner.models
                    ]
                },
            )
        elif self.path == "/api/version":
            self._json(200, {"version": "0.0.0-standin"})
        else:
            self._json(404, {"error": "404 page not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.owner.requests.append({"method": "POST", "path": self.path, "body": body})
        if self.path != "/api/chat":
            self._json(404, {"error": "404 page not found"})
            return
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            self._json(400, {"error": "model is required"})
            return
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
        ):
            self._json(400, {"error": "invalid message format"})
            return
        model = body["model"]
        if canonical(model) not in {canonical(m) for m in self.owner.models}:
            self._json(404, {"error": f"model '{model}' not found"})
            return
        if self.owner.reject_think and "think" in body:
            self._json(400, {"error": f'"{model}" does not support thinking'})
            return
        # The payload is the first user message; a revision adds the draft (an
        # assistant message) and the checks' flags (a user message) after it.
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        turn = sum(1 for m in messages if m["role"] == "assistant")
        mode = self.owner.mode_for(read_prompt(prompt)[0], turn)
        _, page = write_page(prompt, mode)
        stream = body.get("stream", True) if self.owner.stream is None else self.owner.stream

        if mode == "model-gone":
            self._json(404, {"error": f"model '{model}' not found"})
            return
        if mode == "error500":
            self._json(500, {"error": "llama runner process has terminated: signal: killed"})
            return
        if mode == "malformed":
            self._raw(200, b'{"model": "x", "message": {"content": "# Oops', "application/json")
            return
        if mode == "slow":
            self._wait()
        content, reason = self._answer(mode, page)
        self._reply(
            model, content, reason, stream, stall=mode == "stall", error_line=mode == "error-line"
        )

    def _answer(self, mode: str, page: str) -> tuple[str, str]:
        title, _, body = page.partition("\n")
        content = {
            "invent": page + "\n" + INVENTED + "\n",
            "omit-facts": page.split("## Facts")[0],
            "think": "<think>\nRaft was invented on Mars in 1850 by a committee of owls.\n"
            "</think>\n\n" + page,
            "think-only": "<think>\nLet me think about this page for a while.\n</think>\n",
            "fenced": "```markdown\n" + page + "```\n",
            "json": json.dumps({"title": title.lstrip("# "), "content": body.strip()}),
            "empty": "",
            "no-title": body.strip() + "\n",
        }.get(mode, page)
        return content, "length" if mode == "cut-off" else "stop"

    def _reply(
        self, model: str, content: str, reason: str, stream: bool, stall: bool, error_line: bool
    ) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        stats = {
            "total_duration": 1_234_567,
            "load_duration": 1_000,
            "prompt_eval_count": 100,
            "prompt_eval_duration": 10_000,
            "eval_count": max(1, len(content) // 4),
            "eval_duration": 100_000,
        }
        if not stream:
            self._json(
                200,
                {
                    "model": model,
                    "created_at": stamp,
                    "message": {"role": "assistant", "content": content},
                    "done_reason": reason,
                    "done": True,
                    **stats,
                },
            )
            return
        self._start_chunked()
        pieces = [content[i : i + 24] for i in range(0, len(content), 24)] or [""]
        for n, piece in enumerate(pieces):
            self._chunk(
                {
                    "model": model,
                    "created_at": stamp,
                    "message": {"role": "assistant", "content": piece},
                    "done": False,
                }
            )
            if n == 0 and stall:
                self._wait()
                return
            if n == 0 and error_line:
                self._chunk({"error": "an error was encountered while running the model"})
                self._end_chunked()
                return
        self._chunk(
            {
                "model": model,
                "created_at": stamp,
                "message": {"role": "assistant", "content": ""},
                "done_reason": reason,
                "done": True,
                **stats,
            }
        )
        self._end_chunked()


OllamaStandIn.handler = _Handler
