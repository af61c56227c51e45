"""``submit``: a resolution built from the command line's flags, handed to
the store, and the report (exit 1 when it is refused or flagged)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memors_core import BadInput, MemorsError, Memory
from memors_core.domain.inputs import field_value, resolution_object
from memors_core.settings import Limits
from memors_core.wire import to_json

from ..output import fail
from ._common import DOCUMENT_SETTING, open_memory, print_result, read_stdin, read_text
from .item_text import command_usage, submit_text


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--set takes KEY=VALUE, got {pair!r}", code="usage")
        out[key.strip()] = field_value(value)
    return out


def build_resolution(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if args.resolution_json is not None:
        res = resolution_object(args.resolution_json, "--resolution-json")
    if args.set:
        res.update(_parse_set(args.set))
    if args.content_file is not None:
        # A page's text, but a kind may take other content: the larger limit bounds the read.
        limits = Limits()
        limit, setting = max(
            (limits.page_bytes, "MEMORS_MAX_PAGE_BYTES"), (limits.document_bytes, DOCUMENT_SETTING)
        )
        if args.content_file == "-":
            res["content"] = read_stdin(limit, setting)
        else:
            res["content"] = read_text(Path(args.content_file), limit, setting)
    for field in ("title", "reason"):
        if getattr(args, field) is not None:
            res[field] = getattr(args, field)
    if args.cite:
        res["cites"] = args.cite
    if args.keep:
        res["keep"] = args.keep
    if args.bound is not None:
        if args.bound_from is None and args.bound_to is None:
            fail("--bound needs --from T or --to T (the fact's new bound)", code="usage")
        res["bound"] = {"fact": args.bound}
        for key, value in (("valid_from", args.bound_from), ("valid_to", args.bound_to)):
            if value is not None:
                res["bound"][key] = value
    elif args.bound_from is not None or args.bound_to is not None:
        fail("--from and --to go with --bound ADDR", code="usage")
    for flag in ("accept", "reject", "skip"):
        if getattr(args, flag):
            res[flag] = True
    for field in ("survivor", "name"):
        if getattr(args, field) is not None:
            if not args.accept:
                fail(f"--{field} goes with --accept", code="usage")
            res[field] = getattr(args, field)
    if not res:
        fail(
            "submit needs a resolution: --content-file F --title T, --keep ADDR, "
            "--bound ADDR --to T, --accept, "
            "--reject, --skip --reason R, --set KEY=VALUE or --resolution-json JSON",
            code="usage",
        )
    if args.accept and args.reject:
        fail("--accept and --reject exclude each other", code="usage")
    if args.skip and not args.reason:
        fail("--skip needs --reason R", code="usage")
    return res


def _with_usage(memory: Memory, args: argparse.Namespace, exc: BadInput) -> BadInput:
    """A submission refused as bad input, with how its item's kind is spelled on
    the command line (its ``usage``): the engine's message names the fields."""
    if exc.message.startswith("fingerprint "):  # about the echoed fingerprint, not the fields
        return exc
    ref = f"memo://item/{args.item}" if str(args.item).isdigit() else args.item
    try:
        item = to_json(memory.get(ref, namespace=args.ns))
    except MemorsError:  # not an item at all: the refusal says so already
        return exc
    if item.get("status") != "open":
        return exc
    usage = command_usage(memory.kinds, item["kind"], item["id"])
    if not usage:
        return exc
    return type(exc)(f"{exc.message}; on the command line: memors-mcp {usage}", code=exc.code)


def cmd_submit(args: argparse.Namespace) -> int:
    resolution = build_resolution(args)
    with open_memory(args) as memory:
        try:
            submitted = memory.submit(
                args.item,
                resolution,
                dry_run=args.dry_run,
                force=args.force,
                fingerprint=args.fingerprint,
                namespace=args.ns,
            )
        except BadInput as exc:
            raise _with_usage(memory, args, exc) from None
        report = to_json(submitted)
        text = None if args.json else submit_text(memory, args, resolution, report)
    print_result(args, report, text)
    refused = not report["stored"] and not args.dry_run
    flagged = any(not c["passed"] for c in report["checks"].values())
    return 1 if refused or (args.dry_run and flagged and not args.force) else 0
