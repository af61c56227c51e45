"""The MCP tools: thin wrappers over :class:`memors_core.Memory`.

Each tool validates nothing of its own beyond the JSON types (the schema);
every rule lives in ``Memory``, the same code path the CLI takes. What comes
back is ``wire.to_json`` of what ``Memory`` returns, so the structured output
has exactly SPEC §10's shapes. A :class:`MemorsError` becomes a tool error
(``is_error``) carrying its one-line message; the server keeps serving.

Each tool is a module-level function whose signature is its input schema
and whose docstring is its description; :data:`TOOLS` lists them and
:func:`build_tools` makes them the SDK's ``Tool`` objects for a server.
No ``from __future__ import annotations`` here: the SDK reads the
signatures' annotations (``Annotated`` with a ``Field``) as real objects.
"""

import json
from collections.abc import Callable
from string import Template
from typing import Annotated, Any, Literal, NotRequired, Protocol

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict

from memors_core import MemorsError, Memory
from memors_core.domain.grounding import WRITING_RULES
from memors_core.log import get_logger
from memors_core.settings import limit_from_env
from memors_core.wire import to_json, with_web_url

from .guide import about, item_summary, kinds_guide
from .paging import NOTE_BYTES, first_page, fit, page_answer

log = get_logger("memors.mcp")

#: How many items ``compact`` returns over MCP unless told otherwise, so an
#: agent's context is not flooded by a large queue.
COMPACT_DEFAULT_LIMIT = 20
#: The byte budget of one ``compact`` answer's items (their JSON, UTF-8), set
#: by this variable; the first item always comes whole, even if it alone is larger.
COMPACT_BYTES_SETTING = "MEMORS_MCP_COMPACT_BYTES"
COMPACT_DEFAULT_BYTES = 32 * 1024


def compact_budget() -> int:
    """The byte budget of a ``compact`` answer (``MEMORS_MCP_COMPACT_BYTES``)."""
    return limit_from_env(COMPACT_BYTES_SETTING, COMPACT_DEFAULT_BYTES)


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size in an answer: its JSON in UTF-8."""
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


# --- output shapes (SPEC §10) ---------------------------------------------------------------


class Paged(TypedDict):
    """How a long answer was cut (see docs/mcp.md, "Answers"): this
    ``page`` of ``pages``; per list, its ``total``, the ``first`` shown
    (from 1) and how many are ``shown``; ``next`` what to pass for the next page."""

    page: int
    pages: int
    lists: dict[str, dict[str, int]]
    next: NotRequired[dict[str, Any]]
    #: Where no ``next`` can be given (a dry run recorded nothing): why.
    rest: NotRequired[str]


class RememberOutput(TypedDict):
    """The stored document, its passages and the entities they mention."""

    document: str
    passages: list[str]
    entities: list[str]
    paged: NotRequired[Paged]


class RecordFactOutput(TypedDict):
    """The new fact's address."""

    fact: str


class ProposeMergeOutput(TypedDict):
    """The merge candidate: its id, the two entities (survivor first), its status."""

    candidate: int
    entities: list[str]
    status: str


class CorrectedOutput(TypedDict):
    """A correction: its audit row, what it was about, the pages now stale, and for a
    reopened item the item open for it now (null if it no longer applies)."""

    correction: int
    action: str
    address: str
    message: str
    stale: list[str]
    item: int | None


class SearchHit(TypedDict):
    address: str
    granularity: str
    text: str
    score: float
    #: A page stored over its checks' flags: its sentences no source vouches for.
    unverified: NotRequired[list[str]]


class SearchOutput(TypedDict):
    """Hits ranked best first (a higher score is a better match), and how
    passages were ranked."""

    results: list[SearchHit]
    mode: Literal["lexical", "semantic", "hybrid"]
    notice: NotRequired[str]
    paged: NotRequired[Paged]


class TombstoneRecord(TypedDict):
    at: str
    reason: str | None
    by: NotRequired[str]
    version: NotRequired[int]
    item: NotRequired[str]


class GetOutput(TypedDict):
    """The thing's own fields plus its links (they depend on its type); a
    forgotten or superseded row says when, why and by what."""

    address: str
    type: str
    status: str
    #: Where the web view at ``/`` of ``serve --http`` shows it (a path).
    url: str
    forgotten: NotRequired[TombstoneRecord]
    superseded: NotRequired[TombstoneRecord]
    paged: NotRequired[Paged]


class ForgetOutput(TypedDict):
    """What was tombstoned (a document takes its live passages with it)."""

    address: str
    status: str
    forgotten: list[str]
    paged: NotRequired[Paged]


