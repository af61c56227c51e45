"""Fixtures of the SQLite engine's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from memors_core.storage.sqlite.connection import SqliteStore


@pytest.fixture
def store(tmp_path: Path):
    """A SQLite store of the test's own, opened through the engine (no Memory)."""
    s = SqliteStore.open(tmp_path / "s.db")
    yield s
    s.close()
