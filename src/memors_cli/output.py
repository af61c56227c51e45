"""How the CLI speaks: JSON or readable text on stdout, one-line errors on stderr."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, NoReturn

JSON_MODE = False


class Exit(Exception):
    """Raised to end a command with a status (after printing)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def fail(message: str, *, code: str = "error", exit_code: int = 2) -> NoReturn:
    """Print one line on stderr (and the JSON error on stdout) and exit."""
    line = " ".join(str(message).split()) or "error"
    # A message that quotes what the user gave may hold bytes that are not
    # UTF-8 (as lone surrogates): shown escaped, so printing it cannot fail.
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")
    if JSON_MODE:
        import json

        print(json.dumps({"error": {"code": code, "message": line}}, ensure_ascii=False))
        sys.stdout.flush()
    if not line.startswith("memors-mcp"):
        line = f"memors-mcp: {line}"
    print(line, file=sys.stderr)
    sys.exit(exit_code)


def emit_json(data: Any) -> None:
    import json

    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def configure_logging(level: str, *, every_logger: bool = False) -> None:
    """structlog to stderr: JSON lines when stderr is not a terminal, console when it is.

    The stderr handler and structlog are set up (and logging and structlog
    imported) only when the first event passes the level, so a command that
    logs nothing does not pay for them.

    ``every_logger`` (``serve``) routes the standard-library loggers of
    everything else in the process too — the MCP SDK, uvicorn, Python's
    warnings — through the same rendering on the root handler, so that off
    a terminal every stderr line is one JSON object.
    """
    numeric = {"debug": 10, "info": 20, "warning": 30, "error": 40}.get(level.lower(), 30)
    if every_logger:
        _route_every_logger(numeric)
        return
    from memors_core.log import configure_when_used

    def configure_structlog() -> None:
        import logging

        import structlog

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root = logging.getLogger("memors")
        root.handlers[:] = [handler]
        root.setLevel(numeric)
        root.propagate = False

        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                _renderer(),
            ],
            cache_logger_on_first_use=False,
        )

    configure_when_used(configure_structlog, level=numeric)


def _renderer() -> Any:
    import structlog

    if sys.stderr.isatty():
        return structlog.dev.ConsoleRenderer(colors=False)
    return structlog.processors.JSONRenderer()


def _route_every_logger(numeric: int) -> None:
    import logging

    import structlog

    tty = sys.stderr.isatty()
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    final = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if not tty:  # a traceback becomes a field of the one JSON line
        final.append(structlog.processors.format_exc_info)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            timestamper,
        ],
        processors=[*final, _renderer()],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]  # so the SDK's logging.basicConfig adds none of its own
    root.setLevel(numeric)
    ours = logging.getLogger("memors")
    ours.handlers[:] = []
    ours.setLevel(numeric)
    ours.propagate = True
    logging.captureWarnings(True)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            timestamper,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        cache_logger_on_first_use=False,
    )


#: Force progress on (``1``) even when stderr is not a terminal, or off (``0``) on one.
PROGRESS_SETTING = "MEMORS_PROGRESS"
#: Set by ``--progress``: show progress even when stderr is not a terminal.
FORCE_PROGRESS = False


def progress_mode() -> str | None:
    """``"terminal"`` (one line, rewritten in place), ``"lines"`` (stderr is
    not a terminal but progress was asked for: one plain line per update)
    or ``None`` (show nothing)."""
    import os

    setting = os.environ.get(PROGRESS_SETTING, "").strip().lower()
    if setting in ("0", "no", "off", "false", "never"):
        return None
    forced = FORCE_PROGRESS or setting in ("1", "yes", "on", "true", "always")
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced stderr
        tty = False
    if tty:
        return "terminal"
    return "lines" if forced else None


