"""Start-up stays quick (SPEC §9): a command that does not serve never imports
the MCP SDK, the HTTP stack or the executor, nor structlog unless it logs."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

from memors_core.wire import to_json
from paths import ROOT

HEAVY = (
    "mcp",
    "starlette",
    "uvicorn",
    "httpx",
    "pydantic",
    "anyio",
    "memors_mcp",
    "jinja2",
    "markdown_it",
)

PROBE = textwrap.dedent(
    """
    import json, sys
    from memors_cli.main import main
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    loaded = sorted(m for m in sys.modules)
    print("\\n@@" + json.dumps({"code": code, "modules": loaded}), file=sys.stderr)
    """
)


def _modules(cli, *args: str) -> tuple[int, set[str]]:
    env = {**os.environ, "MEMORS_DB": str(cli.db)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cli.tmp,
        timeout=60,
    )
    report = json.loads(proc.stderr.rsplit("@@", 1)[1])
    return report["code"], set(report["modules"])


@pytest.mark.parametrize(
    "args",
    [
        ("search", "x"),
        ("search", "x", "--granularity", "all", "--json"),
        ("get", "memo://item/1"),
        ("fact", "list"),
        ("entity", "list"),
        ("compact",),
        ("lint",),
        ("metrics",),
        ("--version",),
        ("search", "--help"),
        ("search", "x", "--limit", "0"),
    ],
    ids=" ".join,
)
def test_commands_that_do_not_serve_import_no_sdk_http_stack_or_executor(cli, args, engine):
    cli("remember", "-", "--entity", "Raft", input="Raft elects a leader.")
    code, modules = _modules(cli, *args)
    assert code in (0, 1, 2)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    assert "memors_cli.executor" not in modules
    # A command that logs nothing does not pay for structlog (and rich) either.
    assert not any(m.split(".")[0] in ("structlog", "rich") for m in modules)
    # Nor for the standard library's logging, nor for importlib.metadata
    # (on SQLite: psycopg itself imports both).
    if engine == "sqlite":
        assert "logging" not in modules
        assert "importlib.metadata" not in modules


def test_structlog_is_loaded_once_an_event_passes_the_level(cli):
    code, modules = _modules(cli, "fact", "add", "Raft", "leader", "n1", "--log-level", "info")
    assert code == 0
    assert "structlog" in modules


# No timing here: a bound a loaded machine can break fails CI one day. The
# CPU cost of start-up is measured by benchmarks/startup.py (make bench-quick),
# with its figures in docs/performance.md; these tests check what makes it
# cheap: what a command imports.

#: What ``--version`` may load beyond what Python itself loads at start.
VERSION_MAY_LOAD = {"__future__", "memors_cli", "memors_cli.main", "memors_core"}


def test_version_loads_nothing_but_its_constant(cli):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; base = set(sys.modules)\n"
            "from memors_cli.main import main\n"
            "main(['--version'])\n"
            "print(sorted(set(sys.modules) - base))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    version, loaded = proc.stdout.splitlines()
    assert version == f"memors-mcp {importlib.metadata.version('memors')}"
    # No parser (argparse, re, enum), no logging, no importlib.metadata, no store.
    assert set(json.loads(loaded.replace("'", '"'))) <= VERSION_MAY_LOAD, loaded


def test_version_is_written_once_and_is_what_pip_installed(cli):
    import memors_core

    r = cli("--version")
    assert r.code == 0 and r.out == f"memors-mcp {memors_core.__version__}\n"
    assert memors_core.__version__ == importlib.metadata.version("memors")
    assert cli("--help").out.startswith("usage: memors-mcp")
    assert "show program's version number" in cli("--help").out


@pytest.mark.parametrize(
    "args", [("items",), ("lint",), ("compact",), ("entity", "list")], ids=" ".join
)
@pytest.mark.sqlite_only("psycopg itself imports importlib.metadata")
def test_plugins_are_found_without_importlib_metadata(cli, args):
    """importlib.metadata costs a small command more than all the rest of its
    work: the plugin manager reads the entry points without it."""
    cli("remember", "-", "--entity", "Raft", input="Raft elects a leader.")
    code, modules = _modules(cli, *args)
    assert code in (0, 1)
    assert "importlib.metadata" not in modules
    assert {"memors_kinds.page", "memors_kinds.conflict"} <= modules  # the kinds did load


def test_importing_a_core_module_does_not_build_the_service():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, memors_core, memors_core.storage.sqlite.connection, memors_core.log\n"
            "print(sorted(m for m in sys.modules if m.startswith(('memors', 'attr', 'cattrs'))))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    loaded = set(json.loads(proc.stdout.replace("'", '"')))
    assert not loaded & {"memors_core.memory", "memors_core.domain.model", "memors_core.wire"}, (
        loaded
    )
    assert not any(m.startswith(("attr", "cattrs")) for m in loaded), loaded


def test_the_entry_point_scan_finds_what_importlib_metadata_finds():
    from memors_core.plugins.manager import entry_points

    for group in ("memors.kinds", "console_scripts", "pytest11"):
        ours = [(e.name, e.value, e.group) for e in entry_points(group=group)]
        theirs = [(e.name, e.value, e.group) for e in importlib.metadata.entry_points(group=group)]
        assert ours == theirs, group
    [page] = [e for e in entry_points(group="memors.kinds") if e.name == "page"]
    import memors_kinds.page

    assert page.load() is memors_kinds.page


def test_the_startup_benchmark_prints_each_figure_beside_its_reference():
    """A small run of benchmarks/startup.py, so it cannot rot (no figure is checked)."""
    root = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.startup", "--runs", "1"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for figure in ("python -c pass", "memors-mcp --version", "memors-mcp search"):
        assert figure in proc.stdout, proc.stdout
    assert "<= 1.5x" in proc.stdout and "<= 3.0x" in proc.stdout


#: What the Memory path loads and ``search`` on a SQLite file does without:
#: the attrs model, its converter, the plugin host, typing, the storage engine.
LEAN_SEARCH_SKIPS = (
    "attr",
    "attrs",
    "cattrs",
    "pluggy",
    "typing",
    "pathlib",
    "shutil",
    "memors_core.memory",
    "memors_core.domain.model",
    "memors_core.plugins.manager",
    "memors_core.plugins.kinds",
    "memors_core.plugins.hookspecs",
    "memors_core.storage.sqlite.connection",
    "memors_kinds",
)


@pytest.mark.sqlite_only("the lean read is of a SQLite file; PostgreSQL opens a Memory")
@pytest.mark.parametrize(
    "args",
    [("search", "leader"), ("search", "Raft leader", "--granularity", "all", "--json")],
    ids=" ".join,
)
def test_search_on_a_sqlite_file_reads_it_without_the_memory(cli, args):
    cli("remember", "-", "--entity", "Raft", input="Raft elects a leader.\n\nPaxos is older.")
    code, modules = _modules(cli, *args)
    assert code == 0
    loaded = sorted(
        m for m in modules if m in LEAN_SEARCH_SKIPS or m.split(".")[0] in LEAN_SEARCH_SKIPS
    )
    assert loaded == [], loaded
    assert "memors_core.quick" in modules


@pytest.mark.parametrize("granularity", ["passage", "page", "fact", "entity", "all"])
def test_the_quick_search_answers_as_the_library_does(cli, granularity):
    from memors_core import Memory

    cli(
        "remember", "-", "--entity", "Raft", input="Raft elects a leader.\n\nRaft replicates a log."
    )
    cli("remember", "-", "--entity", "Paxos", input="Paxos is older than Raft.")
    cli("fact", "add", "Raft", "leader", "n1", "--from", "2024-01-01")
    query = "Raft leader log"
    shown = cli("search", query, "--granularity", granularity, "--json").json
    with Memory.open(cli.db) as memory:
        expected = to_json(memory.search(query, granularity=granularity))
    assert shown == expected
    assert shown["results"] or granularity == "page"  # (no page was written)
