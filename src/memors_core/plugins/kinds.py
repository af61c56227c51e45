"""The contract between the compaction engine and a kind of work item.

A kind is an object with a ``name``, a ``resolution`` attrs class and four
methods; the engine calls them, never the other way round. Built-in kinds
(in ``memors_kinds``) and third-party kinds implement exactly this.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from memors_core.domain.rows import Item, OpenKey, Passage, ScanMark
from memors_core.errors import PluginError
from memors_core.settings import Limits

if TYPE_CHECKING:
    from memors_core.domain.model import Finding
    from memors_core.plugins.store import PluginStore

__all__ = [
    "Candidate",
    "Changes",
    "CheckContext",
    "Item",
    "Kind",
    "KindContext",
    "KindRegistry",
    "LintContext",
    "Scan",
    "fingerprint",
]

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
class Scan:
    """What an incremental scan found, and what it looked at.

    ``candidates`` are the items that should be open among what the kind
    re-examined; ``scope`` holds the keys it re-examined (None: everything).
    Open items with a key in ``scope`` that are not among the candidates
    become obsolete; open items outside it stay as they are. A full scan may
    return a plain iterable of candidates instead: its scope is everything.
    """

    candidates: Iterable[Candidate]
    scope: Collection[str] | None = None

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.candidates)


@attrs.define
class Changes:
    """What changed in a namespace since a kind's last scan.

    ``entities`` holds every entity touched (new or forgotten passages
    mentioning it, facts about it, its pages, stale marks, aliases, merges),
    by its canonical id at the time and now. ``passage_seq`` and
    ``tombstone_seq`` are the passage and tombstone clocks
    (``passages.head()``, ``tombstones.head()``) at the last scan: passages
    and tombstones with a greater ``seq`` are new.
    """

    entities: set[str]
    passage_seq: int
    tombstone_seq: int


@attrs.define
class KindContext:
    """What a kind gets to work with: the typed store (the engine's open
    transaction, as a :class:`memors_core.plugins.PluginStore`), the
    namespace and the limits on input.

    For an incremental scan (a kind with ``incremental = True`` that has
    scanned this namespace before, and no ``--full``), ``changes`` says what
    changed; the kind then returns a :class:`Scan` of the candidates for
    what it re-examined and the keys it re-examined.
    """

    store: PluginStore
    namespace: str
    full: bool = True
    #: The limits on input (``limits.page_bytes``, ...).
    limits: Limits = attrs.Factory(Limits)
    #: On a forced submission, the flags the checks raised (check -> flagged).
    flags: dict[str, Any] = attrs.Factory(dict)
    changes: Changes | None = None
    #: During a scan: the kind's open items in the namespace by key (id and
    #: fingerprint), as the engine read them before calling ``scan``, in its
    #: transaction; read-only. (What ``store.items.open_keys`` would answer,
    #: without asking again.)
    open_keys: Mapping[str, OpenKey] | None = None
    #: During a scan: the clocks it covers (passages, tombstones, the change
    #: log), read when no content write of the namespace was under way, so
    #: that every number at or below them is committed. A kind that keeps a
    #: clock of its own (how far it has read) takes it from here: the clocks
    #: as they read later may pass a number that a write begun since has
    #: drawn and not committed, which the kind would then never read.
    heads: ScanMark | None = None
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
    """What a check gets: the typed store (read it, change nothing), the
    namespace and the kind of the item submitted."""

    store: PluginStore
    namespace: str
    kind: Kind


@attrs.define
class LintContext:
    """What a lint rule reads: the typed store (a read-only transaction) and
    the namespace being linted."""

    store: PluginStore
    namespace: str


class Kind:
    """Base class for kinds; subclass it and register an instance.

    A kind says what the frontends show of it (``description``,
    :meth:`summary`, ``instructions``, ``hint``, ``usage``, :meth:`diff`), so
    the CLI, the MCP server and the executor show a third-party kind exactly
    as they show a built-in one: none of them knows a kind by name.
    """

    #: The kind's name: short, lower case, unique among installed kinds (also
    #: its plugin's entry-point name in ``memors.kinds``).
    name: ClassVar[str] = ""
    #: One line saying what an item of this kind is and what doing it means;
    #: shown to MCP clients in ``compact``'s list of kinds.
    description: ClassVar[str] = ""
    #: The attrs class a submission is structured into.
    resolution: ClassVar[type] = object
    #: What a resolution holds, by its field names as JSON
    #: (``keep = one fact address``): the same for every frontend. The engine
    #: names it when a submission does not fit the ``resolution`` class, and
    #: MCP clients see it with the kind. The command-line spelling is ``usage``.
    hint: ClassVar[str] = ""
    #: How a resolution is spelled on the command line, as the arguments of
    #: ``memors-mcp`` with ``{id}`` for the item's id
    #: (``submit {id} --keep FACT-ADDR``). ``items show`` prints it for an open
    #: item, and the CLI adds it to a submission it refuses as bad input. Empty:
    #: the CLI offers the generic ``submit {id} --set KEY=VALUE...``.
    usage: ClassVar[str] = ""
    #: How an agent completes an item of this kind, in a sentence or two
    #: naming the payload's fields it works from and the resolution's fields it
    #: fills (``keep`` the address of the fact that is right, ...). The MCP
    #: prompt and ``compact`` tool text are built from it. Empty: they say
    #: only the ``description`` and ``hint``.
    instructions: ClassVar[str] = ""
    #: Whether an item's resolution is a page written from its payload: the
    #: payload holds ``entity``, ``passages`` and ``facts`` (and ``page``, the
    #: page it replaces, with ``changes``, when it rewrites one) as the
    #: built-in ``page`` and ``stale`` kinds give them, and the resolution is a
    #: :class:`memors_core.domain.model.PageResolution`. Writers of pages (the
    #: ``--executor ollama`` of ``compact``) take exactly the kinds that say so.
    writes_page: ClassVar[bool] = False
    #: Whether ``scan`` can work from ``ctx.changes`` (see :class:`KindContext`).
    incremental: ClassVar[bool] = False

    def summary(self, payload: JSON) -> str:
        """One line saying what an open item of this kind asks for, from its
        ``payload`` (``Raft (3 passages, 1 facts)``): the CLI's item lines in
        ``compact`` and ``items`` and the MCP ``compact`` text show it. Keep it
        short (the CLI cuts it at 120 characters) and never raise: a payload stored
        by an older version of the kind may lack a field. The default is the
        payload's ``summary`` string when it has one, else ``description``."""
        given = payload.get("summary") if isinstance(payload, dict) else None
        return given if isinstance(given, str) and given.strip() else self.description

    def diff(self, item: Item, resolution: Any) -> str | None:
        """How ``resolution`` (structured, as :meth:`validate` gets it) reads
        against what it replaces, as text for people: the ``diff`` of the
        submit report (a dry run's too). ``""`` when it changes nothing, None
        (the default) when the kind has nothing to show. The ``page`` and
        ``stale`` kinds give the unified diff of the previous page (in the
        payload) and the submitted content. Called before anything is
        stored; it reads only ``item`` and ``resolution``."""
        return None

    def scan(self, ctx: KindContext) -> Scan | Iterable[Candidate]:
        """Every item that should be open now in ``ctx.namespace``; on an
        incremental scan (``ctx.changes`` set), a :class:`Scan` of what it
        re-examined."""
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

    def settles(self, ctx: KindContext, finding: Finding) -> str | None:
        """The key of the item of this kind that would settle the lint
        ``finding`` (``missing-page`` for the ``page`` kind), or None (the
        default) when no item of this kind does. Lint leaves out a finding whose
        item was skipped while its inputs stay as they were (:meth:`current`
        gives the skipped item's fingerprint): the skip acknowledged it. Once
        something it depends on changes, the finding is reported again. Read
        only ``ctx.store``, which is read-only here."""
        return None

    def validate(self, ctx: KindContext, item: Item, resolution: Any) -> None:
        """Raise :class:`memors_core.errors.BadInput` if ``resolution`` does
        not fit ``item`` (beyond its shape, which the engine checks)."""

    def apply(self, ctx: KindContext, item: Item, resolution: Any) -> str | None:
        """Store the resolution; return the address of what was stored."""
        raise NotImplementedError

    def erase(self, ctx: KindContext, passages: list[Passage]) -> None:
        """Forget what the kind derived from passages that are being purged.

        ``passages`` are the :class:`~memors_core.domain.rows.Passage` rows
        (``seq``, ``id``, ...) about to go, still in the store; called inside
        purge's transaction, before any of them is erased. A kind that keeps state of its own built
        from passage text (an index, a cache) deletes it here, so no trace
        of the text survives the purge. Raising refuses the purge. The
        default does nothing.
        """

    def migrations(self, engine: str) -> list[str]:
        """The versioned migrations of the kind's own state (tables of its
        own, such as the duplicate kind's prefix index) on ``engine``
        (``"sqlite"``: each step an SQL script). Step ``n`` takes the state
        from version ``n - 1`` to ``n``: append a step, never edit a shipped
        one. When a store is opened for writing, the steps it has not
        recorded run in order and their version is recorded
        (``kind_schema``), so ``scan`` never creates or checks a table; a
        read-only open migrates nothing. A store whose recorded version is
        above ``len(steps)`` (written by a newer release of the kind) does
        not open. The default: no state of its own."""
        return []


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

    def migrations(self, engine: str) -> dict[str, list[str]]:
        """Kind name -> its :meth:`Kind.migrations` on ``engine``; a kind
        whose answer raises or is not a list of strings raises
        :class:`PluginError` naming it and its plugin."""
        out: dict[str, list[str]] = {}
        for name, kind in self._kinds.items():
            try:
                steps = kind.migrations(engine)
            except Exception as exc:
                raise PluginError(
                    f"kind {name!r} (plugin {self.owner(name)!r}) could not give its "
                    f"migrations: {type(exc).__name__}: {' '.join(str(exc).split())}"
                ) from None
            if not isinstance(steps, list | tuple) or not all(isinstance(s, str) for s in steps):
                raise PluginError(
                    f"kind {name!r} (plugin {self.owner(name)!r}) gave migrations that are "
                    "not a list of strings"
                )
            out[name] = list(steps)
        return out

    def __iter__(self) -> Iterator[Kind]:
        return iter(self._kinds.values())

    def __contains__(self, name: object) -> bool:
        return name in self._kinds
