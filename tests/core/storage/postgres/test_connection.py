"""Operating a PostgreSQL store: opening, migrating, losing a connection,
pooling, and keeping the password to itself."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from memors_core import Memory
from memors_core.domain.rows import ScanMark
from memors_core.engine import views
from memors_core.errors import MemorsError, StoreBusy
from memors_core.storage.postgres.connection import (
    LOCK_SPACE,
    WRITE_LOCK,
    PgStore,
    _preparation,
    safe_location,
)
from memors_core.storage.postgres.schema import SCHEMA_VERSION
from memors_core.testing import open_items, passages_about, run_cli
from memors_core.testing import postgres as pg

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def _open_in_a_process(url: str, barrier, results) -> None:
    barrier.wait()
    try:
        with Memory.open(url) as memory:
            memory.remember("Opened at once by many processes.", uri=f"p/{os.getpid()}")
        results.put("ok")
    except Exception as exc:  # reported to the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_store_at_once_migrate_it_once():
    pg.require_server()
    with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
        name = f"memors_t_empty_{os.getpid()}"
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')  # empty: no template, nothing migrated
    url = pg._with_dbname(pg.admin_url(), name)
    try:
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [
            ctx.Process(target=_open_in_a_process, args=(url, barrier, results)) for _ in range(4)
        ]
        for p in procs:
            p.start()
        # (each answers before it exits; the bounds only end a run that hangs)
        assert sorted(results.get(timeout=600) for _ in procs) == ["ok"] * 4
        for p in procs:
            p.join(60)
        with psycopg.connect(url) as conn:
            steps = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
            kinds = dict(conn.execute("SELECT kind, version FROM kind_schema").fetchall())
            stored = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        assert steps == list(range(1, SCHEMA_VERSION + 1))  # each step once, in order
        assert "duplicate" in kinds
        assert stored == 4
    finally:
        pg.drop_database(url)


def test_a_connection_dropped_between_transactions_is_replaced(postgres_url):
    with Memory.open(postgres_url) as memory:
        memory.remember("\n\n".join(passages_about("Raft", 3)))
        with memory.store.read() as tx:
            pid = tx.native("postgres").info.backend_pid
        with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # the pool finds the dead connection when the next transaction starts
        # and takes a new one: the user sees nothing
        memory.remember("Stored after the server dropped the connection.")
        assert memory.search("dropped the connection").results


def test_a_write_of_held_back_statements_alone_is_stored_over_a_dropped_connection(
    postgres_url, monkeypatch
):
    # Writes that need no answer are held back (tx.later) till the next
    # statement or the commit. A write made of them alone sends them with
    # its BEGIN, not with its COMMIT: a first message found on a dropped
    # connection is sent again on another, which is safe only while it
    # commits nothing.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")
    with Memory.open(postgres_url) as memory:
        with memory.store.read() as tx:
            pid = tx.native("postgres").info.backend_pid
        with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        sent = pg.messages_sent(monkeypatch)
        with memory.store.write() as tx:
            tx.namespaces.touch("held")
            with tx.later():
                tx.changes.set_mark("held", "kind", ScanMark(3, 2, 1))
        monkeypatch.undo()
        assert "held" in memory.namespaces()
        with memory.store.read() as tx:
            assert tx.changes.mark("held", "kind") == ScanMark(3, 2, 1)
        # the held writes went with the BEGIN (twice: the dropped connection's
        # attempt, then the new one's), the COMMIT alone
        begun = [m for m in sent if m.startswith("BEGIN")]
        assert len(begun) == 2 and all("INTO compact_marks" in m for m in begun), sent
        assert sent[-1] == "COMMIT", sent


def test_a_namespace_home_plans_its_reads_once_per_connection(postgres_url, monkeypatch):
    # The home's counts (live and stale pages, the listed entities' aliases,
    # passages, facts and pages) cost the server more to plan than to run:
    # the first home on a connection prepares them, the next ones only
    # EXECUTE them, and answer the same.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")  # every read on the one connection
    with Memory.open(postgres_url) as memory:
        memory.remember("[[Raft]] elects a leader; [[Paxos]] agrees on a value.", uri="r")
        memory.record_fact("Raft", "year", "2014")
        sent = pg.messages_sent(monkeypatch)
        first = memory.overview()
        names = [s.split()[1] for s in sent if s.startswith("PREPARE memors_")]
        assert len(names) >= 6, sent
        sent.clear()
        again = memory.overview()
        assert again == first
        assert [e.passages for e in again.entities.entities] == [1, 1]
        assert [e.facts for e in again.entities.entities] == [0, 1]  # Paxos, Raft
        assert not [s for s in sent if "PREPARE" in s], sent
        for name in names:
            assert any(f"EXECUTE {name}" in s for s in sent), (name, sent)
        # every read prepared, the nine of them in two messages (they were
        # nine round trips): the open items, the pages' two counts, both
        # counters, the page of entities and the newest corrections
        # together, then the entities' four figures (aliases, passages,
        # facts, pages), then the COMMIT
        reads = [s for s in sent if s != "COMMIT"]
        assert all(s.split("; ")[-1].startswith("EXECUTE memors_") for s in reads), reads
        assert [s.count("EXECUTE memors_") for s in reads] == [5, 4], reads


def test_a_compaction_reads_the_open_merge_candidates_entities_together(postgres_url, monkeypatch):
    # The merge kind reads each open candidate's two entities to know their
    # canonical ids, every compaction: read one at a time they were two
    # round trips a candidate (on a namespace where agents name people
    # many ways, hundreds a compaction); read together, a compaction that
    # examines none of them sends as much for six as for two. One that
    # examines them all (the next after they were opened) reads their
    # sides' passages, facts and other names together too: only each
    # side's page is a read of its own (ten round trips a candidate were).
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")

    def messages(candidates: int) -> tuple[int, int]:
        url = pg.new_database()
        try:
            with Memory.open(url) as memory:
                for n in range(candidates):  # names that fold equal: a candidate each
                    memory.remember(f"[[Topic {n}]] is on the list.", uri=f"a{n}")
                    memory.remember(f"We talk about [[topic-{n}]] too.", uri=f"b{n}")
                memory.compact(kinds=["merge"])
                with pytest.MonkeyPatch.context() as counting:  # (the pool's size stays set)
                    sent = pg.messages_sent(counting)
                    memory.compact(kinds=["merge"])  # (the candidates it opened, examined once)
                    examined = len(sent)
                    memory.remember("[[Raft]] elects a leader.", uri="raft")  # another subject
                    sent.clear()
                    memory.compact(kinds=["merge"])
                assert len(open_items(memory, "merge")) == candidates
                return examined, len(sent)
        finally:
            pg.drop_database(url)

    (examined_6, untouched_6), (examined_2, untouched_2) = messages(6), messages(2)
    assert untouched_6 == untouched_2
    assert examined_6 - examined_2 <= 2 * (6 - 2), (examined_6, examined_2)


def test_a_page_view_plans_its_reads_once_per_connection(postgres_url, monkeypatch):
    # A page's view reads whether it is stale, its cited passages' entities
    # and their documents' titles: prepared on the first view, executed after.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")
    with Memory.open(postgres_url) as memory:
        texts = passages_about("Quorum", 3, topic="Quorum log")
        memory.remember_many([{"text": t, "uri": f"q-{i}"} for i, t in enumerate(texts)])
        item = next(
            i for i in open_items(memory, "page") if i["payload"]["entity"]["name"] == "Quorum"
        )
        refs = {p["text"]: p["ref"] for p in item["payload"]["passages"]}
        body = "\n\n".join(f"{t.replace('[[', '').replace(']]', '')} [{refs[t]}]" for t in texts)
        page = memory.submit(item["id"], content=f"# Quorum\n\n{body}\n", title="Quorum").address

        def view() -> tuple:
            shown = memory.get(page)
            cited = memory.get_many(shown.sources)
            titles = memory.labels([c.document for c in cited.values()])
            return shown, cited, titles

        sent = pg.messages_sent(monkeypatch)
        first = view()
        names = [s.split()[1] for s in sent if s.startswith("PREPARE memors_")]
        assert len(names) >= 3, sent
        sent.clear()
        again = view()
        assert again == first and first[0].stale is False and len(first[1]) == 3
        assert sorted(first[2].values()) == ["q-0", "q-1", "q-2"]
        assert not [s for s in sent if "PREPARE" in s], sent
        for name in names:
            assert any(f"EXECUTE {name}" in s for s in sent), (name, sent)


def test_a_remembers_answer_is_planned_once_per_connection(postgres_url, monkeypatch):
    # A remember's reads (its uri's document, each name it links, and its
    # answer: the new version's live passages and the entities they name)
    # took longer to plan than to run: prepared on the first remember of a
    # connection, executed on the next ones.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")
    with Memory.open(postgres_url) as memory:
        sent = pg.messages_sent(monkeypatch)
        first = memory.remember("[[Raft]] elects a leader.", uri="a")
        names = [s.split()[1] for s in sent if s.startswith("PREPARE memors_")]
        assert len(names) >= 3, sent  # (the document, the name and its alias, the answer)
        sent.clear()
        again = memory.remember("[[Raft]] keeps a log.\n\nIt ends terms.", uri="b")
        assert not [s for s in sent if "PREPARE" in s], sent
        executed = {m for s in sent for m in re.findall(r"EXECUTE (memors_\w+)", s)}
        assert len(executed) >= 3 and executed <= set(names), sent
        # no read goes as text to be planned again (the lock's is the transaction's begin)
        assert [s for s in sent if s.lstrip().startswith("SELECT")] == [], sent
    assert len(first.passages) == 1 and len(again.passages) == 2
    assert again.entities == first.entities


def test_a_compaction_and_a_search_plan_their_reads_once_per_connection(postgres_url, monkeypatch):
    # An incremental compaction's scans (the change log's clocks, the
    # entities due a page, their passages and facts, the facts in conflict,
    # the merge candidates, the stale pages) and a search's look-ups (its
    # words' statistics, the entities it names, the passages beside a hit)
    # cost the server more to plan than to run: prepared on a connection's
    # first, executed on the next.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")
    with Memory.open(postgres_url) as memory:

        def round(n: int) -> tuple:
            memory.remember(f"[[Raft]] note {n}: the leader kept its lease.", uri=f"n{n}")
            memory.record_fact("Raft", "leader", f"node {n}")
            done = memory.compact(limit=0)
            found = memory.search("Raft leader lease").results
            return done.open, [r.text for r in found]

        sent = pg.messages_sent(monkeypatch)
        for n in range(4):  # (the entity due a page from its third passage)
            round(n)
        prepared = {s.split()[1] for s in sent if s.startswith("PREPARE memors_")}
        sent.clear()
        opened, found = round(4)
        assert not [s for s in sent if "PREPARE" in s], sent
        executed = {m for s in sent for m in re.findall(r"EXECUTE (memors_\w+)", s)}
        assert executed <= prepared and len(executed) >= 10, sent
        assert opened and found and "note 4" in " ".join(found)


def test_a_get_is_one_round_trip_the_read_begun_and_ended_with_its_statement(
    postgres_url, monkeypatch
):
    # A get of a passage asks for the row, its tombstone and its entities in
    # one statement, so its read is brief (Storage.brief_read): its BEGIN,
    # that statement and its COMMIT go in one message. (It was five round
    # trips: BEGIN, the passage, its tombstone, its entities, COMMIT; then
    # two.) The statement is prepared once per connection, so the server
    # plans it once: the first get on a connection sends the PREPARE before
    # it, the next ones only EXECUTE it.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")  # every get on the one connection
    with Memory.open(postgres_url) as memory:
        memory.remember("[[Raft]] elects a leader; [[Paxos]] agrees on a value.", uri="r")
        address = memory.search("elects a leader").results[0].address
        sent = pg.messages_sent(monkeypatch)
        first = memory.get(address)
        assert len(sent) == 2, sent
        assert sent[0].startswith("PREPARE memors_") and "FROM passages p" in sent[0]
        name = sent[0].split()[1]
        for _ in range(2):
            sent.clear()
            view = memory.get(address)
            assert view == first and len(view.entities) == 2 and view.status == "live"
            assert len(sent) == 1, sent
            assert sent[0].startswith("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ")
            assert sent[0].endswith(f"; EXECUTE {name}(%s, %s); COMMIT")
        # the connection is free and idle after it: a write goes on as ever
        memory.remember("[[Zab]] orders the log.", uri="z")
        # a read that asks nothing sends nothing
        sent.clear()
        with memory.store.read():
            pass
        assert sent == []


def test_a_write_begins_and_takes_its_locks_with_its_first_statement(postgres_url, monkeypatch):
    # A write's BEGIN and its locks go in one message with its first
    # statement, so the server runs that statement the moment the lock is
    # granted (they were a message of their own: the writer held the lock
    # a round trip longer, learning it had it). A write that sends nothing
    # still takes its turn, begun and committed in one message; one that
    # fails before its first statement sends nothing at all.
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")
    with Memory.open(postgres_url) as memory:
        memory.record_fact("Raft", "leader", "n1")  # (the first: its statements prepared)
        sent = pg.messages_sent(monkeypatch)
        memory.record_fact("Raft", "term", "7")
        assert sent[0].startswith("BEGIN ISOLATION LEVEL READ COMMITTED; "), sent
        rest = sent[0].partition("pg_advisory_xact_lock")[2]
        assert rest and "; SET LOCAL lock_timeout = " in rest
        first = rest.split("; SET LOCAL lock_timeout = ", 1)[1]
        assert "; " in first and first.split("; ", 1)[1].strip(), sent[0]  # a statement follows
        assert not any(m.startswith("BEGIN") for m in sent[1:]), sent
        # (the fact's insert needs no answer: held back, it goes with the COMMIT)
        assert sent[-1].startswith("INSERT INTO facts") and sent[-1].endswith("; COMMIT"), sent
        with memory.store.read() as tx:
            facts = tx.facts.live("default")
        assert {(f.predicate, f.value) for f in facts} == {("leader", "n1"), ("term", "7")}

        sent.clear()
        with memory.store.write():
            pass
        assert len(sent) == 1 and sent[0].startswith("BEGIN ISOLATION LEVEL READ COMMITTED; ")
        assert sent[0].endswith("; COMMIT") and "pg_advisory_xact_lock" in sent[0]

        sent.clear()
        with pytest.raises(ValueError), memory.store.write(namespace="default"):
            raise ValueError("before any statement")
        assert sent == []
        memory.record_fact("Raft", "term", "8")  # the connection goes on as ever
        assert any(m.startswith("BEGIN") for m in sent)


def test_a_get_that_needs_more_than_its_one_statement_reads_again_whole(postgres_url, monkeypatch):
    # A brief read that sends a second statement runs again in a whole read
    # (one snapshot); what it answers is what a whole read answers.
    with Memory.open(postgres_url) as memory:
        made = memory.remember("[[Raft]] elects a leader.\n\nIt keeps a log.", uri="r")
        memory.forget(made.passages[1])
        with memory.store.read() as tx:
            whole = [
                views.get(tx, "passage", p.rsplit("/", 1)[1], "default") for p in made.passages
            ]
        runs: list[int] = []

        def two_gets(tx):
            runs.append(1)
            return [views.get(tx, "passage", p.rsplit("/", 1)[1], "default") for p in made.passages]

        sent = pg.messages_sent(monkeypatch)
        assert memory.store.brief_read(two_gets) == whole
        assert len(runs) == 2  # the first ended with its first statement
        assert sent[0].endswith("; COMMIT") and sent[-1] == "COMMIT", sent
        assert [memory.get(p) for p in made.passages] == whole


def test_opening_a_store_is_ten_round_trips(postgres_url, monkeypatch):
    # A CLI command or an MCP server opens the store first; against a server
    # on another host each round trip is a network's. Opening a migrated
    # store sends: the connection's settings (one message), the schema
    # version (its read, then COMMIT), the statistics check (one statement),
    # the vector table's state (one statement in a read, then COMMIT), then
    # Memory's reads of the pending purges and the kinds' versions. It was
    # seventeen: a SET each, a "SELECT 1" proof, the version in two
    # statements, the vectors' state in four.
    Memory.open(postgres_url).close()  # migrated, as a store is after its first open
    sent = pg.messages_sent(monkeypatch)
    with Memory.open(postgres_url) as memory:
        opened = list(sent)
        assert memory.entity_count() == 0  # and it works
    settings = [m for m in opened if m.startswith("SET ")]
    assert len(settings) == 1 and "lock_timeout" in settings[0], opened
    assert "client_min_messages" in settings[0]
    assert "SELECT 1" not in opened
    assert len(opened) == 10, opened
    assert sum("passage_vectors" in m for m in opened) == 1


@pytest.mark.parametrize("prepared", [False, True], ids=["first-get", "prepared-before"])
def test_a_connection_dropped_between_reads_is_replaced_at_the_first_statement(
    postgres_url, monkeypatch, prepared
):
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")  # the next read gets the dead one
    with Memory.open(postgres_url) as memory:
        memory.remember("\n\n".join(passages_about("Raft", 3)))
        address = memory.search("Raft").results[0].address
        if prepared:  # the dead connection had prepared get's statement: the new one has not
            memory.get(address)
        with memory.store.read() as tx:
            pid = tx.native("postgres").info.backend_pid
        with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # the read's first message (the PREPARE, or BEGIN and all) goes again
        # on a new connection, prepared there first: the user sees nothing
        assert memory.get(address).address == address
        with memory.store.read() as tx:
            assert tx.native("postgres").info.backend_pid != pid
        assert memory.get(address).address == address


def test_a_rolled_back_write_leaves_the_prepared_get_in_place(postgres_url, monkeypatch):
    # psycopg prepares a statement run five times itself, and on a rollback
    # it deallocated every prepared statement of the connection, memors'
    # own too: the next get failed with "prepared statement does not exist".
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")  # every transaction on the one connection
    with Memory.open(postgres_url) as memory:
        for n in range(8):  # each remember binds the same inserts again
            memory.remember(f"Raft note {n}: the leader appends entries.", uri=f"raft/{n}")
        address = memory.search("leader").results[0].address
        assert memory.get(address).address == address  # get's statement prepared
        with pytest.raises(RuntimeError), memory.store.write() as tx:
            tx.passages.get("no-such-passage")
            raise RuntimeError("the write is given up: rolled back")
        assert memory.get(address).address == address
        memory.remember("Raft note 9: a follower votes once a term.", uri="raft/9")
        assert memory.get(address).address == address


def test_a_prepared_statement_numbers_its_parameters_and_keeps_a_literal_percent():
    name, statement = _preparation("SELECT %s, 'a%%b' FROM t WHERE x = %s AND y LIKE '%%s'")
    assert statement == f"PREPARE {name} AS SELECT $1, 'a%b' FROM t WHERE x = $2 AND y LIKE '%s'"
    assert name.startswith("memors_") and _preparation("SELECT 1")[0] != name


def test_a_connection_lost_inside_a_write_stores_nothing_and_says_so_in_one_line(postgres_url):
    with Memory.open(postgres_url) as memory:
        memory.remember("Stored before.", uri="before")
        store = memory.store
        with pytest.raises(MemorsError) as raised, store.write() as tx:
            tx.namespaces.touch("half-written")
            with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
                pid = tx.native("postgres").info.backend_pid
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            # (a statement sent at once: the namespace's registration is
            # held back till the commit, where the loss says "may or may not")
            tx.changes.set_mark("never", "kind", ScanMark(1, 1, 1))
        message = str(raised.value)
        assert "\n" not in message
        assert "lost the connection" in message and "nothing of it was stored" in message
        # the store carries on, and nothing of the broken transaction is there
        memory.remember("Stored after.", uri="after")
        assert "half-written" not in memory.namespaces()
        assert {"before", "after"} <= {
            d for d in ("before", "after") if memory.search(f"Stored {d}").results
        }


def test_threads_share_the_pool_and_read_at_once(postgres_url, monkeypatch):
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "3")
    store = PgStore.open(postgres_url)
    try:
        inside, release = threading.Barrier(3), threading.Event()
        pids: list[int] = []

        def reader() -> None:
            with store.read() as tx:
                pids.append(tx.native("postgres").info.backend_pid)
                # three read transactions open at the same time (the bounds
                # only end a run that hangs)
                inside.wait(600)
                release.wait(600)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        release.set()
        for t in threads:
            t.join(600)
        assert not [t for t in threads if t.is_alive()], "a reader hung"
        assert len(set(pids)) == 3  # three connections of the pool, one per transaction
        with store.write() as tx:  # and a writer after them
            tx.namespaces.touch("after-readers")
    finally:
        store.close()


def _write_lock_waiters(admin: psycopg.Connection, dbname: str) -> int:
    """Sessions of ``dbname`` waiting for the store's write lock."""
    return admin.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
        "WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = %s "
        "AND l.classid = %s AND l.objid = %s",
        (dbname, LOCK_SPACE, WRITE_LOCK),
    ).fetchone()[0]


