"""The storage contract: behaviour every storage engine keeps, as pytest tests.

The tests talk to a :class:`memors_core.storage.api.Storage` through the
protocol only (no SQL, no engine internals), so one suite checks every
engine. An engine's test module runs it by naming how its store is opened::

    from memors_core.testing.storage_contract import SqliteStorage, StorageContract

    class TestSqliteContract(SqliteStorage, StorageContract):
        pass

A new engine writes its own opener, a :class:`StorageFixtures` with
:meth:`~StorageFixtures.make_storage` (or, when its stores need set-up and
tear-down beyond ``close``, its own ``open_storage`` fixture)::

    class PostgresStorage(StorageFixtures):
        def make_storage(self, where, name, *, readonly=False):
            return PgStore.open(dsn_for(where, name), readonly=readonly)

Guarantees beyond the protocol are tested only where the engine declares
them in :class:`~memors_core.storage.api.Capabilities`; the others skip.

The same openers serve any other suite written against ``storage`` — a
kind's own index, say: write it as a class of tests taking the ``storage``
(or ``open_storage``) fixture, and run it on an engine by mixing that
engine's opener in, as above (``class TestMyIndexOnSqlite(SqliteStorage,
MyIndexContract)``).

Add ``pytest_plugins = ["memors_core.testing"]`` to the ``conftest.py``
so pytest rewrites the suite's asserts into readable failures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memors_core.domain import text
from memors_core.domain.counters import PAGES_MARKED_STALE
from memors_core.domain.dates import normalise, now
from memors_core.domain.ids import address, uuid7
from memors_core.domain.rows import Document, DocumentVersion, NewPassage, ScanMark
from memors_core.domain.rules import PAGE_MIN_PASSAGES, STALE_NEW_PASSAGES
from memors_core.domain.search import SearchQuery, idf, query_words
from memors_core.errors import BadInput, MemorsError, NotFound, PluginError
from memors_core.storage.api import Storage, Tx

__all__ = [
    "NS",
    "OTHER_NS",
    "Opener",
    "PgvectorStorage",
    "SqliteStorage",
    "StorageContract",
    "StorageFixtures",
    "VectorContract",
    "add_document",
    "add_passage",
    "forget",
    "remember",
    "write_page",
]

NS = "default"
OTHER_NS = "elsewhere"

#: ``open_storage(name="store", *, readonly=False)``: a new connection to
#: the test's store ``name`` (the same name, the same store).
Opener = Callable[..., Storage]


class StorageFixtures:
    """The fixtures a storage suite uses, from one method an engine overrides.

    ``open_storage(name="store", *, readonly=False)`` opens a new
    connection to one of the test's stores: calls with the same ``name``
    reach the same store (two connections to it, as two processes would
    have), another ``name`` an empty store of its own. ``storage`` is the
    first connection to ``"store"``. Every connection is closed after the test.
    """

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        """Open a connection to the store ``name`` of the test whose own
        empty directory is ``where`` (creating the store if it is new)."""
        raise NotImplementedError(f"{type(self).__name__} must say how to open its engine's store")

    def open_backup(self, path: Path) -> Storage:
        """Open the store :meth:`Storage.backup` wrote at ``path`` (the
        backup tests skip while this is not overridden)."""
        pytest.skip(f"{type(self).__name__} does not say how to open a backup")

    @pytest.fixture
    def open_storage(self, tmp_path: Path) -> Iterator[Opener]:
        opened: list[Storage] = []

        def open_(name: str = "store", *, readonly: bool = False) -> Storage:
            storage = self.make_storage(tmp_path, name, readonly=readonly)
            opened.append(storage)
            return storage

        yield open_
        for storage in reversed(opened):
            storage.close()

    @pytest.fixture
    def storage(self, open_storage: Opener) -> Storage:
        return open_storage()


class SqliteStorage(StorageFixtures):
    """The SQLite engine's opener: one database file per store name."""

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        from memors_core.storage.sqlite.connection import Store

        return Store.open(where / f"{name}.db", readonly=readonly)

    def open_backup(self, path: Path) -> Storage:
        from memors_core.storage.sqlite.connection import Store

        return Store.open(path, readonly=True)


class PostgresStorage(StorageFixtures):
    """The PostgreSQL engine's opener: one fresh database per store name,
    cloned from a migrated template (:mod:`memors_core.testing.postgres`),
    dropped after the test. Skips when no test server answers, unless
    ``MEMORS_REQUIRE_POSTGRES`` is set (``make test`` sets it)."""

    def server(self) -> Any:
        """The module whose ``new_database()`` and ``drop_database(url)``
        serve this opener, once its server answers (else skip or fail)."""
        from memors_core.testing import postgres

        postgres.require_server()
        return postgres

    @pytest.fixture(autouse=True)
    def _postgres_databases(self) -> Iterator[None]:
        self._server = self.server()
        self._databases: dict[str, str] = {}
        yield
        for url in self._databases.values():
            self._server.drop_database(url)

    def make_storage(self, where: Path, name: str, *, readonly: bool = False) -> Storage:
        from memors_core.storage.postgres.connection import PgStore

        if name not in self._databases:
            self._databases[name] = self._server.new_database()
        return PgStore.open(self._databases[name], readonly=readonly)

    def open_backup(self, path: Path) -> Storage:
        # A PostgreSQL store's backup is a memors SQLite file.
        from memors_core.storage.sqlite.connection import Store

        return Store.open(path, readonly=True)


class PgvectorStorage(PostgresStorage):
    """PostgreSQL with pgvector: fresh databases on a server of this test
    process's own (:mod:`memors_core.testing.pgvector`), for the tests of
    vectors on PostgreSQL. Skips when that server cannot be had, unless
    ``CI`` is set (then it fails)."""

    def server(self) -> Any:
        from memors_core.testing import pgvector

        pgvector.require_server()
        return pgvector


# --- helpers: storing rows through the protocol ---------------------------------------


def add_document(
    tx: Tx, passages: list[str], namespace: str = NS, uri: str | None = None
) -> tuple[str, list[str]]:
    """Store a one-version document with these passages; (document id, passage ids)."""
    tx.namespaces.touch(namespace)
    document = uuid7()
    stamp = now()
    tx.documents.insert(Document(document, namespace, uri, stamp))
    tx.documents.add_version(
        DocumentVersion(document, 1, text.content_hash("\n\n".join(passages)), None, {}, stamp)
    )
    return document, [
        add_passage(tx, document, 1, position, body, namespace)
        for position, body in enumerate(passages)
    ]


def add_passage(
    tx: Tx, document: str, version: int, position: int, body: str, namespace: str = NS
) -> str:
    ident = uuid7()
    shingles = text.pack_shingles(text.shingle_hashes(body))
    tx.passages.insert(
        namespace,
        NewPassage(ident, document, version, position, body, text.content_hash(body), shingles),
        now(),
    )
    return ident


def remember(storage: Storage, body: str, *, about: str | None = None, namespace: str = NS) -> str:
    """One passage in a document of its own (mentioning the entity ``about``); its id."""
    with storage.write() as tx:
        _, [passage] = add_document(tx, [body], namespace)
        if about is not None:
            tx.passages.mention(passage, [tx.entities.ensure(about, namespace)[0]])
    return passage


def words(query: str, *entities: str) -> SearchQuery:
    """A search for the words of ``query`` (by memors' query rules) and the
    canonical entities ``entities``."""
    return SearchQuery(tuple(query_words(query)), entities)


def forget(storage: Storage, kind: str, ident: str, namespace: str = NS) -> bool:
    with storage.write() as tx:
        return tx.tombstones.add(namespace, kind, ident, "forgotten", "a test forgot it")


def write_page(
    storage: Storage,
    entity: str,
    content: str,
    cites: list[str],
    namespace: str = NS,
    item: int | None = None,
    *,
    sentences: list[tuple[str, list[str]]] = (),  # type: ignore[assignment]
    facts: list[str] = (),  # type: ignore[assignment]
) -> str:
    """A new version of the entity's page citing these passages (written for
    the work item ``item``), with its checked ``sentences`` (each with the
    addresses it cites) and built with the ``facts`` (ids); its id."""
    with storage.write() as tx:
        canonical = tx.entities.ensure(entity, namespace)[0]
        previous = tx.pages.current(canonical)
        written = tx.pages.write(
            namespace,
            canonical,
            entity,
            content,
            [address("passage", p) for p in cites],
            previous,
            item,
            {},
            sentences=sentences,
            facts=[address("fact", f) for f in facts],
        )
    return written.rsplit("/", 1)[1]


def instant(day: str) -> str:
    """A day as the sortable timestamp search and rules are given (``as_of``, ``now_ts``)."""
    stamp = normalise(day, "day")
    assert stamp is not None
    return stamp


class Boom(Exception):
    """Raised inside a transaction to make it fail."""


# --- the contract ------------------------------------------------------------------------


def unit_vector(seed: int | list[float]) -> bytes:
    """A unit vector of :data:`memors_core.semantic.DIMENSIONS` float32
    numbers (bytes, as stores keep them): random for a seed, or the given
    leading numbers padded with zeros."""
    import numpy as np

    from memors_core.semantic import DIMENSIONS

    if isinstance(seed, int):
        v = np.random.default_rng(seed).standard_normal(DIMENSIONS)
    else:
        v = np.zeros(DIMENSIONS)
        v[: len(seed)] = seed
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


def cosine(a: bytes, b: bytes) -> float:
    import numpy as np

    return float(np.frombuffer(a, dtype="<f4") @ np.frombuffer(b, dtype="<f4"))


