"""The web view over plain HTTP, against a real ``serve --http`` process.

No browser here: a small client (:class:`Client`) keeps one cookie jar,
follows no redirect and reads the form token out of the HTML, as a person's
browser would. Every store is filled through the library and checked through
the library afterwards; every HTML answer it gets is checked for the
security headers and for script that is not the server's own file.

What it covers (issue 18, points 3 and 6, and pagination): output escaped on
every view, no state change on GET, cross-site request protection, the login
of remote mode, the work-item forms, items of third-party kinds, pages of
long lists, and a URL for every kind of address.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import types
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from http_raw import send_chunked, status_of
from mcp_clients.harness import DUPLICATE, ServerProcess
from memors_core import Memory
from memors_core.plugins.manager import build_plugin_manager
from memors_core.testing import open_items, passages_about, plugin_env, write_page

TOKEN = "correct-horse-battery-staple-0123456789"
EVIL = "<script>alert(1)</script> and <img src=x onerror=alert(1)>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
ESCAPED_IMG = "&lt;img src=x onerror=alert(1)&gt;"
MISSING_UUID = "0190aaaa-aaaa-7aaa-8aaa-aaaaaaaaaaaa"


# --- a client with a cookie jar, and what every HTML answer must carry ---------------------


class Answer:
    """One HTTP answer: ``status``, ``headers`` (all of them), ``text``."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, text: str) -> None:
        self.status = status
        self.headers = headers
        self.text = text

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    def cookies(self) -> dict[str, str]:
        """The cookies this answer sets: name -> the whole ``Set-Cookie`` line."""
        out = {}
        for line in self.headers.get_all("set-cookie") or []:
            out[line.split("=", 1)[0].strip()] = line
        return out

    @property
    def html(self) -> bool:
        return self.header("content-type").startswith("text/html")

    def problem(self) -> str:
        """The one-line message an error page or a refused form shows."""
        m = re.search(r'<p class="problem" role="alert">(.*?)</p>', self.text, re.S)
        assert m, f"no problem message in the page ({self.status}): {self.text[:3000]}"
        return m.group(1)

    def csrf(self) -> str:
        m = re.search(r'name="csrf" value="([^"]+)"', self.text)
        assert m, "no cross-site request token in the page"
        return m.group(1)

    def __repr__(self) -> str:
        return f"<{self.status} {self.text[:2000]!r}>"


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes, as a browser would parse them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_safe(answer: Answer) -> None:
    """The headers every HTML answer carries, and no script but the server's own
    file: no inline ``<script>``, no ``on…=`` handler, no ``javascript:`` link."""
    policy = answer.header("content-security-policy")
    directives = {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}
    assert "script-src" in directives, policy
    assert "'unsafe-inline'" not in directives["script-src"], policy
    assert "'unsafe-eval'" not in directives["script-src"], policy
    assert directives.get("frame-ancestors") == ["'none'"], policy
    assert answer.header("x-content-type-options") == "nosniff"
    for tag, attrs in Tags(answer.text).tags:
        if tag == "script":
            assert (attrs.get("src") or "").startswith("/static/"), f"a script not ours: {attrs}"
        handlers = [name for name in attrs if name.startswith("on")]
        assert not handlers, f"<{tag}> has an inline handler: {attrs}"
        for name in ("href", "src", "action"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith("javascript:"), f"<{tag} {name}={value!r}>"
    assert "Traceback" not in answer.text


class Client:
    """A browser without a screen: one cookie jar, redirects not followed
    (``cookies=False``: a request from outside it, that neither sends nor keeps any)."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.jar: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        cookies: bool = True,
    ) -> Answer:
        sent = dict(headers or {})
        if cookies and self.jar:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.jar.items())
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=sent)
            resp = conn.getresponse()
            answer = Answer(resp.status, resp.headers, resp.read().decode("utf-8"))
        finally:
            conn.close()
        for name, line in answer.cookies().items() if cookies else ():
            self.jar[name] = line.split(";", 1)[0].split("=", 1)[1]
        if answer.html:
            assert_safe(answer)
        return answer

    def get(self, path: str, **headers: str) -> Answer:
        return self.request("GET", path, headers=headers)

    def post(
        self,
        path: str,
        fields: dict[str, Any] | list[tuple[str, str]],
        headers: dict[str, str] | None = None,
        *,
        cookies: bool = True,
    ) -> Answer:
        body = urllib.parse.urlencode(fields, doseq=True).encode()
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        return self.request("POST", path, body, sent, cookies=cookies)

    def submit(self, path: str, **fields: Any) -> Answer:
        """Load the form at ``path`` and post ``fields`` with its token and fingerprint."""
        form = self.get(path)
        assert form.status == 200, form
        fields.setdefault("csrf", form.csrf())
        m = re.search(r'name="fingerprint" value="([^"]*)"', form.text)
        if m:
            fields.setdefault("fingerprint", m.group(1))
        return self.post(path, fields, {"Origin": self.server.base})


@pytest.fixture
def serve(store_address: str | Path) -> Iterator[Any]:
    """Start ``serve --http`` on this test's store: ``server, client = serve(*args, **env)``."""
    started: list[ServerProcess] = []

    def start(*args: str, **env: str) -> tuple[ServerProcess, Client]:
        server = ServerProcess(store_address, *args, **env)  # type: ignore[arg-type]
        started.append(server)
        return server, Client(server)

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def item_path(item: int | dict[str, Any], ns: str = "default") -> str:
    ident = item["id"] if isinstance(item, dict) else item
    return f"/ns/{ns}/item/{ident}"


def url_path(address: str, ns: str = "default") -> str:
    kind, ident = address.removeprefix("memo://").split("/", 1)
    return f"/ns/{ns}/{kind}/{ident}"


def item_of(memory: Memory, item: dict[str, Any]) -> Any:
    return memory.get(f"memo://item/{item['id']}")


def conflicting_facts(memory: Memory, subject: str) -> tuple[str, str]:
    """Two facts about ``subject`` that overlap from 2021 on: one conflict item."""
    a = memory.record_fact(subject, "leader", "n1", valid_from="2020-01-01").fact
    b = memory.record_fact(subject, "leader", "n2", valid_from="2021-01-01").fact
    return a, b


# --- safe by default ---------------------------------------------------------------------------


def test_stored_html_and_script_show_as_text_on_every_view(memory, serve) -> None:
    """A passage, a document title, a page and a search query holding
    ``<script>`` and ``<img onerror>`` come back escaped on the passage, page,
    search, entity, document, item and preview views: the text is there, the
    markup is not (and every answer carries the security headers)."""
    stored = memory.remember(
        f"[[Mallory]] wrote {EVIL} into the replication notes.", title=f"Notes {EVIL}"
    )
    page = write_page(
        memory,
        "Mallory",
        f"# Mallory\n\nMallory wrote {EVIL} into the replication notes.\n\n<script>alert(2)</script>\n",
    )
    [page_item] = memory.items("page", "done").items
    _, client = serve()
    passage = stored.passages[0]
    views = {
        "passage": url_path(passage),
        "document": url_path(stored.document),
        "page": url_path(page),
        "entity": url_path(stored.entities[0]),
        "item": item_path(page_item.id),
        "search": "/ns/default/search?" + urllib.parse.urlencode({"q": "replication notes"}),
        "preview": f"/ns/default/preview/{passage.rsplit('/', 1)[1]}",
    }
    for view, path in views.items():
        answer = client.get(path)
        assert answer.status == 200, (view, answer)
        assert answer.header("content-security-policy"), view  # the fragment too
        assert "<script>alert" not in answer.text, view
        assert "<img src=x" not in answer.text, view
        assert ESCAPED_SCRIPT in answer.text and ESCAPED_IMG in answer.text, (view, answer)
    # the page's own raw HTML line is text too
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in client.get(views["page"]).text
    # what a person typed into the search box is shown back as text
    echoed = client.get("/ns/default/search?" + urllib.parse.urlencode({"q": EVIL}))
    assert echoed.status == 200 and ESCAPED_SCRIPT in echoed.text
    assert "<script>alert" not in echoed.text
    # error pages and refusals carry the headers as well (checked by the client)
    assert client.get(f"/ns/default/passage/{MISSING_UUID}").status == 404
    assert client.post(item_path(page_item.id), {"resolve": "skip"}).status == 403


def test_a_get_with_a_resolution_in_its_query_changes_nothing(memory, serve) -> None:
    """GET on an item URL with the fields of a form in its query (even a
    valid token) only shows the item; other methods than GET and POST are
    refused; the store is the same afterwards."""
    a, b = conflicting_facts(memory, "Raft")
    memory.remember("[[Alpha]] ships on Monday.")
    memory.remember("[[Alpha Corp]] ships on Monday.")
    memory.propose_merge(["Alpha", "Alpha Corp"])
    items = {i["kind"]: i for i in open_items(memory)}
    _, client = serve()
    token = client.get(item_path(items["merge"])).csrf()
    for kind, query in (
        ("merge", {"resolve": "accept", "action": "submit"}),
        ("conflict", {"resolve": "keep", "keep": b, "action": "submit"}),
        ("conflict", {"resolve": "skip", "reason": "no", "action": "submit"}),
    ):
        query.update(csrf=token, fingerprint=items[kind]["fingerprint"])
        answer = client.get(f"{item_path(items[kind])}?{urllib.parse.urlencode(query)}")
        assert answer.status == 200 and "Stored" not in answer.text, answer
    for method in ("PUT", "DELETE", "PATCH"):
        assert client.request(method, item_path(items["merge"])).status == 405
        assert client.request(method, url_path(a)).status == 405
    for item in items.values():
        assert item_of(memory, item).status == "open"
    assert memory.get(a).status == memory.get(b).status == "live"
    assert memory.get(memory.entity("Alpha Corp").address).merged_into is None


def test_a_form_without_its_token_or_from_another_site_is_refused(memory, serve) -> None:
    """A POST needs the browser's ``memors_csrf`` cookie and the form's token
    that goes with it; a wrong or foreign one, another site's Origin or Host,
    or a token from before a restart is refused (403/421) and stores nothing.
    The right one works."""
    memory.remember("[[Alpha]] ships on Monday.")
    memory.remember("[[Alpha Corp]] ships on Monday.")
    memory.propose_merge(["Alpha", "Alpha Corp"])
    [merge] = open_items(memory, "merge")
    path = item_path(merge)
    server, client = serve()
    form = client.get(path)
    assert "memors_csrf" in client.jar
    csrf_cookie = form.cookies()["memors_csrf"].lower()
    assert "httponly" in csrf_cookie and "samesite=strict" in csrf_cookie
    token = form.csrf()
    other = Client(server)
    other_token = other.get(path).csrf()
    assert other_token != token  # one token per browser
    fields = {"resolve": "accept", "action": "submit", "fingerprint": merge["fingerprint"]}
    same_site = {"Origin": server.base}

    refused = [
        client.post(path, fields, same_site, cookies=False),  # neither cookie nor token
        client.post(path, {**fields, "csrf": token}, same_site, cookies=False),  # no cookie
        client.post(path, fields, same_site),  # the cookie, no token
        client.post(path, {**fields, "csrf": "0" * len(token)}, same_site),  # a wrong token
        client.post(path, {**fields, "csrf": other_token}, same_site),  # another browser's
    ]
    for answer in refused:
        assert answer.status == 403, answer
        assert "cross-site request token" in answer.problem()
        assert "nothing was changed" in answer.problem()
    foreign = client.post(path, {**fields, "csrf": token}, {"Origin": "http://evil.invalid"})
    assert foreign.status == 403, foreign
    rebound = client.post(path, {**fields, "csrf": token}, {"Host": "evil.invalid"})
    assert rebound.status == 421, rebound
    assert client.get(path, Host="evil.invalid").status == 421
    assert item_of(memory, merge).status == "open"

    done = client.post(path, {**fields, "csrf": token}, same_site)
    assert done.status == 200 and "Stored" in done.text, done
    assert item_of(memory, merge).status == "done"
    assert memory.get(memory.entity("Alpha").address).aliases == ["Alpha Corp"]

    # A restarted server has a new secret: yesterday's form asks to be reloaded.
    memory.remember("[[Beta]] ships on Tuesday.")
    memory.remember("[[Beta Corp]] ships on Tuesday.")
    memory.propose_merge(["Beta", "Beta Corp"])
    [merge] = [i for i in open_items(memory, "merge") if i["id"] != merge["id"]]
    old = client.get(item_path(merge)).csrf()
    server.stop()
    restarted, _ = serve()
    client.server = restarted
    fields["fingerprint"] = merge["fingerprint"]
    stale = client.post(item_path(merge), {**fields, "csrf": old}, {"Origin": restarted.base})
    assert stale.status == 403 and item_of(memory, merge).status == "open"


def test_remote_mode_asks_for_the_token_and_keeps_it_off_the_agent_routes(memory, serve) -> None:
    """With ``--allow-remote``: a page without the login cookie redirects to
    ``/login``; a wrong token is 401 without a cookie; the right one sets an
    HttpOnly, SameSite=Strict ``memors_login`` cookie with which the pages and
    forms work; ``/mcp`` and ``/metrics`` still want the bearer header."""
    stored = memory.remember("[[Raft]] elects a leader by randomized timeouts.")
    conflicting_facts(memory, "Raft")
    [conflict] = open_items(memory, "conflict")
    _, client = serve("--host", "127.0.0.1", "--allow-remote", MEMORS_HTTP_TOKEN=TOKEN)

    for path in ("/ns/default/", url_path(stored.passages[0]), "/"):
        away = client.get(path)
        assert away.status == 303 and away.header("location") == "/login", away
    assert client.post(item_path(conflict), {"resolve": "skip"}).status == 401
    login = client.get("/login")
    assert login.status == 200 and 'name="token"' in login.text
    # a token in a GET's query does not log anyone in
    assert "memors_login" not in client.get("/login?token=" + TOKEN).cookies()
    wrong = client.post("/login", {"csrf": login.csrf(), "token": TOKEN[:-1]})
    assert wrong.status == 401 and "memors_login" not in wrong.cookies(), wrong
    assert "not the token" in wrong.problem()
    assert client.get("/ns/default/").status == 303
    # the login form is a form like any other: without its token, nothing
    no_csrf = client.post("/login", {"token": TOKEN})
    assert no_csrf.status == 403 and "memors_login" not in no_csrf.cookies()

    right = client.post("/login", {"csrf": login.csrf(), "token": TOKEN})
    assert right.status == 303 and right.header("location") == "/", right
    cookie = right.cookies()["memors_login"]
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags, cookie
    assert TOKEN not in cookie  # the browser holds a random login id, not the token
    assert "max-age=43200" in flags and "secure" not in flags, cookie  # 12 hours
    home = client.get("/ns/default/")
    assert home.status == 200 and "Raft" in home.text
    assert client.get(url_path(stored.passages[0])).status == 200
    skipped = client.submit(item_path(conflict), resolve="skip", reason="checked by hand")
    assert skipped.status == 200 and item_of(memory, conflict).status == "skipped", skipped

    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    ).encode()
    mcp_headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    for path in ("/mcp", "/metrics"):
        method, body = ("POST", initialize) if path == "/mcp" else ("GET", None)
        assert client.request(method, path, body, mcp_headers).status == 401  # cookie alone
        bearer = {**mcp_headers, "Authorization": f"Bearer {TOKEN}"}
        assert client.request(method, path, body, bearer, cookies=False).status == 200


