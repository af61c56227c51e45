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

Everything runs on a real store — a SQLite file in a temporary directory,
or with ``pytest --engine=postgres`` a fresh PostgreSQL database
(:mod:`memors_core.testing.postgres`) — and, for ``memors_cli`` and
:func:`run_cli`, the real command line in a subprocess. A test that needs
SQLite's own machinery (its files, its locks, apsw) says so with
``@pytest.mark.sqlite_only("why, in one line")`` and is skipped, with that
reason, on PostgreSQL.
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

#: The engines a test can run on; :func:`test_engine` says which one this run uses.
ENGINES = ("sqlite", "postgres")
#: Set by ``pytest --engine`` (and read by subprocesses a test starts).
ENGINE_SETTING = "MEMORS_TEST_ENGINE"


def test_engine() -> str:
    """The engine the tests of this run use: ``$MEMORS_TEST_ENGINE``
    (``pytest --engine`` sets it), else ``sqlite``."""
    engine = os.environ.get(ENGINE_SETTING) or "sqlite"
    if engine not in ENGINES:
        raise ValueError(f"{ENGINE_SETTING}={engine!r}: expected one of {', '.join(ENGINES)}")
    return engine


test_engine.__test__ = False  # type: ignore[attr-defined]  # (not a test, despite its name)


def is_postgres(address: str | os.PathLike[str]) -> bool:
    """Whether a store address names a PostgreSQL database (else a SQLite file)."""
    return isinstance(address, str) and address.startswith(("postgresql://", "postgres://"))


@contextlib.contextmanager
def temporary_store(
    directory: str | os.PathLike[str] | None = None, *, engine: str | None = None
) -> Iterator[str | Path]:
    """The address of a fresh, empty store, removed afterwards: on SQLite a
    file path (``directory/memors.db``, or in a temporary directory); on
    PostgreSQL (``engine``, default :func:`test_engine`) a ``postgresql://``
    address of a new database cloned from the migrated template, dropped at
    the end. No server reachable: :func:`pytest.fail` under
    ``MEMORS_REQUIRE_POSTGRES``, else the test is skipped."""
    engine = engine or test_engine()
    if engine == "sqlite":
        if directory is not None:
            yield Path(directory) / "memors.db"
            return
        with tempfile.TemporaryDirectory(prefix="memors-test-") as tmp:
            yield Path(tmp) / "memors.db"
        return
    from memors_core.testing import postgres

    postgres.require_server()
    url = postgres.new_database()
    try:
        yield url
    finally:
        postgres.drop_database(url)


