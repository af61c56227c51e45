"""The ``memors-mcp`` command line.

:func:`build_parser` builds the whole parser and loads nothing, so
argparse-manpage can render it and ``--help`` stays instant; each
subcommand has a handler in :mod:`memors_cli.commands` returning an exit
status. The store, the MCP SDK and the executor are imported only by the
commands that use them. Importing this module imports nothing beyond
what Python itself has loaded (argparse, ``re`` and ``enum`` cost more
than the interpreter's own start), so ``--version`` answers at once.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~5 ms

if TYPE_CHECKING:  # pragma: no cover
    import argparse
    from collections.abc import Callable, Sequence

PROG = "memors-mcp"

EXIT_OK, EXIT_NEGATIVE, EXIT_USAGE = 0, 1, 2

DESCRIPTION = (
    "A long-term memory store for AI agents: remember documents and facts, search them, "
    "and compact them into checked pages. The same store serves MCP clients (serve)."
)

EPILOG = (
    "Every subcommand takes --db PATH|URL (a SQLite file or a postgresql:// address; "
    "default $MEMORS_DB, else "
    "$XDG_DATA_HOME/memors/memors.db), --ns NAMESPACE (default 'default'), --json and "
    "--log-level LEVEL, before or after its name (memors-mcp --db x.db search raft); "
    "given in both places, the one after the subcommand wins. "
    "Exit status: 0 success; 1 done but negative (lint found problems, a submission was "
    "refused); 2 bad usage or bad input."
)


SUBMIT_EXAMPLES = """\
examples, one for each form (ADDR is an address from the item's payload):
  a page or stale item: the page's Markdown, its title, the passages it cites
    memors-mcp submit 3 --content-file raft.md --title Raft --cite memo://passage/ID --dry-run
    memors-mcp submit 3 --content-file raft.md --title Raft
  a conflict item: keep one fact, the others are superseded; or end one where the other begins
    memors-mcp submit 1 --keep memo://fact/ID
    memors-mcp submit 1 --bound memo://fact/ID --to 2024-03-01
  a duplicate item: keep these passages, their near duplicates are forgotten
    memors-mcp submit 2 --keep memo://passage/ID memo://passage/ID
  a merge item: accept it (choosing the survivor and its name), or reject it
    memors-mcp submit 4 --accept
    memors-mcp submit 4 --accept --survivor "Quorum replication" --name "Quorum replication"
    memors-mcp submit 4 --reject
  any item: skip it, with a reason
    memors-mcp submit 5 --skip --reason "not worth a page"
  any kind's resolution, field by field (VALUE read as JSON when it parses) or whole
    memors-mcp submit 6 --set done="runbook in docs/rollback.md"
    memors-mcp submit 6 --resolution-json '{"done": "runbook in docs/rollback.md"}'
  refused, nothing stored, if the item was refreshed since its fingerprint was read
    memors-mcp submit 1 --keep memo://fact/ID --fingerprint FP
"""

_PARSER_CLASS: type | None = None


def Parser(**kwargs) -> argparse.ArgumentParser:  # a factory, used as parser_class=
    """An ArgumentParser whose errors are one line (and JSON with --json).

    A factory, so that argparse is imported when a parser is built, not
    when this module is."""
    global _PARSER_CLASS
    if _PARSER_CLASS is None:
        import argparse

        class _Parser(argparse.ArgumentParser):
            def error(self, message: str) -> None:  # type: ignore[override]
                from .output import fail

                fail(
                    f"{self.prog}: {message} (see {self.prog} --help)",
                    code="usage",
                    exit_code=EXIT_USAGE,
                )

            def __init__(self, **kw) -> None:
                kw.setdefault("formatter_class", _Formatter)
                super().__init__(**kw)

        class _Formatter(argparse.HelpFormatter):
            """argparse's help layout, sized to the terminal as argparse sizes
            it but without importing shutil, which costs more than the rest of
            reading a command line (every ``add_argument`` makes a formatter)."""

            def __init__(self, prog: str, *args, width: int | None = None, **kw) -> None:
                super().__init__(
                    prog, *args, width=_columns() - 2 if width is None else width, **kw
                )

        _Parser.__name__ = _Parser.__qualname__ = "Parser"
        _PARSER_CLASS = _Parser
    return _PARSER_CLASS(**kwargs)


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it (``$COLUMNS``,
    else standard output's terminal, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _common(nested: bool = False) -> argparse.ArgumentParser:
    """The store options. ``nested`` parsers (``fact add`` under ``fact``)
    take them too but default to nothing, so ``fact --ns X list`` keeps X
    instead of the sub-parser's default silently overwriting it."""
    import argparse

    p = Parser(add_help=False)
    g = p.add_argument_group("store options")
    store, store_true = _marking_actions()
    for flag, spec in _STORE_OPTIONS:
        spec = dict(spec)
        value = spec.pop("default")
        g.add_argument(
            flag,
            action=store_true if spec.pop("flag", False) else store,
            default=argparse.SUPPRESS if nested else value() if callable(value) else value,
            **spec,
        )
    return p


#: The store options (``--db``, ``--ns``, ``--json``, ``--log-level``): taken
#: by every subcommand, and before it (:func:`_add_global_options`).
_STORE_OPTIONS: tuple[tuple[str, dict], ...] = (
    (
        "--db",
        {
            "metavar": "PATH|URL",
            "default": None,
            "help": "the store: a database file, or a postgresql://user@host/db address "
            "(default: $MEMORS_DB or the data dir)",
        },
    ),
    (
        "--ns",
        {"metavar": "NAMESPACE", "default": "default", "help": "namespace (default: default)"},
    ),
    (
        "--json",
        {
            "flag": True,
            "default": False,
            "help": "print JSON instead of text (the same shapes as the MCP tools)",
        },
    ),
    (
        "--log-level",
        {
            "metavar": "LEVEL",
            "default": lambda: os.environ.get("MEMORS_LOG_LEVEL", "warning"),
            "choices": ["debug", "info", "warning", "error"],
            "help": "log level for the structured logs on stderr (default: warning)",
        },
    ),
)


#: The store options, also accepted before the subcommand.
GLOBAL_OPTIONS = ("db", "ns", "json", "log_level")


def _marking_actions() -> tuple[type, type]:
    """store and store_true actions that also note that the option was
    given (``_given_<dest>``): a subcommand's own value then wins over the
    same option given before the subcommand, even when it equals the default."""
    import argparse

    class Store(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, values)
            setattr(namespace, f"_given_{self.dest}", True)

    class StoreTrue(argparse.Action):
        def __init__(self, option_strings, dest, default=False, required=False, help=None):
            super().__init__(
                option_strings,
                dest,
                nargs=0,
                const=True,
                default=default,
                required=required,
                help=help,
            )

        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, True)
            setattr(namespace, f"_given_{self.dest}", True)

    return Store, StoreTrue


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """The store options before the subcommand (``memors-mcp --db x.db search raft``).
    They land under ``_top_<dest>``: a subparser's defaults would overwrite them."""
    import argparse

    g = parser.add_argument_group(
        "store options", "also accepted after the subcommand, where they win if given twice"
    )
    for flag, spec in _STORE_OPTIONS:
        extra = {k: v for k, v in spec.items() if k not in ("default", "flag")}
        if spec.get("flag"):
            extra["action"] = "store_true"
        dest = "_top_" + flag[2:].replace("-", "_")
        g.add_argument(flag, dest=dest, default=argparse.SUPPRESS, **extra)