def test_each_login_is_its_own_and_logout_ends_it(memory, serve) -> None:
    """Two browsers signing in get different cookies; signing out (a form with
    its cross-site token) ends that login on the server, so its old cookie no
    longer opens a page, while the other browser stays signed in."""
    server, first = serve("--allow-remote", MEMORS_HTTP_TOKEN=TOKEN)
    second = Client(server)
    for client in (first, second):
        answer = client.post("/login", {"csrf": client.get("/login").csrf(), "token": TOKEN})
        assert answer.status == 303, answer
    assert first.jar["memors_login"] != second.jar["memors_login"]
    home = first.get("/ns/default/")
    assert home.status == 200 and 'action="/logout"' in home.text
    old = first.jar["memors_login"]

    refused = first.post("/logout", {}, {"Origin": server.base})  # no cross-site token
    assert refused.status == 403 and first.get("/ns/default/").status == 200
    out = first.post("/logout", {"csrf": home.csrf()}, {"Origin": server.base})
    assert out.status == 303 and out.header("location") == "/login", out
    assert "max-age=0" in out.cookies()["memors_login"].lower()
    first.jar["memors_login"] = old  # a copy of the cookie kept from before
    assert first.get("/ns/default/").status == 303
    assert second.get("/ns/default/").status == 200


