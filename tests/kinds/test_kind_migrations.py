"""A kind's own state is migrated when a store is opened for writing: its
steps run once, in order, and are recorded in ``kind_schema``; a read-only
open changes nothing; a store that a newer release of a kind migrated does
not open. And the engine-checked escape hatch, ``tx.native(engine)``."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from memors_core import MemorsError, Memory, PluginError, hookimpl
from memors_core.plugins.kinds import Kind
from memors_core.plugins.manager import build_plugin_manager
from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.testing import run_cli
from memors_core.wire import to_json
from store_checks import connect, is_postgres, rows_of

COPY = "the on-call engineer restarts the ingest service when the queue backs up"

STEPS = [
    "CREATE TABLE notes_seen(passage TEXT PRIMARY KEY)",
    "ALTER TABLE notes_seen ADD COLUMN seen_at TEXT",
]


class NotesKind(Kind):
    """A kind with state of its own, at a release that knows ``steps``."""

    name = "notes"

    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def migrations(self, engine: str) -> list[str]:
        return self.steps  # (plain SQL both engines take)

    def scan(self, ctx):
        return []


class NotesPlugin:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    @hookimpl
    def memors_register_kinds(self, registry) -> None:
        registry.add(NotesKind(self.steps))


def open_with(db: Path, steps: list[str]) -> Memory:
    return Memory.open(
        db, plugin_manager=build_plugin_manager(plugins=[("notes", NotesPlugin(steps))])
    )


def recorded(db: Path | str) -> dict[str, tuple[int, str]]:
    conn = connect(db)
    try:
        return {
            k: (v, at)
            for k, v, at in conn.execute("SELECT kind, version, applied_at FROM kind_schema")
        }
    finally:
        conn.close()


def tables(db: Path | str) -> set[str]:
    conn = connect(db)
    listing = (
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        if is_postgres(db)
        else "SELECT name FROM sqlite_master WHERE type = 'table'"
    )
    try:
        return {r[0] for r in conn.execute(listing)}
    finally:
        conn.close()


def test_the_duplicate_index_is_created_at_open_and_recorded_once(fresh_store, engine):
    db = fresh_store("memors.db")
    with Memory.open(db) as memory:
        for n in range(3):
            memory.remember(COPY, uri=f"runbook-{n}")
        first = to_json(memory.compact(kinds=["duplicate"]))
    assert [len(i["payload"]["passages"]) for i in first["items"]] == [3]
    version, applied_at = recorded(db)["duplicate"]
    assert version == len(build_plugin_manager().kinds.migrations(engine)["duplicate"])
    assert {"dup_prefix", "dup_recent", "dup_members", "dup_indexed"} <= tables(db)
    # Opened again: nothing runs again (the first step would drop the index).
    with Memory.open(db) as memory:
        assert rows_of(memory, "SELECT namespace FROM dup_indexed") == [("default",)]
        memory.remember(COPY, uri="runbook-late")
        again = to_json(memory.compact(kinds=["duplicate"]))
    assert recorded(db)["duplicate"] == (version, applied_at)
    assert [len(i["payload"]["passages"]) for i in again["items"]] == [4]


def test_a_later_release_runs_only_its_new_steps(fresh_store, tmp_path: Path):
    db = fresh_store("memors.db")
    with open_with(db, STEPS[:1]) as memory, memory.store.write():
        memory.store.run("INSERT INTO notes_seen(passage) VALUES ('p1')")
    assert recorded(db)["notes"][0] == 1
    with open_with(db, STEPS) as memory:  # step 1 again would fail: the table exists
        rows = rows_of(memory, "SELECT passage, seen_at FROM notes_seen")
    assert rows == [("p1", None)]
    assert recorded(db)["notes"][0] == 2


def test_a_failing_step_names_the_kind_and_applies_nothing(fresh_store, tmp_path: Path):
    db = fresh_store("memors.db")
    with pytest.raises(PluginError, match=r"kind 'notes': migration 2 .* failed") as caught:
        open_with(db, [STEPS[0], "ALTER TABLE no_such_table ADD COLUMN x"])
    assert "\n" not in str(caught.value)
    assert "notes" not in recorded(db) and "notes_seen" not in tables(db)


@pytest.mark.sqlite_only("edits the file through apsw, then opens the SQLite store read-only")
def test_a_read_only_open_migrates_nothing(fresh_store, tmp_path: Path):
    db = fresh_store("memors.db")
    with Memory.open(db):
        pass
    conn = apsw.Connection(str(db))
    conn.execute(
        "DELETE FROM kind_schema WHERE kind = 'duplicate'; DROP TABLE dup_prefix; DROP TABLE dup_recent"
    )
    conn.close()
    store = SqliteStore.open(db, readonly=True)
    with Memory(store) as memory:
        assert memory.lint().findings is not None
    assert "duplicate" not in recorded(db) and "dup_prefix" not in tables(db)
    assert run_cli("lint", "--json", db=db).code == 0  # the CLI's lint opens read-only too
    assert "duplicate" not in recorded(db) and "dup_prefix" not in tables(db)
    with Memory.open(db):  # opened for writing: migrated
        pass
    assert "duplicate" in recorded(db) and "dup_prefix" in tables(db)


def test_state_from_a_newer_release_of_a_kind_refuses_to_open(fresh_store, tmp_path: Path):
    db = fresh_store("memors.db")
    with open_with(db, STEPS):
        pass
    with pytest.raises(MemorsError, match=r"kind 'notes' keeps state at version 2.*knows 1") as e:
        open_with(db, STEPS[:1])
    assert "\n" not in str(e.value)
    # The same for a built-in kind, through the CLI: one line, no traceback.
    conn = connect(db)
    conn.execute("UPDATE kind_schema SET version = 99 WHERE kind = 'duplicate'")
    conn.close()
    r = run_cli("search", "anything", db=db)
    assert r.code != 0
    assert "kind 'duplicate' keeps state at version 99" in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


def test_native_hands_out_the_engine_it_is_asked_for_only(store_address, engine):
    other = "postgres" if engine == "sqlite" else "sqlite"
    with Memory.open(store_address) as memory, memory.store.write() as tx:
        assert tx.engine == engine
        conn = tx.native(engine)
        assert conn.execute("SELECT COUNT(*) FROM dup_indexed").fetchone() == (0,)
        with pytest.raises(PluginError, match=f"runs on the {engine} engine, not {other}"):
            tx.native(other)
