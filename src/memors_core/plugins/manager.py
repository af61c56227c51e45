"""memors's plugins: a typed facade over pluggy, built fresh, never at import time.

:func:`build_plugin_manager` gives a :class:`Plugins`; callers call its
methods, one per hook, and never ``pm.hook.memors_…``: how each hook is
called and what a failing implementation becomes is decided here, in one
place, as :mod:`memors_core.plugins.hookspecs` documents it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

from memors_core.domain.model import CheckResult, Finding
from memors_core.errors import PluginError
from memors_core.log import get_logger
from memors_core.plugins import hookspecs
from memors_core.plugins.entrypoints import ENTRY_POINT_GROUP, entry_points
from memors_core.plugins.kinds import KindConflict, KindRegistry, MalformedKind

if TYPE_CHECKING:
    from memors_core.plugins.kinds import CheckContext, Item, LintContext

log = get_logger("memors.plugins")


def disabled_plugins() -> set[str]:
    """Names listed in ``MEMORS_DISABLE_PLUGINS`` (comma or space separated)."""
    raw = os.environ.get("MEMORS_DISABLE_PLUGINS", "")
    return {n.strip() for n in raw.replace(",", " ").split() if n.strip()}


#: Core's own hook implementations (the ``omission``, ``corruption`` and ``substitution``
#: checks, the built-in lint rules) as ``(plugin name, module)`` pairs,
#: registered first and by the same path as any plugin. They are named here,
#: not imported: they are engine modules, and the plugins layer sits below
#: the engine.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    # pluggy calls the last registered first: substitution's report comes
    # after omission's and corruption's.
    ("memors.substitution", "memors_core.engine.substitution"),
    ("memors.checks", "memors_core.engine.checks"),
    ("memors.lint", "memors_core.engine.lint"),
)


class Plugins:
    """memors's plugins, and the one place their hooks are called.

    Build one with :func:`build_plugin_manager`. Each hook has a typed
    method (:meth:`register_kinds`, :meth:`extract_entities`,
    :meth:`check_submission`, :meth:`lint_rules`) that calls every
    implementation on its own and turns a failure into what
    :mod:`memors_core.plugins.hookspecs` promises for that hook, so a caller
    never spells ``pm.hook.memors_…`` nor handles a plugin's exceptions.

    ``plugin_errors`` maps the entry-point name of each installed plugin
    that was set aside to what went wrong, in one line (``"ImportError: no
    module named 'foo'"``). A plugin set aside is not registered at all:
    none of its hooks run, and its kind (a kind's name is its entry-point
    name) is unavailable until it is fixed or disabled.
    """

    def __init__(self) -> None:
        self._manager = pluggy.PluginManager("memors")
        self._manager.add_hookspecs(hookspecs)
        self.plugin_errors: dict[str, str] = {}
        #: Entry-point name -> its target (``module:attribute``), for messages.
        self.entry_points: dict[str, str] = {}
        self._kinds: KindRegistry | None = None

    # --- which plugins are in -------------------------------------------------------

    def register(self, plugin: Any, name: str) -> None:
        """Register ``plugin`` (a module or an object) as ``name``.

        One whose hooks do not fit their specs, or that implements a hook
        memors does not have, raises :class:`PluginError` naming it and is
        not registered.
        """
        try:
            self._manager.register(plugin, name=name)
            _check_hooks(self._manager, plugin)
        except (pluggy.PluginValidationError, ValueError) as exc:
            if self._manager.is_registered(plugin):
                self._manager.unregister(plugin)
            raise _invalid(name, exc) from exc
        self._kinds = None  # it may bring kinds of its own

    def get_plugin(self, name: str) -> Any:
        """The plugin registered as ``name``, or ``None``."""
        return self._manager.get_plugin(name)

    def is_blocked(self, name: str) -> bool:
        """Whether ``name`` was disabled (``MEMORS_DISABLE_PLUGINS``)."""
        return self._manager.is_blocked(name)

    def set_aside(self, name: str, reason: str) -> None:
        """Unregister the installed plugin ``name`` and warn, once, why."""
        if self._manager.get_plugin(name) is not None:
            self._manager.unregister(name=name)
        self.plugin_errors[name] = reason
        log.warning(
            "plugin_failed_to_load",
            plugin=name,
            entry_point=self.entry_points.get(name, "?"),
            error=reason,
        )

    # --- the hooks -------------------------------------------------------------------

    @property
    def kinds(self) -> KindRegistry:
        """The kinds of every plugin: collected when the plugins were built,
        and again the first time it is asked after a plugin is registered."""
        if self._kinds is None:
            self._kinds = self.register_kinds()
        return self._kinds

    def register_kinds(self) -> KindRegistry:
        """Ask every plugin for its kinds (``memors_register_kinds``).

        An installed plugin (one that came from an entry point) whose hook
        raises or registers a malformed kind is set aside with none of its
        kinds; any other raises :class:`PluginError` naming it. A kind name
        registered twice raises :class:`KindConflict`, whichever plugins.
        """
        registry = KindRegistry()
        for impl in self._impls("memors_register_kinds"):
            name = impl.plugin_name
            registry.current_plugin = name
            try:
                impl.function(registry=registry)
            except KindConflict:
                raise
            except (MalformedKind, PluginError) as exc:
                if name not in self.entry_points:
                    raise
                registry.discard_plugin(name)
                self.set_aside(name, exc.reason if isinstance(exc, MalformedKind) else exc.message)
            except Exception as exc:
                error = _one_line(exc)
                if name not in self.entry_points:
                    raise PluginError(
                        f"plugin {name!r} failed to register its kinds: {error}"
                    ) from exc
                registry.discard_plugin(name)
                self.set_aside(name, f"memors_register_kinds raised {error}")
        return registry

    @property
    def has_entity_extractors(self) -> bool:
        """Whether any plugin implements ``memors_extract_entities`` (when
        none does, remembering skips the call for each passage)."""
        return bool(self._manager.hook.memors_extract_entities.get_hookimpls())

    def extract_entities(self, text: str, namespace: str) -> list[str]:
        """The entity names every plugin finds in the passage ``text``.

        A plugin that raises is logged (``plugin_failed``) and ignored; an
        answer that is not a list of names, and each name that is empty or
        over 200 characters, is skipped with a ``plugin_bad_result`` warning
        naming the plugin.
        """
        hook = "memors_extract_entities"
        results, _errors = self._call_each(hook, text=text, namespace=namespace)
        names: list[str] = []
        for plugin, value in results:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list | tuple):
                log.warning("plugin_bad_result", plugin=plugin, hook=hook)
                continue
            for name in value:
                if isinstance(name, str) and name.strip() and len(" ".join(name.split())) <= 200:
                    names.append(name)
                else:
                    log.warning("plugin_bad_result", plugin=plugin, hook=hook)
        return names

    def check_submission(
        self, context: CheckContext, item: Item, resolution: Any, payload: dict[str, Any]
    ) -> dict[str, CheckResult]:
        """Every plugin's checks of a submission, by check name.

        A plugin that raises, or answers anything but a mapping of check
        names to :class:`CheckResult`, cannot vouch for the submission: it
        appears as a flagged check named after the plugin, with the error.
        """
        results, errors = self._call_each(
            "memors_check_submission",
            context=context,
            item=item,
            resolution=resolution,
            payload=payload,
        )
        checks: dict[str, CheckResult] = {}
        for plugin, value in results:
            problem = _not_checks(value)
            if problem is None:
                checks.update(value)
            else:
                errors.append((plugin, problem))
        for plugin, error in errors:
            checks[plugin] = CheckResult(passed=False, flagged=[{"error": error}])
        return checks

    @property
    def lint_plugins(self) -> list[str]:
        """The names of the plugins that implement ``memors_lint_rules``
        (``memors.lint``, core's built-in rules, among them)."""
        return [impl.plugin_name for impl in self._impls("memors_lint_rules")]

    def lint_rules(self, context: LintContext) -> list[Finding]:
        """Every plugin's lint findings.

        A plugin that raises, or answers anything but a list of
        :class:`Finding`, is reported as a ``plugin-error`` finding at
        ``plugin:NAME`` with the error; the others' findings still count.
        """
        results, errors = self._call_each("memors_lint_rules", context=context)
        findings: list[Finding] = []
        for plugin, value in results:
            if isinstance(value, list | tuple) and all(isinstance(f, Finding) for f in value):
                findings.extend(value)
            else:
                errors.append((plugin, "returned something that is not a list of Finding"))
        for plugin, error in errors:
            findings.append(
                Finding(
                    "plugin-error",
                    f"plugin:{plugin}",
                    f"lint rules of plugin {plugin!r} failed: {error}",
                )
            )
        return findings

    # --- calling -----------------------------------------------------------------------

    def _impls(self, hook: str) -> list[Any]:
        # pluggy's calling order: the last registered first, ``tryfirst`` and
        # ``trylast`` respected.
        return list(reversed(getattr(self._manager.hook, hook).get_hookimpls()))

    def _call_each(
        self, hook: str, **kwargs: Any
    ) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
        """Call every implementation of ``hook`` on its own, not as one pluggy
        call, so that one that raises is named while the others still run.

        Returns ``(results, errors)``: ``(plugin name, result)`` for each that
        returned something, ``(plugin name, error text)`` for each that raised
        (logged as ``plugin_failed``).
        """
        results: list[tuple[str, Any]] = []
        errors: list[tuple[str, str]] = []
        for impl in self._impls(hook):
            # An implementation may take fewer arguments than the spec names.
            args = {name: kwargs[name] for name in impl.argnames if name in kwargs}
            try:
                value = impl.function(**args)
            except Exception as exc:
                log.warning("plugin_failed", plugin=impl.plugin_name, hook=hook, error=str(exc))
                errors.append((impl.plugin_name, f"{type(exc).__name__}: {exc}"))
                continue
            if value is not None:
                results.append((impl.plugin_name, value))
        return results, errors


def build_plugin_manager(
    *, entrypoints: bool = True, plugins: Iterable[tuple[str, Any]] = ()
) -> Plugins:
    """Fresh :class:`Plugins`.

    Core's own plugins (:data:`BUILTIN_PLUGINS`) first, then every entry
    point of the ``memors.kinds`` group, then names in
    ``MEMORS_DISABLE_PLUGINS`` are blocked, then the hooks are checked
    against their specs and the kinds are collected. ``plugins`` registers
    extra ``(name, plugin)`` pairs, which tests use for small test plugins;
    one named like an entry point takes its place (a plugin's own tests
    pass its module while it is also installed).

    An installed plugin that fails to load (its import raises, a hook does
    not fit its spec or is unknown, its kinds cannot be registered) is set
    aside: it is logged once as a ``plugin_failed_to_load`` warning and
    listed in ``plugin_errors``, and everything else works. A plugin passed
    in ``plugins`` is code of the caller's own: one that fails raises
    :class:`PluginError` naming it. So does a kind name registered twice,
    as the right one cannot be guessed.
    """
    from importlib import import_module

    pm = Plugins()
    manager = pm._manager
    disabled = disabled_plugins()
    for name, module in BUILTIN_PLUGINS:
        pm.register(import_module(module), name)
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
                pm.set_aside(ep.name, _one_line(exc))
                continue
            try:
                manager.register(plugin, name=ep.name)
                _check_hooks(manager, plugin)
            except (pluggy.PluginValidationError, ValueError) as exc:
                pm.set_aside(ep.name, f"invalid: {_invalid_text(ep.name, exc)}")
                continue
            # Another distribution's entry point of this name loaded after all.
            pm.plugin_errors.pop(ep.name, None)
    for name, plugin in plugins:
        if name not in disabled:
            pm.register(plugin, name)
    for name in disabled:
        if manager.get_plugin(name) is not None:
            manager.unregister(name=name)
        manager.set_blocked(name)
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise _invalid(manager.get_name(exc.plugin) or "?", exc) from exc
    # Sets aside an installed plugin whose kinds cannot be registered; the
    # registry is kept, so a Memory built on these plugins asks only once.
    pm._kinds = pm.register_kinds()
    return pm


def _not_checks(value: Any) -> str | None:
    """Why a ``memors_check_submission`` answer is not a mapping of check
    names to :class:`CheckResult` (``None`` when it is one)."""
    if not isinstance(value, dict):
        return f"returned {type(value).__name__}, not a mapping of checks"
    for name, result in value.items():
        if not isinstance(name, str):
            return f"returned a check named {name!r}, not a string"
        if not isinstance(result, CheckResult):
            return f"returned {type(result).__name__} for check {name!r}, not a CheckResult"
    return None


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _invalid_text(name: str, exc: Exception) -> str:
    # pluggy's messages show the plugin's repr and span lines: name it, one line.
    text = str(exc)
    plugin = getattr(exc, "plugin", None)
    if plugin is not None:
        text = text.replace(repr(plugin), repr(name))
    return " ".join(text.split())


def _invalid(name: str, exc: Exception) -> PluginError:
    return PluginError(f"plugin {name!r} is invalid: {_invalid_text(name, exc)}")


def _check_hooks(manager: pluggy.PluginManager, plugin: Any) -> None:
    """``check_pending`` for one plugin: a hook without a spec is refused."""
    for caller in manager.get_hookcallers(plugin) or ():
        if caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin and not impl.optionalhook:
                raise pluggy.PluginValidationError(plugin, f"unknown hook {caller.name!r}")
