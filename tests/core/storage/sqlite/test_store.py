"""The store (SPEC §3): one real SQLite file through apsw, set up the one right way;
raw rows the database itself refuses to change; purge, audited."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import pytest

from memors_core import MemorsError, Memory
from memors_core.settings import DEFAULT_BUSY_TIMEOUT_MS
from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from store_checks import store_problems

pytestmark = pytest.mark.sqlite_only(
    "the SQLite engine's own tests: its file, apsw, FTS5, triggers"
)

# --- opening ------------------------------------------------------------------------


def test_the_store_is_a_real_sqlite_file_in_wal_mode_with_foreign_keys_and_a_busy_timeout(
    tmp_path,
):
    path = tmp_path / "sub" / "dir" / "m.db"  # parent directories are created
    with Memory.open(path) as memory:
        conn = memory.store.conn
        assert isinstance(conn, apsw.Connection)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == DEFAULT_BUSY_TIMEOUT_MS
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        memory.remember("A real file on disk.")
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    # WAL is a property of the file: a fresh connection sees it too.
    other = apsw.Connection(str(path))
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_busy_timeout_can_be_set_and_bad_values_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "1234")
    store = SqliteStore.open(tmp_path / "a.db")
    assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
    store.close()
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "soon")
    with pytest.raises(MemorsError, match="MEMORS_BUSY_TIMEOUT_MS must be an integer"):
        SqliteStore.open(tmp_path / "b.db")


def test_a_writer_waits_for_another_within_the_busy_timeout(tmp_path, monkeypatch):
    path = tmp_path / "busy.db"
    Memory.open(path).close()
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    released: list[float] = []

    def release() -> None:
        released.append(time.monotonic())  # (the lock is free only after this)
        holder.execute("COMMIT")

    with Memory.open(path) as memory:
        # (timed from here: the writer is blocked on the lock by then, however
        # slow the machine; were it not, it would still finish after the release)
        timer = threading.Timer(0.4, release)
        timer.start()
        memory.remember("Written once the lock is free.")
        finished = time.monotonic()
    timer.join()
    assert released and finished >= released[0]  # it waited, then wrote
    with Memory.open(path) as memory:
        assert memory.search("written once the lock is free").results

    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "50")
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Memory.open(path) as memory, pytest.raises(MemorsError) as err:
            memory.remember("Cannot wait that long.")
        assert err.value.code == "busy" and "nothing was stored" in err.value.message
    finally:
        holder.execute("COMMIT")
    holder.close()


def test_a_writer_that_waited_the_whole_busy_timeout_is_not_made_to_wait_again(
    tmp_path, monkeypatch
):
    # The busy answer after the whole wait was tried twice more, each time
    # waiting as long again: a writer waited three times what it was told.
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "300")
    path = tmp_path / "busy.db"
    Memory.open(path).close()
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    begun: list[str] = []

    def trace(_cursor, sql: str, _bindings) -> bool:
        if sql.startswith("BEGIN IMMEDIATE"):
            begun.append(sql)
        return True

    try:
        with Memory.open(path) as memory:
            memory.store.conn.exec_trace = trace
            with pytest.raises(MemorsError) as err:
                memory.remember("Never stored: another writer holds the lock.")
            memory.store.conn.exec_trace = None
            # the wait is as long as it says again for the next writer
            assert memory.store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 300
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert err.value.code == "busy"
    assert len(begun) == 1  # one wait for the lock, then the answer


def test_a_reader_waits_for_a_process_holding_the_file_within_the_busy_timeout(
    tmp_path, monkeypatch
):
    # metrics and lint open the store read-only; while another process held
    # the file (a closing connection's checkpoint, a migration) they failed
    # at once with "stayed locked", without waiting at all.
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "600000")  # (a hang-ender only)
    path = tmp_path / "held.db"
    with Memory.open(path) as memory:
        memory.remember("A passage about [[Raft]].")
    holder = apsw.Connection(str(path))
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")  # holds the file once it has read
    holder.execute("SELECT COUNT(*) FROM sqlite_schema").fetchall()
    release = threading.Timer(0.4, holder.close)
    release.start()
    try:
        with Memory.open(path, readonly=True) as memory:
            assert len(memory.entity("Raft").passages) == 1
            assert memory.store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 600000
    finally:
        release.join()


def test_foreign_keys_are_enforced(memory):
    with pytest.raises(apsw.ConstraintError, match="FOREIGN KEY"):
        memory.store.conn.execute(
            "INSERT INTO passages(id, namespace, document, version, position, text, hash, "
            "shingles, created_at) VALUES ('p', 'default', 'no-such-document', 1, 0, 't', 'h', "
            "x'', 'now')"
        )


def test_full_text_indexes_are_fts5_with_the_porter_unicode61_tokenizer(memory):
    memory.remember("Raft elects a leader.", entities=["Raft"])
    memory.remember("Paxos elects too.", namespace="other")
    memory.record_fact("Raft", "elects", "a leader")
    indexes = memory.store.all("SELECT id, kind, namespace FROM search_indexes ORDER BY id")
    # one index per kind of row and namespace
    assert {(k, ns) for _, k, ns in indexes} == {
        ("p", "default"),
        ("e", "default"),
        ("f", "default"),
        ("p", "other"),
    }
    for ix, _, _ in indexes:
        sql = memory.store.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (f"search_{ix}",))
        assert "USING fts5" in sql and "porter unicode61" in sql and "content=''" in sql
    # porter stemming: "elections" finds "elected".
    memory.remember("The node was elected leader.")
    assert memory.search("elections").results


def test_opening_again_does_not_migrate_again_and_keeps_the_data(tmp_path):
    path = tmp_path / "m.db"
    with Memory.open(path) as memory:
        memory.remember("Kept across opens.")
        schema = memory.store.all("SELECT type, name, sql FROM sqlite_master ORDER BY name")
    statements: list[str] = []
    store = SqliteStore.open(path)
    try:
        store.conn.exec_trace = lambda _cur, sql, _b: statements.append(sql) or True
        store._migrate()
    finally:
        store.conn.exec_trace = None
    assert statements == ["PRAGMA user_version"]  # looked, changed nothing
    store.close()
    with Memory.open(path) as memory:
        assert memory.store.all("SELECT type, name, sql FROM sqlite_master ORDER BY name") == schema
        assert memory.search("kept").results


@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION))
def test_an_older_store_steps_through_the_migrations_and_keeps_its_rows(tmp_path, start):
    fresh = tmp_path / "fresh.db"
    Memory.open(fresh).close()
    old = tmp_path / "old.db"
    conn = apsw.Connection(str(old))
    for step in range(start):
        conn.execute(MIGRATIONS[step])
    conn.execute(f"PRAGMA user_version = {start}")
    # A document with one passage, written as schema 1 wrote them.
    conn.execute(
        "INSERT INTO documents(id, namespace, uri, created_at) "
        "VALUES ('d0000000-0000-7000-8000-000000000000', 'default', 'u', 'then');"
        "INSERT INTO document_versions(document, version, text_hash, created_at) "
        "VALUES ('d0000000-0000-7000-8000-000000000000', 1, 'h', 'then');"
        "INSERT INTO passages(id, namespace, document, version, position, text, hash, shingles, "
        "created_at) VALUES ('a0000000-0000-7000-8000-000000000000', 'default', "
        "'d0000000-0000-7000-8000-000000000000', 1, 0, 'Migrated leases survive.', 'h', x'', "
        "'then');"
        "INSERT INTO version_passages(document, version, position, passage) "
        "VALUES ('d0000000-0000-7000-8000-000000000000', 1, 0, "
        "'a0000000-0000-7000-8000-000000000000')"
    )
    conn.close()

    def schema(path):
        c = apsw.Connection(str(path))
        try:
            rows = c.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
            # (less the search indexes, made per namespace as rows arrive)
            return [r for r in rows if not re.match(r"search_\d+", r[1])]
        finally:
            c.close()

    with Memory.open(old) as memory:
        assert memory.store.scalar("PRAGMA user_version") == SCHEMA_VERSION
        hits = memory.search("leases").results
        assert [h.address for h in hits] == ["memo://passage/a0000000-0000-7000-8000-000000000000"]
        memory.remember("New text after the migration.", uri="u2")
    assert schema(old) == schema(fresh)


def test_a_store_from_a_newer_schema_is_refused_clearly(tmp_path, cli):
    path = tmp_path / "newer.db"
    Memory.open(path).close()
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    for readonly in (False, True):
        with pytest.raises(MemorsError, match=r"newer memors \(schema \d+, this one knows \d+\)"):
            SqliteStore.open(path, readonly=readonly)
    r = cli("search", "x", "--db", str(path))
    assert r.code == 2, r
    assert "newer memors" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("lint", "--db", str(path))
    assert r.code == 2 and "newer memors" in r.err, r
    # ... and the file was not touched.
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 5


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"not a database at all, just some text" * 100, "not a memors database")],
)
def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path, content, says):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(MemorsError, match=says):
        Memory.open(path)
    assert path.read_bytes() == content


def test_a_directory_is_not_a_database(tmp_path):
    with pytest.raises(MemorsError, match="is a directory"):
        Memory.open(tmp_path)


# --- the default path (SPEC §3) -----------------------------------------------------


def _where(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("MEMORS_DB", "XDG_DATA_HOME")}
    return subprocess.run(
        [sys.executable, "-m", "memors_cli", "fact", "add", "Raft", "leader", "n1", *args],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_default_path_is_home_local_share_then_xdg_then_memors_db_then_db(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = _where(tmp_path, {"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert (home / ".local/share/memors/memors.db").is_file()

    xdg = tmp_path / "xdg"
    r = _where(tmp_path, {"HOME": str(home), "XDG_DATA_HOME": str(xdg)})
    assert r.returncode == 0, r.stderr
    assert (xdg / "memors/memors.db").is_file()

    env_db = tmp_path / "env.db"
    r = _where(tmp_path, {"HOME": str(home), "XDG_DATA_HOME": str(xdg), "MEMORS_DB": str(env_db)})
    assert r.returncode == 0, r.stderr
    assert env_db.is_file()

    flag_db = tmp_path / "flag.db"
    r = _where(
        tmp_path,
        {"HOME": str(home), "XDG_DATA_HOME": str(xdg), "MEMORS_DB": str(env_db)},
        "--db",
        str(flag_db),
    )
    assert r.returncode == 0, r.stderr
    assert flag_db.is_file()

    def facts(path: Path) -> int:
        return apsw.Connection(str(path)).execute("SELECT COUNT(*) FROM facts").fetchone()[0]

    # Each command wrote to exactly one store: the first the precedence picked.
    assert [
        facts(p) for p in (home / ".local/share/memors/memors.db", xdg / "memors/memors.db")
    ] == [
        1,
        1,
    ]
    assert facts(env_db) == 1 and facts(flag_db) == 1


# --- raw rows are never modified (SPEC §3) ---------------------------------------------


@pytest.fixture
def filled(memory):
    """A store with a row in every raw table: documents, passages, facts, tombstones, pages."""
    docs = [
        memory.remember(f"[[Raft]] elects leader {i} with a quorum of votes in term {i}.")
        for i in range(4)
    ]
    memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01")
    memory.forget(docs[3].passages[0], reason="test")
    memory.remember("First draft.\n\nKept paragraph.", uri="draft.txt")
    memory.remember("Second draft.\n\nKept paragraph.", uri="draft.txt")  # a version
    item = memory.compact(kinds=["page"]).items[0]
    report = memory.submit(
        item.id,
        content="Raft elects leader 0 with a quorum of votes. Raft leader is n1.",
        title="Raft",
        force=True,
    )
    assert report.stored
    # A version with checked sentences and their sources (written through the
    # store: the page's sentences as a submission records them).
    with memory.store.write() as tx:
        raft = tx.entities.resolve("Raft", "default")
        previous = tx.pages.current(raft)
        cited = [f"memo://passage/{s.passage}" for s in tx.pages.sources(previous.id)]
        fact = tx.pages.facts(previous.id)
        assert fact, "the page records the fact it was built with"
        tx.pages.write("default", raft, "Raft", previous.content, cited, previous, None, {},
                       sentences=[("Raft elects leader 0.", cited[:1]), ("Raft leader is n1.", fact)],
                       facts=fact)  # fmt: skip
    return memory


RAW = ["documents", "passages", "facts", "tombstones", "pages", "page_sentences", "page_facts"]
#: A column each raw table has, to try to change.
CHANGED = {"tombstones": "reason", "pages": "content", "facts": "value",
           "page_sentences": "text", "page_facts": "fact"}  # fmt: skip
#: How each raw table's rows are ordered (the page records have no rowid).
ORDER = {"page_sentences": "page, position", "page_facts": "page, fact"}


@pytest.mark.parametrize("table", RAW)
def test_raw_rows_refuse_update_and_delete_through_apsw(filled, table):
    conn = filled.store.conn
    order = ORDER.get(table, "rowid")
    before = conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
    assert before, f"no row in {table}"
    column = CHANGED.get(table, "created_at")
    with pytest.raises(apsw.ConstraintError, match="never modified"):
        conn.execute(f"UPDATE {table} SET {column} = 'changed'")
    with pytest.raises(apsw.ConstraintError, match="never deleted"):
        conn.execute(f"DELETE FROM {table}")
    assert conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall() == before


@pytest.mark.parametrize("table", RAW)
def test_raw_rows_refuse_update_and_delete_through_the_sqlite3_module(filled, table):
    path = str(filled.path)
    filled.close()
    conn = sqlite3.connect(path)
    order = ORDER.get(table, "rowid")
    try:
        before = conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        assert before, f"no row in {table}"
        with pytest.raises(sqlite3.IntegrityError, match="never modified"):
            conn.execute(f"UPDATE {table} SET {CHANGED.get(table, 'created_at')} = 'x'")
        with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
            conn.execute(f"DELETE FROM {table}")
        conn.rollback()
        assert conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall() == before
    finally:
        conn.close()


APPEND_ONLY = [
    "documents",
    "document_versions",
    "version_passages",
    "passages",
    "facts",
    "tombstones",
    "pages",
    "page_sources",
    "page_sentences",
    "page_facts",
    "entities",
]


def _rewrites(conn, table: str) -> list[tuple[str, list]]:
    """Statements that would rewrite an existing row of ``table`` in place
    of deleting it: INSERT OR REPLACE, REPLACE and an upsert, each naming the
    first row's own key, with its text columns set to TAMPERED."""
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()]
    names = ", ".join(cols)
    first = conn.execute(f"SELECT {names} FROM {table} ORDER BY {cols[0]} LIMIT 1").fetchone()
    keys = {"rowid", "id", "document", "version", "position", "page", "passage", "target",
            "namespace", "key", "type", "state", "subject", "entity", "canonical", "fact"}  # fmt: skip
    row = [
        v if c in keys or not isinstance(v, str) else "TAMPERED"
        for c, v in zip(cols, first, strict=True)
    ]
    marks = ", ".join("?" for _ in cols)
    key = {"document_versions": "document, version", "version_passages":
           "document, version, position", "page_sources": "page, passage",
           "page_sentences": "page, position", "page_facts": "page, fact",
           "tombstones": "target"}.get(table, "id")  # fmt: skip
    return [
        (f"INSERT OR REPLACE INTO {table}({names}) VALUES ({marks})", row),
        (f"REPLACE INTO {table}({names}) VALUES ({marks})", row),
        (
            f"INSERT INTO {table}({names}) VALUES ({marks}) ON CONFLICT({key}) DO UPDATE SET "
            f"{cols[-1]} = excluded.{cols[-1]}",
            row,
        ),
    ]


