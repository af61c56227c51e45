"""The SQLite engine's search by meaning: the code pass and the codes a
connection keeps between searches (made-up vectors, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from memors_core.domain.ids import address
from memors_core.storage.sqlite.connection import SqliteStore
from memors_core.storage.sqlite.vectors import shortlist
from memors_core.testing.storage_contract import NS, add_document, forget, unit_vector

pytestmark = pytest.mark.sqlite_only("the SQLite engine's own vector search")


def fill(store: SqliteStore, n: int, seed: int = 0) -> dict[str, bytes]:
    """``n`` passages with random vectors: address -> vector."""
    with store.write() as tx:
        _, ids = add_document(tx, [f"passage {i}" for i in range(n)])
        vectors = [unit_vector(seed * 100_000 + i) for i in range(n)]
        tx.vectors.add(NS, zip(ids, vectors, strict=True))
    return {address("passage", p): v for p, v in zip(ids, vectors, strict=True)}


def exact(vectors: dict[str, bytes], query: bytes, k: int) -> list[str]:
    q = np.frombuffer(query, dtype="<f4")
    return sorted(vectors, key=lambda a: -float(np.frombuffer(vectors[a], dtype="<f4") @ q))[:k]


def near(store: SqliteStore, query: bytes, k: int) -> list[str]:
    with store.read() as tx:
        return [h.address for h in tx.search.passages_like(NS, query, k).rows]


def test_below_the_shortlist_every_vector_is_compared_exactly(store: SqliteStore) -> None:
    vectors = fill(store, shortlist(10))
    for seed in range(5):
        query = unit_vector(10**6 + seed)
        assert near(store, query, 10) == exact(vectors, query, 10)


def test_the_code_pass_keeps_the_nearest_of_many(store: SqliteStore) -> None:
    # 3,000 random vectors: the code pass shortlists 400 by their signs, then
    # ranks those exactly. A query near a stored vector finds it first, and
    # most of the exact top 10 survive the first pass.
    vectors = fill(store, 3000)
    some = list(vectors)[::300]
    kept = []
    for n, target in enumerate(some):
        v = (
            np.frombuffer(vectors[target], dtype="<f4")
            + np.frombuffer(unit_vector(10**6 + n), dtype="<f4") * 0.5
        )
        query = (v / np.linalg.norm(v)).astype("<f4").tobytes()
        found = near(store, query, 10)
        assert found[0] == target
        kept.append(len(set(found) & set(exact(vectors, query, 10))) / 10)
    assert np.mean(kept) >= 0.8, kept


def test_the_codes_kept_between_searches_follow_every_change(store: SqliteStore, tmp_path) -> None:
    first = fill(store, 50, seed=1)
    query = next(iter(first.values()))
    assert near(store, query, 1) == [next(iter(first))]
    # Another connection (another process) adds a vector that matches better,
    # then forgets it: this connection's kept codes see both changes.
    other = SqliteStore.open(tmp_path / "s.db")
    try:
        with other.write() as tx:
            _, [p] = add_document(tx, ["a twin"])
            tx.vectors.add(NS, [(p, query)])
        assert address("passage", p) in near(store, query, 2)
        forget(other, "passage", p)
        assert address("passage", p) not in near(store, query, 60)
        assert len(near(store, query, 60)) == 50
    finally:
        other.close()


def test_a_search_inside_a_write_that_rolls_back_keeps_nothing_of_it(store: SqliteStore) -> None:
    fill(store, 20, seed=2)
    query = unit_vector(7)
    near(store, query, 5)  # the codes are kept
    with pytest.raises(RuntimeError), store.write() as tx:
        _, [p] = add_document(tx, ["rolled back"])
        tx.vectors.add(NS, [(p, query)])
        assert tx.search.passages_like(NS, query, 1).rows[0].address == address("passage", p)
        raise RuntimeError("roll back")
    with store.write() as tx:  # a new vector takes the rolled-back one's change count
        _, [q] = add_document(tx, ["kept"])
        tx.vectors.add(NS, [(q, unit_vector(8))])
    found = near(store, query, 30)
    assert len(found) == 21 and address("passage", p) not in found


def test_a_vector_added_to_an_older_passage_is_seen_after_another_went(store: SqliteStore) -> None:
    # As many vectors before as after, none newer than the newest kept: a
    # forget and a reindex of an older passage between two searches.
    with store.write() as tx:
        _, (old, kept, newest) = add_document(tx, ["old", "kept", "newest"])
        tx.vectors.add(NS, [(kept, unit_vector(1)), (newest, unit_vector(2))])
    assert near(store, unit_vector(2), 1) == [address("passage", newest)]
    forget(store, "passage", newest)
    with store.write() as tx:
        tx.vectors.add(NS, [(old, unit_vector(3))])
    assert near(store, unit_vector(3), 1) == [address("passage", old)]
    assert sorted(near(store, unit_vector(3), 5)) == sorted(
        [address("passage", old), address("passage", kept)]
    )


def test_vectors_stored_before_their_kind_was_recorded_are_of_the_text_alone(tmp_path) -> None:
    import apsw

    from memors_core import semantic
    from memors_core.storage.sqlite.schema import MIGRATIONS
    from memors_core.storage.sqlite.vectors import code

    path = tmp_path / "v11.db"
    conn = apsw.Connection(str(path))
    for step in MIGRATIONS[:11]:
        conn.execute(step)
    conn.execute("PRAGMA user_version = 11")
    conn.execute(
        "INSERT INTO documents(id, namespace, uri, created_at) VALUES ('d1', ?, 'u', 'then');"
        "INSERT INTO document_versions(document, version, text_hash, created_at) "
        "VALUES ('d1', 1, 'h', 'then');"
        "INSERT INTO passages(id, namespace, document, version, position, text, hash, "
        "shingles, created_at) VALUES ('p1', ?, 'd1', 1, 0, 'Made before.', 'h', x'', 'then');"
        "INSERT INTO version_passages(document, version, position, passage) "
        "VALUES ('d1', 1, 0, 'p1');"
        "INSERT INTO passage_vectors(passage, namespace, code, vector) "
        "SELECT rowid, namespace, ?, ? FROM passages",
        (NS, NS, code(unit_vector(1)), unit_vector(1)),
    )
    conn.close()
    store = SqliteStore.open(path)
    try:
        with store.read() as tx:
            assert tx.vectors.count(NS) == 1
            assert tx.vectors.missing_count(NS, semantic.TEXT_ONLY) == 0
            assert [m[1] for m in tx.vectors.missing(NS, 0, 10)] == ["p1"]  # made again
            assert [h.text for h in tx.search.passages_like(NS, unit_vector(1), 5).rows] == [
                "Made before."
            ]  # and searched meanwhile
        with store.write() as tx:
            assert tx.vectors.add(NS, [("p1", unit_vector(2))]) == 1
        with store.read() as tx:  # the connection's codes follow the vector replaced
            [hit] = tx.search.passages_like(NS, unit_vector(2), 5).rows
            assert hit.score == pytest.approx(1.0, abs=1e-5)
            assert tx.vectors.missing_count(NS) == 0
    finally:
        store.close()
