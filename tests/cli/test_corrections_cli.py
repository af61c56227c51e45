"""People correct memory from the command line, and every correction is
reversible (issue 31, point 4): the survivor of a merge, a rename, a merge
undone, an item reopened, a rejected merge proposed again."""

from __future__ import annotations

from memors_core.testing import passages_about


def _quorum_store(cli) -> dict:
    """Three passages about ``Quorum replication`` with a page, and a one-line
    note naming ``quorum-replication``: the scanner's merge item, first
    ``Quorum replication`` (the older entity)."""
    text = "\n\n".join(passages_about("Quorum replication", 3))
    assert cli("remember", "-", "--uri", "q.md", input=text).code == 0
    assert (
        cli("remember", "-", "--uri", "note.md", input="[[quorum-replication]] in one line.").code
        == 0
    )
    page = next(i for i in cli("compact", "--kinds", "page", "--json").json["items"])
    body = "\n".join(
        p["text"].replace("[[", "").replace("]]", "") for p in page["payload"]["passages"]
    )
    (cli.tmp / "page.md").write_text(body)
    r = cli(
        "submit",
        str(page["id"]),
        "--content-file",
        "page.md",
        "--title",
        "Quorum replication",
        "--json",
    )
    assert r.json["stored"], r
    merge = cli("compact", "--kinds", "merge", "--json").json["items"][0]
    names = [e["name"] for e in merge["payload"]["entities"]]
    assert names == ["Quorum replication", "quorum-replication"]
    return merge


def test_accept_keeps_the_survivor_named_and_the_name_given(cli) -> None:
    merge = _quorum_store(cli)
    first, second = (e["address"] for e in merge["payload"]["entities"])
    r = cli(
        "submit",
        str(merge["id"]),
        "--accept",
        "--survivor",
        "quorum-replication",
        "--name",
        "Quorum Replication",
        "--json",
    )
    assert r.code == 0, r
    assert r.json["survivor"] == second and r.json["name"] == "Quorum Replication"
    shown = cli("entity", "show", "quorum replication", "--json").json
    assert shown["address"] == second and shown["name"] == "Quorum Replication"
    assert "quorum-replication" in shown["aliases"]
    # (the old name differs from the new one only in case: it resolves, as above)
    # The first one's page is the survivor's now, and stale.
    assert cli("compact", "--kinds", "stale", "--json").json["open"] == 1
    # A survivor outside the pair is bad input, and nothing is stored.
    other = _other_merge(cli)
    r = cli("submit", str(other), "--accept", "--survivor", "Quorum Replication")
    assert r.code == 2 and "neither entity of this merge" in r.err and "Traceback" not in r.err
    assert cli("submit", str(other), "--reject", "--name", "X").code == 2
    assert first != second


def _other_merge(cli) -> int:
    cli("remember", "-", "--uri", "paxos.md", input="[[Paxos]] and [[Raft]] agree.")
    r = cli("entity", "propose-merge", "Raft", "Paxos", "--json")
    assert r.json["status"] == "open"
    items = cli("compact", "--kinds", "merge", "--json").json["items"]
    return next(i["id"] for i in items if i["payload"]["candidate"] == r.json["candidate"])


def test_rename_keeps_the_old_name_as_an_alias_and_marks_the_page_stale(cli) -> None:
    _quorum_store(cli)
    r = cli("entity", "rename", "Quorum replication", "Quorum writes", "--json")
    assert r.code == 0, r
    assert r.json["action"] == "rename" and len(r.json["stale"]) == 1
    shown = cli("entity", "show", "Quorum replication", "--json").json  # the old name resolves
    assert shown["name"] == "Quorum writes" and "Quorum replication" in shown["aliases"]
    hits = cli("search", "writes", "--granularity", "entity", "--json").json["results"]
    assert hits and hits[0]["address"] == shown["address"]
    stale = cli("compact", "--kinds", "stale", "--json").json["items"][0]
    assert {"address": shown["address"], "change": "renamed", "text": "Quorum writes"} in (
        stale["payload"]["changes"]
    )
    # Another entity's name is refused; renaming back is the undo.
    r = cli("entity", "rename", "Quorum writes", "quorum-replication")
    assert r.code == 2 and "another entity" in r.err
    assert cli("entity", "rename", "Quorum writes", "Quorum replication").code == 0
    assert cli("entity", "show", "Quorum writes", "--json").json["name"] == "Quorum replication"


