"""The service (SPEC §2–§4, §10) through the library: layout and plugin host,
remember and versions, entities, facts, merges, forget, get, namespaces."""

from __future__ import annotations

import importlib.metadata

import pytest

from memors_core import BadInput, Memory, NotFound, PluginError, Refused, hookimpl
from memors_core.domain.ids import uuid7
from memors_core.plugins.manager import ENTRY_POINT_GROUP, build_plugin_manager
from memors_core.testing import passages_about, temporary_memory
from memors_core.wire import to_json
from store_checks import rows_of, value_of

BUILT_IN_KINDS = {"page", "stale", "conflict", "merge", "duplicate"}


# --- layout and the plugin host (SPEC §2, STYLE 4–6) ------------------------------------------


def test_one_distribution_four_packages_a_console_script_and_the_kinds_entry_points():
    dist = importlib.metadata.distribution("memors")
    top = set(dist.read_text("top_level.txt").split()) if dist.read_text("top_level.txt") else None
    if top is not None:
        assert {"memors_core", "memors_kinds", "memors_cli", "memors_mcp"} <= top
    for package in ("memors_core", "memors_kinds", "memors_cli", "memors_mcp"):
        assert importlib.util.find_spec(package) is not None
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"memors-mcp": "memors_cli.main:entrypoint"}
    kinds = {ep.name: ep.value for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP}
    # A kind's entry-point name is its kind name; each is a module of memors_kinds.
    assert kinds == {name: f"memors_kinds.{name}" for name in BUILT_IN_KINDS}


def test_the_five_built_in_kinds_arrive_through_entry_points():
    pm = build_plugin_manager()
    for name in BUILT_IN_KINDS:
        assert pm.get_plugin(name) is not None
    assert set(pm.kinds.names()) == BUILT_IN_KINDS
    assert set(build_plugin_manager(entrypoints=False).kinds.names()) == set()


def test_a_fresh_plugin_manager_per_call(fresh_store, tmp_path):
    a, b = build_plugin_manager(), build_plugin_manager()
    assert a is not b

    class Extra:
        @hookimpl
        def memors_extract_entities(self, text):
            return ["Extra"]

    a.register(Extra(), name="extra")
    assert b.get_plugin("extra") is None
    assert build_plugin_manager().get_plugin("extra") is None
    with Memory.open(fresh_store("1.db")) as m1, Memory.open(fresh_store("2.db")) as m2:
        assert m1.pm is not m2.pm


def test_disabled_plugins_are_blocked_by_name(monkeypatch):
    monkeypatch.setenv("MEMORS_DISABLE_PLUGINS", "duplicate, stale")
    pm = build_plugin_manager()
    assert set(pm.kinds.names()) == BUILT_IN_KINDS - {"duplicate", "stale"}
    assert pm.is_blocked("duplicate")
    with (
        temporary_memory() as memory,
        pytest.raises(BadInput, match="unknown kind 'duplicate': registered kinds are"),
    ):
        memory.compact(kinds=["duplicate"])


def _broken_entry_point(tmp_path, monkeypatch):
    (tmp_path / "memors_test_broken_kind.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = importlib.metadata.EntryPoint(
        name="broken", value="memors_test_broken_kind", group=ENTRY_POINT_GROUP
    )
    real = importlib.metadata.entry_points

    def entry_points(**kw):
        found = list(real(**kw))
        return [*found, broken] if kw.get("group") == ENTRY_POINT_GROUP else found

    monkeypatch.setattr("memors_core.plugins.manager.entry_points", entry_points)


def test_a_plugin_that_fails_to_load_is_set_aside_and_named(tmp_path, monkeypatch):
    _broken_entry_point(tmp_path, monkeypatch)
    pm = build_plugin_manager()  # the others load (issue 13, point 8)
    assert pm.plugin_errors == {"broken": "RuntimeError: boom at import"}
    assert pm.entry_points["broken"] == "memors_test_broken_kind"
    assert set(pm.kinds.names()) == BUILT_IN_KINDS
    # Blocking it by name makes it silent.
    monkeypatch.setenv("MEMORS_DISABLE_PLUGINS", "broken")
    assert build_plugin_manager().plugin_errors == {}


