"""A bulk load's postings, packed per term (issue 32), rank as rows of their
own do: the same hits with the same scores, through forgets and purges, and
in a store indexed before the packs whose old rows stay where they are."""

from __future__ import annotations

import random
from collections.abc import Iterator

import psycopg
import pytest

from memors_core.domain import search as rank
from memors_core.memory import Memory
from memors_core.storage.postgres import connection, schema
from memors_core.testing import postgres

from .conftest import roles_database

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

WORDS = [f"w{n}" for n in range(60)] + ["raft", "leader", "log", "quorum", "the", "of", "a"]
QUERIES = ["raft leader", "the log of a quorum", "w3 w17 raft", "w59 the", "of a the", "w1"]


def documents(count: int, seed: int = 7) -> list[dict]:
    """``count`` documents of two passages, words drawn unevenly (so some are
    in most passages and the common-term path runs)."""
    rng = random.Random(seed)
    weights = [1 / (r + 1) for r in range(len(WORDS))]
    return [
        {
            "uri": f"doc-{n}.txt",
            "text": "\n\n".join(
                " ".join(rng.choices(WORDS, weights, k=rng.randint(8, 30))) for _ in range(2)
            ),
        }
        for n in range(count)
    ]


@pytest.fixture(autouse=True)
def common_terms_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A term in a fifth of the rows is common here (2,000 rows by default),
    so the candidates' common terms are looked up as in a large store."""
    monkeypatch.setattr(rank, "COMMON_FLOOR", 20)
    monkeypatch.setattr(rank, "COMMON_SHARE", 0.2)


@pytest.fixture
def two_stores() -> Iterator[tuple[str, str]]:
    postgres.require_server()
    urls = postgres.new_database(), postgres.new_database()
    yield urls
    for url in urls:
        postgres.drop_database(url)


def ranked(url: str, queries: list[str] = QUERIES) -> dict[str, list[tuple[str, float]]]:
    with Memory.open(url) as memory:
        return {
            q: [(h.text, round(h.score, 9)) for h in memory.search(q, limit=15).results]
            for q in queries
        }


def layout(url: str) -> tuple[int, int]:
    """(rows of ``search_postings`` for passages, rows of ``search_packs``)."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM search_postings p JOIN search_docs d "
            "ON d.kind = 'p' AND d.rowid = p.rowid), (SELECT count(*) FROM search_packs)"
        ).fetchone()


def consistent(url: str) -> None:
    """Each term's frequency is the rows holding it (both layouts), and each
    index's row count the live rows it indexes."""
    with psycopg.connect(url) as conn:
        kept = conn.execute("SELECT term, n FROM search_df ORDER BY term").fetchall()
        counted = conn.execute(
            "SELECT term, count(*) FROM (SELECT term, rowid FROM search_postings UNION ALL "
            "SELECT k.term, r FROM search_packs k, unnest(k.rowids) r) p "
            "GROUP BY term ORDER BY term"
        ).fetchall()
        assert kept == counted
        docs = conn.execute("SELECT sum(docs) FROM search_stats WHERE kind = 'p'").fetchone()[0]
        live = conn.execute(
            "SELECT count(*) FROM passages p "
            "WHERE NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.target = p.id)"
        ).fetchone()[0]
        assert docs == live


def test_a_bulk_load_ranks_as_documents_remembered_one_at_a_time(two_stores) -> None:
    bulk, single = two_stores
    docs = documents(60)
    with Memory.open(bulk) as memory:
        memory.remember_many(docs)
    with Memory.open(single) as memory:
        for d in docs:
            memory.remember(d["text"], uri=d["uri"])
    assert layout(bulk)[0] == 0 and layout(bulk)[1] > 0  # packed…
    assert layout(single) == (0, 0) and pending(single) == 120  # … and pending
    found = ranked(bulk)
    assert found == ranked(single)
    assert all(found.values())
    consistent(bulk)


