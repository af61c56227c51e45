"""The names of the persisted counters (``Tx.counters``): the store counts
events as they commit, and metrics reports them as Prometheus counters."""

from __future__ import annotations

#: Work-item events by kind (``created``, ``refreshed``, ``done``, ``skipped``,
#: ``obsolete``, ``refused``).
WORK_ITEMS_TOTAL = "memors_store_work_items_total"

#: Pages marked stale (each page the first time only).
PAGES_MARKED_STALE = "memors_store_pages_marked_stale_total"
