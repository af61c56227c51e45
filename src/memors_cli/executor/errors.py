"""How a run fails: an item that cannot be written, an endpoint that cannot
serve the run, a setting that is wrong (a usage error); the exit statuses."""

from __future__ import annotations

from typing import NoReturn

from ..output import fail

EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2


class ItemFailed(Exception):
    """This item could not be written; nothing was stored, the run goes on."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class EndpointFailed(ItemFailed):
    """The endpoint cannot serve this run at all (unreachable, no such model):
    the run stops."""


def usage_error(message: str, code: str = "usage") -> NoReturn:
    fail(message, code=code, exit_code=EXIT_USAGE)


def short(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
