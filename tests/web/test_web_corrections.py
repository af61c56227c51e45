"""Corrections in the web view (issue 31, point 4), over plain HTTP against
a real ``serve --http``: the survivor of a merge and its name, a rename, a
merge undone, an item reopened — each a form with its cross-site token,
checked through the library afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_web_http
from test_web_http import item_path, url_path

from memors_core import Memory
from memors_core.testing import passages_about


@pytest.fixture
def serve(store_address):
    """``serve --http`` on this test's store, as in test_web_http."""
    yield from test_web_http.serve.__wrapped__(store_address)


def _fill(store_address: str | Path) -> dict:
    with Memory.open(store_address) as memory:
        memory.remember("\n\n".join(passages_about("Quorum replication", 3)), uri="q.md")
        memory.remember("[[quorum-replication]] in one line.", uri="note.md")
        memory.remember("[[Quorum writes]] <b>bold</b> elsewhere.", uri="w.md")
        merge = memory.compact(kinds=["merge"]).items[0]
        return {"item": merge.id, "entities": [e["address"] for e in merge.payload["entities"]]}


def test_accept_a_merge_with_the_survivor_and_name_chosen(serve, store_address) -> None:
    filled = _fill(store_address)
    second = filled["entities"][1]
    _server, client = serve()
    form = client.get(item_path(filled["item"]))
    assert 'name="survivor"' in form.text and 'name="name"' in form.text
    # A name that is another entity's is refused, one line, nothing stored.
    refused = client.submit(
        item_path(filled["item"]), resolve="accept", survivor=second, name="Quorum writes"
    )
    assert refused.status == 400 and "another entity" in refused.problem()
    done = client.submit(
        item_path(filled["item"]), resolve="accept", survivor=second, name="Quorum Replication"
    )
    assert done.status == 200, done
    with Memory.open(store_address) as memory:
        entity = memory.entity("Quorum replication")
        assert (entity.address, entity.name) == (second, "Quorum Replication")
        assert memory.get(item_path(filled["item"]).replace("/ns/default/", "memo://")).status == (
            "done"
        )


def test_rename_and_undo_a_merge_from_the_entity_page(serve, store_address) -> None:
    filled = _fill(store_address)
    first, second = filled["entities"]
    with Memory.open(store_address) as memory:
        assert memory.submit(filled["item"], accept=True).stored
    server, client = serve()
    page = client.get(url_path(first))
    token = page.csrf()
    # No state change without the form's token.
    stolen = client.post(
        url_path(first) + "/correct", {"correct": "rename", "name": "X"}, {"Origin": server.base}
    )
    assert stolen.status == 403
    renamed = client.post(
        url_path(first) + "/correct",
        {"correct": "rename", "name": "Quorum <writes>", "csrf": token},
        {"Origin": server.base},
    )
    assert renamed.status == 303 and renamed.header("location") == url_path(first)
    shown = client.get(url_path(first))
    assert "<h1>Quorum &lt;writes&gt;</h1>" in shown.text
    assert "Undo this merge" in client.get(url_path(second)).text
    undone = client.post(
        url_path(first) + "/correct",
        {"correct": "unmerge", "entity": second, "csrf": token},
        {"Origin": server.base},
    )
    assert undone.status == 303 and undone.header("location") == url_path(second)
    again = client.post(
        url_path(first) + "/correct",
        {"correct": "unmerge", "entity": second, "csrf": token},
        {"Origin": server.base},
    )
    assert again.status == 400 and "nothing to undo" in again.problem()
    # The namespace page lists them, newest first, each linked to what it was about.
    home = client.get("/ns/default/").text
    listed = home.split('<h2 id="corrections">', 1)[1]
    assert listed.startswith("Corrections <small>3</small>")
    rows = listed.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>")[1:]
    assert [r.split("</td><td>")[2] for r in rows] == ["unmerge", "rename", "merge"]
    assert "to &#39;Quorum &lt;writes&gt;&#39;" in rows[1] and url_path(first) in rows[1]
    with Memory.open(store_address) as memory:
        assert memory.entity("quorum-replication").address == second
        assert memory.entity("Quorum replication").name == "Quorum <writes>"


def test_reopen_a_finished_item(serve, store_address) -> None:
    filled = _fill(store_address)
    with Memory.open(store_address) as memory:
        assert memory.submit(filled["item"], reject=True).stored
    server, client = serve()
    page = client.get(item_path(filled["item"]))
    assert "Reopen it" in page.text
    answer = client.post(
        item_path(filled["item"]),
        {"resolve": "reopen", "reason": "they are one", "csrf": page.csrf()},
        {"Origin": server.base},
    )
    assert answer.status == 303
    new = int(answer.header("location").rsplit("/", 1)[1])
    assert new != filled["item"]
    assert "Accept the merge" in client.get(item_path(new)).text
    with Memory.open(store_address) as memory:
        assert [i.id for i in memory.compact(kinds=["merge"]).items] == [new]


def test_reopen_a_kept_duplicate_from_the_item_page(serve, store_address) -> None:
    shared = (
        "[[Raft]] elects a leader by majority vote: each follower grants its vote to the "
        "first candidate whose log is at least as complete as its own, once per term."
    )
    with Memory.open(store_address) as memory:
        lost = memory.remember(shared, uri="a.md").passages[0]
        kept = memory.remember(shared, uri="b.md").passages[0]
        [item] = memory.compact(kinds=["duplicate"]).items
        assert memory.submit(item.id, keep=[kept]).stored
    server, client = serve()
    page = client.get(item_path(item.id))
    assert "Reopen it" in page.text and "come back as new passages" in page.text
    answer = client.post(
        item_path(item.id),
        {"resolve": "reopen", "reason": "both documents need it", "csrf": page.csrf()},
        {"Origin": server.base},
    )
    assert answer.status == 303
    new = int(answer.header("location").rsplit("/", 1)[1])
    assert "Keep these" in client.get(item_path(new)).text
    with Memory.open(store_address) as memory:
        [again] = memory.compact(kinds=["duplicate"]).items
        members = [p["address"] for p in again.payload["passages"]]
        assert again.id == new and kept in members and lost not in members
        assert memory.get(lost).status == "forgotten"
        [audit] = memory.corrections(action="reopen").corrections
        assert audit.detail["restored_from"][0]["restored_from"] == lost
