"""Habits the code keeps: no function in ``src/`` over 80 lines without a reason.

A function's size is counted from its ``def`` line to the end of its body
(decorators not counted, its docstring counted). One that must stay longer
(a table of SQL, a long ``match``) says why in a comment starting
``# Long:`` right above it (above its decorators, if it has any).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from paths import ROOT

pytestmark = pytest.mark.engine_independent("the source's function sizes, no store")

LIMIT = 80
REASON = "# Long:"

#: Functions still being split into named steps: empty now (issue 33
#: point 3). The test fails for an entry that is no longer long, so the
#: list only shrinks; add one only for a split in progress.
BEING_SPLIT: set[str] = set()


def long_functions(source: str, limit: int = LIMIT) -> dict[str, int]:
    """The functions of ``source`` over ``limit`` lines without a ``# Long:``
    comment right above them: {qualified name: lines}."""
    lines = source.splitlines()
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                size = child.end_lineno - child.lineno + 1
                if size > limit and not has_reason(lines, child):
                    found[name] = size
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def has_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the comment block right above the function (and its
    decorators) has a line starting ``# Long:``."""
    top = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 2  # 0-based, above
    while top >= 0 and lines[top].lstrip().startswith("#"):
        if lines[top].lstrip().startswith(REASON):
            return True
        top -= 1
    return False


def test_no_function_in_src_is_over_80_lines_without_a_reason() -> None:
    found = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for name, size in long_functions(path.read_text()).items():
            found[f"{where}::{name}"] = size
    unexplained = {name: size for name, size in found.items() if name not in BEING_SPLIT}
    assert unexplained == {}, (
        f"functions over {LIMIT} lines: split them into named steps, or say why not "
        f"in a comment starting {REASON!r} right above the def"
    )
    done = sorted(BEING_SPLIT - set(found))
    assert done == [], f"no longer over {LIMIT} lines: take them off BEING_SPLIT"


def test_the_count_runs_from_def_to_the_end_of_the_body_and_a_reason_excuses() -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(LIMIT - 1))
    fits = f"def fits():\n{body}"
    over = f"@staticmethod\ndef over():\n{body}    return x0\n"
    assert long_functions(fits) == {}
    assert long_functions(over) == {"over": LIMIT + 1}
    method = textwrap.indent(over.replace("@staticmethod\n", ""), "    ")
    assert long_functions(f"class C:\n{method}") == {"C.over": LIMIT + 1}
    excused = f"# Long: one table, read top to bottom.\n# (more of the reason)\n{over}"
    assert long_functions(excused) == {}
    apart = f"# Long: a reason for something else.\n\n{over}"
    assert long_functions(apart) == {"over": LIMIT + 1}
