"""Export, import and backup on PostgreSQL: not yet (issue 15)."""

from __future__ import annotations

from memors_core.storage.sql.records import Repo


class PgTransfer(Repo):
    pass


def backup(store, path):
    raise NotImplementedError
