"""The optional Ollama executor: ``compact --kinds page[,stale] --executor ollama``.

It writes each ``page`` or ``stale`` item's page with a local model and hands
the result to :meth:`memors_core.Memory.submit` — the same validation and
checks as any other submission. Without ``--apply`` every submission is a dry
run (nothing stored); with it, pages the checks refuse are reported and the
run goes on with the next item.

The executor lives in the CLI package only: no MCP code path can reach it
(an import-linter contract in ``pyproject.toml`` forbids ``memors_mcp`` to
import ``memors_cli``). It uses only the public service (``Memory.compact``,
``Memory.submit``) and the wire format, and only the standard library for
HTTP (``http.client``, which, unlike ``urllib``, never goes through a proxy
from the environment, so a checked loopback endpoint is really what is
contacted).
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit

from memors_core import MemorsError, Memory
from memors_core.log import get_logger
from memors_core.wire import to_json

from .output import Progress, duration, emit_json, fail

log = get_logger("memors.executor")

EXECUTOR_KINDS = ("page", "stale")
DEFAULT_URL = "http://127.0.0.1:11434"
DEFAULT_TIMEOUT = 300.0
OLLAMA_PORT = 11434

#: Passage text put into one prompt, at most (about 8k tokens); a larger
#: item's page cites only the passages its prompt showed.
PASSAGE_BUDGET = 24_000
PREVIOUS_PAGE_BUDGET = 12_000
NUM_PREDICT = 4096
MAX_BODY_BYTES = 16 * 1024 * 1024

EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2


# --- errors --------------------------------------------------------------------------


class ItemFailed(Exception):
    """This item could not be written; nothing was stored, the run goes on."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class EndpointFailed(ItemFailed):
    """The endpoint cannot serve this run at all (unreachable, no such model):
    the run stops."""


# --- configuration: model, timeout, endpoint ---------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    url: str  # as shown in messages: scheme://host:port/base
    scheme: str
    host: str
    port: int
    base_path: str
    host_header: str
    #: The loopback addresses the host was checked to resolve to; the
    #: connection goes to exactly these (no second lookup). Empty with
    #: --allow-remote or https: connect by name.
    addresses: tuple[str, ...] = ()


def _usage(message: str, code: str = "usage") -> NoReturn:
    fail(message, code=code, exit_code=EXIT_USAGE)


def executor_kinds(kinds: list[str] | None) -> list[str]:
    if kinds is None:
        return list(EXECUTOR_KINDS)
    others = [k for k in dict.fromkeys(kinds) if k not in EXECUTOR_KINDS]
    if others:
        _usage(
            f"--executor ollama writes pages: --kinds may name only page and stale, "
            f"not {', '.join(others)}"
        )
    return list(dict.fromkeys(kinds))


def model_from_env(env: dict[str, str]) -> str:
    model = env.get("MEMORS_OLLAMA_MODEL", "").strip()
    if not model:
        _usage(
            "--executor ollama needs a model: set MEMORS_OLLAMA_MODEL "
            "(a non-thinking instruction model, e.g. qwen2.5:7b-instruct)",
            code="no-model",
        )
    return model


