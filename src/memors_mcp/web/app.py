"""The web view: the knowledge base for people, at ``/`` beside ``/mcp``.

Server-side rendered HTML (Jinja2, autoescaped) over the same ``Memory``
operations every frontend uses; forms post back and get a page, so it all
works without JavaScript (``web.js`` only adds hover previews of citations).
Every GET only reads; every POST carries a cross-site request token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import attrs
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memors_core import BadInput, MemorsError, Memory, NotFound, Refused
from memors_core.domain.ids import WEB_TYPES, web_path
from memors_core.domain.inputs import check_namespace, field_value, resolution_object
from memors_core.domain.rows import DOCUMENT_SORTS, PAGE_SORTS
from memors_core.domain.search import GRANULARITIES, MODES
from memors_core.log import get_logger

from ..bounds import BodyTooLarge, Throttle, client_key
from . import render
from .security import CSRF_COOKIE, CSRF_FIELD, LOGIN_COOKIE, SECURITY_HEADERS, Guard, Logins

log = get_logger("memors.web")

HERE = Path(__file__).parent
#: Rows on one page of any list that can grow.
PAGE_SIZE = 50
#: The newest corrections the namespace page lists (the CLI's
#: ``corrections`` and the MCP tool list them all).
CORRECTIONS_SHOWN = 20
#: What a hover preview and a source list show of a passage.
PREVIEW_CHARS = 400
BUILT_IN_FORMS = ("page", "stale", "conflict", "merge", "duplicate")
#: The largest row id, offset or count a URL may ask for (SQLite's and
#: PostgreSQL's integers are 64-bit).
MAX_NUMBER = 2**63 - 1


def _templates() -> Any:
    import jinja2
    import markupsafe

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        # Payloads are a kind's own JSON: a key one kind lacks renders as nothing.
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = render.short
    env.filters["clip"] = lambda s, n=PREVIEW_CHARS: render.clip(s, n)
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    env.filters["day"] = lambda s: (s or "")[:19].replace("T", " ")
    # (render.unverified_html escapes every value it shows)
    env.filters["unverified"] = lambda flags: markupsafe.Markup(render.unverified_html(flags))
    return env


class WebView:
    """The routes of the web view over one open :class:`Memory`."""

    def __init__(
        self,
        memory: Memory,
        namespace: str,
        token: str | None,
        max_body: int,
        *,
        logins: Logins | None = None,
        throttle: Throttle | None = None,
        secure_cookies: bool = False,
    ) -> None:
        self.memory = memory
        self.namespace = namespace
        self.guard = Guard(token)
        self.max_body = max_body
        self.logins = logins
        self.throttle = throttle
        self.secure_cookies = secure_cookies
        self.env = _templates()

    # --- plumbing ---------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A ``Memory`` operation, off the event loop (the store may wait on a lock)."""
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def page(
        self, request: Request, template: str, code: int = 200, **context: Any
    ) -> HTMLResponse:
        browser = request.cookies.get(CSRF_COOKIE)
        fresh = browser is None or len(browser) > 64
        if fresh:
            browser = self.guard.new_browser()
        ns = context.get("ns", self.namespace)
        body = self.env.get_template(template).render(
            csrf_field=CSRF_FIELD,
            csrf=self.guard.form_token(browser),
            ns=ns,
            url=lambda address: web_path(address, ns),
            q=quote,
            login=self.guard.token is not None,
            signed_in=self.logins is not None
            and self.logins.valid(request.cookies.get(LOGIN_COOKIE)),
            **{
                **{k: v for k, v in context.items() if k != "ns"},
                "labels": {
                    **getattr(request.state, "labels", {}),
                    **context.get("labels", {}),
                },
            },
        )
        response = HTMLResponse(body, status_code=code)
        _secure(response)
        if fresh:
            self.set_cookie(response, CSRF_COOKIE, browser)
        return response

    def set_cookie(
        self, response: Response, name: str, value: str, max_age: int | None = None
    ) -> None:
        """HttpOnly, SameSite=Strict, and Secure when the browser comes over TLS."""
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            httponly=True,
            samesite="strict",
            secure=self.secure_cookies,
            path="/",
        )

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.page(request, "error.html", code=status, message=message)

    async def form(self, request: Request) -> dict[str, Any] | Response:
        """The posted form, or the refusal: too large, or without a valid token."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return self.error(request, 413, f"form too large (more than {self.max_body:,} bytes)")
        async with request.form(max_fields=10_000, max_part_size=self.max_body) as data:
            fields: dict[str, Any] = {}
            for key, value in data.multi_items():
                if not isinstance(value, str):
                    continue
                fields.setdefault(key, []).append(value)
        flat = {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
        flat["_lists"] = fields
        if not self.guard.form_ok(request.cookies.get(CSRF_COOKIE), flat.get(CSRF_FIELD)):
            log.warning("web_form_refused", path=request.url.path, reason="cross-site token")
            return self.error(
                request,
                403,
                "this form's cross-site request token is missing or old: reload the page "
                "and send it again (nothing was changed)",
            )
        return flat

    def ns_of(self, request: Request) -> str:
        return check_namespace(request.path_params.get("ns", self.namespace))

    # --- routes -------------------------------------------------------------------

    def routes(self) -> list[Any]:
        wrap = self._guarded
        return [
            Route("/", wrap(self.home)),
            Route("/login", wrap(self.login), methods=["GET", "POST"]),
            Route("/logout", wrap(self.logout), methods=["POST"]),
            Route("/go", wrap(self.go)),
            Route("/ns/{ns}/", wrap(self.namespace_home)),
            Route("/ns/{ns}", wrap(self.namespace_redirect)),
            Route("/ns/{ns}/search", wrap(self.search)),
            Route("/ns/{ns}/entities", wrap(self.entities)),
            Route("/ns/{ns}/pages", wrap(self.pages)),
            Route("/ns/{ns}/documents", wrap(self.documents)),
            Route("/ns/{ns}/queue", wrap(self.queue)),
            Route("/ns/{ns}/lint", wrap(self.lint)),
            Route("/ns/{ns}/preview/{ident}", wrap(self.preview)),
            Route("/ns/{ns}/item/{ident}", wrap(self.item), methods=["GET", "POST"]),
            Route("/ns/{ns}/entity/{ident}/correct", wrap(self.correct), methods=["POST"]),
            Route("/ns/{ns}/{kind}/{ident}", wrap(self.thing)),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]

    def _guarded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except BodyTooLarge:
                raise  # (answered 413 already, by the limit outside)
            except HTTPException as exc:  # a form the parser refuses (too many fields…)
                return self.error(request, exc.status_code, str(exc.detail))
            except NotFound as exc:
                return self.error(request, 404, str(exc))
            except BadInput as exc:
                return self.error(request, 400, str(exc))
            except Refused as exc:
                return self.error(request, 409, str(exc))
            except MemorsError as exc:  # the store is busy, a plugin failed: said in one line
                return self.error(request, 503, str(exc))
            except Exception as exc:  # one line for the person, the detail in the log
                log.error("web_error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
                return self.error(request, 500, f"the server failed: {type(exc).__name__}")

        return run

    async def home(self, request: Request) -> Response:
        figures = {f.namespace: f for f in await self.call(self.memory.figures)}
        if self.namespace not in figures:  # served, not written to yet
            empty = dict(pages=0, stale=0, open={})
            figures[self.namespace] = attrs.evolve(
                figures["default"], namespace=self.namespace, **empty
            )
        rows = sorted(figures.items())
        return self.page(request, "home.html", namespaces=rows, served=self.namespace)

    async def login(self, request: Request) -> Response:
        if self.guard.token is None:
            return RedirectResponse("/", status_code=303)
        if request.method == "GET":
            return self.page(request, "login.html", failed=False)
        assert self.logins is not None and self.throttle is not None
        key = client_key(request.scope)
        wait = self.throttle.retry_after(key)
        if wait > 0:  # refused before the form is read or the token compared
            log.warning("web_login_throttled", client=(request.client or ("?",))[0])
            seconds = max(1, math.ceil(wait))
            answer = self.page(request, "login.html", code=429, failed=False, wait=seconds)
            answer.headers["Retry-After"] = str(seconds)
            return answer
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        if not self.guard.token_ok(form.get("token")):
            self.throttle.failed(key)
            log.warning("web_login_refused", client=(request.client or ("?",))[0])
            return self.page(request, "login.html", code=401, failed=True)
        response = RedirectResponse("/", status_code=303)
        login = self.logins.start()
        self.set_cookie(response, LOGIN_COOKIE, login, max_age=math.ceil(self.logins.ttl_s))
        log.info("web_login", client=(request.client or ("?",))[0])
        return response

    async def logout(self, request: Request) -> Response:
        """End this browser's login (a form, so another site cannot sign anyone out)."""
        if self.logins is None:
            return RedirectResponse("/", status_code=303)
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        self.logins.end(request.cookies.get(LOGIN_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(
            LOGIN_COOKIE, path="/", secure=self.secure_cookies, httponly=True, samesite="strict"
        )
        return response

    async def go(self, request: Request) -> Response:
        ns = check_namespace(request.query_params.get("ns") or self.namespace)
        entity = (request.query_params.get("entity") or "").strip()
        if entity:  # an entity by its name (a page's [[Name]] link)
            view = await self.call(self.memory.entity, entity, namespace=ns)
            return RedirectResponse(web_path(view.address, ns), status_code=303)
        address = (request.query_params.get("address") or "").strip()
        view = await self.call(self.memory.get, address, namespace=ns)
        return RedirectResponse(web_path(view.address, ns), status_code=303)

    async def namespace_redirect(self, request: Request) -> Response:
        return RedirectResponse(f"/ns/{quote(self.ns_of(request))}/", status_code=308)

    async def namespace_home(self, request: Request) -> Response:
        ns = self.ns_of(request)
        # One read: the figures, the first entities, and people's corrections,
        # newest first (what was renamed, merged, undone or reopened here).
        seen = await self.call(
            self.memory.overview, ns, entities=PAGE_SIZE, corrections=CORRECTIONS_SHOWN
        )
        return self.page(
            request,
            "namespace.html",
            ns=ns,
            metrics=seen.figures,
            entities=seen.entities.entities,
            total=seen.entities.total,
            corrections=seen.corrections,
            corrections_total=seen.corrections_total,
            labels=await self.labels(ns, [c.target for c in seen.corrections]),
        )

    async def entities(self, request: Request) -> Response:
        ns = self.ns_of(request)
        offset = _int(request.query_params.get("offset"), 0)
        listing = await self.call(self.memory.entities, ns, offset=offset, limit=PAGE_SIZE)
        total = listing.total
        return self.page(
            request,
            "entities.html",
            ns=ns,
            entities=listing.entities,
            pager=_pager(request, offset, total),
            total=total,
        )

    async def pages(self, request: Request) -> Response:
        """The namespace's live pages (``stale=1``: the stale ones), sorted and paged."""
        ns = self.ns_of(request)
        params = request.query_params
        offset = _int(params.get("offset"), 0)
        sort = params.get("sort") or "title"
        stale = params.get("stale") in ("1", "on", "true")
        listing = await self.call(
            self.memory.pages, ns, sort=sort, stale=stale, offset=offset, limit=PAGE_SIZE
        )
        return self.page(
            request,
            "pages.html",
            ns=ns,
            pages=listing.pages,
            total=listing.total,
            stale=stale,
            sort=sort,
            sorts=_sort_links(request, PAGE_SORTS, sort),
            pager=_pager(request, offset, listing.total),
        )

    async def documents(self, request: Request) -> Response:
        """The namespace's live documents, sorted and paged."""
        ns = self.ns_of(request)
        params = request.query_params
        offset = _int(params.get("offset"), 0)
        sort = params.get("sort") or "title"
        listing = await self.call(
            self.memory.documents, ns, sort=sort, offset=offset, limit=PAGE_SIZE
        )
        return self.page(
            request,
            "documents.html",
            ns=ns,
            documents=listing.documents,
            total=listing.total,
            sort=sort,
            sorts=_sort_links(request, DOCUMENT_SORTS, sort),
            pager=_pager(request, offset, listing.total),
        )

    async def labels(self, ns: str, addresses: Any) -> dict[str, str]:
        """Names and titles for addresses a view shows (``m.addr`` shows them)."""
        return await self.call(self.memory.labels, [a for a in addresses if a], namespace=ns)

    async def search(self, request: Request) -> Response:
        ns = self.ns_of(request)
        params = request.query_params
        query = params.get("q", "")
        granularity = params.get("granularity") or "passage"
        mode = params.get("mode") or None  # none: hybrid where passages have vectors
        limit = _int(params.get("limit"), 20)
        as_of = params.get("as_of") or None
        results: list[Any] = []
        labels: dict[str, str] = {}
        notice = used = None
        if query.strip():
            found = await self.call(
                self.memory.search,
                query,
                granularity=granularity,
                limit=limit,
                as_of=as_of,
                namespace=ns,
                mode=mode,
            )
            results, used, notice = found.results, found.mode, found.notice
            labels = await self.labels(ns, [r.address for r in results])
        return self.page(
            request,
            "search.html",
            ns=ns,
            labels=labels,
            query=query,
            granularity=granularity,
            mode=mode or "",
            modes=MODES,
            used=used,
            limit=limit,
            as_of=as_of or "",
            results=results,
            notice=notice,
            granularities=GRANULARITIES,
        )

    async def queue(self, request: Request) -> Response:
        ns = self.ns_of(request)
        params = request.query_params
        kind = params.get("kind") or None
        status = params.get("status", "open") or None
        after = _int(params.get("after"), 0)
        listing = await self.call(
            self.memory.items, kind, status, ns, after=after, limit=PAGE_SIZE + 1
        )
        items = listing.items[:PAGE_SIZE]
        more = len(listing.items) > PAGE_SIZE
        total = await self.call(self.memory.item_count, kind, status, ns)
        counts = {}
        # (a kind whose plugin failed to load still has its stored items listed)
        for name in sorted({*self.memory.kinds.names(), *self.memory.plugin_errors}):
            counts[name] = await self.call(self.memory.item_count, name, status, ns)
        rows = [(i, self._summary(i.kind, i.payload)) for i in items]
        base = {"kind": kind or "", "status": status or ""}
        next_url = f"?{urlencode({**base, 'after': items[-1].id})}" if more and items else None
        return self.page(
            request,
            "queue.html",
            ns=ns,
            rows=rows,
            kind=kind,
            status=status,
            counts=counts,
            total=total,
            next_url=next_url,
            first_url=f"?{urlencode(base)}" if after else None,
            statuses=("open", "done", "skipped", "obsolete"),
        )

    async def lint(self, request: Request) -> Response:
        ns = self.ns_of(request)
        report = await self.call(self.memory.lint, ns)
        offset = _int(request.query_params.get("offset"), 0)
        findings = report.findings[offset : offset + PAGE_SIZE]
        labels = await self.labels(
            ns, [a for f in findings for a in (f.address, *(f.related or ()))]
        )
        return self.page(
            request,
            "lint.html",
            labels=labels,
            ns=ns,
            findings=findings,
            total=len(report.findings),
            pager=_pager(request, offset, len(report.findings)),
        )

    async def preview(self, request: Request) -> Response:
        """A passage (or any row) as a small fragment, for a hover preview."""
        ns = self.ns_of(request)
        ident = request.path_params["ident"]
        view = await self.call(self.memory.get, f"memo://passage/{ident}", namespace=ns)
        doc = await self.call(self.memory.get, view.document, namespace=ns)
        response = HTMLResponse(
            self.env.get_template("preview.html").render(
                p=view,
                doc=doc,
                url=lambda a: web_path(a, ns),
            )
        )
        return _secure(response)

    async def thing(self, request: Request) -> Response:
        ns = self.ns_of(request)
        kind = request.path_params["kind"]
        ident = request.path_params["ident"]
        if kind not in WEB_TYPES:
            return self.error(request, 404, f"no such view: /{kind}/")
        view = await self.call(self.memory.get, f"memo://{kind}/{ident}", namespace=ns)
        # what a forgotten or superseded row names as `by`, by its name or title
        records = (getattr(view, key, None) for key in ("forgotten", "superseded"))
        request.state.labels = await self.labels(
            ns, [r.get("by") for r in records if isinstance(r, dict)]
        )
        show = getattr(self, f"_show_{kind}")
        return await show(request, ns, view)

    # --- one row of each type ------------------------------------------------------

    async def _show_document(self, request: Request, ns: str, view: Any) -> Response:
        offset = _int(request.query_params.get("offset"), 0)
        refs = await self.call(
            self.memory.passage_refs,
            [a.rsplit("/", 1)[1] for a in view.passages[offset : offset + PAGE_SIZE]],
        )
        return self.page(
            request,
            "document.html",
            ns=ns,
            d=view,
            passages=refs,
            pager=_pager(request, offset, len(view.passages)),
            first=offset,
        )

    async def _show_passage(self, request: Request, ns: str, view: Any) -> Response:
        doc = await self.call(self.memory.get, view.document, namespace=ns)
        found = await self.call(self.memory.get_many, view.entities[:PAGE_SIZE], namespace=ns)
        names = [(a, e.name) for a, e in found.items()]
        return self.page(request, "passage.html", ns=ns, p=view, doc=doc, entities=names)

    async def _show_fact(self, request: Request, ns: str, view: Any) -> Response:
        return self.page(request, "fact.html", ns=ns, f=view)

    async def _show_entity(self, request: Request, ns: str, view: Any) -> Response:
        offset = _int(request.query_params.get("offset"), 0)
        history = await self.call(self.memory.fact_history, view.address, namespace=ns)
        absorbed = await self.call(self.memory.absorbed, view.address, namespace=ns)
        versions: list[Any] = []
        if view.page:
            versions = await self._versions(ns, view.page)
        shown = view.passages[offset : offset + PAGE_SIZE]
        labels = await self.labels(ns, [p.document for p in shown] + [view.merged_into or ""])
        return self.page(
            request,
            "entity.html",
            labels=labels,
            ns=ns,
            e=view,
            passages=shown,
            pager=_pager(request, offset, len(view.passages)),
            total=len(view.passages),
            timeline=render.timeline(history),
            history=history,
            absorbed=absorbed,
            versions=versions,
        )

    async def _versions(self, ns: str, address: str, seen: Any = None) -> list[Any]:
        """Every version of the page at ``address``, newest first (``seen``:
        that version's view, already read)."""
        newest = seen or await self.call(self.memory.get, address, namespace=ns)
        while newest.superseded and newest.superseded.get("by"):
            newest = await self.call(self.memory.get, newest.superseded["by"], namespace=ns)
        out = [newest]
        while out[-1].previous and len(out) < 500:
            out.append(await self.call(self.memory.get, out[-1].previous, namespace=ns))
        return out

    async def _show_page(self, request: Request, ns: str, view: Any) -> Response:
        numbers = {a: n for n, a in enumerate(view.sources, 1)}
        wanted = list(
            dict.fromkeys(
                [*view.sources, *(a for s in view.sentences for a in s.sources), *view.facts]
            )
        )
        sources = await self.call(self.memory.get_many, wanted, namespace=ns)
        # The cited documents' titles and the entity's name, in one read.
        documents = await self.labels(
            ns, [view.entity, *(getattr(r, "document", None) for r in sources.values())]
        )

        def title_of(address: str) -> str:
            row = sources.get(address)
            if row is None:
                return address
            if row.type == "fact":
                return f"fact: {row.subject_name} {row.predicate} {row.value} ({row.status})"
            where = documents.get(row.document) or row.document
            return f"{render.clip(row.text, PREVIEW_CHARS)}\n— {where} ({row.status})"

        pairs = [(s.text, s.sources, s.flags) for s in view.sentences]
        body, unplaced = render.page_html(
            render.without_title(view.content, view.title),
            pairs,
            numbers,
            lambda a: web_path(a, ns),
            title_of,
            lambda name: f"/go?{urlencode({'ns': ns, 'entity': name})}",
        )
        versions = await self._versions(ns, view.address, view)
        diff = ""
        if view.previous:
            at = next(i for i, v in enumerate(versions) if v.address == view.address) + 1
            older = versions[at] if at < len(versions) else None
            older = older or await self.call(self.memory.get, view.previous, namespace=ns)
            diff = render.unified(
                older.content, view.content, f"version {older.version}", f"version {view.version}"
            )
        return self.page(
            request,
            "page.html",
            ns=ns,
            p=view,
            body=body,
            entity_name=documents.get(view.entity, view.entity),
            sources=sources,
            documents=documents,
            numbers=numbers,
            unplaced=[view.sentences[i] for i in unplaced],
            unverified=[s for s in view.sentences if s.flags],
            omitted=(view.flags or {}).get("omission") or [],
            versions=versions,
            diff=render.diff_lines(diff),
        )

    # --- work items ------------------------------------------------------------------

    def _summary(self, kind: str, payload: Any) -> str:
        plugin = self.memory.kinds.get(kind)
        try:
            return plugin.summary(payload) if plugin else ""
        except Exception:  # a plugin's summary failing must not take the queue down
            return ""

    async def item(self, request: Request) -> Response:
        ns = self.ns_of(request)
        ident = request.path_params["ident"]
        view = await self.call(self.memory.get, f"memo://item/{ident}", namespace=ns)
        if request.method == "GET":
            return await self._show_item(request, ns, view)
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        if form.get("resolve") == "refresh":
            return await self._refresh_item(request, ns, view)
        if form.get("resolve") == "reopen":
            reason = (form.get("reason") or "").strip() or None
            done = await self.call(self.memory.reopen, view.id, reason=reason, namespace=ns)
            log.info("web_reopen", item=view.id, reopened=done.item)
            target = done.item if done.item is not None else view.id
            return RedirectResponse(web_path(f"memo://item/{target}", ns), status_code=303)
        try:
            resolution = _resolution(view.kind, form)
        except BadInput as exc:
            return await self._show_item(request, ns, view, problem=str(exc), form=form)
        dry_run = form.get("action") == "dry-run"
        try:
            report = await self.call(
                self.memory.submit,
                view.id,
                resolution,
                dry_run=dry_run,
                force=form.get("force") == "on",
                fingerprint=form.get("fingerprint") or None,
                namespace=ns,
            )
        except MemorsError as exc:  # refused (changed, already done), bad input, busy
            log.info("web_submit_refused", item=view.id, error=str(exc)[:200])
            view = await self.call(self.memory.get, f"memo://item/{ident}", namespace=ns)
            return await self._show_item(
                request,
                ns,
                view,
                problem=str(exc),
                form=form,
                code=409 if isinstance(exc, Refused) else 400,
            )
        log.info(
            "web_submit",
            item=view.id,
            kind=view.kind,
            dry_run=dry_run,
            stored=getattr(report, "stored", None),
        )
        if report.stored and not dry_run:
            view = await self.call(self.memory.get, f"memo://item/{ident}", namespace=ns)
        return await self._show_item(request, ns, view, report=report, form=form, dry_run=dry_run)

    async def _refresh_item(self, request: Request, ns: str, view: Any) -> Response:
        """Rescan the item's kind (``compact`` of that kind alone), so an open
        item whose inputs changed gets its current payload, then show it."""
        if view.status != "open":
            return await self._show_item(
                request, ns, view, problem=f"item {view.id} is {view.status}: nothing to refresh"
            )
        before = view.fingerprint
        await self.call(self.memory.compact, [view.kind], 0, ns)
        view = await self.call(self.memory.get, view.address, namespace=ns)
        log.info("web_item_refreshed", item=view.id, kind=view.kind, status=view.status)
        if view.status != "open":
            notice = (
                f"Refreshed: this item is {view.status} now (what it asked for no longer holds)."
            )
        elif view.fingerprint != before:
            notice = "Refreshed: its inputs had changed, and the payload below is the current one."
        else:
            notice = "Refreshed: nothing it was built from had changed."
        return await self._show_item(request, ns, view, notice=notice)

    async def correct(self, request: Request) -> Response:
        """A person's correction of an entity: rename it, or undo a merge."""
        ns = self.ns_of(request)
        address = f"memo://entity/{request.path_params['ident']}"
        view = await self.call(self.memory.get, address, namespace=ns)
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        action = form.get("correct")
        if action == "rename":
            done = await self.call(
                self.memory.rename_entity, view.address, form.get("name") or "", namespace=ns
            )
        elif action == "unmerge":
            entity = form.get("entity") or view.address
            if not isinstance(entity, str) or not entity.startswith("memo://entity/"):
                raise BadInput("choose the entity to separate")
            done = await self.call(self.memory.undo_merge, entity, namespace=ns)
        else:
            raise BadInput("choose a correction: rename, or undo a merge")
        log.info("web_correct", action=done.action, address=done.address)
        return RedirectResponse(web_path(done.address, ns), status_code=303)

    async def _show_item(
        self,
        request: Request,
        ns: str,
        view: Any,
        *,
        report: Any = None,
        problem: str | None = None,
        form: dict[str, Any] | None = None,
        dry_run: bool = False,
        code: int | None = None,
        notice: str | None = None,
    ) -> Response:
        kind = self.memory.kinds.get(view.kind)
        payload = view.payload if isinstance(view.payload, dict) else {"payload": view.payload}
        fields: list[dict[str, Any]] = []
        if kind is not None and view.kind not in BUILT_IN_FORMS:
            fields = _resolution_fields(kind.resolution)
        content, title = "", ""
        if view.kind in ("page", "stale"):
            previous = payload.get("page") or {}
            content = previous.get("content", "") if isinstance(previous, dict) else ""
            entity = payload.get("entity") or {}
            title = (previous.get("title") if isinstance(previous, dict) else None) or (
                entity.get("name", "") if isinstance(entity, dict) else ""
            )
        if form:
            content = form.get("content", content)
            title = form.get("title", title)
        checks = []
        if report is not None:
            for name, result in (report.checks or {}).items():
                flagged = getattr(result, "flagged", [])
                checks.append((name, getattr(result, "passed", True), flagged))
        produced = None
        if view.status == "done" and view.kind in ("page", "stale"):
            produced = await self.call(self.memory.produced, view.id, namespace=ns)
        shown = [produced, getattr(report, "address", None) if report else None]
        shown += [c.get("address") for c in payload.get("changes") or [] if isinstance(c, dict)]
        return self.page(
            request,
            "item.html",
            labels=await self.labels(ns, [a for a in shown if isinstance(a, str)]),
            produced=produced,
            notice=notice,
            code=code or (400 if problem else 200),
            ns=ns,
            i=view,
            payload=payload,
            summary=self._summary(view.kind, payload),
            known=kind is not None,
            fields=fields,
            facts_by={
                f["address"]: f
                for f in payload.get("facts") or []
                if isinstance(f, dict) and "address" in f
            },
            content=content,
            title=title,
            form=form or {},
            report=report,
            dry_run=dry_run,
            checks=checks,
            diff=render.diff_lines(getattr(report, "diff", "") or "") if report else [],
            problem=problem,
        )

    def build(self) -> Starlette:
        return Starlette(routes=self.routes())


# --- helpers ---------------------------------------------------------------------------


def _secure(response: Response) -> Response:
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _int(value: str | None, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadInput(f"expected a whole number, got {value[:40]!r}") from None
    if number < 0:
        raise BadInput(f"expected a whole number ≥ 0, got {number}")
    if number > MAX_NUMBER:
        raise BadInput(f"expected a whole number up to {MAX_NUMBER}, got {value[:40]}")
    return number


def _pager(request: Request, offset: int, total: int) -> dict[str, Any]:
    """Links to the previous and next :data:`PAGE_SIZE` rows of a list."""

    def at(n: int) -> str:
        params = dict(request.query_params)
        params["offset"] = str(n)
        return f"?{urlencode(params)}"

    return {
        "first": offset + 1 if total else 0,
        "last": min(offset + PAGE_SIZE, total),
        "total": total,
        "prev": at(max(offset - PAGE_SIZE, 0)) if offset > 0 else None,
        "next": at(offset + PAGE_SIZE) if offset + PAGE_SIZE < total else None,
    }


def _sort_links(request: Request, sorts: tuple[str, ...], current: str) -> list[Any]:
    """``(name, url, on)`` for each way a list can be sorted (from its first row)."""
    out = []
    for name in sorts:
        params = {k: v for k, v in request.query_params.items() if k != "offset"}
        params["sort"] = name
        out.append((name, f"?{urlencode(params)}", name == current))
    return out


def _resolution_fields(cls: type) -> list[dict[str, Any]]:
    """A third-party kind's declared resolution fields, for a generic form."""
    if not attrs.has(cls):
        return []
    out = []
    for field in attrs.fields(cls):
        required = field.default is attrs.NOTHING
        out.append(
            {
                "name": field.name,
                "type": getattr(field.type, "__name__", str(field.type or "")),
                "required": required,
            }
        )
    return out


def _resolution(kind: str, form: dict[str, Any]) -> dict[str, Any]:
    """The resolution a form describes, in the shape ``submit`` takes."""
    lists: dict[str, list[str]] = form.get("_lists", {})
    action = form.get("resolve", "")
    if action == "skip":
        return {"skip": True, "reason": (form.get("reason") or "").strip()}
    if action == "json" or (kind not in BUILT_IN_FORMS and form.get("resolution_json")):
        return resolution_object(form.get("resolution_json") or "", "the resolution")
    if action == "accept":
        out: dict[str, Any] = {"accept": True}
        for key in ("survivor", "name"):
            value = (form.get(key) or "").strip()
            if value:
                out[key] = value
        return out
    if action == "reject":
        return {"reject": True}
    if action == "keep":
        keep = [k for k in lists.get("keep", []) if k]
        if not keep:
            raise BadInput("choose at least one to keep")
        return {"keep": keep if kind == "duplicate" else keep[0]}
    if action == "bound":
        fact = form.get("bound_fact") or ""
        bound: dict[str, Any] = {"fact": fact}
        for key in ("valid_from", "valid_to"):
            value = (form.get(key) or "").strip()
            if value:
                bound[key] = value
        if len(bound) == 1:
            raise BadInput("a bound needs a new valid_from or valid_to")
        return {"bound": bound}
    if action == "page":
        # A browser sends a text area's lines ending in CRLF; the store keeps LF,
        # as every other frontend writes it, so diffs compare lines, not endings.
        content = (form.get("content") or "").replace("\r\n", "\n")
        return {"content": content, "title": (form.get("title") or "").strip()}
    if action == "fields":
        out: dict[str, Any] = {}
        for key, value in form.items():
            if key.startswith("field_") and value != "":
                out[key[len("field_") :]] = field_value(value)
        return out
    raise BadInput("choose what to do with this item")


def build_web_app(
    memory: Memory,
    namespace: str,
    token: str | None,
    max_body: int,
    *,
    logins: Logins | None = None,
    throttle: Throttle | None = None,
    secure_cookies: bool = False,
) -> Starlette:
    """The web view's ASGI app (its auth for remote use sits in front of it;
    ``logins`` and ``throttle`` are shared with it)."""
    if token is not None and (logins is None or throttle is None):
        raise ValueError("a token needs its logins and throttle")
    view = WebView(
        memory,
        namespace,
        token,
        max_body,
        logins=logins,
        throttle=throttle,
        secure_cookies=secure_cookies,
    )
    return view.build()


__all__ = ["PAGE_SIZE", "WebView", "build_web_app"]
