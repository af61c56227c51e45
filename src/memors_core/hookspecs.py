"""Every hook memors calls, in one module.

Plugins implement these with ``@memors_core.hookimpl``. Each docstring is
the reference documentation for its hook (``docs/plugins.md`` is checked
against them by the test suite). Arguments may be added over time, never
removed; an implementation may accept fewer arguments than the spec names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .kinds import CheckContext, KindRegistry, LintContext
    from .model import CheckResult, Finding

hookspec = pluggy.HookspecMarker("memors")
hookimpl = pluggy.HookimplMarker("memors")


@hookspec
def memors_register_kinds(registry: KindRegistry) -> None:
    """Register work-item kinds.

    Called once when a :class:`memors_core.Memory` is opened, with a
    :class:`memors_core.kinds.KindRegistry`. Call ``registry.add(kind)``
    for each :class:`memors_core.kinds.Kind` the plugin provides. A name
    that is already registered is refused with a :class:`PluginError`
    naming both plugins. Returns nothing.
    """


@hookspec
def memors_extract_entities(text: str, namespace: str) -> list[str] | None:
    """Name the entities a passage mentions.

    Called for every new passage when a document is remembered, with the
    passage's text and namespace. Return a list of entity names (matched
    case-insensitively, white space folded; new names create entities) or
    ``None``. The results of all implementations are combined with the
    names given by the caller and the passage's ``[[Wiki Links]]``.
    """


@hookspec
def memors_check_submission(
    context: CheckContext, item: Any, resolution: Any, payload: dict[str, Any]
) -> dict[str, CheckResult] | None:
    """Check a submission before it is stored.

    Called on every submit that is not a skip, after the kind has validated
    the resolution, with a :class:`memors_core.kinds.CheckContext`, the
    :class:`memors_core.kinds.Item`, the structured resolution (an instance
    of the kind's resolution class) and the item's payload. Return a mapping
    of check name to :class:`memors_core.model.CheckResult` (``passed`` and
    ``flagged``) or ``None`` when the check does not apply. Any flagged
    result refuses the submission unless it is forced. The built-in
    ``omission`` and ``corruption`` checks implement this hook for page
    resolutions.
    """


@hookspec
def memors_lint_rules(context: LintContext) -> list[Finding] | None:
    """Report problems in a namespace.

    Called by ``lint`` with a :class:`memors_core.kinds.LintContext` whose
    store is opened read-only. Return a list of
    :class:`memors_core.model.Finding` (``rule``, ``address``, ``message``,
    ``related``) or ``None``. The built-in rules ``contradiction``,
    ``orphan-entity``, ``missing-page``, ``stale-page`` and ``expired-fact``
    implement this hook.
    """
