"""A run: find the items, write each page with the model, submit it (a dry run
unless ``--apply``), report; the endpoint failing stops it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from memors_core import MemorsError, Memory
from memors_core.log import get_logger
from memors_core.wire import to_json

from ..compact_progress import compact_line
from ..output import Progress, emit_json, fail
from .answer import parse_page
from .client import OllamaClient
from .endpoint import DEFAULT_URL, resolve_endpoint
from .errors import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE, EndpointFailed, ItemFailed
from .progress import ItemProgress
from .prompt import NUM_PREDICT, build_prompt, chat_options
from .report import OUTCOME_TEXT, blank_report, label, render_item, summarize, summary_line
from .settings import executor_kinds, model_from_env, timeout_from_env

log = get_logger("memors.executor")


def run_item(
    memory: Memory,
    client: OllamaClient,
    item: dict[str, Any],
    namespace: str,
    apply: bool,
    progress: ItemProgress,
) -> dict[str, Any]:
    """Write one item's page and submit it (a dry run unless ``apply``).
    Raises :class:`EndpointFailed` when the run must stop."""
    started = time.monotonic()
    report = blank_report(item, "failed")
    try:
        messages, cites, shown = build_prompt(item)
        answer = client.chat(messages, chat_options(messages), progress.tick)
        log.info(
            "model_answered",
            namespace=namespace,
            item=item["id"],
            model=client.model,
            chars=len(answer.content),
            done_reason=answer.done_reason,
            **answer.stats,
        )
        if answer.done_reason == "length":
            raise ItemFailed(
                f"the answer was cut off at the model's length limit ({NUM_PREDICT} tokens "
                "or the context window); nothing stored",
                code="cut-off",
            )
        title, content = parse_page(answer.content)
        report["title"], report["content"] = title, content
        resolution: dict[str, Any] = {"title": title, "content": content}
        if cites is not None:
            resolution["cites"] = cites
        progress.note("checking…")
        submitted = to_json(
            memory.submit(
                item["id"],
                resolution,
                dry_run=not apply,
                namespace=namespace,
                fingerprint=item.get("fingerprint"),
            )
        )
    except EndpointFailed:
        raise
    except ItemFailed as exc:
        report["error"] = exc.message
    except MemorsError as exc:  # refused as outdated, bad title, …: this item only
        report["error"] = exc.message
    else:
        report.update(submitted)
        flagged = any(not c["passed"] for c in submitted["checks"].values())
        if submitted["stored"]:
            report["outcome"] = "written"
        elif flagged:
            report["outcome"] = "refused"
        else:
            report["outcome"] = "would-write"
        if cites is not None:
            report["message"] = (
                f"{report['message']} (the prompt held {shown} of "
                f"{len(item['payload'].get('passages') or [])} passages; the page cites those)"
            )
    report["seconds"] = round(time.monotonic() - started, 3)
    return report


def run_executor(args: argparse.Namespace, kinds: list[str] | None) -> int:
    """``compact --executor ollama``: returns the exit status."""
    env = dict(os.environ)
    model = model_from_env(env)
    timeout = timeout_from_env(env)
    endpoint = resolve_endpoint(env.get("MEMORS_OLLAMA_URL") or DEFAULT_URL, args.allow_remote)
    client = OllamaClient(endpoint, model, timeout)
    apply = bool(args.apply)

    with Memory.open(args.db) as memory:
        # Which kinds write pages is theirs to say: asked of this store's plugins.
        kinds = executor_kinds(kinds, memory.kinds)

        with Progress("compacting", compact_line, sep=" ") as scanning:
            found = memory.compact(
                kinds, args.limit, namespace=args.ns, full=args.full, progress=scanning.update
            )
        compacted = to_json(found)
        items = compacted["items"]
        reports: list[dict[str, Any]] = []
        stopped: ItemFailed | None = None
        if items:
            try:
                client.check_model()
            except ItemFailed as exc:
                fail(exc.message, code=exc.code, exit_code=EXIT_USAGE)
        progress = ItemProgress(len(items), model)
        for n, item in enumerate(items, 1):
            if stopped is not None:
                reports.append(blank_report(item, "not-attempted"))
                continue
            progress.start(n, label(item))
            try:
                report = run_item(memory, client, item, args.ns, apply, progress)
            except EndpointFailed as exc:
                stopped = exc
                report = blank_report(item, "failed", exc.message)
            reports.append(report)
            progress.finish(OUTCOME_TEXT[report["outcome"]])
            if report["error"]:
                print(f"memors-mcp: {label(item)}: {report['error']}", file=sys.stderr)
            log.info(
                "item_executed",
                namespace=args.ns,
                item=item["id"],
                outcome=report["outcome"],
                error=report["error"],
            )
            if not args.json:
                print(render_item(report), flush=True)

    summary = summarize(reports)
    errors = compacted.get("errors") or []
    result: dict[str, Any] = {
        "namespace": compacted["namespace"],
        "model": model,
        "endpoint": endpoint.url,
        "dry_run": not apply,
        "open": compacted["open"],
        "items": reports,
        "summary": summary,
    }
    if errors:
        result["errors"] = errors
    if stopped is not None:
        result["error"] = {"code": stopped.code, "message": stopped.message}
    if args.json:
        emit_json(result)
    else:
        print(summary_line(result))
    if stopped is not None:
        print(
            f"memors-mcp: run stopped ({stopped.code}); "
            f"{summary['not_attempted']} item(s) not attempted",
            file=sys.stderr,
        )
    for err in errors:
        print(
            f"memors-mcp: kind {err['kind']} (plugin {err['plugin']}) failed: {err['error']}",
            file=sys.stderr,
        )
    negative = summary["refused"] + summary["failed"] + summary["not_attempted"]
    return EXIT_NEGATIVE if negative or errors else EXIT_OK
