"""The markers tests/conftest.py sets and reads: a test no engine changes
runs in one of the two runs of `make test`, and `make test-quick` leaves
out the tests that start a process."""

from __future__ import annotations

import subprocess

import pytest

from memors_core.testing import ENGINE_SETTING
from paths import ROOT
from suite_marks import starts_a_process

pytestmark = pytest.mark.engine_independent("the suite's own markers, on a suite of its own")
pytest_plugins = ["pytester"]

MODULE = """
import pytest

@pytest.mark.engine_independent("pure")
def test_pure():
    pass

@pytest.mark.postgres_run("its own databases")
def test_its_own_databases():
    pass

def test_on_the_run_s_engine():
    pass
"""


def _starts_through_a_helper() -> None:
    subprocess.run(["true"], check=True)


def _calls_the_helper() -> None:
    _starts_through_a_helper()


def _starts_nothing() -> list[int]:
    return sorted([3, 1, 2])


@pytest.mark.parametrize(
    ("engine", "ran", "skipped"),
    [
        ("sqlite", ["test_pure", "test_on_the_run_s_engine"], "the --engine=postgres run"),
        ("postgres", ["test_its_own_databases", "test_on_the_run_s_engine"], "the SQLite run"),
    ],
)
def test_a_test_no_engine_changes_runs_in_one_run_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, engine, ran, skipped
):
    monkeypatch.setenv(ENGINE_SETTING, engine)  # (the inner run sets it; put back after)
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_marked=MODULE)
    result = pytester.runpytest("-rs", "-v", "-p", "no:cacheprovider", f"--engine={engine}")
    result.assert_outcomes(passed=2, skipped=1)
    for name in ran:
        result.stdout.fnmatch_lines([f"*::{name} PASSED*"])
    result.stdout.fnmatch_lines([f"*SKIPPED*runs once, in {skipped}: *"])


def test_a_process_started_by_a_helper_the_test_calls_marks_it():
    assert starts_a_process(_calls_the_helper)
    assert not starts_a_process(_starts_nothing)


def test_quick_leaves_out_the_browser_and_the_processes():
    makefile = (ROOT / "Makefile").read_text()
    quick = makefile.split("\ntest-quick:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not browser and not subprocess"' in quick
    assert "--engine" not in quick
