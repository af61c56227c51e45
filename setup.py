"""The one build step pyproject.toml cannot declare: the man page.

``build_py`` first runs argparse-manpage's ``build_manpages`` command, which
renders ``memors_cli.main.build_parser`` (it loads nothing, so the build
needs none of memors' dependencies) with the sections of
``man/memors-mcp.include`` into ``build/man/memors-mcp.1``, as configured by
``[tool.build_manpages]`` in pyproject.toml; ``install`` (which a wheel build
runs too) copies it to ``share/man/man1``, so the wheel carries
``memors-<version>.data/data/share/man/man1/memors-mcp.1`` and ``man
memors-mcp`` works wherever the package's ``bin`` is on ``PATH``.
"""

import sys
from pathlib import Path

from build_manpages import build_manpages, get_build_py_cmd, get_install_cmd
from setuptools import setup

# The parser is imported from this source tree, not from an installed memors.
sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

setup(
    cmdclass={
        "build_manpages": build_manpages,
        "build_py": get_build_py_cmd(),
        "install": get_install_cmd(),
    }
)
