"""The Ollama executor end to end: the real CLI in a subprocess, a real
SQLite store, and a stand-in Ollama speaking real HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import pty
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memors_core import Memory
from memors_core.wire import to_json
from ollama_standin import INVENTED, INVENTED_YEAR, OllamaStandIn

MODEL = "test-model"

ENTITIES = {
    "Raft": (
        [
            "Raft is a consensus algorithm designed to be easy to understand.",
            "Raft elects a leader that manages log replication across the cluster.",
            "A Raft cluster tolerates the failure of a minority of servers.",
        ],
        [("designed by", "Diego Ongaro")],
    ),
    "Paxos": (
        [
            "Paxos is a family of protocols for reaching consensus in a network.",
            "Paxos proposers send prepare requests to a quorum of acceptors.",
            "Multi-Paxos keeps a stable leader to skip the prepare phase.",
        ],
        [("published in", "The Part-Time Parliament")],
    ),
    "Zab": (
        [
            "Zab is the atomic broadcast protocol used by Apache ZooKeeper.",
            "Zab delivers state changes in the order the primary proposed them.",
            "Zab recovers by electing a new primary after a crash.",
        ],
        [],
    ),
}


#: More subjects for runs with many items: three passages each, no facts.
SPARE = [
    "Alder",
    "Birch",
    "Cedar",
    "Dogwood",
    "Elm",
    "Fir",
    "Ginkgo",
    "Hazel",
    "Juniper",
    "Larch",
]
for _name in SPARE:
    ENTITIES[_name] = (
        [
            f"{_name} keeps its records in an append-only ledger.",
            f"{_name} copies the ledger to three sites every night.",
            f"An audit of {_name} found no missing entries.",
        ],
        [],
    )


def seed(db: Path, names: tuple[str, ...] = ("Raft",)) -> None:
    """A real store with a page item for each named entity."""
    with Memory.open(db) as memory:
        for name in names:
            passages, facts = ENTITIES[name]
            memory.remember("\n\n".join(passages), uri=f"file:///{name}.md", entities=[name])
            for predicate, value in facts:
                memory.record_fact(name, predicate, value)


def state(db: Path) -> dict:
    with Memory.open(db) as memory:
        items = to_json(memory.items())["items"]
        pages = to_json(memory.search("raft paxos zab", granularity="page", limit=50))["results"]
    return {
        "open": sorted(
            (i["kind"], i["payload"]["entity"]["name"]) for i in items if i["status"] == "open"
        ),
        "done": sorted(
            (i["kind"], i["payload"]["entity"]["name"]) for i in items if i["status"] == "done"
        ),
        "pages": pages,
    }


@pytest.fixture
def ollama():
    with OllamaStandIn(models=(f"{MODEL}:latest", "llama3.1:8b-instruct")) as standin:
        yield standin


@pytest.fixture
def run(cli, ollama):
    def go(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
        extra = {
            "MEMORS_OLLAMA_URL": ollama.url,
            "MEMORS_OLLAMA_MODEL": MODEL,
            "MEMORS_OLLAMA_TIMEOUT": "20",
            **(env or {}),
        }
        return cli("compact", "--executor", "ollama", *args, extra_env=extra, timeout=timeout)

    return go


# --- dry run and --apply ---------------------------------------------------------------------


def test_dry_run_shows_title_diff_and_checks_and_stores_nothing(cli, run, ollama):
    seed(cli.db)
    r = run()
    assert r.code == 0, r
    assert "item 1 (page) Raft: would be written" in r.out
    assert "title: Raft" in r.out
    assert "omission: passed" in r.out and "corruption: passed" in r.out
    assert "+Raft elects a leader that manages log replication across the cluster." in r.out
    assert "1 would be written, 0 refused by checks, 0 failed" in r.out
    assert "nothing stored" in r.out
    after = state(cli.db)
    assert after["open"] == [("page", "Raft")] and after["pages"] == []
    # What the model was asked: Ollama's /api/chat shape, the payload, the rules.
    (chat,) = ollama.chats()
    assert chat["model"] == MODEL and chat["stream"] is True and chat["think"] is False
    assert chat["options"]["temperature"] == 0
    system, user = chat["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "Use only what the passages and facts say" in system["content"]
    assert "State every recorded fact" in system["content"]
    assert 'The first line is "# "' in system["content"]
    # Passages are shown by their payload ref, the number a citation marker uses.
    assert "end it with their markers" in system["content"] and "[1][3]" in system["content"]
    for n, text in enumerate(ENTITIES["Raft"][0], 1):
        assert f'<passage ref="{n}">\n{text}\n</passage>' in user["content"]
    assert "F1: Raft | designed by | Diego Ongaro" in user["content"]
    # A first draft that passes: one request, no revision.
    assert "revisions" not in r.out


def test_apply_stores_the_page_and_it_is_searchable(cli, run):
    seed(cli.db)
    r = run("--apply")
    assert r.code == 0, r
    assert "item 1 (page) Raft: written" in r.out
    assert "stored: memo://page/" in r.out
    assert "applied with test-model: 1 item(s): 1 written, 0 refused by checks, 0 failed" in r.out
    found = cli("search", "leader log replication", "--granularity", "page", "--json")
    (hit,) = found.json["results"]
    page = cli("get", hit["address"], "--json").json
    assert page["title"] == "Raft" and page["is_inference"] == 1
    assert "Diego Ongaro" in page["content"]
    assert len(page["sources"]) == 3
    # The model cited with markers: each sentence keeps the passage it names.
    (leader,) = [s for s in page["sentences"] if "elects a leader" in s["text"]]
    (source,) = leader["sources"]
    assert "elects a leader" in cli("get", source, "--json").json["text"]
    assert state(cli.db)["done"] == [("page", "Raft")]
    # The queue is empty now: a second run asks the model nothing.
    again = run("--apply")
    assert again.code == 0 and "0 item(s)" in again.out


def test_a_non_streamed_answer_is_handled_too(cli, run, ollama):
    seed(cli.db)
    ollama.stream = False  # one JSON object, even though the executor asks to stream
    r = run("--apply", "--json")
    assert r.code == 0, r
    assert r.json["summary"]["written"] == 1


def test_json_prints_one_object_with_item_reports_and_summary(cli, run):
    seed(cli.db, ("Raft", "Paxos"))
    r = run("--json")
    assert r.code == 0, r
    data = r.json  # the whole of stdout is one JSON object
    assert data["dry_run"] is True and data["model"] == MODEL and data["open"] == 2
    assert data["summary"] == {
        "items": 2,
        "written": 0,
        "would_write": 2,
        "refused": 0,
        "failed": 0,
        "not_attempted": 0,
    }
    first = data["items"][0]
    assert first["outcome"] == "would-write" and first["stored"] is False
    assert first["revisions"] == 0
    assert first["title"] == "Raft" and first["address"] is None
    assert first["diff"].startswith("--- previous\n+++ submitted\n")
    assert set(first["checks"]) >= {"omission", "corruption"}


def test_limit_caps_the_items_written(cli, run, ollama):
    seed(cli.db, ("Raft", "Paxos"))
    r = run("--limit", "1", "--json")
    assert r.code == 0, r
    assert r.json["open"] == 2 and r.json["summary"]["items"] == 1
    assert len(ollama.chats()) == 1


def test_stale_items_get_the_previous_page_and_what_changed(cli, run, ollama):
    seed(cli.db)
    assert run("--apply").code == 0
    with Memory.open(cli.db) as memory:
        memory.remember(
            "Raft uses randomized election timeouts.\n\nRaft snapshots compact the log.",
            entities=["Raft"],
        )
    r = run("--kinds", "stale", "--apply", "--json")
    assert r.code == 0, r
    (item,) = r.json["items"]
    assert item["kind"] == "stale" and item["outcome"] == "written"
    assert "+Raft snapshots compact the log." in item["diff"]
    prompt = ollama.chats()[-1]["messages"][1]["content"]
    assert "PREVIOUS PAGE (version 1" in prompt and "<previous_page>" in prompt
    assert 'status="new"' in prompt and "2 new passage(s)" in prompt
    # The previous page's markers named an older numbering: they are not shown.
    previous = prompt.split("<previous_page>\n")[1].split("</previous_page>")[0]
    assert "Raft elects a leader that manages log replication across the cluster.\n" in previous
    assert "[2]" not in previous
    assert cli("get", item["address"], "--json").json["version"] == 2


# --- the checks guard the store -------------------------------------------------------------


def test_checks_refuse_an_invented_sentence_and_the_run_goes_on(cli, run, ollama):
    seed(cli.db, ("Raft", "Paxos", "Zab"))
    ollama.modes = {"raft": "invent", "zab": "omit-facts"}  # Zab has no facts: passes
    r = run("--apply", "--json")
    assert r.code == 1, r
    by = {i["entity"]: i for i in r.json["items"]}
    assert by["Raft"]["outcome"] == "refused" and by["Raft"]["stored"] is False
    (flag,) = by["Raft"]["checks"]["corruption"]["flagged"]
    assert flag["sentence"] == INVENTED
    assert by["Paxos"]["outcome"] == "written" and by["Zab"]["outcome"] == "written"
    assert r.json["summary"]["refused"] == 1 and r.json["summary"]["written"] == 2
    after = state(cli.db)
    assert after["open"] == [("page", "Raft")]
    assert not any("Raft" in p["text"] for p in after["pages"])


def test_omission_refuses_a_page_that_leaves_out_a_fact(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "omit-facts"
    r = run("--apply")
    assert r.code == 1, r
    assert "refused by the checks" in r.out and "omission: FLAGGED" in r.out
    assert "memo://fact/" in r.out and "of its words are on the page" in r.out
    assert state(cli.db)["pages"] == []
    # The model was told which fact is missing, and left it out again.
    feedback = ollama.chats()[1]["messages"][-1]["content"]
    assert "Fact F1 (Raft | designed by | Diego Ongaro) is missing" in feedback


def test_a_dry_run_reports_a_refusal_too(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "invent"
    r = run()
    assert r.code == 1, r
    assert "corruption: FLAGGED" in r.out and INVENTED in r.out
    assert "0 would be written, 1 refused by checks" in r.out


# --- one revision after a refusal -----------------------------------------------------------


def _conversation(chat: dict) -> list[str]:
    return [m["role"] for m in chat["messages"]]


def test_a_refused_draft_is_revised_once_and_the_revision_stored(cli, run, ollama):
    seed(cli.db, ("Raft", "Paxos"))
    ollama.modes = {"raft": ["invent-date", "good"]}  # told the flags, the model fixes it
    r = run("--apply", "--json")
    assert r.code == 0, r
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "written" and raft["revisions"] == 1
    assert all(c["passed"] for c in raft["checks"].values())  # the final checks: the revision's
    assert INVENTED_YEAR not in raft["content"]
    assert paxos["outcome"] == "written" and paxos["revisions"] == 0
    assert r.json["summary"]["written"] == 2
    # Raft: a draft, then one follow-up turn in the same conversation; Paxos: one request.
    first, second, only = ollama.chats()
    assert _conversation(first) == ["system", "user"]
    assert _conversation(second) == ["system", "user", "assistant", "user"]
    assert second["messages"][:2] == first["messages"]
    assert f"since {INVENTED_YEAR}" in second["messages"][2]["content"]  # its own draft
    feedback = second["messages"][3]["content"]
    assert "refused" in feedback
    dated = (
        f"Raft is a consensus algorithm designed to be easy to understand, since {INVENTED_YEAR}."
    )
    assert f'Sentence: "{dated}"' in feedback
    assert f'The date "{INVENTED_YEAR}" is in none of its sources ([1], F1)' in feedback
    assert _conversation(only) == ["system", "user"]
    page = cli("get", raft["address"], "--json").json
    assert INVENTED_YEAR not in page["content"]
    assert state(cli.db)["done"] == [("page", "Paxos"), ("page", "Raft")]


def test_an_uncited_merged_sentence_is_revised_with_markers(cli, run, ollama):
    seed(cli.db)
    ollama.mode = ["merge", "merge-cited"]
    r = run("--apply")
    assert r.code == 0, r
    assert "item 1 (page) Raft: written after one revision" in r.out
    assert "revisions: 1" in r.out
    feedback = ollama.chats()[1]["messages"][-1]["content"]
    merged = "; ".join(t.rstrip(".") for t in ENTITIES["Raft"][0]) + "."
    assert f'Sentence: "{merged}"' in feedback
    assert "closest source, [2]" in feedback and "consensus, algorithm" in feedback
    assert "end it with the marker of each" in feedback
    (hit,) = state(cli.db)["pages"]
    page = cli("get", hit["address"], "--json").json
    (sentence,) = [s for s in page["sentences"] if s["text"] == merged]
    assert len(sentence["sources"]) == 3  # the merged sentence cites all three passages


def test_a_dry_run_revises_too_and_stores_nothing(cli, run, ollama):
    seed(cli.db)
    ollama.mode = ["invent-date", "good"]
    r = run("--json")
    assert r.code == 0, r
    (item,) = r.json["items"]
    assert item["outcome"] == "would-write" and item["revisions"] == 1
    assert item["stored"] is False and item["address"] is None
    assert len(ollama.chats()) == 2
    after = state(cli.db)
    assert after["open"] == [("page", "Raft")] and after["pages"] == []


def test_a_revision_refused_again_reports_the_item_refused(cli, run, ollama):
    seed(cli.db, ("Raft", "Zab"))
    ollama.modes = {"raft": ["merge", "invent-date"]}  # fixes one thing, breaks another
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, zab = r.json["items"]
    assert raft["outcome"] == "refused" and raft["revisions"] == 1
    assert raft["stored"] is False and raft["address"] is None
    # The report shows the revision's flags, not the first draft's.
    assert raft["checks"]["corruption"]["passed"] is True
    (flag,) = raft["checks"]["substitution"]["flagged"]
    assert flag["token"] == INVENTED_YEAR and flag["class"] == "date"
    assert zab["outcome"] == "written"  # the run went on
    assert r.json["summary"]["refused"] == 1 and r.json["summary"]["written"] == 1
    assert len(ollama.chats()) == 3  # Raft twice, never a third time; Zab once
    after = state(cli.db)
    assert after["open"] == [("page", "Raft")]
    assert not any("Raft" in p["text"] for p in after["pages"])
    # The text report says so too.
    ollama.requests.clear()
    text = run()
    assert text.code == 1, text
    assert "item 1 (page) Raft: refused by the checks (not stored) after one revision" in text.out
    assert (
        "revisions: 1" in text.out
        and f"date '{INVENTED_YEAR}' is in none of its sources" in text.out
    )
    assert "0 would be written, 1 refused by checks" in text.out


def test_a_marker_naming_no_passage_is_sent_back_for_a_revision(cli, run, ollama):
    seed(cli.db)
    ollama.mode = ["bad-marker", "good"]
    r = run("--apply", "--json")
    assert r.code == 0, r
    (item,) = r.json["items"]
    assert item["outcome"] == "written" and item["revisions"] == 1 and item["error"] is None
    feedback = ollama.chats()[1]["messages"][-1]["content"]
    assert "citation marker [101] names no passage of this item" in feedback


def test_a_marker_naming_no_passage_twice_fails_the_item(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "bad-marker"
    r = run("--apply", "--json")
    assert r.code == 1, r
    (item,) = r.json["items"]
    assert item["outcome"] == "failed" and item["revisions"] == 1
    assert "citation marker [101] names no passage" in item["error"]
    assert len(ollama.chats()) == 2 and state(cli.db)["pages"] == []


def test_a_revision_that_is_not_a_page_leaves_the_refusal(cli, run, ollama):
    seed(cli.db)
    ollama.mode = ["invent-date", "empty"]
    r = run("--apply", "--json")
    assert r.code == 1, r
    (item,) = r.json["items"]
    assert item["outcome"] == "refused" and item["revisions"] == 1
    assert item["error"].startswith("the revision failed: the model answered nothing")
    assert item["checks"]["substitution"]["passed"] is False  # the first draft's flags
    assert state(cli.db)["pages"] == []


def test_progress_says_a_revision_was_made(cli, run, ollama):
    seed(cli.db)
    ollama.mode = ["invent-date", "good"]
    r = run(env={"MEMORS_PROGRESS": "1"})
    assert r.code == 0, r
    line = r.err.strip().splitlines()[-1]
    assert line.startswith("[1/1] item 1 (page) Raft: would be written (dry run:")
    assert "after one revision" in line


# --- what the model answers -----------------------------------------------------------------


def test_a_think_block_is_stripped_before_the_checks(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "think"  # its thought holds claims no source supports
    r = run("--apply", "--json")
    assert r.code == 0, r
    (item,) = r.json["items"]
    assert item["outcome"] == "written" and "think" not in item["content"]
    assert "Mars" not in cli("get", item["address"], "--json").json["content"]


def test_a_fenced_page_is_unwrapped(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "fenced"
    r = run("--json")
    assert r.code == 0, r
    assert "```" not in r.json["items"][0]["content"]


#: Each way a model's answer or the endpoint can go wrong for one item: the
#: item fails with a one-line error, nothing of it is stored, the run goes on.
BAD_ANSWERS = {
    "json": "answered JSON, not a Markdown page",
    "empty": "answered nothing",
    "think-only": "answered nothing",
    "no-title": "no title: its first line must be '# Title'",
    "cut-off": "cut off",
    "malformed": "malformed JSON",
    "error500": "Ollama answered 500 to POST /api/chat: llama runner process",
    "error-line": "Ollama reported an error",
}


def test_each_bad_answer_fails_its_item_and_the_run_goes_on(cli, run, ollama):
    names = tuple(SPARE[: len(BAD_ANSWERS)])
    seed(cli.db, ("Raft", *names))
    ollama.modes = {n.casefold(): mode for n, mode in zip(names, BAD_ANSWERS, strict=True)}
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, *bad = r.json["items"]
    assert raft["outcome"] == "written"
    for item, (mode, says) in zip(bad, BAD_ANSWERS.items(), strict=True):
        assert item["outcome"] == "failed", (mode, item)
        assert says in item["error"], (mode, item["error"])
        assert item["stored"] is False and item["address"] is None
        # one line on stderr for it
        (line,) = [ln for ln in r.err.splitlines() if f"item {item['item']} " in ln]
        assert says in line
    assert "Traceback" not in r.err
    assert r.json["summary"]["failed"] == len(BAD_ANSWERS)
    assert r.json["summary"]["written"] == 1
    with Memory.open(cli.db) as memory:
        still_open = {i.payload["entity"]["name"] for i in memory.items(status="open").items}
    assert still_open == set(names)


# --- usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kinds", ["conflict", "page,merge"])
def test_kinds_other_than_page_and_stale_are_a_usage_error(cli, run, ollama, kinds):
    seed(cli.db)
    r = run("--kinds", kinds)
    assert r.code == 2, r
    assert "--kinds may name only page and stale" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert ollama.requests == []


def test_default_kinds_are_page_and_stale(cli, run, ollama):
    seed(cli.db)
    with Memory.open(cli.db) as memory:
        memory.record_fact("Raft", "designed by", "John Ousterhout")  # a conflict item
    r = run("--json")
    assert r.code == 0, r
    assert [i["kind"] for i in r.json["items"]] == ["page"]


def test_a_missing_model_is_an_error_before_any_request(cli, run, ollama):
    seed(cli.db)
    r = run(env={"MEMORS_OLLAMA_MODEL": ""})
    assert r.code == 2, r
    assert "set MEMORS_OLLAMA_MODEL" in r.err and len(r.err.strip().splitlines()) == 1
    assert ollama.requests == []
    j = run("--json", env={"MEMORS_OLLAMA_MODEL": ""})
    assert j.code == 2 and j.json["error"]["code"] == "no-model"


@pytest.mark.parametrize("value", ["abc", "0"])
def test_a_bad_timeout_is_a_usage_error(cli, run, ollama, value):
    r = run(env={"MEMORS_OLLAMA_TIMEOUT": value})
    assert r.code == 2, r
    assert "MEMORS_OLLAMA_TIMEOUT" in r.err and ollama.requests == []


def test_apply_and_allow_remote_need_the_executor(cli):
    r = cli("compact", "--apply")
    assert r.code == 2 and "--executor (ollama or openai)" in r.err


# --- the loopback rule ----------------------------------------------------------------------


def test_a_remote_endpoint_is_refused_before_any_connection(cli, run):
    seed(cli.db)
    r = run(env={"MEMORS_OLLAMA_URL": "http://ollama.invalid:11434"})
    assert r.code == 2, r
    assert "--allow-remote" in r.err and "ollama.invalid" in r.err
    assert len(r.err.strip().splitlines()) == 1
    # The store was not touched: no item was even created.
    assert state(cli.db)["open"] == []


def test_with_allow_remote_an_unresolvable_host_fails_as_unreachable(cli, run):
    seed(cli.db)
    r = run("--allow-remote", env={"MEMORS_OLLAMA_URL": "http://ollama.invalid:11434"})
    assert r.code == 2, r
    assert "cannot reach Ollama at http://ollama.invalid:11434" in r.err
    assert "does not resolve" in r.err and "Traceback" not in r.err


def test_localhost_is_loopback(cli, run, ollama):
    seed(cli.db)
    r = run("--apply", env={"MEMORS_OLLAMA_URL": f"http://localhost:{ollama.port}"})
    assert r.code == 0, r
    assert len(state(cli.db)["pages"]) == 1


# --- endpoint errors: one line, nothing half-stored -------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_endpoint_is_one_line_and_stores_nothing(cli, run):
    seed(cli.db)
    r = run("--apply", env={"MEMORS_OLLAMA_URL": f"http://127.0.0.1:{_closed_port()}"})
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "cannot reach Ollama" in line and "connection refused" in line
    j = run("--apply", "--json", env={"MEMORS_OLLAMA_URL": f"http://127.0.0.1:{_closed_port()}"})
    assert j.json["error"]["code"] == "unreachable"
    assert state(cli.db)["pages"] == [] and state(cli.db)["open"] == [("page", "Raft")]


def test_an_unknown_model_is_one_line(cli, run, ollama):
    seed(cli.db)
    r = run("--apply", env={"MEMORS_OLLAMA_MODEL": "nosuch:7b"})
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "model 'nosuch:7b' not found" in line and "ollama pull nosuch:7b" in line
    assert ollama.chats() == []


def test_a_model_without_tag_matches_latest(cli, run, ollama):
    seed(cli.db)
    r = run(env={"MEMORS_OLLAMA_MODEL": "test-model"})  # the stand-in lists test-model:latest
    assert r.code == 0, r


def test_a_model_gone_mid_run_stops_the_run(cli, run, ollama):
    # /api/tags lists it, /api/chat answers 404 {"error": "model 'x' not found"}
    seed(cli.db, ("Raft", "Paxos", "Zab"))
    ollama.modes = {"paxos": "model-gone"}
    r = run("--apply", "--json")
    assert r.code == 1, r
    assert [i["outcome"] for i in r.json["items"]] == ["written", "failed", "not-attempted"]
    assert "model 'test-model' not found" in r.json["items"][1]["error"]
    assert r.json["error"]["code"] == "model-not-found"
    assert len(ollama.chats()) == 2  # Zab was never asked
    assert state(cli.db)["open"] == [("page", "Paxos"), ("page", "Zab")]


def test_a_timeout_fails_the_item_and_the_run_goes_on(cli, run, ollama):
    seed(cli.db, ("Raft", "Paxos"))
    ollama.modes = {"raft": "stall"}  # one chunk, then silence
    # Silence for longer than the run may take (60 s): a timeout that never
    # fires makes the run itself time out and fail here, whatever the speed.
    ollama.delay = 600.0
    r = run("--apply", "--json", env={"MEMORS_OLLAMA_TIMEOUT": "1"})
    assert r.code == 1, r
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "failed" and "timed out after 1 s" in raft["error"]
    assert raft["content"] is None
    assert paxos["outcome"] == "written"
    assert state(cli.db)["open"] == [("page", "Raft")]


def test_a_timeout_before_any_answer(cli, run, ollama):
    seed(cli.db)
    ollama.mode = "slow"
    r = run("--apply", env={"MEMORS_OLLAMA_TIMEOUT": "0.5"})
    assert r.code == 1, r
    assert "timed out after 0.5 s" in r.err
    assert state(cli.db)["pages"] == []


def test_a_slow_endpoint_at_the_start_is_one_line(cli, run, ollama):
    seed(cli.db)
    ollama.tags_mode = "slow"
    r = run(env={"MEMORS_OLLAMA_TIMEOUT": "0.5"})
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "timed out after 0.5 s" in line


def test_malformed_json_from_the_tags_call_is_one_line(cli, run, ollama):
    seed(cli.db)
    ollama.tags_mode = "malformed"
    r = run()
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "malformed JSON" in line


def test_an_ollama_that_refuses_think_is_asked_again_without_it(cli, run, ollama):
    seed(cli.db, ("Raft", "Paxos"))
    ollama.reject_think = True
    r = run("--apply")
    assert r.code == 0, r
    chats = ollama.chats()
    assert "think" in chats[0] and all("think" not in c for c in chats[1:])
    assert len(chats) == 3  # asked once more for the first item, then plainly


def test_nothing_to_do_asks_ollama_nothing(cli, run, ollama):
    r = run()
    assert r.code == 0, r
    assert "0 item(s)" in r.out and ollama.requests == []


# --- progress ---------------------------------------------------------------------------------


def test_progress_per_item_on_a_terminal(cli, ollama):
    seed(cli.db, ("Raft", "Paxos"))
    env = {
        **os.environ,
        "MEMORS_DB": str(cli.db),
        "MEMORS_OLLAMA_URL": ollama.url,
        "MEMORS_OLLAMA_MODEL": MODEL,
        "MEMORS_OLLAMA_TIMEOUT": "20",
    }
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memors_cli", "compact", "--executor", "ollama"],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=cli.tmp,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out, _ = proc.communicate(timeout=30)
    os.close(master)
    text = seen.decode()
    assert proc.returncode == 0, (out, text)
    assert "[1/2] item 1 (page) Raft: asking test-model" in text
    assert "[1/2] item 1 (page) Raft: would be written" in text
    assert "[2/2] item 2 (page) Paxos: would be written" in text


def test_no_progress_when_stderr_is_not_a_terminal(cli, run):
    seed(cli.db)
    r = run()
    assert r.code == 0 and r.err == ""


# --- a real Ollama, when one is configured --------------------------------------------------


@pytest.mark.skipif(
    not (os.environ.get("MEMORS_OLLAMA_URL") and os.environ.get("MEMORS_OLLAMA_MODEL")),
    reason="set MEMORS_OLLAMA_URL and MEMORS_OLLAMA_MODEL to run against a real Ollama",
)
def test_smoke_against_a_real_ollama(cli):
    seed(cli.db, ("Raft",))
    env = {k: os.environ[k] for k in ("MEMORS_OLLAMA_URL", "MEMORS_OLLAMA_MODEL")}
    env["MEMORS_OLLAMA_TIMEOUT"] = os.environ.get("MEMORS_OLLAMA_TIMEOUT", "600")
    r = cli(
        "compact", "--executor", "ollama", "--allow-remote", "--json", extra_env=env, timeout=900
    )
    assert r.code in (0, 1), r
    (item,) = r.json["items"]
    # The answer came back in the defined format and went through the checks.
    assert item["outcome"] in ("would-write", "refused"), item
    assert item["title"] and item["content"] and set(item["checks"]) >= {"omission", "corruption"}
    assert state(cli.db)["pages"] == []