def pending(url: str) -> int:
    """Passages indexed by their own row alone, not packed yet."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT count(*) FROM search_docs WHERE kind = 'p' AND pack = 0"
        ).fetchone()[0]


def test_single_remembers_wait_unpacked_then_pack_and_rank_as_a_rebuild(two_stores) -> None:
    # A small remember's passages wait in their own index rows (no postings,
    # no frequencies updated); the flush that brings the namespace to
    # PENDING_ROWS of them packs them. Searches rank them throughout as a
    # rebuild's postings (a row per word) rank the same passages.
    url, rebuilt = two_stores
    docs = documents(70)  # 140 passages, two a document
    for u in two_stores:
        with Memory.open(u) as memory:
            for d in docs[:60]:
                memory.remember(d["text"], uri=d["uri"])
            memory.remember("Another namespace's raft.", namespace="other")
    assert pending(url) == 121 and layout(url) == (0, 0)
    with psycopg.connect(rebuilt) as conn:
        conn.execute("SELECT memors_search_rebuild()")
    assert pending(rebuilt) == 0 and layout(rebuilt)[0] > 0
    assert ranked(url) == ranked(rebuilt)
    for u in two_stores:
        with Memory.open(u) as memory:
            for d in docs[60:]:
                memory.remember(d["text"], uri=d["uri"])
            for h in memory.search("raft leader", limit=3).results:
                memory.forget(h.address)
    assert schema.PENDING_ROWS == 128
    # (the 128th passage of the namespace packed them; the other's one waits)
    assert layout(url)[0] == 0 and layout(url)[1] > 0
    assert 1 < pending(url) <= 140 - 128 + 1
    found = ranked(url)
    assert found == ranked(rebuilt) and all(found.values())
    consistent(url)
    with psycopg.connect(url) as conn:
        conn.execute("SELECT memors_search_rebuild()")
    assert ranked(url) == found


def test_the_application_roles_single_remembers_are_packed_as_the_owners(two_stores) -> None:
    # The packing runs in the flush, with the owner's rights: an
    # application role that may not call it directly still packs.
    owners, _ = two_stores
    docs = documents(66)  # 132 passages: packed at the 128th
    with Memory.open(owners) as memory:
        for d in docs:
            memory.remember(d["text"], uri=d["uri"])
    with roles_database() as roles:
        with Memory.open(roles.app_url) as memory:
            for d in docs:
                memory.remember(d["text"], uri=d["uri"])
        with (
            psycopg.connect(roles.app_url) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT memors_search_pack_pending(1)")
        assert pending(roles.owner_url) == pending(owners) == 4
        assert layout(roles.owner_url)[1] > 0
        assert ranked(roles.owner_url) == ranked(owners)
        consistent(roles.owner_url)


def test_forgotten_and_purged_passages_leave_their_packs(two_stores) -> None:
    bulk, single = two_stores
    docs = documents(60)
    for url in two_stores:
        with Memory.open(url) as memory:
            memory.remember_many(docs)
            hits = memory.search("raft leader", limit=6).results
            for h in hits[:3]:
                memory.forget(h.address)
            memory.forget(memory.search("quorum").results[0].address)
            memory.purge(hits[3].address)
            # a second load of changed documents in the same store
            memory.remember_many(documents(40, seed=8)[:40])
        consistent(url)
    # the single store's second load is one by one: rows of their own
    with Memory.open(single) as memory:
        for d in documents(5, seed=9):
            memory.remember(d["text"], uri=d["uri"])
    with Memory.open(bulk) as memory:
        memory.remember_many(documents(5, seed=9))
    assert ranked(bulk) == ranked(single)
    with psycopg.connect(bulk) as conn:
        erased = conn.execute(
            "SELECT count(*) FROM search_packs k, unnest(k.rowids) r "
            "WHERE r NOT IN (SELECT rowid FROM search_docs WHERE kind = 'p')"
        ).fetchone()[0]
    assert erased == 0


def _bulk_loaded_at_schema_14(owner_url: str) -> None:
    """A store bulk-loaded by memors before the packs (every posting a row)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection, "SCHEMA_VERSION", 14)
        with Memory.open(owner_url) as memory:
            memory.remember_many(documents(60))


def test_a_store_indexed_before_the_packs_keeps_its_results_after_the_upgrade(
    two_stores,
) -> None:
    fresh, _ = two_stores
    with Memory.open(fresh) as memory:
        memory.remember_many(documents(60))
    with roles_database(_bulk_loaded_at_schema_14) as roles:
        with psycopg.connect(roles.owner_url) as conn:  # every posting a row
            assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (14,)
            assert conn.execute("SELECT count(*) FROM search_postings").fetchone()[0] > 0
        assert ranked(roles.owner_url) == ranked(fresh)  # opening it migrated it
        # old rows forgotten, new ones packed beside them
        for url in (roles.owner_url, fresh):
            with Memory.open(url) as memory:
                for h in memory.search("w3 w17 raft", limit=4).results:
                    memory.forget(h.address)
                memory.remember_many(documents(30, seed=11))
        assert layout(roles.owner_url)[1] > 0
        assert ranked(roles.owner_url) == ranked(fresh)
        consistent(roles.owner_url)


def indexed(url: str) -> list[tuple]:
    """Each indexed passage's length and number of terms."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT rowid, length, cardinality(terms) FROM search_docs WHERE kind = 'p' "
            "ORDER BY rowid"
        ).fetchall()


def test_a_bulk_load_indexes_what_a_rebuild_from_the_text_does(two_stores) -> None:
    # The flush of a big, dense batch has its passages' terms hashed and
    # counted in a query of their own (which may run in parallel, migrations
    # 16 and 17), and adds their entities' terms; a batch whose passages
    # are scattered (old ones named by a new entity, beside new ones) is
    # indexed by the flush itself. Both index what the text says.
    url, _ = two_stores
    docs = documents(200)
    named = [{**d, "entities": ["Raft"]} if n % 7 == 0 else d for n, d in enumerate(docs)]
    with Memory.open(url) as memory:
        memory.remember_many(named)  # dense: new passages only
        again = [{**d, "entities": ["Consensus"]} for d in docs[:5]]
        new = [{**d, "uri": f"new-{d['uri']}"} for d in documents(35, seed=12)]
        memory.remember_many(again + new)  # scattered: the first passages and the last
    queries = [*QUERIES, "Consensus raft", "Raft log"]
    rows, found = indexed(url), ranked(url, queries)
    assert len(rows) == 470 and all(found.values())
    with psycopg.connect(url) as conn:
        conn.execute("SELECT memors_search_rebuild()")
    assert indexed(url) == rows
    assert ranked(url, queries) == found
    consistent(url)
