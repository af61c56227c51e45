"""`make demo` runs the whole job end to end; so does this test."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.semantic  # as `make demo` runs it: the dev set-up has the semantic extra
@pytest.mark.sqlite_only("the demo plays on its own SQLite file, .demo/memors.db")
def test_demo_runs_end_to_end_and_leaves_nothing_to_do():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "demo" / "run_demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "refused by corruption" in out  # the embellished page was refused
    assert "namespace default: 0 new item(s), 0 open" in out
    assert "namespace default: no findings" in out
    assert 'memors_kb_pages{namespace="default"} 3.0' in out
    assert "Traceback" not in proc.stderr
    # the question in other words: found by meaning, not by its words
    meaning = out.split("search 'how do machines pick a chief?' --mode hybrid --limit 1", 1)[1]
    assert "becomes the leader" in meaning.split("$ memors-mcp", 1)[0]
    lexical = out.split("search 'how do machines pick a chief?'\n", 1)[1]
    assert lexical.split("$ memors-mcp", 1)[0].strip().startswith("no results")