def test_a_plugin_whose_kind_registration_raises_is_named():
    class Bad:
        @hookimpl
        def memors_register_kinds(self, registry):
            raise ValueError("cannot count")

    with pytest.raises(PluginError, match=r"plugin 'bad' failed to register its kinds.*cannot"):
        build_plugin_manager(plugins=[("bad", Bad())])


def test_an_invalid_plugin_is_refused_by_check_pending():
    class Misspelt:
        @hookimpl
        def memors_extract_entity(self, text):  # no such hook
            return []

    with pytest.raises(PluginError, match="'misspelt'"):
        build_plugin_manager(plugins=[("misspelt", Misspelt())])


# --- remember (SPEC §3, §10) -------------------------------------------------------------------


def test_remember_returns_exactly_the_wire_shape(memory):
    r = to_json(memory.remember("Raft elects a leader.\n\nThe leader appends entries."))
    assert set(r) == {"document", "passages", "entities"}
    assert r["document"].startswith("memo://document/")
    assert len(r["passages"]) == 2
    assert all(p.startswith("memo://passage/") for p in r["passages"])
    assert r["entities"] == []


@pytest.mark.sqlite_only("counts commits with apsw's commit hook")
def test_remember_many_returns_counts_and_commits_once_per_batch(memory):
    commits = []
    memory.store.conn.set_commit_hook(lambda: commits.append(1) or False)
    docs = [{"text": f"Document {i} about [[Node {i % 7}]].", "uri": f"u{i}"} for i in range(1200)]
    result = to_json(memory.remember_many(docs, batch=500))
    assert result == {
        "documents": 1200,
        "passages": 1200,
        "entities": 7,
        "new": 1200,
        "new_versions": 0,
        "unchanged": 0,
    }
    assert len(commits) == 3  # 500 + 500 + 200, not one per document
    memory.store.conn.set_commit_hook(None)


#: The documents each transaction of a load stored (its rows share its time).
_BATCH_SIZES = "SELECT COUNT(*) FROM passages GROUP BY created_at ORDER BY created_at"


def test_remember_many_stores_the_engines_batch_of_documents_per_transaction(memory):
    # A batch's rows share its transaction's time: one time per transaction.
    # PostgreSQL's index work at commit costs less per document in larger
    # ones; the first batches are an eighth of the engine's, doubling, so the
    # first rows do not wait for a whole batch to be prepared.
    docs = [{"text": f"Document {i} about node {i % 7}.", "uri": f"u{i}"} for i in range(3000)]
    memory.remember_many(docs)
    sizes = [r[0] for r in rows_of(memory, _BATCH_SIZES)]
    if memory.store.engine == "postgres":  # 2,000 a batch
        assert sizes == [250, 500, 1000, 1250]
    else:  # 500 a batch
        assert sizes == [62, 125, 250, 500, 500, 500, 500, 500, 63]


def test_remember_many_with_a_batch_given_stores_that_many_from_the_first(memory):
    docs = [{"text": f"Document {i} about node {i % 7}.", "uri": f"u{i}"} for i in range(700)]
    memory.remember_many(docs, batch=300)
    sizes = [r[0] for r in rows_of(memory, _BATCH_SIZES)]
    assert sizes == [300, 300, 100]


def test_remember_many_names_the_bad_document_and_keeps_earlier_batches(memory):
    docs = [{"text": f"doc {i}"} for i in range(5)] + [{"text": ""}, {"text": "after"}]
    with pytest.raises(BadInput, match=r"^document 6: text is empty"):
        memory.remember_many(docs, batch=2)
    assert value_of(memory, "SELECT COUNT(*) FROM documents") == 5
    with pytest.raises(BadInput, match="document 1: unexpected field"):
        memory.remember_many([{"text": "x", "body": "y"}])


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"text": ""}, "text is empty"),
        ({"text": " \n\t "}, "text is empty"),
        ({"text": 42}, "text must be a string"),
        ({"text": "a\x00b"}, "NUL"),
        ({"text": "\ud800"}, "surrogates"),
        ({"text": "x", "entities": "  "}, "must not be empty"),
        ({"text": "x", "entities": 7}, "entities must be a list"),
        ({"text": "x", "metadata": [1]}, "metadata must be a JSON object"),
        ({"text": "x", "metadata": {"f": float("nan")}}, "plain JSON"),
        ({"text": "x", "uri": 3}, "uri must be a string"),
        ({"text": "x", "namespace": "no spaces"}, "bad namespace"),
    ],
)
def test_bad_documents_are_one_line_bad_input(memory, kwargs, says):
    with pytest.raises(BadInput, match=says) as err:
        memory.remember(**kwargs)
    assert "\n" not in str(err.value)
    assert value_of(memory, "SELECT COUNT(*) FROM documents") == 0