def _progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr even when it is not a terminal (also MEMORS_PROGRESS=1)",
    )


def apply_global_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the store options given before the subcommand in, unless the
    subcommand was given its own; drop the bookkeeping attributes."""
    for dest in GLOBAL_OPTIONS:
        top = vars(args).pop(f"_top_{dest}", None)
        given = vars(args).pop(f"_given_{dest}", False)
        if top is not None and not given:
            setattr(args, dest, top)
    return args


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``only`` the parser of that one subcommand
    (and the options before it): what ``memors-mcp only …`` needs to read its
    arguments, and no more. Each subcommand's arguments are one function,
    listed in :data:`SUBCOMMANDS`."""
    import argparse  # here, not at module level (see the module docstring)

    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=Parser)
    sub.required = True
    common = _common()
    for name, help_, add_arguments in SUBCOMMANDS:
        if only is not None and name != only:
            continue
        extra: dict[str, object] = {}
        if name == "submit":  # its examples keep their line breaks
            extra = {
                "epilog": SUBMIT_EXAMPLES,
                "formatter_class": argparse.RawDescriptionHelpFormatter,
            }
        parent = _whole_store_options() if name == "export" else common
        p = sub.add_parser(name, help=help_, description=help_, parents=[parent], **extra)
        if add_arguments is not None:
            add_arguments(p)
    return parser


