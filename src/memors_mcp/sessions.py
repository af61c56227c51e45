"""Streamable-HTTP sessions, bounded: idle ones expire, and only so many are open.

:class:`SessionRegistry` is the bookkeeping, with its clock injected so the
rules can be tested without waiting. The HTTP gate (``http.py``) consults it on
every ``/mcp`` request: a request to an expired session is answered 404 (the
MCP spec's answer, so a client initialises again), and a new session beyond
the cap first evicts expired and then the longest-idle sessions, else is
refused with 503.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from memors_core import BadInput

IDLE_ENV = "MEMORS_HTTP_SESSION_IDLE_S"
MAX_SESSIONS_ENV = "MEMORS_HTTP_MAX_SESSIONS"
DEFAULT_IDLE_S = 30 * 60.0
DEFAULT_MAX_SESSIONS = 256


def idle_timeout_from_env() -> float:
    raw = os.environ.get(IDLE_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise BadInput(f"{IDLE_ENV} must be a positive number of seconds, got {raw!r}")
    return value


def max_sessions_from_env() -> int:
    raw = os.environ.get(MAX_SESSIONS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_SESSIONS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise BadInput(f"{MAX_SESSIONS_ENV} must be a positive integer, got {raw!r}")
    return value


@dataclass
class _Session:
    last_active: float
    in_flight: int = 0


class SessionRegistry:
    """Which sessions are open, how long each has been idle, and who must make room.

    A session is idle while none of its requests is in flight (an open GET stream
    counts as one); it expires once idle for ``idle_s``. Not thread-safe: the HTTP
    gate calls it from the event loop only.
    """

    def __init__(
        self, idle_s: float, max_sessions: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self.clock = clock
        self.sessions: dict[str, _Session] = {}
        self.reserved = 0  # admitted new sessions whose id is not known yet

    def __len__(self) -> int:
        return len(self.sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.sessions

    def expired(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        if session is None or session.in_flight:
            return False
        return self.clock() - session.last_active >= self.idle_s

    def begin(self, session_id: str) -> bool:
        """A request to ``session_id`` starts; False if the session is unknown or expired."""
        if session_id not in self.sessions or self.expired(session_id):
            return False
        self.sessions[session_id].in_flight += 1
        return True

    def end(self, session_id: str) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.in_flight = max(0, session.in_flight - 1)
            session.last_active = self.clock()

    def opened(self, session_id: str) -> None:
        """The server answered a new session's first request with ``session_id``."""
        self.sessions.setdefault(session_id, _Session(self.clock()))

    def closed(self, session_id: str) -> None:
        self.sessions.pop(session_id, None)

    def reap(self) -> list[str]:
        """Forget every expired session; their ids (for the server to end them too)."""
        gone = [sid for sid in self.sessions if self.expired(sid)]
        for sid in gone:
            del self.sessions[sid]
        return gone

    def admit(self) -> tuple[bool, list[str]]:
        """Make room for one new session: (admitted, the sessions to end first).

        Expired sessions go first, then the longest-idle ones; a session with a
        request in flight is never evicted. When admitted, a slot is reserved until
        :meth:`settle` is called.
        """
        victims = self.reap()
        while len(self.sessions) + self.reserved >= self.max_sessions:
            idle = [(s.last_active, sid) for sid, s in self.sessions.items() if not s.in_flight]
            if not idle:
                return False, victims
            _, oldest = min(idle)
            del self.sessions[oldest]
            victims.append(oldest)
        self.reserved += 1
        return True, victims

    def settle(self, session_id: str | None) -> None:
        """The reserved slot is taken by ``session_id`` (or freed, when None)."""
        self.reserved = max(0, self.reserved - 1)
        if session_id is not None:
            self.opened(session_id)
