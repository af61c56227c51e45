"""Settings: the limits on input and the MEMORS_* environment, default paths.

Every positive whole-number setting is read by :func:`limit_from_env`, so
each gives the same one-line error when it is not a number.
"""

from __future__ import annotations

import os
from pathlib import Path

from memors_core.errors import BadInput

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
        self.query_chars = limit_from_env("MEMORS_MAX_QUERY_CHARS", 10_000)
        self.field_chars = limit_from_env(FIELD_SETTING, 10_000)


def default_path() -> Path:
    """``$MEMORS_DB``, else ``$XDG_DATA_HOME/memors/memors.db``, else ~/.local/share."""
    env = os.environ.get("MEMORS_DB")
    if env:
        return Path(os.path.expanduser(env))  # (Path.expanduser raises on ~nouser)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(os.path.expanduser(xdg)) if xdg else Path.home() / ".local" / "share"
    return base / "memors" / "memors.db"