def _whole_store_options() -> argparse.ArgumentParser:
    """The store options of ``export``: without --ns it writes every namespace
    (its own copy of the options: the others keep 'default')."""
    whole = _common()
    whole.set_defaults(ns=None)
    for action in whole._actions:
        if action.dest == "ns":
            action.help = "only this namespace (default: the whole store, counters included)"
    return whole


def _nested_command(
    sub: argparse._SubParsersAction, nested: argparse.ArgumentParser, name: str, help_: str
) -> argparse.ArgumentParser:
    """A command under a command (``fact add``), taking the ``nested`` store options."""
    return sub.add_parser(name, help=help_, description=help_, parents=[nested])


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback host; then a bearer token from MEMORS_HTTP_TOKEN is required",
    )
    p.add_argument(
        "--behind-tls-proxy",
        action="store_true",
        help="browsers reach the server over HTTPS through a proxy: the web view's cookies "
        "are Secure",
    )


def _remember_arguments(p: argparse.ArgumentParser) -> None:
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
    _progress_option(p)


def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "query",
        metavar="QUERY",
        help="any text: its words are OR-ed, stop words dropped (quote it as one argument)",
    )
    p.add_argument(
        "--granularity", default="passage", choices=["passage", "page", "fact", "entity", "all"]
    )
    p.add_argument(
        "--limit", type=int, default=10, metavar="N", help="at most N results (default 10)"
    )
    p.add_argument("--as-of", metavar="T", help="facts valid at time T (ISO 8601)")
    p.add_argument(
        "--mode",
        choices=["lexical", "semantic", "hybrid"],
        default="lexical",
        help="rank passages by their words, by meaning, or both fused (default: lexical, "
        "so one question costs little more than Python's start; meaning needs the model "
        "loaded, about 0.5 s of CPU a call: the MCP server and the library, which load it "
        "once, default to hybrid where passages have vectors)",
    )


def _get_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "address",
        metavar="ADDR",
        help="an address, memo://TYPE/ID (document, passage, entity, fact, page, item); "
        "a bare number is an item",
    )


def _forget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDR", help="the document, passage, fact or page to forget")
    p.add_argument("--reason", metavar="R")


def _fact_arguments(p: argparse.ArgumentParser) -> None:
    nested = _common(nested=True)  # the store options, defaulting to nothing
    fsub = p.add_subparsers(dest="fact_command", metavar="{add,list}", parser_class=Parser)
    fsub.required = True
    q = _nested_command(fsub, nested, "add", "record a fact")
    q.add_argument(
        "subject", metavar="SUBJECT", help="the entity it is about (a name; created if new)"
    )
    q.add_argument("predicate", metavar="PREDICATE", help="what is said of it (any text)")
    q.add_argument("value", metavar="VALUE", help="the value (any text)")
    q.add_argument(
        "--from", dest="valid_from", metavar="T", help="valid from (ISO 8601, inclusive)"
    )
    q.add_argument("--to", dest="valid_to", metavar="T", help="valid until (ISO 8601, exclusive)")
    q.add_argument("--source", metavar="ADDR", help="the passage the fact comes from")
    q = _nested_command(fsub, nested, "list", "list live facts")
    q.add_argument(
        "subject", nargs="?", metavar="SUBJECT", help="only this entity's facts (default: all)"
    )


