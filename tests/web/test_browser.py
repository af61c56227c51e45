"""The web view as a person uses it, in headless Chromium against a real server.

Each test starts from the store :func:`webstore.build_store` fills (through the
library), clicks and types in a real browser, and where the store changes,
checks the store afterwards through the real CLI.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from webstore import ETCD, RAFT_ELECTION, RAFT_SCRIPT, Site, Watch, assert_no_faults, cli_get

try:
    from playwright.sync_api import expect
except ImportError:  # the `browser` fixture says why each test skips (or fails under CI)
    expect = None  # type: ignore[assignment]

pytestmark = pytest.mark.slow


def open_item(page: Any, kind: str, summary: str) -> None:
    """From the namespace home: Queue, the kind's tab, the row whose summary says ``summary``."""
    page.goto("/ns/default/")
    page.locator("header.top nav").get_by_role("link", name="Queue").click()
    page.locator("nav.tabs[aria-label=kinds] a", has_text=kind).click()
    row = page.locator("table.queue tbody tr", has_text=summary)
    expect(row).to_have_count(1)
    row.locator("a").first.click()
    expect(page.locator("p.kind")).to_contain_text(f"{kind} item")


def test_namespace_home_search_and_a_citation_to_its_passage(
    page: Any, site: Site, watch: Watch
) -> None:
    page.goto("/")
    page.locator("main table").get_by_role("link", name="default", exact=True).click()
    expect(page).to_have_url(re.compile(r"/ns/default/$"))
    expect(page.locator("h1")).to_have_text("default")

    def metric(label: str) -> Any:
        return page.locator("section.metrics .metric").filter(
            has=page.locator(".l", has_text=re.compile(f"^{label}$"))
        )

    expect(metric("pages").locator(".n")).to_have_text("1")
    expect(metric("open items").locator(".n")).to_have_text("2")
    expect(metric("open items").locator(".sub")).to_contain_text("merge 1")
    for name in ("Raft", "etcd", "Paxos"):
        expect(
            page.locator("table.entities").get_by_role("link", name=name, exact=True)
        ).to_be_visible()

    # Search from the big box: the passage is the hit, and it opens.
    box = page.locator("main form.search.big")
    box.locator("input[name=q]").fill("randomized election timeouts")
    box.locator("select[name=granularity]").select_option("passage")
    box.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"/ns/default/search\?q=randomized"))
    hits = page.locator("ol.results > li")
    expect(hits.first).to_contain_text(RAFT_ELECTION)
    hits.first.locator("a").first.click()
    expect(page.locator("blockquote.passage-text")).to_have_text(RAFT_ELECTION)

    # The entity, its page, and one sentence's citation to the passage it came from.
    page.goto("/ns/default/")
    page.locator("table.entities").get_by_role("link", name="Raft", exact=True).click()
    expect(page.locator("h1")).to_have_text("Raft")
    page.locator("a.page-link").click()
    expect(page.locator("h1.page-title")).to_have_text("Raft")
    body = page.locator("article.page-body")
    expect(body).to_contain_text("Raft elects a leader with randomized election timeouts.")
    expect(body.locator("sup.cites a.cite")).to_have_count(3)
    cite = body.locator(f'sup.cites a.cite[data-source="{site.addresses["election"]}"]')
    expect(cite).to_have_text("2")
    cite.click()
    expect(page).to_have_url(re.compile(re.escape(site.path_of(site.addresses["election"])) + "$"))
    expect(page.locator("blockquote.passage-text")).to_have_text(RAFT_ELECTION)
    expect(page.locator("p.kind .badge")).to_have_text("live")
    fields = page.locator("dl.fields")
    expect(fields).to_contain_text(site.addresses["election"])
    document = fields.get_by_role("link", name="Raft election")
    expect(document).to_be_visible()
    document.click()
    expect(page.locator("h1")).to_have_text("Raft election")
    expect(page.locator("ol.passages")).to_contain_text(RAFT_ELECTION)
    assert_no_faults(watch)


def test_hovering_a_citation_previews_its_passage(page: Any, site: Site, watch: Watch) -> None:
    page.goto(site.path_of(site.addresses["raft_page"]))
    cite = page.locator(f'a.cite[data-source="{site.addresses["founded"]}"]')
    cite.hover()
    pop = page.locator(".preview-pop")
    expect(pop).to_be_visible()
    expect(pop).to_contain_text("Raft is a consensus algorithm designed by Diego Ongaro in 2014.")
    expect(pop.locator(".badge")).to_have_text("live")
    expect(pop.get_by_role("link", name="Raft notes")).to_be_visible()
    # Away from the citation, the preview goes; on another, that one's passage shows.
    page.mouse.move(5, 5)
    expect(pop).to_have_count(0)
    page.locator(f'a.cite[data-source="{site.addresses["election"]}"]').hover()
    expect(pop).to_contain_text(RAFT_ELECTION)
    page.keyboard.press("Escape")
    expect(pop).to_have_count(0)
    assert_no_faults(watch)