def timeout_from_env(env: dict[str, str]) -> float:
    raw = env.get("MEMORS_OLLAMA_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        _usage(f"MEMORS_OLLAMA_TIMEOUT must be a number of seconds above 0, got {raw!r}")
    return value


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resolve_endpoint(url: str, allow_remote: bool) -> Endpoint:
    """Parse MEMORS_OLLAMA_URL and apply the loopback rule — before any
    connection: the host must resolve, and only to loopback addresses,
    unless ``allow_remote``. A name that does not resolve is not known to be
    loopback, so it is refused too."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw  # OLLAMA_HOST style: host[:port]
        scheme_given = False
    else:
        scheme_given = True
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        _usage(f"MEMORS_OLLAMA_URL must be an http:// or https:// URL, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        _usage(f"MEMORS_OLLAMA_URL has a bad port: {url!r}")
    host = parts.hostname
    if not host:
        _usage(f"MEMORS_OLLAMA_URL has no host: {url!r}")
    if port is None:
        port = (443 if scheme == "https" else 80) if scheme_given else OLLAMA_PORT
    shown_host = f"[{host}]" if ":" in host else host
    base_path = parts.path.rstrip("/")
    shown = f"{scheme}://{shown_host}:{port}{base_path}"
    endpoint = Endpoint(
        url=shown,
        scheme=scheme,
        host=host,
        port=port,
        base_path=base_path,
        host_header=f"{shown_host}:{port}",
    )
    if allow_remote:
        return endpoint
    hint = (
        "the executor sends your passages and facts to this endpoint; "
        "pass --allow-remote to use a remote one"
    )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        _usage(
            f"MEMORS_OLLAMA_URL {shown}: host {host} does not resolve, so it is not known "
            f"to be loopback; {hint}",
            code="remote-endpoint",
        )
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    remote = [a for a in addresses if not _is_loopback(a)]
    if not addresses or remote:
        _usage(
            f"MEMORS_OLLAMA_URL {shown}: host {host} resolves to "
            f"{', '.join(remote or addresses) or 'nothing'}, not only to loopback "
            f"addresses; {hint}",
            code="remote-endpoint",
        )
    if scheme == "https":
        return endpoint  # the certificate names the host, not the address
    return Endpoint(**{**endpoint.__dict__, "addresses": addresses})


# --- the HTTP client ------------------------------------------------------------------------


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


def _short(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


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
                f"({type(exc).__name__}: {_short(str(exc), 80) or 'no detail'}); nothing stored",
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
        message = _short(message) or http.client.responses.get(status, "")
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
                    f"Ollama's answer to {what} is malformed JSON: {_short(text, 60)!r}",
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
                f"Ollama's answer to {what} is not a JSON object: {_short(json.dumps(obj), 60)}",
                code="bad-response",
            )
        if obj.get("error"):
            raise ItemFailed(
                f"Ollama reported an error: {_short(obj['error'])}", code="ollama-error"
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


# --- the prompt -------------------------------------------------------------------------------

SYSTEM_PROMPT = """\
You write one page of a knowledge base about one subject, using only the source \
material in the user's message: numbered passages and recorded facts. Every page is \
checked by a program before it is stored, so follow these rules exactly.

1. Use only what the passages and facts say. Add nothing from your own knowledge: no \
background, no opinions, no advice, no introduction, no conclusion, no remarks about \
the sources, the page or these instructions.
2. Write each sentence from one single passage or one single fact, reusing that \
source's own words (copying a passage's sentence word for word is fine). Never merge \
two passages into one sentence. Do not mention passage or fact labels such as P1 or F1.
3. State every recorded fact, if any are listed. Put them in a section "## Facts" as a \
bulleted list, one fact per bullet, written as the subject, the predicate and the value \
with their words exactly as given (you may add small words like "is", "was" or "the"): \
the fact "X | designed by | Y" becomes the bullet "- X was designed by Y."
4. Cover what the passages say, briefly; group it under short "## " headings if that \
helps.
5. Answer in Markdown and nothing else. The first line is "# " followed by the page \
title (the subject's name), then a blank line, then the page body. No code fences \
around the page, no JSON, no text before or after the page.
6. Do not think out loud and do not write a <think> block: answer with the page \
directly.
7. Write in the language of the passages."""

STALE_RULES = """\
This page already exists and needs an update: the previous version is below. Keep what \
the current passages and facts still say, drop every statement that only the \
forgotten or superseded passages supported, and add what the new passages say. Answer \
with the complete new page, not with a list of changes."""


def _one_line(text: Any) -> str:
    return " ".join(str(text if text is not None else "").split())


def _fence_safe(text: str, tag: str) -> str:
    return text.replace(f"</{tag}>", f"</ {tag}>")


def build_prompt(item: dict[str, Any]) -> tuple[list[dict[str, str]], list[str] | None, int]:
    """The chat messages for one page or stale item, the passages the page
    will cite (None: all of the payload's) and how many passages were shown."""
    payload = item["payload"]
    entity = payload.get("entity") or {}
    name = _one_line(entity.get("name")) or "the subject"
    aliases = [_one_line(a) for a in entity.get("aliases") or [] if _one_line(a)]
    passages = payload.get("passages") or []
    facts = payload.get("facts") or []
    stale = item["kind"] == "stale" or "page" in payload
    changes = payload.get("changes") or []
    new = {c.get("address") for c in changes if c.get("change") == "new"}

    out = [f"Subject: {name}" + (f" (also known as: {', '.join(aliases)})" if aliases else "")]
    out.append("")
    out.append("PASSAGES (the only text you may draw on):")
    shown: list[str] = []
    used = 0
    for n, p in enumerate(passages, 1):
        text = str(p.get("text", "")).strip()
        if shown and used + len(text) > PASSAGE_BUDGET:
            break
        used += len(text)
        shown.append(p["address"])
        status = ' status="new"' if p.get("address") in new else ""
        out.append(f'<passage id="P{n}"{status}>\n{_fence_safe(text, "passage")}\n</passage>')
    if len(shown) < len(passages):
        out.append(f"({len(passages) - len(shown)} more passages left out for length.)")
    out.append("")
    if facts:
        out.append("FACTS (state every one of them, keeping their words):")
        for n, f in enumerate(facts, 1):
            out.append(
                f"F{n}: {_one_line(f.get('subject') or name)} | {_one_line(f.get('predicate'))} "
                f"| {_one_line(f.get('value'))}"
            )
    else:
        out.append("FACTS: none recorded (write no Facts section).")
    system = SYSTEM_PROMPT
    if stale:
        system = f"{SYSTEM_PROMPT}\n\n{STALE_RULES}"
        page = payload.get("page") or {}
        previous = str(page.get("content", "")).strip()
        if len(previous) > PREVIOUS_PAGE_BUDGET:
            previous = previous[:PREVIOUS_PAGE_BUDGET] + "\n[…]"
        out.append("")
        out.append(
            f"PREVIOUS PAGE (version {page.get('version', '?')}, titled "
            f'"{_one_line(page.get("title"))}"; it may hold statements that are no longer '
            "supported):"
        )
        out.append(f"<previous_page>\n{_fence_safe(previous, 'previous_page')}\n</previous_page>")
        counts: dict[str, int] = {}
        for c in changes:
            counts[c.get("change", "?")] = counts.get(c.get("change", "?"), 0) + 1
        said = []
        if counts.get("new"):
            said.append(f'{counts["new"]} new passage(s), marked status="new" above')
        for change in ("forgotten", "superseded"):
            if counts.get(change):
                said.append(
                    f"{counts[change]} passage(s) the previous page drew on were {change} "
                    "and are no longer sources"
                )
        out.append("WHAT CHANGED: " + ("; ".join(said) if said else "its sources changed") + ".")
    out.append("")
    out.append(f'Write the page about {name} now. Start with the line "# {name}".')
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(out)},
    ]
    cites = None if len(shown) == len(passages) else shown
    return messages, cites, len(shown)


