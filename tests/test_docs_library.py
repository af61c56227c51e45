"""docs/library.md, the library reference, is generated from the code.

It documents ``memors_core.Memory`` method by method, every result class of
``memors_core.domain.model`` field by field and the exceptions of
``memors_core.errors``, all from their docstrings (a field's from its ``#:``
comment). A method, result or exception added without a docstring, or a doc
left behind by a change, fails here.

Run ``python tests/test_docs_library.py`` to regenerate it.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "library.md"

INTRO = """\
# The library: `memors_core`

<!-- generated from the docstrings of memors_core.Memory, memors_core.domain.model and
memors_core.errors: do not edit; regenerate with `python tests/test_docs_library.py` -->

`Memory` is the library's one entry point: each of its methods is an
operation of the CLI and the MCP tools, with keyword arguments named as the
JSON fields and `namespace="default"`. They return the frozen attrs classes
below; `memors_core.wire.to_json(result)` turns one into the plain dicts and
lists the CLI prints with `--json` (`json.dumps` it to print JSON). Every
error a caller can act on is a `MemorsError` with a `code` and a one-line
`message`; nothing is stored when one is raised.

```python
import json

from memors_core import Memory
from memors_core.wire import to_json

with Memory.open("/tmp/memors.db") as memory:
    memory.remember("Raft elects a leader by majority vote.", entities=["Raft"])
    print(json.dumps(to_json(memory.entity("Raft")), indent=2))
```
"""


def _markdown(text: str) -> str:
    text = re.sub(r":(?:class|func|mod|data|meth|attr|exc):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _paragraphs(doc: str | None) -> str:
    """A docstring as Markdown: its paragraphs, each on one line."""
    parts = [" ".join(p.split()) for p in inspect.cleandoc(doc or "").split("\n\n")]
    return "\n\n".join(_markdown(p) for p in parts if p)


def _signature(fn: object) -> str:
    params = []
    star = False
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self" or p.name == "cls":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            star = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        text = f"{prefix}{p.name}"
        if p.annotation is not p.empty:
            text += f": {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    ret = inspect.signature(fn).return_annotation
    returns = f" -> {ret}" if ret is not inspect.Signature.empty else ""
    return f"({', '.join(params)}){returns}"


def memory_members() -> list[tuple[str, object, str]]:
    """``(name, function, "method" | "property" | "classmethod")`` in source order."""
    from memors_core.memory import Memory

    out = []
    for name, value in vars(Memory).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            out.append((name, value.fget, "property"))
        elif isinstance(value, classmethod):
            out.append((name, value.__func__, "classmethod"))
        elif inspect.isfunction(value):
            out.append((name, value, "method"))
    return out


def result_classes() -> list[type]:
    from memors_core.domain import model

    return [
        v
        for v in vars(model).values()
        if inspect.isclass(v) and attrs.has(v) and v.__module__ == model.__name__
    ]


def error_classes() -> list[type]:
    from memors_core import errors

    return [
        v
        for v in vars(errors).values()
        if inspect.isclass(v) and v.__module__ == errors.__name__ and issubclass(v, BaseException)
    ]


def field_comments(cls: type) -> dict[str, str]:
    """Each field's ``#:`` comment in the class's source."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        m = re.match(r" {4}(\w+): ", line)
        if m and pending:
            comments[m.group(1)] = " ".join(pending)
        pending = []
    return comments


def _default(field: attrs.Attribute) -> str:
    if field.default is attrs.NOTHING:
        return "—"
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        return f"`{field.default.factory()!r}`"
    return f"`{field.default!r}`"


def render_memory() -> str:
    from memors_core.memory import Memory

    out = ["## `Memory`", "", _paragraphs(Memory.__doc__)]
    for name, fn, how in memory_members():
        sig = "" if how == "property" else _signature(fn)
        label = {"property": " (property)", "classmethod": " (class method)"}.get(how, "")
        out += ["", f"### `Memory.{name}`{label}", ""]
        if sig:
            out += ["```python", f"{name}{sig}", "```", ""]
        out.append(_paragraphs(fn.__doc__))
    return "\n".join(out)


def render_results() -> str:
    out = [
        "## Results",
        "",
        "The classes of `memors_core.domain.model`, in its order; a field's name is its JSON name.",
    ]
    for cls in result_classes():
        comments = field_comments(cls)
        out += ["", f"### `{cls.__name__}`", "", _paragraphs(cls.__doc__), ""]
        out += ["| field | type | default | |", "|---|---|---|---|"]
        for field in attrs.fields(cls):
            about = _markdown(comments.get(field.name, "")).replace("|", "\\|")
            kind = _type_name(cls, field).replace("|", "\\|")
            out.append(f"| `{field.name}` | `{kind}` | {_default(field)} | {about} |")
    return "\n".join(out)


def _type_name(cls: type, field: attrs.Attribute) -> str:
    """A field's type as its source spells it. ``field.type`` will not do:
    ``attrs.resolve_types`` (cattrs calls it when a result is first
    converted) replaces the source's strings by the classes they name."""
    for klass in cls.__mro__:
        written = vars(klass).get("__annotations__", {}).get(field.name)
        if written is not None:
            return (
                written if isinstance(written, str) else getattr(written, "__name__", str(written))
            )
    return str(field.type)


def render_errors() -> str:
    out = [
        "## Errors",
        "",
        "The exceptions of `memors_core.errors` (the common ones are importable from "
        "`memors_core`), each with its `code`.",
    ]
    for cls in error_classes():
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        code = getattr(cls, "code", None)
        out += ["", f"### `{cls.__name__}({bases})`: code `{code}`", "", _paragraphs(cls.__doc__)]
    return "\n".join(out)


def render() -> str:
    return "\n\n".join([INTRO.rstrip("\n"), render_memory(), render_results(), render_errors()])


def test_the_library_reference_is_generated_from_the_docstrings():
    assert DOC.read_text() == render() + "\n", (
        "docs/library.md is out of date: run python tests/test_docs_library.py"
    )


def test_every_method_result_and_error_has_a_docstring():
    missing = [f"Memory.{n}" for n, fn, _ in memory_members() if not inspect.getdoc(fn)]
    missing += [c.__name__ for c in result_classes() if not c.__doc__]
    missing += [c.__name__ for c in error_classes() if not c.__doc__]
    assert missing == []


def test_the_reference_covers_what_memors_core_exports():
    text = DOC.read_text()
    import memors_core

    for name in memors_core.__all__:
        if name[0].isupper():
            assert f"### `{name}(" in text or f"## `{name}`" in text, name
    for method in ("open", "remember", "search", "compact", "submit", "lint", "entity"):
        assert f"### `Memory.{method}`" in text, method


def test_the_example_runs_and_prints_json(fresh_store):
    import json
    import os
    import subprocess

    [block] = re.findall(r"```python\n(import json.*?)```", DOC.read_text(), re.S)
    db = fresh_store("library.db")
    proc = subprocess.run(
        [sys.executable, "-c", block.replace('"/tmp/memors.db"', repr(str(db)))],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEMORS_VECTORS": "off"},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == "Raft"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    DOC.write_text(render() + "\n")
    print(f"wrote {DOC.relative_to(ROOT)}")
