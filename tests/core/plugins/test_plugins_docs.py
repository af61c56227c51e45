"""docs/plugins.md cannot drift from the code (issue 9).

- The hook reference is generated from ``memors_core.plugins.hookspecs``: a hook
  added without a complete docstring (Called, Args naming every argument,
  Returns), or without a test that implements it, fails here.
- The ``Kind`` contract tables name every field of the classes they
  document, the ``ctx.store`` reference is generated from
  ``memors_core.plugins.PluginStore`` (what a plugin may call, with the
  storage protocol's docstrings),
  and every helper of ``memors_core.testing`` is documented.
- The tutorial runs: its files are written from the doc's code blocks and
  its console sessions are run in a fresh virtual environment, outputs
  compared line by line.

Run ``python tests/core/plugins/test_plugins_docs.py`` to regenerate the hook and
``ctx.store`` references.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

# (computed here: this file also runs as a script, to regenerate the references)
ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "plugins.md"
BEGIN = "<!-- hook-reference: generated from memors_core.plugins.hookspecs; regenerate with `python tests/core/plugins/test_plugins_docs.py` -->"
END = "<!-- /hook-reference -->"
SECTIONS = ("Called", "Args", "Returns")


# --- the hook reference, generated from the specs ---------------------------------------


def hooks() -> dict[str, object]:
    from memors_core.plugins import hookspecs

    return {
        name: fn
        for name, fn in vars(hookspecs).items()
        if name.startswith("memors_") and callable(fn) and hasattr(fn, "memors_spec")
    }


def _markdown(text: str) -> str:
    text = re.sub(r":(?:class|func|mod|data|meth|attr|exc):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def parse_docstring(fn: object) -> tuple[str, dict[str, str], dict[str, str]]:
    """(summary and description, {section: text}, {argument: text})."""
    doc = inspect.getdoc(fn) or ""
    head, sections, current = [], {}, None
    for line in doc.splitlines():
        m = re.fullmatch(r"(\w+):", line)
        if m and m.group(1) in SECTIONS:
            current = m.group(1)
            sections[current] = []
        elif current is None:
            head.append(line)
        else:
            sections[current].append(line)
    args: dict[str, str] = {}
    for line in sections.get("Args", []):
        m = re.fullmatch(r" {4}(\w+): (.*)", line)
        if m:
            last = m.group(1)
            args[last] = m.group(2)
        elif line.strip():
            args[last] += " " + line.strip()
    text = {k: " ".join(" ".join(v).split()) for k, v in sections.items()}
    return "\n".join(head).strip(), text, args


def render_hook(name: str, fn: object) -> str:
    sig = inspect.signature(fn)
    params = ", ".join(
        f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
        for p in sig.parameters.values()
    )
    returns = f" -> {sig.return_annotation}" if sig.return_annotation is not sig.empty else ""
    head, sections, args = parse_docstring(fn)
    paragraphs = [" ".join(p.split()) for p in head.split("\n\n")]
    firstresult = fn.memors_spec.get("firstresult", False)  # type: ignore[attr-defined]
    out = [
        f"### `{name}`",
        "",
        "```python",
        "@hookimpl",
        f"def {name}({params}){returns}: ...",
        "```",
        "",
        *(f"{_markdown(p)}\n" for p in paragraphs),
        f"**Called:** {_markdown(sections.get('Called', ''))}",
        "",
        "**Arguments:**",
        "",
        *(f"- `{arg}`: {_markdown(text)}" for arg, text in args.items()),
        "",
        f"**Returns:** {_markdown(sections.get('Returns', ''))}",
        "",
        f"**firstresult:** {'yes' if firstresult else 'no'}",
    ]
    return "\n".join(out)


def render_reference() -> str:
    return "\n\n".join(render_hook(name, fn) for name, fn in hooks().items())


def doc_reference(text: str) -> str:
    assert BEGIN in text and END in text, "docs/plugins.md lost its hook-reference markers"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write_reference() -> None:
    text = DOC.read_text()
    for begin, end, render in (
        (BEGIN, END, render_reference),
        (STORE_BEGIN, STORE_END, render_store_reference),
    ):
        before, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1]
        text = f"{before}{begin}\n{render()}\n{end}{after}"
    DOC.write_text(text)


# --- the ctx.store reference, generated from the storage protocol ------------------------

STORE_BEGIN = "<!-- store-reference: generated from memors_core.plugins.PluginStore; regenerate with `python tests/core/plugins/test_plugins_docs.py` -->"
STORE_END = "<!-- /store-reference -->"


def _one_line(text: str) -> str:
    return _markdown(" ".join(text.split())).replace("|", "\\|")


def _method_row(name: str, fn: object) -> str:
    sig = inspect.signature(fn)
    params = [
        p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        for p in list(sig.parameters.values())[1:]
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    ret = sig.return_annotation
    shown = "" if ret in (inspect.Signature.empty, "None") else f" → `{ret}`"
    call = f"`{name}({', '.join(params)})`{shown}".replace("|", "\\|")
    return f"| {call} | {_one_line(inspect.getdoc(fn) or '')} |"


def store_repositories() -> dict[str, type]:
    """What ``ctx.store`` offers a plugin: ``PluginStore``'s repositories,
    attribute name -> Protocol, in declaration order."""
    from memors_core.plugins.store import repositories

    return repositories()


def render_store_reference() -> str:
    from memors_core.plugins.store import NARROWS

    out = []
    for attr, proto in store_repositories().items():
        out += [f"#### `ctx.store.{attr}`", ""]
        # the repository's own words, from the storage protocol it narrows
        full = NARROWS[proto]
        if full.__doc__ and inspect.getdoc(full):
            out += [_one_line(inspect.getdoc(full)), ""]
        out += ["| method | what it does |", "|---|---|"]
        for name, fn in vars(proto).items():
            if not name.startswith("_") and inspect.isfunction(fn):
                out.append(_method_row(name, fn))
        out.append("")
    return "\n".join(out).rstrip()


def test_every_hook_is_specified_with_when_arguments_and_return():
    assert "memors_register_kinds" in hooks(), "no hook specs found"
    for name, fn in hooks().items():
        head, sections, args = parse_docstring(fn)
        assert head, f"{name} has no summary line"
        for section in SECTIONS:
            assert sections.get(section), f"{name}'s docstring has no {section}: section"
        assert list(args) == list(inspect.signature(fn).parameters), (
            f"{name}'s Args: must document exactly its arguments, in order"
        )


def test_the_hook_reference_is_generated_from_the_specs():
    assert doc_reference(DOC.read_text()) == render_reference(), (
        "docs/plugins.md's hook reference is out of date: run `python tests/core/plugins/test_plugins_docs.py`"
    )


def test_the_reference_documents_every_hook_with_its_arguments():
    # Independent of the generator: each hook has a heading and names each argument.
    text = DOC.read_text()
    for name, fn in hooks().items():
        section = text.split(f"### `{name}`", 1)
        assert len(section) == 2, f"{name} is not documented in docs/plugins.md"
        body = section[1].split("\n### ", 1)[0]
        for arg in inspect.signature(fn).parameters:
            assert f"`{arg}`" in body, f"{name}'s argument {arg!r} is not documented"
        assert "**firstresult:**" in body


def test_every_hook_is_implemented_by_some_test():
    sources = [
        p.read_text()
        for folder in (ROOT / "tests", ROOT / "examples")
        for p in folder.rglob("*.py")
        if ".venv" not in p.parts
    ]
    for name in hooks():
        assert any(re.search(rf"def {name}\(", s) for s in sources), (
            f"no test registers an implementation of {name}"
        )


# --- the Kind contract, the ops table, the testing helpers -------------------------------


def section(heading: str) -> str:
    text = DOC.read_text()
    assert heading in text, f"docs/plugins.md has no {heading!r} section"
    body = text.split(heading, 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


def first_column(body: str) -> list[str]:
    return re.findall(r"^\| `([^`]+)` \|", body, flags=re.M)


def test_the_kind_class_is_documented_attribute_by_attribute():
    from memors_core.plugins.kinds import Kind

    public = {n for n in vars(Kind) if not n.startswith("_")}
    documented = {c.split("(")[0] for c in first_column(section("### `Kind`\n"))}
    assert public == documented


def test_every_kind_member_has_its_reference_in_the_code():
    # A plugin author reading kinds.py sees what the doc table says: every
    # method has a docstring, every attribute a ``#:`` comment above it.
    from memors_core.plugins.kinds import Kind

    source = inspect.getsource(Kind).splitlines()
    for name, value in vars(Kind).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value):
            assert inspect.getdoc(value), f"Kind.{name} has no docstring"
            continue
        at = next(i for i, line in enumerate(source) if line.startswith(f"    {name}: "))
        assert source[at - 1].strip().startswith("#:"), f"Kind.{name} has no #: comment"


@pytest.mark.parametrize(
    "name",
    ["Candidate", "Scan", "Item", "KindContext", "Changes", "CheckContext", "LintContext"],
)
def test_each_contract_class_is_documented_field_by_field(name):
    from memors_core.plugins import kinds

    fields = [f.name for f in attrs.fields(getattr(kinds, name))]
    assert first_column(section(f"### `{name}`\n")) == fields


def test_the_store_reference_is_generated_from_the_protocol():
    # A method added to memors_core.plugins.PluginStore shows up in the doc, or this fails.
    text = DOC.read_text()
    assert STORE_BEGIN in text and STORE_END in text, "docs/plugins.md lost its store markers"
    documented = text.split(STORE_BEGIN, 1)[1].split(STORE_END, 1)[0].strip()
    assert documented == render_store_reference(), (
        "the ctx.store reference is out of date: run python tests/core/plugins/test_plugins_docs.py"
    )
    for attr in ("pages", "entities", "facts", "tombstones", "items", "merges"):
        assert f"#### `ctx.store.{attr}`" in documented


def test_the_sqlite_store_has_every_method_the_reference_documents(tmp_path):
    from memors_core.storage.sqlite.connection import SqliteStore

    store = SqliteStore.open(tmp_path / "t.db")
    tx = store.tx
    for attr, proto in store_repositories().items():
        repo = getattr(tx, attr)
        for name, fn in vars(proto).items():
            if not name.startswith("_") and inspect.isfunction(fn):
                assert callable(getattr(repo, name, None)), f"ctx.store.{attr}.{name} is missing"


def test_every_testing_helper_and_fixture_is_documented():
    import memors_core.testing as testing

    rows = {c.split("(")[0] for c in first_column_any()}
    fixtures = {n for n, v in vars(testing).items() if _is_fixture(v)}
    assert {"memory", "db_path", "memors_cli"} <= fixtures
    assert set(testing.__all__) | fixtures <= rows


def _is_fixture(value: object) -> bool:
    return (
        type(value).__name__ == "FixtureFunctionDefinition"  # pytest >= 8.4
        or hasattr(value, "_pytestfixturefunction")
    )


def first_column_any() -> list[str]:
    body = section("## Testing a plugin: `memors_core.testing`\n")
    return re.findall(r"^\| (?:fixture )?`([^`]+)` \|", body, flags=re.M)


def test_the_kind_contract_matches_the_built_in_kinds():
    # What the doc promises a kind is, every installed kind is.
    from memors_core.plugins.kinds import Kind
    from memors_core.plugins.manager import build_plugin_manager

    for kind in build_plugin_manager().kinds:
        assert isinstance(kind, Kind)
        assert kind.name and kind.description and kind.hint
        assert kind.usage.startswith("submit {id} ") and kind.instructions, kind.name
        assert type(kind).summary is not Kind.summary, f"{kind.name} does not say its summary"
        assert attrs.has(kind.resolution), f"{kind.name}'s resolution is not an attrs class"


# --- the tutorial runs as written ----------------------------------------------------------

FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.S | re.M)


def tutorial_blocks() -> list[tuple[str, str, str]]:
    """(language, file name or "", body) of each code block of the tutorial."""
    body = section("## Tutorial: a `todo` kind, from an empty folder\n")
    out = []
    for lang, info, code in FENCE.findall(body):
        m = re.search(r"file=(\S+)", info)
        out.append((lang, m.group(1) if m else "", code))
    return out


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def matches(expected: str, line: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, line) is not None


def test_the_tutorial_has_the_files_and_sessions_it_describes():
    blocks = tutorial_blocks()
    files = [f for _lang, f, _code in blocks if f]
    assert files == [
        "pyproject.toml",
        "src/memors_todo/__init__.py",
        "tests/conftest.py",
        "tests/test_todo.py",
    ]
    commands = [c for lang, _f, code in blocks if lang == "console" for c, _ in console_steps(code)]
    assert "python -m pip install -e ." in commands
    assert any(c.startswith("memors-mcp submit 1 --set ") for c in commands)
    assert any("--resolution-json" in c for c in commands)


@pytest.mark.slow
def test_the_tutorial_runs_from_an_empty_folder(tmp_path):
    """Every file and command of the tutorial, in order, in a fresh virtual
    environment that has memors (from this checkout's environment) and
    nothing else: the tutorial's own `pip install -e .` installs the kind."""
    from test_plugins_example import make_venv, venv_env

    venv = make_venv(tmp_path / "venv")
    env = venv_env(venv)
    work = tmp_path / "work"
    work.mkdir()
    script, expectations = ["exec 2>&1", "cd " + str(work)], []
    marker = "@@memors-tutorial-step@@"
    for lang, filename, code in tutorial_blocks():
        if filename:
            # written where the session stands at that point, as a reader would
            script.append(f"mkdir -p \"$(dirname '{filename}')\"")
            script.append(f"cat > '{filename}' <<'MEMORS_EOF'\n{code}MEMORS_EOF")
        elif lang == "console":
            for command, output in console_steps(code):
                script.append(f'{command}\necho "{marker} $?"')
                expectations.append((command, output))
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    chunks = proc.stdout.split(marker)
    outputs = [chunks[0]] + [c.split("\n", 1)[1] if "\n" in c else "" for c in chunks[1:]]
    codes = [int(c.split("\n", 1)[0]) for c in chunks[1:]]
    assert len(codes) == len(expectations), proc.stdout[-3000:] + proc.stderr[-3000:]
    for i, (command, expected) in enumerate(expectations):
        got = [line for line in outputs[i].splitlines() if line.strip()]
        if not expected:
            assert codes[i] == 0, f"$ {command}\nexit {codes[i]}\n{outputs[i][-3000:]}"
            continue
        # the lines shown in the doc appear, in order (a doc may leave lines out)
        pending = list(expected)
        for line in got:
            if pending and matches(pending[0], line):
                pending.pop(0)
        assert not pending, f"$ {command}\nexpected {pending[0]!r} in:\n" + "\n".join(got)
        shows_error = any(line.startswith("memors-mcp:") for line in expected)
        assert (codes[i] != 0) == shows_error, f"$ {command}: exit {codes[i]}"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    os.chdir(ROOT)
    write_reference()
    print(f"wrote the hook and ctx.store references into {DOC.relative_to(ROOT)}")
