"""Writers of different namespaces never wait for each other on PostgreSQL;
writers of one namespace that only add (a document at a new uri, a fact)
run together, the others take turns, and incremental compaction under
concurrent writers of many namespaces finds what a full rescan finds.

No timing: a short busy timeout turns any wait for another writer's lock
into the ``busy`` error, so "did not wait" is "did not fail".
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import psycopg
import pytest

from memors_core import hookimpl
from memors_core.errors import StoreBusy
from memors_core.memory import Memory
from memors_core.plugins.kinds import Kind, Scan
from memors_core.plugins.manager import build_plugin_manager
from memors_core.storage.postgres.locks import (
    ENTITY_SPACE,
    URI_SPACE,
    WRITING_SPACE,
    namespace_key,
    uri_key,
)
from memors_core.testing import passages_about

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORS_BUSY_TIMEOUT_MS", "400")


@pytest.fixture
def two(postgres_url: str, short_wait: None) -> Iterator[tuple[Memory, Memory]]:
    with Memory.open(postgres_url) as first, Memory.open(postgres_url) as second:
        for namespace in ("alpha", "beta"):
            for i, text in enumerate(passages_about("Raft", 4, topic=namespace)):
                first.remember(text, uri=f"{namespace}/{i}", namespace=namespace)
        yield first, second


def test_a_write_in_one_namespace_does_not_wait_for_an_open_one_in_another(
    two: tuple[Memory, Memory],
) -> None:
    holder, other = two
    # The holder's transaction stays open in "alpha": it remembered, compacted
    # (work items created, counters bumped) and recorded a fact there.
    with holder.store.write(namespace="alpha"):
        holder.remember("[[Raft]] alpha's open write.", uri="alpha/open", namespace="alpha")
        assert holder.compact(namespace="alpha").created
        holder.record_fact("Raft", "terms", "alpha", namespace="alpha")

        # Another process's writes in "beta" complete meanwhile, counters included.
        done = other.remember("[[Raft]] beta's write.", uri="beta/new", namespace="beta")
        beta = other.compact(namespace="beta")
        assert beta.created
        item = beta.items[0]
        text = "\n".join(
            p["text"].replace("[[", "").replace("]]", "") for p in item.payload["passages"][:3]
        )
        assert other.submit(item.id, content=text, title="Raft", namespace="beta").stored
        other.record_fact("Raft", "terms", "beta", namespace="beta")
        other.forget(done.document, namespace="beta")

        # A writer of "alpha" itself, or of the whole store, still takes its turn.
        with pytest.raises(StoreBusy):
            other.remember("[[Raft]] alpha waits.", uri="alpha/late", namespace="alpha")
        with pytest.raises(StoreBusy), other.store.write():
            pass
    other.remember("[[Raft]] alpha's turn came.", uri="alpha/late", namespace="alpha")
    with other.store.read() as tx:
        for uri in ("alpha/open", "alpha/late"):
            assert tx.documents.latest_by_uri("alpha", uri) is not None
        counted = tx.counters.read("memors_store_work_items_total")
    assert other.get(done.document, namespace="beta").status == "forgotten"
    # the counters of both namespaces' compactions add up
    assert counted[("page", "created")] == len(
        holder.items(kind="page", namespace="alpha").items
    ) + len(other.items(kind="page", namespace="beta").items)
    assert counted[("page", "done")] == 1


NAMESPACES = ("ns0", "ns1", "ns2")


def _writer(url: str, namespace: str, rounds: int, errors: list[BaseException]) -> None:
    try:
        with Memory.open(url) as memory:
            for n in range(rounds):
                texts = passages_about(f"Topic {n % 3}", 2, topic=f"{namespace} round {n}")
                out = memory.remember(
                    "\n\n".join(texts), uri=f"{namespace}/{n}", namespace=namespace
                )
                if n % 4 == 3:
                    memory.forget(out.passages[0], namespace=namespace)
                if n % 5 == 4:
                    memory.record_fact(f"Topic {n % 3}", f"p{n}", f"v{n}", namespace=namespace)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def _compactor(url: str, rounds: int, errors: list[BaseException]) -> None:
    try:
        with Memory.open(url) as memory:
            for n in range(rounds):
                memory.compact(limit=0, namespace=NAMESPACES[n % len(NAMESPACES)])
    except BaseException as exc:
        errors.append(exc)


def _compacting(memory: Memory, errors: list[BaseException], **kwargs) -> threading.Thread:
    """A thread (not started) compacting with ``kwargs``; what it raises goes to ``errors``."""

    def compact() -> None:
        try:
            memory.compact(**kwargs)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    return threading.Thread(target=compact)


def _open_items(memory: Memory, namespace: str) -> dict[int, str]:
    return {i.id: i.fingerprint for i in memory.items(status="open", namespace=namespace).items}


def test_incremental_compaction_equals_a_full_one_under_writers_of_many_namespaces(
    postgres_url: str,
) -> None:
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_writer, args=(postgres_url, ns, 16, errors))
        for ns in NAMESPACES
        for _ in range(2)  # two writers per namespace, of the same uris and entities
    ]
    threads += [threading.Thread(target=_compactor, args=(postgres_url, 30, errors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Memory.open(postgres_url) as memory:
        for namespace in NAMESPACES:
            memory.compact(limit=0, namespace=namespace)
            incremental = _open_items(memory, namespace)
            assert incremental, namespace
            memory.compact(limit=0, namespace=namespace, full=True)
            assert _open_items(memory, namespace) == incremental, namespace


class _Paused(Kind):
    """A kind whose scan waits until the test lets it go on: a compaction
    caught part-way through its scan."""

    name = "paused"
    incremental = True

    def __init__(self) -> None:
        self.scanning = threading.Event()
        self.go_on = threading.Event()

    def scan(self, ctx):
        self.scanning.set()
        assert self.go_on.wait(600), "the test never let the scan go on"  # (a hang guard)
        return Scan(iter(()), set())


class _PausedKinds:
    def __init__(self, kind: _Paused) -> None:
        self.kind = kind

    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(self.kind)


@contextlib.contextmanager
def _scan_paused(url: str, kinds: list[str], namespace: str) -> Iterator[None]:
    """A compaction of ``kinds`` (the last ``paused``) in another process,
    caught in its paused kind's scan while the block runs; it must end
    without an error once let go on."""
    kind = _Paused()
    pm = build_plugin_manager(plugins=[("paused", _PausedKinds(kind))])
    with Memory.open(url, plugin_manager=pm) as scanner:
        errors: list[BaseException] = []
        thread = _compacting(scanner, errors, kinds=kinds, namespace=namespace)
        thread.start()
        try:
            assert kind.scanning.wait(600), errors  # (a hang guard)
            yield
        finally:
            kind.go_on.set()
            thread.join()
        assert errors == []


def test_remembering_never_waits_for_a_compaction_of_its_namespace(
    postgres_url: str, short_wait: None
) -> None:
    # A compaction's scan takes turns with the namespace's other scans and
    # with the writes that decide items (a submit), not with what is
    # remembered, recorded or forgotten meanwhile: those take the
    # namespace's turn alone, and a scan reads its clocks when none is
    # under way. Before, every write of the namespace waited for the scan.
    with Memory.open(postgres_url) as other:
        for i, text in enumerate(passages_about("Raft", 4, topic="alpha")):
            other.remember(text, uri=f"alpha/{i}", namespace="alpha")
        compacted = other.compact(namespace="alpha")
        item = compacted.items[0]
        with _scan_paused(postgres_url, ["paused"], "alpha"):
            # the scan is under way, its transaction open: content goes on
            done = other.remember(
                "[[Raft]] alpha, during the scan.", uri="alpha/during", namespace="alpha"
            )
            other.record_fact("Raft", "terms", "during", namespace="alpha")
            other.forget(done.passages[0], namespace="alpha")
            # another compaction of the namespace, and a decision, take turns
            with pytest.raises(StoreBusy):
                other.compact(namespace="alpha")
            with pytest.raises(StoreBusy):
                other.submit(item.id, skip=True, reason="later", namespace="alpha")
        assert other.get(done.passages[0], namespace="alpha").status == "forgotten"
        assert [f.value for f in other.facts("Raft", namespace="alpha").facts] == ["during"]


def _waiting_for_the_writer_under_way(admin: psycopg.Connection, namespace: str) -> bool:
    """Whether a session waits for the lock ``namespace``'s writer under way holds."""
    return bool(
        admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s AND objid = %s",
            (WRITING_SPACE, namespace_key(namespace) & 0xFFFFFFFF),
        ).fetchone()[0]
    )