class ItemOutput(TypedDict):
    id: int
    kind: str
    status: str
    fingerprint: str
    payload: dict[str, Any]


class NextPage(TypedDict):
    after: int


class CompactOutput(TypedDict):
    """Open items after the scan, oldest first; ``open`` counts all of them,
    ``more`` those after the last item returned (``next`` asks for them). A
    first item too large for the answer carries ``paged`` (see :class:`Paged`):
    ``get`` its address with ``page`` for the rest of its payload."""

    namespace: str
    created: int
    open: int
    items: list[ItemOutput]
    more: int
    next: NotRequired[NextPage]
    errors: NotRequired[list[dict[str, Any]]]


class CheckOutput(TypedDict):
    passed: bool
    flagged: list[dict[str, Any]]


class SubmitOutput(TypedDict):
    """The checks' verdict and, when ``stored``, the new address."""

    item: int
    kind: str
    status: str
    stored: bool
    address: str | None
    diff: str
    checks: dict[str, CheckOutput]
    message: str
    kept: NotRequired[list[str]]
    forgotten: NotRequired[list[str]]
    left: NotRequired[list[str]]
    superseded: NotRequired[list[str]]
    bounded: NotRequired[str]
    bound: NotRequired[dict[str, str | None]]
    survivor: NotRequired[str]
    merged: NotRequired[str]
    paged: NotRequired[Paged]


class Finding(TypedDict):
    rule: str
    address: str
    message: str
    related: list[str]


class CorrectionEntry(TypedDict):
    id: int
    action: str
    target: str
    detail: dict[str, Any]
    created_at: str
    summary: str


class CorrectionsOutput(TypedDict):
    """The audit of corrections, oldest first, each with what it did in one line."""

    namespace: str
    corrections: list[CorrectionEntry]
    paged: NotRequired[Paged]


class LintOutput(TypedDict):
    """Problems found, each with a rule name and addresses."""

    namespace: str
    findings: list[Finding]
    paged: NotRequired[Paged]


# --- plumbing -------------------------------------------------------------------------------


def tool_result(data: Any, summary: str) -> CallToolResult:
    """A structured result: the data once, as ``structured_content``, and a
    short summary as text (see docs/mcp.md, "Answers")."""
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=data)


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _addresses(addresses: list[str], most: int = 5) -> str:
    shown = ", ".join(addresses[:most])
    return shown + (f" and {len(addresses) - most} more" if len(addresses) > most else "")


def summarise(
    name: str, data: dict[str, Any], kinds: Any = None, abouts: dict[int, str] | None = None
) -> str:
    """One or two lines saying what a tool's structured result holds (for
    ``compact``, a line per item in its kind's words, from ``kinds``: the
    store's :class:`~memors_core.plugins.kinds.KindRegistry`; ``abouts``:
    those words said before the payloads were paged, by item id)."""
    if name == "remember":
        return (
            f"remembered {data['document']}: {len(data['passages'])} passage(s), "
            f"{len(data['entities'])} entit(ies)"
        )
    if name == "record_fact":
        return f"recorded {data['fact']}"
    if name == "propose_merge":
        return f"merge candidate {data['candidate']} ({data['status']}): " + " + ".join(
            data["entities"]
        )
    if name in ("rename_entity", "undo_merge", "reopen"):
        stale = data.get("stale") or []
        return data["message"] + (f"; stale now: {_addresses(stale)}" if stale else "")
    if name == "search":
        hits = [h["address"] for h in data["results"]]
        return f"{len(hits)} result(s)" + (f": {_addresses(hits)}" if hits else "")
    if name == "get":
        line = f"{data['address']} ({data['type']}, {data['status']})"
        record = data.get(data["status"])
        if isinstance(record, dict):
            line += f" at {record['at']}" + (f" by {record['by']}" if record.get("by") else "")
        return line
    if name == "forget":
        return f"{data['address']} is {data['status']}; forgot {len(data['forgotten'])} row(s)"
    if name == "compact":
        items = data["items"]
        lines = [
            f"namespace {data['namespace']}: {data['open']} open item(s), {data['created']} new; "
            f"{len(items)} here" + (":" if items else "")
        ]
        for item in items:
            about_it = (abouts or {}).get(item["id"])
            if about_it is None:
                about_it = item_summary(item, kinds) if kinds is not None else ""
            lines.append(
                f"- item {item['id']} ({item['kind']})" + (f": {about_it}" if about_it else "")
            )
            if "next" in item.get("paged", {}):
                lines.append(f"  its payload: {paging_line('get', item['paged'])}")
        if "next" in data:
            lines.append(
                f"{data['more']} more: call compact with after={data['next']['after']} "
                "(or submit or skip these, then call compact again)"
            )
        return "\n".join(lines)
    if name == "submit":
        line = f"item {data['item']} ({data['kind']}): {data.get('message') or data['status']}"
        if data.get("address"):
            line += f"; stored {data['address']}"
        flagged = [n for n, c in data["checks"].items() if not c["passed"]]
        return line + (f"; flagged by {', '.join(flagged)}" if flagged else "")
    if name == "lint":
        return f"namespace {data['namespace']}: {len(data['findings'])} finding(s)"
    if name == "corrections":
        shown = data["corrections"]
        return f"namespace {data['namespace']}: {len(shown)} correction(s)" + "".join(
            f"\n- {c['id']} {c['action']}: {c['summary']}" for c in shown
        )
    return name


