"""A run: find the items, write each page with the model, submit it (a dry run
unless ``--apply``), report; the endpoint failing stops it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from memors_core import BadInput, MemorsError, Memory
from memors_core.log import get_logger
from memors_core.wire import to_json

from ..compact_progress import compact_line
from ..output import Progress, emit_json, fail
from .answer import parse_page
from .client import OllamaClient
from .endpoint import DEFAULT_URL, resolve_endpoint
from .errors import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE, EndpointFailed, ItemFailed
from .progress import ItemProgress
from .prompt import NUM_PREDICT, bad_input_request, build_prompt, chat_options, revision_request
from .report import (
    SUBMIT_FIELDS,
    blank_report,
    label,
    outcome_text,
    render_item,
    summarize,
    summary_line,
)
from .settings import executor_kinds, model_from_env, timeout_from_env

log = get_logger("memors.executor")


class _Writer:
    """One item's drafts: each written by the model and submitted, its
    outcome recorded in the item's report."""

    def __init__(
        self,
        memory: Memory,
        client: OllamaClient,
        item: dict[str, Any],
        namespace: str,
        apply: bool,
        progress: ItemProgress,
        report: dict[str, Any],
    ) -> None:
        self.memory, self.client, self.item = memory, client, item
        self.namespace, self.apply, self.progress, self.report = namespace, apply, progress, report

    def write(self, messages: list[dict[str, str]], turn: int) -> tuple[str, str]:
        """Ask the model; its answer read as (title, content), or ItemFailed."""
        answer = self.client.chat(messages, chat_options(messages), self.progress.tick)
        log.info(
            "model_answered",
            namespace=self.namespace,
            item=self.item["id"],
            model=self.client.model,
            turn=turn,
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
        return parse_page(answer.content)

    def submit(self, title: str, content: str, cites: list[str] | None) -> str | None:
        """Submit one draft (a dry run unless ``apply``) and record it in the
        report. Returns the follow-up message asking for a revision when the
        draft was refused (by the checks, or as bad input such as a marker
        naming no passage); None when it went through."""
        report = self.report
        report.update(SUBMIT_FIELDS, title=title, content=content, error=None)
        resolution: dict[str, Any] = {"title": title, "content": content}
        if cites is not None:
            resolution["cites"] = cites
        self.progress.note("checking…")
        try:
            submitted = to_json(
                self.memory.submit(
                    self.item["id"],
                    resolution,
                    dry_run=not self.apply,
                    namespace=self.namespace,
                    fingerprint=self.item.get("fingerprint"),
                )
            )
        except BadInput as exc:
            report["outcome"], report["error"] = "failed", exc.message
            return bad_input_request(title, exc.message)
        report.update(submitted)
        flagged = any(not c["passed"] for c in submitted["checks"].values())
        if submitted["stored"]:
            report["outcome"] = "written"
        elif flagged:
            report["outcome"] = "refused"
            return revision_request(self.item, title, submitted["checks"])
        else:
            report["outcome"] = "would-write"
        return None


def run_item(
    memory: Memory,
    client: OllamaClient,
    item: dict[str, Any],
    namespace: str,
    apply: bool,
    progress: ItemProgress,
) -> dict[str, Any]:
    """Write one item's page and submit it (a dry run unless ``apply``). A
    draft the checks refuse goes back to the model once, with their flags,
    in the same conversation, and its revision is submitted the same way:
    only a refused revision reports the item refused. Raises
    :class:`EndpointFailed` when the run must stop."""
    started = time.monotonic()
    report = blank_report(item, "failed")
    writer = _Writer(memory, client, item, namespace, apply, progress, report)
    messages, cites, shown = build_prompt(item)
    try:
        title, content = writer.write(messages, turn=0)
        feedback = writer.submit(title, content, cites)
        if feedback is not None:
            report["revisions"] = 1
            flags = sum(len(c["flagged"]) for c in (report["checks"] or {}).values())
            progress.revising(flags or 1)
            messages = [
                *messages,
                {"role": "assistant", "content": f"# {title}\n\n{content}"},
                {"role": "user", "content": feedback},
            ]
            try:
                title, content = writer.write(messages, turn=1)
            except EndpointFailed:
                raise
            except ItemFailed as exc:  # the refused draft stays the item's report
                said = f"the revision failed: {exc.message}"
                report["error"] = f"{report['error']}; {said}" if report["error"] else said
            else:
                writer.submit(title, content, cites)
    except EndpointFailed:
        raise
    except (ItemFailed, MemorsError) as exc:  # timeout, outdated item, …: this item only
        report.update(SUBMIT_FIELDS, outcome="failed", error=exc.message)
    if cites is not None and report["message"] is not None:
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
            progress.finish(outcome_text(report))
            if report["error"]:
                print(f"memors-mcp: {label(item)}: {report['error']}", file=sys.stderr)
            log.info(
                "item_executed",
                namespace=args.ns,
                item=item["id"],
                outcome=report["outcome"],
                revisions=report["revisions"],
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
