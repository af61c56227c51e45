"""What the engine's components work with: a store, the plugins, the limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from memors_core.plugins.kinds import KindRegistry
    from memors_core.plugins.manager import Plugins
    from memors_core.settings import Limits
    from memors_core.storage.api import Storage


@attrs.frozen
class Services:
    """Handed to compaction and submission by :class:`memors_core.Memory`
    (which is only the public facade over them)."""

    store: Storage
    pm: Plugins
    limits: Limits

    @property
    def kinds(self) -> KindRegistry:
        return self.pm.kinds

    @property
    def plugin_errors(self) -> dict[str, str]:
        """Installed plugins set aside when they failed to load (name -> why)."""
        return self.pm.plugin_errors