def test_a_login_expires_and_its_cookies_are_secure_behind_a_tls_proxy(memory, serve) -> None:
    """``MEMORS_HTTP_LOGIN_TTL_S`` bounds a login from sign-in (the cookie
    says so in Max-Age, and the server forgets it); ``--behind-tls-proxy``
    marks every cookie Secure."""
    _, client = serve(
        "--allow-remote", "--behind-tls-proxy", MEMORS_HTTP_TOKEN=TOKEN, MEMORS_HTTP_LOGIN_TTL_S="1"
    )
    form = client.get("/login")
    assert "secure" in [p.strip().lower() for p in form.cookies()["memors_csrf"].split(";")]
    answer = client.post("/login", {"csrf": form.csrf(), "token": TOKEN})
    flags = [p.strip().lower() for p in answer.cookies()["memors_login"].split(";")]
    assert "secure" in flags and "max-age=1" in flags, flags
    time.sleep(1.5)
    away = client.get("/ns/default/")
    assert away.status == 303 and away.header("location") == "/login", away


# --- working the queue over plain HTTP ----------------------------------------------------------


def test_conflict_keep_supersedes_the_other_fact(memory, serve) -> None:
    a, b = conflicting_facts(memory, "Raft")
    [conflict] = open_items(memory, "conflict")
    _, client = serve()
    form = client.get(item_path(conflict))
    assert f'name="keep" value="{a}"' in form.text and f'name="keep" value="{b}"' in form.text
    done = client.submit(item_path(conflict), resolve="keep", keep=b, action="submit")
    assert done.status == 200 and "Stored" in done.text, done
    assert memory.get(b).status == "live"
    assert memory.get(a).status == "superseded"
    assert item_of(memory, conflict).status == "done"
    # the page now shows the item done, with no form to submit again
    again = client.get(item_path(conflict))
    assert 'name="resolve"' not in again.text.replace('name="resolve" value="reopen"', "")
    assert f"&#34;keep&#34;: &#34;{b}&#34;" in again.text  # and how it was resolved


