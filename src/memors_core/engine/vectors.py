"""Passages' vectors: made outside every write transaction, stored after.

Remembering stores its passages first; once that transaction has committed,
the new passages are embedded (:mod:`memors_core.semantic`) with no lock
held, and their vectors stored in small write transactions of their own, so
other writers never wait on the model. A passage forgotten meanwhile simply
gets none. A process killed in between leaves passages without vectors:
search still finds them by their words, and ``memors-mcp reindex
--vectors`` (:func:`reindex`) makes what is missing, as it does for a store
written before the extra was installed.

Nothing here runs when vectors are not wanted (:func:`unwanted`): no extra,
``MEMORS_VECTORS=off``, or an engine that cannot keep them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memors_core import semantic
from memors_core.domain.model import Reindexed
from memors_core.engine.progress import Progress, Reporter
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.storage.api import Storage

log = get_logger("memors")

#: Passages embedded, then stored in one write transaction.
CHUNK = 256


def unwanted(storage: Storage) -> str | None:
    """Why this process makes and searches no vectors on ``storage``, in one
    line a user can act on; None when it does."""
    reason = semantic.unavailable()
    if reason is None and not storage.capabilities.vectors:
        reason = storage.capabilities.vectors_missing or "this store cannot keep vectors"
    return reason


def embed_question(query: str) -> bytes:
    """The vector of a search's question."""
    return semantic.embedder().embed([query])[0]


def store(
    storage: Storage,
    namespace: str,
    passages: Sequence[tuple[str, str]],
    report: Reporter | None = None,
    documents: int = 0,
) -> int:
    """Embed ``(passage id, text)`` pairs and store their vectors, a chunk
    per write transaction; returns how many were stored (a passage no longer
    live, or with a vector already, is skipped)."""
    if not passages:
        return 0
    model = semantic.embedder()
    total, stored = len(passages), 0

    def say(done: int, force: bool) -> None:
        if report is not None:
            report(
                force,
                task="remember",
                phase="embedding",
                done=done,
                total=total,
                unit="passages",
                documents=documents,
            )

    for start in range(0, total, CHUNK):
        chunk = passages[start : start + CHUNK]
        say(start, start == 0)
        vectors = model.embed([t for _, t in chunk])
        with storage.write() as tx:
            stored += tx.vectors.add(namespace, zip((p for p, _ in chunk), vectors, strict=True))
    say(total, True)
    return stored


def reindex(
    storage: Storage, namespace: str, progress: Callable[[Progress], None] | None = None
) -> Reindexed:
    """Give every live passage of ``namespace`` that has no vector one.
    Safe to stop and run again: each chunk commits on its own, and only
    what is missing is made."""
    reason = unwanted(storage)
    if reason is not None:
        from memors_core.errors import BadInput

        raise BadInput(f"cannot make vectors: {reason}")
    semantic.embedder()  # a broken extra says so before anything is read
    report = Reporter(progress)
    with storage.read() as tx:
        total = tx.vectors.missing_count(namespace)
    done = added = 0
    after = 0
    report(True, task="reindex", phase="embedding", done=0, total=total, unit="passages")
    while True:
        with storage.read() as tx:
            batch = tx.vectors.missing(namespace, after, CHUNK)
        if not batch:
            break
        after = batch[-1][0]
        added += store(storage, namespace, [(p, t) for _, p, t in batch])
        done += len(batch)
        report(
            task="reindex", phase="embedding", done=done, total=max(total, done), unit="passages"
        )
    report(
        True, task="reindex", phase="embedding", done=done, total=max(total, done), unit="passages"
    )
    if added:
        log.info("vectors_added", namespace=namespace, added=added)
    with storage.read() as tx:
        now = tx.vectors.count(namespace)
    return Reindexed(namespace=namespace, added=added, vectors=now, model=semantic.MODEL)