def test_a_10_mb_document_is_accepted_and_a_larger_one_refused_clearly(memory):
    para = "Replication keeps copies of the log on several nodes, in order. " * 40
    body = "\n\n".join([para] * 3800)
    body += "\n\n" + "x" * (10_000_000 - len(body.encode()) - 2)
    assert len(body.encode()) == 10_000_000
    r = memory.remember(body)
    assert len(r.passages) == 2 * 3800 + 1  # 440-word paragraphs split in two
    with pytest.raises(BadInput, match=r"document too large .*MEMORS_MAX_DOCUMENT_BYTES"):
        memory.remember(body + "y" * 500_000)


def test_same_uri_with_changed_text_is_a_new_version(memory):
    v1 = memory.remember("# Raft\nLeaders are elected.\n\nLogs are replicated.", uri="notes/raft")
    v2 = memory.remember("# Raft\nLeaders are elected.\n\nLogs are copied.", uri="notes/raft")
    assert v2.document == v1.document
    assert v2.passages[0] == v1.passages[0]  # unchanged passage stays live, same address
    assert v2.passages[1] != v1.passages[1]
    assert memory.get(v1.passages[0]).status == "live"
    assert memory.get(v1.passages[1]).status == "superseded"
    doc = memory.get(v1.document)
    assert (doc.version, doc.passages, doc.status) == (2, v2.passages, "live")
    hits = [h.address for h in memory.search("replicated copied").results]
    assert hits == [v2.passages[1]]


_LIVE_PASSAGES = (
    "SELECT COUNT(*) FROM passages p WHERE NOT EXISTS "
    "(SELECT 1 FROM tombstones t WHERE t.target = p.id)"
)


def _versions_held(memory, uris: list[str]) -> dict[str, list[list[str]]]:
    """Each uri's versions, each as its passages' texts in order."""
    held = {}
    for uri in uris:
        with memory.store.read() as tx:
            latest = tx.documents.latest_by_uri("default", uri)
            assert latest is not None, uri
            held[uri] = [
                [
                    p.text
                    for p in tx.passages.by_ids(
                        tx.documents.version_passages(latest.document.id, v)
                    )
                ]
                for v in range(1, latest.version + 1)
            ]
    return held


def test_a_bulk_load_of_new_versions_stores_what_one_at_a_time_does(memory, fresh_store):
    # A batch naming known uris (changed, unchanged, named twice or three
    # times in the batch itself) stores the versions remembering each
    # document alone stores: the same versions, the same passages in each.
    first = [{"uri": f"u{n}", "text": f"Alpha {n}.\n\nBeta {n}.\n\nGamma {n}."} for n in range(6)]
    again = [
        {"uri": "u0", "text": "Alpha 0.\n\nBeta 0 changed.\n\nGamma 0."},
        {"uri": "u1", "text": "Alpha 1.\n\nBeta 1.\n\nGamma 1."},  # unchanged
        {"uri": "u2", "text": "Gamma 2.\n\nAlpha 2."},  # reordered, one dropped
        {"uri": "u0", "text": "Alpha 0.\n\nBeta 0 changed twice.\n\nGamma 0."},
        {"uri": "new", "text": "A new one.\n\nWith two passages."},
        {"uri": "new", "text": "A new one.\n\nWith two passages, the second changed."},
        {"uri": "u0", "text": "Alpha 0.\n\nBeta 0.\n\nGamma 0."},  # the first text again
        {"uri": "u3", "text": "Alpha 3.\n\nBeta 3.\n\nGamma 3.\n\nDelta 3."},
    ]
    uris = sorted({d["uri"] for d in first + again})
    memory.remember_many(first)
    out = memory.remember_many(again)
    assert (out.new, out.new_versions, out.unchanged) == (1, 6, 1)
    with Memory.open(fresh_store("alone.db")) as alone:
        for doc in first + again:
            alone.remember(doc["text"], uri=doc["uri"])
        expected = _versions_held(alone, uris)
        live_alone = value_of(alone, _LIVE_PASSAGES)
    assert _versions_held(memory, uris) == expected
    assert value_of(memory, _LIVE_PASSAGES) == live_alone  # the same ones superseded
    assert len(expected["u0"]) == 4 and expected["u0"][-1] == ["Alpha 0.", "Beta 0.", "Gamma 0."]


