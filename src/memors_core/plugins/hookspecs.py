"""Every hook memors calls, in one module.

Plugins implement these with ``@memors_core.plugins.hookimpl``. Each docstring is
the reference documentation for its hook (``docs/plugins.md`` is checked
against them by the test suite). Arguments may be added over time, never
removed; an implementation may accept fewer arguments than the spec names.

How the hooks are called: only through
:class:`memors_core.plugins.manager.Plugins`, one method per hook, which
calls every implementation on its own (not as one pluggy call; no hook is
``firstresult``), in pluggy's order (the last registered first, core's
built-in checks and rules last), and decides what a failing one becomes:

=========================  =====================  ==========================================
hook                       ``Plugins`` method     an implementation that raises or misanswers
=========================  =====================  ==========================================
memors_register_kinds      ``register_kinds``     raised (``PluginError``) for a plugin given
                                                  in code; an installed one is set aside
memors_extract_entities    ``extract_entities``   isolated: logged by name, its names skipped
memors_check_submission    ``check_submission``   isolated: a flagged check named after it
memors_lint_rules          ``lint_rules``         isolated: a ``plugin-error`` finding
=========================  =====================  ==========================================

A kind name registered twice is never isolated: the store does not open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from memors_core.domain.model import CheckResult, Finding
    from memors_core.plugins.kinds import CheckContext, KindRegistry, LintContext

hookspec = pluggy.HookspecMarker("memors")
hookimpl = pluggy.HookimplMarker("memors")


@hookspec
def memors_register_kinds(registry: KindRegistry) -> None:
    """Register work-item kinds.

    Called:
        Once when a :class:`memors_core.Memory` is opened (every CLI command,
        the MCP server at start-up, ``Memory.open`` in a program): every
        implementation, each on its own.

    Args:
        registry: a :class:`memors_core.plugins.KindRegistry`; call
            ``registry.add(kind)`` with an instance of each
            :class:`memors_core.plugins.Kind` the plugin provides. A kind whose
            name is already registered is refused with a
            :class:`memors_core.PluginError` naming both plugins.

    Returns:
        Nothing. An installed plugin whose implementation raises, or adds a
        kind without a name, fails to load: it is set aside with none of its
        kinds, named in a warning, and everything else works. A plugin
        passed in code (``temporary_memory(plugins=…)``) raises
        :class:`memors_core.PluginError` naming it instead.
    """


@hookspec
def memors_extract_entities(text: str, namespace: str) -> list[str] | None:
    """Name the entities a passage mentions.

    Called:
        For every new passage when a document is remembered, inside the
        transaction that stores it (keep it fast: no network calls): every
        implementation, each on its own, failures isolated.

    Args:
        text: the passage's text.
        namespace: the namespace the document is remembered in.

    Returns:
        A list of entity names (matched case-insensitively, white space
        folded; new names create entities), or ``None``. The names of all
        implementations are added to those the caller gave and the
        passage's ``[[Wiki Links]]``. An answer that is not a list of
        names (or a name over 200 characters) is skipped with a warning
        naming the plugin; an implementation that raises is logged by name
        and ignored, and the document is still remembered.
    """


@hookspec
def memors_check_submission(
    context: CheckContext, item: Any, resolution: Any, payload: dict[str, Any]
) -> dict[str, CheckResult] | None:
    """Check a submission before it is stored.

    Called:
        On every ``submit`` that is not a skip (``dry_run`` too), after the
        item's kind has validated the resolution and before anything is
        stored, for items of every kind: every implementation, each on its
        own, failures isolated.

    Args:
        context: a :class:`memors_core.plugins.CheckContext` (``store``,
            the typed store, ``namespace``, and ``kind``, the item's kind).
        item: the :class:`memors_core.plugins.Item` being completed.
        resolution: the structured resolution, an instance of the kind's
            ``resolution`` class (page submissions are
            :class:`memors_core.plugins.PageResolution`).
        payload: the item's payload, exactly as it was handed out.

    Returns:
        A mapping of check name to :class:`memors_core.plugins.CheckResult`
        (``passed`` and ``flagged``, a list of JSON objects saying what is
        wrong), or ``None`` when none of the plugin's checks apply. Every
        result appears in the submit report under its name; any flagged one
        refuses the submission unless it is forced (then the flags are
        recorded). An implementation that raises, or returns anything but
        such a mapping, cannot vouch for the submission: it is reported as
        a flagged check named after the plugin, with the error. The built-in
        ``omission``, ``corruption`` and ``substitution`` checks implement this
        hook for page resolutions.
    """


@hookspec
def memors_lint_rules(context: LintContext) -> list[Finding] | None:
    """Report problems in a namespace.

    Called:
        By ``lint`` (CLI, MCP tool and ``Memory.lint``), once per run, with
        the store opened read-only (an implementation cannot write): every
        implementation, each on its own, failures isolated.

    Args:
        context: a :class:`memors_core.plugins.LintContext` (``store``,
            the typed store in a read-only transaction, and ``namespace``).

    Returns:
        A list of :class:`memors_core.plugins.Finding` (``rule``,
        ``address``, ``message``, ``related``), or ``None``. An
        implementation that raises, or returns anything else, is reported
        as a ``plugin-error`` finding at ``plugin:NAME`` with the error;
        the other rules still run. The built-in rules ``contradiction``,
        ``orphan-entity``, ``missing-page``, ``stale-page``,
        ``unverified-page``, ``expired-fact``, ``unfinished-purge`` and ``bad-purge-state``
        implement this hook.
    """