def run_tool(
    name: str,
    call: Callable[[], Any],
    shape: Callable[[Any], Any] | None = None,
    kinds: Any = None,
) -> CallToolResult:
    """Run one Memory call: its JSON as the result, or its error as a tool error."""
    abouts = None
    try:
        data = to_json(call())
        if name == "compact" and kinds is not None:  # in the words of whole payloads
            abouts = {i["id"]: item_summary(i, kinds) for i in data["items"]}
        if shape is not None:
            data = shape(data)  # (paging may find the page asked for past the last)
        data = fit(data, compact_budget() + NOTE_BYTES)  # every tool's answer, whatever it is
    except MemorsError as exc:
        log.info("tool_error", tool=name, code=exc.code, error=exc.message)
        return tool_error(exc.message)
    summary = summarise(name, data, kinds, abouts)
    paged = data.get("paged") if isinstance(data, dict) else None
    if isinstance(paged, dict) and isinstance(paged.get("next"), dict):
        summary += f"\n{paging_line(name, paged)}"
    # after a list of items the note stands on its own line, not on the last item's
    joint = "\n" if "\n" in summary else " "
    return tool_result(data, summary + joint + "(the full result is structured content)")


def paging_line(name: str, paged: dict[str, Any]) -> str:
    """Where the rest of a long answer is: one line for the text summary."""
    shown = ", ".join(
        f"{key} {part['first']}-{part['first'] + part['shown'] - 1} of {part['total']}"
        if part["shown"]
        else f"{key}: none of {part['total']} here"
        for key, part in paged["lists"].items()
    )
    following = paged["next"]
    if "get" in following:
        how = f"call get with address={following['get']} for all of them"
    else:
        args = ", ".join(f"{k}={v}" for k, v in following.items())
        how = f"call {'get' if 'address' in following else name} with {args}"
    return f"page {paged['page']} of {paged['pages']} ({shown}): {how}"


def fit_budget(data: dict[str, Any], budget: int, limit: int) -> dict[str, Any]:
    """Cut a compact answer's items to ``budget`` bytes, count the rest in
    ``more`` and say where to resume. A first item larger than the budget
    comes alone, its payload's lists paged (``get`` the item with ``page``
    for the rest)."""
    items, kept, used = data["items"], [], 0
    for item in items:
        size = item_bytes(item)
        if kept and used + size > budget:
            break
        if size > budget:
            item = page_answer(item, budget, 1, address=f"memo://item/{item['id']}")
            size = item_bytes(item)
        kept.append(item)
        used += size
    data["more"] = data.get("more", 0) + len(items) - len(kept)
    data["items"] = kept
    if data["more"] and kept:
        data["next"] = {"after": kept[-1]["id"]}
    return data


def submit_page(data: dict[str, Any], budget: int) -> dict[str, Any]:
    """A submission's answer within ``budget``: its lists' first page (a
    duplicate item's ``kept``, ``forgotten``, ``left``) with their counts;
    the rest is in the done item's resolution (``outcome``): ``get`` the
    item, page by page. A dry run or a refusal recorded nothing to read back."""
    item = f"memo://item/{data['item']}"
    if data.get("stored"):
        return first_page(data, budget, item)
    return first_page(
        data, budget, None, rest=f"nothing was recorded: once stored, get {item} lists them all"
    )


def _annotations(
    title: str, *, read_only: bool, destructive: bool = False, idempotent: bool = False
):
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive if not read_only else None,
        idempotent_hint=idempotent if not read_only else None,
        open_world_hint=False,
    )


