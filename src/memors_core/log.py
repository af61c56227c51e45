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

from functools import cache

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``memors-mcp search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable
    from typing import Any

# The standard-library levels (logging.DEBUG …), without importing logging.
_LEVELS = {
    "debug": 10,
    "info": 20,
    "warning": 30,
    "warn": 30,
    "error": 40,
    "exception": 40,
    "critical": 50,
    "fatal": 50,
}

# structlog (with rich, which it pulls in when installed) costs more to
# import than the rest of a small command: it is imported only when an
# event passes the standard-library level check, and a frontend's structlog
# set-up waits for that moment too (see :func:`configure_when_used`).
# The standard library's ``logging`` (with threading, traceback …) is
# imported only then too when a frontend declared its level: an event below
# it is dropped before anything is imported.
_deferred: list[Callable[[], None]] = []
_in_use = False
_floor: int | None = None


def configure_when_used(configure: Callable[[], None], *, level: int | None = None) -> None:
    """Run ``configure`` (a frontend's logging and ``structlog.configure(...)``
    set-up) just before the first event is emitted, or now if one already was.

    ``level`` is the level the frontend gives the ``memors`` loggers in
    ``configure``: until then, events below it are dropped without
    importing anything."""
    global _floor
    _floor = level
    if _in_use:
        configure()
    else:
        _deferred.append(configure)


def _run_deferred() -> None:
    global _in_use
    _in_use = True
    while _deferred:
        _deferred.pop(0)()


@cache
def _filtering_class() -> type:
    import structlog

    class LevelFilteringLogger(structlog.stdlib.BoundLogger):
        """A stdlib-backed structlog logger that skips the processors (and
        their cost) for events the standard-library logger would drop anyway."""

        def _proxy_to_logger(
            self, method_name: str, event: str | None = None, *event_args: str, **event_kw: Any
        ) -> Any:
            level = _LEVELS.get(method_name)
            if level is not None and not self._logger.isEnabledFor(level):
                return None
            return super()._proxy_to_logger(method_name, event, *event_args, **event_kw)

    return LevelFilteringLogger


class _Logger:
    """A structlog logger built on first use, after a cheap level check."""

    __slots__ = ("_bound", "_name", "_std")

    def __init__(self, name: str) -> None:
        self._name = name
        self._std: Any = None
        self._bound: Any = None

    def _stdlib(self) -> Any:
        if self._std is None:
            import logging

            self._std = logging.getLogger(self._name)
        return self._std

    def _logger(self) -> Any:
        if self._bound is None:
            import structlog

            _run_deferred()
            self._bound = structlog.wrap_logger(self._stdlib(), wrapper_class=_filtering_class())
        return self._bound

    def _emit(self, method: str, event: Any, args: tuple, kw: dict[str, Any]) -> Any:
        level = _LEVELS[method]
        if _deferred and _floor is not None:  # the frontend's set-up waits for an event
            if level < _floor:
                return None
            _run_deferred()  # (it sets the level the check below reads)
        if not self._stdlib().isEnabledFor(level):
            return None
        return getattr(self._logger(), method)(event, *args, **kw)

    def debug(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("debug", event, args, kw)

    def info(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("info", event, args, kw)

    def warning(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("warning", event, args, kw)

    warn = warning

    def error(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("error", event, args, kw)

    def exception(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("exception", event, args, kw)

    def critical(self, event: Any = None, *args: Any, **kw: Any) -> Any:
        return self._emit("critical", event, args, kw)

    fatal = critical

    def __getattr__(self, name: str) -> Any:  # bind(), new(), … on the real logger
        return getattr(self._logger(), name)


def get_logger(name: str = "memors") -> Any:
    """A logger for library code; configuration is left to the application."""
    return _Logger(name)