def chat_options(messages: list[dict[str, str]]) -> dict[str, Any]:
    """Sampling and context for one prompt: deterministic, and a context
    window large enough that Ollama does not silently cut the prompt."""
    tokens = sum(len(m["content"]) for m in messages) // 3 + NUM_PREDICT
    num_ctx = next((n for n in (8192, 16384, 32768) if n >= tokens), 32768)
    return {"temperature": 0, "num_ctx": num_ctx, "num_predict": NUM_PREDICT}


# --- reading the answer -------------------------------------------------------------------

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_FENCED = re.compile(r"\A(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*)\n\1[ \t]*\Z", re.S)
_TITLE = re.compile(r"\A#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*\Z")


def strip_thinking(text: str) -> str:
    """Remove ``<think>…</think>`` blocks a model may still emit (and a
    thought whose opening tag was in the prompt template: everything up to a
    lone ``</think>``)."""
    text = _THINK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opening = _THINK_OPEN.search(text)
    if opening:  # a thought that never ended: no answer after it
        text = text[: opening.start()]
    return text


def parse_page(answer: str) -> tuple[str, str]:
    """The title and Markdown body of a model's answer, or :class:`ItemFailed`.

    The defined format: first line ``# Title``, then the Markdown body. A
    fence around the whole answer (```markdown … ```) is unwrapped; JSON,
    an empty answer or one without the title line fail the item."""
    text = strip_thinking(answer).strip()
    if not text:
        raise ItemFailed("the model answered nothing (an empty page)", code="bad-answer")
    fenced = _FENCED.match(text)
    if fenced:
        lang = fenced.group(2).lower()
        if lang in ("json", "jsonc", "json5"):
            raise ItemFailed(
                "the model answered JSON, not a Markdown page ('# Title' then the body)",
                code="bad-answer",
            )
        if lang in ("", "markdown", "md"):
            text = fenced.group(3).strip()
    if text[:1] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise ItemFailed(
                "the model answered JSON, not a Markdown page ('# Title' then the body)",
                code="bad-answer",
            )
    first, _, body = text.partition("\n")
    title = _TITLE.match(first.strip())
    if not title:
        raise ItemFailed(
            f"the answer has no title: its first line must be '# Title', got {_short(first, 60)!r}",
            code="bad-answer",
        )
    body = body.strip()
    if not body:
        raise ItemFailed("the answer has a title but no page body", code="bad-answer")
    return title.group(1).strip(), body + "\n"


# --- running it -----------------------------------------------------------------------------