def test_accepting_a_merge_in_the_browser_merges_the_entities(
    page: Any, site: Site, watch: Watch
) -> None:
    open_item(page, "merge", "Paxos + Paxos algorithm")
    sides = page.locator(".merge .side h3")
    expect(sides.nth(0)).to_contain_text("keeps its name: Paxos")
    expect(sides.nth(1)).to_contain_text("becomes an alias: Paxos algorithm")
    page.get_by_role("button", name="Accept the merge").click()
    report = page.locator("section.report")
    expect(report.locator("h2")).to_have_text("Stored")
    expect(page.locator("p.kind .badge")).to_have_text("done")
    expect(page.get_by_role("button", name="Accept the merge")).to_have_count(0)

    # The browser shows the merge on the absorbed entity's page...
    page.goto(site.path_of(site.addresses["paxos_algorithm"]))
    expect(page.locator("p.notice")).to_contain_text("Merged into")
    page.locator("p.notice a").click()
    expect(page.locator("h1")).to_have_text("Paxos")
    expect(page.locator("dl.fields")).to_contain_text("Paxos algorithm")

    # ...and the store says so through the CLI.
    absorbed = cli_get(site, site.addresses["paxos_algorithm"])
    assert absorbed["merged_into"] == site.addresses["paxos"]
    kept = cli_get(site, site.addresses["paxos"])
    assert "Paxos algorithm" in kept["aliases"]
    item = cli_get(site, f"memo://item/{site.addresses['items']['merge']}")
    assert item["status"] == "done"
    assert_no_faults(watch)


def test_writing_a_page_in_the_browser_dry_run_fix_submit(
    page: Any, site: Site, watch: Watch
) -> None:
    open_item(page, "page", "etcd (3 passages")
    payload = page.locator("section.payload ol.passages")
    for text in ETCD:
        expect(payload).to_contain_text(text)
    form = page.locator("form.page-form")
    expect(form.locator("input[name=title]")).to_have_value("etcd")
    wrong = (
        "# etcd\n\n"
        "The etcd store keeps cluster state for Kubernetes [1]. "
        "The etcd store replicates its data with Raft [2].\n\n"
        "The etcd store was started at CoreOS in 2015 [3].\n"
    )
    form.locator("textarea[name=content]").fill(wrong)
    form.get_by_role("button", name="Dry run").click()

    report = page.locator("section.report")
    expect(report.locator("h2")).to_have_text("Dry run: flagged")
    flagged = report.locator(".check.flagged")
    expect(flagged.locator("h3")).to_have_text("substitution: 1 flagged")
    expect(flagged.locator(".token")).to_have_text("2015")
    expect(flagged).to_contain_text("The etcd store was started at CoreOS in 2015.")
    expect(report.locator(".check.passed h3", has_text="omission")).to_be_visible()
    # Nothing stored; what was typed is still there to fix.
    expect(page.locator("p.kind .badge")).to_have_text("open")
    textarea = page.locator("form.page-form textarea[name=content]")
    expect(textarea).to_have_value(wrong)

    right = wrong.replace("2015", "2013")
    textarea.fill(right)
    page.locator("form.page-form").get_by_role("button", name="Dry run").click()
    expect(report.locator("h2")).to_have_text("Dry run: every check passed")
    expect(report.locator(".check.flagged")).to_have_count(0)
    expect(report.locator("pre.diff")).to_contain_text(
        "+The etcd store was started at CoreOS in 2013"
    )
    expect(page.locator("p.kind .badge")).to_have_text("open")

    page.locator("form.page-form").get_by_role("button", name="Submit").click()
    expect(report.locator("h2")).to_have_text("Stored")
    expect(page.locator("p.kind .badge")).to_have_text("done")
    stored_at = report.locator("a.stored-at")
    expect(stored_at).to_be_visible()
    stored_at.click()
    expect(page).to_have_url(re.compile(r"/ns/default/page/"))
    expect(page.locator("h1.page-title")).to_have_text("etcd")
    body = page.locator("article.page-body")
    expect(body).to_contain_text("The etcd store was started at CoreOS in 2013.")
    expect(body.locator("sup.cites a.cite")).to_have_count(3)
    address = "memo://page/" + page.url.rsplit("/", 1)[1]

    # The store, through the CLI: the page is live with what was typed, the item done.
    stored = cli_get(site, address)
    assert stored["status"] == "live" and stored["title"] == "etcd"
    # A browser sends a textarea's lines ended by CRLF (the HTML form encoding):
    # the page keeps the author's LF lines, as written through MCP or the CLI.
    assert "\r" not in stored["content"], "the form's CRLF line ends were stored as is"
    assert stored["content"].strip() == right.strip()
    assert stored["entity"] == site.addresses["etcd"]
    assert cli_get(site, site.addresses["etcd"])["page"] == address
    item = cli_get(site, f"memo://item/{site.addresses['items']['etcd']}")
    assert item["status"] == "done"
    assert_no_faults(watch)


