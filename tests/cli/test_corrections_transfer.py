"""Corrections survive a move: a store exported and imported keeps its
renames, the merges undone and the aliases they took back (issue 31,
point 4 with issue 29's promise that a restore loses nothing)."""

from __future__ import annotations

from memors_core import Memory
from memors_core.testing import passages_about, temporary_store


def _corrected(memory: Memory) -> None:
    memory.remember("\n\n".join(passages_about("Quorum replication", 3)), uri="q.md")
    memory.remember("[[quorum-replication]] in one line.", uri="note.md")
    [merge] = memory.compact(kinds=["merge"], limit=10).items
    report = memory.submit(item=merge.id, fingerprint=merge.fingerprint, accept=True)
    assert report.stored
    memory.rename_entity("Quorum replication", "Quorum writes")
    memory.undo_merge("quorum-replication")


def _seen(memory: Memory) -> dict:
    renamed = memory.entity("Quorum writes")
    apart = memory.entity("quorum-replication")
    return {
        "renamed": (renamed.address, renamed.name, sorted(renamed.aliases)),
        "apart": (apart.address, apart.name, sorted(apart.aliases), len(apart.passages)),
        "old name": memory.entity("Quorum replication").address,
    }


def test_an_import_keeps_renames_and_undone_merges(memory: Memory) -> None:
    _corrected(memory)
    before = _seen(memory)
    assert before["renamed"][1] == "Quorum writes"
    assert before["apart"][0] != before["renamed"][0]
    assert "quorum-replication" not in before["renamed"][2]
    lines = list(memory.export_lines())
    with temporary_store() as address:
        moved = Memory.open(address)
        try:
            moved.import_(lines)
            assert _seen(moved) == before
        finally:
            moved.close()


def test_every_table_is_exported_or_derived(tmp_path) -> None:
    """A table added by a migration is carried by export, or named as
    derived state that an import rebuilds: none is left behind unnoticed."""
    import re

    from memors_core.plugins.manager import build_plugin_manager
    from memors_core.storage.sql.transfer import NOT_EXPORTED, TABLE_NAMES

    kinds = build_plugin_manager().kinds.migrations("sqlite")
    kind_tables = {
        name
        for steps in kinds.values()
        for step in steps
        for name in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", step)
    }
    # The search indexes' bookkeeping, rebuilt as rows arrive; SQLite's own.
    internal = {"search_indexes", "search_queue", "sqlite_sequence"}
    with Memory.open(tmp_path / "m.db") as memory:
        tables = {
            name
            for (name,) in memory.store.all("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    assert {"corrections", "entity_names", "alias_changes"} <= TABLE_NAMES
    left = tables - TABLE_NAMES - set(NOT_EXPORTED) - kind_tables - internal
    assert left == set(), f"tables neither exported nor derived: {sorted(left)}"
