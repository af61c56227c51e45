"""Prometheus metrics, read from the store at scrape time.

Gauges are computed from the rows; counters are persisted in the store (in
the same transaction as the change they count), so every figure is right
whichever process did the work, and survives restarts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from memors_core.engine.compaction import EVENTS
from memors_core.storage.sqlite.ops import PAGES_MARKED_STALE, WORK_ITEMS_TOTAL, live

if TYPE_CHECKING:
    from memors_core.memory import Memory


class StoreCollector:
    """A custom collector: every scrape reads the store."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def collect(self):
        memory, store = self.memory, self.memory.store
        kinds = memory.kinds.names()
        with store.read():
            # The default namespace always has samples, so a new or empty
            # store's gauges read 0 instead of being absent.
            namespaces = sorted({"default", *memory.namespaces()})
            open_counts = {
                (ns, kind): n
                for ns, kind, n in store.all(
                    "SELECT namespace, kind, COUNT(*) FROM work_items WHERE status = 'open' "
                    "GROUP BY namespace, kind"
                )
            }
            live_pages = dict(
                store.all(
                    f"SELECT namespace, COUNT(*) FROM pages pg WHERE {live('pg')} "
                    "GROUP BY namespace"
                )
            )
            pages = {ns: live_pages.get(ns, 0) for ns in namespaces}
            stale_counts = memory.ops.stale_page_counts()
            stale = {ns: stale_counts.get(ns, 0) for ns in namespaces}
            counters = {
                (kind, event): value
                for kind, event, value in store.all(
                    "SELECT kind, event, value FROM counters WHERE name = ?", (WORK_ITEMS_TOTAL,)
                )
            }
            marked = (
                store.scalar(
                    "SELECT value FROM counters WHERE name = ? AND kind = '' AND event = ''",
                    (PAGES_MARKED_STALE,),
                )
                or 0
            )

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


def exposition(memory: Memory) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(memory))
    return generate_latest(registry).decode("utf-8")
