"""The subcommands: each handler takes the parsed arguments and returns an
exit status; :func:`dispatch` runs one and turns every error into one line."""

from __future__ import annotations

import argparse
import os

from memors_core import MemorsError, Refused

from ..output import fail
from .admin import cmd_backup, cmd_export, cmd_import, cmd_lint, cmd_metrics, cmd_purge
from .compaction import cmd_compact, cmd_items
from .records import cmd_entity, cmd_fact, cmd_forget, cmd_get, cmd_search
from .remember import cmd_remember
from .serve import cmd_serve
from .submit import cmd_submit


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
