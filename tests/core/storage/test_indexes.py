"""The queries the views run on every request find their rows by an index,
on both engines, not by reading every row of the table."""

from __future__ import annotations

from memors_core import Memory
from memors_core.storage.sql.pages import OF_ITEM
from memors_core.testing import test_engine


def test_the_page_an_item_wrote_is_found_by_its_index(memory: Memory) -> None:
    """The web view links a done page item to the page it wrote
    (``Pages.of_item``): the lookup uses ``pages_item``."""
    store = memory.store
    with store.read():
        if test_engine() == "postgres":
            store.run("SET LOCAL enable_seqscan = off")  # (an empty table is read whole anyway)
            plan = " ".join(r[0] for r in store.all("EXPLAIN " + OF_ITEM, (7, "default")))
        else:
            plan = " ".join(
                r[-1] for r in store.all("EXPLAIN QUERY PLAN " + OF_ITEM, (7, "default"))
            )
    assert "pages_item" in plan, plan
