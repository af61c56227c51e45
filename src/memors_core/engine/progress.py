"""Progress reports of long work (bulk loads, compaction) for a caller to show.

``Memory.remember``, ``Memory.remember_many`` and ``Memory.compact`` take
``progress=``, a callable that receives a :class:`Progress` now and then:
at most every :data:`INTERVAL` seconds while work runs, and at the start and
end of each phase. The callable should be quick (store the report; draw it
from another thread): it runs inside the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

#: Seconds between two reports of one phase (the first and last always go).
INTERVAL = 0.1


@attrs.frozen
class Progress:
    """Where long work has got to.

    ``task``: ``"remember"``, ``"compact"`` or ``"reindex"``. ``phase``: for
    remember, ``"preparing"`` (splitting and shingling, before storing),
    or ``"storing"`` (vectors are made off remember's path); for reindex,
    ``"embedding"``; for compact, the kind's name. ``step``: what the phase
    is doing now (compact: the kind's own step, such as ``"reading
    passages"``; ``"items"`` while items are written). ``done`` of
    ``total`` (``None`` when not known) ``unit`` (``"documents"``,
    ``"passages"``, ``"items"``…). ``documents``: documents stored so far
    (remember). ``created``: items created so far, all kinds (compact).
    """

    task: str
    phase: str
    done: int = 0
    total: int | None = None
    unit: str = ""
    step: str = ""
    documents: int = 0
    created: int = 0


class Reporter:
    """Calls ``callback`` with a :class:`Progress`, at most every
    :data:`INTERVAL` seconds unless ``force`` (phase starts and ends)."""

    __slots__ = ("callback", "next")

    def __init__(self, callback: Callable[[Progress], None] | None) -> None:
        self.callback = callback
        self.next = 0.0

    def __call__(self, force: bool = False, **fields) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if force or now >= self.next:
            self.next = now + INTERVAL
            self.callback(Progress(**fields))
