"""Building the plugin manager: no global one, no loading at import time."""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError
from .kinds import KindRegistry
from .log import get_logger

log = get_logger("memors.plugins")

ENTRY_POINT_GROUP = "memors.kinds"


def disabled_plugins() -> set[str]:
    """Names listed in ``MEMORS_DISABLE_PLUGINS`` (comma or space separated)."""
    raw = os.environ.get("MEMORS_DISABLE_PLUGINS", "")
    return {n.strip() for n in raw.replace(",", " ").split() if n.strip()}


def build_plugin_manager(
    *, entrypoints: bool = True, plugins: Iterable[tuple[str, Any]] = ()
) -> pluggy.PluginManager:
    """A fresh plugin manager.

    Core's own check and lint plugins first, then every entry point of the
    ``memors.kinds`` group (a plugin that fails to load is named in the
    error), then names in ``MEMORS_DISABLE_PLUGINS`` are blocked, then the
    hooks are checked against their specs. ``plugins`` registers extra
    ``(name, plugin)`` pairs, which tests use for small test plugins; one
    named like an entry point takes its place (a plugin's own tests pass
    its module while it is also installed).
    """
    from . import checks, lint  # core's built-in hook implementations

    pm = pluggy.PluginManager("memors")
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
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            _register(pm, plugin, ep.name)
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
    return pm


def _invalid(name: str, exc: Exception) -> PluginError:
    # pluggy's messages show the plugin's repr and span lines: name it, one line.
    text = str(exc)
    plugin = getattr(exc, "plugin", None)
    if plugin is not None:
        text = text.replace(repr(plugin), repr(name))
    return PluginError(f"plugin {name!r} is invalid: {' '.join(text.split())}")


def _register(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    try:
        pm.register(plugin, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise _invalid(name, exc) from exc


def collect_kinds(pm: pluggy.PluginManager) -> KindRegistry:
    """Ask every plugin for its kinds; a failing plugin is named."""
    registry = KindRegistry()
    for impl in pm.hook.memors_register_kinds.get_hookimpls():
        registry.current_plugin = impl.plugin_name
        try:
            impl.function(registry=registry)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {impl.plugin_name!r} failed to register its kinds: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
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
