"""What the duplicate kind keeps between scans, as a protocol: one
implementation per engine (:mod:`memors_kinds.duplicate.sqlite_index`), so
the scan itself (:mod:`memors_kinds.duplicate`) knows no engine.

The index holds each scanned passage's *prefix* under the fixed token
order (:func:`memors_kinds.duplicate.join.prefix_piece`), keyed by token
and set size, so that a new passage finds every passage it can reach
Jaccard >= 0.75 with by a few range look-ups; the clusters of the last
scan (passage id -> cluster key, the cluster's first member); and, per
namespace, the passage clock up to which it is indexed. Passages are named
by their ``seq``; a forgotten passage stays indexed (the scan reads only
live ones), a purged one is erased. It also keeps which passages each
settled item decided on (passage id -> item id), so that what one decision
released is not asked again; a full scan rebuilds it from the items.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

#: ``(seq, size, prefix bytes)`` of one passage, as
#: :func:`memors_kinds.duplicate.join.prefix_piece` gives size and bytes.
Prefix = tuple[int, int, bytes]


class PrefixIndex(Protocol):
    def indexed(self, namespace: str) -> int | None:
        """The passage clock up to which ``namespace`` is indexed; None if
        it was never scanned (the next scan is a full one)."""

    def set_indexed(self, namespace: str, seq: int) -> None: ...

    def add(self, prefixes: Sequence[Prefix], *, recent: bool) -> None:
        """Index passages. ``recent``: the few of an incremental scan (the
        engine may keep them apart until :meth:`fold`); else a full scan's,
        in batches of up to 100,000."""

    def fold(self, head: int, *, force: bool) -> None:
        """Merge what incremental scans added into the main index: always
        when ``force`` (a full scan starts), else when the engine finds it
        due. ``head`` is the passage clock now."""

    def advance(self, namespace: str, head: int) -> None:
        """An incremental scan's end: :meth:`set_indexed` to ``head``, then
        :meth:`fold` if due (in one round trip where the engine can)."""

    def candidates(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        """For each passage given (indexed already), the other indexed
        passages that may reach the threshold with it: never one short of
        the truth, so exact verification afterwards finds every pair."""

    def add_and_find(self, prefixes: Sequence[Prefix]) -> dict[int, list[int]]:
        """:meth:`add` an incremental scan's passages (``recent``), then their
        :meth:`candidates` (so they find each other): in one round trip
        where the engine can send both at once."""

    def clusters_holding(
        self, namespace: str, passages: Iterable[str]
    ) -> tuple[set[str], set[str]]:
        """The keys of the remembered clusters holding any of ``passages``,
        and every member of those clusters (one look-up)."""

    def forget_clusters(self, namespace: str, clusters: Iterable[str] | None = None) -> None:
        """Drop those remembered clusters (None: every one of ``namespace``)."""

    def remember_clusters(self, namespace: str, clusters: Iterable[Sequence[str]]) -> None:
        """Remember clusters, each given by its member ids (its key: the first)."""

    def erase(self, passages: Sequence[tuple[int, str]]) -> None:
        """Erase everything kept of these ``(seq, id)`` passages (purge)."""

    def settle(self, namespace: str, item: int, passages: Iterable[str]) -> None:
        """Remember that ``item`` settled these passages (its kept and released members)."""

    def settled(self, namespace: str, passages: Iterable[str]) -> dict[str, set[int]]:
        """For each of ``passages`` that a decision settled, the items that settled it."""

    def forget_settled(self, namespace: str) -> None:
        """Drop every settlement of ``namespace`` (a full scan rebuilds them)."""
