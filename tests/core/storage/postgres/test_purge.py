"""Purge on PostgreSQL: the text leaves every table and, once the tables
are rewritten (``VACUUM FULL``), every file of the database; the audit row
stays; a store kept busy leaves the rewrite for later and the next command
finishes it. (The write-ahead log and backups keep the text until they
cycle: docs/postgres.md says so, and no test pretends otherwise.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psycopg
import pytest

from memors_core.engine.purge import finish_pending
from memors_core.errors import StoreBusy
from memors_core.memory import Memory
from memors_core.storage.postgres.connection import PgStore
from memors_core.storage.postgres.purge import older_than_purge
from memors_core.testing import passages_about
from memors_core.testing.storage_contract import NS, add_document

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

MARKER = "Qjzv7pgerasemarker"


def _page_text(payload: dict) -> str:
    return "\n".join(p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"])


def build(url: str) -> dict:
    """A store where the marker reached a passage, a title, metadata, an
    entity's name, a page citing the passage and work-item payloads."""
    with Memory.open(url) as memory:
        secret = memory.remember(
            f"[[Raft]] stores the {MARKER} token in every log entry.\n\n"
            f"A second paragraph naming [[{MARKER} Project]] as its origin.",
            uri="secret.txt",
            title=f"Notes on {MARKER}",
            metadata={"tag": MARKER},
        )
        for i, text in enumerate(passages_about("Raft", 4)):
            memory.remember(text, uri=f"raft-{i}.txt")
        item = next(i for i in memory.compact().items if i.kind == "page")
        assert MARKER in json.dumps(item.payload)
        page = memory.submit(item.id, content=_page_text(item.payload), title="Raft")
        assert page.stored
        kept = memory.remember("[[Paxos]] stays where it is.", uri="paxos.txt")
        memory.compact()
        return {"document": secret.document, "page": page.address, "kept": kept.document}


def tables_holding(url: str, marker: str) -> list[str]:
    """The store's tables with a row whose text holds ``marker`` (any case)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                "AND relkind = 'r' ORDER BY relname"
            )
        ]
        return [
            t
            for t in tables
            if conn.execute(
                f"SELECT count(*) FROM {t} x WHERE strpos(lower(x::text), %s) > 0",
                (marker.lower(),),
            ).fetchone()[0]
        ]


def files_holding(url: str, marker: str) -> list[str]:
    """The files of the store's database (every table, index and TOAST
    table, the catalogues included) whose bytes hold ``marker``; skips
    when the server's data directory cannot be read here."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what is in shared buffers reaches the files
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])
        where = (
            conn.execute("SELECT pg_relation_filepath('pg_class')").fetchone()[0].rsplit("/", 1)[0]
        )
    folder = data / where
    if not os.access(folder, os.R_OK | os.X_OK):
        pytest.skip(f"cannot read the server's data directory {folder} as this user")
    needles = {marker.encode(), marker.lower().encode()}
    return sorted(
        path.name
        for path in folder.iterdir()
        if path.is_file() and any(n in path.read_bytes() for n in needles)
    )


def finish(memory: Memory) -> None:
    """Finish every unfinished purge, however long the server's other
    transactions (other tests' too) keep PostgreSQL from rewriting."""
    while finish_pending(memory.store, wait=True):
        pass


def test_a_purged_document_is_gone_from_every_table_and_its_audit_row_stays(postgres_url):
    made = build(postgres_url)
    assert {"passages", "document_versions", "pages", "work_items", "entities"} <= set(
        tables_holding(postgres_url, MARKER)
    )
    with Memory.open(postgres_url) as memory:
        purged = memory.purge(made["document"])
        assert not purged.earlier
        assert made["page"] in purged.erased
        assert memory.get(made["kept"]) is not None
        finish(memory)
        assert "unfinished-purge" not in {f.rule for f in memory.lint().findings}
    assert tables_holding(postgres_url, MARKER) == []
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        target, erased = conn.execute(
            "SELECT target, erased FROM purges WHERE id = %s", (purged.audit,)
        ).fetchone()
        assert target == made["document"]
        assert json.loads(erased) == purged.erased
        assert conn.execute("SELECT count(*) FROM purge_pending").fetchone()[0] == 0


def test_once_the_purge_finishes_no_file_of_the_database_holds_the_text(postgres_url):
    made = build(postgres_url)
    assert files_holding(postgres_url, MARKER)  # the text is on disk to begin with
    with Memory.open(postgres_url) as memory:
        memory.purge(made["document"])
        finish(memory)
    assert files_holding(postgres_url, MARKER) == []


def test_a_transaction_older_than_the_purge_leaves_the_rewrite_for_later(postgres_url, monkeypatch):
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "200")
    with Memory.open(postgres_url) as memory:
        secret = memory.remember(f"The door code is {MARKER}.", uri="door.txt")
    # Another agent mid-read: its snapshot may still read the rows purge erases.
    older = psycopg.connect(postgres_url)
    older.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        older.execute("SELECT count(*) FROM passages").fetchone()
        with Memory.open(postgres_url) as memory:
            purged = memory.purge(secret.document)
            assert not purged.finished  # its rewrite would copy the old rows along
            assert tables_holding(postgres_url, MARKER) == []  # the erasure committed
            assert "unfinished-purge" in {f.rule for f in memory.lint().findings}
    finally:
        older.close()
    with Memory.open(postgres_url) as memory:  # the next command finishes it
        finish(memory)
        assert "unfinished-purge" not in {f.rule for f in memory.lint().findings}
    assert files_holding(postgres_url, MARKER) == []


def test_a_table_another_connection_holds_leaves_the_rewrite_for_later(postgres_url, monkeypatch):
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "200")
    store = PgStore.open(postgres_url)
    try:
        with store.write() as tx:
            _document, [passage] = add_document(tx, [f"The door code is {MARKER}."])
        with store.erasing() as tx:
            tx.purges.erase_passage(passage)
            target = f"memo://passage/{passage}"
            audit = tx.purges.record(NS, target, [target])
        while True:  # other tests' transactions, begun before the purge, end first
            with store.read():
                if older_than_purge(store, wait=False) is None:
                    break
            time.sleep(0.1)
        reader = psycopg.connect(postgres_url)  # begins after the purge
        try:
            reader.execute("SELECT count(*) FROM passages").fetchone()
            assert store.run_purge_step("vacuum", wait=False) is False
            with pytest.raises(StoreBusy, match=rf"erased \(audit record {audit}\).*locked"):
                store.run_purge_step("vacuum", wait=True)
        finally:
            reader.close()
        assert store.run_purge_step("vacuum", wait=False) is True
    finally:
        store.close()
