"""Purge on PostgreSQL: not yet (issue 15)."""

from __future__ import annotations

from memors_core.storage.sql.purges import SqlPurges

STEPS: tuple[str, ...] = ()


class PgPurges(SqlPurges):
    pass


def erasing(store):
    raise NotImplementedError


def run_step(store, step, *, wait):
    raise NotImplementedError
