"""The expired kind, check and lint rule, on a real store (memors_core.testing)."""

import pytest
from memors_core.plugins import BadInput, to_json
from memors_core.testing import open_items, temporary_memory, write_page

import memors_expired

PAGE = "Raft elects one leader per term.\n\nThe Raft leader is node 3.\n"


@pytest.fixture
def memory():
    # The module under test, whether or not the package is installed.
    with temporary_memory(plugins=[("expired", memors_expired)]) as memory:
        yield memory


def expire_a_covered_fact(memory) -> str:
    fact = memory.record_fact("Raft", "leader", "node 3", "2019-01-01", "2020-01-01").fact
    write_page(memory, "Raft", PAGE)
    return fact


def test_an_expired_fact_on_a_page_becomes_an_item(memory):
    fact = expire_a_covered_fact(memory)
    [item] = open_items(memory, "expired")
    assert item["payload"]["fact"]["address"] == fact
    assert item["payload"]["stated_as_current"] == ["The Raft leader is node 3."]


def test_the_kind_says_what_an_item_asks_for_and_how_it_is_done(memory):
    expire_a_covered_fact(memory)
    [item] = open_items(memory, "expired")
    kind = memory.kinds.get("expired")
    assert kind.summary(item["payload"]) == (
        "Raft leader 'node 3' expired at 2020-01-01; page 'Raft' covers it"
    )
    assert "renew_until" in kind.instructions and "retire" in kind.instructions
    assert kind.usage.startswith("submit {id} --set renew_until=")


def test_no_page_no_item(memory):
    memory.record_fact("Paxos", "leader", "node 1", valid_to="2020-01-01")
    assert open_items(memory, "expired") == []


def test_renewing_records_the_fact_again_until_the_new_date(memory):
    fact = expire_a_covered_fact(memory)
    [item] = open_items(memory, "expired")
    report = memory.submit(item["id"], {"renew_until": "2999-01-01"})
    renewed = to_json(memory.get(report.address))
    assert (renewed["value"], renewed["valid_from"], renewed["valid_to"]) == (
        "node 3",
        "2020-01-01",
        "2999-01-01",
    )
    assert to_json(memory.get(fact))["status"] == "live"  # history stays
    assert open_items(memory, "expired") == []
    assert "expired-on-page" not in {f.rule for f in memory.lint().findings}


def test_retiring_forgets_the_fact(memory):
    fact = expire_a_covered_fact(memory)
    [item] = open_items(memory, "expired")
    assert memory.submit(item["id"], {"retire": True}).address == fact
    assert to_json(memory.get(fact))["status"] == "forgotten"


@pytest.mark.parametrize(
    ("resolution", "message"),
    [
        ({}, "needs renew_until = a date, or retire = true"),
        ({"retire": "yes"}, "expected true or false, got str @ resolution.retire"),
        ({"renew_until": "2020-06-01"}, "not in the future"),
        ({"renew_until": "soon"}, "'soon' is not an ISO 8601 date"),
        ({"renew_until": "2999-01-01", "retire": True}, "exclude each other"),
    ],
)
def test_a_resolution_that_does_not_fit_is_refused_readably(memory, resolution, message):
    expire_a_covered_fact(memory)
    [item] = open_items(memory, "expired")
    with pytest.raises(BadInput, match=message):
        memory.submit(item["id"], resolution)


def test_the_check_refuses_a_page_that_states_an_expired_value_as_current(memory):
    fact = memory.record_fact("Raft", "leader", "node 3", "2019-01-01", "2020-01-01").fact
    for text in ["[[Raft]] elects a leader.", "[[Raft]] keeps a log.", "[[Raft]] has terms."]:
        memory.remember(text)
    [item] = open_items(memory, "page")
    refused = memory.submit(item["id"], content=PAGE, title="Raft", dry_run=True)
    assert refused.checks["expired-value"].flagged == [
        {"fact": fact, "expired": "2020-01-01", "sentence": "The Raft leader is node 3."}
    ]
    fixed = PAGE.replace("is node 3.", "was node 3 until 2020.")
    assert (
        memory.submit(item["id"], content=fixed, title="Raft", dry_run=True)
        .checks["expired-value"]
        .passed
    )


def test_lint_finds_pages_that_state_an_expired_value(memory):
    fact = expire_a_covered_fact(memory)
    [finding] = [f for f in memory.lint().findings if f.rule == "expired-on-page"]
    assert finding.related == [fact]
    assert "expired at 2020-01-01" in finding.message
