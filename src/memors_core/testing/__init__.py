"""Helpers for testing memors and third-party kinds.

Add ``pytest_plugins = ["memors_core.testing"]`` to a ``conftest.py`` for
the fixtures ``memory``, ``db_path`` and ``memors_cli``; or call the helpers
directly::

    import memors_todo
    from memors_core.testing import open_items, temporary_memory

    def test_a_todo_becomes_an_item():
        with temporary_memory(plugins=[("todo", memors_todo)]) as memory:
            memory.remember("TODO: write the runbook.")
            [item] = open_items(memory, "todo")
            assert memory.submit(item["id"], {"done": "written"}).stored

Everything runs on a real SQLite file in a temporary directory and, for
``memors_cli`` and :func:`run_cli`, the real command line in a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from memors_core.memory import Memory
from memors_core.plugins.manager import build_plugin_manager
from memors_core.wire import to_json


@contextlib.contextmanager
def temporary_memory(
    plugins: Iterable[tuple[str, Any]] = (), *, entrypoints: bool = True
) -> Iterator[Memory]:
    """A :class:`Memory` on a fresh database file in a temporary directory,
    with the installed kinds (unless ``entrypoints=False``) plus ``plugins``
    given as ``(name, module_or_object)`` pairs. ``MEMORS_DISABLE_PLUGINS``
    applies to both."""
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


def open_items(
    memory: Memory, kind: str | None = None, namespace: str = "default"
) -> list[dict[str, Any]]:
    """Run ``compact`` (for ``kind`` only, if given) and return the open items
    as JSON: ``{"id", "kind", "status", "payload"}``, oldest first. A kind
    whose scanner failed raises ``AssertionError`` with compact's errors."""
    result = memory.compact([kind] if kind else None, namespace=namespace)
    if result.errors:
        raise AssertionError(f"compact reported failing kinds: {result.errors}")
    return to_json(result)["items"]


def write_page(
    memory: Memory,
    entity: str,
    content: str,
    *,
    title: str | None = None,
    namespace: str = "default",
) -> str:
    """Give ``entity`` (which has no page yet) a live page with ``content``;
    returns the page's address.

    Remembers three passages about it (:func:`passages_about`), takes the
    ``page`` item the built-in ``page`` kind creates and submits ``content``
    with ``force``: every check runs and is recorded, none refuses it.
    """
    for text in passages_about(entity, 3, topic=f"{entity} notes"):
        memory.remember(text, namespace=namespace)
    key = " ".join(entity.casefold().split())
    for item in open_items(memory, "page", namespace):
        if " ".join(item["payload"]["entity"]["name"].casefold().split()) == key:
            report = memory.submit(
                item["id"], content=content, title=title or entity, force=True, namespace=namespace
            )
            assert report.address is not None, report
            return report.address
    raise AssertionError(f"no page item for {entity!r}: does it already have a page?")


# --- the real command line in a subprocess ---------------------------------------------


class CLIResult:
    """What one ``memors-mcp`` run did: ``code``, ``out``, ``err`` and ``json``."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def json(self) -> Any:
        """Standard output parsed as JSON (run with ``--json``)."""
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"<exit {self.code}\nstdout: {self.out[:2000]}\nstderr: {self.err[:2000]}>"


def run_cli(
    *args: str,
    db: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 120,
) -> CLIResult:
    """Run ``memors-mcp ARGS…`` (as ``python -m memors_cli``) on the store at
    ``db``, in a subprocess of this interpreter. ``MEMORS_DISABLE_PLUGINS``
    is cleared unless ``env`` sets it; ``env`` (e.g. from :func:`plugin_env`)
    is added to the environment."""
    full = {k: v for k, v in os.environ.items() if k != "MEMORS_DISABLE_PLUGINS"}
    full["MEMORS_DB"] = str(db)
    full.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "memors_cli", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
        cwd=cwd,
    )
    return CLIResult(proc)


def plugin_env(
    directory: str | os.PathLike[str],
    kinds: Mapping[str, str],
    paths: Iterable[str | os.PathLike[str]] = (),
) -> dict[str, str]:
    """An environment in which a subprocess (the real CLI or MCP server)
    finds extra ``memors.kinds`` entry points, without installing anything.

    ``kinds`` maps entry-point names to objects (``"module"`` or
    ``"module:attribute"``); ``paths`` are the directories those modules are
    imported from. Writes a small ``.dist-info`` into ``directory`` and
    returns ``{"PYTHONPATH": …}`` to pass as ``env``.
    """
    root = Path(directory)
    name = "memors_test_plugins_" + re.sub(r"\W", "_", "_".join(sorted(kinds)))[:60]
    info = root / f"{name}-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
    lines = ["[memors.kinds]", *(f"{ep} = {target}" for ep, target in kinds.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    entries = [str(root), *map(str, paths)]
    if os.environ.get("PYTHONPATH"):
        entries.append(os.environ["PYTHONPATH"])
    return {"PYTHONPATH": os.pathsep.join(entries)}


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

    @pytest.fixture
    def memors_cli(tmp_path: Path) -> Any:
        """Run the real CLI on a fresh store in ``tmp_path``:
        ``r = memors_cli("compact", "--json")``, then ``r.code``, ``r.out``,
        ``r.err``, ``r.json``. Takes ``env=``, ``input=`` and ``timeout=``;
        ``memors_cli.db`` is the store's path."""
        db = tmp_path / "memors.db"

        def run(*args: str, **kwargs: Any) -> CLIResult:
            kwargs.setdefault("cwd", tmp_path)
            return run_cli(*args, db=db, **kwargs)

        run.db = db  # type: ignore[attr-defined]
        return run

except ImportError:  # pragma: no cover - pytest is optional at run time
    pass

__all__ = [
    "CLIResult",
    "open_items",
    "passages_about",
    "plugin_env",
    "run_cli",
    "temporary_memory",
    "write_page",
]
