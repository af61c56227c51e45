"""A run: find the items, write each page with the model, submit it (a dry run
unless ``--apply``), report; the endpoint failing stops it."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from memors_core import BadInput, MemorsError, Memory
from memors_core.log import get_logger
from memors_core.wire import to_json

from ..compact_progress import compact_line
from ..output import Progress, emit_json, fail
from .answer import parse_page
from .errors import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE, EndpointFailed, ItemFailed
from .ollama import OllamaClient
from .openai import OpenAIClient
from .progress import ItemProgress
from .prompt import (
    NUM_PREDICT,
    bad_input_request,
    build_prompt,
    passage_refs,
    revision_request,
)
from .protocol import ChatRequest, Client
from .report import (
    SUBMIT_FIELDS,
    blank_report,
    label,
    outcome_text,
    render_item,
    summarize,
    summary_line,
)
from .settings import FLAVORS, executor_kinds, load_settings
from .structured import page_schema, render_page

log = get_logger("memors.executor")


#: What makes the first structured request fall back to a Markdown page.
FALLBACK_CODES = ("no-structured-output", "not-structured")


@dataclass
class AnswerFormat:
    """How pages are asked for in this run: as structured output (JSON)
    until the server shows it cannot give it, then as Markdown."""

    structured: bool
    confirmed: bool = False  # a structured answer came back: no falling back now
    fallback: str | None = None  # why the run fell back to Markdown

    @property
    def name(self) -> str:
        return "json-schema" if self.structured else "markdown"


class _Writer:
    """One item's drafts: each written by the model and submitted, its
    outcome recorded in the item's report."""

    def __init__(
        self,
        memory: Memory,
        client: Client,
        form: AnswerFormat,
        item: dict[str, Any],
        namespace: str,
        apply: bool,
        progress: ItemProgress,
        report: dict[str, Any],
    ) -> None:
        self.memory, self.client, self.form, self.item = memory, client, form, item
        self.namespace, self.apply, self.progress, self.report = namespace, apply, progress, report
        self.refs: list[int] = []  # the refs of the passages the prompt shows

    def write(self, messages: list[dict[str, str]], turn: int) -> tuple[str, str, str]:
        """Ask the model; its answer read as (title, content, what it said),
        or ItemFailed."""
        structured = self.form.structured
        schema = page_schema(self.refs) if structured else None
        answer = self.client.chat(ChatRequest(messages, schema), self.progress.tick)
        log.info(
            "model_answered",
            namespace=self.namespace,
            item=self.item["id"],
            model=self.client.model,
            turn=turn,
            chars=len(answer.content),
            done_reason=answer.done_reason,
            structured=structured,
            **answer.stats,
        )
        if answer.done_reason == "length":
            raise ItemFailed(
                f"the answer was cut off at the model's length limit ({NUM_PREDICT} tokens "
                "or the context window); nothing stored",
                code="cut-off",
            )
        if not structured:
            title, content = parse_page(answer.content)
            return title, content, f"# {title}\n\n{content}"
        title, content = render_page(answer.content)
        self.form.confirmed = True
        return title, content, answer.content.strip()

    def draft(self) -> tuple[list[dict[str, str]], tuple[str, str, str], list[str] | None, int]:
        """The first draft: asked for as structured output while the run
        does; a server that refuses it (or answers something else) the first
        time is asked for Markdown instead, from then on."""
        while True:
            messages, cites, shown = build_prompt(self.item, self.form.structured)
            refs = passage_refs(self.item["payload"])
            self.refs = [refs[a] for a in cites or refs]
            try:
                return messages, self.write(messages, turn=0), cites, shown
            except ItemFailed as exc:
                form = self.form
                if exc.code not in FALLBACK_CODES or not form.structured or form.confirmed:
                    raise
                self.fall_back(exc.message)

    def fall_back(self, reason: str) -> None:
        """From now on pages are asked for as Markdown; said once."""
        self.form.structured, self.form.fallback = False, reason
        url = self.client.endpoint.url
        print(
            f"memors-mcp: {url} gave no structured output ({reason}); "
            "asking for Markdown pages instead",
            file=sys.stderr,
        )
        log.info("structured_output_refused", endpoint=url, reason=reason)
        self.progress.note("no structured output: asking for a Markdown page…")

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
            return bad_input_request(title, exc.message, self.form.structured)
        report.update(submitted)
        flagged = any(not c["passed"] for c in submitted["checks"].values())
        if submitted["stored"]:
            report["outcome"] = "written"
        elif flagged:
            report["outcome"] = "refused"
            return revision_request(self.item, title, submitted["checks"], self.form.structured)
        else:
            report["outcome"] = "would-write"
        return None


def run_item(
    memory: Memory,
    client: Client,
    form: AnswerFormat,
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
    writer = _Writer(memory, client, form, item, namespace, apply, progress, report)
    cites, shown = None, 0
    try:
        messages, (title, content, said), cites, shown = writer.draft()
        feedback = writer.submit(title, content, cites)
        if feedback is not None:
            report["revisions"] = 1
            flags = sum(len(c["flagged"]) for c in (report["checks"] or {}).values())
            progress.revising(flags or 1)
            messages = [
                *messages,
                {"role": "assistant", "content": said},
                {"role": "user", "content": feedback},
            ]
            try:
                title, content, said = writer.write(messages, turn=1)
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


def _execute(
    args: argparse.Namespace,
    memory: Memory,
    client: Client,
    form: AnswerFormat,
    items: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], ItemFailed | None]:
    """Each item written and submitted in turn; the endpoint failing stops
    the run (the rest are not attempted)."""
    reports: list[dict[str, Any]] = []
    stopped: ItemFailed | None = None
    if items:
        try:
            client.check_model()
        except ItemFailed as exc:
            fail(exc.message, code=exc.code, exit_code=EXIT_USAGE)
    progress = ItemProgress(len(items), client.model)
    for n, item in enumerate(items, 1):
        if stopped is not None:
            reports.append(blank_report(item, "not-attempted"))
            continue
        progress.start(n, label(item))
        try:
            report = run_item(memory, client, form, item, args.ns, bool(args.apply), progress)
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
    return reports, stopped


def run_executor(args: argparse.Namespace, kinds: list[str] | None) -> int:
    """``compact --executor ollama|openai``: returns the exit status."""
    flavor = FLAVORS[args.executor]
    settings = load_settings(flavor, dict(os.environ), args.allow_remote)
    client: Client = (OllamaClient if flavor.name == "ollama" else OpenAIClient)(settings)
    form = AnswerFormat(structured=client.structured_output)

    with Memory.open(args.db) as memory:
        # Which kinds write pages is theirs to say: asked of this store's plugins.
        kinds = executor_kinds(kinds, memory.kinds, flavor.name)
        with Progress("compacting", compact_line, sep=" ") as scanning:
            found = memory.compact(
                kinds, args.limit, namespace=args.ns, full=args.full, progress=scanning.update
            )
        compacted = to_json(found)
        reports, stopped = _execute(args, memory, client, form, compacted["items"])

    summary = summarize(reports)
    errors = compacted.get("errors") or []
    result: dict[str, Any] = {
        "namespace": compacted["namespace"],
        "executor": flavor.name,
        "model": settings.model,
        "endpoint": settings.endpoint.url,
        "answer_format": form.name,
        "dry_run": not args.apply,
        "open": compacted["open"],
        "items": reports,
        "summary": summary,
    }
    if form.fallback is not None:
        result["fallback"] = form.fallback
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