def _entity_arguments(p: argparse.ArgumentParser) -> None:
    nested = _common(nested=True)  # the store options, defaulting to nothing
    esub = p.add_subparsers(
        dest="entity_command",
        metavar="{list,show,propose-merge,rename,unmerge}",
        parser_class=Parser,
    )
    esub.required = True
    _nested_command(esub, nested, "list", "list entities")
    q = _nested_command(esub, nested, "show", "show an entity with its passages, facts and page")
    q.add_argument(
        "name", metavar="NAME", help="a name or alias (case-insensitive) or memo://entity/ID"
    )
    q = _nested_command(
        esub, nested, "propose-merge", "propose that two entities are one (the first survives)"
    )
    q.add_argument(
        "names",
        nargs=2,
        metavar="NAME",
        help="two entity names: the first survives, the second becomes its alias",
    )
    q.add_argument(
        "--again",
        action="store_true",
        help="propose a pair that was rejected (or whose merge was undone) once more",
    )
    q = _nested_command(
        esub, nested, "rename", "give an entity a new name (its old names stay aliases)"
    )
    q.add_argument("name", metavar="NAME", help="the entity: a name or alias, or memo://entity/ID")
    q.add_argument("new_name", metavar="NEW", help="its name from now on")
    q = _nested_command(
        esub, nested, "unmerge", "undo a merge: the entity merged away stands apart again"
    )
    q.add_argument(
        "name",
        metavar="NAME",
        help="the entity that was merged into another: its name or memo://entity/ID",
    )


def _compact_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kinds", metavar="K,K…", help="only these kinds (comma separated; default all registered)"
    )
    p.add_argument("--limit", type=int, metavar="N", help="list at most N items (0: counts only)")
    p.add_argument("--full", action="store_true", help="rescan everything, not only what changed")
    p.add_argument(
        "--executor",
        choices=["ollama", "openai"],
        help="write pages with a local model: ollama (Ollama's API) or openai (any "
        "OpenAI-compatible server: llama.cpp, vLLM, LM Studio…); page and stale kinds",
    )
    p.add_argument(
        "--apply", action="store_true", help="with --executor: submit for real (default: dry run)"
    )
    p.add_argument(
        "--allow-remote", action="store_true", help="with --executor: allow a non-loopback endpoint"
    )
    _progress_option(p)


def _items_arguments(p: argparse.ArgumentParser) -> None:
    nested = _common(nested=True)  # the store options, defaulting to nothing
    p.add_argument("--kind", metavar="K", help="only this kind")
    p.add_argument("--status", choices=["open", "done", "skipped", "obsolete"])
    isub = p.add_subparsers(dest="items_command", metavar="{show,reopen}", parser_class=Parser)
    q = _nested_command(isub, nested, "show", "show one work item with its payload")
    q.add_argument("item", metavar="ID", help="the item's number (or memo://item/ID)")
    q = _nested_command(
        isub, nested, "reopen", "reopen a done or skipped item, undoing what it did"
    )
    q.add_argument("item", metavar="ID", help="the item's number (or memo://item/ID)")
    q.add_argument("--reason", metavar="R", help="why it is reopened (kept in the audit)")


def _submit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "item", metavar="ID", help="the item's number from compact or items (or memo://item/ID)"
    )
    _page_options(p)
    _conflict_and_duplicate_options(p)
    _merge_options(p)
    _any_kind_options(p)


def _page_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("page and stale items")
    g.add_argument("--content-file", metavar="F", help="the page's Markdown (- for stdin)")
    g.add_argument("--title", metavar="T", help="the page's title")
    g.add_argument(
        "--cite",
        action="append",
        metavar="ADDR",
        help="a payload passage the page cites (repeatable; default all)",
    )


def _conflict_and_duplicate_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("conflict and duplicate items")
    g.add_argument(
        "--keep",
        nargs="+",
        action="extend",
        metavar="ADDR",
        help="the fact (conflict) or passages (duplicate) to keep",
    )
    g.add_argument(
        "--bound",
        metavar="ADDR",
        help="conflict: supersede this fact by a copy with a new bound (--from T and/or --to T)",
    )
    g.add_argument(
        "--from", dest="bound_from", metavar="T", help="with --bound: the copy's valid_from"
    )
    g.add_argument("--to", dest="bound_to", metavar="T", help="with --bound: the copy's valid_to")


