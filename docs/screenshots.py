"""Screenshots of the web view for the docs: `make screenshots`.

Builds a small demo store in a temporary directory through the library
(notes on Raft, etcd and Paxos; entities, facts of which one is superseded,
a merge candidate, one page written through ``Memory.submit``), starts
``memors-mcp serve --http`` on it (127.0.0.1, a free port) and saves PNGs
1200 px wide of the main views to docs/images/ with headless Chromium.

It drives Debian's Chromium (``apt-get install chromium``) through
Playwright (the ``dev`` extra); it never downloads a browser.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from memors_core import Memory
from memors_core.testing.server import ServerProcess
from memors_core.wire import to_json

HERE = Path(__file__).resolve().parent
WIDTH = 1200

DOCUMENTS: list[tuple[str, str, list[str]]] = [
    (
        "Raft paper notes",
        "Raft is a consensus algorithm for managing a replicated log.\n\n"
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford University.\n\n"
        "The Raft paper was published in 2014.",
        ["Raft"],
    ),
    (
        "Leader election in Raft",
        "Raft elects a leader with randomized election timeouts.\n\n"
        "A Raft follower that hears no heartbeat becomes a candidate and asks the others "
        "for votes.",
        ["Raft"],
    ),
    (
        "etcd overview",
        "etcd is a distributed key-value store that replicates its data with Raft.\n\n"
        "Kubernetes keeps its cluster state in etcd.",
        ["etcd", "Raft", "Kubernetes"],
    ),
    (
        "etcd history",
        "etcd was started at CoreOS in 2013.\n\n"
        "CoreOS maintained etcd until the project joined the CNCF in 2018; "
        "the CNCF maintains it since.\n\n"
        "etcd is released under the Apache-2.0 license.",
        ["etcd"],
    ),
    (
        "Paxos",
        "Paxos was described by Leslie Lamport.\n\n"
        "Raft was designed to be easier to understand than Paxos.",
        ["Paxos", "Raft"],
    ),
    (
        "Consensus reading list",
        "The Paxos algorithm reaches agreement among unreliable processes.",
        ["Paxos algorithm"],
    ),
]

#: The Raft page: each sentence cites the payload's passages by number.
RAFT_PAGE = """# Raft

Raft is a consensus algorithm for managing a replicated log [{log}].
Raft was designed by Diego Ongaro and John Ousterhout at Stanford University [{designed}].
The Raft paper was published in 2014 [{published}].

## Leader election

Raft elects a leader with randomized election timeouts [{timeouts}].
A Raft follower that hears no heartbeat becomes a candidate and asks the others for votes [{votes}].

Raft was designed to be easier to understand than Paxos [{paxos}].
"""

#: A first try at the etcd page, with a year its sources do not give.
ETCD_DRAFT = """# etcd