def test_same_uri_with_the_same_text_is_no_new_version(memory):
    a = memory.remember("Stable text.", uri="u", title="T")
    b = memory.remember("Stable text.", uri="u", title="T")
    assert a == b
    assert memory.get(a.document).version == 1
    assert value_of(memory, "SELECT COUNT(*) FROM passages") == 1


def test_same_text_remembered_again_with_new_entities_links_them(memory):
    a = memory.remember("Quorum writes go to a majority.", uri="u")
    b = memory.remember("Quorum writes go to a majority.", uri="u", entities=["Quorum"])
    assert b.document == a.document and b.passages == a.passages
    assert len(b.entities) == 1
    assert [p.address for p in memory.entity("quorum").passages] == a.passages


def test_without_a_uri_every_remember_is_a_new_document(memory):
    a = memory.remember("Same words.")
    b = memory.remember("Same words.")
    assert a.document != b.document


# --- entities ----------------------------------------------------------------------------------


def test_entities_come_from_the_caller_wiki_links_and_extraction_hooks():
    class Extractor:
        @hookimpl
        def memors_extract_entities(self, text):
            return ["ZooKeeper"] if "zk" in text.lower() else None

    class Broken:
        @hookimpl
        def memors_extract_entities(self, text, namespace):
            raise RuntimeError("extractor down")

    plugins = [("extractor", Extractor()), ("broken", Broken())]
    with temporary_memory(plugins=plugins) as memory:
        r = memory.remember(
            "Raft uses [[Quorum Replication|quorums]].\n\nZK is older; see [[Paxos]].",
            entities=["  Consensus   Protocols "],
        )
        names = {e.name for e in memory.entities().entities}
        assert names == {"Consensus Protocols", "Quorum Replication", "Paxos", "ZooKeeper"}
        assert len(r.entities) == 4
        assert [p.address for p in memory.entity("zookeeper").passages] == [r.passages[1]]
        assert [p.address for p in memory.entity("quorum replication").passages] == [r.passages[0]]
        # A caller-named entity is mentioned by every passage.
        assert len(memory.entity("consensus protocols").passages) == 2
        # A bulk load (its passages prepared by the helper process) asks the hooks too.
        memory.remember_many(
            [{"text": f"The zk ensemble {n} elects a leader; see [[Paxos]]."} for n in range(4)],
            batch=2,
        )
        assert len(memory.entity("zookeeper").passages) == 5
        assert len(memory.entity("paxos").passages) == 5


def test_names_match_case_insensitively_with_white_space_folded(memory):
    memory.remember("One about [[Quorum  Replication]].")
    memory.remember("Two.", entities=["quorum replication"])
    memory.record_fact("QUORUM\treplication", "kind", "protocol")
    [only] = memory.entities().entities
    assert only.name == "Quorum Replication"
    assert (only.passages, only.facts) == (2, 1)
    assert memory.entity(" quorum   REPLICATION ").address == only.address
    with pytest.raises(NotFound, match="no entity named 'quorum-replication'"):
        memory.entity("quorum-replication")


# --- facts -------------------------------------------------------------------------------------


def test_record_fact_shape_and_get(memory):
    r = to_json(memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01"))
    assert set(r) == {"fact"} and r["fact"].startswith("memo://fact/")
    g = to_json(memory.get(r["fact"]))
    assert {g[k] for k in ("type", "status", "predicate", "value")} == {
        "fact",
        "live",
        "leader",
        "n1",
    }
    assert g["valid_from"] == "2024-01-01" and g["valid_to"] is None
    assert g["subject"] == memory.entity("raft").address


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"valid_from": "2024-02-01", "valid_to": "2024-01-01"}, "must be before"),
        ({"valid_from": "2024-01-01", "valid_to": "2024-01-01"}, "must be before"),
        ({"valid_from": "2024-13-01"}, "valid_from '2024-13-01' is not an ISO 8601"),
        ({"valid_to": "next week"}, "valid_to 'next week' is not an ISO 8601"),
        ({"subject": " "}, "subject must not be empty"),
        ({"value": ""}, "value must not be empty"),
        ({"source": "memo://fact/" + "0" * 8}, "malformed address"),
    ],
)
def test_bad_facts_are_refused(memory, kwargs, says):
    args = {"subject": "Raft", "predicate": "leader", "value": "n1", **kwargs}
    with pytest.raises(BadInput, match=says):
        memory.record_fact(**args)


