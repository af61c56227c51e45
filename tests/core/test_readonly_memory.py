"""``Memory.open(path, readonly=True)``: the read-only open lint and metrics
go through. It reads, creates nothing, changes no byte, and every write is
refused with one line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from memors_core import MemorsError, Memory
from memors_core.testing import passages_about


def _listing(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def _samples(text: str) -> dict[tuple, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _writes(memory: Memory) -> dict:
    return {
        "remember": lambda: memory.remember("[[Raft]] elects a leader."),
        "record_fact": lambda: memory.record_fact("Raft", "leader", "n1"),
        "compact": lambda: memory.compact(),
    }


@pytest.mark.sqlite_only("a store file that does not exist")
def test_a_missing_store_reads_as_an_empty_one_and_nothing_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "here.db"
    with Memory.open(missing, readonly=True) as memory:
        assert memory.namespaces() == []
        assert memory.search("raft").results == []
        assert memory.lint().findings == []
        samples = _samples(memory.metrics())
        assert samples[("memors_kb_pages", (("namespace", "default"),))] == 0
        assert samples[("memors_kb_pages_stale", (("namespace", "default"),))] == 0
        with pytest.raises(MemorsError, match="read-only"):
            memory.remember("[[Raft]] elects a leader.")
    assert not missing.parent.exists()


def test_a_readonly_memory_reads_and_refuses_every_write_in_one_line(
    fresh_store, tmp_path: Path
) -> None:
    db = fresh_store("m.db")
    with Memory.open(db) as memory:
        doc = memory.remember("\n\n".join(passages_about("Raft", 3)))
        memory.record_fact("Raft", "leader", "n1")
    before = _listing(tmp_path)
    with Memory.open(db, readonly=True) as memory:
        assert memory.get(doc.passages[0]).status == "live"
        assert len(memory.entity("Raft").passages) == 3
        assert {f.rule for f in memory.lint().findings} == {"missing-page"}
        for name, write in _writes(memory).items():
            with pytest.raises(MemorsError) as caught:
                write()
            message = caught.value.message
            assert "read-only" in message and "\n" not in message, (name, message)
    assert _listing(tmp_path) == before
    with Memory.open(db) as memory:  # and it was really not written
        assert memory.facts().facts[0].value == "n1"
        assert len(memory.facts().facts) == 1


@pytest.mark.sqlite_only("a store file that does not exist")
def test_cli_metrics_and_lint_of_a_missing_store_create_nothing(cli, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "x.db"
    r = cli("metrics", "--db", str(missing))
    assert r.code == 0 and 'memors_kb_pages{namespace="default"} 0.0' in r.out, r
    r = cli("lint", "--db", str(missing), "--json")
    assert (r.code, r.json) == (0, {"namespace": "default", "findings": []}), r
    assert not missing.parent.exists()
