"""A compaction's fixed cost per kind, in statements (issue 32).

Each kind is scanned in a write of its own (on SQLite a transaction, on
PostgreSQL a savepoint of the compaction's one turn), and on PostgreSQL
every statement is a round trip: the clocks a scan's mark records (the
change log's, the passages', the tombstones') are read in one statement,
and the namespace is registered by the first kind's transaction only.
Counted at the driver, on the run's engine.
"""

from __future__ import annotations

import re
from typing import ClassVar

import pytest

from memors_core import hookimpl
from memors_core.plugins.kinds import Kind, Scan
from memors_core.testing import temporary_memory
from store_checks import statements


def _compact_counted(memory, monkeypatch, **kwargs):
    with statements(memory, monkeypatch) as seen:
        memory.compact(**kwargs)
    return seen


def _one_more_document_compacted(memory, monkeypatch):
    """Raft's three passages compacted, then Paxos remembered: the statements
    of the compaction that follows (every kind has something to scan)."""
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"doc-{n}")
    memory.compact()
    memory.remember("[[Paxos]] agrees on one value.", uri="doc-p")
    return _compact_counted(memory, monkeypatch)


def test_each_kind_reads_its_three_clocks_in_one_statement(memory, monkeypatch):
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"doc-{n}")
    memory.record_fact("Raft", "leader", "n1")
    memory.record_fact("Raft", "leader", "n2")
    memory.compact()
    memory.remember("[[Paxos]] agrees on one value.", uri="doc-p")
    kinds = memory.kinds.names()
    assert len(kinds) >= 5
    for full in (False, True):
        seen = _compact_counted(memory, monkeypatch, full=full)
        # Every clock read names the clock table (the marks kept across
        # purges): one per kind for its scan's mark, the three clocks in it,
        # one as an incremental compaction is asked for (what it must
        # reach), and one more, the duplicate kind's index reading the
        # passages'.
        clock_reads = [s for s in seen if "FROM clock WHERE name" in s]
        marks = [s for s in clock_reads if "tombstones" in s and "changes" in s]
        assert len(marks) == len(kinds) + (0 if full else 1), clock_reads
        assert len(clock_reads) <= len(marks) + 1, clock_reads


def test_a_kinds_mark_open_items_and_settled_clocks_are_read_in_one_message(memory, monkeypatch):
    # On PostgreSQL a kind's scan reads the clocks when no content write of
    # the namespace is under way (a savepoint taking the writers' lock for
    # that read alone): it goes in the kind's first message, with its mark
    # and open items, not in a round trip of its own.
    if memory.store.tx.engine != "postgres":
        pytest.skip("PostgreSQL's round trips (SQLite's reads are calls in its process)")
    seen = _one_more_document_compacted(memory, monkeypatch)
    settled = [s for s in seen if "SAVEPOINT memors_settled" in s]
    assert len(settled) == len(memory.kinds.names()), [s[:80] for s in settled]
    for message in settled:
        # (the kind's first statements, its savepoint set in the same message:
        # after the last writes of the kind before it, if any)
        before, reads = message.split("SELECT change_seq, passage_seq, tombstone_seq", 1)
        assert before == "SAVEPOINT memors_2; " or before.endswith(
            "; RELEASE SAVEPOINT memors_2; SAVEPOINT memors_2; "
        ), message[:300]
        assert "FROM compact_marks" in reads and "FROM work_items" in reads, message[:300]


def test_a_compaction_takes_one_turn_where_scans_wait_only_for_each_other(memory, monkeypatch):
    # On PostgreSQL a namespace's scans wait only for each other: the
    # compaction's kinds are scanned in one write transaction (one turn of
    # the scan lock, each kind in a savepoint), so compactions of a busy
    # namespace queue once each and one that waited finds every kind done.
    # Turns of one kind each interleaved them: five waits a compaction,
    # each behind every other compaction's. On SQLite a scan holds off the
    # file's writers: each kind is a transaction, and they go between.
    seen = _one_more_document_compacted(memory, monkeypatch)
    if memory.store.tx.engine == "postgres":
        writes = [s for s in seen if s.startswith("BEGIN ISOLATION LEVEL READ COMMITTED")]
        assert len(writes) == 1, [w[:120] for w in writes]
        kinds = sum(len(re.findall(r"(?<!RELEASE )SAVEPOINT memors_2\b", s)) for s in seen)
        assert kinds == len(memory.kinds.names()), seen
    else:
        writes = [s for s in seen if s.startswith("BEGIN IMMEDIATE")]
        assert len(writes) == len(memory.kinds.names()) + 1, writes
    # and a compaction asked for once another scanned past what it must
    # reach scans nothing: one turn, its marks read, nothing written
    assert memory.compact(limit=0).created == 0
    seen = _compact_counted(memory, monkeypatch)
    assert not [s for s in seen if "compact_marks(" in s], seen


