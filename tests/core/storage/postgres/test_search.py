"""PostgreSQL search: the BM25 index the engine keeps in plain tables.

The storage contract checks what both engines find; these check what the
PostgreSQL index adds on top: scores that mean something however common a
word is, statistics per namespace and of live rows only (forgotten and
purged rows leave them), any text as a query, and stemming like SQLite's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from memors_core.domain.ids import address
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract import (
    NS,
    OTHER_NS,
    Opener,
    PostgresStorage,
    add_document,
    forget,
    remember,
    words,
)

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def scores(storage: Storage, query: str, namespace: str = NS) -> dict[str, float]:
    with storage.read() as tx:
        return {h.address: h.score for h in tx.search.passages(namespace, words(query), 100).rows}


class TestPostgresSearch(PostgresStorage):
    def test_every_match_scores_well_above_zero_even_for_a_word_everywhere(
        self, storage: Storage
    ) -> None:
        ids = [
            remember(storage, f"Raft note {n}: the raft log is replicated.", about="Raft")
            for n in range(30)
        ]
        with storage.write() as tx:
            tx.facts.record(NS, "Raft", "log", "replicated raft entries")
        with storage.read() as tx:
            hits = tx.search.passages(NS, words("raft"), 100).rows
            others = [
                *tx.search.facts(NS, words("raft"), 10, None).rows,
                *tx.search.entities(NS, words("raft"), 10).rows,
            ]
        # "raft" is in every passage: FTS5's own IDF would be clamped to 1e-6 here.
        assert {h.address for h in hits} == {address("passage", i) for i in ids}
        assert all(h.score > 1e-3 for h in hits)
        assert len(others) == 2 and all(h.score > 1e-3 for h in others)

    def test_the_rarer_word_weighs_more(self, storage: Storage) -> None:
        common = [remember(storage, f"Paxos note {n} about leaders.") for n in range(10)]
        rare = remember(storage, "A lone note about quorums.")
        found = scores(storage, "leaders quorums")
        assert found[address("passage", rare)] > max(found[address("passage", c)] for c in common)

    def test_a_namespace_ranks_alike_however_another_grows(self, storage: Storage) -> None:
        remember(storage, "Raft elects a leader by heartbeat timeout.")
        remember(storage, "A follower becomes a candidate when the heartbeat stops.")
        remember(storage, "Log entries are replicated to a quorum.")
        before = scores(storage, "raft heartbeat leader")
        for n in range(40):
            remember(storage, f"Heartbeat {n}: raft raft leader", namespace=OTHER_NS)
        after = scores(storage, "raft heartbeat leader")
        assert after == pytest.approx(before, rel=1e-12)
        assert len(scores(storage, "raft heartbeat leader", OTHER_NS)) == 40

    def test_a_question_of_stop_words_only_finds_them(self, storage: Storage) -> None:
        with_them = remember(storage, "What is it that they were about?")
        remember(storage, "Raft elects leaders.")
        assert list(scores(storage, "what is it")) == [address("passage", with_them)]
        # With a content word present the stop words are dropped from the query.
        assert scores(storage, "what is raft").keys() == scores(storage, "raft").keys()

    @pytest.mark.parametrize(
        "query",
        ["a & b | !c:*", "raft & !leader:* | (", "'raft' <-> \"leader\"", "raft:A*B", "\\ raft ;"],
    )
    def test_query_operators_and_quotes_are_just_words(self, storage: Storage, query: str) -> None:
        raft = remember(storage, "Raft elects a leader.", about="Raft")
        c = remember(storage, "The c compiler and the b language.")
        with storage.write() as tx:
            tx.facts.record(NS, "Raft", "needs", "a leader")
        with storage.read() as tx:
            found = {h.address for h in tx.search.passages(NS, words(query), 10).rows}
            tx.search.facts(NS, words(query), 10, None)
            tx.search.entities(NS, words(query), 10)
            tx.search.pages(NS, words(query), 10)
        if "raft" in query:
            assert address("passage", raft) in found
        else:
            assert found == {address("passage", c)}

    def test_words_are_stemmed_and_split_at_every_non_letter(self, storage: Storage) -> None:
        attended = remember(storage, "She attended the meetings at lab.example.com/notes_2024.")
        assert list(scores(storage, "attend meeting")) == [address("passage", attended)]
        assert list(scores(storage, "example")) == [address("passage", attended)]
        assert list(scores(storage, "notes 2024")) == [address("passage", attended)]

    def test_a_forgotten_passage_is_not_found_and_leaves_the_statistics(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        kept = remember(storage, "The heartbeat keeps followers from starting elections.")
        gone = remember(storage, "The heartbeat interval is fifty milliseconds.")
        remember(storage, "Elections need a quorum.")
        forget(storage, "passage", gone)
        found = scores(storage, "heartbeat elections")
        assert address("passage", gone) not in found

        fresh = open_storage("fresh")
        remember(fresh, "The heartbeat keeps followers from starting elections.")
        remember(fresh, "Elections need a quorum.")
        again = scores(fresh, "heartbeat elections")
        assert sorted(found.values()) == pytest.approx(sorted(again.values()), rel=1e-12)
        assert found[address("passage", kept)] == pytest.approx(max(again.values()), rel=1e-12)

    def test_a_purged_passage_leaves_the_index_and_its_words(self, storage: Storage) -> None:
        kept = remember(storage, "The rotation happens every ninety days.")
        gone = remember(storage, "The secret rotation key is swordfish.")
        before = scores(storage, "rotation")[address("passage", kept)]
        with storage.write() as tx:
            conn = tx.native("postgres")
            conn.execute("SET LOCAL memors.purge_gate = 'open'")
            conn.execute("DELETE FROM passages WHERE id = %s", (gone,))
        after = scores(storage, "rotation")
        assert list(after) == [address("passage", kept)]
        assert after[address("passage", kept)] != pytest.approx(before)
        assert scores(storage, "swordfish") == {}
        with storage.read() as tx:
            left = (
                tx.native("postgres")
                .execute(
                    "SELECT count(*), sum(cardinality(terms)), "
                    "(SELECT count(*) FROM search_postings), (SELECT count(*) FROM search_packs) "
                    "FROM search_docs WHERE kind = 'p'"
                )
                .fetchone()
            )
        assert left == (1, 6, 0, 0)  # the kept passage's six words only

    def test_passages_are_found_however_their_transaction_ends(self, storage: Storage) -> None:
        with storage.write() as tx:
            _, [first] = add_document(tx, ["Raft elects a leader."])
            # Deferred work done early (as SET CONSTRAINTS … IMMEDIATE does) …
            tx.native("postgres").execute("SET CONSTRAINTS ALL IMMEDIATE")
            tx.native("postgres").execute("SET CONSTRAINTS ALL DEFERRED")
            # … and passages stored after it are still indexed at commit.
            _, [second, gone] = add_document(tx, ["A raft follower.", "A raft candidate."])
            tx.tombstones.add(NS, "passage", gone, "forgotten", "in the same transaction")
        assert set(scores(storage, "raft")) == {
            address("passage", first),
            address("passage", second),
        }

    def test_document_frequencies_count_the_postings_through_every_change(
        self, storage: Storage
    ) -> None:
        def frequencies() -> tuple[list[tuple], list[tuple]]:
            with storage.read() as tx:
                conn = tx.native("postgres")
                # (a namespace's pending rows count where a search counts
                # them, beside the frequencies kept for the rest)
                pending = "SELECT unnest(terms) AS term FROM search_docs WHERE pack = 0"
                kept = conn.execute(
                    "SELECT term, sum(n) FROM (SELECT term, n FROM search_df UNION ALL "
                    f"SELECT term, 1 FROM ({pending}) x) f GROUP BY term ORDER BY term"
                ).fetchall()
                counted = conn.execute(
                    "SELECT term, count(*) FROM (SELECT term FROM search_postings UNION ALL "
                    "SELECT term FROM search_packs, unnest(rowids) UNION ALL "
                    f"{pending}) f GROUP BY term ORDER BY term"
                ).fetchall()
            return kept, counted

        first = remember(storage, "Raft elects a leader.", about="Raft")
        remember(storage, "Raft replicates a log.", about="Raft protocol")
        remember(storage, "A leader of Paxos.", namespace=OTHER_NS)
        gone = remember(storage, "The secret leader rotation.")
        with storage.write() as tx:  # documents of several passages sharing words
            _, forgotten = add_document(tx, [f"Leader {n} of the raft log." for n in range(6)])
            _, erased = add_document(tx, [f"The raft log's entry {n}." for n in range(4)])
        kept, counted = frequencies()
        assert kept == counted and kept
        assert forget(storage, "passage", gone)
        with storage.write() as tx:  # a whole document forgotten in one transaction
            assert tx.tombstones.add_many(NS, "passage", forgotten, "forgotten") == forgotten
        with storage.write() as tx:  # several passages erased in one transaction
            conn = tx.native("postgres")
            conn.execute("SET LOCAL memors.purge_gate = 'open'")
            conn.execute("DELETE FROM passages WHERE id = ANY (%s)", (erased[:3],))
        kept, counted = frequencies()
        assert kept == counted
        assert not {address("passage", p) for p in forgotten} & set(scores(storage, "leader"))
        assert list(scores(storage, "entry")) == [address("passage", erased[3])]
        with storage.write() as tx:  # a merge moves the entity terms
            tx.entities.merge(
                tx.entities.resolve("Raft", NS), tx.entities.resolve("Raft protocol", NS), NS
            )
        with storage.write() as tx:  # an erasure (purge's route)
            conn = tx.native("postgres")
            conn.execute("SET LOCAL memors.purge_gate = 'open'")
            conn.execute("DELETE FROM passages WHERE id = %s", (first,))
        kept, counted = frequencies()
        assert kept == counted
        with storage.write() as tx:
            tx.native("postgres").execute("SELECT memors_search_rebuild()")
        rebuilt, counted = frequencies()  # (a rebuild numbers the indexes, and so the terms, anew)
        assert rebuilt == counted and len(rebuilt) == len(kept)


def _written_at_schema_17(owner_url: str) -> None:
    """A store written by memors before migration 18: words cut at every
    letter beyond ASCII."""
    from memors_core import Memory
    from memors_core.storage.postgres import connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(connection, "SCHEMA_VERSION", 17)
        with Memory.open(owner_url) as memory:
            memory.remember("Le café de Zürich sert un résumé naïf.")
            memory.remember("A plain passage about coffee.")
            memory.record_fact("Zoë", "lives in", "Zürich")
            assert memory.search("café").results == []  # indexed as "caf"
            assert len(memory.search("coffee").results) == 1


def test_a_store_indexed_before_migration_18_finds_its_accented_words_after_it():
    import psycopg

    from memors_core import Memory

    from .conftest import roles_database

    with roles_database(_written_at_schema_17) as roles:
        with psycopg.connect(roles.owner_url) as conn:
            assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (17,)
        with Memory.open(roles.owner_url) as memory:  # the owner's open migrates it
            for question in ("café", "cafe", "Zürich", "résumé"):
                assert len(memory.search(question).results) == 1, question
            assert len(memory.search("coffee").results) == 1  # ASCII words as before
            assert len(memory.search("zoe", granularity="fact").results) == 1
            assert [h.text for h in memory.search("Zoë", granularity="entity").results] == ["Zoë"]


class TestAlongside(PostgresStorage):
    """Work alongside a read (a hybrid search's vector steps) runs on a
    second connection of the pool, in the read's own snapshot."""

    @staticmethod
    def _work(
        started: threading.Event, meet: threading.Barrier | None = None
    ) -> Callable[[Any], tuple[int, list[str]]]:
        def work(search: Any) -> tuple[int, list[str]]:
            started.set()
            if meet is not None:  # (the works run at once, each holding its connection)
                meet.wait(300)
            pid = search.tx.native("postgres").info.backend_pid
            return pid, [h.address for h in search.passages(NS, words("raft"), 10).rows]

        return work

    def test_it_runs_on_another_connection_and_sees_what_the_read_sees(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        before = address("passage", remember(storage, "Raft elects a leader."))
        other = open_storage()
        started = threading.Event()
        with storage.read() as tx:
            assert [h.address for h in tx.search.passages(NS, words("raft"), 10).rows] == [before]
            remember(other, "Raft replicates the log to followers.")  # after the read began
            answer = tx.search.alongside(self._work(started))
            assert started.wait(300)  # (the helper has its connection: no claim is possible)
            pid, found = answer()
            assert pid != tx.native("postgres").info.backend_pid
            assert found == [before]
            # the read goes on, in its snapshot, on its own connection
            assert [h.address for h in tx.search.passages(NS, words("raft"), 10).rows] == [before]
        with storage.read() as tx:
            assert len(tx.search.alongside(self._work(threading.Event()))()[1]) == 2

    @staticmethod
    def _pooled(
        open_storage: Opener, monkeypatch: pytest.MonkeyPatch, size: int
    ) -> tuple[Storage, str]:
        """A store whose pool holds ``size`` connections at most, and the address
        of the one passage remembered in it."""
        monkeypatch.setenv("MEMORS_PG_POOL_SIZE", str(size))
        storage = open_storage()
        return storage, address("passage", remember(storage, "Raft elects a leader."))

    def test_with_one_connection_it_runs_in_the_read_itself(
        self, open_storage: Opener, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        storage, before = self._pooled(open_storage, monkeypatch, 1)
        with storage.read() as tx:
            pid, found = tx.search.alongside(self._work(threading.Event()))()
            assert pid == tx.native("postgres").info.backend_pid and found == [before]

    def test_with_every_connection_busy_the_asker_runs_it_once_itself(
        self, open_storage: Opener, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        storage, before = self._pooled(open_storage, monkeypatch, 2)
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:  # another thread's read keeps the pool's second connection
            with storage.read() as tx:
                tx.search.passages(NS, words("raft"), 1)
                holding.set()
                release.wait(300)

        holder = threading.Thread(target=hold)
        holder.start()
        runs: list[int] = []

        def work(search: Any) -> tuple[int, list[str]]:
            runs.append(1)
            return self._work(threading.Event())(search)

        try:
            assert holding.wait(300)
            with storage.read() as tx:
                assert tx.search.passages(NS, words("raft"), 10).rows  # the read has begun
                answer = tx.search.alongside(work)
                pid, found = answer()  # no connection free: claimed, run here
                assert pid == tx.native("postgres").info.backend_pid and found == [before]
        finally:
            release.set()
            holder.join(300)
        storage.close()  # (waits for the helper, which found the work claimed)
        assert runs == [1]

    def test_its_error_reaches_the_asker_and_the_read_goes_on(self, storage: Storage) -> None:
        before = address("passage", remember(storage, "Raft elects a leader."))
        started = threading.Event()

        def fails(search: Any) -> None:
            started.set()
            search.passages(NS, words("raft"), 10)
            raise LookupError("the work's own error")

        with storage.read() as tx:
            answer = tx.search.alongside(fails)
            assert started.wait(300)
            with pytest.raises(LookupError, match="the work's own error"):
                answer()
            assert [h.address for h in tx.search.passages(NS, words("raft"), 10).rows] == [before]

    def test_two_works_alongside_one_read_share_its_one_snapshot(
        self, storage: Storage, open_storage: Opener
    ) -> None:
        before = address("passage", remember(storage, "Raft elects a leader."))
        other = open_storage()
        first, second, meet = threading.Event(), threading.Event(), threading.Barrier(2)
        with storage.read() as tx:
            mine = tx.native("postgres").info.backend_pid
            assert [h.address for h in tx.search.passages(NS, words("raft"), 10).rows] == [before]
            remember(other, "Raft replicates the log to followers.")  # after the read began
            answers = [
                tx.search.alongside(self._work(first, meet)),
                tx.search.alongside(self._work(second, meet)),
            ]
            assert first.wait(300) and second.wait(300)  # (both on helpers' connections)
            (pid_a, found_a), (pid_b, found_b) = (answer() for answer in answers)
            assert found_a == found_b == [before]
            assert len({mine, pid_a, pid_b}) == 3
