"""Shared fixtures: a fresh store per test, and the real CLI in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["memors_core.testing"]


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