etcd is a distributed key-value store that replicates its data with Raft [{raft}].
Kubernetes keeps its cluster state in etcd [{kubernetes}].
etcd was started at CoreOS in 2015 [{coreos}].
CoreOS maintained etcd until the project joined the CNCF in 2018; the CNCF maintains it since [{cncf}].
etcd is released under the Apache-2.0 license [{license}].
"""


def build(address: Path) -> dict[str, Any]:
    """Fill the demo store; return the addresses the screenshots visit."""
    memory = Memory.open(address)
    try:
        for title, text, entities in DOCUMENTS:
            memory.remember(text, title=title, entities=entities)
        memory.record_fact("Raft", "published", "2014", valid_from="2014-01-01")
        memory.record_fact(
            "etcd", "maintained by", "CoreOS", valid_from="2013-06-01", valid_to="2018-12-11"
        )
        memory.record_fact("etcd", "maintained by", "CNCF", valid_from="2018-12-11")
        memory.record_fact("etcd", "license", "Apache-2.0", valid_from="2013-06-01")
        memory.record_fact("etcd", "license", "MIT", valid_from="2013-06-01")  # a mistake
        memory.propose_merge(["Paxos", "Paxos algorithm"])

        items = to_json(memory.compact())["items"]
        # Settle the license conflict: MIT becomes superseded.
        for item in items:
            if item["kind"] == "conflict":
                keep = [f for f in item["payload"]["facts"] if f["value"] == "Apache-2.0"]
                if keep:
                    memory.submit(item["id"], {"keep": keep[0]["address"]})

        raft = _page_item(items, "Raft")
        refs = _refs(
            raft,
            "managing a replicated log",
            "Diego Ongaro",
            "published in 2014",
            "randomized election timeouts",
            "asks the others",
            "easier to understand",
        )
        content = RAFT_PAGE.format(
            log=refs["managing a replicated log"],
            designed=refs["Diego Ongaro"],
            published=refs["published in 2014"],
            timeouts=refs["randomized election timeouts"],
            votes=refs["asks the others"],
            paxos=refs["easier to understand"],
        )
        report = memory.submit(raft["id"], content=content, title="Raft")
        if not report.stored:
            raise SystemExit(f"the Raft page was refused: {to_json(report)}")

        items = to_json(memory.compact())["items"]  # refreshed after the page
        etcd = _page_item(items, "etcd")
        refs = _refs(
            etcd, "replicates its data", "cluster state", "CoreOS in", "joined the CNCF", "Apache"
        )
        draft = ETCD_DRAFT.format(
            raft=refs["replicates its data"],
            kubernetes=refs["cluster state"],
            coreos=refs["CoreOS in"],
            cncf=refs["joined the CNCF"],
            license=refs["Apache"],
        )
        merge = next(i for i in items if i["kind"] == "merge")
        return {
            "raft_page": report.address,
            "etcd": etcd["payload"]["entity"]["address"],
            "etcd_item": etcd["id"],
            "etcd_draft": draft,
            "merge_item": merge["id"],
        }
    finally:
        memory.close()


def _page_item(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for item in items:
        if item["kind"] == "page" and item["payload"]["entity"]["name"] == name:
            return item
    raise SystemExit(f"no page item for {name}: {[i['kind'] for i in items]}")


def _refs(item: dict[str, Any], *phrases: str) -> dict[str, int]:
    """The number of the payload passage holding each phrase (as the page cites it)."""
    out = {}
    for phrase in phrases:
        found = [p["ref"] for p in item["payload"]["passages"] if phrase in p["text"]]
        if not found:
            raise SystemExit(f"no passage of item {item['id']} says {phrase!r}")
        out[phrase] = found[0]
    return out


def shoot(base: str, found: dict[str, Any], out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit(
            "no `chromium` on PATH: install Debian's (apt-get install chromium); "
            "this script never downloads a browser"
        )
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    saved: list[Path] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=args)
        context = browser.new_context(
            base_url=base, viewport={"width": WIDTH, "height": 900}, device_scale_factor=1
        )
        page = context.new_page()

        def save(name: str, full_page: bool = True) -> None:
            path = out / name
            page.screenshot(path=str(path), full_page=full_page)
            saved.append(path)

        def path_of(address: str) -> str:
            kind, ident = address.removeprefix("memo://").split("/", 1)
            return f"/ns/default/{kind}/{ident}"

        page.goto("/ns/default/")
        save("web-namespace.png")

        page.goto("/ns/default/search?q=raft+leader&granularity=all")
        save("web-search.png")

        page.goto(path_of(found["raft_page"]))
        page.locator("sup.cites a.cite").nth(1).hover()
        page.locator(".preview-pop").wait_for()
        save("web-page.png", full_page=False)
        page.mouse.move(0, 0)

        page.goto(path_of(found["etcd"]))
        save("web-entity.png")

        page.goto("/ns/default/queue")
        save("web-queue.png")

        page.goto("/ns/default/documents")
        save("web-documents.png")

        page.goto(f"/ns/default/item/{found['etcd_item']}")
        form = page.locator("form.page-form")
        form.locator("textarea[name=content]").fill(found["etcd_draft"])
        form.get_by_role("button", name="Dry run").click()
        page.locator("section.report .check.flagged").first.wait_for()
        save("web-item-page.png")

        browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "images", help="where the PNGs go")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memors-screenshots-") as tmp:
        db = Path(tmp) / "memors.db"
        found = build(db)
        server = ServerProcess(db)
        try:
            for path in shoot(server.base, found, options.out):
                print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
