"""The memors MCP server: ``memors-mcp serve`` (stdio, or streamable HTTP).

One :class:`memors_core.Memory` per process serves every request; the SDK
runs the (sync) tools in worker threads and ``Memory`` serialises its calls.
In stdio mode nothing but protocol reaches stdout: file descriptor 1 points
at stderr while the store and the plugins load, and the SDK diverts it again
while it serves.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import attrs
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from mcp_types import Resource as MCPResource
from pydantic import ValidationError

from memors_core import Memory
from memors_core.domain.inputs import check_namespace
from memors_core.log import get_logger

from .paging import NOTE_BYTES, fit, json_bytes, shrink
from .prompts import register_prompts
from .resources import AddressReader, register_resources
from .tools import build_tools, compact_budget

T = TypeVar("T")

log = get_logger("memors.mcp")

INSTRUCTIONS = """\
memors is a long-term memory store. Remember documents and facts; search before answering
from memory; get an address for the whole thing. Compaction turns the raw pile into checked
pages: call `compact` for work items, do one from its payload only, `submit` it with
dry_run first, fix what the checks flag, then submit for real. The server never writes prose.
Everything lives in a namespace (default: the server's); addresses look like memo://page/<id>.
"""


class MemorsMCPServer(MCPServer):
    """MCPServer plus: the namespace's live pages as resources, strict tool arguments."""

    def __init__(self, memory: Memory, namespace: str, budget: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.memory = memory
        self.namespace = namespace
        self.budget = budget  # of one tool answer, in bytes
        self.reader = AddressReader(memory, namespace)
        #: Brief reads run on the event loop (:meth:`brief`): stdio's one client.
        self.inline_reads = False
        # Each tool's argument names: any other is refused (call_tool).
        self.tool_params = {
            tool.name: set(tool.parameters["properties"]) for tool in kwargs.get("tools") or []
        }

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        pages = await anyio.to_thread.run_sync(self.reader.live_pages)
        for address, title, entity, version in pages:
            listed.append(
                MCPResource(
                    uri=address,
                    name=f"page:{entity}",
                    title=title,
                    description=f"The page about {entity} (version {version}).",
                    mime_type="text/markdown",
                )
            )
        return listed

    async def brief(self, call: Callable[[], T]) -> T:
        """``call()`` (a read that takes well under a millisecond) on the event
        loop over stdio, where one client's calls wait on each other anyway
        and a worker thread's round trip costs as much as the read; on a
        worker thread over HTTP, where a read waiting on the store (its pool
        busy) must not hold up other clients' requests."""
        if self.inline_reads:
            return call()
        return await anyio.to_thread.run_sync(call)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport behind a strict reader: every request gets an answer."""
        from .stdio import run_checked_stdio

        self.inline_reads = True
        await run_checked_stdio(self)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        # The SDK answers an unknown name or argument with error code 0 and a logged traceback.
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            log.warning("unknown_prompt", prompt=name[:60])
            raise MCPError(
                INVALID_PARAMS,
                f"unknown prompt {_shown(name)}; this server has {', '.join(sorted(prompts))}",
            )
        allowed = {a.name for a in prompt.arguments or []}
        unknown = sorted(set(arguments or {}) - allowed)
        if unknown:
            message = (
                f"unknown argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(_shown(u) for u in unknown)} for prompt {name}; "
                f"it takes {', '.join(sorted(allowed))}"
            )
            log.warning("prompt_refused", prompt=name, error=message)
            raise MCPError(INVALID_PARAMS, message)
        try:
            return await super().get_prompt(name, arguments, context)
        except MCPError:
            raise
        except ValueError as exc:
            cause: BaseException = exc
            while cause.__cause__ is not None:
                cause = cause.__cause__
            log.error("prompt_failed", prompt=name, error=f"{type(cause).__name__}: {cause}"[:200])
            raise MCPError(INTERNAL_ERROR, f"prompt {name} failed: {cause}"[:300]) from None

    def _belongs_in_resolution(self, unknown: list[str]) -> str:
        """For submit: which unknown arguments are fields of a kind's resolution,
        said so the agent sends them inside ``resolution`` ("" when none is)."""
        owners: dict[str, str] = {}
        for kind in self.memory.kinds:
            cls = kind.resolution
            fields = [f.name for f in attrs.fields(cls)] if attrs.has(cls) else []
            for field in fields:
                owners.setdefault(field, kind.name)
        found = [u for u in unknown if u in owners]
        if not found:
            return ""
        inside = ", ".join(f'"{u}": …' for u in found)
        kinds = ", ".join(sorted({owners[u] for u in found}))
        return (
            f"{', '.join(map(repr, found))} belong{'s' if len(found) == 1 else ''} in "
            f'`resolution` (a field of the {kinds} kind): send {{"item": ID, "resolution": '
            f"{{{inside}}}}}; "
        )

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        allowed = self.tool_params.get(name)
        if allowed is not None:
            unknown = sorted(set(arguments) - allowed)
            if unknown:
                # An ignored typo (say `dryrun`) could store what was meant as a dry run.
                raise ToolError(
                    f"unknown argument{'s' if len(unknown) > 1 else ''} "
                    f"{', '.join(map(repr, unknown))} for {name}; "
                    + (self._belongs_in_resolution(unknown) if name == "submit" else "")
                    + f"it takes {', '.join(sorted(allowed))}"
                )
        try:
            return within_cap(name, await super().call_tool(name, arguments, context))
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(describe_validation(name, cause)) from cause


#: The most a tool answer's text (its summary) takes: the rest of the
#: envelope (SPEC's cap is the budget plus 4 KiB) is the answer's own note.
TEXT_BYTES = 3 * 1024


def within_cap(name: str, result: Any) -> Any:
    """Every tool answer, whichever tool made it, within the cap: the
    structured content within the budget (plus its note's room), the text
    within :data:`TEXT_BYTES`. The tools page their own answers; this is the
    guard that holds for a tool that forgot to (it logs that it cut)."""
    if not isinstance(result, CallToolResult):
        return result
    budget = compact_budget() + NOTE_BYTES
    data = result.structured_content
    if data is not None and json_bytes(data) > budget:
        log.warning("answer_cut", tool=name, bytes=json_bytes(data), budget=budget)
        result.structured_content = fit(data, budget)
    for part in result.content:
        if isinstance(part, TextContent) and len(part.text.encode()) > TEXT_BYTES:
            part.text = shrink(part.text, TEXT_BYTES - 64)
    return result


#: How pydantic names the members of a union in an error's location.
_UNION_MEMBERS = {
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "float": "a number",
    "list[str]": "a list of strings",
    "dict[str,any]": "a JSON object",
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_validation(tool: str, error: ValidationError) -> str:
    """One readable line for the schema errors of a tool call."""
    parts: dict[str, str] = {}
    unions: dict[str, tuple[list[str], Any]] = {}
    for err in error.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        if len(loc) >= 2 and loc[1].lower() in _UNION_MEMBERS:
            # `item: int | str` fails once per member: say it once, as the choices
            wanted, _ = unions.setdefault(loc[0], ([], err.get("input")))
            wanted.append(_UNION_MEMBERS[loc[1].lower()])
            parts.setdefault(loc[0], "")
            continue
        where = ".".join(loc) or "arguments"
        if err["type"] == "missing":
            parts[where] = f"{where} is required"
        else:
            parts[where] = f"{where}: {err['msg']} (got {_shown(err.get('input'))})"
    for name, (wanted, given) in unions.items():
        parts[name] = f"{name}: expected {' or '.join(wanted)} (got {_shown(given)})"
    return f"invalid arguments for {tool}: " + "; ".join(p for p in parts.values() if p)


def build_server(
    memory: Memory, namespace: str = "default", *, log_level: str = "WARNING"
) -> MemorsMCPServer:
    """The MCP server over ``memory``: thirteen tools, six resource templates, one prompt."""
    check_namespace(namespace)
    budget = compact_budget()
    server = MemorsMCPServer(
        memory,
        namespace,
        budget,
        tools=build_tools(memory, namespace, budget),
        name="memors",
        title="memors long-term memory",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level=log_level.upper(),  # type: ignore[arg-type]
    )
    register_resources(server, server.reader)
    register_prompts(server, memory, namespace)
    return server


def _version() -> str:
    from memors_core import __version__  # (not importlib.metadata: see memors_core)

    return __version__


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the duration (stray prints miss the wire)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all: nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