def test_a_scan_waits_for_the_write_under_way_and_its_mark_skips_nothing(
    postgres_url: str,
) -> None:
    # A write of "alpha" is under way: its passages have numbers, not
    # committed yet, below those of a write of "beta" committed since. A
    # compaction of "alpha" then must not take its mark from the clocks as
    # they read (past the unseen passages, which no later incremental scan
    # would read again): it waits for that write, and no longer.
    with (
        Memory.open(postgres_url) as holder,
        Memory.open(postgres_url) as other,
        Memory.open(postgres_url) as compactor,
        psycopg.connect(postgres_url, autocommit=True) as admin,
    ):
        other.remember("[[Paxos]] alpha's first note.", uri="alpha/first", namespace="alpha")
        compactor.compact(namespace="alpha")  # every kind has its mark
        errors: list[BaseException] = []
        thread = _compacting(compactor, errors, namespace="alpha")
        with holder.store.write(namespace="alpha", role="content"):
            for i, text in enumerate(passages_about("Zab", 4, topic="held")):
                holder.remember(text, uri=f"alpha/zab-{i}", namespace="alpha")
            other.remember("[[Chord]] beta's note, committed first.", uri="b", namespace="beta")
            thread.start()
            while thread.is_alive() and not _waiting_for_the_writer_under_way(admin, "alpha"):
                thread.join(0.01)
            assert thread.is_alive(), "the compaction did not wait for the write under way"
        thread.join()
        assert errors == []
        # the held write's entity has its page item, now and after a full rescan
        zab = {
            i.id
            for i in compactor.items(kind="page", namespace="alpha").items
            if i.payload["entity"]["name"] == "Zab"
        }
        assert zab
        incremental = _open_items(compactor, "alpha")
        compactor.compact(limit=0, namespace="alpha", full=True)
        assert _open_items(compactor, "alpha") == incremental


