"""The web view for people who browse (issue 31, point 7), over plain HTTP
against a real ``serve --http`` process: lists of pages and documents with
counts, sorting and paging; names and titles where there were hash stubs;
``[[…]]`` links in pages; the stale-pages card as a link; refreshing an
item from its view; a finished item's link to the page it wrote.

The client, the fixtures and the checks every HTML answer passes (security
headers, no script but the server's own) are those of ``test_web_http``.
"""

from __future__ import annotations

import re
from typing import Any

import test_web_http
from test_web_http import ESCAPED_SCRIPT, EVIL, item_of, item_path, next_link, url_path

from memors_core import Memory
from memors_core.testing import open_items, passages_about, write_page

serve = test_web_http.serve  # (the fixture: a real `serve --http` on the test's store)


def rows_of(answer: Any, table: str) -> list[str]:
    """The first link's text of each row of ``<table class="list TABLE">``."""
    body = answer.text.split(f'<table class="list {table}">', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr><td><a href=\"[^\"]+\">([^<]*)</a>", body)


def pages_of(memory: Memory, names: list[str]) -> dict[str, str]:
    """A page for each entity, written through one ``compact`` and ``submit``
    each (checks run, ``force`` so none refuses): name -> page address."""
    for name in names:
        memory.remember("\n\n".join(passages_about(name, 3)), title=f"{name} notes")
    out = {}
    for item in open_items(memory, "page"):
        name = item["payload"]["entity"]["name"]
        text = f"{name} copies writes during replication round 0 [1].\n"
        report = memory.submit(item["id"], content=text, title=f"{name} page", force=True)
        assert report.stored, report
        out[name] = report.address
    return out


def test_the_pages_are_listed_with_their_count_sorted_and_paged(memory, serve) -> None:
    names = [f"Service {n:02d}" for n in range(52)] + ["alpha store"]
    made = pages_of(memory, names)
    assert len(made) == 53
    _, client = serve()
    home = client.get("/ns/default/")
    assert '<a class="metric" href="/ns/default/pages"><span class="n">53</span>' in home.text
    assert '<a href="/ns/default/pages">Pages</a>' in home.text  # (in the top bar)

    titles: list[str] = []
    path: str | None = "/ns/default/pages"
    sizes = []
    while path:
        answer = client.get(path if path.startswith("/") else "/ns/default/pages" + path)
        assert answer.status == 200 and "<h1>Pages <small>53</small></h1>" in answer.text, answer
        rows = rows_of(answer, "pages")
        sizes.append(len(rows))
        titles += rows
        path = next_link(answer)
    assert sizes == [50, 3]
    # by title, case aside; each row names its entity, never a hash stub
    assert titles == sorted(titles, key=str.lower) and titles[0] == "alpha store page"
    assert ">Service 07</a></td>" in client.get("/ns/default/pages").text

    written = [f"{name} page" for name in made]  # (in the order they were written)
    assert rows_of(client.get("/ns/default/pages?sort=newest"), "pages") == written[::-1][:50]
    assert rows_of(client.get("/ns/default/pages?sort=oldest"), "pages") == written[:50]
    by_entity = rows_of(client.get("/ns/default/pages?sort=entity"), "pages")
    assert by_entity[0] == "alpha store page"
    # the sort links keep the list's other settings and start from its first row
    second = client.get("/ns/default/pages?stale=1&offset=50")
    assert 'href="?stale=1&amp;sort=newest"' in second.text, second
    bad = client.get("/ns/default/pages?sort=size")
    assert bad.status == 400 and "sort must be one of title, entity, newest, oldest" in (
        bad.problem()
    )


def test_the_stale_pages_card_links_to_the_stale_pages(memory, serve) -> None:
    made = pages_of(memory, ["Raft", "Paxos"])
    [raft_passage] = memory.get(made["Raft"]).sources
    memory.forget(raft_passage, reason="wrong")
    _, client = serve()
    home = client.get("/ns/default/")
    card = re.search(
        r'<a class="metric warn" href="([^"]+)"><span class="n">(\d+)</span>', home.text
    )
    assert card and card.groups() == ("/ns/default/pages?stale=1", "1"), home
    stale = client.get(card.group(1))
    assert stale.status == 200 and "<h1>Stale pages <small>1</small></h1>" in stale.text
    assert rows_of(stale, "pages") == ["Raft page"]
    assert '<span class="badge stale">stale</span>' in stale.text
    assert 'href="/ns/default/queue?kind=stale"' in stale.text
    # every page: both, only Raft's marked stale
    both = client.get("/ns/default/pages")
    assert rows_of(both, "pages") == ["Paxos page", "Raft page"]
    assert both.text.count('<span class="badge stale">stale</span>') == 1
    # the namespaces' table links the counts too
    assert 'href="/ns/default/pages?stale=1">1</a>' in client.get("/").text


