"""Habits the history keeps: commit subjects a reader can scan.

Subjects are at most 72 characters, with the why in the body. Older history
(before the rule, commit 827ad8b) is left as it was; a clone without git or
without that commit (a shallow one) skips, saying so.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from paths import ROOT

pytestmark = pytest.mark.engine_independent("the git log's commit subjects, no store")

RULE_SINCE = "827ad8b"
LIMIT = 72
#: Commits on main whose subject went over the limit: history is never
#: rewritten, so each is listed here instead (full hash).
OVER_THE_LIMIT = {
    "40e348a86875f82fa5c19317206dbb9d01d9cfc8",  # 80 characters
    "3746cdbd3ebdab6dcfbc1171c1da81e66fa29483",  # 73 characters
}


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_commit_subjects_fit_72_characters():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if _git("cat-file", "-e", f"{RULE_SINCE}^{{commit}}").returncode != 0:
        pytest.skip(f"commit {RULE_SINCE} is not in this clone (a shallow one?)")
    log = _git("log", "--format=%H %s", f"{RULE_SINCE}..HEAD")
    assert log.returncode == 0, log.stderr
    long = [
        line
        for line in log.stdout.splitlines()
        if len(line.split(" ", 1)[1]) > LIMIT and line.split(" ", 1)[0] not in OVER_THE_LIMIT
    ]
    assert long == [], f"commit subjects over {LIMIT} characters: {long}"