def _hold_write_lock(url: str) -> psycopg.Connection:
    """Another session holding the store's write lock (until it closes)."""
    holder = psycopg.connect(url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_SPACE, WRITE_LOCK))
    return holder


def test_a_lock_timeout_is_one_wait_on_one_connection_and_the_busy_error(postgres_url, monkeypatch):
    # The lock timeout is no broken connection: it was tried again on each
    # of the pool's connections, a writer waiting five times as long.
    # (The lock stays held until the busy error, however long the wait. The
    # store opens with the default timeout, which also bounds making its
    # connections, as every other test's does; only the writer's wait for
    # the lock is shortened, so no machine's speed decides the outcome.)
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "4")
    with Memory.open(postgres_url) as memory:
        memory.store.busy_ms = 1000  # (MEMORS_BUSY_TIMEOUT_MS's, for the writes only)
        pool = memory.store.pool
        holder = _hold_write_lock(postgres_url)
        try:
            pool.pop_stats()
            with pytest.raises(StoreBusy) as raised:
                memory.remember("Never stored: another writer holds the lock.")
            asked = pool.pop_stats().get("requests_num", 0)
        finally:
            holder.close()
        assert asked == 1  # one connection taken, one wait, then the answer
        message = str(raised.value)
        assert "\n" not in message
        assert "stayed locked by another writer" in message and "nothing was stored" in message
        # the pool kept its connections (none was dropped as broken) and works
        assert pool.get_stats().get("connections_lost", 0) == 0
        memory.remember("Stored once the lock is free.")
        assert memory.search("lock is free").results
        assert not memory.search("another writer holds").results


