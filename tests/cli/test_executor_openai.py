"""``compact --executor openai`` end to end: the real CLI in a subprocess, a
real store, and a stand-in OpenAI-compatible server speaking real HTTP on
127.0.0.1 (streamed and not, its error shapes, structured output or none);
plus, when installed, a real llama.cpp-compatible server on loopback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_executor import _closed_port, seed, state

from ollama_standin import INVENTED_YEAR
from openai_standin import OpenAIStandIn

MODEL = "test-model"
KEY = "sk-memors-test-5f3c9a17e2b84d06"


@pytest.fixture
def server():
    with OpenAIStandIn(models=(MODEL, "other-model")) as standin:
        yield standin


@pytest.fixture
def run(cli, server):
    def go(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
        extra = {
            "MEMORS_EXECUTOR_URL": server.url,
            "MEMORS_EXECUTOR_MODEL": MODEL,
            "MEMORS_EXECUTOR_TIMEOUT": "20",
            **(env or {}),
        }
        return cli("compact", "--executor", "openai", *args, extra_env=extra, timeout=timeout)

    return go


# --- the protocol, structured output ---------------------------------------------------------


def test_a_dry_run_asks_for_the_page_as_json_and_renders_it_with_markers(cli, run, server):
    seed(cli.db)
    r = run("--json")
    assert r.code == 0, r
    data = r.json
    assert data["executor"] == "openai" and data["answer_format"] == "json-schema"
    assert data["endpoint"] == server.url and "fallback" not in data
    (item,) = data["items"]
    assert item["outcome"] == "would-write" and item["title"] == "Raft"
    # The JSON answer became a Markdown page: markers before the full stop.
    assert (
        "Raft elects a leader that manages log replication across the cluster [2]."
        in (item["content"])
    )
    assert "## Facts\n\n- Raft designed by Diego Ongaro." in item["content"]
    assert all(c["passed"] for c in item["checks"].values())
    assert state(cli.db)["pages"] == []
    # What was sent: the chat-completions request with a JSON schema whose
    # cites may name only the passages shown.
    (chat,) = server.chats()
    assert chat["model"] == MODEL and chat["stream"] is True and chat["temperature"] == 0
    assert chat["max_tokens"] > 0
    fmt = chat["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    sentence = schema["properties"]["sections"]["items"]["properties"]["sentences"]["items"]
    assert sentence["properties"]["cites"]["items"]["enum"] == [1, 2, 3]
    assert sentence["properties"]["cites"]["maxItems"] == 3
    system, user = chat["messages"]
    assert '"cites"' in system["content"] and "Answer with one JSON object" in system["content"]
    assert '<passage ref="2">' in user["content"]


def test_apply_stores_the_rendered_page(cli, run, server):
    seed(cli.db, ("Raft", "Paxos"))
    r = run("--apply")
    assert r.code == 0, r
    assert "applied with test-model: 2 item(s): 2 written" in r.out
    assert state(cli.db)["done"] == [("page", "Paxos"), ("page", "Raft")]
    found = cli("search", "leader log replication", "--granularity", "page", "--json")
    page = cli("get", found.json["results"][0]["address"], "--json").json
    (leader,) = [s for s in page["sentences"] if "elects a leader" in s["text"]]
    assert len(leader["sources"]) == 1  # the sentence keeps the passage it cited


def test_a_non_streamed_answer_is_read_too(cli, run, server):
    seed(cli.db)
    server.stream = False  # one chat.completion object although asked to stream
    r = run("--apply", "--json")
    assert r.code == 0, r
    assert r.json["summary"]["written"] == 1


def test_a_refused_json_draft_is_revised_in_json(cli, run, server):
    seed(cli.db, ("Raft",))
    server.modes = {"raft": ["invent-date", "good"]}
    r = run("--apply", "--json")
    assert r.code == 0, r
    (item,) = r.json["items"]
    assert item["outcome"] == "written" and item["revisions"] == 1
    _draft, revision = server.chats()
    assert "response_format" in revision
    said = revision["messages"][2]
    assert said["role"] == "assistant" and json.loads(said["content"])["title"] == "Raft"
    assert INVENTED_YEAR in said["content"]
    asked = revision["messages"][3]["content"]
    assert "in the same format (the same JSON object)" in asked and INVENTED_YEAR in asked


def test_an_invented_sentence_is_still_refused_by_the_checks(cli, run, server):
    seed(cli.db, ("Raft", "Paxos"))
    server.modes = {"raft": "invent"}
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "refused" and raft["checks"]["corruption"]["passed"] is False
    assert paxos["outcome"] == "written"
    assert state(cli.db)["open"] == [("page", "Raft")]


# --- a server without structured output --------------------------------------------------------


@pytest.mark.parametrize("how", ["refuse", "ignore"])
def test_without_structured_output_the_run_asks_for_markdown_and_says_so_once(
    cli, run, server, how
):
    seed(cli.db, ("Raft", "Paxos"))
    server.structured = how  # 400 naming response_format, or a Markdown answer
    r = run("--apply")
    assert r.code == 0, r
    said = [line for line in r.err.splitlines() if "structured output" in line]
    assert len(said) == 1 and "asking for Markdown pages instead" in said[0]
    if how == "refuse":
        assert "'response_format'" in said[0]
    assert "2 written" in r.out
    assert "pages asked for as Markdown (the server gave no structured output)" in r.out
    first, again, second = server.chats()
    assert "response_format" in first
    assert "response_format" not in again and "response_format" not in second
    assert 'Start with the line "# Raft"' in again["messages"][1]["content"]
    j = run("--json")  # nothing left: the queue was written
    assert j.json["answer_format"] == "json-schema" and "fallback" not in j.json


def test_the_fallback_is_in_the_json_report(cli, run, server):
    seed(cli.db)
    server.structured = "refuse"
    r = run("--json")
    assert r.code == 0, r
    assert r.json["answer_format"] == "markdown"
    assert "response_format" in r.json["fallback"]


def test_once_json_came_back_a_bad_answer_fails_its_item_only(cli, run, server):
    seed(cli.db, ("Raft", "Paxos", "Zab"))
    server.modes = {"paxos": "empty"}
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, paxos, zab = r.json["items"]
    assert raft["outcome"] == zab["outcome"] == "written"
    assert paxos["outcome"] == "failed" and "not the page as JSON" in paxos["error"]
    assert r.json["answer_format"] == "json-schema" and "fallback" not in r.json
    assert all("response_format" in c for c in server.chats())


@pytest.mark.parametrize("mode", ["think", "fenced"])
def test_a_think_block_or_a_fence_around_the_json_is_taken_off(cli, run, server, mode):
    seed(cli.db)
    server.mode = mode
    r = run("--json")
    assert r.code == 0, r
    assert r.json["items"][0]["outcome"] == "would-write"
    assert "fallback" not in r.json


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("error500", "the server answered 500"),
        ("error-line", "the server reported an error: the model ran out of memory"),
        ("malformed", "malformed JSON"),
        ("cut-off", "cut off at the model's length limit"),
    ],
)
def test_a_bad_answer_fails_its_item_and_the_run_goes_on(cli, run, server, mode, says):
    seed(cli.db, ("Raft", "Paxos"))
    server.modes = {"raft": mode}
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "failed" and says in raft["error"], raft["error"]
    assert paxos["outcome"] == "written"
    assert f"item 1 (page) Raft: {raft['error']}" in r.err
    assert "Traceback" not in r.err


def test_errors_in_vllms_older_shape_are_read_too(cli, run, server):
    seed(cli.db, ("Raft", "Paxos", "Zab"))
    server.error_shape = "vllm"  # {"object": "error", "message", "type", "param", "code"}
    server.modes = {"raft": "error-line", "paxos": "model-gone"}
    r = run("--apply", "--json")
    assert r.code == 1, r
    raft, paxos, zab = r.json["items"]
    assert raft["error"] == "the server reported an error: the model ran out of memory"
    assert paxos["error"].endswith("The model `test-model` does not exist.")
    assert r.json["error"]["code"] == "model-not-found" and zab["outcome"] == "not-attempted"


def test_an_unknown_model_is_one_line_listing_the_served_ones(cli, run, server):
    seed(cli.db)
    r = run("--apply", env={"MEMORS_EXECUTOR_MODEL": "nosuch"})
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "model 'nosuch' not found" in line and "other-model, test-model" in line
    assert "MEMORS_EXECUTOR_MODEL" in line and server.chats() == []


def test_a_model_gone_mid_run_stops_the_run(cli, run, server):
    seed(cli.db, ("Raft", "Paxos", "Zab"))
    server.modes = {"paxos": "model-gone"}  # 404 model_not_found
    r = run("--apply", "--json")
    assert r.code == 1, r
    assert [i["outcome"] for i in r.json["items"]] == ["written", "failed", "not-attempted"]
    assert r.json["error"]["code"] == "model-not-found"
    assert "does not exist" in r.json["items"][1]["error"]


def test_a_server_without_a_models_route_is_not_checked(cli, run, server):
    seed(cli.db)
    server.models_route = False
    r = run("--apply")
    assert r.code == 0, r
    assert "1 written" in r.out


def test_a_timeout_fails_the_item_and_the_run_goes_on(cli, run, server):
    seed(cli.db, ("Raft", "Paxos"))
    server.modes = {"raft": "stall"}  # the first event, then silence
    server.delay = 600.0  # longer than the run may take: the timeout must fire
    r = run("--apply", "--json", env={"MEMORS_EXECUTOR_TIMEOUT": "1"})
    assert r.code == 1, r
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "failed" and "timed out after 1 s" in raft["error"]
    assert "MEMORS_EXECUTOR_TIMEOUT" in raft["error"]
    assert paxos["outcome"] == "written"


def test_an_unreachable_server_is_one_line(cli, run):
    seed(cli.db)
    r = run("--apply", env={"MEMORS_EXECUTOR_URL": f"http://127.0.0.1:{_closed_port()}/v1"})
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert "cannot reach the server at" in line and "is the model server running" in line


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MEMORS_EXECUTOR_URL": ""}, "set MEMORS_EXECUTOR_URL"),
        ({"MEMORS_EXECUTOR_MODEL": ""}, "set MEMORS_EXECUTOR_MODEL"),
        ({"MEMORS_EXECUTOR_TIMEOUT": "-1"}, "MEMORS_EXECUTOR_TIMEOUT must be"),
        ({"MEMORS_EXECUTOR_URL": "http://llm.invalid:8080/v1"}, "--allow-remote"),
    ],
)
def test_bad_settings_stop_before_any_request(cli, run, server, env, says):
    seed(cli.db)
    r = run(env=env)
    assert r.code == 2, r
    (line,) = r.err.strip().splitlines()
    assert says in line and server.requests == []


def test_a_url_without_a_path_means_v1(cli, run, server):
    seed(cli.db)
    r = run("--json", env={"MEMORS_EXECUTOR_URL": f"127.0.0.1:{server.port}"})
    assert r.code == 0, r
    assert r.json["endpoint"] == server.url
    assert [q["path"] for q in server.requests] == ["/v1/models", "/v1/chat/completions"]


# --- the API key ------------------------------------------------------------------------------


def test_the_api_key_is_sent_and_never_shown(cli, run, server):
    seed(cli.db, ("Raft", "Paxos"))
    server.api_key = KEY
    server.modes = {"paxos": "error500"}  # its message echoes the Authorization header
    env = {"MEMORS_EXECUTOR_API_KEY": KEY, "MEMORS_LOG_LEVEL": "debug"}
    r = run("--apply", "--json", env=env)
    assert r.code == 1, r
    assert {q["headers"]["Authorization"] for q in server.requests if "headers" in q} == {
        f"Bearer {KEY}"
    }
    raft, paxos = r.json["items"]
    assert raft["outcome"] == "written"
    assert "Bearer [hidden]" in paxos["error"]
    text = cli("compact", "--executor", "openai", "--help").out
    for shown in (r.out, r.err, text):
        assert KEY not in shown
    assert "model_answered" in r.err  # the log was on, and it holds no key


def test_a_wrong_api_key_is_one_line_without_the_key(cli, run, server):
    seed(cli.db)
    server.api_key = "sk-the-right-one"
    wrong = KEY
    r = run("--json", env={"MEMORS_EXECUTOR_API_KEY": wrong, "MEMORS_LOG_LEVEL": "debug"})
    assert r.code == 2, r
    assert r.json["error"]["code"] == "unauthorized"
    assert "MEMORS_EXECUTOR_API_KEY" in r.json["error"]["message"]
    assert "Incorrect API key provided: [hidden]" in r.json["error"]["message"]
    assert wrong not in r.out and wrong not in r.err


# --- progress ------------------------------------------------------------------------------


def test_progress_per_item_when_asked(cli, run):
    seed(cli.db, ("Raft", "Paxos"))
    r = run("--progress")
    assert r.code == 0, r
    assert "[1/2] item 1 (page) Raft: would be written" in r.err
    assert "[2/2] item 2 (page) Paxos: would be written" in r.err


# --- a real llama.cpp-compatible server, when installed -----------------------------------------


def _gguf() -> Path | None:
    found = os.environ.get("MEMORS_TEST_GGUF")
    return Path(found) if found and Path(found).is_file() else None


def _llama_server() -> list[str] | None:
    """How to start a llama.cpp-compatible server: llama.cpp's ``llama-server``
    or llama-cpp-python's ``python -m llama_cpp.server``."""
    if shutil.which("llama-server"):
        return [shutil.which("llama-server") or "llama-server"]
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "llama_cpp.server"]