# --- the tools ------------------------------------------------------------------------------
#
# One module-level function per tool: its signature is the tool's input schema and its
# docstring the tool's description. Both name the store's own figures (its limits, the
# answer budget, the server's namespace, the installed kinds) as ``$name``, filled in when
# the server is built (:func:`build_tools`). A tool finds the store and the server's
# namespace through the SDK's :class:`Context` (``ctx.mcp_server``, a MemorsMCPServer).


class ToolHost(Protocol):
    """What a tool answers from: the server it is registered on."""

    memory: Memory
    #: The namespace a call without ``namespace`` works in.
    namespace: str
    #: The byte budget of one answer (:func:`compact_budget` when the server was built).
    budget: int

    async def brief(self, call: Callable[[], CallToolResult]) -> CallToolResult:
        """``call()``'s answer, for a read that takes well under a millisecond:
        run on the event loop where the server has one client (stdio), on a
        worker thread where a wait would hold up other clients (HTTP)."""
        ...


def _host(ctx: Context) -> ToolHost:
    return ctx.mcp_server  # type: ignore[return-value]  # a MemorsMCPServer


def _ns(host: ToolHost, namespace: str | None) -> str:
    return host.namespace if namespace is None else namespace


Namespace = Annotated[
    str | None,
    Field(
        description=(
            "Namespace to work in: 1-64 letters, digits, '-', '_' or '.'. Default: "
            "$namespace (the server's). Nothing in one namespace is visible "
            "from another; an unknown namespace is simply empty."
        )
    ),
]


Page = Annotated[
    int,
    Field(
        description=(
            "Which page of a long answer (from 1). An answer stays within about $budget "
            "bytes: a longer one says `paged` (its lists' counts) and `paged.next`."
        ),
        ge=1,
        strict=True,
    ),
]


def remember(
    ctx: Context,
    text: Annotated[
        str,
        Field(
            description=(
                "The document's full text (Markdown or plain). It is split into passages "
                "at blank lines; a heading travels with the paragraph after it. At most "
                "$document_bytes bytes of UTF-8."
            )
        ),
    ],
    uri: Annotated[
        str | None,
        Field(
            description=(
                "Where the text came from (a path or URL). Remembering the same uri again "
                "with changed text makes a new version: unchanged passages stay, changed "
                "ones are superseded."
            )
        ),
    ] = None,
    title: Annotated[str | None, Field(description="The document's title.")] = None,
    entities: Annotated[
        list[str] | None,
        Field(
            description=(
                "Names of the subjects every passage of this document is about (created "
                "if new; matched case-insensitively). [[Wiki Links]] in the text are "
                "entities too."
            )
        ),
    ] = None,
    metadata: Annotated[
        dict[str, Any] | None,
        Field(description="Any JSON object to keep with the document."),
    ] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, RememberOutput]:
    """Store a document in long-term memory so it can be searched and compacted into pages
    later. Use it for anything worth recalling in a later conversation: notes, decisions,
    documentation, meeting summaries. Returns the document's address, its passages'
    addresses and the entities they mention. Raw text is never changed once stored; remember
    again with the same uri to store a new version."""

    host = _host(ctx)
    return run_tool(
        "remember",
        lambda: host.memory.remember(
            text, uri, title, entities, metadata, namespace=_ns(host, namespace)
        ),
        lambda data: first_page(data, host.budget, data["document"]),
    )


def record_fact(
    ctx: Context,
    subject: Annotated[
        str,
        Field(description="The entity the fact is about (a name; created if new)."),
    ],
    predicate: Annotated[
        str,
        Field(
            description=(
                "What is stated, e.g. 'leader', 'version', 'owner'. A subject has one value "
                "of a predicate at a time: two facts that disagree over overlapping time "
                "become a conflict item."
            )
        ),
    ],
    value: Annotated[str, Field(description="The value, as text.")],
    valid_from: Annotated[
        str | None,
        Field(description="ISO 8601 date or datetime the fact starts to hold (absent: always)."),
    ] = None,
    valid_to: Annotated[
        str | None,
        Field(
            description=(
                "ISO 8601 date or datetime the fact stops holding (exclusive; absent: "
                "still holds). Must be after valid_from."
            )
        ),
    ] = None,
    source: Annotated[
        str | None,
        Field(description="Address of the passage the fact comes from (memo://passage/…)."),
    ] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, RecordFactOutput]:
    """Record one fact about an entity: subject, predicate, value, optionally the time it holds
    and the passage it comes from. Use it for crisp, checkable statements (who leads, which
    version, what date). Returns the fact's address. Facts are never edited: record a new
    one with a time range, and conflicting facts are settled through compaction. Text fields
    take at most $field_chars characters."""

    host = _host(ctx)
    return run_tool(
        "record_fact",
        lambda: host.memory.record_fact(
            subject, predicate, value, valid_from, valid_to, source, namespace=_ns(host, namespace)
        ),
    )


