"""Start-up stays quick (SPEC §9): a command that does not serve never imports
the MCP SDK, the HTTP stack or the executor, nor structlog unless it logs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("mcp", "starlette", "uvicorn", "httpx", "pydantic", "anyio", "memors_mcp")

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
def test_commands_that_do_not_serve_import_no_sdk_http_stack_or_executor(cli, args):
    cli("remember", "-", "--entity", "Raft", input="Raft elects a leader.")
    code, modules = _modules(cli, *args)
    assert code in (0, 1, 2)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy
    assert "memors_cli.executor" not in modules
    # A command that logs nothing does not pay for structlog (and rich) either.
    assert not any(m.split(".")[0] in ("structlog", "rich") for m in modules)


def test_structlog_is_loaded_once_an_event_passes_the_level(cli):
    code, modules = _modules(cli, "fact", "add", "Raft", "leader", "n1", "--log-level", "info")
    assert code == 0
    assert "structlog" in modules


def _cpu_ms(args: list[str], env: dict[str, str], runs: int = 7) -> float:
    """Median CPU time (user + system) of a child process, in milliseconds:
    steadier than wall time on a shared machine."""
    samples = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, capture_output=True, env=env, check=False, timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return sorted(samples)[len(samples) // 2]


def test_a_small_command_costs_little_more_than_python_itself(cli):
    cli("remember", "-", input="Raft elects a leader.")
    env = {**os.environ, "MEMORS_DB": str(cli.db)}
    script = os.path.join(os.path.dirname(sys.executable), "memors-mcp")
    python = _cpu_ms([sys.executable, "-c", "pass"], env)
    version = _cpu_ms([script, "--version"], env)
    search = _cpu_ms([script, "search", "leader"], env)
    print(f"python -c pass {python:.0f} ms, --version {version:.0f} ms, search {search:.0f} ms")
    # Generous bounds: these catch an eager import of the SDK (≈ +400 ms) or
    # of structlog and rich (≈ +70 ms), not ordinary noise.
    assert version < python + 150, (python, version)
    assert search < python + 250, (python, search)
