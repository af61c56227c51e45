"""The installed plugins' entry points, read without importlib.metadata
(which costs a small command more than everything else it does) and
without importing anything heavy: ``memors-mcp search`` reads them to know
that only the built-in kinds are installed."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``memors-mcp search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

#: The entry-point group kinds are registered in (a kind's name is its entry point's).
ENTRY_POINT_GROUP = "memors.kinds"
#: The package of the built-in kinds, which ship with memors itself.
BUILT_IN_PACKAGE = "memors_kinds"


class _EntryPoint:
    """What :func:`entry_points` yields: ``name``, ``value``, ``group``, ``load()``."""

    __slots__ = ("group", "name", "value")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    def load(self) -> Any:
        from importlib import import_module

        module, _, attrs = self.value.split("[", 1)[0].partition(":")
        target: Any = import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            target = getattr(target, attr)
        return target

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _normalized(name: str) -> str:
    out: list[str] = []
    for ch in name.lower():
        ch = "_" if ch in "-_." else ch
        if not (ch == "_" and out and out[-1] == "_"):
            out.append(ch)
    return "".join(out)


def entry_points(*, group: str) -> list[Any]:
    """The entry points of ``group``, found as ``importlib.metadata.entry_points``
    finds them (each ``*.dist-info`` or ``*.egg-info`` directory on
    ``sys.path``, in order, the first distribution of a name winning) but
    without importing importlib.metadata, which costs a small command more
    than everything else it does. Anything unusual on the path (a zip, a
    finder that provides distributions of its own) goes to importlib.metadata.
    """
    from importlib.machinery import PathFinder

    unusual = any(
        hasattr(finder, "find_distributions") and finder is not PathFinder
        for finder in sys.meta_path
    )
    found: list[Any] = []
    seen: set[str] = set()
    for entry in sys.path:
        if unusual:
            break
        try:
            listed = os.listdir(entry or ".")
        except NotADirectoryError:
            unusual = True  # a zip file on the path
            break
        except OSError:
            continue
        # As importlib.metadata orders them: a path entry's dist-info
        # directories, then its egg-info ones, each in directory order.
        children = [c for c in listed if c.lower().endswith(".dist-info")]
        children += [c for c in listed if c.lower().endswith(".egg-info")]
        for child in children:
            name = _normalized(child.rsplit(".", 1)[0].partition("-")[0])
            if name in seen:
                continue
            base = os.path.join(entry or ".", child)
            if not os.path.isdir(base):
                continue
            seen.add(name)
            found.extend(_group(os.path.join(base, "entry_points.txt"), group))
    if unusual:
        from importlib.metadata import entry_points as scan

        return list(scan(group=group))
    return found


def _group(path: str, group: str) -> list[_EntryPoint]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return []
    if group not in text:  # (most distributions have entry points of other groups only)
        return []
    section, out = None, []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            out.append(_EntryPoint(name.strip(), value.strip(), group))
    return out


def only_built_in_kinds() -> bool:
    """Whether every installed ``memors.kinds`` entry point is one of
    memors' own kinds: then no installed plugin can fail to load."""
    return all(
        ep.value.split(":", 1)[0].strip().split(".", 1)[0] == BUILT_IN_PACKAGE
        for ep in entry_points(group=ENTRY_POINT_GROUP)
    )
