"""The corrections people make, in the shared SQL: one audit row each
(``corrections``, append-only), read back by what they were about."""

from __future__ import annotations

import builtins
import json
from typing import Any

from memors_core.domain.dates import now
from memors_core.domain.rows import Correction
from memors_core.log import get_logger
from memors_core.storage.sql.records import dumps
from memors_core.storage.sql.repo import Repo

log = get_logger("memors")

_COLS = "id, namespace, action, target, detail, created_at"


def _correction(row: tuple[Any, ...]) -> Correction:
    return Correction(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5])


class SqlCorrections(Repo):
    def record(self, namespace: str, action: str, target: str, detail: dict[str, Any]) -> int:
        cur = self.db.execute(
            "INSERT INTO corrections(namespace, action, target, detail, created_at) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (namespace, action, target, dumps(detail), now()),
        )
        ident: int = cur.fetchall()[0][0]  # step RETURNING to the end before COMMIT
        self.tx.after_commit(
            log.info, "corrected", namespace=namespace, action=action, target=target, id=ident
        )
        return ident

    def list(
        self, namespace: str, action: str | None = None, target: str | None = None
    ) -> list[Correction]:
        return [
            _correction(r)
            for r in self.planned(
                f"SELECT {_COLS} FROM corrections WHERE namespace = ?1 "
                "AND (CAST(?2 AS TEXT) IS NULL OR action = ?2) "
                "AND (CAST(?3 AS TEXT) IS NULL OR target = ?3) ORDER BY id",
                (namespace, action, target),
            )
        ]

    def newest(self, namespace: str, limit: int) -> tuple[builtins.list[Correction], int]:
        if limit <= 0:  # (no row to carry the count)
            total = self.planned(
                "SELECT COUNT(*) FROM corrections WHERE namespace = ?", (namespace,)
            )[0][0]
            return [], int(total)
        rows = self.planned(
            f"SELECT {_COLS}, COUNT(*) OVER () FROM corrections WHERE namespace = ? "
            "ORDER BY id DESC LIMIT ?",
            (namespace, limit),
        )
        return [_correction(r) for r in rows], int(rows[0][-1]) if rows else 0
