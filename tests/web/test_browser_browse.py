"""Browsing the web view in headless Chromium (issue 31, point 7): the
stale-pages card leads to the stale pages, a finished item leads to the
page it wrote with its resolution wrapped in its column, and a citation's
preview stays on the screen near the window's edges.

Geometry is read from the real layout (bounding boxes, scroll widths), as
the timeline test does; the store is :func:`webstore.build_store`'s.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from webstore import Site, Watch, assert_no_faults

from memors_core import Memory

try:
    from playwright.sync_api import expect
except ImportError:  # the `browser` fixture says why each test skips (or fails under CI)
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.slow


def test_the_stale_card_leads_to_the_stale_page(page: Any, site: Site, watch: Watch) -> None:
    memory = Memory.open(site.db)
    try:  # a passage the Raft page cites is forgotten: the page is stale
        memory.forget(site.addresses["election"], reason="superseded by a better note")
    finally:
        memory.close()
    page.goto("/ns/default/")
    card = page.locator("section.metrics a.metric", has_text="stale pages")
    expect(card.locator(".n")).to_have_text("1")
    card.click()
    expect(page).to_have_url(re.compile(r"/ns/default/pages\?stale=1$"))
    expect(page.locator("h1")).to_have_text(re.compile(r"^Stale pages\s+1$"))
    row = page.locator("table.pages tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator(".badge.stale")).to_be_visible()
    row.get_by_role("link", name="Raft", exact=True).first.click()
    expect(page.locator("h1.page-title")).to_have_text("Raft")
    expect(page.locator("p.kind .badge.stale")).to_be_visible()
    # Every page, sorted and counted, from the top bar.
    page.locator("header.top nav").get_by_role("link", name="Pages").click()
    expect(page.locator("h1")).to_have_text(re.compile(r"^Pages\s+1$"))
    page.locator("header.top nav").get_by_role("link", name="Documents").click()
    expect(page.locator("table.documents tbody tr")).to_have_count(7)
    expect(page.locator("table.documents tbody tr").first).to_contain_text("etcd notes")
    assert_no_faults(watch)


def test_a_done_item_links_its_page_and_wraps_its_resolution(
    page: Any, site: Site, watch: Watch
) -> None:
    page.goto("/ns/default/queue?status=done")
    page.locator("table.queue tbody tr", has_text="page").locator("a").first.click()
    expect(page.locator("p.kind")).to_contain_text("page item")
    resolution = page.locator("pre.resolution")
    expect(resolution).to_contain_text("Raft elects a leader")
    # The resolution's one long JSON line wraps inside its column: nothing
    # to scroll sideways, and the column stays beside the other.
    widths = resolution.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1] + 1, widths
    column = page.locator("section.payload").bounding_box()
    viewport = page.viewport_size
    assert column and column["x"] + column["width"] <= viewport["width"], column
    page.locator("a.produced-page").click()
    expect(page.locator("h1.page-title")).to_have_text("Raft")
    expect(page).to_have_url(re.compile(re.escape(site.path_of(site.addresses["raft_page"]))))
    assert_no_faults(watch)


def test_a_citation_preview_stays_on_screen_near_the_edges(
    page: Any, site: Site, watch: Watch
) -> None:
    width, height = 420, 520
    page.set_viewport_size({"width": width, "height": height})
    page.goto(site.path_of(site.addresses["raft_page"]))
    cites = page.locator("article.page-body a.cite")
    expect(cites).to_have_count(3)
    for n in range(3):
        cite = cites.nth(n)
        # the citation at the very bottom of the window, then at the very top
        for block in ("end", "start"):
            cite.evaluate(f"e => e.scrollIntoView({{block: '{block}', inline: 'nearest'}})")
            cite.hover()
            pop = page.locator(".preview-pop")
            expect(pop).to_be_visible()
            expect(pop.locator(".badge")).to_have_text("live")
            box, at = pop.bounding_box(), cite.bounding_box()
            assert box and at
            where = (n, block, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, where
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, where
            # near its citation: just under it, or just over it
            assert box["y"] >= at["y"] + at["height"] or box["y"] + box["height"] <= at["y"], where
            page.mouse.move(1, 1)
            expect(pop).to_have_count(0)
    assert_no_faults(watch)