def test_undo_a_merge_and_propose_it_again(cli) -> None:
    merge = _quorum_store(cli)
    first, second = (e["address"] for e in merge["payload"]["entities"])
    assert cli("submit", str(merge["id"]), "--accept").code == 0
    assert cli("entity", "show", "quorum-replication", "--json").json["address"] == first
    r = cli("entity", "unmerge", "quorum-replication", "--json")
    assert r.code == 0, r
    assert r.json["address"] == second and r.json["stale"]
    apart = cli("entity", "show", "quorum-replication", "--json").json
    assert apart["address"] == second and len(apart["passages"]) == 1
    kept = cli("entity", "show", "Quorum replication", "--json").json
    assert kept["aliases"] == [] and len(kept["passages"]) == 3
    # Undone twice: nothing to undo.
    r = cli("entity", "unmerge", "quorum-replication")
    assert r.code == 2 and "nothing to undo" in r.err
    # The page that had merged in the other's passages is stale, saying so.
    stale = cli("compact", "--kinds", "stale,merge", "--json").json
    assert [i["kind"] for i in stale["items"]] == ["stale"]  # the scanner does not propose it
    changes = stale["items"][0]["payload"]["changes"]
    assert {"address": second, "change": "separated", "text": "quorum-replication"} in changes
    # Proposed again on purpose: refused without --again, open with it.
    r = cli("entity", "propose-merge", "quorum-replication", "Quorum replication")
    assert r.code == 1 and "--again" in r.err
    r = cli(
        "entity", "propose-merge", "quorum-replication", "Quorum replication", "--again", "--json"
    )
    assert r.code == 0 and r.json["status"] == "open"
    assert [i["kind"] for i in cli("compact", "--kinds", "merge", "--json").json["items"]] == [
        "merge"
    ]


def test_a_rejected_merge_reopens_and_a_skip_comes_back(cli) -> None:
    merge = _quorum_store(cli)
    assert cli("submit", str(merge["id"]), "--reject").code == 0
    r = cli("items", "reopen", str(merge["id"]), "--reason", "they are one", "--json")
    assert r.code == 0, r
    assert r.json["item"] not in (None, merge["id"])
    assert cli("items", "show", str(r.json["item"]), "--json").json["status"] == "open"
    # Reopened once: the new item is the one to reopen.
    r2 = cli("items", "reopen", str(merge["id"]))
    assert r2.code == 2 and f"as item {r.json['item']}" in r2.err
    r3 = cli("submit", str(r.json["item"]), "--skip", "--reason", "later")
    assert r3.code == 0
    r4 = cli("items", "reopen", str(r.json["item"]), "--json")
    assert r4.code == 0 and r4.json["item"] is not None
    assert cli("items", "--status", "open", "--json").json["items"][0]["id"] == r4.json["item"]


