"""One import for plugin authors (issue 33): ``memors_core.plugins``.

- The built-in kinds, the example plugin and the tutorial's code import
  from ``memors_core`` only ``memors_core.plugins`` (tests also
  ``memors_core.testing``): read with ``ast``, imports under
  ``TYPE_CHECKING`` and inside functions included.
- ``memors_core.plugins`` re-exports lazily: importing it loads no other
  module of ``memors_core``, and every name it lists resolves.
- ``PluginStore`` is what kinds may use of the store: every method it
  names is the storage protocol's own, with the same signature (so every
  ``Tx`` is a ``PluginStore``), and the built-in kinds, the example and the
  tutorial call nothing on ``ctx.store`` outside it.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys

import pytest
from test_plugins_docs import tutorial_blocks

from paths import ROOT

FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```$", re.S | re.M)

#: What plugin code may import from memors_core, and what its tests may too.
PLUGIN_API = ("memors_core.plugins",)
TEST_API = (*PLUGIN_API, "memors_core.testing")


def core_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of ``memors_core`` or below in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(line, m) for line, m in found if m.split(".")[0] == "memors_core"]


def outside(source: str, allowed: tuple[str, ...]) -> list[str]:
    """The imports of ``source`` that reach into memors_core beyond ``allowed``."""
    return [
        f"line {line}: {module}"
        for line, module in core_imports(source)
        if not any(module == a or module.startswith(a + ".") for a in allowed)
    ]


def plugin_sources() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Name -> (source, what it may import) for every piece of plugin code
    the project ships: the built-in kinds, the example and the tutorial."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for path in sorted((ROOT / "src" / "memors_kinds").rglob("*.py")):
        out[str(path.relative_to(ROOT))] = (path.read_text(), PLUGIN_API)
    example = ROOT / "examples" / "memors-expired"
    for path in sorted(example.rglob("*.py")):
        rel = path.relative_to(example)
        allowed = TEST_API if rel.parts[0] == "tests" else PLUGIN_API
        out[str(path.relative_to(ROOT))] = (path.read_text(), allowed)
    for lang, filename, code in tutorial_blocks():
        if lang == "python":
            allowed = PLUGIN_API if filename.startswith("src/") else TEST_API
            out[f"docs/plugins.md tutorial {filename}"] = (code, allowed)
    # every other Python block of the plugin guide (the migrations example, ...)
    for n, (_info, code) in enumerate(FENCE.findall((ROOT / "docs" / "plugins.md").read_text())):
        out.setdefault(f"docs/plugins.md block {n}", (code, TEST_API))
    return out


def test_the_import_reader_sees_every_way_of_reaching_into_core():
    source = (
        "from memors_core.plugins import Kind\n"
        "from memors_core import hookimpl\n"
        "import memors_core.domain.ids\n"
        "if TYPE_CHECKING:\n    from memors_core.storage.api import Tx\n"
        "def f():\n    from memors_core.wire import to_json\n"
        "from . import sibling\n"
    )
    assert outside(source, PLUGIN_API) == [
        "line 2: memors_core",
        "line 3: memors_core.domain.ids",
        "line 5: memors_core.storage.api",
        "line 7: memors_core.wire",
    ]


def test_kinds_the_example_and_the_tutorial_import_only_the_plugin_api():
    sources = plugin_sources()
    assert "src/memors_kinds/duplicate/__init__.py" in sources
    assert "examples/memors-expired/src/memors_expired/__init__.py" in sources
    assert "docs/plugins.md tutorial src/memors_todo/__init__.py" in sources
    wrong = {
        name: bad for name, (code, allowed) in sources.items() if (bad := outside(code, allowed))
    }
    assert wrong == {}, (
        "plugin code imports memors_core beyond memors_core.plugins: re-export what it "
        f"needs from memors_core/plugins/__init__.py instead: {wrong}"
    )


def test_the_plugin_api_is_what_the_kinds_import():
    # Everything the built-in kinds and the example take from it is there.
    import memors_core.plugins as api

    taken = set()
    for code, _allowed in plugin_sources().values():
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and node.module == "memors_core.plugins":
                taken |= {a.name for a in node.names}
    assert {"Kind", "Candidate", "KindContext", "hookimpl", "PluginStore"} <= taken
    assert taken <= set(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'Tx'"):
        api.Tx  # noqa: B018


def test_the_type_checkers_see_the_same_names_as_the_lazy_table():
    import memors_core.plugins as api

    tree = ast.parse(inspect.getsource(api))
    [block] = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    typed = {a.name: n.module for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert typed == api._LAZY


def test_importing_the_plugin_api_loads_nothing_else_of_core():
    # The quick read path (memors-mcp search) imports memors_core.plugins.entrypoints.
    probe = (
        "import sys, json\n"
        "import memors_core.plugins, memors_core.plugins.entrypoints\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('memors', 'attrs', 'typing')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == [
        "memors_core",
        "memors_core.plugins",
        "memors_core.plugins.entrypoints",
    ]


# --- PluginStore: what a plugin may use of the store ---------------------------------------


def test_every_plugin_store_method_is_the_storage_protocols_own():
    from memors_core.plugins import store

    assert store.NARROWS
    for narrow, full in store.NARROWS.items():
        for name, fn in vars(narrow).items():
            if name.startswith("_") or not inspect.isfunction(fn):
                continue
            assert inspect.signature(fn) == inspect.signature(getattr(full, name)), (
                f"{narrow.__name__}.{name} differs from {full.__name__}.{name}"
            )
            assert inspect.getdoc(fn), f"{narrow.__name__}.{name} has no docstring"
    # each repository narrows the one of the same name on a transaction
    tx = store.api.Tx.__annotations__
    for attr, narrow in store.repositories().items():
        assert store.NARROWS[narrow].__name__ == tx[attr], attr
    assert list(store.repositories()) == [a for a in tx if a in store.repositories()]


def plugin_store_calls() -> dict[str, set[str]]:
    """Repository -> the methods plugin code calls on it: ``store.facts.live(``,
    ``tx.facts.live(`` (a kind's helpers name the store ``tx``), and through
    an alias (``entities = ctx.store.entities`` ... ``entities.require(``)."""
    calls: dict[str, set[str]] = {}
    for code, _allowed in plugin_sources().values():
        for repo, method in re.findall(r"\b(?:store|tx)\.([a-z_]+)\.([a-z_]+)\(", code):
            calls.setdefault(repo, set()).add(method)
        for repo in re.findall(r"\b(?:store|tx)\.([a-z_]+)\b", code):
            calls.setdefault(repo, set())
        for alias, repo in re.findall(r"^\s*(\w+) = \w+\.store\.([a-z_]+)\s*$", code, re.M):
            calls.setdefault(repo, set()).update(re.findall(rf"\b{alias}\.([a-z_]+)\(", code))
    return calls


def test_plugin_code_calls_nothing_on_the_store_outside_plugin_store():
    from memors_core.plugins import store

    offered = {
        attr: {n for n, f in vars(proto).items() if inspect.isfunction(f)}
        for attr, proto in store.repositories().items()
    }
    offered |= {"engine": set(), "after_commit": set(), "together": set(), "native": set()}
    calls = plugin_store_calls()
    assert {"entities", "facts", "pages", "tombstones", "merges"} <= set(calls)
    beyond = {
        repo: sorted(methods - offered[repo]) if repo in offered else "the whole repository"
        for repo, methods in calls.items()
        if repo not in offered or methods - offered[repo]
    }
    assert beyond == {}, f"plugin code uses the store beyond PluginStore: {beyond}"


def test_plugin_store_is_narrower_than_the_transaction():
    from memors_core.plugins.store import NARROWS, PluginPassages, PluginStore, repositories
    from memors_core.storage import api

    def methods(proto: type) -> int:
        return sum(1 for n, f in vars(proto).items() if inspect.isfunction(f) and n[0] != "_")

    full = sum(methods(getattr(api, a)) for a in api.Tx.__annotations__.values() if hasattr(api, a))
    narrow = sum(methods(p) for p in NARROWS if p is not PluginStore)
    assert narrow < full / 2
    assert "purges" not in repositories() and not hasattr(PluginStore, "purges")
    assert "insert" not in vars(PluginPassages)  # no ingest