@pytest.mark.parametrize("table", APPEND_ONLY)
def test_no_insert_can_replace_a_raw_row_through_plain_sqlite(filled, table):
    path = str(filled.path)
    filled.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        before = conn.execute(f"SELECT * FROM {table}").fetchall()
        for sql, row in _rewrites(conn, table):
            with pytest.raises(sqlite3.IntegrityError, match="never replaced"):
                conn.execute(sql, row)
        assert conn.execute(f"SELECT * FROM {table}").fetchall() == before
        assert "TAMPERED" not in repr(conn.execute(f"SELECT * FROM {table}").fetchall())
    finally:
        conn.close()
    # Nothing was rewritten behind the search indexes' back either (read with
    # apsw: the stdlib's SQLite may predate FTS5's contentless_delete).
    assert store_problems(path) == []


def test_no_connection_can_open_the_purge_gate(filled):
    """The gate only purge's own transaction opens: a plain connection that
    writes a row where the old gate table was, or creates one, still cannot
    delete a raw row, and no audit row is made."""
    path = str(filled.path)
    filled.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS purge_gate(opened_at TEXT NOT NULL)")
        conn.execute("INSERT INTO purge_gate(opened_at) VALUES ('now')")
        conn.execute("CREATE TEMP TABLE purge_gate(opened_at TEXT)")
        conn.execute("INSERT INTO temp.purge_gate VALUES ('now')")
        for table in APPEND_ONLY:
            before = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
                conn.execute(f"DELETE FROM {table}")
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == before > 0
        assert conn.execute("SELECT COUNT(*) FROM purges").fetchone()[0] == 0
    finally:
        conn.close()
    # memors' own connections refuse it the same way outside purge
    with Memory.open(path) as memory, pytest.raises(apsw.ConstraintError, match="never deleted"):
        memory.store.conn.execute("DELETE FROM passages")