def test_what_superseded_a_row_is_named_by_its_title_not_an_id(memory, serve) -> None:
    """A superseded passage names the document version that dropped it by
    its title, a superseded fact the fact kept, written out."""
    first = memory.remember("Raft elects a leader.", uri="file:///raft.md", title="Raft notes")
    memory.remember("Raft elects one leader per term.", uri="file:///raft.md", title="Raft notes")
    a, b = conflicting_facts(memory, "Paxos")
    [conflict] = open_items(memory, "conflict")
    memory.submit(conflict["id"], {"keep": b})
    _, client = serve()
    passage = client.get(url_path(first.passages[0]))
    assert passage.status == 200 and f'<a href="{url_path(first.document)}">Raft notes</a>' in (
        passage.text
    ), passage
    fact = client.get(url_path(a))
    assert fact.status == 200 and f'<a href="{url_path(b)}">Paxos leader n2</a>' in fact.text


def test_conflict_bound_stores_a_bounded_copy_and_refuses_an_overlap(memory, serve) -> None:
    a, b = conflicting_facts(memory, "Paxos")
    [conflict] = open_items(memory, "conflict")
    _, client = serve()
    path = item_path(conflict)
    overlap = client.submit(
        path, resolve="bound", bound_fact=a, valid_to="2022-01-01", action="submit"
    )
    assert overlap.status == 400, overlap
    assert "would still overlap" in overlap.problem() and "nothing was stored" in overlap.problem()
    assert memory.get(a).status == "live" and item_of(memory, conflict).status == "open"
    assert len(memory.fact_history("Paxos")) == 2
    empty = client.submit(path, resolve="bound", bound_fact=a, action="submit")
    assert empty.status == 400 and "valid_from or valid_to" in empty.problem()

    dry = client.submit(
        path, resolve="bound", bound_fact=a, valid_to="2021-01-01", action="dry-run"
    )
    assert dry.status == 200 and "Dry run" in dry.text, dry
    assert memory.get(a).status == "live" and len(memory.fact_history("Paxos")) == 2
    done = client.submit(
        path, resolve="bound", bound_fact=a, valid_to="2021-01-01", action="submit"
    )
    assert done.status == 200 and "Stored" in done.text, done
    old = memory.get(a)
    assert old.status == "superseded"
    copy = memory.get(old.superseded["by"])
    assert (copy.status, copy.value, copy.valid_from, copy.valid_to) == (
        "live",
        "n1",
        "2020-01-01",
        "2021-01-01",
    )
    assert f'href="{url_path(copy.address)}"' in done.text  # the report links the copy
    assert memory.get(b).status == "live" and item_of(memory, conflict).status == "done"


def test_duplicates_show_each_members_similarity_and_keep_forgets_the_rest(memory, serve) -> None:
    near = DUPLICATE.replace("old wooden", "old wooden garden")
    copies = [
        memory.remember(text, uri=f"file:///copy{n}.txt").passages[0]
        for n, text in enumerate((DUPLICATE, DUPLICATE, near))
    ]
    [duplicate] = open_items(memory, "duplicate")
    _, client = serve()
    form = client.get(item_path(duplicate))
    similarity = {
        address: float(value)
        for address, value in re.findall(
            r'name="keep" value="([^"]+)"[^>]*>[^<]*· similarity ([0-9.]+)', form.text
        )
    }
    assert set(similarity) == set(copies), form
    assert similarity[copies[0]] == similarity[copies[1]] == 1.0
    assert 0.5 < similarity[copies[2]] < 1.0
    done = client.submit(
        item_path(duplicate), resolve="keep", keep=[copies[0], copies[2]], action="submit"
    )
    assert done.status == 200 and "Stored" in done.text, done
    assert [memory.get(p).status for p in copies] == ["live", "forgotten", "live"]


