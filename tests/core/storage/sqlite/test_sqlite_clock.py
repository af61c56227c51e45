"""The SQLite engine's clocks: row ids kept from coming round again.

SQLite gives a new row the highest row id plus one, so once the newest rows
are erased their numbers would be handed out again; the ``clock`` table
keeps each clock's high-water mark (``SqliteTx.hold_clocks``, called by
``SqliteStore.erasing``). The engine-neutral half of this is in the storage
contract (``test_clock_numbers_are_not_handed_out_again_after_a_purge``).
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.storage.sqlite.schema import no_delete_triggers
from memors_core.testing.storage_contract import NS, forget, remember

pytestmark = pytest.mark.sqlite_only("the SQLite engine's own clock tests, through apsw")


def clock_table(store: SqliteStore) -> dict[str, int]:
    return dict(store.conn.execute("SELECT name, value FROM clock").fetchall())


def max_rowid(store: SqliteStore, table: str) -> int:
    return store.conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0]


def raw_delete(store: SqliteStore, table: str, target: str) -> None:
    """Delete one row the way only purge may (its trigger dropped for the statement)."""
    drop, create = no_delete_triggers(table)
    column = "target" if table == "tombstones" else "id"
    store.conn.execute(drop)
    store.conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (target,))
    store.conn.execute(create)


def test_the_passage_seq_is_the_row_id(store: SqliteStore) -> None:
    passage = remember(store, "Raft elects a leader.")
    with store.read() as tx:
        row = tx.passages.get(passage)
        assert row is not None
        assert row.seq == max_rowid(store, "passages") == tx.passages.head()


def test_erasing_records_the_high_water_marks(store: SqliteStore) -> None:
    remember(store, "Stays.")
    newest = remember(store, "Erased.")
    forget(store, "passage", newest)
    passages, tombstones = max_rowid(store, "passages"), max_rowid(store, "tombstones")
    assert clock_table(store) == {}  # nothing erased yet: the row ids are the clock
    with store.erasing() as tx:
        tx.purges.erase_passage(newest)
    assert clock_table(store) == {"passages": passages, "tombstones": tombstones}
    assert max_rowid(store, "passages") == passages - 1
    assert max_rowid(store, "tombstones") == 0
    with store.read() as tx:
        assert (tx.passages.head(), tx.tombstones.head()) == (passages, tombstones)


def test_hold_clocks_before_a_raw_delete_keeps_the_number_from_coming_back(
    store: SqliteStore,
) -> None:
    remember(store, "Stays.")
    newest = remember(store, "Deleted by hand.")
    erased = max_rowid(store, "passages")
    with store.write() as tx:
        tx.hold_clocks()
        raw_delete(store, "passages", newest)
    later = remember(store, "Arrives later.")
    with store.read() as tx:
        row = tx.passages.get(later)
        assert row is not None and row.seq == erased + 1


def test_without_the_high_water_mark_the_number_would_come_back(store: SqliteStore) -> None:
    # Why the clock table exists: the same raw delete without hold_clocks.
    remember(store, "Stays.")
    newest = remember(store, "Deleted by hand.")
    erased = max_rowid(store, "passages")
    with store.write():
        raw_delete(store, "passages", newest)
    later = remember(store, "Arrives later.")
    with store.read() as tx:
        row = tx.passages.get(later)
        assert row is not None and row.seq == erased


def test_the_clock_is_the_larger_of_the_mark_and_the_rows(store: SqliteStore) -> None:
    # A store migrated from schema 3 has rows but no marks; a mark left
    # behind by an old purge must not hold the clock back either.
    for n in range(3):
        remember(store, f"Passage {n}.")
    with store.write():
        store.conn.execute("INSERT INTO clock(name, value) VALUES ('passages', 1)")
    with store.read() as tx:
        assert tx.passages.head() == 3
    with store.write():
        store.conn.execute("UPDATE clock SET value = 10 WHERE name = 'passages'")
    later = remember(store, "After the mark.")
    with store.read() as tx:
        row = tx.passages.get(later)
        assert row is not None and row.seq == 11 == tx.passages.head()


def test_hold_clocks_never_lowers_a_mark(store: SqliteStore) -> None:
    remember(store, "One.")
    with store.write() as tx:
        store.conn.execute("INSERT INTO clock(name, value) VALUES ('passages', 50)")
        tx.hold_clocks()
    assert clock_table(store)["passages"] == 50


def test_the_marks_survive_reopening(store: SqliteStore, tmp_path: Path) -> None:
    newest = remember(store, "Erased.")
    with store.erasing() as tx:
        tx.purges.erase_passage(newest)
    store.close()
    again = SqliteStore.open(tmp_path / "s.db")
    try:
        later = remember(again, "After reopening.")
        with again.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq == 2
    finally:
        again.close()


@pytest.mark.parametrize("table", ["passages", "tombstones", "entities", "documents"])
def test_raw_rows_refuse_deletion_outside_erasing(store: SqliteStore, table: str) -> None:
    passage = remember(store, "[[Raft]] is kept.", about="Raft")
    forget(store, "passage", passage)
    with pytest.raises(apsw.ConstraintError, match="never deleted"), store.write():
        store.conn.execute(f"DELETE FROM {table}")
    with store.read() as tx:
        assert tx.passages.get(passage) is not None
        assert tx.tombstones.state(passage) == "forgotten"
        assert tx.entities.find("Raft", NS) is not None