def test_reopen_a_settled_conflict_brings_its_facts_back(cli) -> None:
    cli("fact", "add", "Raft", "leader", "n1", "--from", "2024-01-01")
    cli("fact", "add", "Raft", "leader", "n2", "--from", "2024-03-01")
    item = cli("compact", "--kinds", "conflict", "--json").json["items"][0]
    a, b = (f["address"] for f in item["payload"]["facts"])
    assert cli("submit", str(item["id"]), "--keep", a).code == 0
    assert cli("get", b, "--json").json["status"] == "superseded"
    r = cli("items", "reopen", str(item["id"]), "--json")
    assert r.code == 0, r
    again = cli("items", "show", str(r.json["item"]), "--json").json
    assert again["kind"] == "conflict" and again["status"] == "open"
    values = sorted(f["value"] for f in again["payload"]["facts"])
    assert values == ["n1", "n2"]
    assert cli("get", b, "--json").json["status"] == "superseded"  # raw rows unchanged
    # A bounded one: the copy is superseded too, the original comes back.
    c = next(f["address"] for f in again["payload"]["facts"] if f["value"] == "n1")
    assert cli("submit", str(again["id"]), "--bound", c, "--to", "2024-03-01").code == 0
    r = cli("items", "reopen", str(again["id"]), "--json")
    assert r.code == 0, r
    live = cli("fact", "list", "Raft", "--json").json["facts"]
    assert sorted((f["value"], f["valid_to"]) for f in live) == [("n1", None), ("n2", None)]


#: A passage two documents share, about an entity.
SHARED = (
    "[[Raft]] elects a leader by majority vote: each follower grants its vote to the first "
    "candidate whose log is at least as complete as its own, once per term."
)


def _duplicate_store(cli) -> tuple[dict, str]:
    """Two documents holding one passage (the first has another passage
    too), and their duplicate item; the first document's address."""
    first = cli(
        "remember",
        "-",
        "--uri",
        "a.md",
        "--json",
        input=f"{SHARED}\n\n[[Raft]] also replicates a log.",
    ).json["document"]
    assert cli("remember", "-", "--uri", "b.md", input=SHARED).code == 0
    [item] = cli("compact", "--kinds", "duplicate", "--json").json["items"]
    return item, first


def test_reopen_a_kept_duplicate_brings_the_forgotten_passages_back(cli) -> None:
    item, first = _duplicate_store(cli)
    members = {p["document"]: p["address"] for p in item["payload"]["passages"]}
    lost, kept = members[first], next(a for d, a in members.items() if d != first)
    r = cli("submit", str(item["id"]), "--keep", kept, "--json")
    assert r.json["forgotten"] == [lost]
    assert cli("compact", "--kinds", "duplicate", "--json").json["open"] == 0
    r = cli("items", "reopen", str(item["id"]), "--reason", "both are wanted", "--json")
    assert r.code == 0, r
    # A new open item asks about the cluster again: the kept passage and the copy.
    again = cli("items", "show", str(r.json["item"]), "--json").json
    assert again["kind"] == "duplicate" and again["status"] == "open"
    shown = {p["address"] for p in again["payload"]["passages"]}
    assert kept in shown and lost not in shown and len(shown) == 2
    [copy] = shown - {kept}
    # The forgotten row is as it was; the copy is a new row of the same text,
    # document and entity, in a new version of the document.
    assert cli("get", lost, "--json").json["status"] == "forgotten"
    restored = cli("get", copy, "--json").json
    assert restored["status"] == "live" and restored["text"] == SHARED
    assert restored["document"] == first
    doc = cli("get", first, "--json").json
    assert [v["passages"] for v in doc["versions"]] == [2, 2]
    assert cli("items", "show", str(item["id"]), "--json").json["status"] == "done"
    # Recorded, with where each copy came from.
    [audit] = cli("corrections", "--action", "reopen", "--json").json["corrections"]
    assert audit["detail"]["restored_from"] == [{"passage": copy, "restored_from": lost}]
    assert "1 row(s) restored: both are wanted" in audit["summary"]
    # Decided again: keeping the copy forgets the other document's passage.
    r = cli("submit", str(again["id"]), "--keep", copy, "--json")
    assert r.code == 0 and r.json["forgotten"] == [kept]
    # Reopened once: the new item is the one to reopen.
    r = cli("items", "reopen", str(item["id"]))
    assert r.code == 2 and f"as item {again['id']}" in r.err