def propose_merge(
    ctx: Context,
    entities: Annotated[
        list[str],
        Field(
            description=(
                "Exactly two entity names or addresses. The first survives if the merge is "
                "accepted; the second becomes its alias."
            ),
            min_length=2,
            max_length=2,
        ),
    ],
    again: Annotated[
        bool,
        Field(
            description=(
                "Propose a pair that was rejected before (or whose merge was undone) once "
                "more, on purpose. Without it such a pair is refused."
            ),
            strict=True,
        ),
    ] = False,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, ProposeMergeOutput]:
    """Propose that two entities are one subject (e.g. 'Raft' and 'Raft consensus'). This only
    opens a merge item; nothing changes until someone accepts it through compact and submit
    (its resolution may name the `survivor` and give it a `name`). Returns the candidate and
    its status; a pair rejected before is refused unless `again`."""

    host = _host(ctx)
    return run_tool(
        "propose_merge",
        lambda: host.memory.propose_merge(entities, namespace=_ns(host, namespace), again=again),
    )


EntityArg = Annotated[
    str, Field(description="The entity: a name or alias (any case), or memo://entity/ID.")
]


def rename_entity(
    ctx: Context,
    entity: EntityArg,
    name: Annotated[str, Field(description="Its name from now on (at most 200 characters).")],
    namespace: Namespace = None,
) -> Annotated[CallToolResult, CorrectedOutput]:
    """Give an entity a new name (the one a reader would look for). Its old names stay aliases,
    so they still resolve in get and search; renaming back undoes it. Its page is marked
    stale, so compact offers a refresh. Refused if the name is another entity's (propose a
    merge instead)."""

    host = _host(ctx)
    return run_tool(
        "rename_entity",
        lambda: host.memory.rename_entity(entity, name, namespace=_ns(host, namespace)),
    )


def undo_merge(
    ctx: Context,
    entity: Annotated[
        str,
        Field(
            description=(
                "The entity that was merged into another: its own name or memo://entity/ID."
            )
        ),
    ],
    namespace: Namespace = None,
) -> Annotated[CallToolResult, CorrectedOutput]:
    """Undo a merge: the entity merged away stands apart again with its passages, facts and
    names; the aliases the merge gave the survivor are taken back; both pages are marked
    stale. The pair is then not proposed by the scanner again (propose_merge with `again`
    can). Recorded, nothing erased."""

    host = _host(ctx)
    return run_tool(
        "undo_merge", lambda: host.memory.undo_merge(entity, namespace=_ns(host, namespace))
    )


def reopen(
    ctx: Context,
    item: Annotated[
        int | str, Field(description="A done or skipped item: its id (42) or memo://item/42.")
    ],
    reason: Annotated[str | None, Field(description="Why (kept in the audit).")] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, CorrectedOutput]:
    """Reopen a finished work item and undo what it did: a skip is put back on the queue; a
    settled conflict brings back the facts it superseded (as new facts) and supersedes a
    bounded copy; an accepted merge separates the entities again, a rejected one opens
    again; the passages a kept duplicate forgot come back as new passages (copies in a new
    version of their documents) and the cluster is asked about again. Returns the item now
    open for it (`item`). Done page and stale items are refused (forget the page instead)."""

    host = _host(ctx)
    return run_tool(
        "reopen", lambda: host.memory.reopen(item, reason=reason, namespace=_ns(host, namespace))
    )


def corrections(
    ctx: Context,
    action: Annotated[
        Literal["rename", "merge", "unmerge", "reopen", "propose_again"] | None,
        Field(description="Only this action's corrections. Default: every one's."),
    ] = None,
    target: Annotated[
        str | None,
        Field(description="Only those about this address (memo://entity/ID, memo://item/ID)."),
    ] = None,
    namespace: Namespace = None,
    page: Page = 1,
) -> Annotated[CallToolResult, CorrectionsOutput]:
    """List the corrections people and agents made in a namespace, oldest first, without
    changing anything: renames, merges (with what each moved), merges undone, items reopened
    (with what they restored) and merges proposed again. Each is an audit row with its
    action, the address it was about, what it recorded (`detail`) and one line saying what
    it did (`summary`). Every one can itself be taken back: rename again, propose_merge with
    `again`, reopen the item made."""

    host = _host(ctx)
    return run_tool(
        "corrections",
        lambda: host.memory.corrections(
            namespace=_ns(host, namespace), action=action, target=target
        ),
        lambda data: page_answer(data, host.budget, page),
    )