LLAMA_REASON = (
    "needs a llama.cpp-compatible server (llama.cpp's llama-server on PATH, or "
    "llama-cpp-python[server], which has no prebuilt wheel here and must compile llama.cpp) "
    "and a GGUF model in MEMORS_TEST_GGUF"
)


@pytest.mark.skipif(_llama_server() is None or _gguf() is None, reason=LLAMA_REASON)
def test_against_a_real_llama_cpp_server_on_loopback(cli, tmp_path):
    command, model, port = _llama_server(), _gguf(), _closed_port()
    assert command is not None and model is not None
    if command[0].endswith("llama-server"):
        args = ["-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "8192"]
        args += ["--alias", "tiny"]
    else:
        args = ["--model", str(model), "--host", "127.0.0.1", "--port", str(port)]
        args += ["--model_alias", "tiny", "--n_ctx", "8192"]
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
        seed(cli.db, ("Raft",))
        env = {
            "MEMORS_EXECUTOR_URL": f"http://127.0.0.1:{port}/v1",
            "MEMORS_EXECUTOR_MODEL": "tiny",
            "MEMORS_EXECUTOR_TIMEOUT": "600",
        }
        r = cli("compact", "--executor", "openai", "--json", extra_env=env, timeout=900)
        assert r.code in (0, 1), r
        (item,) = r.json["items"]
        # Quality is not the point: the protocol is real, the run completed
        # with an outcome, and nothing was stored in a dry run.
        assert item["outcome"] in ("would-write", "refused", "failed"), item
        assert r.json["answer_format"] in ("json-schema", "markdown")
        assert "Traceback" not in r.err
        assert state(cli.db)["pages"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
