"""The store the browser tests start from, and what they share (no fixtures here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_clients.harness import ServerProcess
from memors_core import Memory
from memors_core.testing import run_cli
from memors_core.wire import to_json

#: Wide enough that the item view shows payload and form side by side.
VIEWPORT = {"width": 1200, "height": 900}

# The store every browser test starts from.
RAFT_FOUNDED = "Raft is a consensus algorithm designed by Diego Ongaro in 2014."
RAFT_ELECTION = "Raft elects a leader with randomized election timeouts."
RAFT_SCRIPT = "Raft writes <script>alert('passage')</script> into its debug log."
ETCD = (
    "The etcd store keeps cluster state for Kubernetes.",
    "The etcd store replicates its data with Raft.",
    "The etcd store was started at CoreOS in 2013.",
)
PAXOS = "Paxos was described by Leslie Lamport."
#: The Raft page, written through ``Memory.submit``: each sentence cites one passage.
RAFT_PAGE = (
    "# Raft\n\n"
    "Raft is a consensus algorithm designed by Diego Ongaro in 2014 [1]. "
    "Raft elects a leader with randomized election timeouts [2].\n\n"
    "Raft writes <script>alert('page')</script> into its debug log [3].\n"
)


@dataclass
class Site:
    """A running server over a filled store, and the addresses in it."""

    server: ServerProcess
    db: str | Path
    addresses: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.server.base

    def path_of(self, address: str, ns: str = "default") -> str:
        """The web view's path for ``memo://KIND/ID``."""
        kind, ident = address.removeprefix("memo://").split("/", 1)
        return f"/ns/{ns}/{kind}/{ident}"


def build_store(address: str | Path) -> dict[str, Any]:
    """Fill a fresh store through the library: Raft (three passages, one with
    a ``<script>``, and a page citing them), etcd (three passages and an open
    page item), Paxos with a second entity proposed for merging, ZooKeeper with
    two facts in a row. Returns the addresses the tests look for."""
    memory = Memory.open(address)
    try:
        out: dict[str, Any] = {}
        founded = memory.remember(RAFT_FOUNDED, entities=["Raft"], title="Raft notes")
        election = memory.remember(RAFT_ELECTION, entities=["Raft"], title="Raft election")
        script = memory.remember(RAFT_SCRIPT, entities=["Raft"], title="Raft quirks")
        out["raft"] = founded.entities[0]
        out["founded"] = founded.passages[0]
        out["election"] = election.passages[0]
        out["election_doc"] = election.document
        out["script"] = script.passages[0]
        for text in ETCD:
            out["etcd"] = memory.remember(text, entities=["etcd"], title="etcd notes").entities[0]
        paxos = memory.remember(PAXOS, entities=["Paxos", "Paxos algorithm"], title="Paxos notes")
        out["paxos"], out["paxos_algorithm"] = paxos.entities
        memory.propose_merge(["Paxos", "Paxos algorithm"])
        # Two facts one after the other, for the entity view's timeline.
        memory.record_fact(
            "ZooKeeper", "maintained by", "Yahoo", valid_from="2007-01-01", valid_to="2010-11-01"
        )
        memory.record_fact("ZooKeeper", "maintained by", "Apache", valid_from="2010-11-01")
        out["zookeeper"] = memory.entity("ZooKeeper").address
        items = to_json(memory.compact())["items"]
        [raft_item] = [
            i for i in items if i["kind"] == "page" and i["payload"]["entity"]["name"] == "Raft"
        ]
        report = memory.submit(raft_item["id"], content=RAFT_PAGE, title="Raft")
        assert report.stored, report
        out["raft_page"] = report.address
        # The page changed what the other items were built from: refresh them.
        items = to_json(memory.compact())["items"]
        out["items"] = {
            (i["payload"].get("entity") or {}).get("name") or i["kind"]: i["id"] for i in items
        }
        return out
    finally:
        memory.close()  # before the server opens the store


@dataclass
class Watch:
    """What the page did that a person would see as a fault: dialogs, script errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def assert_no_faults(watch: Watch) -> None:
    """Nothing a person would have seen go wrong: no dialog, no script or console error."""
    assert watch.dialogs == [], f"a dialog opened: {watch.dialogs}"
    assert watch.errors == [], "the browser reported:\n" + "\n".join(watch.errors)


def cli_get(site: Site, address: str) -> dict[str, Any]:
    """``memors-mcp get ADDRESS --json`` on the test's store (the server may keep serving)."""
    result = run_cli("get", address, "--json", db=site.db)
    assert result.code == 0, result
    return result.json