class VectorContract(StorageFixtures):
    """Passages' vectors (:class:`memors_core.storage.api.Vectors`,
    :meth:`~memors_core.storage.api.Search.passages_like`), where the engine
    declares ``Capabilities.vectors``; the vectors are made up, no model runs."""

    @pytest.fixture
    def vectored(self, storage: Storage) -> Storage:
        """``storage``, where it keeps vectors (else the test skips, saying why)."""
        if not storage.capabilities.vectors:
            pytest.skip(f"this store keeps no vectors: {storage.capabilities.vectors_missing}")
        return storage

    def test_a_live_passage_gets_one_vector(self, vectored: Storage) -> None:
        storage = vectored
        p = remember(storage, "Raft elects a leader.")
        with storage.write() as tx:
            assert tx.vectors.add(NS, [(p, unit_vector(1))]) == 1
            assert tx.vectors.add(NS, [(p, unit_vector(2))]) == 0  # it has one
            assert tx.vectors.add(OTHER_NS, [(p, unit_vector(3))]) == 0  # not that namespace's
            assert tx.vectors.add(NS, [(uuid7(), unit_vector(4))]) == 0  # no such passage
            with pytest.raises(MemorsError, match="bytes"):
                tx.vectors.add(NS, [(p, b"\0" * 12)])
        with storage.read() as tx:
            assert tx.vectors.count(NS) == 1
            assert tx.vectors.count(OTHER_NS) == 0
            [hit] = tx.search.passages_like(NS, unit_vector(1), 5).rows
        assert hit.address == address("passage", p)
        assert hit.score == pytest.approx(1.0, abs=1e-5)  # the first vector stayed

    def test_the_passages_without_vectors_are_listed_in_clock_order(
        self, vectored: Storage
    ) -> None:
        storage = vectored
        ids = [remember(storage, f"passage number {n}") for n in range(5)]
        forget(storage, "passage", ids[3])
        with storage.write() as tx:
            tx.vectors.add(NS, [(ids[1], unit_vector(1))])
        with storage.read() as tx:
            missing = tx.vectors.missing(NS, 0, 10)
            assert [m[1] for m in missing] == [ids[0], ids[2], ids[4]]
            assert [m[2] for m in missing] == [
                "passage number 0",
                "passage number 2",
                "passage number 4",
            ]
            assert [m[1] for m in tx.vectors.missing(NS, missing[0][0], 1)] == [ids[2]]
            assert tx.vectors.missing_count(NS) == 3
            assert tx.vectors.missing_count(OTHER_NS) == 0

    def test_a_forgotten_or_erased_passage_loses_its_vector(self, vectored: Storage) -> None:
        storage = vectored
        kept = remember(storage, "kept")
        forgotten = remember(storage, "forgotten")
        erased = remember(storage, "erased")
        with storage.write() as tx:
            tx.vectors.add(
                NS, [(p, unit_vector(n)) for n, p in enumerate((kept, forgotten, erased))]
            )
        forget(storage, "passage", forgotten)
        with storage.write() as tx:  # a forgotten passage gets none again
            assert tx.vectors.add(NS, [(forgotten, unit_vector(9))]) == 0
        with storage.erasing() as tx:
            tx.purges.erase_passage(erased)
        with storage.read() as tx:
            assert tx.vectors.count(NS) == 1
            assert tx.vectors.missing_count(NS) == 0
            found = tx.search.passages_like(NS, unit_vector(1), 10).rows
        assert [h.address for h in found] == [address("passage", kept)]

    def test_passages_rank_by_exact_cosine_in_their_namespace(self, vectored: Storage) -> None:
        storage = vectored
        query = unit_vector([1.0])
        leaning = {f"lean {n}": unit_vector([1.0, n * 0.3, 0.5]) for n in range(6)}
        ids = {body: remember(storage, body) for body in leaning}
        elsewhere = remember(storage, "lean elsewhere", namespace=OTHER_NS)
        with storage.write() as tx:
            tx.vectors.add(NS, [(ids[b], v) for b, v in leaning.items()])
            tx.vectors.add(OTHER_NS, [(elsewhere, query)])
        with storage.read() as tx:
            hits = tx.search.passages_like(NS, query, 4).rows
            assert tx.search.passages_like("nowhere", query, 4).rows == []
        want = sorted(leaning, key=lambda b: -cosine(leaning[b], query))[:4]
        assert [h.text for h in hits] == want
        for h in hits:
            assert h.score == pytest.approx(cosine(leaning[h.text], query), abs=1e-5)
            assert h.granularity == "passage" and h.address == address("passage", ids[h.text])

    def test_entities_limit_the_passages_compared(self, vectored: Storage) -> None:
        storage = vectored
        closest = remember(storage, "closest, about nobody")
        mine = remember(storage, "about Caroline", about="Caroline")
        merged = remember(storage, "about Caro, merged into Caroline", about="Caro")
        with storage.write() as tx:
            tx.vectors.add(
                NS,
                [
                    (closest, unit_vector([1.0])),
                    (mine, unit_vector([1.0, 1.0])),
                    (merged, unit_vector([1.0, 2.0])),
                ],
            )
            caroline = tx.entities.resolve("Caroline", NS)
            tx.entities.merge(caroline, tx.entities.resolve("Caro", NS), NS)
        with storage.read() as tx:
            hits = tx.search.passages_like(NS, unit_vector([1.0]), 5, [caroline]).rows
            everyone = tx.search.passages_like(NS, unit_vector([1.0]), 5).rows
        assert [h.text for h in hits] == ["about Caroline", "about Caro, merged into Caroline"]
        assert everyone[0].text == "closest, about nobody"


