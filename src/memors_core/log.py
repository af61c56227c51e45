"""Loggers for the library.

The library only emits: each logger is a structlog logger wrapped around a
standard-library logger, so an application that configures nothing sees
nothing below WARNING (and never anything on stdout), while the frontends
configure structlog's processors and the stderr handler once, at start-up.

Event names are snake_case verbs in the past tense (``item_created``,
``page_marked_stale``); every state change carries ``namespace`` and the
addresses or item ids involved.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


class LevelFilteringLogger(structlog.stdlib.BoundLogger):
    """A stdlib-backed structlog logger that skips the processors (and their
    cost) for events the standard-library logger would drop anyway."""

    def _proxy_to_logger(
        self, method_name: str, event: str | None = None, *event_args: str, **event_kw: Any
    ) -> Any:
        level = _LEVELS.get(method_name)
        if level is not None and not self._logger.isEnabledFor(level):
            return None
        return super()._proxy_to_logger(method_name, event, *event_args, **event_kw)


def get_logger(name: str = "memors"):
    """A logger for library code; configuration is left to the application."""
    return structlog.wrap_logger(logging.getLogger(name), wrapper_class=LevelFilteringLogger)