def test_the_namespace_is_registered_once_per_compaction(memory, monkeypatch):
    memory.remember("[[Raft]] elects a leader.", uri="doc", namespace="team")
    for namespace in ("team", "fresh"):
        seen = _compact_counted(memory, monkeypatch, namespace=namespace)
        touches = [s for s in seen if "INTO namespaces" in s]
        assert len(touches) == 1, touches
    assert {"team", "fresh"} <= set(memory.namespaces())


def test_new_items_are_looked_up_opened_and_shown_a_batch_at_a_time(memory, monkeypatch):
    # 300 pairs of copies in different documents: 300 duplicate items, more
    # than one batch. Deciding whether each is new (the last item of its
    # key), opening it, and reading its members for its payload were a few
    # statements an item, each a round trip on PostgreSQL; they are a few a
    # batch of 256.
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    words += ["india", "juliet", "kilo", "lima"]
    texts = [" ".join(f"{w}{n}" for w in words[n % 5 : n % 5 + 7]) + "." for n in range(300)]
    memory.remember_many(
        [{"text": t, "uri": f"{side}/{n}"} for n, t in enumerate(texts) for side in ("a", "b")]
    )
    seen = _compact_counted(memory, monkeypatch, kinds=["duplicate"])
    items = memory.items(kind="duplicate").items
    assert len(items) == 300
    assert all(len(i.payload["passages"]) == 2 for i in items)
    item_reads = [s for s in seen if "FROM work_items" in s]
    assert len(item_reads) < 10, len(item_reads)
    member_reads = [s for s in seen if "passages p" in s]
    assert len(member_reads) < 10, len(member_reads)
    if memory.store.tx.engine == "postgres":  # (on SQLite a statement is a call, no round trip)
        assert len([s for s in seen if "INTO work_items" in s]) == 2


def test_the_page_inputs_of_many_entities_are_read_a_batch_at_a_time(memory, monkeypatch):
    # 300 entities of three passages each: 300 page items. Each entity's live
    # passages, live facts and last page were three reads an entity, and the
    # entity as its payload shows it (its row, its other names) two; they
    # are a few a batch of 256.
    memory.remember_many(
        [
            {"text": f"[[Entity{n}]] took step {k} of its plan.", "uri": f"e{n}/{k}"}
            for n in range(300)
            for k in range(3)
        ]
    )
    memory.record_fact("Entity7", "colour", "green")
    memory.rename_entity("Entity7", "Seven")  # (its first name one of its other names)
    seen = _compact_counted(memory, monkeypatch, kinds=["page"])
    items = memory.items(kind="page").items
    assert len(items) == 300
    seven = next(i for i in items if i.payload["entity"]["name"] == "Seven")
    assert len(seven.payload["passages"]) == 3 and len(seven.payload["facts"]) == 1
    assert seven.payload["entity"]["aliases"] == ["Entity7"]
    assert seven.payload["entity"]["address"] == memory.entity("Seven").address
    assert len([s for s in seen if "JOIN mentions m" in s]) < 10
    assert len([s for s in seen if "FROM facts f" in s]) < 10
    assert len([s for s in seen if "FROM pages pg" in s]) < 10
    assert len([s for s in seen if "FROM entities e WHERE e.id" in s]) < 10
    assert len([s for s in seen if "FROM aliases a" in s]) < 10


