"""The queue's rules under random sequences of real operations (hypothesis
stateful testing): whatever happens to the store, compact is idempotent,
keeps one open item per kind and key, keeps open items up to date, never
recreates a skipped item whose inputs are unchanged, and every open item
can be submitted against (its payload is not outdated)."""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memors_core.errors import BadInput, Refused
from memors_core.plugins.kinds import KindContext
from memors_core.testing import temporary_memory
from memors_core.wire import to_json
from store_checks import rows_of, value_of

NAMES = ["Raft", "raft-protocol", "Paxos"]
WORDS = ["leader", "log", "term", "vote", "quorum", "write"]


class Queue(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._cm = temporary_memory()
        self.memory = self._cm.__enter__()
        self.passages: list[str] = []
        self.facts: list[str] = []
        self.docs = 0

    def teardown(self) -> None:
        self._cm.__exit__(None, None, None)

    # --- changes to the store -------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=6),
        same_doc=st.booleans(),
    )
    def remember(self, name, words, same_doc):
        if not same_doc or not self.docs:
            self.docs += 1
        text = f"[[{name}]] " + " ".join(words)
        body = f"[[{name}]] body {self.docs} {len(self.passages)}."
        r = self.memory.remember(f"{text}\n\n{body}", uri=f"doc-{self.docs}")
        self.passages.extend(r.passages)

    @precondition(lambda self: self.passages)
    @rule(data=st.data())
    def forget_passage(self, data):
        self.memory.forget(data.draw(st.sampled_from(self.passages)))

    @rule(
        name=st.sampled_from(NAMES),
        predicate=st.sampled_from(["leader", "Leader", "term"]),
        value=st.sampled_from(["n1", "N1", "n2"]),
        start=st.none() | st.sampled_from(["2024-01-01", "2024-02-01"]),
    )
    def record_fact(self, name, predicate, value, start):
        self.facts.append(self.memory.record_fact(name, predicate, value, valid_from=start).fact)

    @precondition(lambda self: self.facts)
    @rule(data=st.data())
    def forget_fact(self, data):
        self.memory.forget(data.draw(st.sampled_from(self.facts)))

    @precondition(lambda self: value_of(self.memory, "SELECT COUNT(*) FROM pages"))
    @rule(data=st.data())
    def forget_page(self, data):
        pages = [r[0] for r in rows_of(self.memory, "SELECT id FROM pages ORDER BY rowid")]
        self.memory.forget("memo://page/" + data.draw(st.sampled_from(pages)))

    @rule(pair=st.lists(st.sampled_from(NAMES), min_size=2, max_size=2, unique=True))
    def propose_merge(self, pair):
        try:
            self.memory.propose_merge(pair)
        except (BadInput, Refused):
            pass  # not yet an entity, already one, or rejected before
        except Exception as exc:  # NotFound is a MemorsError too
            assert type(exc).__name__ == "NotFound", exc

    # --- working the queue -------------------------------------------------------------

    @rule(kinds=st.none() | st.sampled_from([["page", "stale"], ["merge"], ["duplicate"]]))
    def compact(self, kinds):
        before = value_of(self.memory, "SELECT COALESCE(MAX(id), 0) FROM work_items")
        first = to_json(self.memory.compact(kinds=kinds))
        second = to_json(self.memory.compact(kinds=kinds))
        assert second["created"] == 0
        assert second["items"] == first["items"]
        # Nothing created now repeats a skipped item whose inputs are unchanged.
        repeats = rows_of(
            self.memory,
            """SELECT o.id, s.id FROM work_items o JOIN work_items s
               ON s.kind = o.kind AND s.key = o.key AND s.fingerprint = o.fingerprint
               WHERE o.id > ? AND s.status = 'skipped'""",
            (before,),
        )
        assert repeats == []

    def _open(self) -> list[dict]:
        return to_json(self.memory.items(status="open"))["items"]

    @precondition(
        lambda self: value_of(self.memory, "SELECT COUNT(*) FROM work_items WHERE status = 'open'")
    )
    @rule(data=st.data(), skip=st.booleans())
    def submit(self, data, skip):
        item = data.draw(st.sampled_from(self._open()))
        p = item["payload"]
        if skip:
            fields = {"skip": True, "reason": "later"}
        elif item["kind"] in ("page", "stale"):
            lines = [x["text"] for x in p["passages"]]
            lines += [f"{f['predicate']} {f['value']}" for f in p["facts"]]
            fields = {"content": "\n".join(lines) or "empty", "title": "T", "force": True}
        elif item["kind"] == "conflict":
            fields = {"keep": p["facts"][data.draw(st.integers(0, 1))]["address"]}
        elif item["kind"] == "merge":
            fields = {data.draw(st.sampled_from(["accept", "reject"])): True}
        else:
            fields = {"keep": [p["passages"][0]["address"]]}
        try:
            report = self.memory.submit(item["id"], **fields)
        except Refused as exc:
            raise AssertionError(f"an open item after compact was refused: {exc}") from exc
        assert report.stored
        event(f"submitted {item['kind']}{' (skip)' if skip else ''}")
        # Done or skipped: submitting again is refused.
        try:
            self.memory.submit(item["id"], skip=True, reason="again")
        except Refused:
            pass
        else:
            raise AssertionError("submitted twice")
        self.memory.compact()

    # --- what always holds -------------------------------------------------------------

    @invariant()
    def one_open_item_per_kind_and_key(self):
        rows = rows_of(
            self.memory,
            "SELECT kind, key, COUNT(*) FROM work_items WHERE status = 'open' GROUP BY kind, key",
        )
        assert all(n == 1 for _k, _key, n in rows)

    @invariant()
    def open_items_are_up_to_date_once_compacted(self):
        memory = self.memory
        # An incremental scan leaves the queue exactly as a full rescan would.
        incremental = to_json(memory.compact())
        full = to_json(memory.compact(full=True))
        assert full["created"] == 0
        assert full["items"] == incremental["items"]
        from memors_core.engine.compaction import list_items

        with memory.store.read() as tx:
            ctx = KindContext(tx, "default")
            for item in list_items(memory.store, "default", status="open"):
                current = memory.kinds.get(item.kind).current(ctx, item)
                assert current is not None, f"open {item.kind} item {item.id} no longer applies"
                assert current.fingerprint == item.fingerprint, f"{item.kind} {item.id} outdated"


Queue.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_queue_rules_hold_under_random_operations = Queue.TestCase
