"""The work-item queue: ids, idempotence, refresh, obsolete, skip, refusals,
one transaction per submission, and the persisted counters."""

from __future__ import annotations

import re

import attrs
import pytest

from memors_core import hookimpl
from memors_core.engine.compaction import load_item
from memors_core.errors import BadInput, NotFound, PluginError, Refused
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.testing import passages_about, temporary_memory
from memors_core.wire import to_json
from store_checks import value_of

KINDS = ["conflict", "duplicate", "merge", "page", "stale"]


def counters(memory) -> dict[tuple[str, str], float]:
    out = {}
    for line in memory.metrics().splitlines():
        m = re.fullmatch(r'memors_store_work_items_total\{event="(\w+)",kind="(\w+)"\} (\S+)', line)
        if m:
            out[(m.group(2), m.group(1))] = float(m.group(3))
    return out


def remember_about(memory, name: str, count: int, start: int = 0) -> list[str]:
    """Passages about ``name``; each name gets its own topic, so that two
    entities' passages are not near duplicates of each other."""
    out = []
    topic = f"{name.lower()} business"
    for i, text in enumerate(passages_about(name, start + count, topic)[start:], start):
        out.append(memory.remember(text, uri=f"{name}-{i}").document)
    return out


def compact(memory, **kw) -> dict:
    return to_json(memory.compact(**kw))


def test_an_item_has_an_integer_id_a_kind_a_key_a_fingerprint_and_a_complete_payload(memory):
    remember_about(memory, "Raft", 3)
    memory.record_fact("Raft", "elects", "leaders")
    result = compact(memory)
    assert set(result) == {"namespace", "created", "open", "items"}
    assert result["namespace"] == "default" and result["created"] == result["open"] == 1
    (item,) = result["items"]
    assert set(item) == {"id", "kind", "status", "fingerprint", "payload"}
    assert isinstance(item["id"], int) and item["kind"] == "page" and item["status"] == "open"
    stored = load_item(memory.store, item["id"], "default")
    assert stored.key and len(stored.fingerprint) == 32 and stored.resolution is None
    assert item["fingerprint"] == stored.fingerprint
    payload = item["payload"]
    assert set(payload) == {"entity", "passages", "facts"}
    assert set(payload["entity"]) == {"address", "name", "aliases"}
    assert [p["text"] for p in payload["passages"]] == passages_about("Raft", 3, "raft business")
    assert payload["facts"][0]["predicate"] == "elects"
    # memo://item/N is the same item; get shows it.
    view = to_json(memory.get(f"memo://item/{item['id']}"))
    assert view["payload"] == payload and view["status"] == "open" and view["kind"] == "page"


def test_compact_is_idempotent(memory):
    remember_about(memory, "Raft", 3)
    remember_about(memory, "Paxos", 4)
    memory.record_fact("Raft", "term", "3", valid_from="2024-01-01")
    memory.record_fact("Raft", "term", "4", valid_from="2024-02-01")
    first = compact(memory)
    assert first["created"] == 3
    before = counters(memory)
    second = compact(memory)
    assert second["created"] == 0
    assert second["items"] == first["items"]  # same ids, same payloads, oldest first
    assert [i["id"] for i in second["items"]] == sorted(i["id"] for i in first["items"])
    assert counters(memory) == before