def test_many_conflicts_of_one_subject_are_read_a_batch_at_a_time(memory, monkeypatch):
    # Forty values of one predicate about one subject disagree pairwise: 780
    # conflict items. Their facts and the passages those cite were three
    # reads a pair, and re-examining the subject's open items two a pair;
    # they are a few a batch of 256 pairs.
    memory.remember("[[Raft]] elects a leader among its nodes.", uri="raft")
    for n in range(40):
        memory.record_fact("Raft", "leader", f"n{n}")
    seen = _compact_counted(memory, monkeypatch, kinds=["conflict"])
    items = memory.items(kind="conflict", limit=1000).items
    assert len(items) == 40 * 39 // 2
    assert all(len(i.payload["facts"]) == 2 for i in items)
    fact_reads = [s for s in seen if "FROM facts f" in s]
    assert len(fact_reads) <= 8, len(fact_reads)
    # one more value: the subject's open items are examined again, at once
    memory.record_fact("Raft", "leader", "n40")
    seen = _compact_counted(memory, monkeypatch, kinds=["conflict"])
    assert len(memory.items(kind="conflict", limit=1000).items) == 41 * 40 // 2
    assert len([s for s in seen if "FROM facts f" in s]) <= 8


def test_the_kinds_of_one_compaction_read_the_change_log_once(memory, monkeypatch):
    # Every kind scanned what changed since its mark with two statements
    # of its own (the log's entities, then their canonical ids); the kinds
    # of one compaction mostly share one mark, and read the log once, the
    # entities' canonical ids in the same statement.
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"doc-{n}")
    memory.compact()
    memory.remember("[[Paxos]] agrees on one value.", uri="doc-p")
    memory.record_fact("Raft", "leader", "n1")
    seen = _compact_counted(memory, monkeypatch)
    logged = [s for s in seen if "FROM changes c" in s and not s.startswith("PREPARE")]
    assert len(logged) == 1 and "LEFT JOIN entities e ON e.id = c.entity" in logged[0], seen
    assert not [s for s in seen if "SELECT DISTINCT canonical FROM entities" in s], seen
    # and what it said reached every kind: Paxos needs no page yet, the
    # new fact refreshed Raft's page item in place
    assert {i.payload["entity"]["name"] for i in memory.items(kind="page").items} == {"Raft"}
    page = memory.items(kind="page").items[0]
    assert [f["value"] for f in page.payload["facts"]] == ["n1"]
    # the log pruned in the last kind's transaction: no transaction of its own
    # (on PostgreSQL a COMMIT may end a message: a brief read's, or a
    # kind's with its last writes, held back till then)
    commits = [s for s in seen if s.strip().split("; ")[-1] == "COMMIT"]
    # each kind's (on PostgreSQL the compaction's one turn), the look at
    # the kinds' marks (has another compaction scanned past them? in that
    # turn on PostgreSQL), the read of the clocks as the compaction was
    # asked for and the answer's read
    turns = 1 if memory.store.capabilities.scans_beside_writes else len(memory.kinds.names()) + 1
    assert len(commits) == turns + 2, [c[-60:] for c in commits]


class _Namer(Kind):
    """Gives Raft another name in its incremental scans: a change logged
    between two kinds of one compaction."""

    name = "aaa_namer"
    incremental = True

    def scan(self, ctx):
        if ctx.changes is not None:
            raft = ctx.store.entities.find("Raft", ctx.namespace)
            ctx.store.entities.add_alias(raft, ctx.namespace, "Raft protocol")
        return Scan(iter(()), set())


class _Watcher(Kind):
    """Keeps the entities each of its incremental scans was told changed."""

    name = "zzz_watcher"
    incremental = True
    told: ClassVar[list[set[str]]] = []

    def scan(self, ctx):
        if ctx.changes is not None:
            self.told.append(set(ctx.changes.entities))
        return Scan(iter(()), set())


class _Kinds:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(_Namer())
        registry.add(_Watcher())


def test_a_change_logged_between_two_kinds_reaches_the_later_one():
    # The log read once is kept by the clocks it was read at: a kind that
    # logs a change (here an alias) moves them, and the kinds after it
    # read the log again, so none misses what changed before its scan.
    with temporary_memory(plugins=[("kinds", _Kinds())]) as memory:
        memory.remember("[[Raft]] elects a leader.", uri="raft")
        memory.remember("[[Paxos]] agrees on one value.", uri="paxos")
        memory.compact()  # every kind's first scan is a full one
        memory.remember("[[Paxos]] agrees on a second value.", uri="paxos-2")
        _Watcher.told.clear()
        memory.compact()
        raft = memory.entity("Raft").address.rsplit("/", 1)[1]
        paxos = memory.entity("Paxos").address.rsplit("/", 1)[1]
        assert len(_Watcher.told) == 1
        assert {raft, paxos} <= _Watcher.told[0]