def test_writers_waiting_for_the_lock_leave_the_pool_to_searches(postgres_url, monkeypatch):
    # Five writers waiting for another process's lock held every connection
    # of the pool, and searches waited for one.
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "600000")  # (they wait while the test looks)
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "4")
    dbname = postgres_url.rsplit("/", 1)[1]
    with Memory.open(postgres_url) as memory:
        memory.remember("Raft elects a leader by majority vote.")
        holder = _hold_write_lock(postgres_url)
        outcomes: list[str] = []

        def writer(n: int) -> None:
            try:
                memory.remember(f"Written while another process held the lock, number {n}.")
                outcomes.append("stored")
            except Exception as exc:  # reported to the test
                outcomes.append(f"{type(exc).__name__}: {exc}")

        writers = [threading.Thread(target=writer, args=(n,)) for n in range(5)]
        try:
            with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
                for t in writers:
                    t.start()
                # Writes that only add run together once the lock is free:
                # all but one of the pool's connections wait for it, the
                # other two writers wait in the process. Until three wait in
                # the database (no clock: a writer that ends first, which
                # only its own busy timeout would make it do, fails the test).
                while _write_lock_waiters(admin, dbname) < 3:
                    assert all(t.is_alive() for t in writers), outcomes
                    time.sleep(0.01)
                assert _write_lock_waiters(admin, dbname) == 3
                found = memory.search("majority vote")  # while all five wait
                assert [r.address for r in found.results]
                # and no fourth took the connection the search had
                assert _write_lock_waiters(admin, dbname) == 3
        finally:
            holder.close()
            for t in writers:
                t.join(600)  # (only ends a run that hangs)
        assert not [t for t in writers if t.is_alive()], "a writer hung"
        assert outcomes == ["stored"] * 5
        assert len(memory.search("another process held the lock").results) == 5


