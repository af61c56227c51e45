"""Lint reaches clean on a healthy store: history is not a finding, a skip is
acknowledged until what it depends on changes, findings filter by rule, and
a corpus worked through to the end lints clean."""

from __future__ import annotations

import textwrap
import time
from datetime import UTC, datetime, timedelta

import pytest

from memors_core import Memory, hookimpl
from memors_core.domain.model import Finding
from memors_core.engine.lint import BUILTIN_RULES
from memors_core.errors import BadInput, Refused
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import passages_about
from paths import ROOT


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


def expiring_fact(memory: Memory, subject: str, predicate: str, value: str) -> tuple[str, str]:
    """A fact recorded while it held, whose validity has ended since (it
    ends a moment after it is recorded; this waits for that moment)."""
    ends = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    fact = memory.record_fact(subject, predicate, value, valid_to=ends).fact
    while datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") <= ends:
        time.sleep(0.05)
    return fact, ends


def found(memory: Memory, **kw) -> set[tuple[str, str]]:
    return {(f.rule, f.address) for f in memory.lint(**kw).findings}


# --- history ---------------------------------------------------------------------


def test_facts_that_ended_as_history_are_not_findings(memory):
    # Recorded about the past: it had ended when it was recorded.
    memory.record_fact("Raft", "maintainer", "Ongaro", "2013-01-01", "2016-01-01")
    # Followed by a newer value of the same predicate (spelled otherwise).
    ended, at = expiring_fact(memory, "Paxos", "maintainer", "Lamport")
    memory.record_fact("Paxos", "Maintainer", "the community", valid_from=at)
    assert found(memory) == set()
    # Expired while it held, and nothing took over: news, reported.
    news, ends = expiring_fact(memory, "Zab", "release", "3.4")
    [finding] = memory.lint().findings
    assert (finding.rule, finding.address) == ("expired-fact", news)
    assert finding.message == f"Zab release '3.4' expired at {ends}"
    assert memory.get(ended).status == "live"  # history stays; it is just not news


def test_the_bound_fix_lint_recommends_leaves_lint_clean(memory):
    older = memory.record_fact("Paxos", "status", "draft", valid_from="1989-01-01").fact
    newer = memory.record_fact("Paxos", "status", "published", valid_from="1998-01-01").fact
    assert found(memory) == {("contradiction", older)}
    item = open_item(memory, "conflict")
    report = memory.submit(item.id, bound={"fact": older, "valid_to": "1998-01-01"})
    assert report.stored, report
    copy = report.address
    assert memory.get(copy).valid_to == "1998-01-01" and copy != older
    # The copy ended long ago and was recorded today, with `newer` taking over.
    assert found(memory) == set()
    assert memory.get(newer).status == "live"


# --- skipped items -----------------------------------------------------------------


def test_a_skipped_page_is_acknowledged_until_its_entity_gains_a_passage(memory):
    for text in passages_about("Raft", 3, "consensus"):
        memory.remember(text)
    raft = memory.entity("Raft").address
    assert found(memory) == {("missing-page", raft)}
    item = open_item(memory, "page", "Raft")
    memory.submit(item.id, skip=True, reason="covered by the Raft paper")
    assert found(memory) == set()
    assert memory.compact().open == 0  # compaction agrees: not asked again
    memory.remember("[[Raft]] snapshots compact the log once it grows past a threshold.")
    # Its inputs changed: reported again, before compact runs, and asked again.
    assert found(memory) == {("missing-page", raft)}
    assert [i.kind for i in memory.compact().items] == ["page"]


def test_a_skipped_conflict_and_stale_page_are_acknowledged(memory):
    a = memory.record_fact("Raft", "leader", "n1").fact
    memory.record_fact("Raft", "leader", "n2")
    for text in passages_about("Zab", 3, "broadcast"):
        memory.remember(text)
    item = open_item(memory, "page", "Zab")
    page = memory.submit(item.id, content=page_content(item.payload), title="Zab").address
    memory.forget(memory.entity("Zab").passages[0].address, reason="wrong")
    assert found(memory) == {("contradiction", a), ("stale-page", page)}
    for kind in ("conflict", "stale"):
        memory.submit(open_item(memory, kind).id, skip=True, reason="later")
    assert found(memory) == set()
    # The stale page loses another passage: its item's inputs changed.
    memory.forget(memory.entity("Zab").passages[0].address, reason="wrong too")
    assert found(memory) == {("stale-page", page)}


def test_a_finding_without_a_skipped_item_is_reported(memory):
    """A done item does not acknowledge anything: only a skip does."""
    for text in passages_about("Raft", 3, "consensus"):
        memory.remember(text)
    item = open_item(memory, "page", "Raft")
    page = memory.submit(item.id, content=page_content(item.payload), title="Raft").address
    memory.forget(page, reason="rewrite it")
    assert found(memory) == {("missing-page", memory.entity("Raft").address)}


# --- filtering ---------------------------------------------------------------------


@pytest.fixture
def two_rules(memory):
    a = memory.record_fact("Raft", "leader", "n1").fact
    memory.record_fact("Raft", "leader", "n2")
    for text in passages_about("Zab", 3, "broadcast"):
        memory.remember(text)
    return a, memory.entity("Zab").address