def search(
    ctx: Context,
    query: Annotated[
        str,
        Field(
            description=(
                "Natural-language words; any word may match (OR), stop words are dropped, "
                "no special syntax. At most $query_chars characters."
            )
        ),
    ],
    granularity: Annotated[
        Literal["passage", "page", "fact", "entity", "all"],
        Field(
            description=(
                "What to search: passages of remembered documents (default), compacted "
                "pages, facts (subject, predicate and value), entities, or all of them."
            )
        ),
    ] = "passage",
    limit: Annotated[
        int,
        Field(description="How many results at most (1-1000).", ge=1, le=1000, strict=True),
    ] = 10,
    as_of: Annotated[
        str | None,
        Field(
            description=("ISO 8601 date or datetime: only facts valid at that time (facts only).")
        ),
    ] = None,
    namespace: Namespace = None,
    mode: Annotated[
        Literal["lexical", "semantic", "hybrid"] | None,
        Field(
            description=(
                "How passages are ranked: by their words (lexical), by meaning (semantic), "
                "or both fused (hybrid). Default: hybrid where passages have vectors, else "
                "lexical. Pages, facts and entities are ranked by their words."
            )
        ),
    ] = None,
    page: Page = 1,
) -> Annotated[CallToolResult, SearchOutput]:
    """Search long-term memory over live rows only (forgotten and superseded text never comes
    back): by words (BM25) and, where passages have vectors, by meaning too. Use it before
    answering from memory; name the people or things the question is about, as they were
    remembered: a known entity's name finds what is about it. Returns up to `limit` results,
    best first, each with an address, its granularity, its text (or a snippet) and a score
    (BM25; in hybrid mode the fused rank score; with `all`: a share, 0-1) (a page stored
    over its checks' flags also lists its `unverified` sentences), and the `mode` used (a
    `notice` says why when it is not the one asked for); call `get` on an address for the
    whole thing and its links."""

    host = _host(ctx)
    return run_tool(
        "search",
        lambda: host.memory.search(
            query, granularity, limit, as_of, namespace=_ns(host, namespace), mode=mode
        ),
        lambda data: page_answer(data, host.budget, page),
    )


async def get(
    ctx: Context,
    address: Annotated[
        str,
        Field(
            description=(
                "An address: memo://document/<id>, memo://passage/<id>, memo://entity/<id>, "
                "memo://fact/<id>, memo://page/<id> or memo://item/<n> (a bare item number "
                "works too)."
            )
        ),
    ],
    namespace: Namespace = None,
    page: Page = 1,
) -> Annotated[CallToolResult, GetOutput]:
    """Fetch one stored thing by address with its links: a page with its content, source
    passages and `sentences` (each with the `sources` it cites; one with `flags` was stored
    over the checks with `force` and is unverified, whatever it cites), an entity with its
    passages, facts and page, a document with its passages, a work item with its payload.
    Forgotten and superseded things are returned too, with `status` saying so (live,
    forgotten, superseded). A thing larger than one answer comes in pages: `paged` counts
    its lists and `paged.next` gives the `page` to ask for."""

    host = _host(ctx)
    return await host.brief(
        lambda: run_tool(
            "get",
            lambda: host.memory.get(address, namespace=_ns(host, namespace)),
            lambda data: page_answer(
                with_web_url(data, _ns(host, namespace)),
                host.budget,
                page,
                address=data["address"],
            ),
        )
    )


def forget(
    ctx: Context,
    address: Annotated[
        str,
        Field(
            description=(
                "What to forget: a memo://document/…, memo://passage/…, memo://fact/… or "
                "memo://page/… address."
            )
        ),
    ],
    reason: Annotated[str | None, Field(description="Why (kept with the tombstone).")] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, ForgetOutput]:
    """Forget a document (with its passages), a passage, a fact or a page: it stops appearing
    in search and compaction, and pages citing it are marked stale. Use it for wrong or
    unwanted memories. The row is tombstoned, not erased (`get` still shows it as
    forgotten); forgetting twice changes nothing."""

    host = _host(ctx)
    return run_tool(
        "forget",
        lambda: host.memory.forget(address, reason, namespace=_ns(host, namespace)),
        lambda data: first_page(data, host.budget, data["address"]),
    )


