"""Where things are, for tests anywhere in the tree (``tests/`` is on ``pythonpath``)."""

from __future__ import annotations

from pathlib import Path

#: The checkout.
ROOT = Path(__file__).resolve().parent.parent
#: The test tree.
TESTS = ROOT / "tests"