def test_an_open_item_whose_inputs_changed_is_refreshed_in_place(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    remember_about(memory, "Raft", 1, start=3)
    fact = memory.record_fact("Raft", "elects", "leaders").fact
    result = compact(memory)
    assert result["created"] == 0  # refreshed items are not "created"
    (refreshed,) = result["items"]
    assert refreshed["id"] == item["id"]
    assert len(refreshed["payload"]["passages"]) == 4
    assert [f["address"] for f in refreshed["payload"]["facts"]] == [fact]
    c = counters(memory)
    assert c[("page", "created")] == 1 and c[("page", "refreshed")] == 1


def test_an_item_whose_condition_no_longer_holds_becomes_obsolete(memory):
    docs = remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    memory.forget(docs[0])
    result = compact(memory)
    assert result["open"] == 0 and result["items"] == []
    assert to_json(memory.get(f"memo://item/{item['id']}"))["status"] == "obsolete"
    assert counters(memory)[("page", "obsolete")] == 1
    with pytest.raises(Refused, match="obsolete, not open"):
        memory.submit(item["id"], content="Raft copies writes.", title="Raft")


def test_a_skipped_item_is_not_recreated_until_its_inputs_change(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    report = to_json(memory.submit(item["id"], skip=True, reason="not worth a page"))
    assert report["status"] == "skipped" and report["stored"] is True
    assert to_json(memory.get(f"memo://item/{item['id']}"))["resolution"] == {
        "skip": True,
        "reason": "not worth a page",
    }
    for _ in range(2):
        assert compact(memory)["created"] == 0
        assert compact(memory)["open"] == 0
    remember_about(memory, "Raft", 1, start=3)
    result = compact(memory)
    assert result["created"] == 1
    assert result["items"][0]["id"] != item["id"]
    assert len(result["items"][0]["payload"]["passages"]) == 4


def test_skip_needs_a_reason_and_takes_nothing_else(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]["id"]
    with pytest.raises(BadInput, match="reason"):
        memory.submit(item, skip=True)
    with pytest.raises(BadInput, match="reason"):
        memory.submit(item, skip=True, reason="   ")
    with pytest.raises(BadInput, match="only a reason"):
        memory.submit(item, skip=True, reason="r", title="T")
    with pytest.raises(BadInput, match="reason alone"):
        memory.submit(item, reason="why")
    assert to_json(memory.get(f"memo://item/{item}"))["status"] == "open"


def test_submitting_an_item_that_is_not_open_is_refused(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    content = "\n".join(p["text"] for p in item["payload"]["passages"])
    first = memory.submit(item["id"], content=content, title="Raft")
    assert first.stored
    with pytest.raises(Refused) as err:
        memory.submit(item["id"], content=content, title="Raft again")
    assert "is done, not open" in err.value.message and "compact" in err.value.message
    assert value_of(memory, "SELECT COUNT(*) FROM pages") == 1
    assert counters(memory)[("page", "refused")] == 1


def test_submitting_an_outdated_payload_is_refused_until_compact_runs_again(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    content = "\n".join(p["text"] for p in item["payload"]["passages"])
    memory.record_fact("Raft", "elects", "leaders")  # the inputs change after hand-out
    for dry_run in (True, False):
        with pytest.raises(Refused) as err:
            memory.submit(item["id"], content=content, title="Raft", dry_run=dry_run)
        assert "changed since its payload was handed out" in err.value.message
        assert "run compact again" in err.value.message
    assert value_of(memory, "SELECT COUNT(*) FROM pages") == 0
    assert to_json(memory.get(f"memo://item/{item['id']}"))["status"] == "open"
    refreshed = compact(memory)["items"][0]
    assert refreshed["id"] == item["id"]
    report = memory.submit(item["id"], content=content + "\nRaft elects leaders.", title="Raft")
    assert report.stored


def test_an_item_that_no_longer_applies_is_refused(memory):
    docs = remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    memory.forget(docs[1])
    with pytest.raises(Refused, match=r"no longer applies.*run compact again"):
        memory.submit(item["id"], content="Raft copies writes.", title="Raft")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"keep": ["memo://fact/0199"]}, "page item.*content \\+ title"),
        ({"accept": True}, "page item"),
        ({"content": "x"}, "title"),
        ({"content": 3, "title": "T"}, "content"),
        ({"content": "   ", "title": "T"}, "empty"),
        ({"content": "Raft.", "title": ""}, "title"),
    ],
)
def test_a_resolution_of_the_wrong_form_is_a_clear_error(memory, fields, message):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]["id"]
    with pytest.raises(BadInput, match=message):
        memory.submit(item, **fields)
    assert to_json(memory.get(f"memo://item/{item}"))["status"] == "open"


def test_unknown_items_and_bad_ids_are_bad_input(memory):
    with pytest.raises(NotFound, match="no work item 42"):
        memory.submit(42, skip=True, reason="r")
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]["id"]
    with pytest.raises(NotFound):
        memory.submit(item, skip=True, reason="r", namespace="other")
    for bad in (0, -1, True, "memo://page/0199", "x"):
        with pytest.raises(BadInput):
            memory.submit(bad, skip=True, reason="r")
    assert memory.submit(f"memo://item/{item}", skip=True, reason="r").status == "skipped"


def test_namespaces_are_separate_queues(memory):
    remember_about(memory, "Raft", 3)
    other = memory.remember("[[Raft]] a\n\n[[Raft]] b\n\n[[Raft]] c", namespace="other")
    assert other.passages
    assert compact(memory, namespace="other")["open"] == 1
    assert compact(memory)["open"] == 1
    ids = {compact(memory)["items"][0]["id"], compact(memory, namespace="other")["items"][0]["id"]}
    assert len(ids) == 2


def test_limit_and_kinds_select_what_compact_returns(memory):
    remember_about(memory, "Raft", 3)
    remember_about(memory, "Paxos", 3)
    assert compact(memory, limit=0) == {
        "namespace": "default",
        "created": 2,
        "open": 2,
        "items": [],
    }
    one = compact(memory, limit=1)
    assert one["open"] == 2 and len(one["items"]) == 1
    assert compact(memory, kinds=["conflict"])["open"] == 0
    with pytest.raises(BadInput, match="unknown kind 'nope'"):
        compact(memory, kinds=["nope"])


