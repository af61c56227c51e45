"""Shared fixtures: a fresh store per test, and the real CLI in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite_marks import starts_a_process

pytest_plugins = ["memors_core.testing"]


def pytest_configure(config: pytest.Config) -> None:
    # The suite's stores rank by words unless a test is marked `semantic`:
    # with the extra installed (the dev extra has it) every remember would
    # embed its passages and every search default to hybrid. The tests of
    # search by meaning (marked) turn vectors back on, in this process and
    # in the servers and CLI runs they start.
    import os

    os.environ.setdefault("MEMORS_VECTORS", "off")


#: Markers of tests whose engine is not the run's: ``marker -> (engine, the run that keeps them)``.
ONE_RUN = {
    "engine_independent": ("sqlite", "the SQLite run"),
    "postgres_run": ("postgres", "the --engine=postgres run"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A test marked `engine_independent` opens no store of the run's engine
    # (or picks its engines itself); one marked `postgres_run` works on
    # PostgreSQL databases of its own whichever engine the run uses. Each
    # would do the same in both runs of `make test`, so one run keeps it
    # (the PostgreSQL one, which fails without a server, for the second)
    # and the other skips it, with the reason.
    from memors_core.testing import test_engine

    engine = test_engine()
    for item in items:
        _mark_the_slow_kinds(item)
        for name, (keeper, run) in ONE_RUN.items():
            marker = item.get_closest_marker(name)
            if marker is None:
                continue
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: {name} needs a one-line reason")
            if engine != keeper:
                item.add_marker(pytest.mark.skip(reason=f"runs once, in {run}: {reason}"))


def _mark_the_slow_kinds(item: pytest.Item) -> None:
    # `browser`: the test drives Chromium. `subprocess`: the test, one of its
    # fixtures or a helper of their modules they call starts a process (by
    # reading their code). `make test-quick` leaves both out; a module can
    # also say `pytestmark = pytest.mark.subprocess` itself.
    names = getattr(item, "fixturenames", ())
    if "browser" in names:
        item.add_marker(pytest.mark.browser)
    info = getattr(item, "_fixtureinfo", None)
    funcs = [getattr(item, "obj", None)]
    if info is not None:
        funcs += [d.func for defs in info.name2fixturedefs.values() for d in defs]
    if any(starts_a_process(f) for f in funcs if f is not None):
        item.add_marker(pytest.mark.subprocess)


@pytest.fixture(autouse=True)
def _vectors_where_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if request.node.get_closest_marker("semantic") is not None:
        monkeypatch.setenv("MEMORS_VECTORS", "on")


@pytest.fixture
def cli(tmp_path: Path, store_address: str | Path):
    """Run the real ``memors-mcp`` (as ``python -m memors_cli``) against a
    fresh store (``store_address``: a file under ``tmp_path``, or a PostgreSQL
    database under ``--engine=postgres``): ``cli("search", "raft", "--json",
    input=...)``; ``cli.db`` is its address, ``cli.tmp`` the directory it runs in."""
    from memors_core.testing import CLIResult, run_cli  # late: pytest rewrites its asserts

    db = tmp_path / "cli.db" if isinstance(store_address, Path) else store_address

    def run(
        *args: str,
        input: str | None = None,
        extra_env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> CLIResult:
        return run_cli(*args, db=db, env=extra_env, input=input, cwd=tmp_path, timeout=timeout)

    run.db = db  # type: ignore[attr-defined]
    run.tmp = tmp_path  # type: ignore[attr-defined]
    return run


@pytest.fixture
def vector_store(tmp_path: Path):
    """A fresh store that keeps vectors, for the tests marked ``semantic``: a
    SQLite file, or under ``--engine=postgres`` a database on the tests' own
    PostgreSQL with pgvector (:mod:`memors_core.testing.pgvector`; Debian's
    PostgreSQL has none). Without that server the test skips, or under
    ``CI`` fails."""
    from memors_core.testing import pgvector, test_engine

    if test_engine() == "sqlite":
        yield tmp_path / "vectors.db"
        return
    pgvector.require_server()
    url = pgvector.new_database()
    yield url
    pgvector.drop_database(url)


@pytest.fixture
def vector_memory(vector_store):
    """A Memory on :func:`vector_store`."""
    from memors_core import Memory

    with Memory.open(vector_store) as memory:
        yield memory