def test_a_fact_source_must_be_a_passage_in_the_namespace(memory):
    r = memory.remember("Node n1 leads.")
    f = memory.record_fact("Raft", "leader", "n1", source=r.passages[0])
    assert memory.get(f.fact).source == r.passages[0]
    with pytest.raises(BadInput, match="expected a passage address"):
        memory.record_fact("Raft", "leader", "n1", source=r.document)
    with pytest.raises(NotFound):
        memory.record_fact("Raft", "leader", "n1", source=r.passages[0], namespace="other")


def test_datetimes_with_offsets_compare_as_instants(memory):
    f = memory.record_fact(
        "Raft", "leader", "n2", valid_from="2024-01-01T10:00:00+02:00", valid_to="2024-01-02"
    )
    at = memory.search("leader", granularity="fact", as_of="2024-01-01T08:00:00Z").results
    assert [h.address for h in at] == [f.fact]
    before = memory.search("leader", granularity="fact", as_of="2024-01-01T07:59:59Z").results
    assert before == []


# --- merges -------------------------------------------------------------------------------------


def test_propose_merge_opens_a_candidate_once(memory):
    memory.remember("[[Raft]] and [[Raft Consensus]] are one.")
    r = to_json(memory.propose_merge(["Raft", "raft consensus"]))
    assert r["status"] == "open" and len(r["entities"]) == 2
    assert r["entities"][0] == memory.entity("Raft").address
    again = to_json(memory.propose_merge(["Raft", "Raft Consensus"]))
    assert again["candidate"] == r["candidate"]
    items = memory.compact(kinds=["merge"]).items
    assert [i.kind for i in items] == ["merge"]
    memory.submit(items[0].id, reject=True)
    with pytest.raises(Refused, match="rejected before"):
        memory.propose_merge(["Raft Consensus", "Raft"])


@pytest.mark.parametrize(
    ("names", "error", "says"),
    [
        (["Raft"], BadInput, "exactly two"),
        (["Raft", "raft"], BadInput, "already one entity"),
        (["Raft", "Nobody"], NotFound, "no entity named 'Nobody'"),
        (["Raft", ""], BadInput, "must not be empty"),
    ],
)
def test_bad_merge_proposals(memory, names, error, says):
    memory.remember("[[Raft]]")
    with pytest.raises(error, match=says):
        memory.propose_merge(names)


# --- forget and get (every type, every status) ---------------------------------------------------


def _page(memory: Memory, name: str = "Raft") -> str:
    for body in passages_about(name, 3):
        memory.remember(body)
    [item] = memory.compact(kinds=["page"]).items
    report = memory.submit(
        item.id, content=f"{name} copies writes during replication.", title=name, force=True
    )
    assert report.stored, report
    return report.address


def test_forgetting_a_document_forgets_its_passages(memory):
    r = memory.remember("First passage about leases.\n\nSecond about leases.")
    out = to_json(memory.forget(r.document, reason="obsolete"))
    assert out["status"] == "forgotten"
    assert set(out["forgotten"]) == {r.document, *r.passages}
    assert memory.search("leases").results == []
    for a in (r.document, *r.passages):
        assert memory.get(a).status == "forgotten"
    again = to_json(memory.forget(r.document))
    assert again["forgotten"] == [] and again["status"] == "forgotten"


def test_forget_refuses_what_cannot_be_forgotten(memory):
    memory.remember("[[Raft]]")
    with pytest.raises(BadInput, match="not a entity"):
        memory.forget(memory.entity("Raft").address)
    with pytest.raises(NotFound, match="nothing at"):
        memory.forget(f"memo://fact/{uuid7()}")
    with pytest.raises(BadInput, match="malformed address"):
        memory.forget("fact 12")


