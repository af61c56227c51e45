"""A command that only reads never creates a store (SPEC §6, as ``lint``):
on a path where there is none, it answers as an empty store would and
leaves no file, directory, ``-wal`` or ``-shm`` behind."""

from __future__ import annotations

import pytest

from memors_core import Memory

READS = [
    ("search", "raft"),
    ("search", "raft", "--granularity", "all"),
    ("get", "memo://passage/01a23165-545f-716e-b651-e87c7a181c39"),
    ("get", "memo://item/1"),
    ("items",),
    ("items", "--kind", "page", "--status", "done"),
    ("items", "show", "1"),
    ("entity", "list"),
    ("entity", "show", "Raft"),
    ("fact", "list"),
    ("fact", "list", "Raft"),
    ("export",),
    ("metrics",),
    ("lint",),
    ("search", "raft", "--json"),
    ("get", "memo://item/1", "--json"),
    ("items", "show", "1", "--json"),
    ("entity", "list", "--json"),
    ("fact", "list", "--json"),
]


@pytest.mark.sqlite_only("store files that do not exist, or are empty")
@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_on_a_missing_store_answers_as_an_empty_one_and_creates_nothing(cli, tmp_path, args):
    empty = tmp_path / "empty.db"
    Memory.open(empty).close()
    expected = cli(*args, extra_env={"MEMORS_DB": str(empty)})

    base = tmp_path / "nothing"  # neither the store nor its directory exist
    missing = base / "here" / "memors.db"
    got = cli(*args, extra_env={"MEMORS_DB": str(missing)})
    assert not base.exists(), sorted(base.rglob("*"))
    # Given as --db, beside an existing directory's other files.
    base.mkdir()
    again = cli(*args, "--db", str(base / "memors.db"))
    assert sorted(p.name for p in base.iterdir()) == []

    for result in (got, again):
        assert result.code == expected.code, (result, expected)
        assert result.code in (0, 1, 2)
        assert result.out == expected.out, (result, expected)
        assert result.err.replace(str(missing), "PATH").replace(
            str(base / "memors.db"), "PATH"
        ) == expected.err.replace(str(empty), "PATH"), (result, expected)
    if args[0] == "search":
        assert got.code == 0
    if args[0] == "get" or args[:2] in (("items", "show"), ("entity", "show")):
        assert got.code == 2 and got.err.count("\n") == 1, got  # not found, one line