def test_a_savepoint_takes_no_more_of_a_namespace_than_its_transaction(
    postgres_url: str,
) -> None:
    with Memory.open(postgres_url) as memory, memory.store.write(namespace="alpha", role="content"):
        with (
            pytest.raises(ValueError, match="inside a write of role 'content'"),
            memory.store.write(namespace="alpha"),
        ):
            pass
        with memory.store.write(namespace="alpha", role="content") as tx:
            tx.namespaces.touch("alpha")


def test_a_duplicate_scan_indexes_what_a_write_begun_during_it_commits(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write of "alpha" begins while the duplicate kind scans "alpha"
    # (scans run beside writes): its passage has a number, not committed,
    # below that of a write of "beta" committed since. The kind's own clock
    # (how far "alpha" is indexed) must not pass that passage: taken from
    # the clocks as they then read, the passage was never indexed and a
    # near copy of it remembered later was never found to be one.
    from memors_kinds.duplicate.postgres_index import PostgresPrefixIndex

    licence = (
        "Permission is hereby granted, free of charge, to any person obtaining a copy "
        "of this software to deal in the software without restriction."
    )
    near = licence.replace("without restriction.", "without any restriction.")
    reached, go_on = threading.Event(), threading.Event()
    indexed = PostgresPrefixIndex.indexed

    def paused(self, namespace):  # the scan caught past its clocks, before its own
        if not reached.is_set():
            reached.set()
            assert go_on.wait(600), "the test never let the scan go on"  # (a hang guard)
        return indexed(self, namespace)

    with (
        Memory.open(postgres_url) as holder,
        Memory.open(postgres_url) as other,
        Memory.open(postgres_url) as compactor,
    ):
        other.remember("[[Paxos]] alpha's first note, long enough.", uri="a0", namespace="alpha")
        compactor.compact(namespace="alpha")  # the kind has indexed "alpha"
        other.remember("[[Paxos]] alpha's second note, to scan.", uri="a1", namespace="alpha")
        errors: list[BaseException] = []
        monkeypatch.setattr(PostgresPrefixIndex, "indexed", paused)
        thread = _compacting(compactor, errors, kinds=["duplicate"], namespace="alpha")
        thread.start()
        try:
            assert reached.wait(600), errors  # (a hang guard)
            with holder.store.write(namespace="alpha", role="content"):
                holder.remember(licence, uri="licence", namespace="alpha")
                other.remember("[[Chord]] beta's note, committed first.", uri="b", namespace="beta")
                go_on.set()
                thread.join()  # (the scan never waits for a write begun after its clocks)
        finally:
            go_on.set()
            thread.join()
        monkeypatch.undo()
        assert errors == []
        other.remember(near, uri="near", namespace="alpha")
        found = compactor.compact(kinds=["duplicate"], namespace="alpha").items
        assert [len(i.payload["passages"]) for i in found] == [2]
        compactor.compact(kinds=["duplicate"], namespace="alpha", full=True)
        assert len(compactor.items(kind="duplicate", namespace="alpha").items) == 1


def _waiting_for(admin: psycopg.Connection, space: int, key: int) -> bool:
    """Whether a session waits for the advisory lock ``(space, key)``."""
    return bool(
        admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s AND objid = %s",
            (space, key & 0xFFFFFFFF),
        ).fetchone()[0]
    )


