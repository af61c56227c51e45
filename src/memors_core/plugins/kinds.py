"""The contract between the compaction engine and a kind of work item.

A kind is an object with a ``name``, a ``resolution`` attrs class and four
methods; the engine calls them, never the other way round. Built-in kinds
(in ``memors_kinds``) and third-party kinds implement exactly this.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from memors_core.errors import PluginError

if TYPE_CHECKING:
    from memors_core.storage.sqlite.connection import Store

JSON = dict[str, Any]


def fingerprint(*parts: Any) -> str:
    """A stable digest of the inputs an item was built from."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


@attrs.frozen
class Candidate:
    """One item a scanner says should exist.

    ``key`` identifies the item across scans (one open item per key);
    ``fingerprint`` changes whenever its inputs change; ``payload`` is
    called only when the item is created or refreshed.
    """

    key: str
    fingerprint: str
    payload: Callable[[], JSON]


@attrs.frozen
class Item:
    id: int
    namespace: str
    kind: str
    key: str
    status: str
    fingerprint: str
    payload: JSON
    resolution: JSON | None
    created_at: str
    updated_at: str


@attrs.define
class Changes:
    """What changed in a namespace since a kind's last scan.

    ``entities`` holds every entity touched (new or forgotten passages
    mentioning it, facts about it, its pages, stale marks, aliases, merges),
    by its canonical id at the time and now. Passages with a row id above
    ``passage_seq`` are new; tombstones above ``tombstone_seq`` are new.
    """

    entities: set[str]
    passage_seq: int
    tombstone_seq: int


@attrs.define
class KindContext:
    """What a kind gets to work with: the store (inside the engine's
    transaction), the namespace, and the helpers of the memory service.

    For an incremental scan (a kind with ``incremental = True`` that has
    scanned this namespace before, and no ``--full``), ``changes`` says what
    changed; the kind then yields candidates for what it re-examined and
    sets ``scope`` to the keys it re-examined: open items with those keys
    that it did not yield become obsolete, the others stay as they are.
    """

    store: Store
    namespace: str
    ops: Any  # memors_core.storage.sqlite.ops.Operations: shared queries and state changes
    full: bool = True
    #: On a forced submission, the flags the checks raised (check -> flagged).
    flags: dict[str, Any] = attrs.Factory(dict)
    changes: Changes | None = None
    scope: set[str] | None = None
    #: On submit, fields ``validate`` or ``apply`` add to the report (what
    #: the resolution does or did, beyond the stored address).
    report: dict[str, Any] = attrs.Factory(dict)
    #: Set by the engine during a scan: where :meth:`progress` goes.
    on_progress: Callable[[str, int, int | None, str], None] | None = None

    def progress(self, step: str, done: int = 0, total: int | None = None, unit: str = "") -> None:
        """Say how far a long scan has got (``"reading passages"``, 4000 of
        10000 ``"passages"``); shown on the terminal. Cheap: the engine
        passes at most ten a second on, so calling it every few hundred rows
        is fine. ``ctx.progress("items", total=n)`` before yielding ``n``
        candidates lets the engine show items written of ``n``."""
        if self.on_progress is not None:
            self.on_progress(step, done, total, unit)


@attrs.define
class CheckContext:
    store: Store
    namespace: str
    ops: Any
    kind: Kind


@attrs.define
class LintContext:
    store: Store
    namespace: str
    ops: Any


class Kind:
    """Base class for kinds; subclass it and register an instance.

    Attributes:
        name: the kind's name (also its entry-point name in ``memors.kinds``).
        description: one line, shown in ``--help`` and to MCP clients.
        resolution: the attrs class a submission is structured into.
        hint: how a resolution is written (CLI flags or JSON), for errors.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    resolution: ClassVar[type] = object
    #: How a resolution is spelled, shown when a submission does not fit.
    hint: ClassVar[str] = ""
    #: Whether ``scan`` can work from ``ctx.changes`` (see :class:`KindContext`).
    incremental: ClassVar[bool] = False

    def scan(self, ctx: KindContext) -> Iterable[Candidate]:
        """Every item that should be open now in ``ctx.namespace``."""
        raise NotImplementedError

    def current(self, ctx: KindContext, item: Item) -> Candidate | None:
        """The candidate for ``item`` as the store stands now, or None if its
        condition no longer holds. Submit refuses the item when this is None
        or its fingerprint differs from the item's. The default rescans;
        override it with something cheaper when a scan is costly."""
        for cand in self.scan(ctx):
            if cand.key == item.key:
                return cand
        return None

    def validate(self, ctx: KindContext, item: Item, resolution: Any) -> None:
        """Raise :class:`memors_core.errors.BadInput` if ``resolution`` does
        not fit ``item`` (beyond its shape, which the engine checks)."""

    def apply(self, ctx: KindContext, item: Item, resolution: Any) -> str | None:
        """Store the resolution; return the address of what was stored."""
        raise NotImplementedError

    def erase(self, ctx: KindContext, passages: list[tuple[int, str]]) -> None:
        """Forget what the kind derived from passages that are being purged.

        ``passages`` are ``(row id, id)`` pairs, still in the store; called
        inside purge's transaction. A kind that keeps state of its own built
        from passage text (an index, a cache) deletes it here, so no trace
        of the text survives the purge. Raising refuses the purge. The
        default does nothing.
        """


class MalformedKind(PluginError):
    """A plugin registered a kind the engine cannot use (``reason`` says why,
    without the plugin's name)."""

    def __init__(self, plugin: str, reason: str) -> None:
        super().__init__(f"plugin {plugin!r} {reason}")
        self.reason = reason


class KindConflict(PluginError):
    """Two plugins register the same kind name: which is meant cannot be guessed."""


class KindRegistry:
    """Handed to ``memors_register_kinds``; kinds are keyed by name."""

    def __init__(self) -> None:
        self._kinds: dict[str, Kind] = {}
        self._owners: dict[str, str] = {}
        self.current_plugin: str = "?"

    def add(self, kind: Kind) -> None:
        name = getattr(kind, "name", "")
        if not isinstance(name, str) or not name:
            raise MalformedKind(self.current_plugin, "registered a kind without a name")
        if name in self._kinds:
            # Which plugin registers first depends on the order of sys.path: name both.
            owners = sorted({self._owners[name], self.current_plugin})
            if len(owners) == 1:
                raise MalformedKind(owners[0], f"registers the kind {name!r} twice")
            raise KindConflict(
                f"plugins {owners[0]!r} and {owners[1]!r} both register the kind {name!r}: "
                "disable one with MEMORS_DISABLE_PLUGINS"
            )
        self._kinds[name] = kind
        self._owners[name] = self.current_plugin

    def discard_plugin(self, plugin: str) -> None:
        """Drop every kind ``plugin`` registered (it is being set aside)."""
        for name in [n for n, owner in self._owners.items() if owner == plugin]:
            del self._kinds[name], self._owners[name]

    def get(self, name: str) -> Kind | None:
        return self._kinds.get(name)

    def names(self) -> list[str]:
        return sorted(self._kinds)

    def owner(self, name: str) -> str:
        return self._owners.get(name, "?")

    def __iter__(self):
        return iter(self._kinds.values())

    def __contains__(self, name: object) -> bool:
        return name in self._kinds
