"""Quick answers for commands that start, answer one question and exit.

:func:`search` is :meth:`memors_core.Memory.search` for one call on a SQLite
file: the same checks, the same ranking (:func:`memors_core.domain.search.run`
over the same :class:`~memors_core.storage.sqlite.search.SqliteSearch`), the
same JSON as ``memors-mcp search --json`` prints, without opening a
``Memory`` (no plugins, no attrs model, no migrations), so ``memors-mcp
search`` costs little more than Python's own start. Anything else (a
PostgreSQL store, a file at an older schema, a third party's plugin
installed) answers None and the caller opens a ``Memory``, which migrates
the store, names a plugin that fails to load, or says what is wrong.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: this path runs without typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


def search(
    location: str | None,
    query: str,
    granularity: str = "passage",
    limit: int = 10,
    as_of: str | None = None,
    namespace: str = "default",
    mode: str | None = None,
) -> dict[str, Any] | None:
    """``{"results": [{"address", "granularity", "text", "score"}…], "mode": "lexical"}`` for
    ``query`` in the store file at ``location`` (None: ``$MEMORS_DB`` or the
    default path), as :meth:`Memory.search` answers it; a store that does not
    exist answers no results and is not created. None when the store is not
    a SQLite file at the current schema, or other plugins than memors' own
    kinds are installed (a ``Memory`` loads them and names a broken one, which
    every command must), or when the search would rank by meaning (``mode``
    ``semantic`` or ``hybrid``, or none given where the namespace's passages
    have vectors): then open a ``Memory``."""
    from memors_core.domain import search as rank
    from memors_core.domain.inputs import check_namespace
    from memors_core.settings import default_file, query_chars_limit

    check_namespace(namespace)
    rank.check_request(query, granularity, limit, query_chars_limit(), mode)
    if mode not in (None, "lexical"):
        return None  # by meaning: the model and the vectors are the full path's
    as_of_ts = None
    if as_of is not None:
        from memors_core.domain import dates

        as_of_ts = dates.normalise(as_of, "as_of")
    if location is None:
        location = os.environ.get("MEMORS_DB") or None
    if location is not None and location.startswith(("postgresql://", "postgres://")):
        return None
    from memors_core.plugins.entrypoints import only_built_in_kinds

    if not only_built_in_kinds():
        return None  # a plugin of a third party may be broken: a Memory names it
    path = os.path.expanduser(location) if location else default_file()
    if not os.path.lexists(path):
        return {"results": [], "mode": "lexical"}  # read commands never create a store
    if os.path.isdir(path):
        return None  # the full path says what is wrong, in one line
    from memors_core.storage.sqlite.reader import open_reader

    reader = open_reader(path)
    if reader is None:
        return None
    try:
        if mode is None and granularity in ("passage", "all") and reader.has_vectors(namespace):
            from memors_core import semantic

            if semantic.unavailable() is None:
                return None  # hybrid by default: the full path's
        hits = rank.run(
            reader.search,
            namespace,
            query,
            granularity,
            limit,
            as_of_ts,
            lambda names: reader.named(namespace, names),
        )
        pages = [h.address.rsplit("/", 1)[1] for h in hits if h.granularity == "page"]
        if pages and reader.any_unverified(pages):
            return None  # a page stored over flags shows its unverified sentences: the full path
    finally:
        reader.close()
    return {
        "results": [
            {"address": h.address, "granularity": h.granularity, "text": h.text, "score": h.score}
            for h in hits
        ],
        "mode": "lexical",
    }


__all__ = ["search"]
