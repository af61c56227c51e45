"""The PostgreSQL engine's transaction object: the shared SQL repositories
with PostgreSQL's search, purge and transfer, and its clocks."""

from __future__ import annotations

from typing import ClassVar

from memors_core.storage.postgres.purge import PgPurges
from memors_core.storage.postgres.search import PgSearch
from memors_core.storage.postgres.transfer import PgTransfer
from memors_core.storage.postgres.vectors import PgVectors
from memors_core.storage.sql.engine import SqlTx
from memors_core.storage.sql.queue import SqlChangeLog

# The change log's clock is its highest number or the mark recorded when
# entries were dropped, whichever is higher: both read in the transaction's
# own snapshot (a sequence's last value would count a writer not yet committed).
_CHANGE_HEAD = (
    "SELECT GREATEST(COALESCE((SELECT MAX(seq) FROM changes), 0), "
    "COALESCE((SELECT value FROM clock WHERE name = 'changes'), 0))"
)


class PgChangeLog(SqlChangeLog):
    def prune(self, namespace: str) -> None:
        self.tx.hold_change_clock()
        super().prune(namespace)


class PgTx(SqlTx):
    """The repositories of one PostgreSQL connection; ``native("postgres")``
    is the ``psycopg.Connection`` (in autocommit mode, inside this transaction)."""

    engine = "postgres"
    repositories: ClassVar[dict[str, type]] = {
        **SqlTx.repositories,
        "changes": PgChangeLog,
        "search": PgSearch,
        "vectors": PgVectors,
        "purges": PgPurges,
        "transfer": PgTransfer,
    }
    clock_sql = (
        "SELECT GREATEST(COALESCE((SELECT MAX(rowid) FROM {table}), 0), "
        "COALESCE((SELECT value FROM clock WHERE name = ?), 0))"
    )
    hold_clock_sql = (
        "INSERT INTO clock(name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = GREATEST(clock.value, excluded.value)"
    )
    change_head_sql = _CHANGE_HEAD

    def hold_change_clock(self) -> None:
        """Record the change log's high-water mark (before entries are dropped)."""
        self.db.run(self.hold_clock_sql, ("changes", self.db.scalar(_CHANGE_HEAD)))

    def hold_clocks(self) -> None:
        super().hold_clocks()
        self.hold_change_clock()