def compact(
    ctx: Context,
    kinds: Annotated[
        list[str] | None,
        Field(description="Only these kinds of work items. Installed kinds: $kind_guide."),
    ] = None,
    limit: Annotated[
        int,
        Field(
            description=(
                "How many open items to return with their payloads (default "
                f"{COMPACT_DEFAULT_LIMIT}); 0 returns counts only. `open` always counts "
                "all of them."
            ),
            ge=0,
            strict=True,
        ),
    ] = COMPACT_DEFAULT_LIMIT,
    after: Annotated[
        int | None,
        Field(
            description=(
                "Only the open items after this item id: the `next.after` of the previous "
                "answer, to page through a queue larger than one answer."
            ),
            ge=0,
            strict=True,
        ),
    ] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, CompactOutput]:
    """Scan a namespace for compaction work and return the open work items, oldest first. How
    to do an item of each kind: $kinds_guide Each item's payload holds everything needed to
    do it, so no other call is needed; do one with `submit`. Returns `created` (new items),
    `open` (all open items) and up to `limit` items (default $compact_limit) within about
    $budget bytes, to keep your context small (one larger item comes alone); `more` counts
    the open items after these, and `next` gives the `after` that fetches them. Running it
    again with nothing changed creates nothing. The server never writes prose."""

    host = _host(ctx)
    return run_tool(
        "compact",
        lambda: host.memory.compact(kinds, limit, namespace=_ns(host, namespace), after=after or 0),
        lambda data: fit_budget(data, host.budget, limit),
        host.memory.kinds,
    )


# Long: the signature is the tool's input schema, one described parameter per field.
def submit(
    ctx: Context,
    item: Annotated[
        int | str,
        Field(description="The work item: its id (42) or address (memo://item/42)."),
    ],
    content: Annotated[
        str | None,
        Field(
            description=(
                "page/stale items: the page's Markdown, written only from the item's "
                "payload. At most $page_bytes bytes."
            )
        ),
    ] = None,
    title: Annotated[str | None, Field(description="page/stale items: the page's title.")] = None,
    cites: Annotated[
        list[str] | None,
        Field(
            description=("page/stale items: the payload passages the page draws on (default: all).")
        ),
    ] = None,
    keep: Annotated[
        str | list[str] | None,
        Field(
            description=(
                "conflict items: the one fact address to keep (the other is superseded). "
                "duplicate items: the passage address(es) to keep (the others are forgotten)."
            )
        ),
    ] = None,
    bound: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                'conflict items: {"fact": ADDR, "valid_from"?: T, "valid_to"?: T} — the '
                "named fact is superseded by a copy with this bound (end the older fact "
                "where the newer begins, keeping history); refused if the two would still "
                "overlap."
            )
        ),
    ] = None,
    accept: Annotated[
        bool, Field(description="merge items: the two entities are one.", strict=True)
    ] = False,
    reject: Annotated[
        bool,
        Field(description="merge items: they are different (never proposed again).", strict=True),
    ] = False,
    skip: Annotated[
        bool,
        Field(description="Any item: not worth doing; needs `reason`.", strict=True),
    ] = False,
    reason: Annotated[str | None, Field(description="Why the item is skipped.")] = None,
    fingerprint: Annotated[
        str | None,
        Field(
            description=(
                "The item's `fingerprint` as `compact` gave it with the payload: the "
                "submission is refused if the item was refreshed since. Always send it."
            )
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        Field(
            description="Run every check and report, store nothing. Do this first.",
            strict=True,
        ),
    ] = False,
    force: Annotated[
        bool,
        Field(
            description=(
                "Store even though a check flagged something (the flags are recorded, and "
                "every view shows the flagged sentences as unverified; lint lists the page "
                "until a version that passes replaces it). Only when you are sure the "
                "flagged text is right."
            ),
            strict=True,
        ),
    ] = False,
    resolution: Annotated[
        dict[str, Any] | None,
        Field(
            description=(
                "The resolution as one object, for any kind (plugins' kinds too: their "
                "fields are listed with the kinds in `compact`); the flat fields above are "
                "merged into it."
            )
        ),
    ] = None,
    namespace: Namespace = None,
) -> Annotated[CallToolResult, SubmitOutput]:
    """Complete one work item from `compact`. The server checks the result before storing it.
    For pages: $writing_rules A flagged submission is not stored (`stored: false`, a normal
    result: fix the flagged text and submit again) unless `force`. Use `dry_run: true`
    first. Returns item, kind, status, stored, the new address, a diff against the previous
    page and each check's result (a duplicate item: `kept`, `forgotten`, `left`; only
    members that are near duplicates of a kept one are forgotten). An item that is not open,
    whose inputs changed since `compact`, or whose `fingerprint` is not the one sent, is
    refused: run `compact` again."""

    host = _host(ctx)
    return run_tool(
        "submit",
        lambda: host.memory.submit(
            item,
            resolution,
            dry_run=dry_run,
            force=force,
            fingerprint=fingerprint,
            namespace=_ns(host, namespace),
            content=content,
            title=title,
            cites=cites,
            keep=keep,
            bound=bound,
            # A flag left false is no field at all (a page takes no accept).
            accept=accept or None,
            reject=reject or None,
            skip=skip or None,
            reason=reason,
        ),
        lambda data: submit_page(data, host.budget),
    )


