"""examples/memors-expired as a third party ships it (issue 9).

The example package is installed with pip, from its own pyproject.toml,
into a fresh virtual environment; that environment sees this checkout's
environment (memors and its dependencies, as ``make setup`` installed them)
the way ``--system-site-packages`` would, so nothing is downloaded but the
example's build backend (from the pip cache after the first run). Then the
real CLI and the real MCP server, run by that environment's Python, show
the kind's items, take its resolutions (``--set``, ``--resolution-json``,
MCP ``resolution``), run its check and lint rule, and drop all of it under
``MEMORS_DISABLE_PLUGINS=expired``. The example's own tests run there too.

One virtual environment serves the whole session, shared by the xdist
workers under a file lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from paths import ROOT

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "memors-expired"
BUILT_IN = "conflict, duplicate, merge, page, stale"
FUTURE = "2999-01-01"

pytestmark = pytest.mark.slow


# --- a fresh virtual environment ------------------------------------------------------


def make_venv(where: Path) -> Path:
    """A new virtual environment at ``where`` that also sees this
    interpreter's environment (memors, its dependencies, pip, pytest), and
    has the ``memors-mcp`` console script; returns its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    own = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    paths = sysconfig.get_paths()
    lines = [f"import site; site.addsitedir({d!r})\n" for d in {paths["purelib"], paths["platlib"]}]
    # After the environment's own site-packages: what pip installs there comes first.
    Path(own, "_memors_project_environment.pth").write_text("".join(lines))
    script = where / "bin" / "memors-mcp"  # as pip writes a console script
    script.write_text(
        f"#!{python}\nimport sys\n\nfrom memors_cli.main import main\n\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return python


def venv_env(python: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell in which that virtual environment is active."""
    drop = ("MEMORS_", "PYTEST_", "PYTHON", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(python.parent.parent)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def example(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example, pip-installed into a fresh virtual environment:
    ``python`` (the environment's) and ``source`` (the copy it was built from)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this run
    where = base / "memors-expired-venv"
    with open(base / "memors-expired-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (where / "ready").exists():
            shutil.rmtree(where, ignore_errors=True)
            python = make_venv(where / "env")
            source = shutil.copytree(
                EXAMPLE,
                where / "source",
                ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*_cache"),
            )
            proc = subprocess.run(
                [python, "-m", "pip", "install", "--no-deps", "--quiet", str(source)],
                capture_output=True,
                text=True,
                env=venv_env(python),
                timeout=300,
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            (where / "ready").touch()
    return {"python": where / "env" / "bin" / "python", "source": where / "source"}


class Run:
    """The real CLI of the virtual environment on one store."""

    def __init__(self, python: Path, db: Path, cwd: Path) -> None:
        self.python, self.db, self.cwd = python, db, cwd

    def __call__(self, *args: str, disable: str | None = None) -> Any:
        extra = {"MEMORS_DB": str(self.db)}
        if disable:
            extra["MEMORS_DISABLE_PLUGINS"] = disable
        proc = subprocess.run(
            [self.python.parent / "memors-mcp", *args],
            capture_output=True,
            text=True,
            env=venv_env(self.python, **extra),
            cwd=self.cwd,
            timeout=120,
        )
        proc.json = json.loads(proc.stdout) if "--json" in args and proc.stdout.strip() else None
        return proc

    def script(self, code: str) -> str:
        """Run Python in the virtual environment with ``db`` as ``sys.argv[1]``."""
        proc = subprocess.run(
            [self.python, "-c", code, str(self.db)],
            capture_output=True,
            text=True,
            env=venv_env(self.python),
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout


def one_line(proc: Any) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# A store where Raft's page states three facts that have expired, and
# Paxos (a fact expired, no page yet) has an open page item.
SETUP = """
import sys
from memors_core import Memory
from memors_core.testing import open_items, passages_about, write_page

with Memory.open(sys.argv[1]) as m:
    m.record_fact("Raft", "leader", "node 3", "2019-01-01", "2020-01-01")
    m.record_fact("Raft", "quorum", "three nodes", valid_to="2021-01-01")
    m.record_fact("Raft", "election timeout", "150 ms", valid_to="2022-01-01")
    write_page(m, "Raft", "The Raft leader is node 3.\\n\\nA Raft quorum is three nodes.\\n\\n"
               "The Raft election timeout is 150 ms.\\n")
    m.record_fact("Paxos", "acceptors", "five nodes", valid_to="2020-06-01")
    for text in passages_about("Paxos", 3):
        m.remember(text)
    open_items(m)
"""


def by_value(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["payload"]["fact"]["value"]: i for i in items if i["kind"] == "expired"}


# --- the package -------------------------------------------------------------------------


def test_pip_installs_the_example_with_its_entry_point_and_its_tests_pass(example):
    python, source = example["python"], example["source"]
    out = subprocess.run(
        [
            python,
            "-c",
            "import importlib.metadata as m, memors_expired; "
            "print([e.value for e in m.entry_points(group='memors.kinds', name='expired')]); "
            "print(m.requires('memors-expired')[0]); print(memors_expired.__file__)",
        ],
        capture_output=True,
        text=True,
        env=venv_env(python),
        check=True,
    ).stdout.splitlines()
    assert out[0] == "['memors_expired']"
    assert out[1] == "memors"
    installed = Path(out[2])
    assert python.parent.parent in installed.parents  # in the new environment, not the checkout
    tests = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
        env=venv_env(python),
        cwd=source,
        timeout=120,
    )
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in tests.stdout.splitlines()[-1]


# --- the real CLI ----------------------------------------------------------------------


def test_the_cli_lists_checks_lints_and_resolves_expired_items(fresh_store, example, tmp_path):
    run = Run(example["python"], fresh_store("store.db"), tmp_path)
    for i, text in enumerate(
        ["Raft elects a leader per term.", "Raft commits by quorum.", "Raft times out."]
    ):
        (tmp_path / f"raft{i}.md").write_text(text + "\n")
        assert run("remember", f"raft{i}.md", "--entity", "Raft").returncode == 0
    for fact in (
        ("leader", "node 3", "--from", "2019-01-01", "--to", "2020-01-01"),
        ("quorum", "three nodes", "--to", "2021-01-01"),
        ("election timeout", "150 ms", "--to", "2022-01-01"),
    ):
        assert run("fact", "add", "Raft", *fact).returncode == 0

    # the check: a page that states expired values as current is refused
    [page_item] = run("compact", "--kinds", "page", "--json").json["items"]
    (tmp_path / "page.md").write_text(
        "# Raft\n\nRaft elects a leader per term. The Raft leader is node 3.\n\n"
        "Raft commits by quorum. A Raft quorum is three nodes.\n\n"
        "Raft times out. The Raft election timeout is 150 ms.\n"
    )
    submit_page = ("submit", str(page_item["id"]), "--content-file", "page.md", "--title", "Raft")
    refused = run(*submit_page, "--json")
    assert refused.returncode == 1 and refused.json["stored"] is False
    flagged = refused.json["checks"]["expired-value"]["flagged"]
    assert [f["sentence"] for f in flagged] == [
        "The Raft leader is node 3.",
        "A Raft quorum is three nodes.",
        "The Raft election timeout is 150 ms.",
    ]
    assert "expired-value: FLAGGED" in run(*submit_page).stdout
    assert run(*submit_page, "--force").returncode == 0

    # the lint rule
    lint = run("lint", "--json")
    assert lint.returncode == 1
    rules = [f["rule"] for f in lint.json["findings"]]
    assert rules.count("expired-on-page") == 3
    assert "expired-fact" not in rules  # recorded once they had ended: history, not news

    # the kind: one item per expired fact on the page, in compact and items
    compact = run("compact")
    assert compact.returncode == 0, compact.stderr
    assert (
        "expired    open     Raft leader 'node 3' expired at 2020-01-01; page 'Raft' covers it"
        in (compact.stdout)
    )
    items = by_value(run("compact", "--kinds", "expired", "--json").json["items"])
    assert set(items) == {"node 3", "three nodes", "150 ms"}
    listed = run("items", "--kind", "expired", "--json").json["items"]
    assert {i["id"] for i in listed} == {i["id"] for i in items.values()}

    # --set: a date renews the fact
    leader = str(items["node 3"]["id"])
    renewed = run("submit", leader, "--set", f"renew_until={FUTURE}", "--json")
    assert renewed.returncode == 0 and renewed.json["stored"], renewed.stderr
    fact = run("get", renewed.json["address"], "--json").json
    assert (fact["value"], fact["valid_from"], fact["valid_to"]) == ("node 3", "2020-01-01", FUTURE)

    # a resolution that does not fit: one readable line, exit 2
    quorum = str(items["three nodes"]["id"])
    bad = run("submit", quorum, "--set", "retire=yes")
    assert bad.returncode == 2
    assert one_line(bad) == (
        f"memors-mcp: item {quorum} is an expired item and this resolution does not fit "
        "(expected true or false, got str @ resolution.retire); an expired item takes "
        "renew_until = a future date or retire = true, or skip with a reason; on the command "
        f"line: memors-mcp submit {quorum} --set renew_until=DATE | --set retire=true"
    )
    past = run("submit", quorum, "--resolution-json", '{"renew_until": "2020-06-01"}')
    assert past.returncode == 2 and "not in the future" in one_line(past)

    # --resolution-json: retire forgets the fact
    retired = run("submit", quorum, "--resolution-json", '{"retire": true}', "--json")
    assert retired.returncode == 0 and retired.json["stored"]
    assert run("get", retired.json["address"], "--json").json["status"] == "forgotten"

    # what is left: the one fact nobody settled, and the page to refresh: it was built
    # with the fact retired (forgotten) since
    left = run("compact", "--json").json["items"]
    assert [i["payload"]["fact"]["value"] for i in left if i["kind"] == "expired"] == ["150 ms"]
    (stale,) = [i for i in left if i["kind"] == "stale"]
    changed = {c["address"]: c["change"] for c in stale["payload"]["changes"]}
    assert changed[items["three nodes"]["payload"]["fact"]["address"]] == "forgotten"
    left = [f for f in run("lint", "--json").json["findings"] if f["rule"] == "expired-on-page"]
    assert [f["related"] for f in left] == [[items["150 ms"]["payload"]["fact"]["address"]]]


# --- the real MCP server -------------------------------------------------------------------


def mcp_session(python: Path, db: Path, disable: str | None, work: Any) -> Any:
    extra = {"MEMORS_DB": str(db)}
    if disable:
        extra["MEMORS_DISABLE_PLUGINS"] = disable
    params = StdioServerParameters(
        command=str(python), args=["-m", "memors_cli", "serve"], env=venv_env(python, **extra)
    )

    async def main() -> Any:
        async with Client(params) as client:
            return await work(client)

    return anyio.run(main)


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_the_mcp_server_takes_the_kind_its_resolution_and_its_check(fresh_store, example, tmp_path):
    run = Run(example["python"], fresh_store("store.db"), tmp_path)
    run.script(SETUP)

    async def work(client: Any) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        kinds = tools["compact"].input_schema["properties"]["kinds"]["description"]
        assert "expired (a fact expired while a page still covers it: renew it or retire it; " in (
            kinds
        )
        assert "resolve with renew_until = a future date" in kinds

        items = by_value((await call(client, "compact", kinds=["expired"]))["items"])
        assert set(items) == {"node 3", "three nodes", "150 ms"}
        leader = items["node 3"]["id"]

        bad = await client.call_tool("submit", {"item": leader, "resolution": {"renew": FUTURE}})
        assert bad.is_error
        assert "extra fields found (renew) @ resolution" in bad.content[0].text
        assert "an expired item takes renew_until" in bad.content[0].text

        dry = await call(
            client, "submit", item=leader, resolution={"renew_until": FUTURE}, dry_run=True
        )
        assert dry["stored"] is False and dry["status"] == "open"
        done = await call(client, "submit", item=leader, resolution={"renew_until": FUTURE})
        assert done["stored"] is True and done["address"].startswith("memo://fact/")
        retired = await call(
            client, "submit", item=items["three nodes"]["id"], resolution={"retire": True}
        )
        assert retired["stored"] is True

        # the check, on a page written over MCP for Paxos (whose fact expired)
        [page] = [i for i in (await call(client, "compact", kinds=["page"]))["items"]]
        report = await call(
            client,
            "submit",
            item=page["id"],
            content="Paxos has five nodes as acceptors.",
            title="Paxos",
            dry_run=True,
        )
        assert report["checks"]["expired-value"]["passed"] is False
        fixed = await call(
            client,
            "submit",
            item=page["id"],
            content="Until 2020, Paxos had five nodes as acceptors.",
            title="Paxos",
            dry_run=True,
        )
        assert fixed["checks"]["expired-value"]["passed"] is True

        # the lint rule: only the one expired value nobody settled is left on a page
        lint = await call(client, "lint")
        left = [f for f in lint["findings"] if f["rule"] == "expired-on-page"]
        assert [f["related"] for f in left] == [[items["150 ms"]["payload"]["fact"]["address"]]]

    mcp_session(example["python"], run.db, None, work)


# --- switched off --------------------------------------------------------------------------


def test_memors_disable_plugins_turns_the_example_off(fresh_store, example, tmp_path):
    run = Run(example["python"], fresh_store("store.db"), tmp_path)
    run.script(SETUP)
    items = by_value(run("items", "--kind", "expired", "--json").json["items"])
    off = "expired"

    for args in (("compact", "--kinds", "expired"), ("items", "--kind", "expired")):
        r = run(*args, disable=off)
        assert r.returncode == 2
        assert one_line(r) == (
            f"memors-mcp: unknown kind 'expired': registered kinds are {BUILT_IN}"
        )
    # its items stay in the store, but cannot be done while it is off
    r = run("submit", str(items["node 3"]["id"]), "--set", "retire=true", disable=off)
    assert r.returncode == 2 and "which is not installed or is disabled" in one_line(r)
    # no lint rule
    rules = {f["rule"] for f in run("lint", "--json", disable=off).json["findings"]}
    assert "expired-on-page" not in rules
    # no check
    [page] = run("compact", "--kinds", "page", "--json", disable=off).json["items"]
    (tmp_path / "p.md").write_text("Paxos has five nodes as acceptors.\n")
    dry = ("submit", str(page["id"]), "--content-file", "p.md", "--title", "Paxos", "--dry-run")
    assert "expired-value" not in run(*dry, "--json", disable=off).json["checks"]
    assert "expired-value" in run(*dry, "--json").json["checks"]  # and back on without it

    async def work(client: Any) -> str:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return tools["compact"].input_schema["properties"]["kinds"]["description"]

    assert "expired" not in mcp_session(example["python"], run.db, off, work)
