"""``compact`` (its scan, or an executor with ``--executor``) and
``items`` (the work items it found)."""

from __future__ import annotations

import argparse

from memors_core.wire import to_json

from ..compact_progress import compact_line
from ..output import Progress, fail
from ._common import force_progress, open_memory, print_result, start_embedder
from .item_text import item_line, item_text


def _kinds_arg(value: str | None) -> list[str] | None:
    if value is None:
        return None
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds:
        fail("--kinds needs at least one kind name", code="usage")
    return kinds


def cmd_compact(args: argparse.Namespace) -> int:
    force_progress(args)
    kinds = _kinds_arg(args.kinds)
    if args.executor is None and (args.apply or args.allow_remote):
        fail("--apply and --allow-remote go with --executor (ollama or openai)", code="usage")
    if args.limit is not None and args.limit < 0:
        fail("--limit must be 0 or more", code="usage")
    if args.executor is not None:
        from ..executor import run_executor

        return run_executor(args, kinds)
    progress = Progress("compacting", compact_line, sep=" ")
    with open_memory(args) as memory:
        try:
            result = memory.compact(
                kinds,
                args.limit,
                namespace=args.ns,
                full=args.full,
                progress=progress.update,
            )
            new = result.created
            progress.state = f"done: {new:,} new item{'' if new == 1 else 's'}"
        finally:
            progress.done()
        data = to_json(result)
        start_embedder(args, memory)  # passages still without vectors get them, detached
    lines = [f"namespace {data['namespace']}: {data['created']} new item(s), {data['open']} open"]
    lines.extend(item_line(i, memory.kinds) for i in data["items"])
    for err in data.get("errors", []):
        lines.append(f"error: kind {err['kind']} (plugin {err['plugin']}) failed: {err['error']}")
    print_result(args, data, "\n".join(lines))
    return 1 if data.get("errors") else 0


def cmd_items(args: argparse.Namespace) -> int:
    if args.items_command == "reopen":
        from .records import corrected_text

        with open_memory(args) as memory:
            data = to_json(memory.reopen(args.item, reason=args.reason, namespace=args.ns))
        print_result(args, data, corrected_text(data))
        return 0
    with open_memory(args, reading=True) as memory:
        if args.items_command == "show":
            data = to_json(
                memory.get(
                    f"memo://item/{args.item}" if args.item.isdigit() else args.item,
                    namespace=args.ns,
                )
            )
            print_result(args, data, None if args.json else item_text(data, memory.kinds))
            return 0
        data = to_json(memory.items(kind=args.kind, status=args.status, namespace=args.ns))
    lines = [item_line(i, memory.kinds) for i in data["items"]]
    print_result(args, data, "\n".join(lines) if lines else "no items")
    return 0