def test_a_page_items_entity_is_read_once(memory, monkeypatch):
    # The payload shows the entity and its other names: its row was read
    # twice (once again to look its aliases up).
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"doc-{n}")
    seen = _compact_counted(memory, monkeypatch, kinds=["page"])
    assert [i.payload["entity"]["name"] for i in memory.items(kind="page").items] == ["Raft"]
    reads = [s for s in seen if "FROM entities e WHERE e.id" in s and "PREPARE" not in s]
    assert len(reads) == 1, reads


def test_a_kinds_open_items_are_read_once_a_scan(memory, monkeypatch):
    # The engine reads a kind's open items to reconcile what the scan
    # finds; the conflict kind re-examines the open items of a touched
    # subject, and read them a second time. It is handed the engine's.
    memory.remember("[[Raft]] elects a leader among its nodes.", uri="raft")
    memory.record_fact("Raft", "leader", "n1")
    memory.record_fact("Raft", "leader", "n2")
    memory.compact(kinds=["conflict"])
    memory.record_fact("Raft", "leader", "n3")
    seen = _compact_counted(memory, monkeypatch, kinds=["conflict"])
    # (on PostgreSQL a message may carry several reads: each counted)
    open_reads = sum(s.count("SELECT id, key, fingerprint FROM work_items") for s in seen)
    assert open_reads == 1, seen
    # and what it re-examined is still right: three values, three pairs
    assert len(memory.items(kind="conflict").items) == 3


def test_a_kinds_last_writes_do_not_wait_for_each_other(memory, monkeypatch):
    """An item refreshed, one made obsolete, the kind's counts and its mark
    need no answer: on PostgreSQL they are held back and go with the kind's
    COMMIT, in one message, where each was a round trip."""
    from memors_core.domain.counters import WORK_ITEMS_TOTAL

    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"raft-{n}")
        gone = memory.remember(f"[[Paxos]] agrees on one value, round {n}.", uri=f"paxos-{n}")
    memory.compact()
    memory.remember("[[Raft]] keeps a replicated log.", uri="raft-3")  # Raft's item changes
    memory.forget(gone.document)  # Paxos has too few passages left for a page
    sent: list[str] = []
    if memory.store.tx.engine == "postgres":
        import psycopg

        execute = psycopg.Cursor.execute

        def noted(cur, query, *args, **kwargs):
            sent.append(str(query))
            return execute(cur, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", noted)
    memory.compact()
    monkeypatch.undo()
    (raft,) = memory.items(kind="page", status="open").items
    assert raft.payload["entity"]["name"] == "Raft" and len(raft.payload["passages"]) == 4
    (paxos,) = memory.items(kind="page", status="obsolete").items
    assert paxos.payload["entity"]["name"] == "Paxos"
    with memory.store.read() as tx:
        counted = tx.counters.read(WORK_ITEMS_TOTAL)
    assert counted[("page", "refreshed")] == 1 and counted[("page", "obsolete")] == 1
    if sent:
        # every kind's mark goes in the message that ends the kind's
        # savepoint and begins the next kind's, with its first reads (the
        # last kind's: that commits the compaction's turn), and the page
        # kind's refresh, obsolete item and counts with it
        last = [q for q in sent if "compact_marks(" in q]
        assert len(last) == len(memory.kinds.names()), [q[:60] for q in last]
        ends = [
            q.split("compact_marks(", 1)[1].split("; RELEASE SAVEPOINT memors_2; ", 1)[1][:40]
            for q in last
        ]
        assert ends[-1] == "COMMIT", ends
        for end in ends[:-1]:  # (the next kind's savepoint, then its first read)
            assert end.startswith(("SAVEPOINT memors_2; SELECT", "SAVEPOINT memors_2; EXECUTE")), (
                end
            )
        (page,) = [q for q in last if "'page'" in q.split("compact_marks(", 1)[1][:200]]
        assert page.count("UPDATE work_items") == 2 and "INTO counter" in page


def test_many_stale_pages_are_read_a_batch_at_a_time(memory, monkeypatch):
    # Forty entities with a page each, every one then given two more
    # passages: forty stale items. Each page's entity was read three times
    # (for what changed, for its inputs, for its payload) and the state of
    # each passage it cites once; the entities are read a few times a batch
    # of 256, a page's sources' states together.
    from memors_core.testing.storage_contract.helpers import write_page

    cited: dict[str, list[str]] = {}
    for n in range(40):
        for k in range(3):
            done = memory.remember(f"[[Entity{n}]] took step {k} of its plan.", uri=f"e{n}/{k}")
            cited.setdefault(f"Entity{n}", []).append(done.passages[0].rsplit("/", 1)[1])
    for name, passages in cited.items():
        write_page(memory.store, name, f"{name} took its steps.", passages)
    memory.compact()
    memory.remember_many(
        [
            {"text": f"[[Entity{n}]] took step {k} of its plan.", "uri": f"e{n}/{k}"}
            for n in range(40)
            for k in range(3, 5)
        ]
    )
    seen = _compact_counted(memory, monkeypatch, kinds=["stale"])
    items = memory.items(kind="stale").items
    assert len(items) == 40
    seven = next(i for i in items if i.payload["entity"]["name"] == "Entity7")
    assert len(seven.payload["passages"]) == 5
    assert [c["change"] for c in seven.payload["changes"]] == ["new", "new"]
    assert len([s for s in seen if "FROM entities e WHERE e.id" in s]) < 10
    assert not [s for s in seen if "SELECT state FROM tombstones WHERE target" in s]


def test_a_compaction_asked_for_its_count_reads_it_in_one_message(memory, monkeypatch):
    # ``compact(limit=0)`` (the count of open items, no items) ends with one
    # read of one statement: on PostgreSQL its begin, count and end go
    # together, one round trip where they were two.
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"doc-{n}")
    seen = _compact_counted(memory, monkeypatch, limit=0)
    assert memory.compact(limit=0).open == 1
    counts = [s for s in seen if "COUNT(*) FROM work_items" in s]
    assert len(counts) == 1, counts
    if memory.store.tx.engine == "postgres":
        assert counts[0].startswith("BEGIN") and counts[0].endswith("COMMIT"), counts
        assert seen[-1] == counts[0]