def test_script_in_a_passage_and_a_page_is_inert_text(page: Any, site: Site, watch: Watch) -> None:
    # The passage: its text shown as typed, no script element made from it.
    page.goto(site.path_of(site.addresses["script"]))
    expect(page.locator("blockquote.passage-text")).to_have_text(RAFT_SCRIPT)
    expect(page.get_by_text("<script>alert('passage')</script>", exact=False)).to_be_visible()
    assert page.locator("script:not([src])").count() == 0

    # The page: the sentence as text, and its citation's preview too.
    page.goto(site.path_of(site.addresses["raft_page"]))
    body = page.locator("article.page-body")
    expect(body).to_contain_text("Raft writes <script>alert('page')</script> into its debug log.")
    assert body.locator("script").count() == 0
    page.locator(f'a.cite[data-source="{site.addresses["script"]}"]').hover()
    pop = page.locator(".preview-pop")
    expect(pop).to_contain_text(RAFT_SCRIPT)
    assert pop.locator("script").count() == 0
    # The sources list under the page quotes the passage as text as well.
    expect(page.locator("ol.sources")).to_contain_text(RAFT_SCRIPT)
    assert page.locator("script:not([src])").count() == 0

    page.wait_for_load_state("networkidle")
    assert watch.dialogs == []  # (the fixture records, and dismisses, any that opens)
    assert_no_faults(watch)


def test_the_fact_timeline_draws_each_fact_over_its_time(
    page: Any, site: Site, watch: Watch
) -> None:
    page.goto("/ns/default/entities")
    page.get_by_role("link", name="ZooKeeper", exact=True).click()
    expect(page.locator("h1")).to_have_text("ZooKeeper")
    row = page.locator(".timeline .trow", has_text="maintained by")
    yahoo, apache = row.locator(".bar", has_text="Yahoo"), row.locator(".bar", has_text="Apache")
    expect(yahoo).to_be_visible()
    expect(apache).to_be_visible()
    track = row.locator(".track").bounding_box()
    first, second = yahoo.bounding_box(), apache.bounding_box()
    assert track and first and second
    for bar in (first, second):  # inside the track, each of them
        assert (
            track["x"] - 1 <= bar["x"]
            and bar["x"] + bar["width"] <= track["x"] + track["width"] + 1
        )
    # Yahoo (2007 to 2010) comes first, Apache (since 2010) after it, side by side.
    assert first["x"] + first["width"] <= second["x"] + 1, (first, second)
    assert first["width"] > 0.05 * track["width"], (first, track)
    assert_no_faults(watch)


def test_a_page_forced_over_a_flag_shows_the_sentence_unverified(
    page: Any, site: Site, watch: Watch
) -> None:
    """Issue 31: a sentence stored with force over its flags reads as
    unverified, with the reasons, where a real sentence shows its citation."""
    open_item(page, "page", "etcd (3 passages")
    form = page.locator("form.page-form")
    forced = (
        "# etcd\n\n"
        "The etcd store keeps cluster state for Kubernetes [1].\n\n"
        "The etcd store is written in Rust.\n"
    )
    form.locator("textarea[name=content]").fill(forced)
    form.locator("input[name=force]").check()
    form.get_by_role("button", name="Submit").click()
    report = page.locator("section.report")
    expect(report.locator("h2")).to_have_text("Stored")
    report.locator("a.stored-at").click()
    body = page.locator("article.page-body")
    expect(body.locator("sup.cites a.cite")).to_have_count(1)
    mark = body.locator(".unverified")
    expect(mark).to_have_count(1)
    expect(mark).to_be_visible()
    expect(mark.locator(".label")).to_have_text("unverified")
    expect(mark).to_contain_text("substitution: the name 'Rust' is in none of its sources")
    expect(page.locator("p.kind .badge.flagged")).to_have_text("unverified")
    expect(page.locator("ul.unverified-list")).to_contain_text("The etcd store is written in Rust.")
    address = "memo://page/" + page.url.rsplit("/", 1)[1]
    [rust] = [s for s in cli_get(site, address)["sentences"] if s["flags"]]
    assert rust["text"] == "The etcd store is written in Rust." and rust["sources"] == []
    assert_no_faults(watch)
