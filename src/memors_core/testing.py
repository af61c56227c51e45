"""Helpers for testing memors and third-party kinds.

Use the pytest fixtures by adding ``pytest_plugins = ["memors_core.testing"]``
to a ``conftest.py``; or call :func:`temporary_memory` directly::

    from memors_core.testing import temporary_memory

    def test_my_kind():
        with temporary_memory(plugins=[("mykind", mykind_module)]) as memory:
            memory.remember("...", entities=["X"])
            result = memory.compact(kinds=["mykind"])
            assert result.open == 1
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .memory import Memory
from .plugins import build_plugin_manager


@contextlib.contextmanager
def temporary_memory(
    plugins: Iterable[tuple[str, Any]] = (), *, entrypoints: bool = True
) -> Iterator[Memory]:
    """A :class:`Memory` on a fresh database file in a temporary directory,
    with the installed kinds (unless ``entrypoints=False``) plus ``plugins``
    given as ``(name, module_or_object)`` pairs."""
    with tempfile.TemporaryDirectory(prefix="memors-test-") as tmp:
        pm = build_plugin_manager(entrypoints=entrypoints, plugins=plugins)
        memory = Memory.open(Path(tmp) / "memors.db", plugin_manager=pm)
        try:
            yield memory
        finally:
            memory.close()


def passages_about(name: str, count: int, topic: str = "replication") -> list[str]:
    """``count`` distinct, realistic passages mentioning ``[[name]]``."""
    verbs = ["copies", "orders", "checks", "stores", "retries", "elects", "repairs", "batches"]
    things = ["writes", "leases", "snapshots", "logs", "quorums", "replicas", "epochs", "votes"]
    out = []
    for i in range(count):
        out.append(
            f"[[{name}]] {verbs[i % len(verbs)]} {things[(i * 3) % len(things)]} during "
            f"{topic} round {i} so that node {i + 1} stays consistent."
        )
    return out


try:  # pytest fixtures, when pytest is present
    import pytest

    @pytest.fixture
    def memory(tmp_path: Path) -> Iterator[Memory]:
        """A Memory on a fresh database file with the installed kinds."""
        m = Memory.open(tmp_path / "memors.db")
        try:
            yield m
        finally:
            m.close()

    @pytest.fixture
    def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """A fresh database path, also exported as ``MEMORS_DB``."""
        path = tmp_path / "memors.db"
        monkeypatch.setenv("MEMORS_DB", str(path))
        return path

except ImportError:  # pragma: no cover - pytest is optional at run time
    pass

__all__ = ["passages_about", "temporary_memory"]
