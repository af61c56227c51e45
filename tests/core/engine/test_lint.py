"""Lint: every built-in rule, read-only for real, plugins, and one
definition shared with the kinds that act on each rule."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from memors_core import Memory, hookimpl
from memors_core.domain.dates import normalise
from memors_core.domain.model import Finding
from memors_core.domain.text import fold_value
from memors_core.engine.lint import BUILTIN_RULES
from memors_core.errors import MemorsError
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import passages_about, temporary_store
from memors_core.wire import to_json
from paths import ROOT
from store_checks import statements


def page_content(payload: dict) -> str:
    """A page that passes the checks: the passages, then the live facts."""
    parts = [p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"]]
    parts += [f"The {f['subject']} {f['predicate']} is {f['value']}." for f in payload["facts"]]
    return "\n\n".join(parts) + "\n"


def open_item(memory: Memory, kind: str, entity: str | None = None):
    for item in memory.compact(kinds=[kind]).items:
        if entity is None or item.payload["entity"]["name"] == entity:
            return item
    raise AssertionError(f"no open {kind} item for {entity}")


def write_page(memory: Memory, entity: str) -> str:
    item = open_item(memory, "page", entity)
    report = memory.submit(item.id, content=page_content(item.payload), title=entity)
    assert report.stored, report
    return report.address


def expiring_fact(memory: Memory, subject: str, predicate: str, value: str) -> tuple[str, str]:
    """A fact recorded while it held, whose validity has ended since (it
    ends a moment after it is recorded; this waits for that moment)."""
    ends = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fact = memory.record_fact(subject, predicate, value, valid_to=ends).fact
    while datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") <= ends:
        time.sleep(0.05)
    return fact, ends


def rules(report) -> set[tuple]:
    return {(f.rule, f.address, tuple(f.related)) for f in report.findings}


def lint_readonly(db: Path, pm=None):
    """Lint as the CLI does: a read-only open of the store."""
    with Memory.open(db, readonly=True, plugin_manager=pm) as memory:
        return memory.lint()


def snapshot(db: Path) -> dict[str, str | None]:
    """The bytes of the database and its -wal/-shm files (None: absent),
    and every file in its directory."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(f"{db}{suffix}")
        out[suffix or "db"] = hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else None
    out["listing"] = " ".join(sorted(p.name for p in db.parent.iterdir()))
    return out


# --- the rules ------------------------------------------------------------------


@pytest.fixture
def troubled(memory: Memory):
    """A store with one finding of every built-in rule; returns the addresses."""
    a = {}
    for text in passages_about("Raft", 3, "consensus"):
        memory.remember(text)
    a["raft"] = memory.entity("Raft").address
    a["n1"] = memory.record_fact("Raft", "leader", "n1").fact
    a["n2"] = memory.record_fact("Raft", "Leader", "N2", valid_from="2024-01-01").fact
    a["term"] = memory.record_fact("Raft", "term", "7").fact
    a["old"], a["old_to"] = expiring_fact(memory, "Paxos", "maintainer", "Lamport")
    memory.record_fact("Paxos", "status", "classic", valid_to="2999-01-01")
    ghost = memory.remember("A note about [[Ghost]] that will be forgotten.")
    memory.forget(ghost.document)
    a["ghost"] = memory.entity("Ghost").address
    for text in passages_about("Zab", 3, "broadcast"):
        memory.remember(text)
    a["zab_page"] = write_page(memory, "Zab")
    a["gone"] = memory.entity("Zab").passages[0].address
    memory.forget(a["gone"], reason="wrong")
    for text in passages_about("Etcd", 3, "storage"):
        memory.remember(text)
    item = open_item(memory, "page", "Etcd")
    forced = page_content(item.payload) + "\nEtcd is written in Rust.\n"
    a["etcd_page"] = memory.submit(item.id, content=forced, title="Etcd", force=True).address
    return a