def test_skip_with_a_reason_and_without_one(memory, serve) -> None:
    conflicting_facts(memory, "Raft")
    [conflict] = open_items(memory, "conflict")
    _, client = serve()
    blank = client.submit(item_path(conflict), resolve="skip", reason="  ", action="submit")
    assert blank.status == 400 and "reason" in blank.problem(), blank
    assert item_of(memory, conflict).status == "open"
    done = client.submit(
        item_path(conflict), resolve="skip", reason="both were true once", action="submit"
    )
    assert done.status == 200, done
    item = item_of(memory, conflict)
    assert item.status == "skipped" and "both were true once" in json.dumps(item.resolution)


def raft_page(node_1_as: str = "node 1") -> str:
    """A page of the three Raft passages, each cited; ``node_1_as`` changes a number."""
    sentences = [p.replace("[[", "").replace("]]", "") for p in passages_about("Raft", 3)]
    text = "# Raft\n\n" + " ".join(f"{s} [{n}]" for n, s in enumerate(sentences, 1)) + "\n"
    return text.replace("node 1 ", node_1_as + " ")


def test_a_page_dry_run_shows_the_flagged_token_and_stores_nothing(memory, serve) -> None:
    memory.remember("\n\n".join(passages_about("Raft", 3)), title="Raft")
    [item] = open_items(memory, "page")
    _, client = serve()
    path = item_path(item)
    dry = client.submit(
        path, resolve="page", title="Raft", content=raft_page("node 9"), action="dry-run"
    )
    assert dry.status == 200 and "Dry run: flagged" in dry.text, dry
    flags = re.search(
        r'<div class="check flagged"><h3>substitution: 1 flagged</h3>(.*?)</div>', dry.text, re.S
    )
    assert flags, dry
    assert '<span class="token">9</span> (number)' in flags.group(1)
    assert "node 9 stays consistent" in flags.group(1)
    assert "node 9 stays consistent" in dry.text.split('<textarea name="content"', 1)[1]
    assert memory.entity("Raft").page is None and item_of(memory, item).status == "open"

    # the substitution also refuses the real submit, until it is fixed
    refused = client.submit(path, resolve="page", title="Raft", content=raft_page("node 9"))
    assert "Refused" in refused.text and memory.entity("Raft").page is None
    stored = client.submit(path, resolve="page", title="Raft", content=raft_page(), action="submit")
    assert stored.status == 200 and "Stored" in stored.text, stored
    page = memory.entity("Raft").page
    assert page and f'href="{url_path(page)}"' in stored.text
    assert "node 1 stays consistent" in memory.get(page).content


def test_a_forced_page_marks_its_unverified_sentence_not_as_a_citation(memory, serve) -> None:
    """Issue 31: "Etcd is written in Rust.", stored with force over every
    check, was followed by a citation superscript exactly like a real one."""
    memory.remember("\n\n".join(passages_about("Etcd", 3)), title="Etcd")
    [item] = open_items(memory, "page")
    first = item["payload"]["passages"][0]["text"].replace("[[", "").replace("]]", "")
    content = f"# Etcd\n\n{first} [1]\n\nEtcd is written in Rust.\n"
    report = memory.submit(item["id"], content=content, title="Etcd", force=True)
    assert report.stored, report
    _, client = serve()
    page = client.get(url_path(report.address))
    assert page.status == 200, page
    body = page.text.split('<article class="page-body">', 1)[1].split("</article>", 1)[0]
    # the sentence that holds keeps its one citation; the forced one has none
    assert body.count('<sup class="cites"') == 1 and body.count('class="cite"') == 1
    after = body.split("Etcd is written in Rust.", 1)[1]
    assert after.startswith('<span class="unverified" role="note"'), after[:300]
    mark = after.split("</p>", 1)[0]
    assert "unverified</span>" in mark and 'class="cite"' not in mark
    assert "<b>substitution</b>: the name &#x27;Rust&#x27; is in none of its sources" in mark
    assert "<b>corruption</b>: shares only" in mark
    # the list of what it was stored over, not raw JSON
    assert '<h2 id="unverified">Stored over its checks\' flags</h2>' in page.text
    assert '<pre class="json">' not in page.text.split("<h2>Versions</h2>", 1)[0]
    found = client.get("/ns/default/search?q=etcd+rust&granularity=page")
    assert found.status == 200, found
    assert "<q>Etcd is written in Rust.</q>" in found.text and 'class="unverified"' in found.text


def test_a_stale_item_says_which_number_a_gone_passage_had(memory, serve) -> None:
    """Issue 31: a stale item keeps the page's marker numbers; the form's dry
    run flags a marker naming a forgotten passage as such."""
    texts = [f"[[Etcd]] feature {n} keeps the cluster consistent, item {n}." for n in range(4)]
    docs = [memory.remember(t, uri=f"etcd-{n}.md") for n, t in enumerate(texts)]
    [item] = open_items(memory, "page")
    lines = [f"Etcd feature {p['ref'] - 1} keeps the cluster consistent, item "
             f"{p['ref'] - 1}. [{p['ref']}]" for p in item["payload"]["passages"]]  # fmt: skip
    assert memory.submit(item["id"], content="\n\n".join(lines), title="Etcd").stored
    memory.forget(docs[1].passages[0], reason="wrong")
    [stale] = open_items(memory, "stale")
    _, client = serve()
    path = item_path(stale)
    form = client.get(path)
    assert "was [2]</span>" in form.text
    dry = client.submit(
        path, resolve="page", title="Etcd", content="\n\n".join(lines), action="dry-run"
    )
    assert dry.status == 200 and "Dry run: flagged" in dry.text, dry
    flags = re.search(
        r'<div class="check flagged"><h3>citations: 1 flagged</h3>(.*?)</div>', dry.text, re.S
    )
    assert flags, dry
    assert "[2] names a passage forgotten since: [[Etcd]] feature 1 keeps" in flags.group(1)
    assert "corruption: passed" in dry.text and "substitution: passed" in dry.text


