"""The work queue on SQLite: work items, merge candidates, the change log
and scan marks of incremental compaction, and the persisted counters."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memors_core.domain.dates import now
from memors_core.domain.ids import address
from memors_core.domain.rows import Item, MergeCandidate, Opened, OpenKey, ScanMark
from memors_core.log import get_logger
from memors_core.storage.sql.records import dumps
from memors_core.storage.sql.repo import Repo

log = get_logger("memors")

#: A work item's columns in the order :func:`item_of` reads them.
ITEM_COLS = (
    "id, namespace, kind, key, status, fingerprint, payload, resolution, created_at, updated_at"
)


def item_of(row: tuple[Any, ...]) -> Item:
    return Item(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        payload=json.loads(row[6]),
        resolution=json.loads(row[7]) if row[7] else None,
        created_at=row[8],
        updated_at=row[9],
    )


class SqlItems(Repo):
    def get(self, ident: int, namespace: str) -> Item | None:
        row = self.one(
            f"SELECT {ITEM_COLS} FROM work_items WHERE id = ? AND namespace = ?",
            (ident, namespace),
        )
        return None if row is None else item_of(row)

    def count(self, namespace: str, kind: str | None = None, status: str | None = None) -> int:
        return self.number(
            "SELECT COUNT(*) FROM work_items WHERE namespace = ?1 "
            "AND (?2 IS NULL OR kind = ?2) AND (?3 IS NULL OR status = ?3)",
            (namespace, kind, status),
        )

    def open_keys(self, namespace: str, kind: str) -> dict[str, OpenKey]:
        return {
            key: OpenKey(ident, fp)
            for ident, key, fp in self.planned(
                "SELECT id, key, fingerprint FROM work_items WHERE namespace = ? AND kind = ? "
                "AND status = 'open'",
                (namespace, kind),
            )
        }

    def last_for_key(self, namespace: str, kind: str, key: str) -> Item | None:
        row = self.one(
            f"SELECT {ITEM_COLS} FROM work_items WHERE namespace = ? AND kind = ? AND key = ? "
            "ORDER BY id DESC LIMIT 1",
            (namespace, kind, key),
        )
        return None if row is None else item_of(row)

    #: Each key's newest item: its id from the (namespace, kind, key, id)
    #: index, then its row; the keys a JSON list (:meth:`_keys`).
    LAST_FOR_KEYS = (
        f"SELECT {ITEM_COLS} FROM work_items JOIN (SELECT MAX(id) AS newest "
        "FROM work_items WHERE namespace = ? AND kind = ? "
        "AND key IN (SELECT value FROM json_each(?)) GROUP BY key) n ON id = n.newest"
    )

    def _keys(self, keys: Sequence[str]) -> Any:
        return json.dumps(list(keys))

    def last_for_keys(self, namespace: str, kind: str, keys: Sequence[str]) -> dict[str, Item]:
        if not keys:
            return {}
        rows = self.all(self.LAST_FOR_KEYS, (namespace, kind, self._keys(keys)))
        return {r[3]: item_of(r) for r in rows}

    def create_many(
        self, namespace: str, kind: str, rows: Sequence[tuple[str, str, Any]], at: str
    ) -> dict[str, int]:
        # (SQLite: a statement is a call, not a round trip)
        return {
            key: self.create(namespace, kind, key, fp, payload, at) for key, fp, payload in rows
        }

    def create(
        self, namespace: str, kind: str, key: str, fingerprint: str, payload: Any, at: str
    ) -> int:
        cur = self.db.execute(
            "INSERT INTO work_items(namespace, kind, key, status, fingerprint, payload, "
            "created_at, updated_at) VALUES (?, ?, ?, 'open', ?, ?, ?, ?) RETURNING id",
            (namespace, kind, key, fingerprint, dumps(payload), at, at),
        )
        ident: int = cur.fetchall()[0][0]  # step RETURNING to the end before COMMIT
        return ident

    def refresh(self, ident: int, fingerprint: str, payload: Any, at: str) -> None:
        self.run(
            "UPDATE work_items SET fingerprint = ?, payload = ?, updated_at = ? WHERE id = ?",
            (fingerprint, dumps(payload), at, ident),
        )

    def obsolete(self, ident: int, at: str) -> None:
        self.run(
            "UPDATE work_items SET status = 'obsolete', updated_at = ? WHERE id = ?", (at, ident)
        )

    def finish(self, ident: int, status: str, resolution: Any, at: str) -> bool:
        return (
            self.run(
                "UPDATE work_items SET status = ?, resolution = ?, updated_at = ? "
                "WHERE id = ? AND status = 'open'",
                (status, dumps(resolution), at, ident),
            )
            == 1
        )

    def count_open(self, namespace: str, kinds: list[str], after: int = 0) -> int:
        return self.number(
            "SELECT COUNT(*) FROM work_items WHERE namespace = ? AND status = 'open' "
            "AND kind IN (SELECT value FROM json_each(?)) AND id > ?",
            (namespace, json.dumps(kinds), after),
        )

    def open_after(
        self, namespace: str, kinds: list[str], after: int, limit: int | None
    ) -> list[Item]:
        return [
            item_of(r)
            for r in self.all(
                f"SELECT {ITEM_COLS} FROM work_items WHERE namespace = ? AND status = 'open' "
                "AND kind IN (SELECT value FROM json_each(?)) AND id > ? ORDER BY id"
                + ("" if limit is None else f" LIMIT {int(limit)}"),
                (namespace, json.dumps(kinds), after),
            )
        ]

    def open_counts(self, namespace: str | None = None) -> dict[tuple[str, str], int]:
        return {
            (ns, kind): n
            for ns, kind, n in self.planned(
                "SELECT namespace, kind, COUNT(*) FROM work_items WHERE status = 'open' "
                "AND (CAST(?1 AS TEXT) IS NULL OR namespace = ?1) GROUP BY namespace, kind",
                (namespace,),
            )
        }

    def resolution(self, ident: int, namespace: str) -> Any:
        raw = self.scalar(
            "SELECT resolution FROM work_items WHERE id = ? AND namespace = ?", (ident, namespace)
        )
        return json.loads(raw) if raw else None

    def list(
        self,
        namespace: str,
        kind: str | None = None,
        status: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Item]:
        return [
            item_of(r)
            for r in self.all(
                f"SELECT {ITEM_COLS} FROM work_items WHERE namespace = ?1 "
                "AND (?2 IS NULL OR kind = ?2) AND (?3 IS NULL OR status = ?3) AND id > ?4 "
                "ORDER BY id" + ("" if limit is None else f" LIMIT {int(limit)}"),
                (namespace, kind, status, after),
            )
        ]


_CANDIDATE_COLS = "id, namespace, first, second, origin, status, created_at"


class SqlMergeCandidates(Repo):
    def open(self, namespace: str, first: str, second: str, origin: str) -> Opened:
        pair = "|".join(sorted((first, second)))
        opened = self.run(
            "INSERT OR IGNORE INTO merge_candidates(namespace, first, second, pair, origin, "
            "status, created_at) VALUES (?, ?, ?, ?, ?, 'open', ?)",
            (namespace, first, second, pair, origin, now()),
        )
        ident, status = self.one(
            "SELECT id, status FROM merge_candidates WHERE namespace = ? AND pair = ?",
            (namespace, pair),
        )
        if opened:
            self.tx.after_commit(
                log.info,
                "merge_proposed",
                namespace=namespace,
                candidate=ident,
                entities=[address("entity", first), address("entity", second)],
                origin=origin,
            )
        return Opened(ident, status)

    def get(self, ident: int) -> MergeCandidate | None:
        row = self.one(f"SELECT {_CANDIDATE_COLS} FROM merge_candidates WHERE id = ?", (ident,))
        return None if row is None else MergeCandidate(*row)

    def set_status(self, ident: int, status: str) -> None:
        self.run(
            "UPDATE merge_candidates SET status = ?, decided_at = ? WHERE id = ?",
            (status, now(), ident),
        )

    def in_namespace(self, namespace: str, status: str | None = None) -> list[MergeCandidate]:
        return [
            MergeCandidate(*r)
            for r in self.all(
                f"SELECT {_CANDIDATE_COLS} FROM merge_candidates WHERE namespace = ?1 "
                "AND (?2 IS NULL OR status = ?2) ORDER BY id",
                (namespace, status),
            )
        ]


#: The clocks a scan's mark records besides the change log's, in its order.
CLOCKED = ("passages", "tombstones")


class SqlChangeLog(Repo):
    def heads_sql(self) -> str:
        """The statement reading the three clocks of a scan's mark at once
        (its parameters: :data:`CLOCKED`, one a ``?``, in order)."""
        tx = self.tx
        clocks = [f"({tx.clock_sql.format(table=table)})" for table in CLOCKED]
        return f"SELECT ({tx.change_head_sql}), {', '.join(clocks)}"

    @staticmethod
    def scan_mark(row: Sequence[Any] | None) -> ScanMark:
        """The row of :meth:`heads_sql` as a mark."""
        assert row is not None
        return ScanMark(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))

    def head(self) -> int:
        # The engine's sequence: the log's numbers are never reused after pruning.
        row = self.planned_one(self.tx.change_head_sql)
        return int(row[0]) if row else 0

    def heads(self) -> ScanMark:
        tx = self.tx
        if tx.counted("passages") or tx.counted("tombstones"):
            return ScanMark(self.head(), tx.passages.head(), tx.tombstones.head())
        # One round trip for the three (a compaction reads them once per kind).
        return self.scan_mark(self.planned_one(self.heads_sql(), CLOCKED))

    def settled_heads(self, namespace: str) -> ScanMark:
        return self.heads()  # (a write of the namespace's: no write of it is under way)

    def entities_since(self, namespace: str, after: int) -> set[str]:
        # The entities logged and what each is now (merged into another:
        # that one), in one statement: one round trip on a server engine,
        # inside a compaction's scan turn, where it was two.
        touched: set[str] = set()
        for entity, canonical in self.planned(
            "SELECT DISTINCT c.entity, e.canonical FROM changes c "
            "LEFT JOIN entities e ON e.id = c.entity WHERE c.namespace = ? AND c.seq > ?",
            (namespace, after),
        ):
            touched.add(entity)
            if canonical is not None:
                touched.add(canonical)
        return touched

    def mark(self, namespace: str, kind: str) -> ScanMark | None:
        row = self.planned_one(
            "SELECT change_seq, passage_seq, tombstone_seq FROM compact_marks "
            "WHERE namespace = ? AND kind = ?",
            (namespace, kind),
        )
        return None if row is None else ScanMark(*row)

    def set_mark(self, namespace: str, kind: str, mark: ScanMark) -> None:
        self.run(
            "INSERT INTO compact_marks(namespace, kind, change_seq, passage_seq, tombstone_seq) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(namespace, kind) DO UPDATE SET "
            "change_seq = excluded.change_seq, passage_seq = excluded.passage_seq, "
            "tombstone_seq = excluded.tombstone_seq",
            (namespace, kind, mark.changes, mark.passages, mark.tombstones),
        )

    def forget_marks(self, namespace: str) -> None:
        """The next compact of ``namespace`` rescans everything (after a purge)."""
        self.run("DELETE FROM compact_marks WHERE namespace = ?", (namespace,))

    def prune(self, namespace: str) -> None:
        # (no mark: the lowest is NULL, and no entry is at or below it)
        self.run(
            "DELETE FROM changes WHERE namespace = ?1 AND seq <= "
            "(SELECT MIN(change_seq) FROM compact_marks WHERE namespace = ?1)",
            (namespace,),
        )


class SqlCounters(Repo):
    #: Every counter row (an engine may keep a counter's rows in several tables).
    rows = "counters"

    def bump(self, name: str, kind: str = "", event: str = "", by: int = 1) -> None:
        if by:
            self.run(
                "INSERT INTO counters(name, kind, event, value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name, kind, event) DO UPDATE SET value = counters.value + excluded.value",
                (name, kind, event, by),
            )

    def read(self, name: str) -> dict[tuple[str, str], int]:
        return self.read_many([name])[name]

    def read_many(self, names: Iterable[str]) -> dict[str, dict[tuple[str, str], int]]:
        wanted = sorted(set(names))
        out: dict[str, dict[tuple[str, str], int]] = {name: {} for name in wanted}
        for name, kind, event, value in self.planned(
            f"SELECT name, kind, event, SUM(value) FROM {self.rows} c "
            f"WHERE name {self.tx.keys_in} GROUP BY name, kind, event",
            (json.dumps(wanted),),
        ):
            out[name][(kind, event)] = int(value)
        return out
