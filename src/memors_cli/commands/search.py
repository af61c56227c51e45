"""``search``: kept light, so asking the store one question costs little
more than Python's own start (a ``Memory`` is opened only when the quick
path of :func:`memors_core.quick.search` does not apply)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: this command runs without typing
if TYPE_CHECKING:  # pragma: no cover
    import argparse
    from typing import Any


def cmd_search(args: argparse.Namespace) -> int:
    from memors_core.quick import search

    from ..output import emit_json

    result = search(
        args.db, args.query, args.granularity, args.limit, args.as_of, args.ns, args.mode
    )
    if result is None:  # not a plain lexical search of a SQLite file: the full path
        result = _with_memory(args)
    if args.json:
        emit_json(result)
    else:
        if result.get("notice"):
            import sys

            print(f"memors-mcp: {result['notice']}", file=sys.stderr)
        print(search_text(result))
    return 0


def _with_memory(args: argparse.Namespace) -> dict[str, Any]:
    from memors_core.wire import to_json

    from ._common import open_memory

    with open_memory(args, reading=True) as memory:
        return to_json(
            memory.search(
                args.query,
                granularity=args.granularity,
                limit=args.limit,
                as_of=args.as_of,
                namespace=args.ns,
                mode=args.mode,
            )
        )


def search_text(result: dict[str, Any]) -> str:
    """The hits for a person: score and address, then the text on one line."""
    lines = []
    for hit in result["results"]:
        snippet = " ".join(hit["text"].split())
        if len(snippet) > 240:
            snippet = snippet[:237] + "..."
        lines.append(f"{hit['score']:.4g}  {hit['address']}\n       {snippet}")
        for sentence in hit.get("unverified") or []:  # a page stored over its checks' flags
            lines.append(f"       UNVERIFIED: {' '.join(sentence.split())}")
    return "\n".join(lines) if lines else "no results"
