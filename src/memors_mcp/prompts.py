"""The prompt that walks an agent through the compaction queue.

No ``from __future__ import annotations``: the prompt's argument descriptions
are computed at registration, so its annotations must be real objects.
"""

import textwrap
from collections import Counter
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memors_core import MemorsError, Memory

from .guide import resolve_with

PROMPT_NAME = "work_compaction_queue"

WALKTHROUGH = """\
You are working through the compaction queue of the memors store, namespace "{namespace}".
The server never writes prose: you write pages and make decisions, and the server checks every
result before storing it. {queue}

1. Call the `compact` tool with {{"namespace": "{namespace}"{kinds_arg}, "limit": 5}}. It scans
   the namespace and returns `open` (how many items wait) and up to `limit` items, oldest
   first, each with its `id`, `kind` and a complete `payload`. An answer holds a few items at
   most; `more` counts the rest, and `next` gives the `after` that fetches them. A payload
   too large for one answer comes in pages: its `paged` counts each list, and `get` with
   `paged.next` (the item's `address` and a `page`) returns the next page.
2. Pick one item. Everything you need is in its payload (all its pages). Write from the
   payload only: no outside knowledge, no guesses, nothing the passages and facts do not say.
   Pages: end each sentence with citation markers naming the payload passages it draws on,
   `[n]` for the passage whose `ref` is n (several as `[1][3]` or `[1, 3]`); a sentence may
   merge what up to three passages say, as long as it cites them.
3. Do it according to its kind (send a kind's fields as `submit` arguments or in `resolution`):
{kinds_steps}
   - any kind: `skip: true` with a `reason` when the item is not worth doing.
4. Call `submit` with `item`, the item's `fingerprint` (so a payload refreshed since you read
   it is refused instead of judged against inputs you never saw), your resolution and
   `dry_run: true`. Nothing is stored.
5. Read the report's `checks`; each flag says what to change:
   - `corruption`: a sentence shares under half of its content words with the passages it
     cites (uncited: with its best single source). `missing` lists the words found in none
     of `best_source`: cite the passage that says them, reword from it, or drop them.
   - `substitution`: a number, date, relative time or name (`token`, its `class`) is in none
     of the sources it was looked for in (`window`): use the value the sources give, or cite
     the passage that states it.
   - `omission`: a fact (address, coverage) is not stated: write its predicate and value.
   Submit with `dry_run: true` again until every check passes.
6. Submit for real (`dry_run: false`). `stored: true` and an `address` mean it is saved. Use
   `force: true` only when you are sure a flagged sentence is right: the flags are recorded, the
   sentence shows as unverified and `lint` lists the page (`unverified-page`) until a clean version.
7. If `submit` says the item is no longer open or its inputs changed, call `compact` again and
   use the fresh payload. Repeat from step 1 until `open` is 0, then call `lint` to confirm.
"""


def _queue_line(memory: Memory, namespace: str, kinds: list[str] | None) -> str:
    try:
        items = memory.items(status="open", namespace=namespace).items
    except MemorsError:
        return ""
    counts = Counter(i.kind for i in items if not kinds or i.kind in kinds)
    if not counts:
        return "No items are open yet: `compact` will scan for new work."
    shown = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return f"Open items before this session's scan: {shown}."


def kinds_steps(kinds: Any, chosen: list[str] | None) -> str:
    """Step 3's list: how to do an item of each kind, in the kind's own words.

    ``kinds`` is the store's registry; with ``chosen``, only those of them
    that are installed (all of them when none is)."""
    names = [n for n in kinds.names() if not chosen or n in chosen] or kinds.names()
    steps = []
    for name in names:
        kind = kinds.get(name)
        if kind is None:
            continue
        steps.append(
            textwrap.fill(
                f"{name}: {resolve_with(kind)}",
                width=96,
                initial_indent="   - ",
                subsequent_indent="     ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(steps)


def register_prompts(server: MCPServer, memory: Memory, default_namespace: str) -> None:
    def work_compaction_queue(
        namespace: Annotated[
            str | None,
            Field(description=f"The namespace to compact (default {default_namespace!r})."),
        ] = None,
        kinds: Annotated[
            str | None,
            Field(description="Only these kinds, comma-separated (e.g. 'page,stale')."),
        ] = None,
    ) -> str:
        ns = namespace or default_namespace
        chosen = [k.strip() for k in (kinds or "").split(",") if k.strip()] or None
        kinds_arg = f', "kinds": {list(chosen)!r}'.replace("'", '"') if chosen else ""
        return WALKTHROUGH.format(
            namespace=ns,
            kinds_arg=kinds_arg,
            queue=_queue_line(memory, ns, chosen),
            kinds_steps=kinds_steps(memory.kinds, chosen),
        )

    server.prompt(
        name=PROMPT_NAME,
        title="Work through the compaction queue",
        description=(
            "Step-by-step instructions for completing memors' compaction work items: compact, "
            "pick an item, write from its payload only, submit with dry_run, fix what the "
            "checks flag, submit."
        ),
    )(work_compaction_queue)
