"""memors core: the store, the domain model, the compaction engine.

The public API is :class:`Memory`; plugin authors use :data:`hookimpl`,
:class:`memors_core.kinds.Kind` and :mod:`memors_core.testing`.
"""

from .errors import BadAddress, BadInput, MemorsError, NotFound, PluginError, Refused
from .hookspecs import hookimpl
from .memory import Memory

__all__ = [
    "BadAddress",
    "BadInput",
    "MemorsError",
    "Memory",
    "NotFound",
    "PluginError",
    "Refused",
    "hookimpl",
]
