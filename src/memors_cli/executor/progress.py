"""The line per item on stderr while the model writes, left as its outcome."""

from __future__ import annotations

import time
from typing import Any

from ..output import Progress, duration


class ItemProgress:
    """A line per item on stderr: on a terminal (or when asked with
    ``--progress``), rewritten while the model writes (elapsed seconds,
    characters, the time left for all items), then left as the outcome."""

    def __init__(self, total: int, model: str) -> None:
        self.total = total
        self.model = model
        self.bar = Progress("", self._line, sep="")
        self.enabled = self.bar.enabled
        self.label = ""
        self.text = ""
        self.doing = "writing"  # or "revising", after the checks refused a draft
        self.started = 0.0
        self.first = 0.0  # when the first item started
        self.finished = 0  # items done

    def start(self, n: int, label: str) -> None:
        self.label = f"[{n}/{self.total}] {label}"
        self.started = time.monotonic()
        self.first = self.first or self.started
        self.doing = "writing"
        self.text = f"asking {self.model}…"
        self.bar.update(n, now=True)

    def tick(self, chars: int) -> None:
        self.text = f"{self.doing}… {chars} characters"

    def revising(self, flags: int) -> None:
        """The checks refused the draft: the model is asked to fix it."""
        self.doing = "revising"
        self.text = f"refused ({flags} flag(s)); asking {self.model} to revise…"

    def note(self, text: str) -> None:
        self.text = text

    def finish(self, outcome: str) -> None:
        took = time.monotonic() - self.started
        self.finished += 1
        self.text = f"{outcome} ({took:.1f} s)"
        self.bar.state = "final"
        self.bar.done()  # the outcome stays on its own line

    def _line(self, state: Any) -> str:
        if state == "final":
            return f"{self.label}: {self.text}"
        now = time.monotonic()
        line = f"{self.label}: {self.text}, {now - self.started:.0f} s"
        if self.finished:  # the items so far say how long the rest may take
            each = (self.started - self.first) / self.finished
            left = max(0.0, each * (self.total - self.finished) - (now - self.started))
            line += f" · about {duration(left)} left for all items"
        return line