def lint(
    ctx: Context,
    rules: Annotated[
        list[str] | None,
        Field(
            description=(
                'Report only these rules\' findings (e.g. ["missing-page"]). '
                "Default: every rule's."
            )
        ),
    ] = None,
    namespace: Namespace = None,
    page: Page = 1,
) -> Annotated[CallToolResult, LintOutput]:
    """Report problems in a namespace without changing anything: contradictions (facts that
    disagree), orphan entities, entities that need a page, stale pages and expired facts,
    each with a rule name, the main address and related addresses (`rules` keeps only those
    rules' findings). Facts that ended as history and items you skipped (until their inputs
    change) are not findings. Use `compact` to get work items that fix them."""

    host = _host(ctx)
    return run_tool(
        "lint",
        lambda: host.memory.lint(namespace=_ns(host, namespace), rules=rules),
        lambda data: page_answer(data, host.budget, page),
    )


#: Every tool, in the order ``tools/list`` gives them, with its annotations.
TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (remember, _annotations("Remember a document", read_only=False, idempotent=True)),
    (record_fact, _annotations("Record a fact", read_only=False)),
    (propose_merge, _annotations("Propose merging two entities", read_only=False, idempotent=True)),
    (rename_entity, _annotations("Rename an entity", read_only=False)),
    (undo_merge, _annotations("Undo a merge", read_only=False)),
    (reopen, _annotations("Reopen a work item", read_only=False)),
    (corrections, _annotations("List corrections", read_only=True)),
    (search, _annotations("Search memory", read_only=True)),
    (get, _annotations("Get by address", read_only=True)),
    (forget, _annotations("Forget", read_only=False, destructive=True, idempotent=True)),
    (compact, _annotations("Compact: list work items", read_only=False, idempotent=True)),
    (submit, _annotations("Submit a work item", read_only=False)),
    (lint, _annotations("Lint the store", read_only=True)),
)


def build_tools(memory: Memory, default_namespace: str, budget: int) -> list[Tool]:
    """The thirteen tools of a server over ``memory``, their descriptions filled
    in with its figures (the ``$name`` placeholders: see :func:`_figures`)."""
    values = _figures(memory, default_namespace, budget)
    tools = []
    for fn, annotations in TOOLS:
        description = Template(" ".join((fn.__doc__ or "").split())).substitute(values)
        tool = Tool.from_function(fn, description=description, annotations=annotations)
        tool.parameters = _filled(tool.parameters, values)
        # Unknown arguments are refused (MemorsMCPServer.call_tool): say so in the schema.
        tool.parameters["additionalProperties"] = False
        tools.append(tool)
    return tools


def _figures(memory: Memory, default_namespace: str, budget: int) -> dict[str, str]:
    """What the tools' descriptions say of this store, by placeholder name."""
    limits = memory.limits
    # Each installed kind (plugins' too) tells the agent what it is and how it is resolved.
    kind_guide = "; ".join(about(memory.kinds.get(n)) for n in memory.kinds.names())
    return {
        "namespace": repr(default_namespace),
        "budget": f"{budget:,}",
        "document_bytes": f"{limits.document_bytes:,}",
        "field_chars": f"{limits.field_chars:,}",
        "query_chars": f"{limits.query_chars:,}",
        "page_bytes": f"{limits.page_bytes:,}",
        "kind_guide": kind_guide or "(none installed)",
        "kinds_guide": kinds_guide(memory.kinds),
        "compact_limit": str(COMPACT_DEFAULT_LIMIT),
        "writing_rules": WRITING_RULES,
    }


def _filled(schema: Any, values: dict[str, str]) -> Any:
    """A JSON schema with the placeholders of its descriptions filled in."""
    if isinstance(schema, dict):
        return {
            key: Template(value).substitute(values)
            if key == "description" and isinstance(value, str)
            else _filled(value, values)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_filled(value, values) for value in schema]
    return schema
