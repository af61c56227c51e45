"""Writers of different namespaces never wait for each other on PostgreSQL;
writers of one namespace take turns, and incremental compaction under
concurrent writers of many namespaces finds what a full rescan finds.

No timing: a short busy timeout turns any wait for another writer's lock
into the ``busy`` error, so "did not wait" is "did not fail".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from memors_core.errors import StoreBusy
from memors_core.memory import Memory
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


def _open_items(memory: Memory, namespace: str) -> dict[int, str]:
    return {i.id: i.fingerprint for i in memory.items(status="open", namespace=namespace).items}


def test_incremental_compaction_equals_a_full_one_under_writers_of_many_namespaces(
    postgres_url: str,
) -> None:
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_writer, args=(postgres_url, ns, 16, errors))
        for ns in NAMESPACES
        for _ in range(2)  # two writers per namespace: they take turns
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