class ItemProgress:
    """A line per item on stderr: on a terminal (or when asked with
    ``--progress``), rewritten while the model writes (elapsed seconds,
    characters, the time left for all items), then left as the outcome."""

    def __init__(self, total: int, model: str) -> None:
        self.total = total
        self.model = model
        self.bar = Progress("", self._line, sep="")
        self.enabled = self.bar.enabled
        self.label = ""
        self.text = ""
        self.started = 0.0
        self.first = 0.0  # when the first item started
        self.finished = 0  # items done

    def start(self, n: int, label: str) -> None:
        self.label = f"[{n}/{self.total}] {label}"
        self.started = time.monotonic()
        self.first = self.first or self.started
        self.text = f"asking {self.model}…"
        self.bar.update(n, now=True)

    def tick(self, chars: int) -> None:
        self.text = f"writing… {chars} characters"

    def note(self, text: str) -> None:
        self.text = text

    def finish(self, outcome: str) -> None:
        took = time.monotonic() - self.started
        self.finished += 1
        self.text = f"{outcome} ({took:.1f} s)"
        self.bar.state = "final"
        self.bar.done()  # the outcome stays on its own line

    def _line(self, state: Any) -> str:
        if state == "final":
            return f"{self.label}: {self.text}"
        now = time.monotonic()
        line = f"{self.label}: {self.text}, {now - self.started:.0f} s"
        if self.finished:  # the items so far say how long the rest may take
            each = (self.started - self.first) / self.finished
            left = max(0.0, each * (self.total - self.finished) - (now - self.started))
            line += f" · about {duration(left)} left for all items"
        return line


OUTCOME_TEXT = {
    "would-write": "would be written (dry run: checks passed, nothing stored)",
    "written": "written",
    "refused": "refused by the checks (not stored)",
    "failed": "failed (nothing stored)",
    "not-attempted": "not attempted",
}


def _label(item: dict[str, Any]) -> str:
    entity = (item["payload"].get("entity") or {}).get("name", "?")
    return f"item {item['id']} ({item['kind']}) {entity}"


def _blank_report(item: dict[str, Any], outcome: str, error: str | None = None) -> dict[str, Any]:
    return {
        "item": item["id"],
        "kind": item["kind"],
        "entity": (item["payload"].get("entity") or {}).get("name"),
        "outcome": outcome,
        "error": error,
        "title": None,
        "content": None,
        "status": "open",
        "stored": False,
        "address": None,
        "diff": None,
        "checks": None,
        "message": None,
        "seconds": 0.0,
    }


def run_item(
    memory: Memory,
    client: OllamaClient,
    item: dict[str, Any],
    namespace: str,
    apply: bool,
    progress: ItemProgress,
) -> dict[str, Any]:
    """Write one item's page and submit it (a dry run unless ``apply``).
    Raises :class:`EndpointFailed` when the run must stop."""
    started = time.monotonic()
    report = _blank_report(item, "failed")
    try:
        messages, cites, shown = build_prompt(item)
        answer = client.chat(messages, chat_options(messages), progress.tick)
        log.info(
            "model_answered",
            namespace=namespace,
            item=item["id"],
            model=client.model,
            chars=len(answer.content),
            done_reason=answer.done_reason,
            **answer.stats,
        )
        if answer.done_reason == "length":
            raise ItemFailed(
                f"the answer was cut off at the model's length limit ({NUM_PREDICT} tokens "
                "or the context window); nothing stored",
                code="cut-off",
            )
        title, content = parse_page(answer.content)
        report["title"], report["content"] = title, content
        resolution: dict[str, Any] = {"title": title, "content": content}
        if cites is not None:
            resolution["cites"] = cites
        progress.note("checking…")
        submitted = to_json(
            memory.submit(
                item["id"],
                resolution,
                dry_run=not apply,
                namespace=namespace,
                fingerprint=item.get("fingerprint"),
            )
        )
    except EndpointFailed:
        raise
    except ItemFailed as exc:
        report["error"] = exc.message
    except MemorsError as exc:  # refused as outdated, bad title, …: this item only
        report["error"] = exc.message
    else:
        report.update(submitted)
        flagged = any(not c["passed"] for c in submitted["checks"].values())
        if submitted["stored"]:
            report["outcome"] = "written"
        elif flagged:
            report["outcome"] = "refused"
        else:
            report["outcome"] = "would-write"
        if cites is not None:
            report["message"] = (
                f"{report['message']} (the prompt held {shown} of "
                f"{len(item['payload'].get('passages') or [])} passages; the page cites those)"
            )
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


