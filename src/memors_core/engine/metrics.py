"""Prometheus metrics, read from the store at scrape time.

Gauges are computed from the rows; counters are persisted in the store (in
the same transaction as the change they count), so every figure is right
whichever process did the work, and survives restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from memors_core.domain.counters import PAGES_MARKED_STALE, WORK_ITEMS_TOTAL
from memors_core.engine import vectors
from memors_core.engine.compaction import EVENTS

if TYPE_CHECKING:
    from memors_core.storage.api import Storage


class StoreCollector:
    """A custom collector: every scrape reads the store.

    ``kinds`` are the registered kinds' names: each has samples (zero when
    it has no items), so a dashboard sees a kind before its first item."""

    def __init__(self, storage: Storage, kinds: Iterable[str]) -> None:
        self.storage = storage
        self.kinds = list(kinds)

    def collect(self):
        kinds = self.kinds
        with self.storage.read() as tx:
            # The default namespace always has samples, so a new or empty
            # store's gauges read 0 instead of being absent.
            namespaces = sorted({"default", *tx.namespaces.names()})
            open_counts = tx.items.open_counts()
            counts = tx.pages.counts()
            pages = {ns: counts.get(ns, (0, 0))[0] for ns in namespaces}
            stale = {ns: counts.get(ns, (0, 0))[1] for ns in namespaces}
            read = tx.counters.read_many((WORK_ITEMS_TOTAL, PAGES_MARKED_STALE))
            counters = read[WORK_ITEMS_TOTAL]
            marked = read[PAGES_MARKED_STALE].get(("", ""), 0)
            waiting = None
            if vectors.unwanted(self.storage) is None:  # where this process makes vectors
                waiting = {ns: tx.vectors.missing_count(ns) for ns in namespaces}

        g = GaugeMetricFamily(
            "memors_kb_work_items_open", "Open work items.", labels=["namespace", "kind"]
        )
        for ns in namespaces:
            for kind in sorted(set(kinds) | {k for (n, k) in open_counts if n == ns}):
                g.add_metric([ns, kind], open_counts.get((ns, kind), 0))
        yield g
        g = GaugeMetricFamily("memors_kb_pages", "Live pages.", labels=["namespace"])
        for ns in namespaces:
            g.add_metric([ns], pages[ns])
        yield g
        g = GaugeMetricFamily(
            "memors_kb_pages_stale", "Live pages that are stale.", labels=["namespace"]
        )
        for ns in namespaces:
            g.add_metric([ns], stale[ns])
        yield g
        if waiting is not None:
            g = GaugeMetricFamily(
                "memors_kb_passages_without_vector",
                "Live passages waiting for their vector (made off the write path).",
                labels=["namespace"],
            )
            for ns in namespaces:
                g.add_metric([ns], waiting[ns])
            yield g
        c = CounterMetricFamily(
            "memors_store_work_items", "Work-item events, by kind.", labels=["kind", "event"]
        )
        for kind in sorted(set(kinds) | {k for k, _e in counters}):
            for event in EVENTS:
                c.add_metric([kind, event], counters.get((kind, event), 0))
        yield c
        c = CounterMetricFamily(
            "memors_store_pages_marked_stale", "Pages marked stale when a source changed."
        )
        c.add_metric([], marked)
        yield c


def exposition(storage: Storage, kinds: Iterable[str]) -> str:
    """The Prometheus text exposition of the whole store."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(storage, kinds))
    return generate_latest(registry).decode("utf-8")