def _merge_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("merge items")
    g.add_argument("--accept", action="store_true", help="accept the merge")
    g.add_argument(
        "--survivor",
        metavar="NAME",
        help="with --accept: the entity that survives (a name or address; default the first)",
    )
    g.add_argument("--name", metavar="NAME", help="with --accept: the survivor's name from now on")
    g.add_argument(
        "--reject",
        action="store_true",
        help="reject the merge (not proposed again unless a person does: --again)",
    )


def _any_kind_options(p: argparse.ArgumentParser) -> None:
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


def _lint_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rule",
        action="append",
        dest="rules",
        metavar="RULE",
        help="report only this rule's findings (repeat for several; default: every rule)",
    )


def _corrections_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--action",
        choices=["rename", "merge", "unmerge", "reopen", "propose_again"],
        help="only this action's",
    )
    p.add_argument("--target", metavar="ADDR", help="only those about this entity or item")


def _purge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", metavar="ADDR", help="the document, passage, fact or page to erase")
    p.add_argument("--yes", action="store_true", help="confirm: the content cannot be recovered")


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a file written by export (JSON lines)")
    p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="import an export of an older memors, which has no closing line of counts "
        "and checksum (a file cut short cannot be told from a whole one)",
    )


def _backup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="a new file for the copy (refused if it exists)")


def _reindex_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vectors",
        action="store_true",
        help="embed every live passage that has no vector (safe to stop and run again)",
    )
    p.add_argument(
        "--all-namespaces",
        action="store_true",
        help="every namespace of the store, not only --ns",
    )
    p.add_argument(
        "--background",
        action="store_true",
        help="what remember and compact start by themselves: at a low priority, printing "
        "nothing, and done at once when another run is embedding the namespace",
    )
    _progress_option(p)


EXPORT_HELP = "write every row of the store (or of one namespace) as JSON lines to stdout"

#: Each subcommand in the order ``--help`` lists them: its name, its help,
#: and the function that adds its own arguments (None: the store options only).
SUBCOMMANDS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None] | None], ...] = (
    ("serve", "serve MCP over stdio (default) or streamable HTTP", _serve_arguments),
    (
        "remember",
        "remember documents: files, directories (recursively), - for stdin",
        _remember_arguments,
    ),
    (
        "search",
        "search live rows by their words (BM25; words are OR-ed) and passages by meaning (with the semantic extra)",
        _search_arguments,
    ),
    ("get", "show one thing by address, with its links", _get_arguments),
    ("forget", "tombstone a document, passage, fact or page", _forget_arguments),
    ("fact", "record and list facts", _fact_arguments),
    ("entity", "list, show, rename entities; propose and undo merges", _entity_arguments),
    ("compact", "scan for work items and list the open ones", _compact_arguments),
    ("items", "list work items (or: items show ID, items reopen ID)", _items_arguments),
    ("submit", "complete a work item (the server checks it before storing)", _submit_arguments),
    (
        "lint",
        "report problems (read-only): contradictions, orphans, missing/stale pages, expired facts",
        _lint_arguments,
    ),
    (
        "corrections",
        "list the corrections made (read-only): renames, merges and their undoing, "
        "items reopened, merges proposed again",
        _corrections_arguments,
    ),
    ("metrics", "print the Prometheus metrics of the whole store", None),
    ("purge", "erase a document, passage, fact or page for good (audited)", _purge_arguments),
    ("export", EXPORT_HELP, None),
    ("import", "restore JSON lines written by export into an empty store", _import_arguments),
    ("backup", "copy the whole store consistently to PATH (safe while serving)", _backup_arguments),
    (
        "reindex",
        "make what search needs that a store lacks: --vectors gives passages without a vector one (the semantic extra)",
        _reindex_arguments,
    ),
)


def _version() -> str:
    # A constant (pyproject.toml reads it at build time): importlib.metadata
    # costs more than the rest of a small command.
    from memors_core import __version__

    return __version__