class StorageContract(VectorContract):
    """The behaviour tests. Run them by subclassing with an engine's opener
    (``class TestMyEngine(MyEngineStorage, StorageContract)``)."""

    # --- append-only and liveness ------------------------------------------------------

    def test_a_stored_passage_stays_readable_after_later_writes(self, storage: Storage) -> None:
        first = remember(storage, "Raft elects a leader by majority vote.")
        remember(storage, "Paxos agrees on one value.")
        with storage.write() as tx:
            tx.facts.record(NS, "Raft", "year", "2014")
        with storage.read() as tx:
            passage = tx.passages.get(first)
            assert passage is not None
            assert passage.text == "Raft elects a leader by majority vote."
            assert passage.namespace == NS

    def test_forgetting_leaves_the_row_with_a_tombstone(self, storage: Storage) -> None:
        passage = remember(storage, "The lease lasts ten seconds.")
        assert forget(storage, "passage", passage)
        with storage.read() as tx:
            kept = tx.passages.get(passage)
            assert kept is not None and kept.text == "The lease lasts ten seconds."
            assert not tx.tombstones.is_live(passage)
            assert tx.tombstones.state(passage) == "forgotten"
            tombstone = tx.tombstones.get(passage)
            assert tombstone is not None
            assert (tombstone.type, tombstone.state, tombstone.reason) == (
                "passage",
                "forgotten",
                "a test forgot it",
            )

    def test_a_forgotten_fact_is_kept_but_no_longer_live(self, storage: Storage) -> None:
        with storage.write() as tx:
            kept = tx.facts.record(NS, "Raft", "leader", "one")
            gone = tx.facts.record(NS, "Raft", "term", "monotonic")
        assert forget(storage, "fact", gone)
        with storage.read() as tx:
            fact = tx.facts.get(gone)
            assert fact is not None and fact.value == "monotonic"
            assert [f.id for f in tx.facts.live(NS)] == [kept]
            canonical = tx.entities.find("Raft", NS)
            assert canonical is not None
            assert [f.id for f in tx.facts.of_entity(canonical)] == [kept]

    def test_an_untouched_row_is_live(self, storage: Storage) -> None:
        passage = remember(storage, "Quorums overlap in one node.")
        with storage.read() as tx:
            assert tx.tombstones.is_live(passage)
            assert tx.tombstones.state(passage) == "live"
            assert tx.tombstones.get(passage) is None

    def test_forgetting_twice_is_false_the_second_time(self, storage: Storage) -> None:
        passage = remember(storage, "Snapshots compact the log.")
        assert forget(storage, "passage", passage)
        with storage.write() as tx:
            assert not tx.tombstones.add(NS, "passage", passage, "superseded")
            assert not tx.tombstones.add(NS, "passage", passage, "forgotten")
        with storage.read() as tx:
            assert tx.tombstones.state(passage) == "forgotten"

    def test_forgetting_many_at_once_tombstones_the_live_ones_in_order(
        self, storage: Storage
    ) -> None:
        with storage.write() as tx:
            _, ids = add_document(tx, [f"Raft note {n}: terms only grow." for n in range(5)])
        cited, first, gone, last = ids[1], ids[0], ids[2], ids[4]
        page = write_page(storage, "Raft", "Terms only grow.", [cited])
        assert forget(storage, "passage", gone)
        with storage.write() as tx:
            head = tx.tombstones.head()
            done = tx.tombstones.add_many(
                NS, "passage", [last, gone, first, cited, last], "forgotten", "many at once"
            )
            assert done == [last, first, cited]  # once each, the forgotten one left out
            assert tx.tombstones.add_many(NS, "passage", [first, cited], "forgotten") == []
        with storage.read() as tx:
            made = tx.tombstones.since(NS, head)
            assert [t.target for t in made] == [last, first, cited]  # numbered in that order
            assert {t.reason for t in made} == {"many at once"}
            assert tx.tombstones.state(ids[3]) == "live"
            assert tx.pages.is_stale(page)

    def test_forgetting_a_cited_passage_makes_the_page_stale(self, storage: Storage) -> None:
        cited = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        other = remember(storage, "[[Paxos]] agrees on a value.", about="Paxos")
        raft_page = write_page(storage, "Raft", "Raft elects a leader.", [cited])
        paxos_page = write_page(storage, "Paxos", "Paxos agrees.", [other])
        with storage.read() as tx:
            assert not tx.pages.is_stale(raft_page)
        forget(storage, "passage", cited)
        with storage.read() as tx:
            assert tx.pages.is_stale(raft_page)
            assert not tx.pages.is_stale(paxos_page)
            page = tx.pages.get(raft_page)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("passage", cited),
                    "change": "forgotten",
                    "text": "[[Raft]] elects a leader.",
                }
            ]
            assert [p.id for p, _ in tx.pages.stale(NS)] == [raft_page]

    def test_pages_are_listed_sorted_paged_and_the_stale_ones_alone(self, storage: Storage) -> None:
        made = {}
        for name in ("raft", "Paxos", "etcd"):
            cited = remember(storage, f"[[{name}]] keeps a log.", about=name)
            made[name] = (cited, write_page(storage, name, f"{name} keeps a log.", [cited], item=7))
        newer = write_page(storage, "Paxos", "Paxos keeps a log.", [made["Paxos"][0]])
        forget(storage, "passage", made["etcd"][0])
        with storage.read() as tx:
            rows = tx.pages.listing(NS, "title", 0, 10)
            assert [(p.title, name, stale) for p, _, name, stale in rows] == [
                ("etcd", "etcd", True),
                ("Paxos", "Paxos", False),
                ("raft", "raft", False),
            ]
            assert [p.id for p, *_ in tx.pages.listing(NS, "newest", 0, 1)] == [newer]
            assert [p.title for p, *_ in tx.pages.listing(NS, "oldest", 1, 1)] == ["etcd"]
            assert [p.title for p, *_ in tx.pages.listing(NS, "title", 0, 10, stale=True)] == [
                "etcd"
            ]
            assert tx.pages.live_count(NS) == 3
            assert tx.pages.live_count(NS, stale=True) == 1
            assert tx.pages.live_count("elsewhere") == 0
            assert tx.pages.of_item(7, NS) == made["etcd"][1]  # (the last one item 7 wrote)
            assert tx.pages.of_item(8, NS) is None

    def test_documents_are_listed_by_title_with_their_live_passages(self, storage: Storage) -> None:
        with storage.write() as tx:
            first, ids = add_document(tx, ["One.", "Two."], uri="b.txt")
            second, _ = add_document(tx, ["Three."], uri="a.txt")
            gone, _ = add_document(tx, ["Four."], uri="c.txt")
        forget(storage, "passage", ids[0])
        forget(storage, "document", gone)
        with storage.read() as tx:
            rows = tx.documents.listing(NS, "title", 0, 10)
            assert [(d.id, d.uri, v.version, n) for d, v, n in rows] == [
                (second, "a.txt", 1, 1),
                (first, "b.txt", 1, 1),
            ]
            assert [d.id for d, _, _ in tx.documents.listing(NS, "newest", 0, 1)] == [second]
            assert [d.id for d, _, _ in tx.documents.listing(NS, "oldest", 1, 5)] == [second]
            assert tx.documents.live_count(NS) == 2

    def test_superseding_a_fact_makes_the_pages_built_with_it_stale(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "n1", "2024-01-01", "2024-06-01")
            kept = tx.facts.record(NS, "Raft", "term", "monotonic")
        built = write_page(storage, "Raft", "Raft elects n1.", [passage], facts=[old, kept])
        other = write_page(storage, "Paxos", "Paxos agrees.", [], facts=[kept])
        with storage.read() as tx:
            assert not tx.pages.is_stale(built) and not tx.pages.is_stale(other)
            before = tx.counters.read(PAGES_MARKED_STALE).get(("", ""), 0)
        with storage.write() as tx:
            assert tx.tombstones.add(NS, "fact", old, "superseded", "kept the newer one")
            # marked at once, and once: a second mark finds it stale already
            assert tx.pages.mark_built_with(old, "superseded") == 0
        with storage.read() as tx:
            assert tx.pages.is_stale(built) and not tx.pages.is_stale(other)
            assert tx.counters.read(PAGES_MARKED_STALE) == {("", ""): before + 1}
            page = tx.pages.get(built)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("fact", old),
                    "change": "superseded",
                    "text": "Raft leader n1 (from 2024-01-01 to 2024-06-01)",
                }
            ]
            assert [p.id for p, _ in tx.pages.stale(NS)] == [built]
        # The next version, built without the old fact, is not stale.
        again = write_page(storage, "Raft", "Raft elects.", [passage], facts=[kept])
        with storage.read() as tx:
            assert not tx.pages.is_stale(again)
        forget(storage, "fact", kept)
        with storage.read() as tx:
            assert tx.pages.is_stale(again) and tx.pages.is_stale(other)
            page = tx.pages.get(other)
            assert page is not None
            assert tx.pages.changes(page) == [
                {
                    "address": address("fact", kept),
                    "change": "forgotten",
                    "text": "Raft term monotonic",
                }
            ]

    def test_a_fact_purged_after_it_made_a_page_stale_is_named_without_its_words(
        self, storage: Storage
    ) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            fact = tx.facts.record(NS, "Raft", "secret", "swordfish")
        page = write_page(storage, "Raft", "Raft elects.", [passage], facts=[fact])
        forget(storage, "fact", fact)
        with storage.erasing() as tx:
            tx.purges.erase_fact(fact)
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and tx.pages.is_stale(page)
            assert tx.pages.changes(row) == [
                {"address": address("fact", fact), "change": "purged", "text": ""}
            ]

    def test_an_entitys_history_holds_its_forgotten_facts_and_those_of_merged_ones(
        self, storage: Storage
    ) -> None:
        with storage.write() as tx:
            kept = tx.facts.record(NS, "Raft", "leader", "one")
            gone = tx.facts.record(NS, "Raft", "term", "monotonic")
            theirs = tx.facts.record(NS, "Raft protocol", "year", "2014")
            tx.facts.record(OTHER_NS, "Raft", "leader", "another namespace's")
        assert forget(storage, "fact", gone)
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            assert [f.id for f in tx.facts.history(survivor)] == [kept, gone, theirs]
            assert [f.id for f in tx.facts.of_entity(survivor)] == [kept, theirs]
            assert [e.id for e in tx.entities.absorbed(survivor)] == [absorbed]
            assert tx.entities.absorbed(absorbed) == []

    def test_live_passage_count_counts_what_live_passages_lists(self, storage: Storage) -> None:
        first = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        remember(storage, "[[Raft]] replicates a log.", about="Raft")
        remember(storage, "[[Raft protocol]] uses terms.", about="Raft protocol")
        assert forget(storage, "passage", first)
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            assert tx.entities.live_passage_count(survivor) == 2
            assert len(tx.entities.live_passages(survivor)) == 2

    def test_a_merge_stale_page_lists_the_merged_entity_and_its_passages(
        self, storage: Storage
    ) -> None:
        cited = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        theirs = remember(storage, "[[Raft protocol]] replicates a log.", about="Raft protocol")
        page = write_page(storage, "Raft", "Raft elects a leader.", [cited])
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            tx.entities.merge(survivor, absorbed, NS)
            assert tx.pages.mark_stale(page, "merge", address("entity", absorbed))
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and tx.pages.is_stale(page)
            # The merged entity's passage is older than the page, yet listed.
            assert tx.pages.changes(row) == [
                {
                    "address": address("entity", absorbed),
                    "change": "merged",
                    "text": "Raft protocol",
                },
                {
                    "address": address("passage", theirs),
                    "change": "new",
                    "text": "[[Raft protocol]] replicates a log.",
                },
            ]
            [(stale, changes)] = tx.pages.stale(NS)
            assert stale.id == page and changes == tx.pages.changes(row)

    def test_mark_stale_is_true_the_first_time_only(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [passage])
        with storage.write() as tx:
            assert tx.pages.mark_stale(page, "merge")
            assert not tx.pages.mark_stale(page, "merge")
        with storage.read() as tx:
            assert tx.pages.is_stale(page)

    # --- the clocks ----------------------------------------------------------------------

    def test_the_passage_clock_grows_with_each_insert(self, storage: Storage) -> None:
        with storage.read() as tx:
            assert tx.passages.head() == 0
        seen = []
        for n in range(3):
            passage = remember(storage, f"Round {n} of replication.")
            with storage.read() as tx:
                row = tx.passages.get(passage)
                assert row is not None
                assert tx.passages.head() == row.seq
                seen.append(row.seq)
        assert seen == sorted(seen) and len(set(seen)) == 3
        with storage.write() as tx:
            _, ids = add_document(tx, ["One.", "Two."])
            seqs = [p.seq for p in tx.passages.by_ids(ids)]
            assert seqs[0] > seen[-1] and seqs[1] > seqs[0]
            assert tx.passages.head() == seqs[1]

    def test_a_rolled_back_insert_does_not_move_the_clock_back(self, storage: Storage) -> None:
        remember(storage, "Kept passage.")
        with storage.read() as tx:
            before = tx.passages.head()
        with pytest.raises(Boom), storage.write() as tx:
            add_document(tx, ["Lost passage."])
            raise Boom
        with storage.read() as tx:
            assert tx.passages.head() == before
        later = remember(storage, "Later passage.")
        with storage.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > before

    def test_the_tombstone_clock_orders_tombstones(self, storage: Storage) -> None:
        a = remember(storage, "First to go.")
        b = remember(storage, "Second to go.")
        with storage.read() as tx:
            start = tx.tombstones.head()
        forget(storage, "passage", a)
        with storage.read() as tx:
            middle = tx.tombstones.head()
        forget(storage, "passage", b)
        with storage.read() as tx:
            assert start < middle < tx.tombstones.head()
            assert [t.target for t in tx.tombstones.since(NS, start)] == [a, b]
            assert [t.target for t in tx.tombstones.since(NS, middle)] == [b]
            assert tx.tombstones.since(OTHER_NS, start) == []

    def test_clock_numbers_are_not_handed_out_again_after_a_purge(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        remember(storage, "Stays.")
        newest = remember(storage, "Erased soon.")
        forget(storage, "passage", newest)
        with storage.read() as tx:
            passages_before, tombstones_before = tx.passages.head(), tx.tombstones.head()
        with storage.erasing() as tx:
            tx.purges.erase_passage(newest)
        with storage.read() as tx:
            assert tx.passages.get(newest) is None
            assert tx.passages.head() >= passages_before
            assert tx.tombstones.head() >= tombstones_before
        # A new connection (another process) knows the high-water marks too.
        again = open_storage()
        after = remember(again, "Arrives after the purge.")
        forget(again, "passage", after)
        with again.read() as tx:
            row = tx.passages.get(after)
            assert row is not None and row.seq > passages_before
            tombstone = tx.tombstones.get(after)
            assert tombstone is not None and tombstone.seq > tombstones_before

    # --- work items ----------------------------------------------------------------------

    def test_an_item_is_finished_once(self, storage: Storage) -> None:
        with storage.write() as tx:
            item = tx.items.create(NS, "page", "raft", "fp1", {"entity": "Raft"}, now())
        with storage.write() as tx:
            assert tx.items.finish(item, "done", {"page": "p1"}, now())
        with storage.write() as tx:
            assert not tx.items.finish(item, "skipped", {"page": "p2"}, now())
        with storage.read() as tx:
            row = tx.items.get(item, NS)
            assert row is not None
            assert (row.status, row.resolution, row.payload) == (
                "done",
                {"page": "p1"},
                {"entity": "Raft"},
            )
            assert tx.items.resolution(item, NS) == {"page": "p1"}
            assert tx.items.get(item, OTHER_NS) is None

    def test_an_obsolete_item_cannot_be_finished(self, storage: Storage) -> None:
        with storage.write() as tx:
            item = tx.items.create(NS, "page", "raft", "fp1", {}, now())
            tx.items.obsolete(item, now())
            assert not tx.items.finish(item, "done", {}, now())
            row = tx.items.get(item, NS)
            assert row is not None and row.status == "obsolete"

    def test_open_items_are_listed_by_kind_and_key(self, storage: Storage) -> None:
        with storage.write() as tx:
            a = tx.items.create(NS, "page", "raft", "fp-a", {"n": 1}, now())
            b = tx.items.create(NS, "page", "paxos", "fp-b", {"n": 2}, now())
            c = tx.items.create(NS, "merge", "raft|paxos", "fp-c", {"n": 3}, now())
            tx.items.create(OTHER_NS, "page", "raft", "fp-d", {}, now())
            tx.items.finish(b, "done", {}, now())
            tx.items.refresh(a, "fp-a2", {"n": 10}, now())
        with storage.read() as tx:
            assert tx.items.open_keys(NS, "page") == {"raft": (a, "fp-a2")}
            assert [i.id for i in tx.items.list(NS)] == [a, b, c]
            assert [i.id for i in tx.items.list(NS, kind="page", status="open")] == [a]
            assert [i.id for i in tx.items.list(NS, after=a, limit=1)] == [b]
            assert [i.id for i in tx.items.list(NS, after=b)] == [c]
            assert tx.items.count(NS) == 3
            assert tx.items.count(NS, kind="page") == 2
            assert tx.items.count(NS, status="open") == 2
            assert tx.items.count(OTHER_NS) == 1
            assert tx.items.count_open(NS, ["page", "merge"]) == 2
            assert tx.items.count_open(NS, ["page", "merge"], after=a) == 1
            assert [i.id for i in tx.items.open_after(NS, ["page", "merge"], 0, 1)] == [a]
            assert tx.items.open_counts() == {
                (NS, "page"): 1,
                (NS, "merge"): 1,
                (OTHER_NS, "page"): 1,
            }
            last = tx.items.last_for_key(NS, "page", "raft")
            assert last is not None and last.payload == {"n": 10}

    def test_two_connections_racing_to_finish_an_item_one_wins(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        rounds = 10
        with storage.write() as tx:
            items = [tx.items.create(NS, "page", f"k{n}", "fp", {}, now()) for n in range(rounds)]
        racers = [open_storage(), open_storage()]
        wins: dict[int, list[str]] = {item: [] for item in items}
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(racers))

        def race(racer: Storage, name: str) -> None:
            try:
                for item in items:
                    barrier.wait()
                    with racer.write() as tx:
                        if tx.items.finish(item, "done", {"by": name}, now()):
                            wins[item].append(name)
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)
                barrier.abort()

        threads = [
            threading.Thread(target=race, args=(racer, f"racer-{n}"))
            for n, racer in enumerate(racers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert all(len(winners) == 1 for winners in wins.values()), wins
        with storage.read() as tx:
            for item in items:
                row = tx.items.get(item, NS)
                assert row is not None and row.resolution == {"by": wins[item][0]}

    # --- counters ------------------------------------------------------------------------

    def test_counters_sum_per_kind_and_event(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.counters.bump("items_created", "page", "created")
            tx.counters.bump("items_created", "page", "created", by=2)
            tx.counters.bump("items_created", "merge", "created")
            tx.counters.bump("items_created", "page", "refreshed")
            tx.counters.bump("other_counter")
        with storage.write() as tx:
            tx.counters.bump("items_created", "page", "created", by=4)
        with storage.read() as tx:
            assert tx.counters.read("items_created") == {
                ("page", "created"): 7,
                ("merge", "created"): 1,
                ("page", "refreshed"): 1,
            }
            assert tx.counters.read("other_counter") == {("", ""): 1}
            assert tx.counters.read("never_bumped") == {}

    def test_a_rolled_back_bump_is_not_counted(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.counters.bump("searches")
        with pytest.raises(Boom), storage.write() as tx:
            tx.counters.bump("searches", by=5)
            raise Boom
        with storage.read() as tx:
            assert tx.counters.read("searches") == {("", ""): 1}

    # --- search ----------------------------------------------------------------------------

    def test_search_finds_live_passages_best_first(self, storage: Storage) -> None:
        strong = remember(storage, "Raft raft raft: the raft protocol elects a raft leader.")
        weak = remember(storage, "Paxos is older than raft and harder to explain.")
        remember(storage, "Nothing about that protocol here at all.")
        remember(storage, "Raft in another namespace.", namespace=OTHER_NS)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("raft"), 10).rows
        assert [h.address for h in hits] == [address("passage", strong), address("passage", weak)]
        assert all(h.granularity == "passage" for h in hits)
        assert hits[0].score >= hits[1].score
        assert "elects a raft leader" in hits[0].text
        with storage.read() as tx:
            assert len(tx.search.passages(NS, words("raft"), 1).rows) == 1

    def test_a_forgotten_passage_is_not_found(self, storage: Storage) -> None:
        gone = remember(storage, "The heartbeat interval is fifty milliseconds.")
        kept = remember(storage, "A heartbeat keeps followers from starting elections.")
        forget(storage, "passage", gone)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("heartbeat"), 10).rows
        assert [h.address for h in hits] == [address("passage", kept)]

    def test_a_query_without_words_finds_nothing(self, storage: Storage) -> None:
        remember(storage, "Raft elects a leader.")
        with storage.read() as tx:
            for query in ("", "   ", "?!* -- ()", '"'):
                assert tx.search.passages(NS, words(query), 10).rows == []
                assert tx.search.pages(NS, words(query), 10).rows == []
                assert tx.search.facts(NS, words(query), 10, None).rows == []
                assert tx.search.entities(NS, words(query), 10).rows == []

    def test_search_syntax_in_the_query_is_just_words(self, storage: Storage) -> None:
        passage = remember(storage, "Raft NEAR leader election.")
        with storage.read() as tx:
            hits = tx.search.passages(NS, words('raft AND "leader* OR NEAR('), 10).rows
        assert [h.address for h in hits] == [address("passage", passage)]

    def test_search_finds_the_current_page_only(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        old = write_page(storage, "Raft", "Raft elects a leader by heartbeat timeout.", [passage])
        new = write_page(storage, "Raft", "Raft uses randomized heartbeat timeouts.", [passage])
        with storage.read() as tx:
            hits = tx.search.pages(NS, words("heartbeat"), 10).rows
        assert [h.address for h in hits] == [address("page", new)]
        assert address("page", old) not in [h.address for h in hits]

    def test_search_finds_live_facts_valid_at_a_time(self, storage: Storage) -> None:
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "alpha", None, "2020-01-01")
            new = tx.facts.record(NS, "Raft", "leader", "beta", "2020-01-01", None)
            gone = tx.facts.record(NS, "Raft", "leader", "gamma")
            tx.tombstones.add(NS, "fact", gone, "forgotten")
        with storage.read() as tx:
            every = {h.address for h in tx.search.facts(NS, words("leader"), 10, None).rows}
            assert every == {address("fact", old), address("fact", new)}
            then = tx.search.facts(NS, words("leader"), 10, instant("2019-06-01")).rows
            assert [h.address for h in then] == [address("fact", old)]

    def test_search_finds_an_entity_by_name_not_a_merged_one(self, storage: Storage) -> None:
        with storage.write() as tx:
            survivor, _ = tx.entities.ensure("Raft consensus", NS)
            absorbed, _ = tx.entities.ensure("Raft protocol", NS)
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            hits = tx.search.entities(NS, words("raft"), 10).rows
        assert [h.address for h in hits] == [address("entity", survivor)]

    def test_a_common_word_still_weighs_and_scores_are_the_namespaces_own(
        self, storage: Storage
    ) -> None:
        # "raft" is in every passage of the namespace: FTS5's own BM25 would
        # weigh it 1e-6; memors' weight stays ln(1 + 0.5 / 3.5).
        for body in ("Raft elects a leader.", "Raft replicates the log.", "Raft is simple."):
            remember(storage, body)
        with storage.read() as tx:
            before = tx.search.passages(NS, words("raft leader"), 10)
        assert len(before.rows) == 3 and before.rows[-1].score > 0.1
        assert before.ceiling == pytest.approx((idf(3, 3) + idf(3, 1)) * 2.2)
        # Another namespace growing (with the same words) changes nothing here.
        for i in range(30):
            remember(storage, f"Raft node {i} has no leader yet.", namespace=OTHER_NS)
        with storage.read() as tx:
            after = tx.search.passages(NS, words("raft leader"), 10)
        assert [(h.address, h.score) for h in after.rows] == [
            (h.address, h.score) for h in before.rows
        ]
        assert after.ceiling == before.ceiling
        # Its own rows do: the weights are this namespace's live rows'.
        forget(storage, "passage", remember(storage, "Leader leases."))
        with storage.read() as tx:
            assert tx.search.passages(NS, words("raft leader"), 10).ceiling == before.ceiling

    def test_an_entity_is_a_term_of_the_rows_about_it(self, storage: Storage) -> None:
        about = remember(storage, "She moved to Lisbon in spring.", about="Caroline")
        said = remember(storage, "Caroline, you said you moved?", about="Melanie")
        with storage.write() as tx:
            caroline = tx.entities.find("Caroline", NS)
            fact = tx.facts.record(NS, "Caroline", "lives in", "Lisbon")
        assert caroline is not None
        with storage.read() as tx:
            # the entity alone finds the passage that mentions her, not the one naming her
            hits = tx.search.passages(NS, words("", caroline), 10).rows
            assert [h.address for h in hits] == [address("passage", about)]
            # with words, its weight adds to theirs
            both = tx.search.passages(NS, words("moved", caroline), 10).rows
            assert [h.address for h in both] == [
                address("passage", about),
                address("passage", said),
            ]
            facts = tx.search.facts(NS, words("", caroline), 10, None).rows
            assert [h.address for h in facts] == [address("fact", fact)]
            entities = tx.search.entities(NS, words("", caroline), 10).rows
            assert [h.address for h in entities] == [address("entity", caroline)]

    def test_a_merge_moves_the_entity_term_to_the_survivor(self, storage: Storage) -> None:
        passage = remember(storage, "The protocol elects a leader.", about="Raft protocol")
        with storage.write() as tx:
            survivor, _ = tx.entities.ensure("Raft", NS)
            absorbed = tx.entities.find("Raft protocol", NS)
            assert absorbed is not None
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("", survivor), 10).rows
            assert [h.address for h in hits] == [address("passage", passage)]
            assert tx.search.passages(NS, words("", absorbed), 10).rows == []

    def test_named_finds_entities_by_folded_name_and_alias(self, storage: Storage) -> None:
        with storage.write() as tx:
            raft, _ = tx.entities.ensure("Raft-Protocol", NS)
            tx.entities.add_alias(raft, NS, "The Raft")
            other, _ = tx.entities.ensure("Raft protocol", OTHER_NS)
        with storage.read() as tx:
            assert tx.entities.named(NS, ["raft protocol", "the raft", "paxos"]) == {
                "raft protocol": raft,
                "the raft": raft,
            }
            assert tx.entities.named(OTHER_NS, ["raft protocol"]) == {"raft protocol": other}
            assert tx.entities.named(NS, []) == {}

    # --- transactions ----------------------------------------------------------------------

    def test_a_failed_write_leaves_nothing_and_calls_nothing(self, storage: Storage) -> None:
        called: list[str] = []
        with pytest.raises(Boom), storage.write() as tx:
            _, [passage] = add_document(tx, ["Never stored."])
            tx.counters.bump("tries")
            tx.after_commit(called.append, "committed")
            raise Boom
        assert called == []
        with storage.read() as tx:
            assert tx.passages.get(passage) is None
            assert tx.counters.read("tries") == {}
            assert tx.namespaces.names() == []

    def test_after_commit_runs_once_the_write_commits(self, storage: Storage) -> None:
        called: list[str] = []
        with storage.write() as tx:
            tx.after_commit(called.append, "first")
            with storage.write() as inner:
                inner.after_commit(called.append, "inner")
            assert called == []
        assert called == ["first", "inner"]

    def test_a_failed_nested_write_rolls_back_only_itself(self, storage: Storage) -> None:
        called: list[str] = []
        with storage.write() as tx:
            _, [kept] = add_document(tx, ["Outer passage."])
            tx.after_commit(called.append, "outer")
            with pytest.raises(Boom), storage.write() as inner:
                _, [lost] = add_document(inner, ["Inner passage."])
                inner.after_commit(called.append, "inner")
                raise Boom
            assert tx.passages.get(lost) is None
            _, [after] = add_document(tx, ["After the savepoint."])
        assert called == ["outer"]
        with storage.read() as tx:
            assert tx.passages.get(kept) is not None
            assert tx.passages.get(lost) is None
            rows = tx.passages.by_ids([kept, after])
            assert [p.id for p in rows] == [kept, after]
            assert rows[1].seq > rows[0].seq

    def test_a_read_sees_one_snapshot(self, storage: Storage, open_storage: Opener) -> None:
        remember(storage, "Before the read.")
        writer = open_storage()
        with storage.read() as tx:
            assert tx.passages.live_count(NS) == 1
            remember(writer, "Written meanwhile.")
            assert tx.passages.live_count(NS) == 1
        with storage.read() as tx:
            assert tx.passages.live_count(NS) == 2

    def test_a_read_transaction_refuses_to_write(self, storage: Storage) -> None:
        remember(storage, "Stored before the read.")
        with storage.read() as tx:
            # (each engine raises its own error, saying the transaction is read-only)
            with pytest.raises(Exception, match=r"(?i)read.?only"):
                tx.namespaces.touch("written-in-a-read")
            assert tx.passages.live_count(NS) == 1
        with storage.read() as tx:
            assert "written-in-a-read" not in tx.namespaces.names()
        with storage.write() as tx:  # and the store still writes after it
            tx.namespaces.touch("written-after")
        with storage.read() as tx:
            assert "written-after" in tx.namespaces.names()

    def test_a_read_only_storage_refuses_to_write(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        passage = remember(storage, "Readable by anyone.")
        reader = open_storage(readonly=True)
        assert reader.readonly and not storage.readonly
        with reader.read() as tx:
            row = tx.passages.get(passage)
            assert row is not None and row.text == "Readable by anyone."
        with pytest.raises(MemorsError), reader.write() as tx:
            tx.namespaces.touch("never")
        with storage.read() as tx:
            assert "never" not in tx.namespaces.names()

    def test_native_serves_only_the_store_s_own_engine(self, storage: Storage) -> None:
        # A kind's per-engine module asks for its engine's handle; on another
        # engine it must fail by name, never run.
        with storage.read() as tx:
            assert tx.engine == storage.engine
            assert tx.native(storage.engine) is not None
            with pytest.raises(PluginError, match=storage.engine):
                tx.native(f"not-{storage.engine}")

    # --- namespaces --------------------------------------------------------------------------

    def test_namespaces_in_use_are_listed_once(self, storage: Storage) -> None:
        with storage.write() as tx:
            tx.namespaces.touch("zeta")
            tx.namespaces.touch("alpha")
            tx.namespaces.touch("zeta")
        with storage.read() as tx:
            assert tx.namespaces.names() == ["alpha", "zeta"]

    # --- entities ------------------------------------------------------------------------------

    def test_ensure_is_idempotent_and_folds_case_and_space(self, storage: Storage) -> None:
        with storage.write() as tx:
            ident, created = tx.entities.ensure("Quorum Replication", NS)
            assert created
            assert tx.entities.ensure("Quorum Replication", NS) == (ident, False)
            assert tx.entities.ensure("  quorum   REPLICATION ", NS) == (ident, False)
            other, created = tx.entities.ensure("quorum-replication", NS)
            assert created and other != ident
            elsewhere, created = tx.entities.ensure("Quorum Replication", OTHER_NS)
            assert created and elsewhere != ident
        with storage.read() as tx:
            entity = tx.entities.get(ident)
            assert entity is not None
            assert (entity.name, entity.canonical, entity.namespace) == (
                "Quorum Replication",
                ident,
                NS,
            )
            assert tx.entities.find("QUORUM replication", NS) == ident
            assert tx.entities.find("Quorum Replication", "nowhere") is None
            assert tx.entities.count(NS) == 2
            assert tx.entities.get(ident, OTHER_NS) is None

    def test_an_empty_entity_name_is_bad_input(self, storage: Storage) -> None:
        with storage.write() as tx:
            for name in ("", "   "):
                with pytest.raises(BadInput):
                    tx.entities.ensure(name, NS)

    def test_an_alias_finds_the_entity(self, storage: Storage) -> None:
        with storage.write() as tx:
            ident, _ = tx.entities.ensure("PostgreSQL", NS)
            tx.entities.add_alias(ident, NS, "Postgres")
            tx.entities.add_alias(ident, NS, "Postgres")
            tx.entities.add_alias(ident, NS, "postgresql")  # the name itself, folded
        with storage.read() as tx:
            assert tx.entities.find("postgres", NS) == ident
            assert tx.entities.resolve("POSTGRES", NS) == ident
            assert tx.entities.resolve(address("entity", ident), NS) == ident
            assert tx.entities.aliases(ident) == ["Postgres"]
            with pytest.raises(NotFound):
                tx.entities.resolve("MySQL", NS)

    def test_merge_points_the_absorbed_entity_at_the_survivor(self, storage: Storage) -> None:
        p1 = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        p2 = remember(storage, "[[Raft protocol]] replicates a log.", about="Raft protocol")
        p3 = remember(storage, "[[Raft algorithm]] is understandable.", about="Raft algorithm")
        with storage.write() as tx:
            survivor = tx.entities.resolve("Raft", NS)
            absorbed = tx.entities.resolve("Raft protocol", NS)
            third = tx.entities.resolve("Raft algorithm", NS)
            tx.entities.merge(absorbed, third, NS)  # third -> absorbed, then both -> survivor
            tx.entities.merge(survivor, absorbed, NS)
        with storage.read() as tx:
            for ident in (absorbed, third):
                entity = tx.entities.get(ident)
                assert entity is not None and entity.canonical == survivor
            assert tx.entities.find("Raft protocol", NS) == survivor
            assert tx.entities.canonical_of([absorbed, third]) == {survivor}
            assert [e.id for e in tx.entities.canonical_list(NS)] == [survivor]
            assert set(tx.entities.aliases(survivor)) == {"Raft protocol", "Raft algorithm"}
            assert [p.id for p in tx.entities.live_passages(survivor)] == [p1, p2, p3]
            assert tx.passages.entities_of(p3) == [survivor]

    def test_same_name_pairs_and_orphans(self, storage: Storage) -> None:
        remember(storage, "[[Quorum Replication]] needs a majority.", about="Quorum Replication")
        with storage.write() as tx:
            named = tx.entities.resolve("Quorum Replication", NS)
            folded, _ = tx.entities.ensure("quorum-replication", NS)
            lonely, _ = tx.entities.ensure("Lonely", NS)
        with storage.read() as tx:
            assert tx.entities.same_name_pairs(NS) == [(named, folded)]
            assert set(tx.entities.orphans(NS)) == {folded, lonely}

    # --- facts ---------------------------------------------------------------------------------

    def test_facts_that_disagree_are_paired(self, storage: Storage) -> None:
        with storage.write() as tx:
            alpha = tx.facts.record(NS, "Raft", "leader", "alpha")
            beta = tx.facts.record(NS, "raft", "Leader", "beta")
            upper = tx.facts.record(NS, "Raft", "leader", "ALPHA")  # folds equal to alpha
            tx.facts.record(NS, "Raft", "term", "beta")  # another predicate
            tx.facts.record(NS, "Paxos", "leader", "gamma")  # another subject
            before = tx.facts.record(NS, "Zab", "leader", "x", None, "2020-01-01")
            after = tx.facts.record(NS, "Zab", "leader", "y", "2020-01-01", None)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == [(alpha, beta), (beta, upper)]
            assert tx.facts.disagree(alpha, beta)
            assert not tx.facts.disagree(alpha, upper)
            assert not tx.facts.disagree(before, after)  # half-open: they only touch
            raft = tx.entities.resolve("Raft", NS)
            assert tx.facts.conflicting(NS, only=[raft]) == [(alpha, beta), (beta, upper)]
            assert tx.facts.conflicting(NS, only=[tx.entities.resolve("Paxos", NS)]) == []
        forget(storage, "fact", beta)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == []
            assert not tx.facts.disagree(alpha, beta)
        with storage.write() as tx:
            assert tx.facts.disagree(before, tx.facts.record(NS, "Zab", "leader", "z"))

    def test_facts_about_merged_entities_can_disagree(self, storage: Storage) -> None:
        with storage.write() as tx:
            a = tx.facts.record(NS, "Raft", "leader", "alpha")
            b = tx.facts.record(NS, "Raft protocol", "leader", "beta")
            assert tx.facts.conflicting(NS) == []
            survivor = tx.entities.resolve("Raft", NS)
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            assert tx.facts.conflicting(NS) == [(a, b)]
            fact = tx.facts.get(b)
            assert fact is not None
            assert (fact.canonical, fact.subject_name) == (survivor, "Raft")
            assert [f.id for f in tx.facts.of_entity(survivor)] == [a, b]

    def test_expired_facts_and_bounded_copies(self, storage: Storage) -> None:
        stamp = now()
        with storage.write() as tx:
            old = tx.facts.record(NS, "Raft", "leader", "alpha", "2019-01-01", "2020-01-01")
            tx.facts.record(NS, "Raft", "leader", "beta", "2020-01-01", None)
            copy = tx.facts.copy(old, "2019-01-01", "2021-01-01", stamp)
        with storage.read() as tx:
            assert [f.id for f in tx.facts.expired(NS, instant("2020-06-01"))] == [old]
            assert tx.facts.expired(NS, instant("2019-06-01")) == []
            assert tx.facts.bounded_copy(old, stamp) == copy
            row = tx.facts.get(copy)
            assert row is not None
            assert (row.value, row.valid_to, row.recorded_at) == ("alpha", "2021-01-01", stamp)
            assert [f.id for f in tx.facts.by_ids([copy, uuid7(), old])] == [copy, old]

    def test_expired_facts_that_are_history(self, storage: Storage) -> None:
        with storage.write() as tx:
            # recorded (now) after its validity ended: history
            past = tx.facts.record(NS, "Raft", "maintainer", "Ongaro", None, "2016-01-01")
            # ends after it was recorded, a newer fact on the same predicate follows it
            followed = tx.facts.record(NS, "Zab", "release", "3.4", None, "2999-01-01")
            tx.facts.record(NS, "zab", "Release", "3.5", "2999-01-01", None)
            # ends after it was recorded, nothing follows: news once it has ended
            news = tx.facts.record(NS, "Paxos", "status", "draft", None, "2999-01-01")
            # what ends before it does not follow it
            tx.facts.record(NS, "Paxos", "status", "sketch", "1980-01-01", "1981-01-01")
        later = instant("3000-01-01")
        with storage.read() as tx:
            assert [f.id for f in tx.facts.expired(NS, later)][:3] == [past, followed, news]
            assert [f.id for f in tx.facts.expired(NS, later, history=False)] == [news]

    def test_a_fact_source_must_be_a_passage_of_the_namespace(self, storage: Storage) -> None:
        passage = remember(storage, "Raft elects a leader.", namespace=OTHER_NS)
        with storage.write() as tx:
            with pytest.raises(NotFound):
                tx.facts.record(NS, "Raft", "leader", "one", source=address("passage", passage))
            with pytest.raises(BadInput):
                tx.facts.record(NS, "Raft", "leader", "one", "2021-01-01", "2020-01-01")
            assert tx.facts.live(NS) == []

    # --- merge candidates and the change log -------------------------------------------------

    def test_a_merge_candidate_is_opened_once_per_pair(self, storage: Storage) -> None:
        with storage.write() as tx:
            a, _ = tx.entities.ensure("Raft", NS)
            b, _ = tx.entities.ensure("Raft protocol", NS)
            ident, status = tx.merges.open(NS, a, b, "names")
            assert status == "open"
            assert tx.merges.open(NS, b, a, "agent") == (ident, "open")
            tx.merges.set_status(ident, "rejected")
            assert tx.merges.open(NS, a, b, "names") == (ident, "rejected")
        with storage.read() as tx:
            candidate = tx.merges.get(ident)
            assert candidate is not None
            assert (candidate.first, candidate.second, candidate.status) == (a, b, "rejected")
            assert [c.id for c in tx.merges.in_namespace(NS)] == [ident]
            assert tx.merges.in_namespace(NS, "open") == []
            assert tx.merges.in_namespace(OTHER_NS) == []

    def test_the_change_log_names_the_entities_touched_since_a_mark(self, storage: Storage) -> None:
        remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.read() as tx:
            mark = tx.changes.head()
            raft = tx.entities.resolve("Raft", NS)
            assert raft in tx.changes.entities_since(NS, 0)
        remember(storage, "[[Paxos]] agrees.", about="Paxos")
        with storage.write() as tx:
            paxos = tx.entities.resolve("Paxos", NS)
            assert tx.changes.head() > mark
            assert tx.changes.entities_since(NS, mark) == {paxos}
            assert tx.changes.entities_since(OTHER_NS, 0) == set()
            tx.changes.set_mark(NS, "page", ScanMark(mark, 1, 0))
            assert tx.changes.mark(NS, "page") == ScanMark(mark, 1, 0)
            assert tx.changes.mark(NS, "merge") is None
            tx.changes.forget_marks(NS)
            assert tx.changes.mark(NS, "page") is None

    def test_passages_stored_in_a_batch_are_as_if_stored_one_by_one(self, storage: Storage) -> None:
        bodies = [f"Batch passage {i} about [[Raft]]." for i in range(5)]
        with storage.write() as tx:
            tx.namespaces.touch(NS)
            document, [single] = add_document(tx, ["Stored alone first."])
            raft = tx.entities.ensure("Raft", NS)[0]
            batch = [
                NewPassage(
                    uuid7(), document, 1, i + 1, body, text.content_hash(body),
                    text.pack_shingles(text.shingle_hashes(body)),
                )
                for i, body in enumerate(bodies)
            ]  # fmt: skip
            seqs = tx.passages.insert_many(NS, batch, now())
            assert tx.passages.insert_many(NS, [], now()) == []
            tx.passages.mention_many([(p.id, raft) for p in batch] + [(batch[0].id, raft)])
        with storage.read() as tx:
            first = tx.passages.get(single)
            assert first is not None
            assert seqs == list(range(first.seq + 1, first.seq + 6))  # the clock, in order
            assert tx.passages.head() == seqs[-1]
            assert [p.text for p in tx.passages.by_ids([p.id for p in batch])] == bodies
            assert [p.id for p in tx.entities.live_passages(raft)] == [p.id for p in batch]
            assert tx.passages.entities_of(batch[0].id) == [raft]  # linked once

    def test_a_scan_mark_never_skips_a_write_committed_after_it(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        # The hazard of a sequence read as a high-water mark: writer A takes
        # number 4, B takes 5 and commits first, a scan records 5, A commits
        # and `seq > 5` never sees A's row. Here writers on their own
        # connections race a scanner that records the clocks in a write
        # transaction, as compaction does; afterwards every mark must still
        # cover exactly the rows that were visible when it was taken.
        writers = [open_storage() for _ in range(3)]
        scanner = open_storage()
        marks: list[tuple[int, int, set[str], set[str]]] = []
        errors: list[BaseException] = []
        rounds = 25

        def write(store: Storage, who: int) -> None:
            try:
                for n in range(rounds):
                    passage = remember(store, f"Writer {who} stores passage {n}.", about=f"W{who}")
                    if n % 5 == 0:
                        forget(store, "passage", passage)
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        def scan() -> None:
            try:
                for _ in range(rounds):
                    with scanner.write() as tx:
                        head, changes = tx.passages.head(), tx.changes.head()
                        seen = {p.id for p in tx.passages.live_shingles(NS)}
                        touched = tx.changes.entities_since(NS, 0)
                        marks.append((head, changes, seen, touched))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w, i)) for i, w in enumerate(writers)]
        threads.append(threading.Thread(target=scan))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with storage.write() as tx:
            for head, changes, seen, touched in marks:
                live_then = {
                    p.id
                    for p in tx.passages.live_shingles(NS)
                    if p.seq <= head and tx.tombstones.get(p.id) is None
                }
                # a passage numbered within the mark is one the scan saw
                # (or one forgotten since, which a tombstone scan finds)
                assert live_then <= seen
                later = {p.id for p in tx.passages.live_shingles(NS, after=head)}
                assert not (later & seen)
                # and the change log's mark covers every entity logged up to it
                assert tx.changes.entities_since(NS, 0) - tx.changes.entities_since(
                    NS, changes
                ) <= touched | tx.entities.canonical_of(touched)

    def test_merging_shows_the_absorbed_entity_under_its_survivor(self, storage: Storage) -> None:
        with storage.write() as tx:
            survivor, _ = tx.entities.ensure("Raft", NS)
            absorbed, _ = tx.entities.ensure("Raft protocol", NS)
            mark = tx.changes.head()
            tx.entities.merge(survivor, absorbed, NS)
            assert survivor in tx.changes.entities_since(NS, mark)

    # --- the shared rules: needing a page, stale --------------------------------------------

    def test_an_entity_needs_a_page_from_enough_live_passages(self, storage: Storage) -> None:
        passages = [
            remember(storage, f"[[Raft]] fact number {n}.", about="Raft")
            for n in range(PAGE_MIN_PASSAGES)
        ]
        remember(storage, "[[Paxos]] only once.", about="Paxos")
        with storage.read() as tx:
            raft = tx.entities.resolve("Raft", NS)
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES) == [(raft, PAGE_MIN_PASSAGES)]
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES, only=[]) == []
        forget(storage, "passage", passages[0])
        with storage.read() as tx:
            assert tx.entities.needing_page(NS, PAGE_MIN_PASSAGES) == []
            assert tx.passages.live_count(NS) == PAGE_MIN_PASSAGES
        write_page(storage, "Raft", "Raft.", passages[1:])
        with storage.read() as tx:
            assert tx.entities.needing_page(NS, 1) == [(tx.entities.resolve("Paxos", NS), 1)]

    def test_enough_new_passages_make_a_page_stale(self, storage: Storage) -> None:
        first = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [first])
        new = [
            remember(storage, f"[[Raft]] new detail {n}.", about="Raft")
            for n in range(STALE_NEW_PASSAGES)
        ]
        with storage.read() as tx:
            assert tx.pages.is_stale(page)
            row = tx.pages.get(page)
            assert row is not None
            assert tx.pages.changes(row) == [
                {
                    "address": address("passage", p),
                    "change": "new",
                    "text": f"[[Raft]] new detail {n}.",
                }
                for n, p in enumerate(new)
            ]
            assert tx.pages.stale_counts() == {NS: 1}
        forget(storage, "passage", new[0])
        with storage.read() as tx:
            assert not tx.pages.is_stale(page)
            assert tx.pages.stale_counts() == {}

    def test_live_shingles_follow_the_clock(self, storage: Storage) -> None:
        a = remember(storage, "Raft elects a leader by majority vote quickly.")
        b = remember(storage, "Paxos agrees on one value among the acceptors.")
        c = remember(storage, "Zab broadcasts atomically to its followers.")
        remember(storage, "Another namespace entirely, with words.", namespace=OTHER_NS)
        forget(storage, "passage", b)
        with storage.read() as tx:
            rows = {r.id: r for r in tx.passages.live_shingles(NS)}
            assert list(rows) == [a, c]
            expected = text.pack_shingles(text.shingle_hashes(tx.passages.get(a).text))  # type: ignore[union-attr]
            assert rows[a].shingles == expected
            assert [r.id for r in tx.passages.live_shingles(NS, after=rows[a].seq)] == [c]
            assert [r.id for r in tx.passages.live_shingles(NS, seqs=[rows[c].seq])] == [c]

    # --- pages -----------------------------------------------------------------------------------

    def test_a_new_page_version_supersedes_the_old_one(self, storage: Storage) -> None:
        a = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        b = remember(storage, "[[Raft]] replicates a log.", about="Raft")
        v1 = write_page(storage, "Raft", "Raft elects.", [a])
        v2 = write_page(storage, "Raft", "Raft elects and replicates.", [a, b, a])
        with storage.read() as tx:
            raft = tx.entities.resolve("Raft", NS)
            current = tx.pages.current(raft)
            assert current is not None and current.id == v2
            assert (current.version, current.previous, current.content) == (
                2,
                v1,
                "Raft elects and replicates.",
            )
            old = tx.pages.get(v1)
            assert old is not None and old.content == "Raft elects."
            assert tx.tombstones.state(v1) == "superseded"
            assert tx.tombstones.is_live(v2)
            assert tx.pages.newer(v1) == v2
            assert tx.pages.newer(v2) is None
            assert tx.pages.last_written(raft) == v2
            assert [p.id for p in tx.pages.live(NS)] == [v2]
            assert tx.pages.live_counts() == {NS: 1}
            hashes = {p.id: p.hash for p in tx.passages.by_ids([a, b])}
            assert {(s.passage, s.hash) for s in tx.pages.sources(v2)} == set(hashes.items())
            assert [(s.passage, s.hash) for s in tx.pages.sources(v1)] == [(a, hashes[a])]

    def test_a_page_records_the_passage_clock_it_was_built_at(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        page = write_page(storage, "Raft", "Raft elects.", [passage])
        with storage.read() as tx:
            row = tx.pages.get(page)
            assert row is not None and row.built_at == tx.passages.head()

    def test_a_page_cannot_cite_a_missing_passage(self, storage: Storage) -> None:
        with pytest.raises(NotFound):
            write_page(storage, "Raft", "Raft elects.", [uuid7()])
        with storage.read() as tx:
            assert tx.pages.live(NS) == []

    def test_a_page_keeps_its_sentences_with_their_sources_and_its_facts(
        self, storage: Storage
    ) -> None:
        a = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        b = remember(storage, "[[Raft]] replicates a log.", about="Raft")
        with storage.write() as tx:
            year = tx.facts.record(NS, "Raft", "published", "2014")
            leader = tx.facts.record(NS, "Raft", "leader", "n1")
        sentences = [
            ("Raft elects a leader and replicates a log.", [address("passage", a),
                                                             address("passage", b)]),
            ("It was published in 2014.", [address("fact", year)]),
            ("Raft elects a leader.", [address("passage", a), address("passage", a)]),
            ("A sentence citing nothing.", []),
        ]  # fmt: skip
        page = write_page(
            storage, "Raft", "…", [a, b], sentences=sentences, facts=[leader, year, leader]
        )
        plain = write_page(storage, "Paxos", "Paxos agrees.", [])
        with storage.read() as tx:
            assert [(s.text, list(s.sources)) for s in tx.pages.sentences(page)] == [
                (sentences[0][0], sentences[0][1]),
                (sentences[1][0], sentences[1][1]),
                ("Raft elects a leader.", [address("passage", a)]),  # each source once
                ("A sentence citing nothing.", []),
            ]
            assert tx.pages.facts(page) == [address("fact", leader), address("fact", year)]
            assert tx.pages.sentences(plain) == [] and tx.pages.facts(plain) == []
            # A new version records its own (none here), not its previous one's.
            assert tx.pages.sentences(uuid7()) == [] and tx.pages.facts(uuid7()) == []
        again = write_page(storage, "Raft", "Raft elects.", [a])
        with storage.read() as tx:
            assert tx.pages.sentences(again) == [] and tx.pages.facts(again) == []
            assert len(tx.pages.sentences(page)) == 4

    def test_a_page_cannot_be_built_with_a_missing_fact_or_source(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft]] elects a leader.", about="Raft")
        with storage.write() as tx:
            elsewhere = tx.facts.record(OTHER_NS, "Raft", "leader", "n1")
        for kwargs in (
            {"facts": [uuid7()]},
            {"facts": [elsewhere]},  # a fact of another namespace
            {"sentences": [("Raft elects.", [address("passage", uuid7())])]},
            {"sentences": [("Raft elects.", [address("fact", uuid7())])]},
        ):
            with pytest.raises(NotFound):
                write_page(storage, "Raft", "Raft elects.", [passage], **kwargs)
        for bad in ("not an address", address("entity", uuid7())):
            with pytest.raises(BadInput):
                write_page(storage, "Raft", "Raft elects.", [passage], sentences=[("S.", [bad])])
        with storage.read() as tx:
            assert tx.pages.live(NS) == []

    def test_a_passage_profile_is_stored_once(self, storage: Storage) -> None:
        a = remember(storage, "Raft elects a leader.")
        b = remember(storage, "Paxos agrees on a value.")
        with storage.read() as tx:
            assert tx.passages.profiles([a, b]) == {}
            assert tx.passages.profiles([]) == {}
        with storage.write() as tx:
            tx.passages.add_profiles([(a, '{"tokens": ["raft"]}')])
        with storage.write() as tx:
            # a second add of the same passage keeps the first
            tx.passages.add_profiles([(a, '{"tokens": ["other"]}'), (b, '{"tokens": ["paxos"]}')])
            tx.passages.add_profiles([])
        with storage.read() as tx:
            assert tx.passages.profiles([a, b, uuid7()]) == {
                a: '{"tokens": ["raft"]}',
                b: '{"tokens": ["paxos"]}',
            }
            assert tx.passages.profiles([b]) == {b: '{"tokens": ["paxos"]}'}

    def test_a_merged_entity_s_page_is_the_survivor_s(self, storage: Storage) -> None:
        passage = remember(storage, "[[Raft protocol]] elects.", about="Raft protocol")
        page = write_page(storage, "Raft protocol", "Raft elects.", [passage])
        with storage.write() as tx:
            survivor, _ = tx.entities.ensure("Raft", NS)
            tx.entities.merge(survivor, tx.entities.resolve("Raft protocol", NS), NS)
        with storage.read() as tx:
            current = tx.pages.current(survivor)
            assert current is not None and current.id == page

    # --- documents and their versions --------------------------------------------------------------

    def test_document_versions_keep_their_passages(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, [kept, dropped] = add_document(tx, ["Kept.", "Dropped."], uri="file:///n.md")
            tx.documents.add_version(DocumentVersion(document, 2, "h2", "Notes", {"k": 1}, now()))
            tx.documents.link_passage(document, 2, 0, kept)
            added = add_passage(tx, document, 2, 1, "Added.")
            tx.documents.link_passage(document, 2, 1, added)
            tx.tombstones.add(NS, "passage", dropped, "superseded", "document version 2")
        with storage.read() as tx:
            assert tx.documents.version_passages(document, 1) == [kept, dropped]
            assert tx.documents.version_passages(document, 2) == [kept, added]
            assert [(v.version, n) for v, n in tx.documents.versions(document)] == [(1, 2), (2, 2)]
            latest = tx.documents.latest_version(document)
            assert (latest.version, latest.title, latest.metadata) == (2, "Notes", {"k": 1})
            found = tx.documents.latest_by_uri(NS, "file:///n.md")
            assert found is not None and (found[0].id, found[1]) == (document, 2)
            assert tx.documents.latest_by_uri(OTHER_NS, "file:///n.md") is None
            assert tx.documents.version_dropping(dropped) == (document, 2)
            assert tx.documents.version_dropping(kept) is None
            assert tx.passages.live_of_document(document) == [kept, added]
            assert tx.documents.get(document, OTHER_NS) is None
            with pytest.raises(NotFound):
                tx.documents.latest_version(uuid7())

    def test_a_forgotten_document_is_not_found_by_its_uri(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, _ = add_document(tx, ["Text."], uri="file:///gone.md")
        forget(storage, "document", document)
        with storage.read() as tx:
            assert tx.documents.latest_by_uri(NS, "file:///gone.md") is None
            assert tx.documents.get(document, NS) is not None

    # --- purge -----------------------------------------------------------------------------------

    def test_an_erased_passage_is_gone_and_not_found(self, storage: Storage) -> None:
        gone = remember(storage, "The secret rotation key is swordfish.", about="Rotation")
        kept = remember(storage, "The rotation happens every ninety days.", about="Rotation")
        with storage.write() as tx:
            tx.passages.add_profiles([(gone, '["secret", "swordfish"]'), (kept, '["ninety"]')])
        with storage.erasing() as tx:
            assert [
                p.id
                for p in tx.purges.passages_of(
                    tx.passages.get(gone).document  # type: ignore[union-attr]
                )
            ] == [gone]
            tx.purges.erase_passage(gone)
        with storage.read() as tx:
            assert tx.passages.get(gone) is None
            hits = tx.search.passages(NS, words("rotation swordfish"), 10).rows
            assert [h.address for h in hits] == [address("passage", kept)]
            rotation = tx.entities.resolve("Rotation", NS)
            assert [p.id for p in tx.entities.live_passages(rotation)] == [kept]
            # its profile (words of its text) went with it
            assert tx.passages.profiles([gone, kept]) == {kept: '["ninety"]'}

    def test_a_document_is_erased_with_everything_that_names_it(self, storage: Storage) -> None:
        with storage.write() as tx:
            document, [secret] = add_document(tx, ["[[Vault]] opens with the word swordfish."])
            vault, _ = tx.entities.ensure("Vault", NS)
            tx.passages.mention(secret, [vault])
        kept = remember(storage, "[[Keeper]] stays.", about="Keeper")
        with storage.write() as tx:
            before = tx.facts.record(NS, "Vault", "door", "steel")
        v1 = write_page(
            storage,
            "Vault",
            "The vault opens with swordfish.",
            [secret],
            sentences=[("The vault opens with swordfish.", [address("passage", secret)])],
            facts=[before],
        )
        with storage.write() as tx:
            page_item = tx.items.create(NS, "page", "vault", "fp-page", {"cites": [secret]}, now())
        v2 = write_page(storage, "Vault", "The vault opens with a word.", [secret], item=page_item)
        # A page whose sentence cites the passage without listing it in its cites.
        keeper_page = write_page(
            storage,
            "Keeper",
            "Keeper stays with swordfish.",
            [kept],
            sentences=[("Keeper stays with swordfish.", [address("passage", secret)])],
        )
        with storage.write() as tx:
            fact = tx.facts.record(
                NS, "Vault", "word", "swordfish", source=address("passage", secret)
            )
            tx.items.finish(page_item, "done", {"page": v2}, now())
            open_item = tx.items.create(NS, "stale", "vault", "fp-open", {"cites": [secret]}, now())
        with storage.erasing() as tx:
            assert [p.id for p in tx.purges.passages_of(document)] == [secret]
            assert tx.purges.mentioned([secret]) == {vault}
            assert tx.purges.pages_citing([secret]) == {v1, v2, keeper_page}
            assert tx.purges.pages_citing([]) == set()
            assert tx.purges.pages_built_with([before]) == {v1}
            assert tx.purges.pages_built_with([fact]) == set()
            assert tx.purges.later_pages([v1]) == {v2}
            assert tx.purges.unnamed_entities([vault]) == []  # still mentioned
            for page in (v2, v1, keeper_page):
                tx.purges.erase_page(page)
            tx.purges.erase_fact(fact)
            tx.purges.erase_fact(before)
            tx.purges.erase_passage(secret)
            tx.purges.erase_document(document)
            tx.purges.redact_items(secret, {"redacted": True})
            assert tx.purges.unnamed_entities([vault]) == [vault]
            tx.purges.erase_entity(vault)
        with storage.read() as tx:
            assert tx.passages.get(secret) is None
            assert tx.documents.get(document, NS) is None
            assert tx.facts.get(fact) is None
            assert tx.pages.get(v1) is None and tx.pages.get(v2) is None
            assert tx.pages.get(keeper_page) is None
            # the page's sentences and facts went with it
            assert tx.pages.sentences(v1) == [] and tx.pages.facts(v1) == []
            assert tx.pages.sentences(keeper_page) == []
            assert tx.entities.get(vault) is None and tx.entities.find("Vault", NS) is None
            for search in (tx.search.passages, tx.search.pages, tx.search.entities):
                assert search(NS, words("swordfish vault"), 10).rows == []
            assert tx.search.facts(NS, words("swordfish"), 10, None).rows == []
            for ident in (page_item, open_item):
                item = tx.items.get(ident, NS)
                assert item is not None and item.payload == {"redacted": True}
                assert secret not in str(item.resolution)
            # neither still counts as done or as scanned for its inputs
            done = tx.items.get(page_item, NS)
            assert done is not None and done.fingerprint != "fp-page"
            assert tx.items.open_keys(NS, "stale")["vault"][1] != "fp-open"
            assert tx.passages.get(kept) is not None
            assert tx.entities.find("Keeper", NS) is not None

    def test_a_failed_erasure_erases_nothing(self, storage: Storage) -> None:
        passage = remember(storage, "Must survive.")
        with pytest.raises(Boom), storage.erasing() as tx:
            tx.purges.erase_passage(passage)
            raise Boom
        with storage.read() as tx:
            assert tx.passages.get(passage) is not None

    def test_a_purge_is_audited_until_its_steps_are_done(self, storage: Storage) -> None:
        target, passage = address("document", uuid7()), address("passage", uuid7())
        with storage.erasing() as tx:
            audit = tx.purges.record(NS, target, [target, passage])
        with storage.read() as tx:
            record = tx.purges.last(NS, target)
            assert record is not None
            assert (record.id, record.erased) == (audit, [target, passage])
            [pending] = tx.purges.pending(NS)
            assert (pending.purge, pending.steps) == (audit, list(storage.purge_steps))
            assert tx.purges.pending(OTHER_NS) == []
            assert tx.purges.unreadable() == []
        for step in storage.purge_steps:
            assert storage.run_purge_step(step, wait=True)
            with storage.write() as tx:
                tx.purges.step_done(step, [audit])
        with storage.read() as tx:
            assert tx.purges.pending() == []
            assert tx.purges.last(NS, target) is not None

    def test_an_audit_record_of_content_still_there_drives_no_step(self, storage: Storage) -> None:
        passage = address("passage", remember(storage, "Still here."))
        with storage.erasing() as tx:
            audit = tx.purges.record(NS, passage, [passage])
        with storage.read() as tx:
            assert tx.purges.pending() == []
            [bad] = tx.purges.unreadable(NS)
            assert (bad.purge, bad.target) == (audit, passage)
            assert "still in the store" in bad.reason
            assert tx.purges.unreadable(OTHER_NS) == []

    def test_a_purged_text_is_in_no_file_of_the_store(self, storage: Storage) -> None:
        if not storage.capabilities.secure_erase:
            pytest.skip("the engine does not declare secure_erase")
        secret = ["zebracornish", "quartzlingo", "octarineblue"]
        passage = remember(storage, f"The door code is {' '.join(secret)} for now.")
        remember(storage, "Another passage that stays.")
        with storage.write() as tx:  # a profile holds words of its passage
            tx.passages.add_profiles([(passage, " ".join(reversed(secret)))])
        with storage.erasing() as tx:
            tx.purges.erase_passage(passage)
            audit = tx.purges.record(NS, address("passage", passage), [address("passage", passage)])
        for step in storage.purge_steps:
            assert storage.run_purge_step(step, wait=True)
            with storage.write() as tx:
                tx.purges.step_done(step, [audit])
        where = Path(storage.location)
        files = [p for p in where.parent.glob(where.name + "*") if p.is_file()]
        assert files
        for path in files:
            content = path.read_bytes()
            assert [w for w in secret if w.encode() in content] == [], path

    # --- backup --------------------------------------------------------------------------------

    def test_a_backup_taken_while_others_write_holds_what_was_committed(
        self, storage: Storage, open_storage: Opener, tmp_path: Path
    ) -> None:
        if not storage.capabilities.online_backup:
            pytest.skip("the engine does not declare online_backup")
        committed = remember(storage, "Committed before the backup.")
        writer = open_storage()
        target = tmp_path / "backup-of-store"
        with writer.write() as tx:
            _, [pending] = add_document(tx, ["Not committed when the backup ran."])
            result = storage.backup(str(target))
        assert result["path"] == str(target)
        copy = self.open_backup(target)
        try:
            with copy.read() as tx:
                assert tx.passages.get(committed) is not None
                assert tx.passages.get(pending) is None
        finally:
            copy.close()
        with pytest.raises(BadInput):
            storage.backup(str(target))

    # --- export and import ---------------------------------------------------------------------

    def _fill(self, storage: Storage) -> dict[str, Any]:
        a = remember(storage, "[[Raft]] elects a leader by heartbeat.", about="Raft")
        b = remember(storage, "[[Raft]] replicates its log.", about="Raft")
        remember(storage, "Elsewhere entirely.", namespace=OTHER_NS)
        with storage.write() as tx:
            fact = tx.facts.record(NS, "Raft", "leader", "one", source=address("passage", a))
            tx.passages.add_profiles([(a, '["raft", "heartbeat"]')])
        page = write_page(
            storage,
            "Raft",
            "Raft elects a leader.",
            [a, b],
            sentences=[("Raft elects a leader.", [address("passage", a), address("fact", fact)])],
            facts=[fact],
        )
        forget(storage, "passage", b)
        with storage.write() as tx:
            item = tx.items.create(NS, "page", "raft", "fp", {"entity": "Raft"}, now())
            tx.items.finish(item, "done", {"page": page}, now())
            tx.counters.bump("remembered", "", "", 3)
        return {"a": a, "b": b, "page": page, "fact": fact, "item": item}

    def test_an_export_imports_into_an_empty_store_as_it_was(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        ids = self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export())
            heads = (tx.passages.head(), tx.tombstones.head())
        assert {table for table, _ in rows} <= set(tx.transfer.tables)
        copy = open_storage("copy")
        with copy.write() as tx:
            assert tx.transfer.is_empty()
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            assert not tx.transfer.is_empty()
            assert list(tx.transfer.export()) == rows
            assert (tx.passages.head(), tx.tombstones.head()) == heads
            assert tx.tombstones.state(ids["b"]) == "forgotten"
            raft = tx.entities.resolve("Raft", NS)
            current = tx.pages.current(raft)
            assert current is not None and current.id == ids["page"]
            assert tx.pages.is_stale(ids["page"])
            fact = tx.facts.get(ids["fact"])
            assert fact is not None and fact.source == ids["a"]
            assert [(s.text, s.sources) for s in tx.pages.sentences(ids["page"])] == [
                ("Raft elects a leader.", (address("passage", ids["a"]), address("fact", fact.id)))
            ]
            assert tx.pages.facts(ids["page"]) == [address("fact", ids["fact"])]
            # Profiles are not carried: they are computed again when missing.
            assert tx.passages.profiles([ids["a"]]) == {}
            item = tx.items.get(ids["item"], NS)
            assert item is not None and item.resolution == {"page": ids["page"]}
            assert tx.counters.read("remembered") == {("", ""): 3}
            # The search indexes are rebuilt from the imported rows.
            hits = tx.search.passages(NS, words("heartbeat"), 10).rows
            assert [h.address for h in hits] == [address("passage", ids["a"])]
            assert [h.address for h in tx.search.pages(NS, words("leader"), 10).rows] == [
                address("page", ids["page"])
            ]
        later = remember(copy, "Arrives after the import.")
        with copy.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > heads[0]

    def test_an_export_without_page_sentences_and_facts_imports(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        ids = self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export())
        # As an export of a store from before pages recorded them.
        older = [(t, r) for t, r in rows if t not in ("page_sentences", "page_facts")]
        assert len(older) == len(rows) - 2
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in older:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            page = tx.pages.get(ids["page"])
            assert page is not None and page.content == "Raft elects a leader."
            assert tx.pages.sentences(ids["page"]) == [] and tx.pages.facts(ids["page"]) == []
            assert tx.pages.is_stale(ids["page"])  # its forgotten source still counts
        forget(copy, "fact", ids["fact"])  # and nothing recorded is not an error

    def test_a_namespace_export_holds_that_namespace_only(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        self._fill(storage)
        with storage.read() as tx:
            rows = list(tx.transfer.export(OTHER_NS))
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        with copy.read() as tx:
            assert tx.namespaces.names() == [OTHER_NS]
            assert tx.passages.live_count(OTHER_NS) == 1
            assert tx.passages.live_count(NS) == 0
            assert tx.entities.find("Raft", NS) is None

    def test_an_import_keeps_the_clock_of_a_purged_store(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        remember(storage, "Stays.")
        newest = remember(storage, "Erased before the export.")
        with storage.read() as tx:
            head = tx.passages.head()
        with storage.erasing() as tx:  # as purge does: the erasure and its audit row
            tx.purges.erase_passage(newest)
            tx.purges.record(NS, address("passage", newest), [address("passage", newest)])
        with storage.read() as tx:
            rows = list(tx.transfer.export())
        copy = open_storage("copy")
        with copy.write() as tx:
            for table, row in rows:
                tx.transfer.restore(table, row)
            tx.transfer.restored()
        later = remember(copy, "Arrives after the import.")
        with copy.read() as tx:
            row = tx.passages.get(later)
            assert row is not None and row.seq > head

    def test_a_row_of_no_exported_table_is_bad_input(self, storage: Storage) -> None:
        with storage.write() as tx:
            with pytest.raises(BadInput):
                tx.transfer.restore("no_such_table", {"id": 1})
            assert tx.transfer.is_empty()