def test_the_documents_are_listed_by_title_with_their_passages_and_paged(memory, serve) -> None:
    for n in range(53):
        memory.remember(f"Note {n} about the ledger.\n\nIt has two passages.", title=f"Doc {n:02d}")
    memory.remember("Untitled text kept by its uri.", uri="file:///notes/zz.txt")
    memory.remember(EVIL, title=EVIL)
    gone = memory.remember("Forgotten later.", title="Doc gone")
    memory.forget(gone.document, reason="test")
    _, client = serve()
    first = client.get("/ns/default/documents")
    assert "<h1>Documents <small>55</small></h1>" in first.text, first
    seen: list[str] = []
    path: str | None = "/ns/default/documents"
    while path:
        answer = client.get(path if path.startswith("/") else "/ns/default/documents" + path)
        seen += rows_of(answer, "documents")
        path = next_link(answer)
    assert len(seen) == 55 and "Doc gone" not in seen
    assert seen[0] == "&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x onerror=alert(1)&gt;"
    assert seen[1:4] == ["Doc 00", "Doc 01", "Doc 02"] and seen[-1] == "file:///notes/zz.txt"
    assert ESCAPED_SCRIPT in first.text and EVIL not in first.text
    row = re.search(
        r"<tr><td><a [^>]+>Doc 00</a></td><td></td>\s*<td>1</td><td>(\d+)</td>", first.text
    )
    assert row and row.group(1) == "2", first.text[:3000]
    newest = rows_of(client.get("/ns/default/documents?sort=newest"), "documents")
    assert newest[:2] == [seen[0], "file:///notes/zz.txt"] and newest[-1] == "Doc 05"
    assert client.get("/ns/default/documents?sort=newest&offset=-1").status == 400


def test_entities_and_documents_show_by_name_or_title_not_a_hash_stub(memory, serve) -> None:
    stored = memory.remember("[[Raft]] elects a leader.", title="Raft notes")
    memory.remember("[[Raft algorithm]] elects a leader.", title="Raft algorithm notes")
    memory.propose_merge(["Raft", "Raft algorithm"])
    [merge] = open_items(memory, "merge")
    memory.submit(merge["id"], accept=True)
    [absorbed] = memory.absorbed("Raft")
    _, client = serve()
    entity = client.get(url_path(stored.entities[0]))
    assert f'<a href="{url_path(stored.document)}">Raft notes</a>' in entity.text, entity
    assert "document …" not in entity.text
    merged = client.get(url_path(absorbed.address))
    assert re.search(
        r'Merged into <a href="[^"]+" class="addr" title="[^"]+">Raft</a>', merged.text
    )
    found = client.get("/ns/default/search?q=raft&granularity=entity")
    assert re.search(r'<li><a href="/ns/default/entity/[^"]+">Raft</a>', found.text), found
    assert "entity …" not in found.text


def test_wiki_links_in_a_page_link_to_their_entity(memory, serve) -> None:
    memory.remember("[[etcd]] stores keys.", title="etcd notes")
    content = (
        "Raft keeps its state in a replicated log [1], as [[etcd]] and "
        "[[etcd|the key store]] do; `[[code]]` stays code; [[<b>x</b>]] is text.\n"
    )
    page = write_page(memory, "Raft", content)
    _, client = serve()
    shown = client.get(url_path(page))
    body = shown.text.split('<article class="page-body">', 1)[1].split("</article>", 1)[0]
    links = re.findall(r'<a class="wiki" href="([^"]+)" title="entity: ([^"]+)">([^<]*)</a>', body)
    assert links[:2] == [
        ("/go?ns=default&amp;entity=etcd", "etcd", "etcd"),
        ("/go?ns=default&amp;entity=etcd", "etcd", "the key store"),
    ], body
    assert "<code>[[code]]</code>" in body and "[[" not in body.replace("<code>[[code]]</code>", "")
    assert "<b>x</b>" not in body  # the markup's text stays escaped
    go = client.get("/go?ns=default&entity=etcd")
    assert go.status == 303 and go.header("location") == url_path(memory.entity("etcd").address)
    missing = client.get("/go?ns=default&entity=nobody")
    assert missing.status == 404 and "nobody" in missing.problem()


def test_an_open_item_is_refreshed_from_its_view(memory, serve) -> None:
    memory.remember("\n\n".join(passages_about("Raft", 3)), title="Raft")
    [item] = open_items(memory, "page")
    _, client = serve()
    path = item_path(item)
    form = client.get(path)
    assert "Refresh this item" in form.text
    before = item_of(memory, item).fingerprint
    memory.remember("[[Raft]] compacts its log into snapshots every 10000 entries.")
    assert item_of(memory, item).fingerprint == before  # (nothing rescanned it yet)
    # without the form's token: refused, nothing rescanned
    refused = client.post(path, {"resolve": "refresh"}, {"Origin": client.server.base})
    assert refused.status == 403 and item_of(memory, item).fingerprint == before
    done = client.post(path, {"resolve": "refresh", "csrf": form.csrf()})
    assert done.status == 200, done
    assert "Refreshed: its inputs had changed" in done.text
    after = item_of(memory, item)
    assert after.fingerprint != before and after.status == "open"
    assert f'name="fingerprint" value="{after.fingerprint}"' in done.text
    assert "snapshots every 10000 entries" in done.text  # the payload as it is now
    again = client.post(path, {"resolve": "refresh", "csrf": form.csrf()})
    assert "Refreshed: nothing it was built from had changed." in again.text


def test_a_done_item_links_to_the_page_it_wrote_and_wraps_its_resolution(memory, serve) -> None:
    page = write_page(memory, "Raft", "Raft keeps a log [1]. " + "very long " * 200)
    [done] = [i for i in memory.items("page", "done").items]
    _, client = serve()
    shown = client.get(item_path(done.id))
    assert (
        f'Wrote the page <a href="{url_path(page)}" class="produced-page">Raft</a>' in shown.text
    ), shown
    assert '<pre class="json resolution">' in shown.text
    assert "Refresh this item" not in shown.text  # (only an open item is refreshed)
