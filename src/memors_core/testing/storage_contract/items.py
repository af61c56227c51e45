"""The storage contract: work items."""

from __future__ import annotations

import threading

from memors_core.domain.dates import now
from memors_core.domain.rows import OpenKey
from memors_core.storage.api import Storage
from memors_core.testing.storage_contract.fixtures import NS, OTHER_NS, Opener, StorageFixtures


class WorkItemContract(StorageFixtures):
    """A work item is finished exactly once, even when two connections race for it."""

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

    def test_items_are_opened_and_looked_up_by_key_many_at_once(self, storage: Storage) -> None:
        with storage.write() as tx:
            old = tx.items.create(NS, "page", "raft", "fp-old", {"n": 0}, now())
            tx.items.finish(old, "skipped", None, now())
            rows = [
                ("raft", "fp-r", {"n": 1}),
                ("paxos", "fp-p", {"entity": "Paxos", "quote": "it's 100%"}),
                ("zab", "fp-z", [1, 2]),
            ]
            ids = tx.items.create_many(NS, "page", rows, "2026-12-05T06:00:00Z")
            assert tx.items.create_many(NS, "page", [], now()) == {}
            assert sorted(ids) == ["paxos", "raft", "zab"]
            assert ids["raft"] < ids["paxos"] < ids["zab"] and old < ids["raft"]
            tx.items.create(OTHER_NS, "page", "raft", "fp-other", {}, now())
        with storage.read() as tx:
            for key, fingerprint, payload in rows:
                item = tx.items.get(ids[key], NS)
                assert item is not None
                assert (item.kind, item.key, item.status, item.fingerprint, item.payload) == (
                    "page",
                    key,
                    "open",
                    fingerprint,
                    payload,
                )
                assert item.created_at == item.updated_at == "2026-12-05T06:00:00Z"
            assert tx.items.open_keys(NS, "page") == {
                key: OpenKey(ids[key], fp) for key, fp, _p in rows
            }
            last = tx.items.last_for_keys(NS, "page", ["raft", "zab", "nothing"])
            assert sorted(last) == ["raft", "zab"]
            assert last["raft"] == tx.items.last_for_key(NS, "page", "raft")
            assert last["raft"].id == ids["raft"]  # the newest, not the skipped one
            assert tx.items.last_for_keys(NS, "merge", ["raft"]) == {}
            assert tx.items.last_for_keys(NS, "page", []) == {}

    def test_open_items_are_listed_by_kind_and_key(self, storage: Storage) -> None:
        with storage.write() as tx:
            a = tx.items.create(NS, "page", "raft", "fp-a", {"n": 1}, now())
            b = tx.items.create(NS, "page", "paxos", "fp-b", {"n": 2}, now())
            c = tx.items.create(NS, "merge", "raft|paxos", "fp-c", {"n": 3}, now())
            tx.items.create(OTHER_NS, "page", "raft", "fp-d", {}, now())
            tx.items.finish(b, "done", {}, now())
            tx.items.refresh(a, "fp-a2", {"n": 10}, now())
        with storage.read() as tx:
            assert tx.items.open_keys(NS, "page") == {"raft": OpenKey(a, "fp-a2")}
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
