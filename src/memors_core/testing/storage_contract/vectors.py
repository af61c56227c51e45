"""The storage contract: passages' vectors."""

from __future__ import annotations

import pytest

from memors_core.domain.ids import address, uuid7
from memors_core.errors import MemorsError
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, StorageFixtures
from memors_core.testing.storage_contract.helpers import cosine, forget, remember, unit_vector


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

    def test_a_vector_of_another_kind_counts_as_missing_and_is_replaced(
        self, vectored: Storage
    ) -> None:
        storage = vectored
        old, new = remember(storage, "made before"), remember(storage, "made now")
        with storage.write() as tx:
            assert tx.vectors.add(NS, [(old, unit_vector(1))], "older kind") == 1
            assert tx.vectors.add(NS, [(new, unit_vector(2))]) == 1  # (the current kind)
        with storage.read() as tx:
            assert [m[1] for m in tx.vectors.missing(NS, 0, 10)] == [old]
            assert tx.vectors.missing_count(NS) == 1
            assert [m[1] for m in tx.vectors.missing(NS, 0, 10, "older kind")] == [new]
            assert not tx.vectors.any_waiting(NS)  # (every passage has a vector to search by)
            [hit] = tx.search.passages_like(NS, unit_vector(1), 1).rows
            assert hit.address == address("passage", old)  # used until it is replaced
        with storage.write() as tx:
            assert tx.vectors.add(NS, [(old, unit_vector(3)), (new, unit_vector(4))]) == 1
        with storage.read() as tx:
            assert tx.vectors.count(NS) == 2 and tx.vectors.missing_count(NS) == 0
            [hit] = tx.search.passages_like(NS, unit_vector(3), 1).rows
        assert hit.address == address("passage", old)
        assert hit.score == pytest.approx(1.0, abs=1e-5)  # the new vector, in place

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

    def test_a_passages_neighbours_are_the_live_ones_beside_it(self, vectored: Storage) -> None:
        storage = vectored
        first = remember(storage, "first")
        elsewhere = remember(storage, "another namespace's, between", namespace=OTHER_NS)
        second = remember(storage, "second")
        gone = remember(storage, "forgotten, between")
        third = remember(storage, "third, without a vector")
        forget(storage, "passage", gone)
        with storage.write() as tx:
            tx.vectors.add(NS, [(first, unit_vector([1.0])), (second, unit_vector([1.0, 1.0]))])
            tx.vectors.add(OTHER_NS, [(elsewhere, unit_vector([1.0]))])
        query = unit_vector([1.0])
        with storage.read() as tx:
            plain = tx.search.passages_beside(NS, [first, second, third, elsewhere])
            scored = tx.search.passages_beside(NS, [second], query)
        assert {i: [h.text for h in hits] for i, hits in plain.items()} == {
            first: ["second"],
            second: ["first", "third, without a vector"],
            third: ["second"],
        }
        assert all(h.score == 0 for hits in plain.values() for h in hits)
        assert [h.address for h in scored[second]] == [
            address("passage", first),
            address("passage", third),
        ]
        assert [h.score for h in scored[second]] == [pytest.approx(1.0, abs=1e-5), 0.0]
