"""The man page (SPEC §9): ``make man`` renders ``build_parser`` with
argparse-manpage; the page names every subcommand and its options."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memors_cli.main import build_parser
from test_cli import leaf_parsers

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def make_man_command(output: Path) -> list[str]:
    """The ``man`` target's recipe from the Makefile, writing to ``output``."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^man:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert match, "the Makefile has no man target"
    recipe = match.group(1).replace("\\\n", " ").replace("\t", " ")
    recipe = recipe.replace("$(BIN)", str(BIN))
    args = shlex.split(recipe)
    assert args[0] == str(BIN / "argparse-manpage"), args
    assert args[args.index("--function") + 1] == "build_parser"
    args[args.index("--output") + 1] = str(output)
    return args


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("man") / "memors-mcp.1"
    proc = subprocess.run(make_man_command(out), capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return out.read_text(encoding="utf-8")


def _plain(roff: str) -> str:
    return roff.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")


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


@pytest.mark.skipif(shutil.which("man") is None, reason="no man(1) here")
def test_man_renders_it_without_warnings(page, tmp_path):
    source = tmp_path / "memors-mcp.1"
    source.write_text(page)
    proc = subprocess.run(
        ["man", "--warnings", "-l", str(source)],
        capture_output=True,
        text=True,
        env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "memors-mcp search" in proc.stdout
    assert proc.stderr.strip() == "", proc.stderr
