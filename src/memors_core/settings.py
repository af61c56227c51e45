"""Settings: the limits on input and the MEMORS_* environment, default paths.

Every positive whole-number setting is read by :func:`limit_from_env`, so
each gives the same one-line error when it is not a number.
"""

from __future__ import annotations

import os

from memors_core.errors import BadInput

TYPE_CHECKING = False  # (not typing's: the lean search path reads this module)
if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

#: The setting named in "too long" errors of free-text fields.
FIELD_SETTING = "MEMORS_MAX_FIELD_CHARS"


def limit_from_env(name: str, default: int) -> int:
    """A positive whole-number setting from the environment, ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise BadInput(f"{name} must be a positive integer, got {raw!r}")
    return value


class Limits:
    """Explicit limits on input, each overridable by an environment variable."""

    def __init__(self) -> None:
        self.document_bytes = limit_from_env("MEMORS_MAX_DOCUMENT_BYTES", 10 * 1024 * 1024)
        self.passages_per_document = limit_from_env("MEMORS_MAX_PASSAGES", 100_000)
        self.page_bytes = limit_from_env("MEMORS_MAX_PAGE_BYTES", 1024 * 1024)
        self.query_chars = query_chars_limit()
        self.field_chars = limit_from_env(FIELD_SETTING, 10_000)


def query_chars_limit() -> int:
    """The longest search query, in characters (``MEMORS_MAX_QUERY_CHARS``)."""
    return limit_from_env("MEMORS_MAX_QUERY_CHARS", 10_000)


def default_file() -> str:
    """``$MEMORS_DB``, else ``$XDG_DATA_HOME/memors/memors.db``, else ~/.local/share."""
    env = os.environ.get("MEMORS_DB")
    if env:
        return os.path.expanduser(env)  # (Path.expanduser raises on ~nouser)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = (
        os.path.expanduser(xdg) if xdg else os.path.join(os.path.expanduser("~"), ".local", "share")
    )
    return os.path.join(base, "memors", "memors.db")


def default_path() -> Path:
    """:func:`default_file` as a path."""
    import pathlib  # (here: the lean search path never needs it)

    return pathlib.Path(default_file())


#: How long a store waits for another process's lock (``MEMORS_BUSY_TIMEOUT_MS``).
DEFAULT_BUSY_TIMEOUT_MS = 15_000


def busy_timeout_ms() -> int:
    """``$MEMORS_BUSY_TIMEOUT_MS``, else :data:`DEFAULT_BUSY_TIMEOUT_MS` (both engines)."""
    raw = os.environ.get("MEMORS_BUSY_TIMEOUT_MS")
    if raw is None:
        return DEFAULT_BUSY_TIMEOUT_MS
    try:
        return max(0, int(raw))
    except ValueError:
        raise BadInput(f"MEMORS_BUSY_TIMEOUT_MS must be an integer, got {raw!r}") from None
