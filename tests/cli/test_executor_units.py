"""The executor's rules, one function at a time: reading a model's answer,
building the prompt, the endpoint and loopback rule."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memors_cli.executor import endpoint, ollama, prompt, settings, structured, transport
from memors_cli.executor.answer import parse_page
from memors_cli.executor.endpoint import resolve_endpoint
from memors_cli.executor.errors import ItemFailed
from memors_cli.executor.prompt import build_prompt
from memors_core.domain.text import SPACED_MARKERS, citation_refs
from ollama_standin import good_page

PAGE = "# Raft\n\nRaft elects a leader.\n\n## Facts\n\n- Raft designed by Diego Ongaro.\n"


def _item(kind: str = "page", passages: list[str] | None = None, **extra) -> dict:
    texts = passages if passages is not None else ["Raft elects a leader.", "Raft logs."]
    payload = {
        "entity": {"address": "memo://entity/e", "name": "Raft", "aliases": ["raft-algo"]},
        "passages": [
            {"address": f"memo://passage/p{n}", "document": "memo://document/d", "text": t}
            for n, t in enumerate(texts)
        ],
        "facts": [
            {
                "address": "memo://fact/f1",
                "subject": "Raft",
                "predicate": "designed by",
                "value": "Diego Ongaro",
                "valid_from": None,
                "valid_to": None,
            }
        ],
        **extra,
    }
    return {"id": 7, "kind": kind, "status": "open", "payload": payload}


# --- reading the answer --------------------------------------------------------------------


def test_a_page_is_a_title_line_and_a_body():
    title, body = parse_page(PAGE)
    assert title == "Raft"
    assert body.startswith("Raft elects a leader.") and body.endswith("Ongaro.\n")


def test_closing_hashes_and_white_space_around_the_answer_are_fine():
    assert parse_page("\n\n  # Raft ##  \n\nBody.\n\n")[0] == "Raft"


@pytest.mark.parametrize(
    "answer",
    [
        "<think>\nThe user wants a page. Raft was invented on Mars.\n</think>\n\n" + PAGE,
        "<THINK>x</THINK>" + PAGE,
        "<thinking>a</thinking>\n<think>b</think>\n" + PAGE,
        # a template that opened the thought in the prompt: only the closing tag arrives
        "so I should write about Raft.\n</think>\n" + PAGE,
    ],
)
def test_a_think_block_is_stripped(answer):
    title, body = parse_page(answer)
    assert title == "Raft" and "Mars" not in body and "think" not in body.lower()


@pytest.mark.parametrize(
    "answer", ["```markdown\n" + PAGE + "```", "```md\n" + PAGE + "```\n", "```\n" + PAGE + "```"]
)
def test_a_fence_around_the_whole_page_is_unwrapped(answer):
    assert parse_page(answer) == parse_page(PAGE)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("", "answered nothing"),
        ("   \n\n ", "answered nothing"),
        ("<think>I will now think forever", "answered nothing"),
        ("<think>done</think>", "answered nothing"),
        ('{"title": "Raft", "content": "Raft elects a leader."}', "answered JSON"),
        ('[{"title": "Raft"}]', "answered JSON"),
        ('```json\n{"title": "Raft"}\n```', "answered JSON"),
        ("Raft elects a leader.\n\nMore.", "no title"),
        ("## Raft\n\nRaft elects a leader.", "no title"),
        ("**Raft**\n\nRaft elects a leader.", "no title"),
        ("# Raft", "no page body"),
        ("# Raft\n\n   \n", "no page body"),
    ],
)
def test_answers_that_are_not_a_page_fail(answer, says):
    with pytest.raises(ItemFailed, match=says) as info:
        parse_page(answer)
    assert info.value.code == "bad-answer"


_plain = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="<`#"), max_size=80
)
_title = st.text(
    st.characters(whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters=" -.,"),
    min_size=1,
    max_size=40,
).filter(lambda t: t.strip())
_body = st.lists(_plain, min_size=1, max_size=6).map("\n".join).filter(lambda b: b.strip())


@given(thought=st.one_of(st.none(), _plain), title=_title, body=_body)
def test_whatever_the_model_thought_the_page_after_it_is_what_counts(thought, title, body):
    answer = f"# {title}\n\n{body}\n"
    if thought is not None:
        answer = f"<think>{thought}</think>\n{answer}"
    assert parse_page(answer) == (title.strip(), body.strip() + "\n")


# --- the prompt ---------------------------------------------------------------------------


def test_the_prompt_holds_every_passage_and_fact_and_the_rules():
    messages, cites, shown = build_prompt(_item())
    system, user = (m["content"] for m in messages)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Use only what the passages and facts say" in system
    assert "State every recorded fact" in system
    assert 'The first line is "# "' in system and "<think>" in system
    assert "Subject: Raft (also known as: raft-algo)" in user
    assert '<passage ref="1">\nRaft elects a leader.\n</passage>' in user
    assert '<passage ref="2">\nRaft logs.\n</passage>' in user
    assert "F1: Raft | designed by | Diego Ongaro" in user
    assert user.rstrip().endswith('Start with the line "# Raft".')
    assert cites is None and shown == 2
    assert "PREVIOUS PAGE" not in user


def test_the_stand_in_reads_the_prompt_as_the_executor_writes_it():
    messages, _, _ = build_prompt(_item())
    subject, page = good_page(messages[1]["content"])
    assert subject == "Raft"
    title, body = parse_page(page)
    assert title == "Raft"
    assert "Raft elects a leader." in body and "Raft designed by Diego Ongaro." in body


def test_a_stale_prompt_has_the_previous_page_and_what_changed():
    item = _item(
        "stale",
        page={"address": "memo://page/x", "title": "Raft", "content": "Old text.", "version": 3},
        changes=[
            {"address": "memo://passage/p1", "change": "new"},
            {"address": "memo://passage/gone", "change": "forgotten"},
            {"address": "memo://passage/old", "change": "superseded"},
        ],
    )
    messages, _, _ = build_prompt(item)
    system, user = (m["content"] for m in messages)
    assert "previous version is below" in system
    assert 'PREVIOUS PAGE (version 3, titled "Raft"' in user
    assert "<previous_page>\nOld text.\n</previous_page>" in user
    assert '<passage ref="2" status="new">' in user
    assert "1 new passage(s)" in user
    assert "1 passage(s) the previous page drew on were forgotten" in user
    assert "1 passage(s) the previous page drew on were superseded" in user


def test_a_huge_item_shows_what_fits_and_cites_only_that():
    long = ["word " * 2000 + f"number {n}." for n in range(10)]  # 10 kB each
    messages, cites, shown = build_prompt(_item(passages=long))
    assert 1 < shown < 10
    assert cites == [f"memo://passage/p{n}" for n in range(shown)]
    assert f"({10 - shown} more passages left out for length.)" in messages[1]["content"]
    assert "F1: Raft | designed by | Diego Ongaro" in messages[1]["content"]


def test_a_passage_cannot_close_its_own_tag():
    messages, _, _ = build_prompt(_item(passages=["a </passage> b", "c"]))
    assert messages[1]["content"].count("</passage>") == 2


def test_the_context_window_grows_with_the_prompt():
    small = prompt.chat_options([{"role": "user", "content": "x" * 100}])
    large = prompt.chat_options([{"role": "user", "content": "x" * 40_000}])
    assert small["num_ctx"] == 8192 and large["num_ctx"] == 32768
    assert small["temperature"] == 0


# --- the endpoint ----------------------------------------------------------------------------


def test_the_default_endpoint_is_loopback():
    ep = resolve_endpoint(endpoint.DEFAULT_URL, allow_remote=False)
    assert ep.url == "http://127.0.0.1:11434" and ep.addresses == ("127.0.0.1",)


def test_localhost_resolves_to_loopback_only_and_is_pinned():
    ep = resolve_endpoint("http://localhost:8080/", allow_remote=False)
    assert ep.port == 8080 and ep.addresses
    assert all(endpoint._is_loopback(a) for a in ep.addresses)
    assert ep.host_header == "localhost:8080"


def test_ipv6_loopback_and_a_base_path():
    ep = resolve_endpoint("http://[::1]:9999/ollama/", allow_remote=False)
    assert ep.addresses == ("::1",) and ep.base_path == "/ollama"
    assert ep.url == "http://[::1]:9999/ollama" and ep.host_header == "[::1]:9999"


def test_ports_follow_ollama_host_conventions():
    assert resolve_endpoint("127.0.0.1", False).port == 11434  # OLLAMA_HOST style
    assert resolve_endpoint("http://127.0.0.1", False).port == 80
    assert resolve_endpoint("https://localhost", False).port == 443


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("not an address", False),
    ],
)
def test_which_addresses_are_loopback(address, loopback):
    assert endpoint._is_loopback(address) is loopback


@pytest.mark.parametrize(
    "url", ["http://ollama.invalid:11434", "https://models.example.invalid", "gpu.invalid"]
)
def test_a_host_not_known_to_be_loopback_is_refused(url, capsys):
    with pytest.raises(SystemExit) as info:
        resolve_endpoint(url, allow_remote=False)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--allow-remote" in err and len(err.strip().splitlines()) == 1


def test_allow_remote_skips_the_rule_and_resolves_nothing():
    ep = resolve_endpoint("http://ollama.invalid:11434", allow_remote=True)
    assert ep.addresses == () and ep.host == "ollama.invalid"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1", "http://127.0.0.1:99999", "http://:80"])
def test_bad_urls_are_usage_errors(url):
    with pytest.raises(SystemExit) as info:
        resolve_endpoint(url, allow_remote=False)
    assert info.value.code == 2


@pytest.mark.parametrize(
    ("asked", "listed"),
    [
        ("qwen2.5:7b-instruct", "qwen2.5:7b-instruct"),
        ("llama3.1", "llama3.1:latest"),
        ("library/llama3.1:8b", "llama3.1:8b"),
        ("registry.ollama.ai/library/llama3.1:8b", "llama3.1:8b"),
        ("Qwen2.5:7B-Instruct", "qwen2.5:7b-instruct"),
        ("me/custom", "me/custom:latest"),
    ],
)
def test_model_names_match_as_ollama_resolves_them(asked, listed):
    assert ollama._canonical_model(asked) == ollama._canonical_model(listed)


def test_different_tags_are_different_models():
    assert ollama._canonical_model("llama3.1:8b") != ollama._canonical_model("llama3.1")


# --- structured output: the schema and the page it renders into -------------------------------


def test_the_schema_names_only_the_refs_shown_and_is_strict():
    schema = structured.page_schema([3, 1, 2, 3])
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["title", "sections", "facts"]
    sentence = schema["properties"]["sections"]["items"]["properties"]["sentences"]["items"]
    assert sentence["required"] == ["text", "cites"] and sentence["additionalProperties"] is False
    assert sentence["properties"]["cites"]["items"]["enum"] == [1, 2, 3]


def test_a_structured_answer_renders_into_the_page_the_checks_read():
    answer = json.dumps(
        {
            "title": "# Raft",
            "sections": [
                {
                    "heading": "",
                    "sentences": [
                        {"text": "Raft is a consensus algorithm.", "cites": [1]},
                        {"text": "It elects a leader [9]", "cites": [2, 3, 2]},
                    ],
                },
                {"heading": "Safety", "sentences": [{"text": "It is safe?", "cites": [3]}]},
                {"heading": "Empty", "sentences": []},
            ],
            "facts": ["Raft was designed by Diego Ongaro.", "  "],
        }
    )
    title, body = structured.render_page(answer)
    assert title == "Raft"
    assert body == (
        "Raft is a consensus algorithm [1]. It elects a leader [2][3].\n\n"
        "## Safety\n\nIt is safe [3]?\n\n"
        "## Facts\n\n- Raft was designed by Diego Ongaro.\n"
    )


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("# Raft\n\nA Markdown page [1].", "does not parse"),
        ("[1, 2]", "not a JSON object"),
        ('{"title": 3, "sections": [], "facts": []}', "the title is not a string"),
        ('{"title": " ", "sections": [], "facts": []}', "the title is empty"),
        ('{"title": "Raft", "sections": {}, "facts": []}', "sections is not a list"),
        ('{"title": "Raft", "sections": [{"heading": ""}], "facts": []}', "no list of sentences"),
        (
            '{"title": "Raft", "sections": [{"heading": "", "sentences": '
            '[{"text": "x", "cites": ["1"]}]}], "facts": []}',
            "cites are not a list",
        ),
        ('{"title": "Raft", "sections": [], "facts": "x"}', "facts is not a list"),
    ],
)
def test_an_answer_that_is_not_the_json_is_said_so(answer, says):
    with pytest.raises(ItemFailed) as caught:
        structured.render_page(answer)
    assert caught.value.code == "not-structured" and says in caught.value.message


def test_a_structured_page_without_a_body_fails_as_a_bad_answer():
    with pytest.raises(ItemFailed) as caught:
        structured.render_page('{"title": "Raft", "sections": [], "facts": []}')
    assert caught.value.code == "bad-answer"


@given(st.text(max_size=40), st.lists(st.integers(1, 9), max_size=3))
def test_any_sentence_renders_with_exactly_its_markers(text, cites):
    answer = json.dumps(
        {
            "title": "T",
            "sections": [{"heading": "", "sentences": [{"text": text, "cites": cites}]}],
            "facts": ["f"],
        }
    )
    _, body = structured.render_page(answer)
    first = body.split("\n\n")[0]
    if first.startswith("## Facts"):  # the sentence was blank
        return
    assert citation_refs("".join(SPACED_MARKERS.findall(first))) == list(dict.fromkeys(cites))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"error": {"message": "bad", "type": "invalid_request_error", "param": null, '
            b'"code": "model_not_found"}}',
            ("bad", "model_not_found"),
        ),
        (b'{"error": "model \'x\' not found"}', ("model 'x' not found", None)),
        (
            b'{"detail": [{"loc": ["body", "response_format"]}]}',
            ('[{"loc": ["body", "response_format"]}]', None),
        ),
        (
            b'{"object": "error", "message": "The model `x` does not exist.", '
            b'"type": "NotFoundError", "param": null, "code": 404}',
            ("The model `x` does not exist.", "404"),
        ),
        (b"<html>oops</html>", ("<html>oops</html>", None)),
    ],
)
def test_error_bodies_of_each_shape_are_read(body, expected):
    assert transport.error_text(body) == expected


def test_the_openai_executor_needs_its_url_and_adds_v1(capsys):
    env = {"MEMORS_EXECUTOR_MODEL": "m"}
    with pytest.raises(SystemExit):
        settings.load_settings(settings.OPENAI, env, allow_remote=False)
    assert "set MEMORS_EXECUTOR_URL" in capsys.readouterr().err
    loaded = settings.load_settings(
        settings.OPENAI, {**env, "MEMORS_EXECUTOR_URL": "127.0.0.1:8080"}, allow_remote=False
    )
    assert loaded.endpoint.url == "http://127.0.0.1:8080/v1"
    kept = settings.load_settings(
        settings.OPENAI,
        {
            **env,
            "MEMORS_EXECUTOR_URL": "http://localhost:1234/api/v1/",
            "MEMORS_EXECUTOR_API_KEY": "sk-secret",
        },
        allow_remote=False,
    )
    assert kept.endpoint.base_path == "/api/v1" and kept.api_key == "sk-secret"
    assert "sk-secret" not in repr(kept)
