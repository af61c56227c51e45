"""``ctx.store`` as a plugin sees it: :class:`PluginStore`.

The engine hands a kind, a check and a lint rule its open transaction, a
:class:`memors_core.storage.api.Tx`; a plugin is typed against this
narrower protocol, the repositories and methods kinds may use (what the
built-in kinds, core's own checks and lint rules, the example plugin and
the tutorial call), and nothing the engine keeps to itself (ingest, the
work queue's bookkeeping, purge, export, counters). Every method here is
the storage protocol's own, with the same signature (a test holds them
equal, so every ``Tx`` is a ``PluginStore``) and its docstring, copied
from :mod:`memors_core.storage.api` when this module is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from memors_core.domain.rows import (
    Document,
    DocumentVersion,
    Entity,
    Fact,
    IdPair,
    Item,
    MergeCandidate,
    NeedsPage,
    Opened,
    OpenKey,
    Page,
    PageSentence,
    Passage,
    PassageShingles,
    StalePage,
    Tombstone,
)
from memors_core.storage import api

__all__ = ["PluginStore"]


class PluginPassages(Protocol):
    """What a plugin may call of ``ctx.store.passages`` (:class:`~memors_core.storage.api.Passages`)."""

    def head(self) -> int: ...

    def by_ids(self, ids: Iterable[str]) -> list[Passage]: ...

    def live_shingles(
        self,
        namespace: str,
        after: int = 0,
        seqs: Iterable[int] | None = None,
        ids: Iterable[str] | None = None,
    ) -> Iterator[PassageShingles]: ...

    def live_count(self, namespace: str) -> int: ...

    def live(self, namespace: str) -> Iterator[Passage]: ...

    def profiles(self, ids: Sequence[str]) -> dict[str, str]: ...


class PluginEntities(Protocol):
    """What a plugin may call of ``ctx.store.entities`` (:class:`~memors_core.storage.api.Entities`)."""

    def find(self, name: str, namespace: str) -> str | None: ...

    def resolve(self, name_or_address: str, namespace: str) -> str: ...

    def require(self, ident: str) -> Entity: ...

    def get_many(self, ids: Iterable[str]) -> dict[str, Entity]: ...

    def aliases(self, canonical: str) -> list[str]: ...

    def aliases_of(self, entities: Iterable[Entity]) -> dict[str, list[str]]: ...

    def add_alias(
        self, entity: str, namespace: str, alias: str, correction: int | None = None
    ) -> bool: ...

    def rename(self, entity: str, namespace: str, name: str, correction: int) -> None: ...

    def merged_ids(self, canonical: str) -> list[str]: ...

    def live_passages(self, canonical: str) -> list[Passage]: ...

    def live_passages_of(self, canonicals: Iterable[str]) -> dict[str, list[Passage]]: ...

    def needing_page(
        self, namespace: str, min_passages: int, only: Iterable[str] | None = None
    ) -> list[NeedsPage]: ...

    def orphans(self, namespace: str) -> list[str]: ...

    def merge(self, survivor: str, absorbed: str, namespace: str) -> None: ...

    def same_name_pairs(
        self, namespace: str, only: Iterable[str] | None = None
    ) -> list[IdPair]: ...


class PluginFacts(Protocol):
    """What a plugin may call of ``ctx.store.facts`` (:class:`~memors_core.storage.api.Facts`)."""

    def record(
        self,
        namespace: str,
        subject: str,
        predicate: str,
        value: str,
        valid_from: str | None = None,
        valid_to: str | None = None,
        source: str | None = None,
    ) -> str: ...

    def copy(self, ident: str, valid_from: str | None, valid_to: str | None, at: str) -> str: ...

    def get(self, ident: str, namespace: str | None = None) -> Fact | None: ...

    def by_ids(self, ids: Iterable[str]) -> list[Fact]: ...

    def of_entity(self, canonical: str) -> list[Fact]: ...

    def of_entities(self, canonicals: Iterable[str]) -> dict[str, list[Fact]]: ...

    def live(self, namespace: str) -> list[Fact]: ...

    def conflicting(self, namespace: str, only: Iterable[str] | None = None) -> list[IdPair]: ...

    def disagree(self, a: str, b: str) -> bool: ...

    def expired(self, namespace: str, now_ts: str, *, history: bool = True) -> list[Fact]: ...


class PluginPages(Protocol):
    """What a plugin may call of ``ctx.store.pages`` (:class:`~memors_core.storage.api.Pages`)."""

    def current(self, canonical: str) -> Page | None: ...

    def current_of(self, canonicals: Iterable[str]) -> dict[str, Page]: ...

    def get(self, ident: str, namespace: str | None = None) -> Page | None: ...

    def last_written(self, canonical: str) -> str | None: ...

    def last_written_of(self, canonicals: Iterable[str]) -> dict[str, str]: ...

    def write(
        self,
        namespace: str,
        canonical: str,
        title: str,
        content: str,
        cites: list[str],
        previous: Page | None,
        item: int | None,
        flags: dict[str, Any],
        *,
        sentences: Sequence[tuple[Any, ...]] = (),
        facts: Sequence[str] = (),
    ) -> str: ...

    def flagged(self, namespace: str) -> list[Page]: ...

    def sentences(self, page: str) -> list[PageSentence]: ...

    def mark_stale(self, page: str, cause: str, target: str | None = None) -> bool: ...

    def live(self, namespace: str, only: Iterable[str] | None = None) -> list[Page]: ...

    def is_stale(self, page: str) -> bool: ...

    def changes(self, page: Page) -> list[dict[str, str]]: ...

    def stale(self, namespace: str, only: Iterable[str] | None = None) -> list[StalePage]: ...


class PluginTombstones(Protocol):
    """What a plugin may call of ``ctx.store.tombstones`` (:class:`~memors_core.storage.api.Tombstones`)."""

    def head(self) -> int: ...

    def is_live(self, ident: str) -> bool: ...

    def add(
        self,
        namespace: str,
        kind: str,
        ident: str,
        state: str,
        reason: str | None = None,
        item: int | None = None,
        at: str | None = None,
    ) -> bool: ...

    def since(self, namespace: str, after: int) -> list[Tombstone]: ...


class PluginMergeCandidates(Protocol):
    """What a plugin may call of ``ctx.store.merges`` (:class:`~memors_core.storage.api.MergeCandidates`)."""

    def open(self, namespace: str, first: str, second: str, origin: str) -> Opened: ...

    def get(self, ident: int) -> MergeCandidate | None: ...

    def set_status(self, ident: int, status: str) -> None: ...

    def in_namespace(self, namespace: str, status: str | None = None) -> list[MergeCandidate]: ...


class PluginItems(Protocol):
    """What a plugin may call of ``ctx.store.items`` (:class:`~memors_core.storage.api.Items`)."""

    def get(self, ident: int, namespace: str) -> Item | None: ...

    def list(
        self,
        namespace: str,
        kind: str | None = None,
        status: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Item]: ...

    def open_keys(self, namespace: str, kind: str) -> dict[str, OpenKey]: ...

    def last_for_key(self, namespace: str, kind: str, key: str) -> Item | None: ...


class PluginCorrections(Protocol):
    """What a plugin may call of ``ctx.store.corrections`` (:class:`~memors_core.storage.api.Corrections`)."""

    def record(self, namespace: str, action: str, target: str, detail: dict[str, Any]) -> int: ...


class PluginDocuments(Protocol):
    """What a plugin may call of ``ctx.store.documents`` (:class:`~memors_core.storage.api.Documents`)."""

    def get(self, ident: str, namespace: str) -> Document | None: ...

    def latest_version(self, document: str) -> DocumentVersion: ...


class PluginStore(Protocol):
    """The typed store a plugin gets (``ctx.store``, ``context.store``): the
    repositories and methods a kind, a check or a lint rule may use, each
    inside the engine's transaction. (Read-only properties: a protocol's
    plain attributes would have to match ``Tx``'s types exactly.)"""

    @property
    def documents(self) -> PluginDocuments: ...

    @property
    def passages(self) -> PluginPassages: ...

    @property
    def entities(self) -> PluginEntities: ...

    @property
    def facts(self) -> PluginFacts: ...

    @property
    def pages(self) -> PluginPages: ...

    @property
    def tombstones(self) -> PluginTombstones: ...

    @property
    def merges(self) -> PluginMergeCandidates: ...

    @property
    def items(self) -> PluginItems: ...

    @property
    def corrections(self) -> PluginCorrections: ...

    @property
    def engine(self) -> str:
        """The engine's name (``"sqlite"``, ``"postgres"``), as :meth:`native`
        and :meth:`memors_core.plugins.Kind.migrations` are asked for it."""

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None: ...

    def together(self, *reads: Callable[[], Any]) -> list[Any]: ...

    def native(self, engine: str) -> Any: ...


#: Each protocol here -> the storage protocol whose methods it narrows.
NARROWS: dict[type, type] = {
    PluginPassages: api.Passages,
    PluginEntities: api.Entities,
    PluginFacts: api.Facts,
    PluginPages: api.Pages,
    PluginTombstones: api.Tombstones,
    PluginMergeCandidates: api.MergeCandidates,
    PluginItems: api.Items,
    PluginCorrections: api.Corrections,
    PluginDocuments: api.Documents,
    PluginStore: api.Tx,
}


def repositories() -> dict[str, type]:
    """``PluginStore``'s repositories: attribute name -> protocol, in order."""
    found = {
        name: globals().get(member.fget.__annotations__["return"])
        for name, member in vars(PluginStore).items()
        if isinstance(member, property)
    }
    return {name: proto for name, proto in found.items() if proto in NARROWS}


def _share_docstrings() -> None:
    """One text per method: the storage protocol's docstring is this one's."""
    for narrow, full in NARROWS.items():
        for name, fn in vars(narrow).items():
            if inspect.isfunction(fn) and not name.startswith("_"):
                fn.__doc__ = inspect.getdoc(getattr(full, name))


_share_docstrings()