# --- purge ------------------------------------------------------------------------------


def test_purge_needs_yes_erases_for_good_and_leaves_an_audit_row_without_content(cli):
    secret = "The launch code is zebra-kumquat-4471."
    r = cli("remember", "-", "--entity", "Vault", "--json", input=secret)
    assert r.code == 0, r
    doc, passage = r.json["document"], r.json["passages"][0]
    cli("fact", "add", "Vault", "code", "zebra-kumquat-4471")

    r = cli("purge", doc)
    assert r.code == 2 and "--yes" in r.err and "Traceback" not in r.err, r
    assert cli("get", doc).code == 0  # nothing erased without --yes

    r = cli("purge", doc, "--yes", "--json")
    assert r.code == 0, r
    assert r.json["address"] == doc
    assert set(r.json["erased"]) >= {doc, passage}
    assert cli("get", doc).code == 2
    assert cli("get", passage).code == 2
    assert cli("search", "zebra kumquat", "--json").json["results"] == []

    conn = apsw.Connection(str(cli.db))
    rows = conn.execute("SELECT namespace, target, erased, created_at FROM purges").fetchall()
    assert len(rows) == 1
    ns, target, erased, when = rows[0]
    assert (ns, target) == ("default", doc)
    assert passage in erased
    assert when[:4].isdigit()
    # The audit names what and when, never the content; the text is gone from the file.
    assert "kumquat" not in erased
    conn.close()
    raw = b"".join(p.read_bytes() for p in cli.tmp.glob("cli.db*"))
    assert b"launch code" not in raw
    # The audit itself cannot be changed.
    conn = apsw.Connection(str(cli.db))
    with pytest.raises(apsw.ConstraintError):
        conn.execute("DELETE FROM purges")


def test_purge_is_cli_only_and_refuses_what_cannot_be_purged(cli):
    r = cli("purge", "memo://entity/0199a000-0000-7000-8000-000000000000", "--yes")
    assert r.code == 2 and "only documents, passages, facts and pages" in r.err, r
    r = cli("purge", "memo://fact/0199a000-0000-7000-8000-000000000000", "--yes")
    assert r.code == 2 and "nothing at" in r.err, r
    r = cli("purge", "nonsense", "--yes", "--json")
    assert r.code == 2 and r.json["error"]["code"] == "bad-address", r


def test_the_lean_reader_reads_the_current_schema() -> None:
    from memors_core.storage.sqlite import reader

    assert SCHEMA_VERSION == reader.SCHEMA_VERSION


def test_the_lean_reader_expects_the_built_in_kinds_state() -> None:
    from memors_core.storage.sqlite import reader
    from memors_kinds.duplicate import sqlite_index

    assert {"duplicate": len(sqlite_index.MIGRATIONS)} == reader.BUILT_IN_KIND_STATE
