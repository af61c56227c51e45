"""Building the plugin manager: no global one, no loading at import time."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

import pluggy

from memors_core.errors import PluginError
from memors_core.log import get_logger
from memors_core.plugins import hookspecs
from memors_core.plugins.kinds import KindConflict, KindRegistry, MalformedKind

log = get_logger("memors.plugins")

ENTRY_POINT_GROUP = "memors.kinds"


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


def disabled_plugins() -> set[str]:
    """Names listed in ``MEMORS_DISABLE_PLUGINS`` (comma or space separated)."""
    raw = os.environ.get("MEMORS_DISABLE_PLUGINS", "")
    return {n.strip() for n in raw.replace(",", " ").split() if n.strip()}


class PluginManager(pluggy.PluginManager):
    """pluggy's plugin manager, plus the installed plugins that failed to load.

    ``plugin_errors`` maps the entry-point name of each installed plugin
    that was set aside to what went wrong, in one line (``"ImportError: no
    module named 'foo'"``). A plugin set aside is not registered at all:
    none of its hooks run, and its kind (a kind's name is its entry-point
    name) is unavailable until it is fixed or disabled.
    """

    def __init__(self) -> None:
        super().__init__("memors")
        self.plugin_errors: dict[str, str] = {}
        #: Entry-point name -> its target (``module:attribute``), for messages.
        self.entry_points: dict[str, str] = {}
        #: The kinds collected when the manager was built (plugins registered
        #: later are not in it: :func:`collect_kinds` asks again).
        self.kinds = KindRegistry()

    def set_aside(self, name: str, reason: str) -> None:
        """Unregister the installed plugin ``name`` and warn, once, why."""
        if self.get_plugin(name) is not None:
            self.unregister(name=name)
        self.plugin_errors[name] = reason
        log.warning(
            "plugin_failed_to_load",
            plugin=name,
            entry_point=self.entry_points.get(name, "?"),
            error=reason,
        )


def build_plugin_manager(
    *, entrypoints: bool = True, plugins: Iterable[tuple[str, Any]] = ()
) -> PluginManager:
    """A fresh plugin manager.

    Core's own check and lint plugins first, then every entry point of the
    ``memors.kinds`` group, then names in ``MEMORS_DISABLE_PLUGINS`` are
    blocked, then the hooks are checked against their specs and the kinds
    are collected. ``plugins`` registers extra ``(name, plugin)`` pairs,
    which tests use for small test plugins; one named like an entry point
    takes its place (a plugin's own tests pass its module while it is also
    installed).

    An installed plugin that fails to load (its import raises, a hook does
    not fit its spec or is unknown, its kinds cannot be registered) is set
    aside: it is logged once as a ``plugin_failed_to_load`` warning and
    listed in ``plugin_errors``, and everything else works. A plugin passed
    in ``plugins`` is code of the caller's own: one that fails raises
    :class:`PluginError` naming it. So does a kind name registered twice,
    as the right one cannot be guessed.
    """
    from memors_core.engine import (
        checks,
        lint,  # core's built-in hook implementations
    )

    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    disabled = disabled_plugins()
    pm.register(checks, name="memors.checks")
    pm.register(lint, name="memors.lint")
    plugins = list(plugins)
    given = {name for name, _plugin in plugins}
    if entrypoints:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in disabled or ep.name in given or pm.get_plugin(ep.name) is not None:
                continue
            pm.entry_points[ep.name] = ep.value
            try:
                plugin = ep.load()
            except (Exception, SystemExit) as exc:
                pm.set_aside(ep.name, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
                continue
            try:
                pm.register(plugin, name=ep.name)
                _check_hooks(pm, plugin)
            except (pluggy.PluginValidationError, ValueError) as exc:
                pm.set_aside(ep.name, f"invalid: {_invalid_text(ep.name, exc)}")
                continue
            # Another distribution's entry point of this name loaded after all.
            pm.plugin_errors.pop(ep.name, None)
    for name, plugin in plugins:
        if name not in disabled:
            _register(pm, plugin, name)
    for name in disabled:
        if pm.get_plugin(name) is not None:
            pm.unregister(name=name)
        pm.set_blocked(name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise _invalid(pm.get_name(exc.plugin) or "?", exc) from exc
    # Sets aside an installed plugin whose kinds cannot be registered; the
    # registry is kept, so a Memory built on this manager asks only once.
    pm.kinds = collect_kinds(pm)
    return pm


def _invalid_text(name: str, exc: Exception) -> str:
    # pluggy's messages show the plugin's repr and span lines: name it, one line.
    text = str(exc)
    plugin = getattr(exc, "plugin", None)
    if plugin is not None:
        text = text.replace(repr(plugin), repr(name))
    return " ".join(text.split())


def _invalid(name: str, exc: Exception) -> PluginError:
    return PluginError(f"plugin {name!r} is invalid: {_invalid_text(name, exc)}")


def _register(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise _invalid(name, exc) from exc


def _check_hooks(pm: pluggy.PluginManager, plugin: Any) -> None:
    """``check_pending`` for one plugin: a hook without a spec is refused."""
    for caller in pm.get_hookcallers(plugin) or ():
        if caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin and not impl.optionalhook:
                raise pluggy.PluginValidationError(plugin, f"unknown hook {caller.name!r}")


def collect_kinds(pm: pluggy.PluginManager) -> KindRegistry:
    """Ask every plugin for its kinds; a failing plugin is named.

    An installed plugin (one that came from an entry point) whose hook
    raises or registers a malformed kind is set aside (see
    :func:`build_plugin_manager`) with none of its kinds; any other raises
    :class:`PluginError`.
    """
    registry = KindRegistry()
    installed = getattr(pm, "entry_points", {})
    for impl in pm.hook.memors_register_kinds.get_hookimpls():
        name = impl.plugin_name
        registry.current_plugin = name
        try:
            impl.function(registry=registry)
        except KindConflict:
            raise
        except MalformedKind as exc:
            if name not in installed:
                raise
            registry.discard_plugin(name)
            pm.set_aside(name, exc.reason)
        except PluginError as exc:
            if name not in installed:
                raise
            registry.discard_plugin(name)
            pm.set_aside(name, exc.message)
        except Exception as exc:
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            if name not in installed:
                raise PluginError(f"plugin {name!r} failed to register its kinds: {error}") from exc
            registry.discard_plugin(name)
            pm.set_aside(name, f"memors_register_kinds raised {error}")
    return registry


def call_each(hook: Any, **kwargs: Any) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    """Call every implementation of ``hook`` on its own.

    Returns ``(results, errors)``: ``(plugin name, result)`` for each that
    returned something, and ``(plugin name, error text)`` for each that
    raised, so one broken plugin never takes the others down.
    """
    results: list[tuple[str, Any]] = []
    errors: list[tuple[str, str]] = []
    for impl in reversed(hook.get_hookimpls()):
        args = {name: kwargs[name] for name in impl.argnames if name in kwargs}
        try:
            value = impl.function(**args)
        except Exception as exc:
            log.warning("plugin_failed", plugin=impl.plugin_name, hook=hook.name, error=str(exc))
            errors.append((impl.plugin_name, f"{type(exc).__name__}: {exc}"))
            continue
        if value is not None:
            results.append((impl.plugin_name, value))
    return results, errors