def test_a_bad_pool_size_is_bad_input(postgres_url):
    result = run_cli("search", "raft", db=postgres_url, env={"MEMORS_PG_POOL_SIZE": "zero"})
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "memors-mcp: MEMORS_PG_POOL_SIZE must be a whole number of at least 1, got 'zero'"
    ]


def test_the_password_is_in_no_error_log_or_metric(postgres_url, tmp_path):
    secret = "s3cr3t-pw-do-not-print"
    user = f"memors_pw_{os.getpid()}"
    dbname = psycopg.conninfo.conninfo_to_dict(postgres_url)["dbname"]
    with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{user}"')
        admin.execute(f"CREATE ROLE \"{user}\" LOGIN SUPERUSER PASSWORD '{secret}'")
    try:
        good = f"postgresql://{user}:{secret}@127.0.0.1:5432/{dbname}"
        # (this server trusts loopback, so a wrong password still connects)
        bad = f"postgresql://{user}:{secret}-wrong@127.0.0.1:5432/{dbname}"
        outputs = []
        for args, db in (
            (("remember", "-", "--uri", "pw"), good),
            (("search", "password"), good),
            (("--log-level", "debug", "compact"), good),
            (("lint",), good),
            (("metrics",), good),
            (("search", "x"), bad),
            (("search", "x"), f"postgresql://{user}:{secret}@127.0.0.1:5432/no_such_db"),
            (("search", "x"), f"postgresql://{user}:{secret}@nowhere.invalid/{dbname}"),
        ):
            r = run_cli(*args, db=db, input="A passage about a password.", cwd=tmp_path)
            outputs.append(r.out + r.err)
        assert all(secret not in out for out in outputs), [o for o in outputs if secret in o]
        assert "cannot connect" in outputs[6] and "cannot connect" in outputs[7]
        with Memory.open(good) as memory:
            assert secret not in memory.metrics()
            assert secret not in memory.path and memory.path == safe_location(good)
    finally:
        with psycopg.connect(pg.admin_url(), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (user,),
            )
            admin.execute(f'DROP ROLE IF EXISTS "{user}"')


