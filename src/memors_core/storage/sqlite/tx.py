"""The SQLite engine's transaction object: the shared SQL repositories with
SQLite's search, purge and transfer, and its clocks."""

from __future__ import annotations

from typing import Any

from memors_core.storage.sql.tx import SqlTx
from memors_core.storage.sqlite.purge import SqlitePurges
from memors_core.storage.sqlite.search import SqliteSearch
from memors_core.storage.sqlite.transfer import SqliteTransfer
from memors_core.storage.sqlite.vectors import SqliteVectors


class SqliteTx(SqlTx):
    """The repositories of one SQLite connection; ``native("sqlite")`` is
    the ``apsw.Connection``."""

    engine = "sqlite"

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.search = SqliteSearch(self)
        self.vectors = SqliteVectors(self)
        self.purges = SqlitePurges(self)
        self.transfer = SqliteTransfer(self)

    clock_sql = (
        "SELECT MAX(COALESCE((SELECT MAX(rowid) FROM {table}), 0), "
        "COALESCE((SELECT value FROM clock WHERE name = ?), 0))"
    )
    # AUTOINCREMENT keeps the change log's high-water mark here.
    change_head_sql = "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'changes'"
    hold_clock_sql = (
        "INSERT INTO clock(name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = MAX(value, excluded.value)"
    )
