"""The subcommands: each handler takes the parsed arguments and returns an
exit status; :func:`dispatch` runs one and turns every error into one line."""

from __future__ import annotations

import os

from memors_core import MemorsError, Refused

from ..output import fail

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ``search`` runs without typing
if TYPE_CHECKING:  # pragma: no cover
    import argparse

#: Each subcommand's handler, ``module:function`` under this package,
#: imported when it runs (a command pays only for its own imports).
HANDLERS = {
    "serve": "serve:cmd_serve",
    "remember": "remember:cmd_remember",
    "search": "search:cmd_search",
    "get": "records:cmd_get",
    "forget": "records:cmd_forget",
    "fact": "records:cmd_fact",
    "entity": "records:cmd_entity",
    "compact": "compaction:cmd_compact",
    "items": "compaction:cmd_items",
    "submit": "submit:cmd_submit",
    "lint": "admin:cmd_lint",
    "corrections": "admin:cmd_corrections",
    "metrics": "admin:cmd_metrics",
    "purge": "admin:cmd_purge",
    "export": "admin:cmd_export",
    "import": "admin:cmd_import",
    "backup": "admin:cmd_backup",
    "reindex": "admin:cmd_reindex",
}


#: The options that give a date, by command and the field their value goes to:
#: a date error names the option the user typed (``--from``), not the field.
DATE_OPTIONS = {
    "fact": (("valid_from", "--from"), ("valid_to", "--to")),
    "search": (("as_of", "--as-of"),),
    "submit": (("valid_from", "--from"), ("valid_to", "--to")),
}


def _options_named(args: argparse.Namespace, message: str) -> str:
    """A date error's message with the fields it names spelled as the options."""
    dated = ("ISO 8601", " must be before ", "out of range once converted")
    if not any(part in message for part in dated):
        return message
    if args.command == "submit" and not (
        getattr(args, "bound_from", None) or getattr(args, "bound_to", None)
    ):
        return message  # the bounds came in --resolution-json, by their field names
    for field, option in DATE_OPTIONS.get(args.command, ()):
        message = message.replace(f"{field} ", f"{option} ")
    return message


def handler_of(command: str):
    """The handler function of ``command``."""
    import importlib

    module, _, function = HANDLERS[command].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def dispatch(args: argparse.Namespace) -> int:
    try:
        return handler_of(args.command)(args)
    except Refused as exc:
        fail(exc.message, code=exc.code, exit_code=1)
    except MemorsError as exc:
        fail(_options_named(args, exc.message), code=exc.code)
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
