"""The man page (SPEC §9) is rendered from ``build_parser`` when the package
is built — setup.py runs argparse-manpage's ``build_manpages`` as configured
by ``[tool.build_manpages]`` in pyproject.toml — and installed with it as
``share/man/man1/memors-mcp.1``, so ``man memors-mcp`` works after ``pip
install``. These tests run that same build step on a copy of the source tree,
check the page (every subcommand and option, ENVIRONMENT, EXAMPLES), render
it with man(1) or groff, and build a wheel to see that it carries the page."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_cli import leaf_parsers

from memors_cli.main import build_parser
from paths import ROOT

ROOT = ROOT
#: What a build reads: the same files an sdist carries.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "man", "src")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the source tree (a build writes build/ and *.egg-info into it)."""
    root = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(source, root / name)
    return root


@pytest.fixture(scope="module")
def page(tree) -> str:
    """The page as the package build renders it (``build_py`` runs this command)."""
    proc = subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_manpages"],
        capture_output=True,
        text=True,
        cwd=tree,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return (tree / "build" / "man" / "memors-mcp.1").read_text(encoding="utf-8")


def _plain(roff: str) -> str:
    return roff.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")


def _section(page: str, name: str) -> str:
    parts = re.split(r"^\.SH ", page, flags=re.M)
    found = [p for p in parts if p.split("\n", 1)[0].strip('"') == name]
    assert found, f"the man page has no {name} section"
    return _plain(found[0])


def test_the_build_and_make_man_render_the_configured_page():
    config = (ROOT / "pyproject.toml").read_text()
    assert re.search(
        r"^\[tool\.build_manpages\]\nmanpages = \[\n\s+\"build/man/memors-mcp\.1:", config, re.M
    )
    assert "function=build_parser" in config and "include=man/memors-mcp.include" in config
    assert "argparse-manpage" in config.split("[build-system]", 1)[1].split("\n[", 1)[0]
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^man:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe and "setup.py --quiet build_manpages" in recipe.group(1)


def test_the_page_has_a_proper_name_line_and_synopsis(page):
    assert page.startswith('.TH MEMORS\\-MCP "1"')
    name = page.split(".SH NAME\n", 1)[1].splitlines()[0]
    assert re.fullmatch(r"memors\\-mcp \\- \S.*", name), name
    assert ".SH SYNOPSIS" in page


def test_the_page_names_every_subcommand_and_option(page):
    text = _plain(page)
    for path, parser in leaf_parsers(build_parser()):
        command = "memors-mcp " + " ".join(path)
        assert command in text, f"the man page does not name {command!r}"
        section = text.split(f"'{command}'", 1)
        assert len(section) == 2, f"no section for {command!r}"
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in section[1], f"{command}: {option} missing"


def test_the_page_has_environment_and_examples(page):
    environment = _section(page, "ENVIRONMENT")
    table = (ROOT / "docs" / "cli.md").read_text().split("**Environment.**", 1)[1]
    variables = set(re.findall(r"`(MEMORS_[A-Z_]+)`", table.split("\n## ", 1)[0]))
    assert len(variables) > 10, variables
    for variable in sorted(variables):
        assert variable in environment, f"ENVIRONMENT does not explain {variable}"
    examples = [
        line for line in _section(page, "EXAMPLES").splitlines() if line.startswith("memors-mcp ")
    ]
    for command in ("--db", "remember", "search", "fact add", "compact", "items show", "submit"):
        assert any(f" {command} " in f"{line} " for line in examples), f"no example of {command}"


def _renderer() -> list[str] | None:
    if shutil.which("man"):
        return ["man", "--warnings", "-l"]
    if shutil.which("groff"):
        return ["groff", "-man", "-Tutf8", "-ww"]
    return None


@pytest.mark.skipif(_renderer() is None, reason="neither man(1) nor groff here")
def test_the_page_renders_without_warnings(page, tmp_path):
    source = tmp_path / "memors-mcp.1"
    source.write_text(page)
    proc = subprocess.run(
        [*_renderer(), str(source)],
        capture_output=True,
        text=True,
        env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr
    shown = re.sub(r".\x08", "", proc.stdout)  # groff's overstrike bold, if any
    for heading in ("NAME", "SYNOPSIS", "ENVIRONMENT", "EXAMPLES"):
        assert re.search(rf"^{heading}$", shown, re.M), heading
    assert "memors-mcp search" in shown


def test_a_wheel_carries_the_man_page_the_web_assets_and_the_vocabulary(tree, tmp_path):
    out = tmp_path / "wheel"
    proc = subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"),
            *("--wheel-dir", str(out), str(tree)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("memors-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith("share/man/man1/memors-mcp.1")]
        assert names and re.fullmatch(
            r"memors-[^/]+\.data/data/share/man/man1/memors-mcp\.1", names[0]
        )
        shipped = archive.read(names[0]).decode()
        listed = set(archive.namelist())
    # The web view renders from templates and assets inside the package: no build step.
    for asset in ("templates/page.html", "templates/item.html", "static/memors.css"):
        assert f"memors_mcp/web/{asset}" in listed, asset
    assert "memors_mcp/web/static/memors.js" in listed
    # The embedding model's vocabulary and its licence travel with the code.
    for data in ("vocab.txt", "NOTICE.txt", "LICENSE-all-MiniLM-L6-v2.txt"):
        assert f"memors_core/semantic/data/{data}" in listed, data
    assert ".SH ENVIRONMENT" in shipped and ".SH EXAMPLES" in shipped
    assert "memors\\-mcp submit" in shipped
