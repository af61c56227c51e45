"""Loggers for the library.

The library only emits: each logger is a structlog logger wrapped around a
standard-library logger, so an application that configures nothing sees
nothing below WARNING (and never anything on stdout), while the frontends
configure structlog's processors and the stderr handler once, at start-up.
"""

from __future__ import annotations

import logging

import structlog


def get_logger(name: str = "memors"):
    return structlog.wrap_logger(
        logging.getLogger(name), wrapper_class=structlog.stdlib.BoundLogger
    )
