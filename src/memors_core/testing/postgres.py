"""Fresh PostgreSQL databases for tests, cloned from a migrated template.

A test that runs on the PostgreSQL engine needs a store of its own.
Creating a database and running every migration costs about a second; a
``CREATE DATABASE … TEMPLATE`` copy of one already migrated costs ~30
ms. :func:`new_database` makes such a copy and returns its address;
:func:`drop_database` releases it, to be dropped a few databases later
(:data:`DROP_LAG`: a copy made right after a drop is ten times slower).
The template is built once per schema (its name carries a hash of every
migration, the kinds' own included), by whichever test process gets
there first.

The template's name and the server's answer are looked up once per
process: a test run asks for a database per test.

The server is ``$MEMORS_TEST_POSTGRES`` (an address of a database to
connect to for administration, default ``postgresql:///postgres``, the
local socket); the role needs CREATEDB.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import socket
import uuid
from typing import Any

DEFAULT_ADMIN_URL = "postgresql:///postgres"
PREFIX = "memors_t_"


def admin_url() -> str:
    return os.environ.get("MEMORS_TEST_POSTGRES", DEFAULT_ADMIN_URL)


def _with_dbname(url: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    # Back to URL form: memors picks its engine by the address's scheme.
    user = params.pop("user", None)
    password = params.pop("password", None)
    host = params.pop("host", None)
    port = params.pop("port", None)
    db = params.pop("dbname")
    who = ""
    if user:
        who = user + (f":{password}" if password else "") + "@"
    where = ""
    if host and not host.startswith("/"):
        where = host + (f":{port}" if port else "")
    elif host:
        params["host"] = host
        if port:
            params["port"] = port
    query = make_conninfo(**params).replace(" ", "&") if params else ""
    return f"postgresql://{who}{where}/{db}" + (f"?{query}" if query else "")


#: The admin address the test server last answered on, in this process.
_answered: str | None = None


def available() -> str | None:
    """None when the test server answers, else why not (one line). Once it
    has answered, this process takes its word for it (a server lost later
    fails the test that meets it, in the server's words)."""
    global _answered
    if _answered == admin_url():
        return None
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'memors[postgres]')"
    try:
        with psycopg.connect(admin_url(), connect_timeout=5):
            _answered = admin_url()
            return None
    except psycopg.Error as exc:
        return f"cannot reach the test server {admin_url()!r}: {' '.join(str(exc).split())}"


def require_server() -> None:
    """In a test: skip it when no test server answers (say why), or fail it
    instead under ``MEMORS_REQUIRE_POSTGRES`` (``make test`` sets it, so a
    missing server cannot pass as skipped tests)."""
    why = available()
    if why is not None:
        import pytest

        if os.environ.get("MEMORS_REQUIRE_POSTGRES"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


def _schema_hash() -> str:
    from memors_core.plugins.manager import build_plugin_manager
    from memors_core.storage.postgres.schema import MIGRATIONS

    digest = hashlib.sha256()
    for step in MIGRATIONS:
        digest.update(step.encode())
    for kind, steps in sorted(build_plugin_manager().kinds.migrations("postgres").items()):
        digest.update(kind.encode())
        for step in steps:
            digest.update(step.encode())
    return digest.hexdigest()[:12]


def _connect_admin():
    import psycopg

    return psycopg.connect(admin_url(), autocommit=True)


#: (admin address, template name) this process last found or built.
_template: tuple[str, str] | None = None


def template(*, fresh: bool = False) -> str:
    """The name of the migrated template database (building it if it is
    missing). The name found is kept for this process; ``fresh``: look again
    (another run dropped it)."""
    global _template
    if not fresh and _template is not None and _template[0] == admin_url():
        return _template[1]
    name = _find_template()
    _template = (admin_url(), name)
    return name


def _find_template() -> str:
    from psycopg import errors, sql

    name = f"memors_tpl_{_schema_hash()}"
    with _connect_admin() as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return name
        building = f"{name}_b{os.getpid()}"
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(building)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
    from memors_core.memory import Memory

    Memory.open(_with_dbname(admin_url(), building)).close()
    with _connect_admin() as conn:
        try:
            conn.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(building), sql.Identifier(name)
                )
            )
        except errors.DuplicateDatabase:  # another process finished first
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(building)))
    return name


