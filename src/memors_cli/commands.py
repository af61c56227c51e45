"""Subcommand handlers: each takes the parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memors_core import MemorsError, Memory, Refused
from memors_core.memory import Limits
from memors_core.wire import to_json

from . import files
from .output import Progress, emit_json, fail, render

TEXT_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".txt", ".text", ".rst"}


def dispatch(args: argparse.Namespace) -> int:
    handler = HANDLERS[args.command]
    try:
        return handler(args)
    except Refused as exc:
        fail(exc.message, code=exc.code, exit_code=1)
    except MemorsError as exc:
        fail(exc.message, code=exc.code)
    except KeyboardInterrupt as exc:
        fail(
            getattr(exc, "message", None)
            or "interrupted; nothing half-stored (each batch is one transaction)",
            code="interrupted",
        )
    except BrokenPipeError:
        # stdout closed early (piped into head): not an error of ours
        os._exit(0)
    except OSError as exc:  # a path the user named cannot be used (too long, no access…)
        name = str(exc.filename or "")
        shown = name if len(name) <= 80 else name[:77] + "..."
        fail(f"{shown + ': ' if shown else ''}{exc.strerror or exc}", code="bad-input")
    except Exception as exc:  # a bug: still one line, never a traceback
        if os.environ.get("MEMORS_DEBUG"):
            raise
        fail(
            f"internal error: {type(exc).__name__}: {exc} (set MEMORS_DEBUG=1 for a traceback)",
            code="internal",
        )
    return 2  # pragma: no cover


def _open(args: argparse.Namespace) -> Memory:
    return Memory.open(args.db)


def _print(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if args.json:
        emit_json(data)
    else:
        print(text if text is not None else render(data))


# --- remember ----------------------------------------------------------------


DOCUMENT_SETTING = "MEMORS_MAX_DOCUMENT_BYTES"


def _read_text(path: Path, limit: int, setting: str = DOCUMENT_SETTING) -> str:
    # A regular file only (never a FIFO or a device), read with a bound.
    return files.read_text_file(path, limit, setting)


def _read_stdin(limit: int, setting: str = DOCUMENT_SETTING) -> str:
    raw = files.read_bounded(sys.stdin.buffer, limit, "standard input", setting)
    return files.decode_text(raw, "standard input")


def _walk(directory: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            p = Path(root) / name
            if p.suffix.lower() in TEXT_SUFFIXES and not name.startswith("."):
                yield p


def cmd_remember(args: argparse.Namespace) -> int:
    inputs: list[str] = args.inputs
    if not inputs and not args.jsonl:
        if sys.stdin.isatty():
            fail("remember needs FILE, DIR, - (stdin) or --jsonl FILE", code="usage")
        inputs = ["-"]
    many = bool(args.jsonl) or len(inputs) > 1 or any(Path(i).is_dir() for i in inputs if i != "-")
    if many and (args.uri or args.title):
        fail(
            "--uri and --title apply to one document; use --jsonl for per-document fields",
            code="usage",
        )
    if inputs.count("-") > 1:
        fail("standard input (-) can be read only once", code="usage")
    # Check every named path before storing anything: a named FIFO or device
    # is refused (inside a directory, such an entry is skipped and reported).
    for i in inputs:
        if i != "-" and not os.path.lexists(i):  # (a broken link is named as one below)
            fail(f"{i}: no such file or directory", code="bad-input")
        if i != "-" and not Path(i).is_dir():
            files.check_regular(Path(i))
    if args.jsonl and args.jsonl != "-":
        files.check_regular(Path(args.jsonl))

    with _open(args) as memory:
        limit = memory.limits.document_bytes
        if not many:
            source = inputs[0]
            if source == "-":
                text = _read_stdin(limit)
                uri = args.uri
            else:
                path = Path(source)
                text = _read_text(path, limit)
                uri = args.uri or str(path.resolve())
            result = memory.remember(
                text, uri=uri, title=args.title, entities=args.entity, namespace=args.ns
            )
            data = to_json(result)
            _print(
                args,
                data,
                f"remembered {data['document']}: {len(data['passages'])} passage(s), "
                f"{len(data['entities'])} entit{'y' if len(data['entities']) == 1 else 'ies'}",
            )
            return 0

        progress = Progress("remembering")
        skipped: list[str] = []
        not_regular: list[files.NotRegularFile] = []  # entries of a directory, skipped
        labels: list[str] = []  # what to call the n-th document in an error

        def documents() -> Iterator[dict[str, Any]]:
            from memors_core.memory import iter_jsonl

            for source in inputs:
                if source == "-":
                    text = _read_stdin(limit)
                    labels.append("standard input")
                    yield {"text": text, "entities": args.entity}
                    continue
                path = Path(source)
                walked = path.is_dir()
                paths = list(_walk(path)) if walked else [path]
                for p in paths:
                    try:
                        text = _read_text(p, limit)
                    except files.NotRegularFile as exc:
                        if not walked:  # named on the command line: refused
                            raise
                        not_regular.append(exc)
                        continue
                    if not text.strip():
                        skipped.append(str(p))
                        continue
                    labels.append(str(p))
                    yield {"text": text, "uri": str(p.resolve()), "entities": args.entity}
            if args.jsonl:
                if args.jsonl == "-":
                    handle = sys.stdin.buffer
                else:
                    handle, _size = files.open_regular(Path(args.jsonl))
                # No limit on the file as a whole, but each line is read with a bound.
                raw = files.bounded_lines(
                    handle,
                    files.line_limit(limit),
                    args.jsonl,
                    f"at most 6 times {DOCUMENT_SETTING} plus 1 MiB for one document",
                )
                line = 0

                def numbered() -> Iterator[str]:
                    nonlocal line
                    for line, text in enumerate(files.decoded_lines(raw, args.jsonl), 1):  # noqa: B007
                        yield text

                try:
                    for doc in iter_jsonl(numbered(), args.jsonl):
                        labels.append(f"{args.jsonl}:{line}")
                        if args.entity:
                            own = doc.get("entities") or []
                            own = [own] if isinstance(own, str) else own
                            if isinstance(own, list):
                                doc = {**doc, "entities": [*own, *args.entity]}
                        yield doc
                finally:
                    if handle is not sys.stdin.buffer:
                        handle.close()

        try:
            result = memory.remember_many(
                documents(),
                namespace=args.ns,
                progress=lambda n: progress.update(n, "documents"),
                where=lambda n: labels[n - 1],
            )
        finally:
            progress.done()
        data = to_json(result)
        notes = [f"{len(skipped)} empty file(s)"] if skipped else []
        if not_regular:
            data["not_regular_files"] = [{"path": e.path, "type": e.type} for e in not_regular]
            entries = "entry" if len(not_regular) == 1 else "entries"
            notes.append(f"{len(not_regular)} {entries} that are not regular files")
            for e in not_regular:  # on success only: an error stays one line
                print(
                    f"memors-mcp: skipped {e.path}: {e.what}, not a regular file", file=sys.stderr
                )
        note = f" (skipped {', '.join(notes)})" if notes else ""
        _print(
            args,
            data,
            f"remembered {data['documents']} document(s), {data['passages']} "
            f"passage(s), {data['entities']} new entit(ies){note}",
        )
        return 0


# --- search, get, forget -------------------------------------------------------


def cmd_search(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        result = to_json(
            memory.search(
                args.query,
                granularity=args.granularity,
                limit=args.limit,
                as_of=args.as_of,
                namespace=args.ns,
            )
        )
    lines = []
    for hit in result["results"]:
        snippet = " ".join(hit["text"].split())
        if len(snippet) > 240:
            snippet = snippet[:237] + "..."
        lines.append(f"{hit['score']:.4g}  {hit['address']}\n       {snippet}")
    _print(args, result, "\n".join(lines) if lines else "no results")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        data = to_json(memory.get(args.address, namespace=args.ns))
    _print(args, data)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        data = to_json(memory.forget(args.address, reason=args.reason, namespace=args.ns))
    if data["forgotten"]:
        text = f"forgot {len(data['forgotten'])} row(s): " + ", ".join(data["forgotten"])
    else:
        text = f"{data['address']} was already {data['status']}; nothing changed"
    _print(args, data, text)
    return 0


# --- facts and entities -------------------------------------------------------------


def cmd_fact(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        if args.fact_command == "add":
            data = to_json(
                memory.record_fact(
                    args.subject,
                    args.predicate,
                    args.value,
                    valid_from=args.valid_from,
                    valid_to=args.valid_to,
                    source=args.source,
                    namespace=args.ns,
                )
            )
            _print(args, data, f"recorded {data['fact']}")
            return 0
        data = to_json(memory.facts(args.subject, namespace=args.ns))
    lines = []
    for f in data["facts"]:
        span = ""
        if f["valid_from"] or f["valid_to"]:
            span = f"  [{f['valid_from'] or '…'}, {f['valid_to'] or '…'})"
        lines.append(f"{f['address']}  {f['subject']} | {f['predicate']} | {f['value']}{span}")
    _print(args, data, "\n".join(lines) if lines else "no facts")
    return 0


def cmd_entity(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        if args.entity_command == "list":
            data = to_json(memory.entities(namespace=args.ns))
            lines = [
                f"{e['address']}  {e['name']}"
                + (f" (also {', '.join(e['aliases'])})" if e["aliases"] else "")
                + f"  passages={e['passages']} facts={e['facts']}"
                + (f" page={e['page']}" if e["page"] else "")
                for e in data["entities"]
            ]
            _print(args, data, "\n".join(lines) if lines else "no entities")
        elif args.entity_command == "show":
            _print(args, to_json(memory.entity(args.name, namespace=args.ns)))
        else:
            data = to_json(memory.propose_merge(list(args.names), namespace=args.ns))
            _print(
                args,
                data,
                f"merge candidate {data['candidate']} is {data['status']}: "
                f"{data['entities'][1]} into {data['entities'][0]} "
                "(run compact to get its merge item)",
            )
    return 0


# --- compaction ----------------------------------------------------------------------


def _kinds_arg(value: str | None) -> list[str] | None:
    if value is None:
        return None
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    if not kinds:
        fail("--kinds needs at least one kind name", code="usage")
    return kinds


def _item_line(item: dict[str, Any]) -> str:
    p = item["payload"]
    kind = item["kind"]
    if isinstance(p.get("summary"), str):  # any kind may say in one line what an item is about
        about = " ".join(p["summary"].split())[:120]
    elif "entity" in p and isinstance(p["entity"], dict):
        about = f"{p['entity']['name']} ({len(p.get('passages', []))} passages, {len(p.get('facts', []))} facts)"
    elif kind == "conflict":
        about = " vs ".join(f"{f['subject']} {f['predicate']} {f['value']!r}" for f in p["facts"])
    elif kind == "merge":
        about = " + ".join(e["name"] for e in p["entities"])
    elif kind == "duplicate":
        about = f"{len(p['passages'])} passages, {p['pair_count']} pair(s), jaccard >= {p['jaccard']:.2f}"
    else:
        about = ", ".join(sorted(p))[:80]
    return f"#{item['id']:<5} {kind:<10} {item['status']:<8} {about}"


def cmd_compact(args: argparse.Namespace) -> int:
    kinds = _kinds_arg(args.kinds)
    if args.executor is None and (args.apply or args.allow_remote):
        fail("--apply and --allow-remote go with --executor ollama", code="usage")
    if args.limit is not None and args.limit < 0:
        fail("--limit must be 0 or more", code="usage")
    if args.executor == "ollama":
        from .executor import run_executor

        return run_executor(args, kinds)
    progress = Progress("compacting")
    with _open(args) as memory:
        try:
            result = memory.compact(
                kinds,
                args.limit,
                namespace=args.ns,
                full=args.full,
                progress=lambda k: progress.update(0, f"scanning {k}"),
            )
        finally:
            progress.done()
        data = to_json(result)
    lines = [f"namespace {data['namespace']}: {data['created']} new item(s), {data['open']} open"]
    lines.extend(_item_line(i) for i in data["items"])
    for err in data.get("errors", []):
        lines.append(f"error: kind {err['kind']} (plugin {err['plugin']}) failed: {err['error']}")
    _print(args, data, "\n".join(lines))
    return 1 if data.get("errors") else 0


def cmd_items(args: argparse.Namespace) -> int:
    with _open(args) as memory:
        if args.items_command == "show":
            data = to_json(
                memory.get(
                    f"memo://item/{args.item}" if args.item.isdigit() else args.item,
                    namespace=args.ns,
                )
            )
            _print(args, data, json.dumps(data, indent=2, ensure_ascii=False))
            return 0
        data = to_json(memory.items(kind=args.kind, status=args.status, namespace=args.ns))
    lines = [_item_line(i) for i in data["items"]]
    _print(args, data, "\n".join(lines) if lines else "no items")
    return 0


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--set takes KEY=VALUE, got {pair!r}", code="usage")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value  # a bare word is a string
        out[key.strip()] = parsed
    return out


def build_resolution(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if args.resolution_json is not None:
        try:
            res = json.loads(args.resolution_json)
        except json.JSONDecodeError as exc:
            fail(f"--resolution-json is not valid JSON ({exc.msg})", code="bad-input")
        if not isinstance(res, dict):
            fail("--resolution-json must be a JSON object", code="bad-input")
    if args.set:
        res.update(_parse_set(args.set))
    if args.content_file is not None:
        # A page's text, but a kind may take other content: the larger limit bounds the read.
        limits = Limits()
        limit, setting = max(
            (limits.page_bytes, "MEMORS_MAX_PAGE_BYTES"), (limits.document_bytes, DOCUMENT_SETTING)
        )
        if args.content_file == "-":
            res["content"] = _read_stdin(limit, setting)
        else:
            res["content"] = _read_text(Path(args.content_file), limit, setting)
    for field in ("title", "reason"):
        if getattr(args, field) is not None:
            res[field] = getattr(args, field)
    if args.cite:
        res["cites"] = args.cite
    if args.keep:
        res["keep"] = args.keep
    for flag in ("accept", "reject", "skip"):
        if getattr(args, flag):
            res[flag] = True
    if not res:
        fail(
            "submit needs a resolution: --content-file F --title T, --keep ADDR, --accept, "
            "--reject, --skip --reason R, --set KEY=VALUE or --resolution-json JSON",
            code="usage",
        )
    if args.accept and args.reject:
        fail("--accept and --reject exclude each other", code="usage")
    if args.skip and not args.reason:
        fail("--skip needs --reason R", code="usage")
    return res


def cmd_submit(args: argparse.Namespace) -> int:
    resolution = build_resolution(args)
    with _open(args) as memory:
        report = to_json(
            memory.submit(
                args.item,
                resolution,
                dry_run=args.dry_run,
                force=args.force,
                fingerprint=args.fingerprint,
                namespace=args.ns,
            )
        )
    message = report.pop("message", "")
    lines = [f"item {report['item']} ({report['kind']}): {message}"]
    if report["address"]:
        lines.append(f"stored {report['address']}")
    would = "" if report["stored"] else "would be "  # a dry run says what it would do
    for field, label in (("kept", "kept"), ("forgotten", "forgotten"), ("left", "left live")):
        if isinstance(report.get(field), list):
            lines.append(f"{would}{label} ({len(report[field])}):")
            lines.extend(f"  {a}" for a in report[field])
    for name, check in report["checks"].items():
        lines.append(f"{name}: {'passed' if check['passed'] else 'FLAGGED'}")
        for flag in check["flagged"]:
            lines.append("  - " + ", ".join(f"{k}={v}" for k, v in flag.items()))
    if report["diff"]:
        lines.append("diff:")
        lines.append(report["diff"].rstrip("\n"))
    _print(args, report, "\n".join(lines))
    refused = not report["stored"] and not args.dry_run
    flagged = any(not c["passed"] for c in report["checks"].values())
    return 1 if refused or (args.dry_run and flagged and not args.force) else 0


# --- lint, metrics, purge, serve, export/import/backup ---------------------------------------


def cmd_lint(args: argparse.Namespace) -> int:
    from memors_core.lint import run_lint
    from memors_core.ops import check_namespace
    from memors_core.plugins import build_plugin_manager
    from memors_core.store import default_path

    check_namespace(args.ns)
    path = Path(os.path.expanduser(args.db)) if args.db else default_path()
    data = to_json(run_lint(path, args.ns, build_plugin_manager()))
    lines = [f"{f['rule']:<14} {f['address']}  {f['message']}" for f in data["findings"]]
    _print(args, data, "\n".join(lines) if lines else f"namespace {args.ns}: no findings")
    return 1 if data["findings"] else 0


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.json:
        fail("metrics prints the Prometheus text format; it has no --json form", code="usage")
    from memors_core.store import default_path

    path = Path(args.db).expanduser() if args.db else default_path()
    if not path.exists():
        # Reading metrics never creates a store: report an empty one instead.
        import tempfile

        with (
            tempfile.TemporaryDirectory(prefix="memors-metrics-") as tmp,
            Memory.open(Path(tmp) / "empty.db") as memory,
        ):
            sys.stdout.write(memory.metrics())
        return 0
    with _open(args) as memory:
        text = memory.metrics()
    sys.stdout.write(text)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    if not args.yes:
        fail(f"purge erases {args.address} for good; add --yes to confirm", code="usage")
    with _open(args) as memory:
        data = to_json(memory.purge(args.address, namespace=args.ns))
    if data["earlier"]:
        text = f"{data['address']} was erased already (audit record {data['audit']})"
        text += "; its erasure from the file is finished" if data["finished"] else ""
    else:
        text = f"purged {len(data['erased'])} row(s); audit record {data['audit']}"
    if not data["finished"]:
        text += (
            "; another process still reads old pages of the file: the next memors command "
            "finishes erasing them"
        )
    _print(args, data, text)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from memors_mcp.server import serve

    return serve(args)


def cmd_export(args: argparse.Namespace) -> int:
    from memors_core.transfer import export_rows

    with _open(args) as memory:
        for row in export_rows(memory, args.ns):
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from memors_core.transfer import import_rows

    path = Path(args.file)
    handle, _size = files.open_regular(path)  # never a FIFO or a device
    with handle, _open(args) as memory:
        limits = memory.limits
        lines = files.bounded_lines(
            handle,
            files.import_line_limit(limits.document_bytes, limits.page_bytes),
            str(path),
            f"raise {DOCUMENT_SETTING} to read longer lines",
        )
        data = import_rows(memory, lines, str(path))
    _print(args, data, f"imported {sum(data['rows'].values())} row(s)")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from memors_core.transfer import backup

    with _open(args) as memory:
        data = backup(memory, args.path)
    _print(args, data, f"backed up to {data['path']} ({data['pages']} database pages)")
    return 0


HANDLERS = {
    "serve": cmd_serve,
    "remember": cmd_remember,
    "search": cmd_search,
    "get": cmd_get,
    "forget": cmd_forget,
    "fact": cmd_fact,
    "entity": cmd_entity,
    "compact": cmd_compact,
    "items": cmd_items,
    "submit": cmd_submit,
    "lint": cmd_lint,
    "metrics": cmd_metrics,
    "purge": cmd_purge,
    "export": cmd_export,
    "import": cmd_import,
    "backup": cmd_backup,
}
