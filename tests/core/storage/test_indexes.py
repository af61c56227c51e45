"""The queries the views run on every request find their rows by an index,
on both engines, not by reading every row of the table."""

from __future__ import annotations

import pytest

from memors_core import Memory
from memors_core.storage.sql.pages import OF_ITEM
from memors_core.storage.sql.search import BESIDE
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


def test_a_search_finds_its_hits_neighbours_by_id_not_by_the_namespace(memory: Memory) -> None:
    """Lending to neighbours (``Search.passages_beside``) looks each hit up by
    its id; walking the whole namespace for them made a lexical search at
    100,000 passages 20 times slower. PostgreSQL has a query of its own."""
    if test_engine() == "postgres":
        pytest.skip("PostgreSQL's passages_beside is its own query (storage/postgres/search.py)")
    store = memory.store
    with store.read():
        plan = [r[-1] for r in store.all("EXPLAIN QUERY PLAN " + BESIDE, ('["x"]', "default"))]
    outer = [step for step in plan if " s " in f" {step} "]
    assert outer and all("(id=?)" in step for step in outer), plan