def test_a_form_from_before_the_item_changed_is_refused(memory, serve) -> None:
    memory.remember("\n\n".join(passages_about("Raft", 3)), title="Raft")
    [item] = open_items(memory, "page")
    _, client = serve()
    path = item_path(item)
    form = client.get(path)
    seen = re.search(r'name="fingerprint" value="([^"]*)"', form.text).group(1)
    # Something new about Raft arrives and compact refreshes the item.
    memory.remember("[[Raft]] compacts its log into snapshots every 10000 entries.")
    open_items(memory, "page")
    assert item_of(memory, item).fingerprint != seen
    fields = {"resolve": "page", "title": "Raft", "content": raft_page(), "action": "submit"}
    stale = client.post(path, {**fields, "csrf": form.csrf(), "fingerprint": seen})
    assert stale.status in (400, 409), stale
    assert "refreshed since" in stale.problem() and "nothing was stored" in stale.problem()
    assert memory.entity("Raft").page is None and item_of(memory, item).status == "open"
    # the refusal shows the item as it is now: its form carries the new fingerprint
    assert f'name="fingerprint" value="{item_of(memory, item).fingerprint}"' in stale.text
    made_up = client.post(path, {**fields, "csrf": form.csrf(), "fingerprint": "f" * 32})
    assert made_up.status in (400, 409) and memory.entity("Raft").page is None
    again = client.submit(path, **fields)
    assert again.status == 200 and "Stored" in again.text, again


def test_a_form_sent_twice_is_refused_the_second_time(memory, serve) -> None:
    """Back, then Submit again (or a second tab): the item is done, the second
    post says so in one line and changes nothing."""
    a, b = conflicting_facts(memory, "Raft")
    [conflict] = open_items(memory, "conflict")
    _, client = serve()
    form = client.get(item_path(conflict))
    fields = {
        "csrf": form.csrf(),
        "fingerprint": conflict["fingerprint"],
        "resolve": "keep",
        "action": "submit",
    }
    first = client.post(item_path(conflict), {**fields, "keep": b})
    assert first.status == 200 and "Stored" in first.text, first
    second = client.post(item_path(conflict), {**fields, "keep": a})
    assert second.status in (400, 409), second
    assert "not open" in second.problem() and "nothing was stored" in second.problem()
    assert memory.get(a).status == "superseded" and memory.get(b).status == "live"


# --- a third-party kind ---------------------------------------------------------------------------

ERRAND_PLUGIN = """
import attrs

from memors_core import BadInput, hookimpl
from memors_core.plugins.kinds import Candidate, Kind, fingerprint


@attrs.frozen
class Done:
    done: str
    minutes: int = 0


class ErrandKind(Kind):
    name = "errand"
    description = "run an errand noted on the fridge"
    resolution = Done
    hint = "done = what was done"
    instructions = "run the errand in `payload.errand`, then send `done`"

    def summary(self, payload):
        return f"{payload['errand']} by {payload['due']}"

    def scan(self, ctx):
        payload = {"errand": "water the plants <script>alert(1)</script>", "due": "Friday"}
        yield Candidate("fridge", fingerprint("fridge"), lambda: payload)

    def validate(self, ctx, item, resolution):
        if not resolution.done.strip():
            raise BadInput("say what was done")
        ctx.report["done"] = resolution.done

    def apply(self, ctx, item, resolution):
        return None


class Errands:
    @hookimpl
    def memors_register_kinds(self, registry):
        registry.add(ErrandKind())


errands = Errands()
"""