def _host_prefix() -> str:
    """``memors_t_<host>_``: this machine's part of a test database's name."""
    name = f"{PREFIX}{socket.gethostname()[:8]}_".lower()
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def new_database() -> str:
    """The address of a new, migrated, empty store database, named
    ``memors_t_<host>_<pid>_<random>`` so that :func:`drop_stale` can tell
    whose it is."""
    from psycopg import errors, sql

    tpl = template()
    name = f"{_host_prefix()}{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with _connect_admin() as conn:
        for attempt in range(20):
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(tpl)
                    )
                )
                break
            except errors.ObjectInUse:  # another process is copying it right now
                import time

                time.sleep(0.05 * (attempt + 1))
            except errors.InvalidCatalogName:
                # A run with another schema (another checkout sharing the
                # server) dropped this template as an older one: build it again.
                tpl = template(fresh=True)
        else:  # pragma: no cover - a server far too busy
            raise RuntimeError(f"could not copy the template database {tpl}")
    return _with_dbname(admin_url(), name)


#: How many released databases wait before the oldest is dropped. Dropping
#: a database deletes its ~600 files; on ext4 (without a journal, as on the
#: CI machines) the next database's files are then slow to create while the
#: deleted inodes are recent, so a copy right after a drop took 250-400 ms
#: where one made while the last few databases still exist takes ~30 ms
#: (docs/performance.md, "A test database a test"). The cost: a few more
#: databases of ~10 MB alive at a time.
DROP_LAG = 6

#: Databases released but not dropped yet, oldest first (this process's).
_released: list[str] = []
_released_by: int | None = None  # the process that released them (a fork starts afresh)


def drop_database(url: str) -> None:
    """Release a database made by :func:`new_database`: it is dropped once
    :data:`DROP_LAG` newer ones were released, or when the process ends
    (:func:`drop_released`; :func:`drop_stale` drops what a killed process
    left). A drop costs ~100 ms: PostgreSQL 15 ends each DROP DATABASE with
    a checkpoint it waits for (dropping several in a row costs as much each)."""
    from psycopg.conninfo import conninfo_to_dict

    global _released_by
    if _released_by != os.getpid():
        _released.clear()  # a forked child: its parent drops its own
        _released_by = os.getpid()
    _released.append(conninfo_to_dict(url)["dbname"])
    if len(_released) > DROP_LAG:
        _drop(_released[:1])
        del _released[:1]


def drop_released() -> None:
    """Drop every database this process released and has not dropped yet
    (the pytest plugin calls it as the process's tests end; at exit too)."""
    if _released_by == os.getpid() and _released:
        names = list(_released)
        _released.clear()
        _drop(names)


def _drop(names: list[str]) -> None:
    from psycopg import sql

    with _connect_admin() as conn:
        for name in names:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


atexit.register(drop_released)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's, and running
        return True
    return True


def drop_stale() -> list[str]:
    """Drop the test databases (and half-built templates) that processes of
    this machine left behind when they died before their teardown (a killed
    test run), and the templates of older schemas nobody uses; returns their
    names. A database of a live process, or of another machine sharing the
    server, is left alone."""
    import psycopg
    from psycopg import sql

    prefix = _host_prefix()
    dropped = []
    with _connect_admin() as conn:
        names = [row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()]
        for name in names:
            if name.startswith(prefix):
                pid = name[len(prefix) :].split("_", 1)[0]
            elif name.startswith("memors_tpl_") and "_b" in name[len("memors_tpl_") :]:
                pid = name.rsplit("_b", 1)[1]  # a template being built by that process
            else:
                continue
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if name.startswith("memors_tpl_"):
                # Half-built templates carry no host: only drop one nobody is connected to.
                busy = conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE datname = %s", (name,)
                ).fetchone()
                if busy:
                    continue
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            dropped.append(name)
        # Templates of an older schema (a migration changed since): dropped
        # when nobody is using them (no FORCE: a copy in progress keeps it).
        current = f"memors_tpl_{_schema_hash()}"
        for name in names:
            if name.startswith("memors_tpl_") and "_b" not in name[11:] and name != current:
                try:
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
                except psycopg.errors.ObjectInUse:
                    continue
                dropped.append(name)
    return dropped


def messages_sent(monkeypatch: Any) -> list[str]:
    """What the PostgreSQL engine sends from now on, one entry per message
    (one round trip): for the tests that count a call's round trips
    (``monkeypatch``: pytest's, which puts psycopg back afterwards)."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.ClientCursor.execute

    def counted(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.ClientCursor, "execute", counted)
    return sent