def render_item(report: dict[str, Any]) -> str:
    head = (
        f"item {report['item']} ({report['kind']}) {report['entity']}: "
        f"{OUTCOME_TEXT[report['outcome']]}"
    )
    if report["outcome"] == "failed" and report["error"]:
        head = f"{head}: {report['error']}"
    lines = [head]
    if report["title"] is not None:
        lines.append(f"  title: {report['title']}")
    if report["address"]:
        lines.append(f"  stored: {report['address']}")
    for name, check in (report["checks"] or {}).items():
        lines.append(f"  {name}: {'passed' if check['passed'] else 'FLAGGED'}")
        for flag in check["flagged"]:
            lines.append("    - " + ", ".join(f"{k}={v}" for k, v in flag.items()))
    if report["diff"]:
        lines.append("  diff:")
        lines.extend(f"    {line}" for line in report["diff"].rstrip("\n").split("\n"))
    return "\n".join(lines)


def summarize(reports: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"items": len(reports), "written": 0, "would_write": 0, "refused": 0, "failed": 0}
    counts["not_attempted"] = 0
    for r in reports:
        counts[r["outcome"].replace("-", "_")] += 1
    return counts


def run_executor(args: argparse.Namespace, kinds: list[str] | None) -> int:
    """``compact --executor ollama``: returns the exit status."""
    kinds = executor_kinds(kinds)
    env = dict(os.environ)
    model = model_from_env(env)
    timeout = timeout_from_env(env)
    endpoint = resolve_endpoint(env.get("MEMORS_OLLAMA_URL") or DEFAULT_URL, args.allow_remote)
    client = OllamaClient(endpoint, model, timeout)
    apply = bool(args.apply)

    with Memory.open(args.db) as memory:
        from .commands import compact_line

        with Progress("compacting", compact_line, sep=" ") as scanning:
            found = memory.compact(
                kinds, args.limit, namespace=args.ns, full=args.full, progress=scanning.update
            )
        compacted = to_json(found)
        items = compacted["items"]
        reports: list[dict[str, Any]] = []
        stopped: ItemFailed | None = None
        if items:
            try:
                client.check_model()
            except ItemFailed as exc:
                fail(exc.message, code=exc.code, exit_code=EXIT_USAGE)
        progress = ItemProgress(len(items), model)
        for n, item in enumerate(items, 1):
            if stopped is not None:
                reports.append(_blank_report(item, "not-attempted"))
                continue
            progress.start(n, _label(item))
            try:
                report = run_item(memory, client, item, args.ns, apply, progress)
            except EndpointFailed as exc:
                stopped = exc
                report = _blank_report(item, "failed", exc.message)
            reports.append(report)
            progress.finish(OUTCOME_TEXT[report["outcome"]])
            if report["error"]:
                print(f"memors-mcp: {_label(item)}: {report['error']}", file=sys.stderr)
            log.info(
                "item_executed",
                namespace=args.ns,
                item=item["id"],
                outcome=report["outcome"],
                error=report["error"],
            )
            if not args.json:
                print(render_item(report), flush=True)

    summary = summarize(reports)
    errors = compacted.get("errors") or []
    result: dict[str, Any] = {
        "namespace": compacted["namespace"],
        "model": model,
        "endpoint": endpoint.url,
        "dry_run": not apply,
        "open": compacted["open"],
        "items": reports,
        "summary": summary,
    }
    if errors:
        result["errors"] = errors
    if stopped is not None:
        result["error"] = {"code": stopped.code, "message": stopped.message}
    if args.json:
        emit_json(result)
    else:
        print(_summary_line(result))
    if stopped is not None:
        print(
            f"memors-mcp: run stopped ({stopped.code}); "
            f"{summary['not_attempted']} item(s) not attempted",
            file=sys.stderr,
        )
    for err in errors:
        print(
            f"memors-mcp: kind {err['kind']} (plugin {err['plugin']}) failed: {err['error']}",
            file=sys.stderr,
        )
    negative = summary["refused"] + summary["failed"] + summary["not_attempted"]
    return EXIT_NEGATIVE if negative or errors else EXIT_OK


def _summary_line(result: dict[str, Any]) -> str:
    s = result["summary"]
    if result["dry_run"]:
        head = f"dry run with {result['model']}"
        done = f"{s['would_write']} would be written"
    else:
        head = f"applied with {result['model']}"
        done = f"{s['written']} written"
    parts = [done, f"{s['refused']} refused by checks", f"{s['failed']} failed"]
    if s["not_attempted"]:
        parts.append(f"{s['not_attempted']} not attempted")
    line = f"{head}: {s['items']} item(s): " + ", ".join(parts)
    if result["open"] > s["items"]:
        line += f" ({result['open']} open; --limit took {s['items']})"
    if result["dry_run"] and s["items"]:
        line += "; nothing stored (add --apply to submit)"
    return line