def test_writes_that_only_add_to_a_namespace_run_together(two: tuple[Memory, Memory]) -> None:
    holder, other = two
    alpha = other.documents(namespace="alpha").documents[0]
    # The holder's write only adds to "alpha" (a document at a new uri
    # naming a new entity, a fact), its transaction open.
    with holder.store.write(namespace="alpha", role="add"):
        holder.remember("[[Gossip]] spreads news.", uri="alpha/open", namespace="alpha")
        holder.record_fact("Raft", "terms", "held", namespace="alpha")

        # Another process's writes that only add go on beside it.
        beside = other.remember("[[Raft]] beside it.", uri="alpha/beside", namespace="alpha")
        other.remember("[[Raft]] with no uri.", namespace="alpha")
        other.record_fact("Raft", "terms", "beside", namespace="alpha")

        # The uri it claimed, the entities it makes, a new version of a
        # document, a forget and a compaction's clocks wait for it.
        with pytest.raises(StoreBusy):
            other.remember("[[Raft]] the same uri.", uri="alpha/open", namespace="alpha")
        with pytest.raises(StoreBusy):
            other.remember("[[Chord]] a new entity.", uri="alpha/chord", namespace="alpha")
        with pytest.raises(StoreBusy):
            other.remember("[[Raft]] a new version.", uri=alpha.uri, namespace="alpha")
        with pytest.raises(StoreBusy):
            other.forget(beside.document, namespace="alpha")
        with pytest.raises(StoreBusy):
            other.compact(namespace="alpha")
    again = other.remember("[[Raft]] the same uri, later.", uri="alpha/open", namespace="alpha")
    assert other.get(again.document, namespace="alpha").version == 2
    assert sorted(f.value for f in other.facts("Raft", namespace="alpha").facts) == [
        "beside",
        "held",
    ]
    newer = other.remember("[[Raft]] a new version.", uri=alpha.uri, namespace="alpha")
    assert other.get(newer.document, namespace="alpha").version == 2
    assert [e.name for e in other.entities(namespace="alpha").entities] == ["Gossip", "Raft"]


