"""The optional Ollama executor: ``compact --kinds page[,stale] --executor ollama``.

It writes the page of each item whose kind says it writes pages
(:attr:`memors_core.plugins.kinds.Kind.writes_page`: the built-in ``page`` and
``stale``, and any plugin's kind that declares it) with a local model and hands
the result to :meth:`memors_core.Memory.submit` — the same validation and
checks as any other submission. Without ``--apply`` every submission is a dry
run (nothing stored); with it, pages the checks refuse are reported and the
run goes on with the next item. Either way a refused draft goes back to the
model once, with the checks' flags, and its revision is submitted instead.

The executor lives in the CLI package only: no MCP code path can reach it
(an import-linter contract in ``pyproject.toml`` forbids ``memors_mcp`` to
import ``memors_cli``). It uses only the public service (``Memory.compact``,
``Memory.submit``) and the wire format, and only the standard library for
HTTP (``http.client``, which, unlike ``urllib``, never goes through a proxy
from the environment, so a checked loopback endpoint is really what is
contacted).
"""

from __future__ import annotations

from .run import run_executor

__all__ = ["run_executor"]