class Shown:
    """What a progress line says: ``text`` (``120/300 files · 1.2/3.4 MB``),
    and the ``done`` of ``total`` the rate and ETA are worked out from
    (``unit`` for the rate, ``"bytes"`` shown as MB/s); ``key`` changes
    when a new phase starts (the rate starts again)."""

    __slots__ = ("done", "key", "text", "total", "unit")

    def __init__(
        self, text: str, done: float = 0, total: float | None = None, unit: str = "", key: Any = ""
    ) -> None:
        self.text, self.done, self.total, self.unit, self.key = text, done, total, unit, key


def size(n: float) -> str:
    """Bytes as people read them: 980 B, 12.3 kB, 4.5 MB, 1.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """A live progress line on stderr, drawn by a ticker thread.

    The work only hands over its latest state (``update``, an attribute
    assignment); every ``interval`` seconds the thread turns it into a
    line with ``describe(state) -> Shown | str`` and adds the rate and ETA
    (from the last few seconds of ``done``). On a terminal the line is
    rewritten in place (``\\r``) and finished with a newline by ``done()``;
    off a terminal nothing is shown unless asked (``--progress`` or
    ``MEMORS_PROGRESS=1``), then one plain line per change, at most every
    half second. Standard output is never touched.
    """

    WINDOW = 5.0  # seconds of history the rate is taken over

    def __init__(
        self,
        label: str,
        describe: Any = None,
        *,
        interval: float = 0.2,
        mode: str | bool | None = True,
        sep: str = ": ",
        clock: Any = None,
    ) -> None:
        """``clock``: seconds, the rate's and ETA's (default ``time.monotonic``)."""
        self.label = label
        self.sep = sep
        self.describe = describe or (lambda state: str(state))
        self.mode = progress_mode() if mode is True else (mode or None)
        self.enabled = self.mode is not None
        self.interval = interval if self.mode == "terminal" else max(interval, 0.5)
        self.state: Any = None
        self.shown = False
        self._last_text = ""
        self._samples: Any = None
        self._key: Any = object()
        self._since = 0.0
        self._stop: Any = None
        self._thread: Any = None
        self._clock = clock

    # -- called by the work (cheap) -------------------------------------------------

    def update(self, state: Any, now: bool = False) -> None:
        """Hand over the latest state; ``now`` draws it at once (not at the next tick)."""
        self.state = state
        if self.enabled:
            if self._thread is None:
                self._start()
            if now:
                self._draw()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()

    def done(self) -> None:
        """Stop the ticker, draw the last state and end the line."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._draw(final=True)
        if self.shown and self.mode == "terminal":
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.shown = False

    # -- the ticker --------------------------------------------------------------------

    def _start(self) -> None:
        import collections
        import threading
        import time

        self._time = self._clock or time.monotonic
        self._samples = collections.deque()
        self._drawing = threading.Lock()  # the work's thread may draw too (update(now=True))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memors-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._draw()
            except Exception:  # a progress line never breaks the work
                return

    def _draw(self, final: bool = False) -> None:
        with self._drawing:
            self._draw_now(final)

    def _draw_now(self, final: bool) -> None:
        state = self.state
        if state is None:
            return
        shown = self.describe(state)
        if isinstance(shown, str):
            shown = Shown(shown)
        now = self._time()
        samples = self._samples
        if shown.key != self._key:  # a new phase: its own rate
            self._key = shown.key
            self._since = now
            samples.clear()
        samples.append((now, shown.done))
        while len(samples) > 2 and now - samples[0][0] > self.WINDOW:
            samples.popleft()
        parts = [f"{self.label}{self.sep}{shown.text}"]
        t0, d0 = samples[0]
        if not final and now - t0 >= 0.5 and shown.done > d0:
            rate = (shown.done - d0) / (now - t0)
            unit = shown.unit
            parts.append(f"{size(rate)}/s" if unit == "bytes" else f"{rate:,.0f} {unit}/s".strip())
            if shown.total:
                parts.append(f"ETA {duration(max(0.0, shown.total - shown.done) / rate)}")
        elif not final and now - self._since >= 1:  # nothing to count: show it is alive
            parts.append(duration(now - self._since))
        line = " · ".join(parts)
        if self.mode == "terminal":
            import os

            try:
                columns = os.get_terminal_size(sys.stderr.fileno()).columns
            except (OSError, ValueError):
                columns = 0
            width = columns - 1 if columns > 20 else 200  # a pty may say 0 columns
            sys.stderr.write(f"\r{line[:width]}\x1b[K")
        else:
            text = parts[0]
            if text == self._last_text and not final:
                return  # off a terminal: a line only when something moved
            self._last_text = text
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self.shown = True


