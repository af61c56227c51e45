"""A PostgreSQL server with pgvector, for the tests of vectors on PostgreSQL.

pgvector is a server extension that Debian's PostgreSQL 15 does not ship,
so the tests and benchmarks of search by meaning on PostgreSQL run a
server of their own: the PostgreSQL 16 and pgvector binaries of the PyPI
package ``pgserver`` (the ``dev`` extra), started in a temporary directory
and listening on a Unix socket only (no TCP port at all). As root the
server runs as the ``postgres`` user (PostgreSQL refuses to run as root).

:func:`server` starts one for this process (once) and returns the address
of its admin database; :func:`new_database` makes a fresh database on it.
:func:`available` says why not when it cannot be had.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

#: The Unix user the server runs as when this process is root.
SERVER_USER = "postgres"
PORT = 5432

_lock = threading.Lock()
_started: dict[str, str] = {}


def _binaries() -> Path | None:
    from importlib.util import find_spec

    try:
        spec = find_spec("pgserver")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if (bin_dir / "postgres").is_file() else None


def available() -> str | None:
    """Why no pgvector server can be started here (None: it can)."""
    if _binaries() is None:
        return "the pgserver package (PostgreSQL with pgvector, in the dev extra) is not installed"
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL as"
    return None


def require_server() -> None:
    """Skip the calling test when no pgvector server can be had here, saying
    why; under ``CI`` fail instead (CI must run the tests of vectors on
    PostgreSQL)."""
    import pytest

    why = available()
    if why is not None:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"no PostgreSQL with pgvector for this test: {why}")
        pytest.skip(f"no PostgreSQL with pgvector: {why}")


def _as_server_user() -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []


def server() -> str:
    """The admin address (``postgresql://…/postgres``) of this process's
    pgvector server, started on first use and stopped when the process ends."""
    with _lock:
        if "url" in _started:
            return _started["url"]
        why = available()
        if why is not None:
            raise RuntimeError(why)
        bin_dir = _binaries()
        assert bin_dir is not None
        home = Path(tempfile.mkdtemp(prefix="memors-pgvector-"))
        data = home / "data"
        if os.geteuid() == 0:
            shutil.chown(home, user=SERVER_USER)
        run = _as_server_user()
        subprocess.run(
            [*run, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={home} -p {PORT} "
            "-c fsync=off -c full_page_writes=off -c max_connections=50"
        )
        subprocess.run(
            [
                *run,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(home / "log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

        def stop() -> None:
            subprocess.run(
                [*run, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
            shutil.rmtree(home, ignore_errors=True)

        atexit.register(stop)
        _started["url"] = f"postgresql://postgres@/postgres?host={home}&port={PORT}"
        return _started["url"]


def new_database() -> str:
    """A fresh, empty database on :func:`server`; its address."""
    import psycopg

    admin = server()
    name = f"memors_vec_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.replace("/postgres?", f"/{name}?", 1)


def drop_database(url: str) -> None:
    """Drop a database :func:`new_database` made."""
    import psycopg

    name = url.split("/")[-1].split("?")[0]
    with psycopg.connect(server(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
