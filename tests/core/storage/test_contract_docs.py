"""docs/plugins.md's "Testing against the storage contract" runs as written:
its code blocks, saved as a plugin author's test module, pass under pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from memors_core.testing.storage_contract import StorageContract
from paths import ROOT

pytestmark = pytest.mark.engine_independent("the documented suite opens SQLite stores itself")

ROOT = ROOT
HEADING = "## Testing against the storage contract\n"


def blocks() -> list[str]:
    text = (ROOT / "docs" / "plugins.md").read_text()
    assert HEADING in text, "docs/plugins.md lost its storage-contract section"
    body = re.split(r"\n## ", text.split(HEADING, 1)[1], maxsplit=1)[0]
    return re.findall(r"^```python\n(.*?)^```$", body, flags=re.S | re.M)


def test_the_documented_suite_runs_on_sqlite_as_shown(tmp_path: Path) -> None:
    found = blocks()
    assert len(found) == 2
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["memors_core.testing"]\n')
    for n, code in enumerate(found):
        (tmp_path / f"test_doc_{n}.py").write_text(code)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # every contract test plus the index example's one, none skipped on SQLite
    contract = [name for name in dir(StorageContract) if name.startswith("test_")]
    assert f"\n{len(contract) + 1} passed" in proc.stdout, proc.stdout[-2000:]