def test_get_every_type_with_its_links_and_status(memory):
    page = _page(memory)
    raft = memory.entity("Raft")
    passage = raft.passages[0].address
    fact = memory.record_fact("Raft", "leader", "n1", source=passage).fact
    item = memory.compact(kinds=["stale"])  # nothing stale yet
    assert item.open == 0

    d = to_json(memory.get(raft.passages[0].document))
    assert (d["type"], d["status"], d["version"]) == ("document", "live", 1)
    assert d["passages"] == [passage]

    p = to_json(memory.get(passage))
    assert (p["type"], p["status"], p["document"]) == ("passage", "live", d["address"])
    assert raft.address in p["entities"] and "[[Raft]]" in p["text"]

    e = to_json(memory.get(raft.address))
    assert (e["type"], e["status"], e["name"], e["page"]) == ("entity", "live", "Raft", page)
    assert len(e["passages"]) == 3 and set(e["passages"][0]) == {"address", "document", "text"}
    assert [f["address"] for f in e["facts"]] == [fact]
    assert set(e["facts"][0]) == {
        "address",
        "subject",
        "predicate",
        "value",
        "valid_from",
        "valid_to",
    }

    f = to_json(memory.get(fact))
    assert (f["type"], f["status"], f["source"]) == ("fact", "live", passage)

    g = to_json(memory.get(page))
    assert (g["type"], g["status"], g["is_inference"], g["version"]) == ("page", "live", 1, 1)
    assert sorted(g["sources"]) == sorted(x.address for x in raft.passages)
    assert g["entity"] == raft.address and g["title"] == "Raft"

    done = memory.get(f"memo://item/{memory.items(kind='page').items[0].id}")
    assert (done.type, done.status, done.kind) == ("item", "done", "page")
    assert to_json(memory.get(str(done.id))) == to_json(done)


def test_get_marks_superseded_and_forgotten_rows(memory):
    page1 = _page(memory)
    # A changed source supersedes the passage and makes the page stale.
    v1 = memory.remember("Raft rounds are numbered.", uri="u")
    memory.remember("Raft rounds are counted.", uri="u")
    assert memory.get(v1.passages[0]).status == "superseded"

    # A new page version supersedes the old one.
    memory.forget(memory.entity("Raft").passages[0].address)
    assert memory.get(page1).stale is True
    [stale] = memory.compact(kinds=["stale"]).items
    report = memory.submit(stale.id, content="Raft orders writes.", title="Raft", force=True)
    assert memory.get(page1).status == "superseded"
    page2 = memory.get(report.address)
    assert (page2.status, page2.version, page2.previous) == ("live", 2, page1)
    memory.forget(page2.address)
    assert memory.get(page2.address).status == "forgotten"
    assert memory.search("orders writes", granularity="page").results == []

    # A settled conflict supersedes the fact not kept.
    a = memory.record_fact("Raft", "leader", "n1").fact
    b = memory.record_fact("Raft", "Leader", "n2").fact
    [conflict] = memory.compact(kinds=["conflict"]).items
    memory.submit(conflict.id, keep=a)
    assert (memory.get(a).status, memory.get(b).status) == ("live", "superseded")
    assert [h.address for h in memory.search("leader", granularity="fact").results] == [a]

    # An accepted merge supersedes the second entity.
    memory.remember("[[Raft Protocol]] is the same thing.")
    memory.propose_merge(["Raft", "Raft Protocol"])
    [merge] = memory.compact(kinds=["merge"]).items
    memory.submit(merge.id, accept=True)
    protocol = value_of(memory, "SELECT id FROM entities WHERE name = 'Raft Protocol'")
    merged = memory.get(f"memo://entity/{protocol}")
    assert merged.status == "superseded"
    assert merged.merged_into == memory.entity("Raft").address
    assert "Raft Protocol" in memory.entity("raft protocol").aliases


@pytest.mark.parametrize(
    "address",
    [
        "memo://passage/" + "1" * 8,
        "memo://thing/0199a000-0000-7000-8000-000000000000",
        "passage/0199a000-0000-7000-8000-000000000000",
        "memo://item/abc",
    ],
)
def test_get_refuses_malformed_addresses(memory, address):
    with pytest.raises(BadInput, match="address"):
        memory.get(address)


