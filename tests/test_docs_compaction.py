"""docs/compaction.md's worked example runs, and prints what the doc shows.

Every ```sh block of the doc is run in order with bash (``set -eo
pipefail``) in one fresh directory against one fresh store; the ```json or
```text block that follows it is what its standard output must be. Item ids
are compared as they are (a fresh store numbers items from 1). Addresses
(``memo://…``) differ on every run: the ones the doc shows are mapped to the
real ones as outputs are compared, and later commands get the real ones
substituted in — so the doc cannot drift. ``"…"`` in a JSON block stands
for any value, and as the last element of a list for any further elements.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "compaction.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
# An address, or the web view's path for one (``get``'s ``url``).
ADDRESS = re.compile(
    r"(?:memo://|/ns/[A-Za-z0-9_.-]+/)(?:document|passage|entity|fact|page|item)/[0-9a-f-]+"
)
ELLIPSIS = "…"


def doc_blocks(text: str) -> list[tuple[str, str, str | None, str | None]]:
    """(script, expected kind, expected text) for each sh block."""
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    out = []
    for n, (lang, body) in enumerate(blocks):
        if lang != "sh":
            continue
        following = blocks[n + 1] if n + 1 < len(blocks) else None
        if following and following[0] in ("json", "text"):
            out.append((body, following[0], following[1]))
        else:
            out.append((body, None, None))
    return out


class Addresses:
    """A one-to-one map from the doc's addresses to this run's."""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}

    def pair(self, shown: str, real: str, where: str) -> None:
        assert shown.split("/")[2] == real.split("/")[2], f"{where}: {shown} vs {real}"
        known = self.real.setdefault(shown, real)
        assert known == real, f"{where}: the doc's {shown} is {known} here, not {real}"
        others = [s for s, r in self.real.items() if r == real and s != shown]
        assert not others, f"{where}: {real} is shown as both {shown} and {others[0]}"

    def substitute(self, script: str) -> str:
        def swap(m: re.Match[str]) -> str:
            assert m.group(0) in self.real, f"the doc uses {m.group(0)} before showing it"
            return self.real[m.group(0)]

        return ADDRESS.sub(swap, script)

    def match_text(self, shown: str, real: str, where: str) -> None:
        shown_addrs, real_addrs = ADDRESS.findall(shown), ADDRESS.findall(real)
        assert len(shown_addrs) == len(real_addrs), f"{where}:\n{real}\n--- doc shows ---\n{shown}"
        for s, r in zip(shown_addrs, real_addrs, strict=True):
            self.pair(s, r, where)
        assert ADDRESS.sub("ADDR", shown) == ADDRESS.sub("ADDR", real), (
            f"{where}: the doc shows\n{shown}\nbut the command printed\n{real}"
        )

    def match_json(self, shown, real, where: str) -> None:
        if shown == ELLIPSIS:
            return
        if isinstance(shown, dict):
            assert isinstance(real, dict) and set(shown) == set(real), (
                f"{where}: keys {sorted(real) if isinstance(real, dict) else real!r} "
                f"but the doc shows {sorted(shown)}"
            )
            for key in shown:
                self.match_json(shown[key], real[key], f"{where}.{key}")
        elif isinstance(shown, list):
            assert isinstance(real, list), f"{where}: {real!r} is not a list"
            if shown and shown[-1] == ELLIPSIS:
                shown = shown[:-1]
                assert len(real) >= len(shown), f"{where}: {len(real)} < {len(shown)} elements"
                real = real[: len(shown)]
            assert len(real) == len(shown), f"{where}: {len(real)} elements, doc {len(shown)}"
            for i, (s, r) in enumerate(zip(shown, real, strict=True)):
                self.match_json(s, r, f"{where}[{i}]")
        elif isinstance(shown, str) and isinstance(real, str):
            self.match_text(shown, real, where)
        else:
            assert shown == real and type(shown) is type(real), f"{where}: {real!r} != {shown!r}"


def run_doc(workdir: Path, text: str, db: Path | str | None = None) -> Addresses:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORS_")}
    env["MEMORS_DB"] = str(db if db is not None else workdir / "memors.db")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    addresses = Addresses()
    blocks = doc_blocks(text)
    assert blocks, "the doc has no sh blocks"
    for n, (script, kind, expected) in enumerate(blocks, 1):
        where = f"sh block {n}"
        proc = subprocess.run(
            ["bash", "-c", "set -eo pipefail\n" + addresses.substitute(script)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"{where} failed ({proc.returncode}):\n{script}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        if kind == "json":
            addresses.match_json(json.loads(expected), json.loads(proc.stdout), where)
        elif kind == "text":
            addresses.match_text(expected.rstrip("\n"), proc.stdout.rstrip("\n"), where)
    return addresses


def test_the_worked_example_runs_and_prints_what_the_doc_shows(tmp_path, store_address):
    text = DOC.read_text(encoding="utf-8")
    addresses = run_doc(tmp_path, text, store_address)
    assert addresses.real  # the doc shows real addresses, mapped to this run's


def test_the_example_covers_the_seed_commands():
    text = DOC.read_text(encoding="utf-8")
    scripts = "\n".join(script for script, _k, _e in doc_blocks(text))
    for command in (
        "memors-mcp compact --ns default --kinds page,stale --json",
        'memors-mcp submit 1 --content-file page.md --title "Quorum replication" --dry-run',
        'memors-mcp submit 1 --content-file page.md --title "Quorum replication"',
        "memors-mcp submit 3 --keep memo://fact/",
        "memors-mcp submit 4 --accept",
        'memors-mcp submit 2 --skip --reason "not worth a page"',
        "memors-mcp items",
    ):
        assert command in scripts, command


@pytest.mark.parametrize(
    ("shown", "real", "ok"),
    [
        ({"a": "memo://fact/1", "b": ["x", ELLIPSIS]}, {"a": "memo://fact/2", "b": ["x", "y"]}, 1),
        ({"a": "memo://fact/1"}, {"a": "memo://page/2"}, 0),
        ({"a": 1}, {"a": 2}, 0),
        ({"a": [1]}, {"a": [1, 2]}, 0),
        ({"a": ELLIPSIS}, {"a": {"deep": 1}}, 1),
        (
            {"a": "memo://fact/1", "b": "memo://fact/1"},
            {"a": "memo://fact/2", "b": "memo://fact/3"},
            0,
        ),
    ],
)
def test_the_matcher_itself(shown, real, ok):
    if ok:
        Addresses().match_json(shown, real, "x")
    else:
        with pytest.raises(AssertionError):
            Addresses().match_json(shown, real, "x")