def errand_store(store_address: str | Path, tmp_path: Path) -> tuple[dict[str, Any], dict]:
    """The errand plugin written where a server can load it, and its one item
    made through the library; returns the item and the server's environment."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "memors_errands.py").write_text(ERRAND_PLUGIN)
    module = types.ModuleType("memors_errands")
    exec(compile(ERRAND_PLUGIN, str(src / "memors_errands.py"), "exec"), module.__dict__)
    pm = build_plugin_manager(plugins=[("errand", module.errands)])
    with Memory.open(store_address, plugin_manager=pm) as memory:
        [item] = open_items(memory, "errand")
    env = plugin_env(tmp_path / "site", {"errand": "memors_errands:errands"}, [src])
    return item, env


def test_a_third_party_kind_is_shown_generically_and_resolved_by_its_form(
    store_address, serve, tmp_path, memory
) -> None:
    item, env = errand_store(store_address, tmp_path)
    _, client = serve(**env)
    queue = client.get("/ns/default/queue?kind=errand")
    assert queue.status == 200 and item_path(item) in queue.text
    assert "water the plants &lt;script&gt;" in queue.text  # its summary, escaped
    shown = client.get(item_path(item))
    assert shown.status == 200
    payload = re.search(r'<pre class="json">(.*?)</pre>', shown.text, re.S).group(1)
    assert "&#34;due&#34;: &#34;Friday&#34;" in payload, payload
    assert ESCAPED_SCRIPT in payload and "<script>alert" not in shown.text
    # a form from its declared resolution fields, and one for JSON
    assert 'name="field_done" required' in shown.text
    assert "done <small>str, required</small>" in shown.text
    assert 'name="field_minutes">' in shown.text and "minutes <small>int</small>" in shown.text
    assert 'name="resolution_json"' in shown.text

    bad_json = client.submit(item_path(item), resolve="json", resolution_json="{done: x}")
    assert bad_json.status == 400 and "not valid JSON" in bad_json.problem()
    missing = client.submit(item_path(item), resolve="json", resolution_json='{"minutes": 5}')
    assert missing.status == 400 and "done" in missing.problem(), missing
    dry = client.submit(
        item_path(item),
        resolve="fields",
        field_done="watered them",
        field_minutes="5",
        action="dry-run",
    )
    assert dry.status == 200 and "Dry run" in dry.text, dry
    assert memory.get(f"memo://item/{item['id']}").status == "open"
    done = client.submit(
        item_path(item),
        resolve="json",
        resolution_json='{"done": "watered them", "minutes": 5}',
        action="submit",
    )
    assert done.status == 200 and "Stored" in done.text, done
    after = memory.get(f"memo://item/{item['id']}")
    assert after.status == "done"
    assert after.resolution == {
        "done": "watered them",
        "minutes": 5,
        "outcome": {"done": "watered them"},  # what the kind reported doing
    }


def test_an_item_whose_plugin_is_not_loaded_still_shows_its_payload(
    store_address, serve, tmp_path, memory
) -> None:
    item, _ = errand_store(store_address, tmp_path)
    _, client = serve()  # no plugin on this server's path
    queue = client.get("/ns/default/queue")
    assert queue.status == 200 and item_path(item) in queue.text
    shown = client.get(item_path(item))
    assert shown.status == 200 and "errand item" in shown.text
    assert "&#34;due&#34;: &#34;Friday&#34;" in shown.text
    assert "Resolution as JSON (this kind's plugin is not loaded here)" in shown.text
    refused = client.submit(item_path(item), resolve="json", resolution_json='{"done": "x"}')
    assert refused.status == 400, refused
    assert "kind &#39;errand&#39;, which is not installed" in refused.problem()
    assert memory.get(f"memo://item/{item['id']}").status == "open"


# --- pagination ---------------------------------------------------------------------------------


def listed(answer: Answer, pattern: str) -> list[str]:
    return re.findall(pattern, answer.text)


def next_link(answer: Answer) -> str | None:
    m = re.search(r'<a href="([^"]+)" rel="next">', answer.text)
    return m.group(1).replace("&amp;", "&") if m else None


def test_an_entity_and_a_document_with_120_passages_show_50_at_a_time(memory, serve) -> None:
    text = "\n\n".join(
        f"[[Big]] keeps record {n} of the ledger, entry number {n * 7}." for n in range(120)
    )
    stored = memory.remember(text, title="Ledger")
    assert len(stored.passages) == 120
    _, client = serve()
    for base in (url_path(stored.entities[0]), url_path(stored.document)):
        seen: list[str] = []
        path: str | None = base
        pages = 0
        while path:
            answer = client.get(path if path.startswith("/") else base + path)
            assert answer.status == 200, answer
            rows = listed(answer, r'<li[^>]*><a href="/ns/default/passage/([0-9a-f-]+)"')
            assert len(rows) == (50 if pages < 2 else 20), (base, pages, len(rows))
            first = pages * 50 + 1
            assert f"{first}–{first + len(rows) - 1} of 120" in answer.text
            seen += rows
            pages += 1
            path = next_link(answer)
        assert pages == 3
        assert sorted(seen) == sorted(p.rsplit("/", 1)[1] for p in stored.passages)
    assert client.get(url_path(stored.entities[0]) + "?offset=-5").status == 400


def test_the_queue_pages_with_after_and_the_entities_with_offset(memory, serve) -> None:
    for n in range(60):
        conflicting_facts(memory, f"Service {n:02d}")
    items = memory.compact(["conflict"], limit=0)
    assert items.open == 60
    _, client = serve()
    ids: list[str] = []
    path: str | None = "/ns/default/queue?kind=conflict"
    sizes = []
    while path:
        answer = client.get(path if path.startswith("/") else "/ns/default/queue" + path)
        assert answer.status == 200 and "60 open" in answer.text, answer
        rows = listed(answer, r'<td><a href="/ns/default/item/(\d+)">')
        sizes.append(len(rows))
        ids += rows
        path = next_link(answer)
        if path:
            assert "after=" in path and "kind=conflict" in path, path
    assert sizes == [50, 10]
    assert sorted(map(int, ids)) == sorted(i.id for i in memory.items("conflict").items)

    names: list[str] = []
    path = "/ns/default/entities"
    while path:
        answer = client.get(path if path.startswith("/") else "/ns/default/entities" + path)
        names += listed(answer, r'href="/ns/default/entity/[0-9a-f-]+">(Service \d\d)</a>')
        path = next_link(answer)
    assert names == [f"Service {n:02d}" for n in range(60)]


def test_a_number_past_64_bits_in_a_url_is_a_one_line_400(memory, serve) -> None:
    """``after``, ``offset`` and ``limit`` past the store's 64-bit integers are
    refused in one line (SQLite answered 500); the largest one is a number like
    any other."""
    stored = memory.remember("[[Raft]] elects a leader by randomized timeouts.")
    _, client = serve()
    huge = str(2**63)
    for path in (
        f"/ns/default/queue?after={huge}",
        f"/ns/default/entities?offset={huge}",
        f"/ns/default/lint?offset={huge}",
        f"/ns/default/search?q=leader&limit={huge}",
        f"{url_path(stored.entities[0])}?offset={10**40}",
    ):
        answer = client.get(path)
        assert answer.status == 400, (path, answer)
        assert "expected a whole number up to 9223372036854775807" in answer.problem(), path
    last = client.get(f"/ns/default/queue?after={2**63 - 1}")
    assert last.status == 200 and "← first" in last.text, last  # nothing after it
    assert client.get(f"/ns/default/entities?offset={2**63 - 1}").status == 200


def test_a_form_too_large_is_413_and_one_with_too_many_fields_400(memory, serve) -> None:
    """A form whose one field passes the body limit, sent chunked so no
    Content-Length announces it, is refused with 413 (it was a 500); a
    multipart form with more fields than the parser takes is a one-line 400.
    Neither changes the item."""
    conflicting_facts(memory, "Raft")
    [conflict] = open_items(memory, "conflict")
    server, client = serve()
    path = item_path(conflict)
    token = client.get(path).csrf()
    boundary = "memorsboundary"

    def part(name: str, value: str) -> bytes:
        return (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        ).encode()

    start = part("csrf", token) + part("resolve", "skip")
    start += f'--{boundary}\r\nContent-Disposition: form-data; name="reason"\r\n\r\n'.encode()
    cookie = "Cookie: " + "; ".join(f"{k}={v}" for k, v in client.jar.items())
    kind = f"Content-Type: multipart/form-data; boundary={boundary}"
    answer = send_chunked(server.port, path, 23 * 1024 * 1024, kind, cookie, first=start)
    status, text = status_of(answer), answer
    assert status == 413 and "request body too large" in text, (status, text[:500])

    many = b"".join([part("csrf", token), *(part(f"f{n}", "x") for n in range(10_001))])
    crowded = client.request(
        "POST",
        path,
        many + f"--{boundary}--\r\n".encode(),
        {"Content-Type": f"multipart/form-data; boundary={boundary}", "Origin": server.base},
    )
    assert crowded.status == 400 and "Too many fields" in crowded.problem(), crowded
    assert item_of(memory, conflict).status == "open"
    assert "Traceback" not in server.stderr


# --- a URL for every address ---------------------------------------------------------------------


def test_every_kind_of_address_has_a_page_and_a_missing_one_a_one_line_404(memory, serve) -> None:
    stored = memory.remember("\n\n".join(passages_about("Raft", 3)), title="Raft notes")
    fact = memory.record_fact("Raft", "leader", "n1").fact
    page = write_page(memory, "Etcd", "# Etcd\n\nEtcd stores keys.\n")
    conflicting_facts(memory, "Paxos")
    [item] = open_items(memory, "conflict")
    addresses = {
        "document": stored.document,
        "passage": stored.passages[0],
        "fact": fact,
        "entity": stored.entities[0],
        "page": page,
        "item": f"memo://item/{item['id']}",
    }
    _, client = serve()
    for kind, address in addresses.items():
        answer = client.get(url_path(address))
        assert answer.status == 200, (kind, answer)
        shown = f"#{item['id']}" if kind == "item" else f"<code>{address}</code>"
        if kind == "page":
            shown = "Etcd stores keys."
        assert shown in answer.text, (kind, answer)
        # the address box takes an address and sends the person to its page
        go = client.get("/go?" + urllib.parse.urlencode({"address": address}))
        assert go.status == 303 and go.header("location") == url_path(address), (kind, go)

        missing_id = "424242" if kind == "item" else MISSING_UUID
        missing = client.get(f"/ns/default/{kind}/{missing_id}")
        assert missing.status == 404, (kind, missing)
        message = missing.problem()
        assert message == f"nothing at memo://{kind}/{missing_id} in namespace &#39;default&#39;"
        malformed = client.get(f"/ns/default/{kind}/not-an-id")
        assert malformed.status == 400, (kind, malformed)
        assert "\n" not in malformed.problem() and "malformed" in malformed.problem()
    # another namespace does not show this one's rows
    other = client.get(url_path(stored.document, "elsewhere"))
    assert other.status == 404 and "elsewhere" in other.problem()
    unknown = client.get(f"/ns/default/nope/{MISSING_UUID}")
    assert unknown.status == 404 and unknown.problem() == "no such view: /nope/"


@pytest.mark.semantic
def test_search_by_meaning_shows_how_it_ranked_and_why_not(vector_memory, vector_store) -> None:
    vector_memory.remember("Melanie adopted a young rescue dog from the shelter.")
    vector_memory.record_fact("Melanie", "adopted", "a dog")
    with ServerProcess(vector_store) as server:  # type: ignore[arg-type]
        client = Client(server)
        query = urllib.parse.urlencode({"q": "who got a new puppy?"})
        found = client.get(f"/ns/default/search?{query}")
        assert found.status == 200
        assert "Melanie adopted a young rescue dog" in found.text
        assert "passages ranked by words and meaning, their scores fused" in found.text
        assert "fused score: words and meaning, 0 to 1" in found.text
        assert '<option value="" selected>default</option>' in found.text
        lexical = client.get(f"/ns/default/search?{query}&mode=lexical")
        assert "Nothing matches" in lexical.text
        assert "<option selected>lexical</option>" in lexical.text
        facts = client.get("/ns/default/search?q=dog&granularity=fact&mode=semantic")
        assert '<p class="notice">searched by words only: only passages have vectors' in facts.text
        assert "Melanie adopted a dog" in facts.text