def test_what_cannot_be_reopened_says_why(cli) -> None:
    _quorum_store(cli)
    done_page = cli("items", "--kind", "page", "--json").json["items"][0]
    r = cli("items", "reopen", str(done_page["id"]))
    assert r.code == 1 and "forget the page" in r.err
    open_item = cli("items", "--status", "open", "--json").json["items"][0]
    r = cli("items", "reopen", str(open_item["id"]))
    assert r.code == 2 and "only a done or skipped item" in r.err
    assert cli("items", "reopen", "999").code == 2


def _entity_hits(cli, query: str) -> list[str]:
    r = cli("search", query, "--granularity", "entity", "--json")
    assert r.code == 0, r
    return [h["address"] for h in r.json["results"]]


def test_search_forgets_the_aliases_an_unmerge_took_back(cli) -> None:
    cli("remember", "-", "--uri", "paxos.md", input="[[Paxos]] and [[Raft]] agree.")
    r = cli("entity", "propose-merge", "Raft", "Paxos", "--json")
    item = next(
        i["id"]
        for i in cli("compact", "--kinds", "merge", "--json").json["items"]
        if i["payload"]["candidate"] == r.json["candidate"]
    )
    assert cli("submit", str(item), "--accept", "--survivor", "Raft").code == 0
    raft = cli("entity", "show", "Raft", "--json").json["address"]
    assert _entity_hits(cli, "Paxos") == [raft]
    paxos = cli("entity", "unmerge", "Paxos", "--json").json["address"]
    # The survivor no longer answers to the name the undo took back.
    assert _entity_hits(cli, "Paxos") == [paxos]
    # A rename: the new name finds the entity, and its facts by it.
    cli("fact", "add", "Raft", "leader", "n1")
    assert cli("entity", "rename", "Raft", "Zab protocol").code == 0
    assert _entity_hits(cli, "Zab") == [raft]
    r = cli("search", "Zab", "--granularity", "fact", "--json")
    assert [h["text"] for h in r.json["results"]] == ["Zab protocol leader n1"]


def test_purge_erases_a_renamed_entity_with_its_names(cli) -> None:
    doc = cli(
        "remember", "-", "--uri", "secret.md", "--json", input="[[Project Nightjar]] ships."
    ).json["document"]
    cli("remember", "-", "--uri", "other.md", input="[[Raft]] elects a leader.")
    assert cli("entity", "rename", "Project Nightjar", "Operation Kestrel").code == 0
    r = cli("purge", doc, "--yes", "--json")
    assert r.code == 0, r
    # The entity went with its only passage, under either of its names.
    assert any(a.startswith("memo://entity/") for a in r.json["erased"]), r.json
    for name in ("Project Nightjar", "Operation Kestrel"):
        assert cli("entity", "show", name).code == 2
    assert _entity_hits(cli, "Kestrel") == []
    # Nothing of its names is left to carry away.
    dumped = cli("export")
    assert dumped.code == 0 and "Raft" in dumped.out
    assert "Kestrel" not in dumped.out and "Nightjar" not in dumped.out


def test_corrections_lists_the_audit(cli) -> None:
    assert cli("corrections").out.strip() == "namespace default: no corrections"
    merge = _quorum_store(cli)
    assert cli("submit", str(merge["id"]), "--accept", "--name", "Quorum writes").code == 0
    cli("entity", "unmerge", "quorum-replication")
    r = cli("corrections", "--json")
    assert r.code == 0, r
    actions = [c["action"] for c in r.json["corrections"]]
    assert actions == ["merge", "rename", "unmerge"]
    lines = cli("corrections").out.splitlines()
    assert "renamed 'Quorum replication' to 'Quorum writes'" in lines[1]
    assert "separated memo://entity/" in lines[2]
    survivor = r.json["corrections"][1]["target"]
    r = cli("corrections", "--action", "rename", "--target", survivor, "--json")
    assert [c["detail"] for c in r.json["corrections"]] == [
        {"from": "Quorum replication", "to": "Quorum writes"}
    ]
    bad = cli("corrections", "--target", "quorum")
    assert bad.code == 2 and "malformed address" in bad.err and "Traceback" not in bad.err
    assert cli("corrections", "--action", "erase").code == 2
