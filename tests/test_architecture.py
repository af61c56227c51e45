"""The tree's architecture holds: no import cycle anywhere in src/.

(The layers and who may import what are import-linter contracts in
pyproject.toml, run by ``make contracts``; a cycle is what they cannot see.)
Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import re
import tomllib

import grimp
import pytest

from paths import ROOT

pytestmark = pytest.mark.engine_independent("the source's import graph and the map, no store")

PACKAGES = ("memors_core", "memors_kinds", "memors_mcp", "memors_cli")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph.modules:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_in_src():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def _map_rows() -> set[str]:
    """The folders docs/architecture.md's map has a row for."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The map, folder by folder", 1)[1]
    return set(re.findall(r"^\| `([^`]+/)` \|", section, flags=re.MULTILINE))


def test_every_package_has_a_row_in_the_map():
    packages = {
        f"{init.parent.relative_to(ROOT).as_posix()}/"
        for init in (ROOT / "src").rglob("__init__.py")
        if "egg-info" not in init.as_posix()
    }
    assert {"src/memors_core/storage/sql/", "src/memors_kinds/duplicate/"} <= packages
    missing = sorted(packages - _map_rows())
    assert missing == [], f"docs/architecture.md's map lacks a row for {missing}"


def test_readme_and_contributor_notes_point_to_the_map():
    for name in ("README.md", "DEVELOPERS.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "(docs/architecture.md)" in text, name
        assert "| `src/memors_core/` |" not in text, f"{name} keeps a layout table of its own"


def test_quick_is_inside_the_layer_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layered = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    named = {
        module.strip()
        for contract in layered
        for layer in contract["layers"]
        for module in layer.split("|")
    }
    assert "memors_core.quick" in named