def test_each_builtin_rule_reports_the_addresses_involved(memory, troubled):
    a = troubled
    report = memory.lint()
    assert rules(report) == {
        ("contradiction", a["n1"], (a["n2"],)),
        ("orphan-entity", a["ghost"], ()),
        ("missing-page", a["raft"], ()),
        ("stale-page", a["zab_page"], (a["gone"],)),
        ("unverified-page", a["etcd_page"], ()),
        ("expired-fact", a["old"], ()),
    }
    messages = {f.rule: f.message for f in report.findings}
    assert "Raft leader 'n1' contradicts Raft Leader 'N2'" in messages["contradiction"]
    assert messages["orphan-entity"] == "entity 'Ghost' has no live passages and no live facts"
    assert messages["missing-page"] == "entity 'Raft' has 3 live passages and no page"
    assert "1 forgotten passage(s)" in messages["stale-page"]
    assert messages["expired-fact"] == f"Paxos maintainer 'Lamport' expired at {a['old_to']}"
    # (unfinished-purge needs a purge killed half-way: tests/core/engine/test_purge_resume.py;
    # bad-purge-state a row no purge wrote: tests/core/engine/test_purge_state.py)
    assert {f.rule for f in report.findings} == set(BUILTIN_RULES) - {
        "unfinished-purge",
        "bad-purge-state",
    }


def test_lint_json_shape_and_namespaces_are_separate(memory, troubled):
    data = to_json(memory.lint())
    assert set(data) == {"namespace", "findings"}
    assert data["namespace"] == "default"
    for finding in data["findings"]:
        assert set(finding) == {"rule", "address", "message", "related"}
        assert finding["address"].startswith("memo://")
    assert to_json(memory.lint(namespace="elsewhere")) == {
        "namespace": "elsewhere",
        "findings": [],
    }


def test_settled_problems_disappear_from_lint(memory, troubled):
    a = troubled
    item = open_item(memory, "conflict")
    memory.submit(item.id, keep=[a["n1"]])
    write_page(memory, "Raft")
    remaining = {f.rule for f in memory.lint().findings}
    assert "contradiction" not in remaining
    assert "missing-page" not in remaining


def test_cli_lint_exit_status_and_json(cli, tmp_path):
    r = cli("lint")
    assert (r.code, r.out.strip()) == (0, "namespace default: no findings"), r
    if isinstance(cli.db, Path):  # (a PostgreSQL test database exists from the start)
        assert not cli.db.exists()
    (tmp_path / "a.md").write_text("[[Raft]] elects one leader per term.\n")
    assert cli("remember", "a.md").code == 0
    r = cli("lint", "--json")
    assert (r.code, r.json) == (0, {"namespace": "default", "findings": []}), r
    cli("fact", "add", "Raft", "leader", "n1")
    cli("fact", "add", "Raft", "leader", "n2")
    r = cli("lint", "--json")
    assert r.code == 1, r
    [finding] = r.json["findings"]
    assert finding["rule"] == "contradiction"
    assert finding["address"].startswith("memo://fact/")
    assert finding["related"][0].startswith("memo://fact/")
    r = cli("lint")
    assert r.code == 1 and r.out.startswith("contradiction"), r
    assert r.err == ""
    assert cli("lint", "--ns", "other").code == 0


# --- read-only ---------------------------------------------------------------------


@pytest.mark.sqlite_only("compares the bytes of the store's files")
def test_lint_changes_no_byte_of_a_closed_store(tmp_path, cli):
    db = tmp_path / "cli.db"
    with Memory.open(db) as memory:
        for text in passages_about("Raft", 4):
            memory.remember(text)
        memory.record_fact("Raft", "leader", "n1")
        memory.record_fact("Raft", "leader", "n2")
        memory.compact()
    before = snapshot(db)
    assert before["-wal"] is None and before["-shm"] is None  # closed = checkpointed
    report = lint_readonly(db)
    assert {f.rule for f in report.findings} == {"contradiction", "missing-page"}
    assert snapshot(db) == before
    r = cli("lint", "--json")
    assert r.code == 1 and len(r.json["findings"]) == 2, r
    assert snapshot(db) == before


@pytest.mark.sqlite_only("reads the SQLite -wal and -shm files")
def test_lint_beside_an_open_writer_reads_its_commits_and_writes_nothing(tmp_path):
    db = tmp_path / "m.db"
    with Memory.open(db) as memory:
        for text in passages_about("Raft", 3):
            memory.remember(text)  # committed, still in the -wal
        before = snapshot(db)
        assert before["-wal"] is not None
        report = memory.lint()
        assert rules(report) == {("missing-page", memory.entity("Raft").address, ())}
        after = snapshot(db)
        # The -shm is the WAL's shared index (readers take marks in it); the
        # database and the log itself are untouched.
        assert (after["db"], after["-wal"], after["listing"]) == (
            before["db"],
            before["-wal"],
            before["listing"],
        )


