"""Shared fixtures: a fresh store per test, and the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["memors_core.testing"]


@pytest.fixture
def cli(tmp_path: Path):
    """Run the real ``memors-mcp`` (as ``python -m memors_cli``) against a
    temporary store: ``cli("search", "raft", "--json", input=...)``."""
    from memors_core.testing import CLIResult  # (imported late: pytest rewrites its asserts)

    db = tmp_path / "cli.db"
    env = {**os.environ, "MEMORS_DB": str(db)}
    env.pop("MEMORS_DISABLE_PLUGINS", None)

    def run(
        *args: str,
        input: str | None = None,
        extra_env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> CLIResult:
        proc = subprocess.run(
            [sys.executable, "-m", "memors_cli", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**env, **(extra_env or {})},
            cwd=tmp_path,
        )
        return CLIResult(proc)

    run.db = db  # type: ignore[attr-defined]
    run.tmp = tmp_path  # type: ignore[attr-defined]
    return run