@pytest.mark.parametrize("missing", ["psycopg", "psycopg_pool"])
def test_without_psycopg_a_postgres_address_names_the_extra(tmp_path, missing):
    # A Python in which the extra's driver or pool cannot be imported, as without
    # memors[postgres].
    code = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from memors_cli.main import main\n"
        "sys.exit(main(['--db', 'postgresql://u@127.0.0.1/db', 'search', 'x']))\n"
    )
    proc = subprocess.run(
        # (the bound only ends a run that hangs)
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "memors-mcp: a postgresql:// store needs the PostgreSQL engine: "
        "pip install 'memors[postgres]'"
    ]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@127.0.0.1:notaport/db",
        "postgresql://u:pw@127.0.0.1/db?sslmode=bogus",
        "postgresql://u:pw@nowhere.invalid/db",
    ],
)
def test_a_bad_address_is_one_line_without_the_password(url, tmp_path):
    r = run_cli("search", "x", db=url, cwd=tmp_path)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memors-mcp: cannot connect to postgresql://u@")
    assert "pw" not in lines[0].split("cannot connect to", 1)[1].split(":", 1)[0]


def test_reading_a_database_without_a_store_yet_reads_an_empty_one_and_creates_nothing(tmp_path):
    pg.require_server()
    name = f"memors_t_bare_{os.getpid()}"
    with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg._with_dbname(pg.admin_url(), name)
    try:
        lint = run_cli("lint", db=url, cwd=tmp_path)
        metrics = run_cli("metrics", db=url, cwd=tmp_path)
        assert (lint.code, lint.out.strip()) == (0, "namespace default: no findings")
        assert metrics.code == 0 and 'memors_kb_pages{namespace="default"}' not in metrics.err
        with psycopg.connect(url) as conn:
            tables = conn.execute(
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()[0]
        assert tables == 0  # a read wrote nothing
    finally:
        pg.drop_database(url)


def test_a_bulk_load_leaves_the_planner_statistics_of_what_it_loaded(postgres_url):
    # This server runs without autovacuum (as many test and CI servers do):
    # the store keeps its own statistics, so a compaction right after a bulk
    # load plans index look-ups instead of scanning the namespace per call.
    docs = [
        {"text": f"Passage {i} about [[Entity {i % 50}]] and its replicas."} for i in range(3000)
    ]
    with Memory.open(postgres_url) as memory:
        memory.remember_many(docs)
    # the next process to open it
    with Memory.open(postgres_url) as memory, memory.store.read() as tx:
        analysed = dict(
            tx.native("postgres")
            .execute(
                "SELECT relname, n_live_tup FROM pg_stat_user_tables "
                "WHERE relname IN ('passages', 'mentions') "
                "AND COALESCE(last_analyze, last_autoanalyze) IS NOT NULL"
            )
            .fetchall()
        )
    assert set(analysed) == {"passages", "mentions"}


def test_a_compaction_leaves_the_work_queue_vacuumed_for_its_counts(postgres_url, monkeypatch):
    # Without autovacuum, the store vacuums its work queue itself once a
    # write changed much of it, so the open items a namespace's home counts
    # are read from the queue's index alone, not from its rows (each with
    # its payload).
    from memors_core.storage.postgres import connection

    monkeypatch.setattr(connection, "STATISTICS_EVERY_S", 0.0)  # checked after every write
    monkeypatch.setenv("MEMORS_PG_POOL_SIZE", "1")  # (every statement on one server process)
    with Memory.open(postgres_url) as memory:
        memory.remember_many(
            [
                {"text": f"[[Node {i % 80}]] keeps shard {i} and answers its reads, copy {i}."}
                for i in range(400)
            ]
        )
        opened = memory.compact().created
        assert opened >= 80  # (past autovacuum's rule: 50 rows and 10% changed)

        def vacuumed() -> bool:
            with memory.store.read() as tx:
                return (
                    tx.native("postgres")
                    .execute(
                        "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables "
                        "WHERE relname = 'work_items'"
                    )
                    .fetchone()[0]
                )

        # A server process shows its writes in the statistics views when it
        # is next idle, or later when they are busy: made to show them now
        # (PostgreSQL 15), the check after the next write sees the queue's
        # changes and vacuums it.
        with memory.store.read() as tx:
            tx.native("postgres").execute("SELECT pg_stat_force_next_flush()")
        memory.remember("A later note.")
        with memory.store.read() as tx:
            db = tx.native("postgres")
            db.execute("SET LOCAL enable_seqscan = off")  # (a table this small would be scanned)
            plan = "\n".join(
                r[0]
                for r in db.execute(
                    "EXPLAIN (ANALYZE, COSTS OFF) SELECT namespace, kind, COUNT(*) "
                    "FROM work_items WHERE status = 'open' AND namespace = 'default' "
                    "GROUP BY namespace, kind"
                )
            )
        assert vacuumed()
        assert "Index Only Scan" in plan and "Heap Fetches: 0" in plan, plan
        assert sum(memory.overview().figures.open.values()) == opened


def test_a_missing_store_opened_read_only_is_empty_of_no_engine_and_creates_nothing():
    """A database with no memors schema yet, opened read-only, reads as an
    empty store that is not an SQLite one: nothing found, writes refused in
    one line, the database left as it was."""
    from memors_core.errors import NotFound, PluginError

    pg.require_server()
    name = f"memors_t_ro_missing_{os.getpid()}"
    with psycopg.connect(pg.admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')  # no memors schema
    url = pg._with_dbname(pg.admin_url(), name)
    try:
        with Memory.open(url, readonly=True) as memory:
            assert memory.store.location == safe_location(url)
            assert memory.namespaces() == []
            assert memory.search("raft").results == []
            assert memory.lint().findings == []
            assert memory.items().items == []
            with pytest.raises(NotFound, match="no entity named 'Raft'"):
                memory.entity("Raft")
            with pytest.raises(MemorsError, match="read-only") as caught:
                memory.remember("[[Raft]] elects a leader.")
            assert "\n" not in caught.value.message
            with memory.store.read() as tx:
                assert tx.engine == memory.store.engine != "sqlite"
                with pytest.raises(PluginError, match="no engine"):
                    tx.native("sqlite")
        r = run_cli("metrics", db=url)
        assert r.code == 0 and 'memors_kb_pages{namespace="default"} 0.0' in r.out, r
        with psycopg.connect(url) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchone()[0]
        assert tables == 0
    finally:
        pg.drop_database(url)


def test_a_statement_prepared_in_a_pipeline_that_failed_is_prepared_again(postgres_url):
    # A read prepared on its first use inside a pipeline (a remember's
    # answer, sent with its inserts) runs only once what was sent before
    # it has: when one of those fails, the PREPARE never ran, and taking it
    # for prepared broke every later use of it on that connection.
    from memors_core.storage.postgres.connection import PgStore

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("BEGIN")
        with pytest.raises(psycopg.errors.DivisionByZero), conn.pipeline():
            conn.execute("SELECT 1 / 0")
            PgStore._prepare(conn, "memors_probe", "PREPARE memors_probe AS SELECT 42")
        conn.execute("ROLLBACK")
        PgStore._prepare(conn, "memors_probe", "PREPARE memors_probe AS SELECT 42")
        assert conn.execute("EXECUTE memors_probe").fetchone() == (42,)
