"""The web view's reads do not grow with what they show (issue 32 point 3).

The namespace home used to read the whole store's metrics and then five
statements per entity listed, and a page read each cited passage and its
document one statement at a time: on PostgreSQL each statement is a round
trip, which made those two views 6-8x slower than on SQLite. Here the web
app runs in this process over the test's store, and every statement the
engine's driver is handed is counted (SQLite's trace hook, psycopg's
cursor): the namespace home and a page view issue as many statements
whatever the number of entities listed or passages cited.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from memors_core import Memory
from memors_core.testing import open_items, passages_about
from memors_mcp.web.app import build_web_app
from store_checks import statements

#: The most statements each view may issue (begin and commit included).
BOUNDS = {"namespace home": 24, "page": 32}


def get(app: Any, path: str) -> tuple[int, str]:
    """GET ``path`` of the ASGI ``app``: (status, body)."""
    out: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    anyio.run(app, scope, receive, send)
    return out["status"], out["body"].decode()


def page_citing(memory: Memory, name: str, count: int) -> str:
    """A page of ``name`` citing ``count`` passages, one sentence each; its web path."""
    texts = passages_about(name, count, topic=f"{name} log")
    memory.remember_many([{"text": t, "uri": f"{name}-{i}"} for i, t in enumerate(texts)])
    item = next(i for i in open_items(memory, "page") if i["payload"]["entity"]["name"] == name)
    refs = {p["text"]: p["ref"] for p in item["payload"]["passages"]}
    lines = [f"{t.replace('[[', '').replace(']]', '')} [{refs[t]}]" for t in texts]
    done = memory.submit(
        item["id"], content=f"# {name}\n\n" + "\n\n".join(lines) + "\n", title=name, force=True
    )
    assert done.address is not None, done
    return "/ns/default/page/" + done.address.rsplit("/", 1)[1]


def counted(memory: Memory, monkeypatch: pytest.MonkeyPatch, app: Any, path: str) -> int:
    status, body = get(app, path)  # warm: templates, the first statements' plans
    assert status == 200, body[:2000]
    with statements(memory, monkeypatch) as seen:
        status, body = get(app, path)
    assert status == 200, body[:2000]
    return len(seen)


def test_namespace_home_and_page_read_in_a_fixed_number_of_statements(memory, monkeypatch):
    app = build_web_app(memory, "default", None, 1 << 20)
    small = page_citing(memory, "Quorum", 3)
    home_small = counted(memory, monkeypatch, app, "/ns/default/")
    page_small = counted(memory, monkeypatch, app, small)

    # Sixty more entities, each with passages and a fact; a page citing 14.
    for n in range(60):
        memory.remember(f"[[Node {n}]] keeps shard {n} and answers reads for it.")
        memory.record_fact(f"Node {n}", "shard", str(n))
    large = page_citing(memory, "Ledger", 14)
    _status, body = get(app, "/ns/default/")
    assert "Node 10" in body and "More entities" in body  # a full first page of entities
    home_large = counted(memory, monkeypatch, app, "/ns/default/")
    page_large = counted(memory, monkeypatch, app, large)
    _status, body = get(app, large)
    assert body.count('class="cite"') >= 14  # every citation is linked

    assert home_large == home_small <= BOUNDS["namespace home"], (home_small, home_large)
    assert page_large == page_small <= BOUNDS["page"], (page_small, page_large)
