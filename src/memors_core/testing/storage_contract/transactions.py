"""The storage contract: transactions."""

from __future__ import annotations

import pytest

from memors_core.errors import MemorsError, PluginError
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, Opener, StorageFixtures
from memors_core.testing.storage_contract.helpers import Boom, add_document, remember


class TransactionContract(StorageFixtures):
    """Writes are transactions: a failed one leaves nothing, a nested one is a savepoint,
    a read sees one snapshot."""

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

    def test_a_brief_read_answers_as_a_read_whatever_it_sends(self, storage: Storage) -> None:
        with storage.write() as tx:
            _, [first, second] = add_document(tx, ["First.", "Second."])
        # one statement (on a server, sent with the read's begin and end)
        one = storage.brief_read(lambda tx: tx.passages.get(first))
        assert one is not None and one.text == "First."
        # two: the read runs again whole, and answers as one read would
        runs: list[int] = []

        def both(tx):  # type: ignore[no-untyped-def]
            runs.append(1)
            return tx.passages.get(first), tx.passages.get(second)

        a, b = storage.brief_read(both)
        assert a is not None and b is not None and (a.text, b.text) == ("First.", "Second.")
        assert 1 <= len(runs) <= 2
        # inside a transaction, it is part of it
        with storage.write() as tx:
            _, [third] = add_document(tx, ["Third."])
            seen = storage.brief_read(lambda inner: inner.passages.get(third))
            assert seen is not None and seen.text == "Third."
        # nothing is left open: a write goes on as ever
        with storage.write() as tx:
            tx.counters.bump("after")
        with storage.read() as tx:
            assert tx.counters.read("after")

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

    def test_native_sql_runs_sqlite_spelling_on_the_store_s_engine(self, storage: Storage) -> None:
        # What a kind's engines share it writes once, in SQLite's spelling.
        with storage.write() as tx:
            sql = tx.native("sql")
            assert sql.engine == storage.engine
            sql.execute("CREATE TABLE kind_seen(passage TEXT PRIMARY KEY, n INTEGER NOT NULL)")
            sql.execute(
                "INSERT OR IGNORE INTO kind_seen(passage, n) SELECT value, ? FROM json_each(?)",
                (7, '["b", "a", "a"]'),
            )
            assert sql.all("SELECT passage, n FROM kind_seen ORDER BY passage") == [
                ("a", 7),
                ("b", 7),
            ]
            assert sql.scalar("SELECT n FROM kind_seen WHERE passage = :p", {"p": "b"}) == 7
