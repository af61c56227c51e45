"""memors core: the store, the domain model, the compaction engine.

The public API is :class:`Memory`; plugin authors use :mod:`memors_core.plugins`
(one import: the kind contract, ``hookimpl``, ``PluginStore``, the helpers)
and :mod:`memors_core.testing`.

The names below are imported on first use (PEP 562), so importing one
submodule (``memors_core.storage.sqlite.connection``, ``memors_core.log``) or reading
:data:`__version__` does not pay for the whole service, its attrs classes
and its cattrs converter.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~5 ms

# The one place the version is written: pyproject.toml reads it at build
# time (``[tool.setuptools.dynamic]``), ``memors-mcp --version`` and the MCP
# server print it without asking importlib.metadata.
__version__ = "0.1.0"

_LAZY = {
    "BadAddress": "errors",
    "BadInput": "errors",
    "MemorsError": "errors",
    "NotFound": "errors",
    "PluginError": "errors",
    "Refused": "errors",
    "hookimpl": "plugins.hookspecs",
    "Memory": "memory",
}

__all__ = [
    "BadAddress",
    "BadInput",
    "MemorsError",
    "Memory",
    "NotFound",
    "PluginError",
    "Refused",
    "__version__",
    "hookimpl",
]

if TYPE_CHECKING:  # pragma: no cover
    from memors_core.errors import BadAddress, BadInput, MemorsError, NotFound, PluginError, Refused
    from memors_core.memory import Memory
    from memors_core.plugins.hookspecs import hookimpl


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memors_core' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
