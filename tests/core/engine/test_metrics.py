"""Prometheus metrics: exact names, zeros included, gauges read at scrape
time, counters persisted with the change they count (across processes)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from memors_core import Memory, hookimpl
from memors_core.engine.compaction import EVENTS
from memors_core.plugins.kinds import Candidate, Kind, fingerprint
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import passages_about
from paths import ROOT

KINDS = ["conflict", "duplicate", "merge", "page", "stale"]
FAMILIES = {
    "memors_kb_work_items_open": "gauge",
    "memors_kb_pages": "gauge",
    "memors_kb_pages_stale": "gauge",
    "memors_store_work_items": "counter",
    "memors_store_pages_marked_stale": "counter",
}


def parse(text: str) -> dict[str, dict[tuple, float]]:
    """Sample name -> {sorted label items: value}, via the official parser."""
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def work_items(samples, kind: str, event: str) -> float:
    return samples["memors_store_work_items_total"][(("event", event), ("kind", kind))]


def open_items(samples, namespace: str, kind: str) -> float:
    return samples["memors_kb_work_items_open"][(("kind", kind), ("namespace", namespace))]


def by_namespace(samples, name: str, namespace: str) -> float:
    return samples[name][(("namespace", namespace),)]


# --- the exposition ---------------------------------------------------------------


def test_an_empty_store_exposes_every_family_and_zero_counters(memory):
    text = memory.metrics()
    assert families(text) == FAMILIES
    samples = parse(text)
    # The default namespace has samples from the start: `absent(memors_kb_pages)`
    # (the alert in docs/operations.md) does not fire on a healthy new store.
    assert samples["memors_kb_work_items_open"] == {
        (("kind", k), ("namespace", "default")): 0.0 for k in KINDS
    }
    assert samples["memors_kb_pages"] == {(("namespace", "default"),): 0.0}
    assert samples["memors_kb_pages_stale"] == {(("namespace", "default"),): 0.0}
    assert samples["memors_store_pages_marked_stale_total"] == {(): 0.0}
    assert len(samples["memors_store_work_items_total"]) == len(KINDS) * len(EVENTS)
    for kind in KINDS:
        for event in ("created", "refreshed", "done", "skipped", "obsolete", "refused"):
            assert work_items(samples, kind, event) == 0


def test_a_sample_for_every_namespace_and_kind_zeros_included(memory):
    for text in passages_about("Raft", 3):
        memory.remember(text)
    memory.remember("[[Zab]] broadcasts.", namespace="team-b")
    memory.compact()
    samples = parse(memory.metrics())
    expected = {
        (("kind", k), ("namespace", ns)): (1.0 if (ns, k) == ("default", "page") else 0.0)
        for ns in ("default", "team-b")
        for k in KINDS
    }
    assert samples["memors_kb_work_items_open"] == expected
    assert samples["memors_kb_pages"] == {
        (("namespace", "default"),): 0,
        (("namespace", "team-b"),): 0,
    }
    assert work_items(samples, "page", "created") == 1


def test_gauges_follow_the_store_and_a_scrape_changes_nothing(memory):
    for text in passages_about("Raft", 3):
        memory.remember(text)
    item = memory.compact().items[0]
    content = "\n\n".join(
        p["text"].replace("[[", "").replace("]]", "") for p in item.payload["passages"]
    )
    memory.submit(item.id, content=content, title="Raft")
    samples = parse(memory.metrics())
    assert by_namespace(samples, "memors_kb_pages", "default") == 1
    assert by_namespace(samples, "memors_kb_pages_stale", "default") == 0
    assert open_items(samples, "default", "page") == 0
    # Two new passages make the page stale by growth: the gauge sees it at
    # once (no compact needed); nothing was marked, so the counter stays 0.
    memory.remember("[[Raft]] followers append entries sent by the leader in order.")
    memory.remember("[[Raft]] candidates request votes after an election timeout.")
    first = memory.metrics()
    samples = parse(first)
    assert by_namespace(samples, "memors_kb_pages_stale", "default") == 1
    assert samples["memors_store_pages_marked_stale_total"] == {(): 0}
    assert memory.metrics() == first


# --- counters move with the change they count ------------------------------------------


class FlakyKind(Kind):
    """Finds one item, then fails: the scan's transaction is rolled back."""

    name = "flaky"
    resolution = dict

    def scan(self, ctx):
        yield Candidate("one", fingerprint("one"), lambda: {"note": "one"})
        raise RuntimeError("scanner broke half-way")


class FailingApplyKind(Kind):
    name = "failing"
    resolution = dict

    def scan(self, ctx):
        yield Candidate("one", fingerprint("one"), lambda: {"note": "one"})

    def apply(self, ctx, item, resolution):
        ctx.store.namespaces.touch("x")
        raise RuntimeError("apply broke after writing")


class TestKinds:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(FlakyKind())
        registry.add(FailingApplyKind())


