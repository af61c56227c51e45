"""No MCP code path can reach the executor, and no other command loads it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from paths import ROOT

ROOT = ROOT
EXECUTOR = "memors_cli.executor"


def _contracts() -> list[dict]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    return data["tool"]["importlinter"]["contracts"]


def test_an_import_linter_contract_forbids_memors_mcp_to_import_the_cli():
    forbidding = [
        c
        for c in _contracts()
        if c.get("type") == "forbidden"
        and "memors_mcp" in c.get("source_modules", [])
        and {"memors_cli", EXECUTOR} & set(c.get("forbidden_modules", []))
    ]
    assert forbidding, "pyproject.toml must forbid memors_mcp to import memors_cli"
    # Indirect imports count too: the contract must not be limited to direct ones.
    assert all(not c.get("allow_indirect_imports") for c in forbidding)


def test_lint_imports_keeps_that_contract():
    tool = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(tool)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    name = next(
        c["name"]
        for c in _contracts()
        if "memors_mcp" in c.get("source_modules", []) and c.get("type") == "forbidden"
    )
    assert f"{name} KEPT" in proc.stdout, proc.stdout + proc.stderr


def _modules_of(package: str) -> list[str]:
    base = ROOT / "src" / package
    names = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(ROOT / "src").with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_importing_every_memors_mcp_module_never_loads_the_executor():
    modules = _modules_of("memors_mcp")
    assert "memors_mcp" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('memors_cli')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_only_the_compact_command_imports_the_executor():
    importers = []
    for package in ("memors_core", "memors_kinds", "memors_mcp", "memors_cli"):
        for name in _modules_of(package):
            if name == EXECUTOR:
                continue
            path = ROOT / "src" / (name.replace(".", "/") + ".py")
            if not path.exists():
                path = ROOT / "src" / name.replace(".", "/") / "__init__.py"
            tree = ast.parse(path.read_text("utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    target = "." * node.level + (node.module or "")
                    if target in (EXECUTOR, ".executor", "..executor") or (
                        target in ("memors_cli", ".")
                        and any(a.name == "executor" for a in node.names)
                    ):
                        importers.append(name)
                elif isinstance(node, ast.Import) and any(
                    a.name.startswith(EXECUTOR) for a in node.names
                ):
                    importers.append(name)
    assert importers == ["memors_cli.commands.compaction"]


def test_other_commands_do_not_load_the_executor(fresh_store, tmp_path):
    db = fresh_store("x.db")
    code = (
        "import sys\n"
        "from memors_cli.main import main\n"
        f"db = {str(db)!r}\n"
        "for argv in (['compact', '--db', db], ['compact', '--db', db, '--kinds', 'page'],\n"
        "             ['lint', '--db', db], ['search', 'x', '--db', db]):\n"
        "    main(argv)\n"
        f"print({EXECUTOR!r} in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_the_contract_covers_every_executor_module(tmp_path):
    """A memors_mcp module importing any executor module (the OpenAI client
    too) breaks the contract: a copy of the sources with such a module added
    fails lint-imports."""
    executor_modules = [m for m in _modules_of("memors_cli") if m.startswith(EXECUTOR + ".")]
    assert f"{EXECUTOR}.openai" in executor_modules and f"{EXECUTOR}.ollama" in executor_modules
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    probe = tmp_path / "src" / "memors_mcp" / "_probe.py"
    probe.write_text(
        "".join(f"import {m}\n" for m in executor_modules if m != f"{EXECUTOR}.__main__"), "utf-8"
    )
    tool = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    proc = subprocess.run(
        [str(tool), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout
    assert "the MCP server cannot reach the CLI or the executor BROKEN" in proc.stdout
    for module in executor_modules:
        assert f"memors_mcp._probe -> {module}" in proc.stdout, proc.stdout