def _remembered_while_an_add_holds(
    url: str, mine: tuple[str, str], theirs: tuple[str, str], lock: tuple[int, int]
) -> tuple[Memory, str]:
    """``mine`` (text, uri) remembered in "alpha" by a write of role
    ``add`` held open while another process remembers ``theirs``, which
    must wait for the advisory ``lock`` (space, key) until the first
    commits, then succeed. The other's store (open) and mine's document."""
    with (
        Memory.open(url) as holder,
        psycopg.connect(url, autocommit=True) as admin,
        contextlib.ExitStack() as stack,
    ):
        other = Memory.open(url)
        stack.callback(other.close)  # (closed here only if what follows fails)
        other.remember("[[Raft]] elects a leader.", uri="first", namespace="alpha")
        errors: list[BaseException] = []

        def remember() -> None:
            try:
                other.remember(theirs[0], uri=theirs[1], namespace="alpha")
            except BaseException as exc:  # reported by the test
                errors.append(exc)

        thread = threading.Thread(target=remember)
        with holder.store.write(namespace="alpha", role="add"):
            done = holder.remember(mine[0], uri=mine[1], namespace="alpha")
            thread.start()
            while thread.is_alive() and not _waiting_for(admin, *lock):
                thread.join(0.01)
            assert thread.is_alive(), errors  # it waits for what the first makes
        thread.join()
        assert errors == []
        stack.pop_all()
    return other, done.document


def test_two_writes_naming_one_new_entity_make_it_once(postgres_url: str) -> None:
    other, _mine = _remembered_while_an_add_holds(
        postgres_url,
        ("[[Zab]] recovers a leader.", "mine"),
        ("[[Zab]] orders a broadcast.", "theirs"),
        (ENTITY_SPACE, namespace_key("alpha")),
    )
    with other:
        names = [e.name for e in other.entities(namespace="alpha").entities]
        assert sorted(names) == ["Raft", "Zab"]
        assert len(other.entity("Zab", namespace="alpha").passages) == 2


def test_two_writes_of_one_new_uri_make_one_document(postgres_url: str) -> None:
    other, mine = _remembered_while_an_add_holds(
        postgres_url,
        ("My text of the note.", "note"),
        ("Their text of the note.", "note"),
        (URI_SPACE, uri_key("alpha", "note")),
    )
    with other:
        listed = other.documents(namespace="alpha").documents
        assert sorted((d.uri, d.version) for d in listed) == [("first", 1), ("note", 2)]
        assert other.get(mine, namespace="alpha").version == 2


def test_a_write_that_only_adds_takes_no_more_of_its_namespace(postgres_url: str) -> None:
    with Memory.open(postgres_url) as memory:
        with memory.store.write(namespace="alpha", role="add"):
            for role in ("content", "all", "scan"):
                with (
                    pytest.raises(ValueError, match="inside a write of role 'add'"),
                    memory.store.write(namespace="alpha", role=role),
                ):
                    pass
            with memory.store.write(namespace="alpha", role="add") as tx:
                tx.namespaces.touch("alpha")
        for role in ("content", "all"):
            with (
                memory.store.write(namespace="alpha", role=role),
                memory.store.write(namespace="alpha", role="add") as tx,
            ):
                tx.namespaces.touch("alpha")
        with (
            memory.store.write(namespace="alpha", role="scan"),
            pytest.raises(ValueError, match="of role 'add' inside a write of role 'scan'"),
            memory.store.write(namespace="alpha", role="add"),
        ):
            pass


def test_a_write_making_a_namespace_never_waits_for_its_compaction(
    postgres_url: str, short_wait: None
) -> None:
    # A compaction of a namespace no row names yet lists it with its last
    # kind's write. Listed with its first, the row waited uncommitted while
    # its later kinds waited for the namespace's writers under way: a
    # writer adding the namespace's first rows then waited for that row,
    # and the compaction for the writer.
    with (
        Memory.open(postgres_url) as other,
        _scan_paused(postgres_url, ["stale", "paused"], "fresh"),
    ):
        other.remember("[[Raft]] the namespace's first note.", uri="n", namespace="fresh")
        other.record_fact("Raft", "terms", "first", namespace="fresh")
    with Memory.open(postgres_url) as other:
        assert "fresh" in other.namespaces()
