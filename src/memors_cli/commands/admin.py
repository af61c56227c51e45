"""Looking after a store: ``lint``, ``metrics``, ``purge``, ``export``,
``import`` and ``backup``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from memors_core import Memory
from memors_core.wire import to_json

from .. import files
from ..output import Progress, Shown, fail, size
from ._common import DOCUMENT_SETTING, force_progress, open_memory, print_result


def cmd_lint(args: argparse.Namespace) -> int:
    with Memory.open(args.db, readonly=True) as memory:  # creates and changes nothing
        data = to_json(memory.lint(namespace=args.ns, rules=args.rules))
    lines = [f"{f['rule']:<14} {f['address']}  {f['message']}" for f in data["findings"]]
    among = f" ({', '.join(args.rules)})" if args.rules else ""
    print_result(
        args, data, "\n".join(lines) if lines else f"namespace {args.ns}: no findings{among}"
    )
    return 1 if data["findings"] else 0


def cmd_corrections(args: argparse.Namespace) -> int:
    with Memory.open(args.db, readonly=True) as memory:  # creates and changes nothing
        data = to_json(
            memory.corrections(namespace=args.ns, action=args.action, target=args.target)
        )
    lines = [
        f"{c['id']:>4}  {c['created_at'][:19]}  {c['action']:<13} {c['summary']}"
        for c in data["corrections"]
    ]
    print_result(args, data, "\n".join(lines) if lines else f"namespace {args.ns}: no corrections")
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.json:
        fail("metrics prints the Prometheus text format; it has no --json form", code="usage")
    with Memory.open(args.db, readonly=True) as memory:  # a missing store reads as empty
        text = memory.metrics()
    sys.stdout.write(text)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    if not args.yes:
        fail(f"purge erases {args.address} for good; add --yes to confirm", code="usage")
    with open_memory(args) as memory:
        data = to_json(memory.purge(args.address, namespace=args.ns))
    if data["earlier"]:
        text = f"{data['address']} was erased already (audit record {data['audit']})"
        text += "; its erasure from the file is finished" if data["finished"] else ""
    else:
        text = f"purged {len(data['erased'])} row(s); audit record {data['audit']}"
    if not data["finished"]:
        text += f"; {data['left']}"
    print_result(args, data, text)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with open_memory(args, reading=True) as memory:
        for line in memory.export_lines(args.ns):
            sys.stdout.write(line + "\n")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    handle, _size = files.open_regular(path)  # never a FIFO or a device
    with handle, open_memory(args) as memory:
        limits = memory.limits
        lines = files.bounded_lines(
            handle,
            files.import_line_limit(limits.document_bytes, limits.page_bytes),
            str(path),
            f"raise {DOCUMENT_SETTING} to read longer lines",
        )
        data = memory.import_(lines, str(path), allow_unverified=args.allow_unverified)
        # An export carries no vectors: say how to make them where this store keeps them.
        waiting = sum(memory.vectors_waiting(ns) for ns in memory.namespaces())
    checked = "" if data["verified"] else " (unverified: the file has no closing line)"
    text = f"imported {sum(data['rows'].values()):,} row(s){checked}"
    if waiting:
        data["notice"] = (
            f"{waiting:,} passage(s) have no vector yet (an export carries none): run "
            "`memors-mcp reindex --vectors --all-namespaces` to search them by meaning"
        )
        text += f"\n{data['notice']}"
    print_result(args, data, text)
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    with open_memory(args) as memory:
        data = memory.backup(args.path)
    copied = size(Path(data["path"]).stat().st_size)
    print_result(
        args, data, f"backed up to {data['path']}: copied {copied} ({data['pages']} SQLite pages)"
    )
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    if not args.vectors:
        fail("say what to make: reindex --vectors (passages' vectors)", code="usage")
    if args.background:
        return _reindex_in_background(args)
    force_progress(args)
    with open_memory(args) as memory:
        namespaces = memory.namespaces() if args.all_namespaces else [args.ns]
        done = []
        for ns in namespaces:
            with Progress(f"vectors of {ns}", _embedding_line) as progress:
                done.append(to_json(memory.reindex_vectors(ns, progress=progress.update)))
    data: object = {"namespaces": done} if args.all_namespaces else done[0]
    lines = [
        f"namespace {r['namespace']}: {r['added']:,} vector(s) made, "
        f"{r['vectors']:,} passage(s) have one ({r['model']})"
        for r in done
    ]
    print_result(args, data, "\n".join(lines) if lines else "no namespaces")
    return 0


def _reindex_in_background(args: argparse.Namespace) -> int:
    """What ``remember`` and ``compact`` start: the namespace's missing
    vectors, at a low priority, saying nothing; at once done when another
    run is embedding the namespace (it looks again before it stops)."""
    if args.all_namespaces:
        fail("--background embeds one namespace (--ns)", code="usage")
    with contextlib.suppress(OSError, AttributeError):
        os.nice(10)  # the foreground's commands first: this one has no one waiting on it
    with open_memory(args) as memory:
        memory.make_vectors(args.ns)
    return 0


def _embedding_line(state: object) -> Shown:
    total = getattr(state, "total", None)
    done = getattr(state, "done", 0)
    shown = f"{done:,}/{total:,}" if total is not None else f"{done:,}"
    return Shown(f"embedded {shown} passages", done, total, "passages")
