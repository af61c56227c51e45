"""docs/postgres.md's two-host example runs, and prints what the doc shows.

Every ```sh block of the section "Two hosts, one memory" runs in order in
one bash (``set -eo pipefail``, so a block may leave a process running for
the next), against a database set up as the doc says: an owner role and an
application role. The doc's addresses (``memors_owner@db.internal``,
``agent@db.internal``) become that database's on the local server, its
port a free one; the ```text block after a block is its exact output.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import roles_database

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

DOC = Path(__file__).resolve().parents[4] / "docs" / "postgres.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def blocks(text: str) -> list[tuple[str, str | None]]:
    found = [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    out = []
    for n, (lang, body) in enumerate(found):
        if lang == "sh":
            after = found[n + 1] if n + 1 < len(found) else None
            out.append((body, after[1] if after and after[0] == "text" else None))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_two_host_example_runs_as_shown(tmp_path: Path) -> None:
    steps = blocks(section(DOC.read_text(encoding="utf-8"), "Two hosts, one memory"))
    assert len(steps) >= 4
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, run in (("memors-mcp", "-m memors_cli "), ("python", "")):
        launcher = bin_dir / name
        launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" {run}"$@"\n')
        launcher.chmod(0o755)
    with roles_database() as roles:
        swaps = {
            "memors_owner@db.internal/memors": f"{roles.owner}@/{roles.dbname}",
            "agent@db.internal/memors": f"{roles.app}@/{roles.dbname}",
            "'agent'": f"'{roles.app}'",
            "--port 8765": f"--port {free_port()}",
        }
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        shell = subprocess.Popen(
            ["bash"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=tmp_path, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            # One shell for every block, each block's output ended by a marker line.
            assert shell.stdin is not None and shell.stdout is not None
            shell.stdin.write("set -eo pipefail\n")
            for n, (script, shown) in enumerate(steps):
                for doc_text, real in swaps.items():
                    script = script.replace(doc_text, real)
                marker = f"--- block {n} done ---"
                shell.stdin.write(f"{script}\necho '{marker}'\n")
                shell.stdin.flush()
                lines = []
                for line in shell.stdout:
                    if line.rstrip("\n") == marker:
                        break
                    lines.append(line)
                else:
                    raise AssertionError(f"block {n} failed:\n{script}\n{shell.stderr.read()}")
                if shown is not None:
                    assert "".join(lines) == shown, f"block {n} printed:\n{''.join(lines)}"
        finally:
            # the shell and what it left running (its process group, by id)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)
            shell.wait()
