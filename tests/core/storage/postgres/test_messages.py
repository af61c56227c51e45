"""Messages that tell the truth on PostgreSQL (issue 29, point 7).

An application role's purge is finished by the tables' owner, and says so;
a connection lost in the middle of a submit is the connection's loss, not
the plugin's fault; a server that went away reads as such, not as a busy
store.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import attrs
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memors_core import Memory, PluginError, hookimpl
from memors_core.errors import StoreBusy, StoreUnavailable
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import postgres, run_cli

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def test_an_application_role_purge_says_the_owner_finishes_it_and_how(roles, tmp_path):
    r = run_cli("remember", "-", "--json", db=roles.app_url, input="Alice met Bob in Paris.")
    assert r.code == 0, r
    document = json.loads(r.out)["document"]

    r = run_cli("purge", document, "--yes", db=roles.app_url)
    assert r.code == 0, r
    command = f"`memors-mcp purge {document} --yes`"
    assert f"only their owner ({roles.owner}) can finish the purge" in r.out
    assert f"{command} (or any memors command that opens the store) connected as {roles.owner}" in (
        r.out
    )
    assert "old pages of the file" not in r.out  # SQLite's reason, never true here
    data = json.loads(run_cli("purge", document, "--yes", "--json", db=roles.app_url).out)
    assert data["finished"] is False and roles.owner in data["left"]

    r = run_cli("lint", "--json", db=roles.app_url)
    [unfinished] = [f for f in json.loads(r.out)["findings"] if f["rule"] == "unfinished-purge"]
    assert f"only their owner ({roles.owner}) can finish it" in unfinished["message"]
    assert command in unfinished["message"]
    assert "again to finish it" not in unfinished["message"]  # what the app role cannot do

    # The owner's lint gives the owner's advice, and the owner's command does finish it.
    r = run_cli("lint", "--json", db=roles.owner_url)
    [unfinished] = [f for f in json.loads(r.out)["findings"] if f["rule"] == "unfinished-purge"]
    assert f"run {command} again to finish it" in unfinished["message"]


# --- a connection lost in the middle of a submit ------------------------------------


@attrs.frozen
class Ok:
    ok: bool


class CutOff(Kind):
    """A kind whose validation loses the database connection: an
    administrator terminates the backend serving this very transaction."""

    name = "cutoff"
    resolution = Ok

    def __init__(self, database: str) -> None:
        self.database = database

    def scan(self, ctx):
        yield Candidate("cutoff", fingerprint("cutoff"), lambda: {"summary": "cut off"})

    def validate(self, ctx, item, resolution):
        # This transaction's backend is the one memors connection of this
        # database that is inside a transaction right now.
        with psycopg.connect(postgres.admin_url(), autocommit=True) as admin:
            [killed] = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = 'memors' "
                "AND state <> 'idle' AND pid <> pg_backend_pid()",
                (self.database,),
            ).fetchone()
            assert killed
        ctx.store.items.get(item.id, ctx.namespace)  # the next statement finds it gone

    def apply(self, ctx, item, resolution):
        return None


class CutOffPlugin:
    def __init__(self, database: str) -> None:
        self.database = database

    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(CutOff(self.database))


def dbname(url: str) -> str:
    return conninfo_to_dict(url)["dbname"]


@pytest.fixture
def database() -> Iterator[str]:
    postgres.require_server()
    url = postgres.new_database()
    yield url
    postgres.drop_database(url)


def test_a_connection_lost_during_submit_is_reported_as_lost_not_as_the_plugins_fault(database):
    pm = build_plugin_manager(
        entrypoints=False, plugins=[("cutoff", CutOffPlugin(dbname(database)))]
    )
    with Memory.open(database, plugin_manager=pm) as memory:
        [item] = [i for i in memory.compact().items if i.kind == "cutoff"]
        with pytest.raises(StoreUnavailable) as lost:
            memory.submit(item.id, {"ok": True})
        assert not isinstance(lost.value, PluginError)
        assert lost.value.message.startswith(f"lost the connection to {memory.path}")
        assert "nothing of it was stored" in lost.value.message
        assert "plugin" not in lost.value.message and "cutoff" not in lost.value.message
        # The store goes on (the pool replaces the connection) and nothing was stored.
        [still] = [i for i in memory.items().items if i.id == item.id]
        assert still.status == "open"


# --- the server goes away -----------------------------------------------------------


class Proxy:
    """A TCP relay to the test server on 127.0.0.1; :meth:`cut` makes the
    server unreachable through it (connections dropped, new ones refused)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.gone = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.gone:
                client.close()
                return
            server = socket.create_connection(("127.0.0.1", 5432))
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.gone = True
        with contextlib.suppress(OSError):  # (wakes the accepting thread: close alone does not)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def test_a_server_gone_away_reads_as_unreachable_not_as_a_busy_store(database, monkeypatch):
    if conninfo_to_dict(database).get("host"):
        pytest.skip("the relay reaches the test server on 127.0.0.1:5432 only")
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "1000")
    proxy = Proxy()
    user = conninfo_to_dict(postgres.admin_url()).get("user")
    url = f"postgresql://{user + '@' if user else ''}127.0.0.1:{proxy.port}/{dbname(database)}"
    with Memory.open(url) as memory:
        memory.remember("Alice met Bob in Paris.")
        proxy.cut()
        with pytest.raises(StoreUnavailable) as gone:
            memory.remember("Carol met Dave in Rome.")
        assert not isinstance(gone.value, StoreBusy)
        assert gone.value.message.startswith(f"cannot reach the database {memory.path} (")
        assert "nothing was stored" in gone.value.message