def test_a_kinds_mark_and_open_items_are_read_in_one_message(memory, monkeypatch):
    # A kind's scan begins with reads that need nothing of each other:
    # its scan mark and its open items. On PostgreSQL they go in one
    # message (they were round trips of their own); on SQLite they are
    # calls, as before.
    seen = _one_more_document_compacted(memory, monkeypatch)
    mark = "SELECT change_seq, passage_seq, tombstone_seq FROM compact_marks"
    open_keys = "SELECT id, key, fingerprint FROM work_items"
    kinds = memory.kinds.names()
    # (each kind's mark read twice: all of them at once as the compaction
    # looks for what is left to scan, then each as its kind's scan begins)
    assert sum(s.count(mark) for s in seen) == 2 * len(kinds)
    assert sum(s.count(open_keys) for s in seen) == len(kinds)
    if memory.store.tx.engine == "postgres":
        together = [s for s in seen if mark in s]
        assert max(s.count(mark) for s in together) == len(kinds), together
        assert sum(open_keys in s for s in together) == len(kinds), together
    assert len(memory.items(kind="page").items) == 1  # Raft's page, still open


def test_a_compaction_asked_for_after_another_scanned_everything_scans_nothing(memory, monkeypatch):
    # The clocks as a compaction is asked for say what it must scan: every
    # kind whose mark reached them (here the compaction just before; under
    # many writers, one it waited for) has nothing to scan. A full one
    # scans all the same, and one asked for after a change scans again.
    for n in range(3):
        memory.remember(f"[[Raft]] elects a leader, round {n}.", uri=f"raft-{n}")
    first = memory.compact()
    open_keys = "SELECT id, key, fingerprint FROM work_items"
    kinds = memory.kinds.names()
    seen = _compact_counted(memory, monkeypatch)
    assert not [s for s in seen if open_keys in s]
    assert memory.compact(limit=0).open == first.open
    seen = _compact_counted(memory, monkeypatch, full=True)
    assert sum(s.count(open_keys) for s in seen) == len(kinds)
    memory.remember("[[Raft]] elects a leader, one more round.", uri="raft-more")
    seen = _compact_counted(memory, monkeypatch)
    assert sum(s.count(open_keys) for s in seen) == len(kinds)
    page = memory.items(kind="page").items[0]
    assert len(page.payload["passages"]) == 4  # the new passage reached the page item