class Vandal:
    """A lint plugin that tries to write: the read-only store refuses."""

    @hookimpl
    def memors_lint_rules(self, context):
        context.store.namespaces.touch("vandal")
        return []


def test_a_rule_that_tries_to_write_fails_and_the_store_is_unchanged(store_address):
    db = store_address
    with Memory.open(db) as memory:
        memory.record_fact("Raft", "leader", "n1")
        memory.record_fact("Raft", "leader", "n2")
    before = snapshot(db) if isinstance(db, Path) else None
    pm = build_plugin_manager(plugins=[("vandal", Vandal())])
    report = lint_readonly(db, pm)
    by_rule = {f.rule: f for f in report.findings}
    assert set(by_rule) == {"contradiction", "plugin-error"}
    assert by_rule["plugin-error"].address == "plugin:vandal"
    assert "readonly" in by_rule["plugin-error"].message.lower().replace("-", "")
    if before is not None:
        assert snapshot(db) == before
    with Memory.open(db) as memory:
        assert "vandal" not in memory.namespaces()


@pytest.mark.sqlite_only("a store file that does not exist")
def test_lint_of_a_store_that_does_not_exist_creates_nothing(tmp_path, cli):
    missing = tmp_path / "not" / "here.db"
    assert lint_readonly(missing).findings == []
    r = cli("lint", "--db", str(missing), "--json")
    assert (r.code, r.json) == (0, {"namespace": "default", "findings": []}), r
    assert not missing.parent.exists()
    with Memory.open(tmp_path / "x.db") as memory:
        assert memory.lint().findings == []


@pytest.mark.sqlite_only("files that are not SQLite stores")
def test_lint_of_files_that_are_not_stores(tmp_path, cli):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    r = cli("lint", "--db", str(empty))
    assert (r.code, r.out.strip()) == (0, "namespace default: no findings"), r
    assert empty.read_bytes() == b""
    text = tmp_path / "notes.db"
    text.write_text("just some notes\n" * 100)
    r = cli("lint", "--db", str(text))
    assert r.code == 2 and r.err.count("\n") == 1 and "not a memors database" in r.err, r
    foreign = tmp_path / "foreign.db"
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sqlite3; sqlite3.connect({str(foreign)!r}).execute('create table t(x)')",
        ],
        check=True,
    )
    r = cli("lint", "--db", str(foreign))
    assert r.code == 2 and "not a memors store" in r.err and "Traceback" not in r.err, r


class SlowRule:
    """Starts a writer in another process, then takes its time."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.writer: subprocess.Popen | None = None
        self.waiting_while_lint_ran = False

    @hookimpl
    def memors_lint_rules(self, context):
        code = (
            "import sys; from memors_core import Memory\n"
            "print('opening', flush=True)\n"
            "with Memory.open(sys.argv[1]) as m: m.remember('[[Raft]] keeps a log.')"
        )
        self.writer = subprocess.Popen(
            [sys.executable, "-c", code, str(self.db)], stdout=subprocess.PIPE, text=True
        )
        assert self.writer.stdout.readline() == "opening\n"  # imports done, opening now
        time.sleep(1.0)
        self.waiting_while_lint_ran = self.writer.poll() is None
        return []


@pytest.mark.sqlite_only("lint's immutable read of a closed SQLite file locks writers out")
def test_a_writer_waits_while_lint_reads_a_closed_store_then_succeeds(tmp_path):
    """Reading a closed store as immutable is safe because writers are locked
    out meanwhile; they wait on their busy timeout and then go ahead."""
    db = tmp_path / "w.db"
    with Memory.open(db) as memory:
        memory.record_fact("Raft", "leader", "n1")
    slow = SlowRule(db)
    report = lint_readonly(db, build_plugin_manager(plugins=[("slow", slow)]))
    assert report.findings == []
    assert slow.waiting_while_lint_ran
    assert slow.writer.wait(timeout=60) == 0
    slow.writer.stdout.close()
    with Memory.open(db) as memory:
        assert len(memory.entity("Raft").passages) == 1


# --- plugins ----------------------------------------------------------------------------


class TodoRule:
    """A third party's rule: passages that still say TODO."""

    @hookimpl
    def memors_lint_rules(self, context):
        hits = context.store.search.passages(context.namespace, "TODO", 100)
        return [Finding("todo", h.address, "passage still says TODO") for h in hits]


class BrokenRule:
    @hookimpl
    def memors_lint_rules(self, context):
        raise RuntimeError("rule exploded")


