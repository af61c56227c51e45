"""How the CLI speaks: JSON or readable text on stdout, one-line errors on stderr."""

from __future__ import annotations

import json
import logging
import sys
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
    if JSON_MODE:
        print(json.dumps({"error": {"code": code, "message": line}}, ensure_ascii=False))
        sys.stdout.flush()
    if not line.startswith("memors-mcp"):
        line = f"memors-mcp: {line}"
    print(line, file=sys.stderr)
    sys.exit(exit_code)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def configure_logging(level: str) -> None:
    """structlog to stderr: JSON lines when stderr is not a terminal, console when it is.

    The stderr handler is set now; structlog itself is configured (and
    imported) only when the first event passes the level, so a command
    that logs nothing does not pay for it.
    """
    from memors_core.log import configure_when_used

    numeric = getattr(logging, level.upper(), logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("memors")
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    root.propagate = False

    def configure_structlog() -> None:
        import structlog

        renderer = (
            structlog.dev.ConsoleRenderer(colors=False)
            if sys.stderr.isatty()
            else structlog.processors.JSONRenderer()
        )
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                renderer,
            ],
            cache_logger_on_first_use=False,
        )

    configure_when_used(configure_structlog)


class Progress:
    """A one-line progress counter on stderr, shown only on a terminal."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label = label
        self.total = total
        self.enabled = sys.stderr.isatty()
        self.shown = False

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.label}: {done}{total} {note}".ljust(60)[:200])
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def render(data: Any, indent: int = 0) -> str:
    """A plain, readable rendering of JSON data for people."""
    pad = "  " * indent
    if isinstance(data, dict):
        lines = []
        for key, value in data.items():
            if isinstance(value, dict | list) and value:
                lines.append(f"{pad}{key}:")
                lines.append(render(value, indent + 1))
            else:
                shown = "" if value is None else value
                if isinstance(value, list | dict):
                    shown = "(none)"
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