def test_get_of_nothing_is_not_found(memory):
    for kind in ("document", "passage", "entity", "fact", "page"):
        with pytest.raises(NotFound, match=f"nothing at memo://{kind}/"):
            memory.get(f"memo://{kind}/{uuid7()}")
    with pytest.raises(NotFound, match="nothing at memo://item/7"):
        memory.get("7")


# --- namespaces (SPEC §3) --------------------------------------------------------------------------


def test_namespaces_isolate_everything(memory):
    a = memory.remember("Raft elects a [[Leader]].", namespace="team-a")
    fa = memory.record_fact("Leader", "is", "n1", namespace="team-a")
    memory.remember("Paxos has [[Proposers]].", namespace="team.b_2")
    assert [h.address for h in memory.search("raft", namespace="team-a").results] == a.passages
    for ns in ("team.b_2", "default", "never-named"):
        assert memory.search("raft leader", granularity="all", namespace=ns).results == []
        with pytest.raises(NotFound):
            memory.get(a.passages[0], namespace=ns)
        with pytest.raises(NotFound):
            memory.get(fa.fact, namespace=ns)
        with pytest.raises(NotFound):
            memory.entity("Leader", namespace=ns)
        with pytest.raises(NotFound):
            memory.forget(a.document, namespace=ns)
        assert memory.facts(namespace=ns).facts == []
    assert [e.name for e in memory.entities(namespace="team.b_2").entities] == ["Proposers"]
    assert memory.entities(namespace="never-named").entities == []
    assert memory.compact(namespace="never-named").open == 0
    # The same name in two namespaces is two entities.
    memory.remember("[[Leader]] again.", namespace="team.b_2")
    assert (
        memory.entity("Leader", namespace="team-a").address
        != memory.entity("Leader", namespace="team.b_2").address
    )


@pytest.mark.parametrize(
    "bad", ["", " ", "a b", "x" * 65, "ns/1", "ünï", "a:b", "tab\t", None, 7, "../up"]
)
def test_bad_namespace_names_are_rejected(memory, bad):
    with pytest.raises(BadInput, match="bad namespace"):
        memory.search("x", namespace=bad)
    with pytest.raises(BadInput, match="bad namespace"):
        memory.remember("x", namespace=bad)


def test_namespace_names_may_use_letters_digits_dash_underscore_dot(memory):
    for ns in ("a", "A-b_c.d", "x" * 64, "0"):
        memory.remember("hello", namespace=ns)
        assert memory.search("hello", namespace=ns).results


def test_a_plugin_whose_hook_takes_unknown_arguments_is_named_in_one_line():
    class Wrong:
        @hookimpl
        def memors_extract_entities(self, text, language):
            return []

    with pytest.raises(PluginError, match="plugin 'wrong' is invalid") as err:
        build_plugin_manager(plugins=[("wrong", Wrong())])
    assert "\n" not in str(err.value) and "language" in str(err.value)
    with pytest.raises(PluginError, match="plugin 'page' is invalid"):
        build_plugin_manager(plugins=[("page", Wrong.__new__(Wrong))])


def test_an_extraction_plugin_with_a_bad_answer_never_breaks_remember():
    class Weird:
        @hookimpl
        def memors_extract_entities(self, text):
            return 42

    class Long:
        @hookimpl
        def memors_extract_entities(self, text):
            return ["x" * 300, "  ", 7, "Fine Name"]

    with temporary_memory(plugins=[("weird", Weird()), ("long", Long())]) as memory:
        r = memory.remember("Some text about [[Raft]].")
        assert len(r.entities) == 2
        assert {e.name for e in memory.entities().entities} == {"Raft", "Fine Name"}


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.remember("text", uri="\udcff"),
        lambda m: m.remember("text", title="\ud800"),
        lambda m: m.remember("text", entities=["Ra\udcfft"]),
        lambda m: m.record_fact("\udcff", "p", "v"),
        lambda m: m.record_fact("s", "p", "v\ud800"),
        lambda m: m.entity("\udcff"),
        lambda m: m.facts("\udcff"),
        lambda m: m.facts(7),
        lambda m: m.items(kind=["page"]),
        lambda m: m.submit(2**70, skip=True, reason="r"),
    ],
)
def test_odd_values_from_a_frontend_are_bad_input_not_crashes(memory, call):
    memory.remember("[[Raft]] text.")
    with pytest.raises(BadInput):
        call(memory)