#: Fields whose absence means something: said, not left out.
ABSENT_MEANS = {
    "valid_from": "none (valid since always)",
    "valid_to": "none (open-ended)",
    "page": "none",
}


def render(data: Any, indent: int = 0) -> str:
    """A plain, readable rendering of JSON data for people.

    An empty field is left out (``title`` of an untitled document), unless
    its absence means something (``valid_to``: open-ended); an empty list or
    object says ``none``; true and false read yes and no."""
    pad = "  " * indent
    if isinstance(data, dict):
        lines = []
        for key, value in data.items():
            if isinstance(value, dict | list) and value:
                lines.append(f"{pad}{key}:")
                lines.append(render(value, indent + 1))
            else:
                if value is None or value == "":
                    if key not in ABSENT_MEANS:
                        continue
                    lines.append(f"{pad}{key}: {ABSENT_MEANS[key]}")
                    continue
                shown = value
                if isinstance(value, bool):
                    shown = "yes" if value else "no"
                elif isinstance(value, list | dict):
                    shown = "none"
                if isinstance(shown, str) and "\n" in shown:
                    body = "\n".join(f"{pad}  {line}" for line in shown.splitlines())
                    lines.append(f"{pad}{key}: |\n{body}")
                else:
                    lines.append(f"{pad}{key}: {shown}")
        return "\n".join(lines)
    if isinstance(data, list):
        out = []
        for value in data:
            if isinstance(value, dict):
                block = render(value, indent + 1).splitlines()
                if block:
                    out.append(f"{pad}- {block[0].strip()}")
                    out.extend(block[1:])
            else:
                out.append(f"{pad}- {value}")
        return "\n".join(out)
    return f"{pad}{data}"


def _addresses(value: Any, most: int = 4) -> str:
    items = value if isinstance(value, list) else [value]
    items = [str(a) for a in items if a]
    if not items:
        return "no source"
    shown = ", ".join(items[:most])
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def flag_lines(check: str, flag: dict[str, Any]) -> list[str]:
    """One flag of a check as a reader acts on it: the sentence, then what is
    wrong with it and where it was looked for (any other check's flags as
    ``key=value`` pairs)."""
    if check == "corruption" and "sentence" in flag:
        missing = ", ".join(flag.get("missing") or []) or "none"
        share = f"{float(flag.get('overlap') or 0):.0%}"
        return [
            f'- "{flag["sentence"]}"',
            f"    shares {share} of its content words with {_addresses(flag.get('best_source'))};"
            f" missing: {missing}",
        ]
    if check == "substitution" and "sentence" in flag:
        return [
            f'- "{flag["sentence"]}"',
            f"    {flag.get('class')} {flag.get('token')!r} is in none of its sources: "
            f"{_addresses(flag.get('window'))}",
        ]
    if check == "omission" and "fact" in flag:
        share = f"{float(flag.get('coverage') or 0):.0%}"
        return [f"- {flag['fact']}: only {share} of its words are on the page"]
    return ["- " + ", ".join(f"{k}={v}" for k, v in flag.items())]


def check_lines(checks: dict[str, Any], indent: str = "") -> list[str]:
    """Each check's verdict, and under it each flag (:func:`flag_lines`)."""
    lines = []
    for name, check in checks.items():
        lines.append(f"{indent}{name}: {'passed' if check['passed'] else 'FLAGGED'}")
        for flag in check["flagged"]:
            lines.extend(f"{indent}  {line}" for line in flag_lines(name, flag))
    return lines