def test_findings_filter_by_rule_and_namespace(memory, two_rules):
    fact, zab = two_rules
    assert found(memory) == {("contradiction", fact), ("missing-page", zab)}
    assert found(memory, rules=["missing-page"]) == {("missing-page", zab)}
    assert found(memory, rules=["contradiction", "missing-page"]) == found(memory)
    assert found(memory, rules=["expired-fact"]) == set()
    assert found(memory, rules=["missing-page"], namespace="other") == set()
    with pytest.raises(BadInput, match="unknown lint rule 'missing-pages': the rules are"):
        memory.lint(rules=["missing-pages"])
    with pytest.raises(BadInput, match="rules must be a list of lint rule names"):
        memory.lint(rules="missing-page")


def test_with_a_plugin_its_rules_filter_too(store_address):
    class Plugin:
        @hookimpl
        def memors_lint_rules(self, context):
            return [Finding("todo-left", "memo://entity/x", "a TODO is left")]

    pm = build_plugin_manager()
    pm.register(Plugin(), "todo")
    with Memory.open(store_address, plugin_manager=pm) as memory:
        memory.record_fact("Raft", "leader", "n1")
        assert [f.rule for f in memory.lint(rules=["todo-left"]).findings] == ["todo-left"]
        # A plugin's rule is known by its findings alone: any name is taken.
        assert memory.lint(rules=["quiet-rule"]).findings == []


def test_cli_lint_rule_flag(cli, two_rules_cli):
    r = cli("lint", "--rule", "missing-page", "--json")
    assert r.code == 1 and [f["rule"] for f in r.json["findings"]] == ["missing-page"], r
    r = cli("lint", "--rule", "expired-fact")
    assert (r.code, r.out.strip()) == (0, "namespace default: no findings (expired-fact)"), r
    r = cli("lint", "--rule", "contradiction", "--rule", "missing-page", "--json")
    assert r.code == 1 and len(r.json["findings"]) == 2, r
    r = cli("lint", "--rule", "stale")
    assert r.code == 2 and r.err.strip().endswith(
        f"unknown lint rule 'stale': the rules are {', '.join(BUILTIN_RULES)}"
    ), r
    assert "missing-page, stale-page" in r.err
    assert "Traceback" not in r.err


@pytest.fixture
def two_rules_cli(cli):
    cli("fact", "add", "Raft", "leader", "n1")
    cli("fact", "add", "Raft", "leader", "n2")
    text = "\n\n".join(passages_about("Zab", 3, "broadcast"))
    assert cli("remember", "-", input=text).code == 0


# --- a corpus worked through --------------------------------------------------------


def settle(memory: Memory, item, skip: set[str]) -> None:
    """What a careful agent does with one item, from its payload alone."""
    payload = item.payload
    if item.kind in ("page", "stale"):
        name = payload["entity"]["name"]
        if name in skip:
            report = memory.submit(item.id, skip=True, reason="not worth a page yet")
        else:
            report = memory.submit(item.id, content=page_content(payload), title=name)
    elif item.kind == "conflict":
        older, newer = sorted(payload["facts"], key=lambda f: f["valid_from"] or "")
        if older["valid_from"] and newer["valid_from"]:  # it changed over time
            report = memory.submit(
                item.id, bound={"fact": older["address"], "valid_to": newer["valid_from"]}
            )
        else:
            report = memory.submit(item.id, keep=[newer["address"]])
    elif item.kind == "merge":
        report = memory.submit(item.id, accept=True)
    elif item.kind == "duplicate":
        report = memory.submit(item.id, keep=[payload["passages"][0]["address"]])
    else:
        raise AssertionError(f"no plan for {item.kind}")
    assert report.status in ("done", "skipped"), report


def test_a_corpus_worked_through_lints_clean(memory):
    for path in sorted((ROOT / "demo" / "corpus").glob("*.md")):
        memory.remember(path.read_text(), uri=path.name)
    memory.remember(
        textwrap.dedent("""\
            [[Zab]] is the atomic broadcast protocol of ZooKeeper.

            [[Zab]] elects a leader that proposes every state change.

            [[Zab]] followers acknowledge a proposal before it commits.
            """)
    )
    memory.record_fact("Raft", "maintainer", "Ongaro", "2013-01-01", "2016-01-01")
    memory.record_fact("Raft", "maintainer", "the etcd team", "2016-01-01")
    memory.record_fact("Paxos", "status", "draft", valid_from="1989-01-01")
    memory.record_fact("Paxos", "status", "published", valid_from="1998-01-01")
    memory.record_fact("Paxos", "invented by", "Leslie Lamport")
    assert memory.lint().findings  # plenty to do
    rounds = 0
    while items := memory.compact().items:
        rounds += 1
        assert rounds < 10, [i.kind for i in items]
        for item in items:
            try:
                settle(memory, item, skip={"Zab"})
            except Refused as exc:  # an earlier one changed its inputs: next round
                assert "changed" in str(exc) or "no longer applies" in str(exc), exc
    assert memory.lint().findings == []
    # Something the skipped item depends on changes: it is reported again.
    memory.remember("[[Zab]] recovers a new leader's history before it serves.")
    assert {f.rule for f in memory.lint().findings} == {"missing-page"}
