"""The thresholds of the rules kinds, lint and metrics share (SPEC §5, §6).

Each engine implements the rules as named queries
(:mod:`memors_core.storage.api`); the numbers live here, once.
"""

from __future__ import annotations

#: An entity needs a page once it has this many live passages and no live page.
PAGE_MIN_PASSAGES = 3

#: A page is stale once its entity gained this many live passages since it was built.
STALE_NEW_PASSAGES = 2