class SloppyRule:
    @hookimpl
    def memors_lint_rules(self, context):
        return ["not a finding"]


def test_plugins_add_rules_and_a_broken_one_is_named(store_address):
    pm = build_plugin_manager(
        plugins=[("todo-rule", TodoRule()), ("broken-rule", BrokenRule()), ("sloppy", SloppyRule())]
    )
    with Memory.open(store_address, plugin_manager=pm) as memory:
        todo = memory.remember("TODO: describe [[Raft]] elections.").passages[0]
        memory.record_fact("Raft", "leader", "n1")
        memory.record_fact("Raft", "leader", "n2")
        report = memory.lint()
    found = {(f.rule, f.address) for f in report.findings}
    assert ("todo", todo) in found
    assert ("plugin-error", "plugin:broken-rule") in found
    assert ("plugin-error", "plugin:sloppy") in found
    assert "contradiction" in {f.rule for f in report.findings}  # the built-ins still ran
    [broken] = [f for f in report.findings if f.address == "plugin:broken-rule"]
    assert "'broken-rule'" in broken.message and "rule exploded" in broken.message


# --- one definition each: lint and compaction agree ------------------------------------

ENTITIES = ["Raft", "Paxos", "Zab"]
PREDICATES = ["leader", "LEADER!", "term", "Leader"]
VALUES = ["n1", "n2", "n-1", "N1"]
DATES = [None, "2024-01-01", "2024-06-01", "2025-01-01T12:00:00Z"]

remember = st.tuples(st.just("remember"), st.sampled_from(ENTITIES), st.integers(1, 3))
fact = st.tuples(
    st.just("fact"),
    st.sampled_from(ENTITIES[:2]),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    st.sampled_from(DATES),
    st.sampled_from(DATES),
)
actions = st.one_of(
    remember,
    fact,
    st.tuples(st.just("forget_passage"), st.integers(0, 40)),
    st.tuples(st.just("forget_fact"), st.integers(0, 40)),
    st.tuples(st.just("page"), st.sampled_from(ENTITIES)),
    st.tuples(st.just("merge"), st.sampled_from(ENTITIES), st.sampled_from(ENTITIES)),
    st.tuples(st.just("settle"), st.integers(0, 1)),
)
# Build up, change things, build up again: most scenarios reach the rules.
scripts = st.builds(
    lambda a, b, c: a + [step for pair in b for step in pair] + c,
    st.lists(st.one_of(remember, fact), min_size=4, max_size=10),
    st.lists(st.tuples(st.tuples(st.just("page"), st.sampled_from(ENTITIES)), actions), max_size=5),
    st.lists(st.one_of(remember, fact), max_size=5),
)


def play(memory: Memory, script: list[tuple]) -> None:
    passages: list[str] = []
    facts: list[str] = []
    counter = 0
    for action, *args in script:
        try:
            if action == "remember":
                entity, n = args
                for text in passages_about(entity, n, topic=f"topic{counter}"):
                    counter += 1
                    passages += memory.remember(f"{text} Note {counter}.").passages
            elif action == "fact":
                subject, predicate, value, start, end = args
                if start and end and not normalise(start, "s") < normalise(end, "e"):
                    start = None
                fact = memory.record_fact(subject, predicate, value, start, end)
                facts.append(fact.fact)
            elif action == "forget_passage" and passages:
                memory.forget(passages[args[0] % len(passages)])
            elif action == "forget_fact" and facts:
                memory.forget(facts[args[0] % len(facts)])
            elif action == "page":
                for item in memory.compact(kinds=["page", "stale"]).items:
                    if item.payload["entity"]["name"] == args[0]:
                        memory.submit(
                            item.id, content=page_content(item.payload), title=args[0], force=True
                        )
            elif action == "merge":
                memory.propose_merge(list(args))
                for item in memory.compact(kinds=["merge"]).items:
                    memory.submit(item.id, accept=True)
            elif action == "settle":
                items = memory.compact(kinds=["conflict"]).items
                if items:
                    keep = items[0].payload["facts"][args[0]]["address"]
                    memory.submit(items[0].id, keep=[keep])
        except MemorsError:
            pass  # an unknown entity, a merge of one entity with itself: not the point here