def test_counters_are_written_in_the_transaction_of_the_change(fresh_store, tmp_path):
    pm = build_plugin_manager(plugins=[("test-kinds", TestKinds())])
    with Memory.open(fresh_store("t.db"), plugin_manager=pm) as memory:
        result = memory.compact(kinds=["flaky", "failing"])
        assert [e["kind"] for e in result.errors] == ["flaky"]
        assert [i.kind for i in result.items] == ["failing"]
        [item] = result.items
        with pytest.raises(Exception, match="apply broke"):
            memory.submit(item.id, resolution={"anything": 1})
        samples = parse(memory.metrics())
        assert work_items(samples, "flaky", "created") == 0  # rolled back with its items
        assert work_items(samples, "failing", "created") == 1
        assert work_items(samples, "failing", "done") == 0  # the item is still open
        assert open_items(samples, "default", "failing") == 1
        assert "x" not in memory.namespaces()


def test_counters_survive_a_restart(fresh_store, tmp_path):
    db = fresh_store("r.db")
    with Memory.open(db) as memory:
        for text in passages_about("Raft", 3):
            memory.remember(text)
        memory.compact()
    with Memory.open(db) as memory:
        samples = parse(memory.metrics())
    assert work_items(samples, "page", "created") == 1


# --- the real CLI, one process per step -------------------------------------------------


def _item(compacted: dict, kind: str, entity: str | None = None) -> dict:
    for item in compacted["items"]:
        if item["kind"] == kind and (entity is None or item["payload"]["entity"]["name"] == entity):
            return item
    raise AssertionError(f"no open {kind} item for {entity}: {compacted}")


def _good_page(item: dict) -> str:
    parts = [p["text"].replace("[[", "").replace("]]", "") for p in item["payload"]["passages"]]
    parts += [
        f"The {f['subject']} {f['predicate']} is {f['value']}." for f in item["payload"]["facts"]
    ]
    return "\n\n".join(parts) + "\n"


def test_metrics_after_a_scripted_sequence_of_separate_processes(cli, tmp_path):
    def ok(*args, code=0, **kw):
        r = cli(*args, **kw)
        assert r.code == code, r
        return r

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, topic in (("Raft", "consensus"), ("Zab", "broadcast"), ("Paxos", "ballots")):
        for i, text in enumerate(passages_about(name, 3, topic)):
            (docs / f"{name}{i}.md").write_text(text + "\n")
    ok("remember", str(docs))
    raft_n1 = ok("fact", "add", "Raft", "leader", "n1", "--json").json["fact"]
    ok("fact", "add", "Raft", "leader", "n2")
    ok("fact", "add", "Zab", "epoch", "7")
    zab_8 = ok("fact", "add", "Zab", "Epoch", "8", "--json").json["fact"]
    ok("remember", "-", "--ns", "team-b", input="[[Other]] lives in another namespace.\n")

    first = ok("compact", "--json").json  # created: page x3, conflict x2
    assert first["created"] == 5
    raft_conflict = next(
        i for i in first["items"] if i["kind"] == "conflict" and raft_n1 in str(i["payload"])
    )
    ok("submit", str(raft_conflict["id"]), "--keep", raft_n1)  # conflict done
    ok("forget", zab_8)  # the Zab conflict no longer holds
    paxos = _item(first, "page", "Paxos")
    ok("submit", str(paxos["id"]), "--skip", "--reason", "later")  # page skipped
    # The settled conflict and the forgotten fact changed the Raft and Zab page
    # items' inputs: both are refreshed in place.
    raft = _item(ok("compact", "--kinds", "page", "--json").json, "page", "Raft")
    (tmp_path / "raft.md").write_text(_good_page(raft))
    ok("submit", str(raft["id"]), "--content-file", "raft.md", "--title", "Raft")  # page done
    ok("submit", str(raft["id"]), "--content-file", "raft.md", "--title", "Raft", code=1)  # refused
    (docs / "Zab9.md").write_text("[[Zab]] followers acknowledge proposals before commit.\n")
    ok("remember", str(docs / "Zab9.md"))
    second = ok("compact", "--json").json  # Zab page refreshed, Zab conflict obsolete
    assert second["created"] == 0
    zab = _item(second, "page", "Zab")
    (tmp_path / "zab.md").write_text(_good_page(zab))
    ok("submit", str(zab["id"]), "--content-file", "zab.md", "--title", "Zab", "--dry-run")
    raft_passage = raft["payload"]["passages"][0]["address"]
    ok("forget", raft_passage)  # the Raft page is marked stale
    stale = _item(ok("compact", "--json").json, "stale")  # stale created
    (tmp_path / "bad.md").write_text("Bananas grow on tall plants in warm countries.\n")
    r = ok("submit", str(stale["id"]), "--content-file", "bad.md", "--title", "Raft", code=1)
    assert "corruption" in r.out

    r = ok("metrics")
    assert r.err == ""
    assert families(r.out) == FAMILIES
    samples = parse(r.out)
    expected = {
        "page": {"created": 3, "refreshed": 3, "done": 1, "skipped": 1, "refused": 1},
        "conflict": {"created": 2, "done": 1, "obsolete": 1},
        "stale": {"created": 1, "refused": 1},
    }
    for kind in KINDS:
        for event in EVENTS:
            want = expected.get(kind, {}).get(event, 0)
            assert work_items(samples, kind, event) == want, (kind, event)
    assert samples["memors_store_pages_marked_stale_total"] == {(): 1}
    assert samples["memors_kb_pages"] == {
        (("namespace", "default"),): 1,
        (("namespace", "team-b"),): 0,
    }
    assert samples["memors_kb_pages_stale"] == {
        (("namespace", "default"),): 1,
        (("namespace", "team-b"),): 0,
    }
    opened = {key: v for key, v in samples["memors_kb_work_items_open"].items() if v}
    assert opened == {
        (("kind", "page"), ("namespace", "default")): 1,  # Zab
        (("kind", "stale"), ("namespace", "default")): 1,  # Raft
    }
    assert len(samples["memors_kb_work_items_open"]) == 2 * len(KINDS)
    # Lint agrees with the gauge.
    lint = cli("lint", "--json").json["findings"]
    assert sum(f["rule"] == "stale-page" for f in lint) == 1


