"""Full-text search on PostgreSQL: not yet (issue 15); the engine is not
selectable until it is."""

from __future__ import annotations

from memors_core.domain.model import SearchHit
from memors_core.storage.sql.records import Repo

MIGRATION = "SELECT 1"


class PgSearch(Repo):
    def passages(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        raise NotImplementedError

    def pages(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        raise NotImplementedError

    def facts(self, namespace: str, query: str, limit: int, as_of: str | None) -> list[SearchHit]:
        raise NotImplementedError

    def entities(self, namespace: str, query: str, limit: int) -> list[SearchHit]:
        raise NotImplementedError