def disagreeing_pairs(memory: Memory) -> set[frozenset[str]]:
    """The rule of SPEC §5, written out again over the live facts."""
    facts = memory.facts().facts

    def span(f):
        lo = normalise(f.valid_from, "from") if f.valid_from else None
        hi = normalise(f.valid_to, "to") if f.valid_to else None
        return lo, hi

    out = set()
    for f, g in combinations(facts, 2):
        (a0, a1), (b0, b1) = span(f), span(g)
        overlap = (a0 is None or b1 is None or a0 < b1) and (b0 is None or a1 is None or b0 < a1)
        if (
            f.subject == g.subject
            and fold_value(f.predicate) == fold_value(g.predicate)
            and fold_value(f.value) != fold_value(g.value)
            and overlap
        ):
            out.add(frozenset((f.address, g.address)))
    return out


def stale_gauge(memory: Memory) -> float:
    for family in text_string_to_metric_families(memory.metrics()):
        for sample in family.samples:
            if sample.name == "memors_kb_pages_stale" and sample.labels == {"namespace": "default"}:
                return sample.value
    return 0.0


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scripts)
def test_lint_and_compaction_share_one_definition_of_each_rule(script):
    with temporary_store() as db, Memory.open(db) as memory:
        play(memory, script)
        memory.compact()
        findings = memory.lint().findings
        items = memory.items(status="open").items
        for rule in sorted({f.rule for f in findings}):
            event(f"finding: {rule}")

        def of(rule):
            return [f for f in findings if f.rule == rule]

        # contradiction <-> conflict items <-> the rule written out again
        conflicts = {
            (i.payload["facts"][0]["address"], i.payload["facts"][1]["address"])
            for i in items
            if i.kind == "conflict"
        }
        contradictions = {(f.address, f.related[0]) for f in of("contradiction")}
        assert conflicts == contradictions
        assert {frozenset(p) for p in contradictions} == disagreeing_pairs(memory)

        # missing-page <-> page items <-> entities with >= 3 live passages and no page
        page_items = {i.payload["entity"]["address"] for i in items if i.kind == "page"}
        assert page_items == {f.address for f in of("missing-page")}
        assert page_items == {
            e.address for e in memory.entities().entities if e.passages >= 3 and e.page is None
        }

        # stale-page <-> stale items <-> the memors_kb_pages_stale gauge
        stale_items = {
            i.payload["page"]["address"]: sorted(c["address"] for c in i.payload["changes"])
            for i in items
            if i.kind == "stale"
        }
        stale_findings = {f.address: sorted(f.related) for f in of("stale-page")}
        assert stale_items == stale_findings
        assert stale_gauge(memory) == len(stale_findings)


def test_the_scenarios_reach_every_rule():
    """The generated scenarios are not vacuous: a hand-written one of the
    same actions produces a finding of each shared rule."""
    script = [
        ("remember", "Raft", 3),
        ("page", "Raft"),
        ("remember", "Raft", 2),
        ("remember", "Zab", 3),
        ("fact", "Paxos", "leader", "n1", None, None),
        ("fact", "Paxos", "LEADER!", "n2", "2024-01-01", None),
    ]
    with temporary_store() as db, Memory.open(db) as memory:
        play(memory, script)
        assert {f.rule for f in memory.lint().findings} == {
            "contradiction",
            "missing-page",
            "stale-page",
        }


def test_module_docstring_lists_the_rules():
    """The hook's reference text names every built-in rule."""
    from memors_core.plugins import hookspecs

    doc = textwrap.dedent(hookspecs.memors_lint_rules.__doc__ or "")
    for rule in BUILTIN_RULES:
        assert f"``{rule}``" in doc


def test_operations_doc_describes_every_rule():
    doc = (ROOT / "docs" / "operations.md").read_text()
    for rule in (*BUILTIN_RULES, "plugin-error"):
        assert f"| `{rule}` |" in doc, rule


def test_lint_reads_the_last_items_of_its_findings_once_per_kind(memory, monkeypatch):
    # Whether a skipped item acknowledges a finding was a look-up of its key
    # per finding and kind (a round trip each on PostgreSQL); it is one read
    # per kind for all the findings. (Counted on PostgreSQL: SQLite's lint
    # reads the file through a connection of its own.)
    for n in range(20):
        memory.remember("\n\n".join(passages_about(f"Entity{n}", 3)), uri=f"d/{n}")
    with statements(memory, monkeypatch) as seen:
        report = memory.lint()
    assert len([f for f in report.findings if f.rule == "missing-page"]) == 20
    if memory.store.tx.engine == "postgres":
        reads = [s for s in seen if "FROM work_items" in s]
        assert 1 <= len(reads) <= len(memory.kinds.names()), reads