@contextlib.contextmanager
def temporary_memory(
    plugins: Iterable[tuple[str, Any]] = (), *, entrypoints: bool = True
) -> Iterator[Memory]:
    """A :class:`Memory` on a fresh store (:func:`temporary_store`: a file in
    a temporary directory, or a PostgreSQL database under ``--engine=postgres``),
    with the installed kinds (unless ``entrypoints=False``) plus ``plugins``
    given as ``(name, module_or_object)`` pairs. ``MEMORS_DISABLE_PLUGINS``
    applies to both."""
    with temporary_store() as address:
        pm = build_plugin_manager(entrypoints=entrypoints, plugins=plugins)
        memory = Memory.open(address, plugin_manager=pm)
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
    ``db``, in a process of its own: forked from a zygote that has already
    imported the CLI (:mod:`memors_core.testing.zygote`), or a fresh
    interpreter when ``env`` changes how Python starts. ``MEMORS_DISABLE_PLUGINS``
    is cleared unless ``env`` sets it; ``env`` (e.g. from :func:`plugin_env`)
    is added to the environment."""
    full = {k: v for k, v in os.environ.items() if k != "MEMORS_DISABLE_PLUGINS"}
    full["MEMORS_DB"] = str(db)
    full.update(env or {})
    from memors_core.testing.zygote import zygote_for

    zygote = zygote_for(full)
    if zygote is not None:
        return CLIResult(zygote.run(args, env=full, input=input, cwd=cwd, timeout=timeout))
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

    def pytest_addoption(parser: pytest.Parser) -> None:
        group = parser.getgroup("memors")
        group.addoption(
            "--engine",
            choices=ENGINES,
            default=None,
            help="the store engine the tests run on (default: $MEMORS_TEST_ENGINE, else sqlite)",
        )

    def pytest_configure(config: pytest.Config) -> None:
        config.addinivalue_line(
            "markers",
            "sqlite_only(reason): needs SQLite's own machinery; skipped, with the "
            "reason, when the tests run on PostgreSQL",
        )
        engine = config.getoption("--engine", default=None)
        if engine:  # (subprocesses and temporary_memory() follow it)
            os.environ[ENGINE_SETTING] = engine
        try:
            test_engine()  # a bad $MEMORS_TEST_ENGINE: say so before any test runs
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_sessionstart(session: pytest.Session) -> None:
        # Databases a killed run left behind, once per run (not per xdist worker).
        if test_engine() == "postgres" and not hasattr(session.config, "workerinput"):
            from memors_core.testing import postgres

            if postgres.available() is None:
                postgres.drop_stale()

    def pytest_unconfigure(config: pytest.Config) -> None:
        # The databases this process's tests released and that still wait (each
        # xdist worker is a process of its own).
        if test_engine() == "postgres" and "psycopg" in sys.modules:
            from memors_core.testing import postgres

            postgres.drop_released()

    def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
        if test_engine() == "sqlite":
            return
        for item in items:
            marker = item.get_closest_marker("sqlite_only")
            if marker is not None:
                reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
                if not reason:
                    raise pytest.UsageError(f"{item.nodeid}: sqlite_only needs a one-line reason")
                item.add_marker(pytest.mark.skip(reason=f"sqlite only: {reason}"))

    @pytest.fixture
    def engine() -> str:
        """The engine this run's stores use: ``"sqlite"`` or ``"postgres"``."""
        return test_engine()

    @pytest.fixture
    def store_address(tmp_path: Path) -> Iterator[str | Path]:
        """A fresh, empty store's address (:func:`temporary_store`): a file
        path under ``tmp_path`` on SQLite, a new database's ``postgresql://``
        address (dropped afterwards) under ``--engine=postgres``."""
        with temporary_store(tmp_path) as address:
            yield address

    @pytest.fixture
    def fresh_store(tmp_path: Path) -> Iterator[Any]:
        """Fresh stores by name, as many as a test needs: ``fresh_store("copy.db")``
        is ``tmp_path / "copy.db"`` on SQLite, a new PostgreSQL database's address
        under ``--engine=postgres`` (the same one again for the same name); all
        are dropped at the end of the test."""
        made: dict[str, str | Path] = {}
        with contextlib.ExitStack() as stack:

            def make(name: str = "memors.db") -> str | Path:
                if name not in made:
                    made[name] = (
                        tmp_path / name
                        if test_engine() == "sqlite"
                        else stack.enter_context(temporary_store())
                    )
                return made[name]

            yield make

    @pytest.fixture
    def memory(store_address: str | Path) -> Iterator[Memory]:
        """A Memory on a fresh store with the installed kinds."""
        m = Memory.open(store_address)
        try:
            yield m
        finally:
            m.close()

    @pytest.fixture
    def db_path(store_address: str | Path, monkeypatch: pytest.MonkeyPatch) -> str | Path:
        """A fresh store's address (:func:`store_address`: a ``Path`` on
        SQLite, a ``postgresql://`` string on PostgreSQL), also exported as
        ``MEMORS_DB``."""
        monkeypatch.setenv("MEMORS_DB", str(store_address))
        return store_address

    @pytest.fixture
    def memors_cli(tmp_path: Path, store_address: str | Path) -> Any:
        """Run the real CLI on a fresh store (:func:`store_address`):
        ``r = memors_cli("compact", "--json")``, then ``r.code``, ``r.out``,
        ``r.err``, ``r.json``. Takes ``env=``, ``input=`` and ``timeout=``;
        ``memors_cli.db`` is the store's address; it runs in ``tmp_path``."""
        db = store_address

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
    "temporary_store",
    "test_engine",
    "write_page",
]