# --- one transaction per submission ------------------------------------------------


@attrs.frozen
class NoteResolution:
    text: str


class FailingKind(Kind):
    """Writes a fact, then fails: the fact must not survive."""

    name = "failing"
    resolution = NoteResolution

    def scan(self, ctx):
        yield Candidate("only", fingerprint("only"), lambda: {"note": "write one"})

    def apply(self, ctx, item, resolution):
        ctx.store.counters.bump("probe")
        raise RuntimeError("disk on fire")


class FailingPlugin:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(FailingKind())


class BrokenCheck:
    @hookimpl
    def memors_check_submission(self, resolution):
        raise ValueError("cannot judge")


def test_a_failing_apply_stores_nothing_and_leaves_the_item_open():
    with temporary_memory(plugins=[("failing", FailingPlugin())], entrypoints=False) as memory:
        item = compact(memory)["items"][0]["id"]
        with pytest.raises(
            PluginError,
            match=r"kind .failing. \(plugin .failing.\) failed in apply: RuntimeError: disk on fire",
        ):
            memory.submit(item, text="hello")
        assert value_of(memory, "SELECT COUNT(*) FROM counters WHERE name = 'probe'") == 0
        assert to_json(memory.get(f"memo://item/{item}"))["status"] == "open"


def test_a_check_that_raises_flags_the_submission():
    plugins = [("failing", FailingPlugin()), ("broken-check", BrokenCheck())]
    with temporary_memory(plugins=plugins, entrypoints=False) as memory:
        item = compact(memory)["items"][0]["id"]
        report = to_json(memory.submit(item, text="hello"))
        assert report["stored"] is False
        assert report["checks"]["broken-check"] == {
            "passed": False,
            "flagged": [{"error": "ValueError: cannot judge"}],
        }


def test_counters_count_every_event_across_kinds(memory):
    remember_about(memory, "Raft", 3)
    item = compact(memory)["items"][0]
    memory.submit(item["id"], content="Invented zebras.", title="Raft")  # refused by a check
    memory.submit(item["id"], content="Invented zebras.", title="Raft", dry_run=True)
    memory.submit(item["id"], skip=True, reason="later")
    c = counters(memory)
    assert {k: v for k, v in c.items() if v} == {
        ("page", "created"): 1,
        ("page", "refused"): 1,
        ("page", "skipped"): 1,
    }
    assert {k for k, _e in c} == set(KINDS)


def one_open_item_of_each_kind(memory) -> list[dict]:
    """A stale page, a conflict, a merge candidate and a duplicate pair."""
    remember_about(memory, "Raft", 3)
    memory.remember("[[raft!]] is the same name, folded.", uri="odd")
    memory.record_fact("Raft", "leader", "n1")
    memory.record_fact("Raft", "leader", "n2")
    text = "The same paragraph appears in two different documents word for word."
    memory.remember(text, uri="copy-1")
    memory.remember(text, uri="copy-2")
    page = compact(memory, kinds=["page"])["items"][0]
    content = "\n".join(p["text"] for p in page["payload"]["passages"])
    memory.submit(page["id"], content=content + "\nleader n1 n2", title="Raft")
    remember_about(memory, "Raft", 2, start=3)  # two new passages: the page is stale
    items = compact(memory)["items"]
    assert sorted(i["kind"] for i in items) == ["conflict", "duplicate", "merge", "stale"]
    return items


def test_every_kind_can_be_skipped_and_stays_skipped(memory):
    for item in one_open_item_of_each_kind(memory):
        report = memory.submit(item["id"], skip=True, reason=f"not now ({item['kind']})")
        assert report.status == "skipped" and report.stored
        assert to_json(memory.get(f"memo://item/{item['id']}"))["resolution"]["reason"]
    assert compact(memory) == {"namespace": "default", "created": 0, "open": 0, "items": []}
    assert compact(memory, full=True)["created"] == 0


WRONG = {
    "stale": ({"keep": ["memo://passage/01990000-0000-7000-8000-000000000000"]}, "content"),
    "conflict": ({"accept": True}, "keep = one fact address"),
    "merge": ({"content": "x", "title": "T"}, "accept or reject"),
    "duplicate": ({"reject": True}, "keep = one or more passage addresses"),
}


def test_each_kind_names_what_it_takes_when_the_form_is_wrong(memory):
    for item in one_open_item_of_each_kind(memory):
        fields, hint = WRONG[item["kind"]]
        with pytest.raises(BadInput) as err:
            memory.submit(item["id"], **fields)
        message = err.value.message
        assert f"item {item['id']} is a {item['kind']} item" in message
        assert hint in message and "skip with a reason" in message
        assert "\n" not in message
    assert compact(memory)["open"] == 4
