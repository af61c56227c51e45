"""Errors a user can act on.

Every error that reaches a frontend is a :class:`MemorsError` with a short
machine-readable ``code`` and a one-line ``message``; the CLI prints the
message and exits 2, the MCP server turns it into a tool error.
"""

from __future__ import annotations


class MemorsError(Exception):
    """Bad input or a request that cannot be carried out; nothing was stored."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class BadInput(MemorsError):
    """An argument is not what the operation takes (exit 2 on the command line, a
    tool error over MCP); nothing was stored."""

    code = "bad-input"


class BadAddress(BadInput):
    """An address that is not ``memo://TYPE/ID`` of a type the operation takes."""

    code = "bad-address"


class NotFound(MemorsError):
    """No row has that address in this namespace."""

    code = "not-found"


class Refused(MemorsError):
    """The request was understood but the store's rules refuse it."""

    code = "refused"


class PluginError(MemorsError):
    """A plugin failed to load, or its kind, check or rule failed; the message names
    the plugin."""

    code = "plugin-error"


class StoreBusy(MemorsError):
    """Another process held the store past the busy timeout; try again."""

    code = "busy"


class StoreUnavailable(MemorsError):
    """The database could not be reached, or the connection to it was lost:
    not a busy store, and not a plugin's fault."""

    code = "unavailable"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with a one-line ``message`` saying truthfully what was committed."""

    code = "interrupted"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
