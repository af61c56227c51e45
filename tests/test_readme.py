"""The README's tour runs exactly as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def sh_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def run_block(block: str, cwd: Path, db: Path | str, env: dict[str, str] | None = None) -> str:
    script = block.replace("/tmp/memors-tour.db", str(db))
    script = script.replace('"$PWD/.venv/bin', f'"{Path(sys.executable).parent}')
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "MEMORS_DB": str(db),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            **(env or {}),
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_readme_tour_runs(tmp_path: Path, fresh_store):
    # The tour and its page (the PostgreSQL block after them names a server of yours).
    tour, submit = sh_blocks()[:2]
    (tmp_path / "demo").symlink_to(ROOT / "demo")
    db = fresh_store("tour.db")
    out = run_block(tour, tmp_path, db)
    assert "Raft" in out
    # Learn the page item's payload the way an agent would, and write the page from it.
    listing = subprocess.run(
        [sys.executable, "-m", "memors_cli", "compact", "--kinds", "page", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "MEMORS_DB": str(db)},
        check=True,
    )
    item = json.loads(listing.stdout)["items"][0]
    assert item["id"] == 1 and item["payload"]["entity"]["name"] == "Raft"
    body = [
        " ".join(ln for ln in p["text"].splitlines() if not ln.startswith("#"))
        for p in item["payload"]["passages"]
    ]
    body += [f"{f['subject']} {f['predicate']} {f['value']}." for f in item["payload"]["facts"]]
    (tmp_path / "page.md").write_text(
        "\n\n".join(b.replace("[[", "").replace("]]", "") for b in body)
    )
    out = run_block(submit, tmp_path, db)
    assert "stored memo://page/" in out

    # Scores mean something (issue 17): no matching row of the tour scores
    # below 1e-3 at any granularity (FTS5's own BM25 gave 1e-6), and the
    # curated page comes first for its own name when all granularities merge.
    def search(*args: str) -> list[dict]:
        proc = subprocess.run(
            [sys.executable, "-m", "memors_cli", "search", *args, "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "MEMORS_DB": str(db)},
            check=True,
        )
        return json.loads(proc.stdout)["results"]

    for granularity in ("passage", "page", "fact", "entity", "all"):
        for query in ("how is a leader elected?", "Raft", "published 2014"):
            hits = search(query, "--granularity", granularity)
            assert all(h["score"] >= 1e-3 for h in hits), (query, granularity, hits)
    merged = search("Raft", "--granularity", "all")
    assert merged[0]["granularity"] == "page", merged
    assert {h["granularity"] for h in merged} >= {"page", "passage", "entity"}


@pytest.mark.semantic
def test_readme_search_by_meaning_runs(tmp_path: Path, vector_store):
    # The tour's store made without vectors (as before the extra was installed),
    # then the "Search by meaning" block, with the extra.
    tour = sh_blocks()[0]
    block = next(b for b in sh_blocks() if "reindex --vectors" in b)
    (tmp_path / "demo").symlink_to(ROOT / "demo")
    run_block(tour, tmp_path, vector_store, {"MEMORS_VECTORS": "off"})
    out = run_block(block, tmp_path, vector_store)
    made, hit, text, lexical = out.splitlines()
    assert made.startswith("namespace default: ") and "vector(s) made" in made
    assert hit.split()[1].startswith("memo://passage/")
    assert "becomes the leader" in text
    assert lexical == "no results"


def test_readme_library_example_prints_json(fresh_store):
    [block] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    db = fresh_store("library.db")
    proc = subprocess.run(
        [sys.executable, "-c", block.replace('"/tmp/memors.db"', repr(str(db)))],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMORS_VECTORS": "off"},
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)  # JSON, not a Python dict's repr
    assert printed["results"][0]["text"] == "Raft elects a leader by majority vote."