def test_counters_add_up_across_concurrent_processes(cli, tmp_path):
    """Three processes compact three namespaces at once: every created item
    is counted once in the one store."""
    with Memory.open(cli.db) as memory:
        for n in range(3):
            for text in passages_about("Raft", 3, f"topic{n}"):
                memory.remember(text, namespace=f"ns{n}")
    env = {**os.environ, "MEMORS_DB": str(cli.db)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memors_cli", "compact", "--ns", f"ns{n}", "--limit", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    samples = parse(cli("metrics").out)
    assert work_items(samples, "page", "created") == 3
    for n in range(3):
        assert open_items(samples, f"ns{n}", "page") == 1


def test_metrics_has_no_json_form(cli):
    r = cli("metrics", "--json")
    assert r.code == 2 and r.json["error"]["code"] == "usage", r


# --- /metrics over HTTP ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_server_serves_the_same_exposition(fresh_store, tmp_path):
    pytest.importorskip("memors_mcp.server")
    db = fresh_store("h.db")
    with Memory.open(db) as memory:
        for text in passages_about("Raft", 3):
            memory.remember(text)
        memory.compact()
    port = _free_port()
    env = {**os.environ, "MEMORS_DB": str(db)}
    server = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "serve", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = None
        deadline = time.monotonic() + 120  # (a wait for start-up, generous for a loaded machine)
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    assert resp.status == 200
                    assert resp.headers["Content-Type"].startswith("text/plain")
                    body = resp.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert body is not None, server.stderr.read() if server.poll() is not None else "no answer"
        assert families(body) == FAMILIES
        samples = parse(body)
        assert work_items(samples, "page", "created") == 1
        assert open_items(samples, "default", "page") == 1
        # Written by another process while the server runs: the scrape sees it.
        with Memory.open(db) as memory:
            memory.record_fact("Raft", "leader", "n1")
            memory.record_fact("Raft", "leader", "n2")
            memory.compact(kinds=["conflict"])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
            samples = parse(resp.read().decode())
        assert open_items(samples, "default", "conflict") == 1
        assert work_items(samples, "conflict", "created") == 1
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr:
            server.stderr.close()


# --- docs/operations.md -------------------------------------------------------------------

DOC = ROOT / "docs" / "operations.md"


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def _exposition_with_data(tmp_path) -> str:
    with Memory.open(tmp_path / "doc.db") as memory:
        for text in passages_about("Raft", 3):
            memory.remember(text)
        memory.compact()
        return memory.metrics()


def test_the_alert_rules_use_only_real_metric_names_and_labels(tmp_path):
    text = _exposition_with_data(tmp_path)
    labels: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            for k, v in s.labels.items():
                labels.setdefault(s.name, {}).setdefault(k, set()).add(v)
            labels.setdefault(s.name, {})
    # Label values that exist in general, not only in this small store.
    labels["memors_kb_work_items_open"]["kind"] |= set(KINDS)
    rules = next(b for b in _yaml_blocks(DOC.read_text()) if "groups:" in b)
    exprs = [line.split("expr:", 1)[1].strip() for line in rules.splitlines() if "expr:" in line]
    assert len(exprs) >= 4
    for expr in exprs:
        bare = re.sub(r'"[^"]*"', '""', expr)
        names = {
            t for t in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare) if t.startswith("memors_")
        }
        assert names, expr
        assert names <= set(labels), (expr, names - set(labels))
        known = set().union(*(labels[n] for n in names))
        for grouping in re.findall(r"\bby \(([^)]*)\)", expr):
            assert {g.strip() for g in grouping.split(",")} <= known, expr
        for name, matchers in re.findall(r"(memors_\w+)\{([^}]*)\}", expr):
            for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                assert label in labels[name], (expr, label)
                if op in ("=", "=~"):
                    assert set(value.split("|")) <= labels[name][label], (expr, value)


def test_every_metric_is_documented_and_the_doc_names_no_other(tmp_path):
    text = _exposition_with_data(tmp_path)
    exposed = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    doc = DOC.read_text()
    documented = set(re.findall(r"\bmemors_(?:kb|store)_[a-z_]+", doc))
    assert documented == exposed
    for name in exposed:
        assert f"| `{name}` |" in doc, name