#: Subcommands that parse with their own parser only (:func:`build_parser`).
QUICK = ("search",)


def subcommand(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names when it is one of :data:`QUICK`, read
    past the store options before it; None otherwise (the whole parser)."""
    valued = {f for f, spec in _STORE_OPTIONS if not spec.get("flag")}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in valued:
            i += 2
            continue
        if word.startswith("--") and word.split("=", 1)[0] in valued | {"--json"}:
            i += 1
            continue
        return word if word in QUICK else None
    return None


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every argument the parser took must be text that can be stored:
    a byte that is not UTF-8 (Python hands it over as a lone surrogate),
    a lone surrogate or a NUL is bad input naming the argument, exit 2,
    before any store is opened. Paths too: a file's name may become its
    URI, and the engines take UTF-8 names only."""
    names = argument_names(parser, args)
    for dest, value in vars(args).items():
        for one in value if isinstance(value, list) else [value]:
            why = bad_text(one) if isinstance(one, str) else None
            if why:
                from .output import fail

                name = names.get(dest, dest)
                fail(f"{name} is not valid text ({why})", code="bad-input", exit_code=EXIT_USAGE)


def bad_text(value: str) -> str | None:
    """Why an argument cannot be taken as text, or None: a byte of the
    command line that is not UTF-8 is named as the byte it was."""
    from memors_core.domain.valid_text import problem

    why = problem(value)
    if why and "surrogate" in why:
        for i, char in enumerate(value):
            if "\udc80" <= char <= "\udcff":  # surrogateescape's stand-in for a byte
                return f"byte 0x{ord(char) - 0xDC00:02X} at character {i + 1} is not UTF-8"
            if "\ud800" <= char <= "\udfff":
                break
    return why


def argument_names(
    parser: argparse.ArgumentParser, args: argparse.Namespace | None = None
) -> dict[str, str]:
    """How the user wrote each argument of ``parser`` and its subcommands,
    by the attribute it is stored in: the longest option (``--reason``), or a
    positional's metavar (``QUERY``). Given the parsed ``args``, only the
    subcommands they chose (two subcommands may store different arguments
    in one attribute: ``submit --name`` and ``entity show NAME``)."""
    import argparse

    names: dict[str, str] = {}
    stack = [parser]
    while stack:
        for action in stack.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = getattr(args, action.dest, None) if args is not None else None
                if chosen in action.choices:
                    stack.append(action.choices[chosen])
                else:
                    stack.extend(action.choices.values())
            elif action.option_strings:
                names.setdefault(action.dest, max(action.option_strings, key=len))
            else:
                names.setdefault(action.dest, str(action.metavar or action.dest))
    return names


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # the quick path: no parser, no logging
        sys.stdout.write(f"{PROG} {_version()}\n")
        return EXIT_OK
    from . import output

    output.JSON_MODE = "--json" in argv
    # A command builds the parser of its own subcommand only (``--help`` and
    # errors about the subcommand's name still see them all).
    command = subcommand(argv)
    parser = build_parser(only=command)
    args = apply_global_options(parser.parse_args(argv))
    output.JSON_MODE = bool(getattr(args, "json", False))
    check_arguments(parser, args)
    output.configure_logging(args.log_level, every_logger=args.command == "serve")
    from .commands import dispatch

    return dispatch(args)


def entrypoint() -> None:
    """``memors-mcp`` itself (and ``python -m memors_cli``): :func:`main`, then
    the exit. A quick command (:data:`QUICK`) leaves at once when it is done,
    its output flushed: it holds no thread, file or helper that needs closing,
    and tearing the interpreter down would cost more than the search did."""
    argv = sys.argv[1:]
    code = main(argv)
    if subcommand(argv) in QUICK:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):  # a reader that left early: not an error
            pass
        os._exit(code)
    # What is alive now lives to the end: the interpreter's teardown need not
    # look for cycles among it (its collections took 20-80 ms after a
    # remember or compact, a quarter of a second after the HTTP server).
    # Atexit handlers still run; only the teardown's garbage collection
    # skips these objects.
    import gc

    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entrypoint()
