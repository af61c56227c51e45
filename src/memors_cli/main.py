"""The ``memors-mcp`` command line.

:func:`build_parser` builds the whole parser and loads nothing, so
argparse-manpage can render it and ``--help`` stays instant; each
subcommand has a handler in :mod:`memors_cli.commands` returning an exit
status. The store, the MCP SDK and the executor are imported only by the
commands that use them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

PROG = "memors-mcp"

EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2

DESCRIPTION = (
    "A long-term memory store for AI agents: remember documents and facts, search them, "
    "and compact them into checked pages. The same store serves MCP clients (serve)."
)

EPILOG = (
    "Every subcommand takes --db PATH (default $MEMORS_DB, else "
    "$XDG_DATA_HOME/memors/memors.db), --ns NAMESPACE (default 'default') and --json. "
    "Exit status: 0 success; 1 done but negative (lint found problems, a submission was "
    "refused); 2 bad usage or bad input."
)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (and JSON with --json)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from .output import fail

        fail(f"{self.prog}: {message} (see {self.prog} --help)", code="usage", exit_code=EXIT_USAGE)


def _common(nested: bool = False) -> argparse.ArgumentParser:
    """The store options. ``nested`` parsers (``fact add`` under ``fact``)
    take them too but default to nothing, so ``fact --ns X list`` keeps X
    instead of the sub-parser's default silently overwriting it."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("store options")

    def default(value):
        return argparse.SUPPRESS if nested else value

    g.add_argument(
        "--db",
        metavar="PATH",
        default=default(None),
        help="database file (default: $MEMORS_DB or the data dir)",
    )
    g.add_argument(
        "--ns",
        metavar="NAMESPACE",
        default=default("default"),
        help="namespace (default: default)",
    )
    g.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print JSON instead of text (the same shapes as the MCP tools)",
    )
    g.add_argument(
        "--log-level",
        metavar="LEVEL",
        default=default(os.environ.get("MEMORS_LOG_LEVEL", "warning")),
        choices=["debug", "info", "warning", "error"],
        help="log level for the structured logs on stderr (default: warning)",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    common, nested = _common(), _common(nested=True)
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=Parser)
    sub.required = True

    def add(name: str, help_: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, parents=[common], **kw)

    p = add("serve", "serve MCP over stdio (default) or streamable HTTP")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback host; then a bearer token from MEMORS_HTTP_TOKEN is required",
    )

    p = add("remember", "remember documents: files, directories (recursively), - for stdin")
    p.add_argument("inputs", nargs="*", metavar="FILE|DIR|-", help="what to remember")
    p.add_argument(
        "--jsonl",
        metavar="FILE",
        help="one document per line: {text, uri?, title?, entities?, metadata?}",
    )
    p.add_argument(
        "--uri", help="the document's URI (one document only; a file's default is its path)"
    )
    p.add_argument("--title", help="the document's title (one document only)")
    p.add_argument(
        "--entity",
        action="append",
        default=[],
        metavar="NAME",
        help="an entity every passage mentions (repeatable)",
    )

    p = add("search", "full-text search over live rows (BM25; words are OR-ed)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument(
        "--granularity", default="passage", choices=["passage", "page", "fact", "entity", "all"]
    )
    p.add_argument(
        "--limit", type=int, default=10, metavar="N", help="at most N results (default 10)"
    )
    p.add_argument("--as-of", metavar="T", help="facts valid at time T (ISO 8601)")

    p = add("get", "show one thing by address, with its links")
    p.add_argument("address", metavar="ADDR")

    p = add("forget", "tombstone a document, passage, fact or page")
    p.add_argument("address", metavar="ADDR")
    p.add_argument("--reason", metavar="R")

    p = add("fact", "record and list facts")
    fsub = p.add_subparsers(dest="fact_command", metavar="{add,list}", parser_class=Parser)
    fsub.required = True
    q = fsub.add_parser("add", help="record a fact", parents=[nested])
    q.add_argument("subject", metavar="SUBJECT")
    q.add_argument("predicate", metavar="PREDICATE")
    q.add_argument("value", metavar="VALUE")
    q.add_argument(
        "--from", dest="valid_from", metavar="T", help="valid from (ISO 8601, inclusive)"
    )
    q.add_argument("--to", dest="valid_to", metavar="T", help="valid until (ISO 8601, exclusive)")
    q.add_argument("--source", metavar="ADDR", help="the passage the fact comes from")
    q = fsub.add_parser("list", help="list live facts", parents=[nested])
    q.add_argument("subject", nargs="?", metavar="SUBJECT")

    p = add("entity", "list, show and propose merging entities")
    esub = p.add_subparsers(
        dest="entity_command", metavar="{list,show,propose-merge}", parser_class=Parser
    )
    esub.required = True
    esub.add_parser("list", help="list entities", parents=[nested])
    q = esub.add_parser(
        "show", help="show an entity with its passages, facts and page", parents=[nested]
    )
    q.add_argument("name", metavar="NAME")
    q = esub.add_parser(
        "propose-merge",
        help="propose that two entities are one (the first survives)",
        parents=[nested],
    )
    q.add_argument("names", nargs=2, metavar="NAME")

    p = add("compact", "scan for work items and list the open ones")
    p.add_argument(
        "--kinds", metavar="K,K…", help="only these kinds (comma separated; default all registered)"
    )
    p.add_argument("--limit", type=int, metavar="N", help="list at most N items (0: counts only)")
    p.add_argument("--full", action="store_true", help="rescan everything, not only what changed")
    p.add_argument(
        "--executor",
        choices=["ollama"],
        help="write pages with a local model (page and stale kinds)",
    )
    p.add_argument(
        "--apply", action="store_true", help="with --executor: submit for real (default: dry run)"
    )
    p.add_argument(
        "--allow-remote", action="store_true", help="with --executor: allow a non-loopback endpoint"
    )

    p = add("items", "list work items (or: items show ID)")
    p.add_argument("--kind", metavar="K", help="only this kind")
    p.add_argument("--status", choices=["open", "done", "skipped", "obsolete"])
    isub = p.add_subparsers(dest="items_command", metavar="{show}", parser_class=Parser)
    q = isub.add_parser("show", help="show one work item with its payload", parents=[nested])
    q.add_argument("item", metavar="ID")

    p = add("submit", "complete a work item (the server checks it before storing)")
    p.add_argument("item", metavar="ID")
    g = p.add_argument_group("page and stale items")
    g.add_argument("--content-file", metavar="F", help="the page's Markdown (- for stdin)")
    g.add_argument("--title", metavar="T", help="the page's title")
    g.add_argument(
        "--cite",
        action="append",
        metavar="ADDR",
        help="a payload passage the page cites (repeatable; default all)",
    )
    g = p.add_argument_group("conflict and duplicate items")
    g.add_argument(
        "--keep",
        nargs="+",
        action="extend",
        metavar="ADDR",
        help="the fact (conflict) or passages (duplicate) to keep",
    )
    g = p.add_argument_group("merge items")
    g.add_argument("--accept", action="store_true", help="accept the merge")
    g.add_argument("--reject", action="store_true", help="reject the merge (never proposed again)")
    g = p.add_argument_group("any kind")
    g.add_argument("--skip", action="store_true", help="skip the item (needs --reason)")
    g.add_argument("--reason", metavar="R", help="why it is skipped")
    g.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a resolution field for any kind (VALUE may be JSON)",
    )
    g.add_argument(
        "--resolution-json", metavar="JSON", help="the whole resolution as a JSON object"
    )
    g.add_argument(
        "--fingerprint",
        metavar="FP",
        help="the item's fingerprint from compact or items show: refused if it was refreshed since",
    )
    g.add_argument("--dry-run", action="store_true", help="run every check, store nothing")
    g.add_argument(
        "--force", action="store_true", help="store even if a check flags it (flags are recorded)"
    )

    add(
        "lint",
        "report problems (read-only): contradictions, orphans, missing/stale pages, expired facts",
    )
    add("metrics", "print the Prometheus metrics of the whole store")

    p = add("purge", "erase a document, passage, fact or page for good (audited)")
    p.add_argument("address", metavar="ADDR")
    p.add_argument("--yes", action="store_true", help="confirm: the content cannot be recovered")

    whole = _common()  # export without --ns writes every namespace
    whole.set_defaults(ns=None)  # (its own copy of the options: the others keep 'default')
    for action in whole._actions:
        if action.dest == "ns":
            action.help = "only this namespace (default: the whole store, counters included)"
    help_ = "write every row of the store (or of one namespace) as JSON lines to stdout"
    sub.add_parser("export", help=help_, description=help_, parents=[whole])
    p = add("import", "restore JSON lines written by export into an empty store")
    p.add_argument("file", metavar="FILE")
    p = add("backup", "copy the whole store consistently to PATH (safe while serving)")
    p.add_argument("path", metavar="PATH")
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("memors")
    except Exception:  # pragma: no cover - running from a source tree
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from . import output

    output.JSON_MODE = "--json" in argv
    args = build_parser().parse_args(argv)
    output.JSON_MODE = bool(getattr(args, "json", False))
    output.configure_logging(args.log_level)
    from .commands import dispatch

    return dispatch(args)


def entrypoint() -> None:  # pragma: no cover - thin
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entrypoint()
