"""Purge: the one audited way to erase content for good.

The erasure is one write transaction of the storage's
(:meth:`~memors_core.storage.api.Storage.erasing`): the rows go, with what
depends on them, and an audit record naming what was erased (never the
content) commits with them, together with the finishing steps the engine
still has to run for the file to forget the text (on SQLite: merging each
FTS index, VACUUM, a truncating WAL checkpoint). Each step is idempotent and
recorded when done, so a purge killed at any point is finished by the next
purge, by any command that opens the store (:func:`finish_pending`), and
reported by lint until then.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import TYPE_CHECKING

from memors_core.domain.ids import address
from memors_core.domain.model import Purged
from memors_core.errors import BadInput, Interrupted, MemorsError, NotFound, PluginError
from memors_core.log import get_logger
from memors_core.plugins.kinds import KindContext
from memors_core.settings import Limits

if TYPE_CHECKING:
    from memors_core.domain.rows import Passage, PendingPurge
    from memors_core.plugins.manager import Plugins
    from memors_core.storage.api import Storage, Tx

log = get_logger("memors")

PURGEABLE = ("document", "passage", "fact", "page")
#: What a work item that mentioned erased content says instead.
REDACTED = {"purged": "this item referred to content that was purged"}


def _reached(stage: str) -> None:
    """Fault injection for the reliability tests only: with
    ``MEMORS_TEST_PURGE_STOP=STAGE[@SIGNAL]`` the process sends itself that
    signal (SIGKILL by default) when purge reaches STAGE."""
    want = os.environ.get("MEMORS_TEST_PURGE_STOP")
    if want:
        name, _, sig = want.partition("@")
        if name == stage:
            if sig == "SIGINT":
                # It stands for Ctrl-C at a command in the foreground: a process
                # started with SIGINT ignored (``make test &`` from a script) would
                # otherwise never see it. Only this test hook does so; the CLI
                # itself keeps the disposition it inherited.
                with contextlib.suppress(ValueError):  # (not the main thread)
                    signal.signal(signal.SIGINT, signal.default_int_handler)
            os.kill(os.getpid(), getattr(signal, sig or "SIGKILL"))


def purge(
    storage: Storage,
    plugins: Plugins,
    namespace: str,
    kind: str,
    ident: str,
    limits: Limits | None = None,
) -> Purged:
    if kind not in PURGEABLE:
        raise BadInput(f"only documents, passages, facts and pages can be purged, not a {kind}")
    target = address(kind, ident)
    if plugins.plugin_errors:
        # A kind that did not load cannot erase what it derived from the text.
        name, reason = sorted(plugins.plugin_errors.items())[0]
        raise PluginError(
            f"plugin {name!r} failed to load ({reason}), so it cannot erase what it may hold "
            f"of the text; nothing was purged: fix it, or disable it "
            f"(MEMORS_DISABLE_PLUGINS={name}) to purge without it"
        )
    try:
        with storage.erasing() as tx:
            if _holds(tx, kind, ident, namespace):
                erased = _erase(tx, plugins, namespace, kind, ident, limits)
                # Erased rows leave no tombstones behind for incremental scans
                # to see: the next compact of this namespace rescans everything.
                tx.changes.forget_marks(namespace)
                audit = tx.purges.record(namespace, target, erased)
                earlier = False
            else:
                # Erased by an earlier run (which may not have finished).
                prior = tx.purges.last(namespace, target)
                if prior is None:
                    raise NotFound(f"nothing at {target} in namespace {namespace!r}")
                audit, erased, earlier = prior.id, prior.erased, True
            _reached("erase")
    except KeyboardInterrupt:
        raise Interrupted(
            "interrupted; nothing was purged (the erasure is one transaction, rolled back)"
        ) from None
    try:
        _reached("committed")
        left = finish_pending(storage, wait=True)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: {target} was erased (audit record {audit}), but the file may "
            f"still hold its text until the purge finishes: run `memors-mcp purge {target} "
            "--yes` again (any command that opens the store also finishes it)"
        ) from None
    finished = audit not in left
    hold = None if finished else storage.purge_hold(target)
    log.info(
        "purged" if not earlier else "purge_finished",
        namespace=namespace,
        address=target,
        erased=len(erased),
        audit=audit,
        finished=finished,
    )
    return Purged(
        address=target,
        erased=erased,
        audit=audit,
        earlier=earlier,
        finished=finished,
        left=hold,
    )


def _holds(tx: Tx, kind: str, ident: str, namespace: str) -> bool:
    repo = {"document": tx.documents, "passage": tx.passages, "fact": tx.facts, "page": tx.pages}
    return repo[kind].get(ident, namespace) is not None


def pending_purges(storage: Storage, namespace: str | None = None) -> list[PendingPurge]:
    """The unfinished purges (of ``namespace``, or all), oldest first."""
    with storage.read() as tx:
        return tx.purges.pending(namespace)


def finish_pending(storage: Storage, *, wait: bool) -> set[int]:
    """Run every finishing step an unfinished purge still needs; returns the
    audit records still unfinished (empty when all is done).

    ``wait`` (purge itself) waits out other processes within the busy
    timeout and raises :class:`StoreBusy` when the store stays busy; without
    it (opening the store) a busy store leaves the rest for later.
    """
    if not pending_purges(storage):
        return set()
    steps = storage.purge_steps
    for step in steps:
        todo = {p.purge for p in pending_purges(storage) if step in p.steps}
        if not todo:
            continue
        _reached(step)
        if not storage.run_purge_step(step, wait=wait):
            break
        if step == steps[-1]:
            _reached("done")
        with storage.write() as tx:
            tx.purges.step_done(step, todo)
    return {p.purge for p in pending_purges(storage)}


def _erase(
    tx: Tx, plugins: Plugins, namespace: str, kind: str, ident: str, limits: Limits | None
) -> list[str]:
    """Erase ``ident`` and what depends on it; the addresses erased, in order."""
    purges = tx.purges
    erased: list[str] = []
    passages: list[Passage] = []
    if kind == "document":
        passages = purges.passages_of(ident)
    elif kind == "passage":
        passages = tx.passages.by_ids([ident])
    passage_ids = [p.id for p in passages]
    # Entities that may be left with nothing (erased below if so).
    entities = purges.mentioned(passage_ids)
    if kind == "fact":
        fact = tx.facts.get(ident)
        if fact is not None:
            entities.add(fact.subject)

    # Pages citing an erased passage or built with an erased fact (they may
    # state it), and every later version built on one of them (its payload
    # carried the earlier version's text).
    pages: set[str] = {ident} if kind == "page" else set()
    pages |= purges.pages_citing(passage_ids)
    if kind == "fact":
        pages |= purges.pages_built_with([ident])
    frontier = set(pages)
    while frontier:
        frontier = purges.later_pages(frontier) - pages
        pages |= frontier
    # Latest versions first, so no remaining page names an erased one as previous.
    rows = [page for page in (tx.pages.get(p) for p in pages) if page is not None]
    for page in sorted(rows, key=lambda p: (p.version, p.seq), reverse=True):
        purges.erase_page(page.id)
        purges.redact_items(page.id, REDACTED)
        erased.append(address("page", page.id))

    if passages:
        _erase_kind_state(tx, plugins, namespace, passages, limits)
    if passage_ids:
        purges.erase_passages(passage_ids)
        purges.redact_items_many(passage_ids, REDACTED)
        erased.extend(address("passage", p) for p in passage_ids)
    if kind == "document":
        purges.erase_document(ident)
        erased.insert(0, address("document", ident))
    if kind == "fact":
        purges.erase_fact(ident)
        purges.redact_items(ident, REDACTED)
        erased.append(address("fact", ident))
    # Entities that nothing names any more: their names go with the content.
    for entity in purges.unnamed_entities(entities):
        purges.erase_entity(entity)
        purges.redact_items(entity, REDACTED)
        erased.append(address("entity", entity))
    return erased


def _erase_kind_state(
    tx: Tx, plugins: Plugins, namespace: str, passages: list[Passage], limits: Limits | None
) -> None:
    """Let every kind forget what it derived from the passages (an index, a cache)."""
    ctx = KindContext(tx, namespace, limits=limits if limits is not None else Limits())
    for kind in plugins.kinds:
        try:
            kind.erase(ctx, list(passages))
        except MemorsError:
            raise
        except Exception as exc:
            raise PluginError(
                f"kind {kind.name!r} (plugin {plugins.kinds.owner(kind.name)!r}) could not erase "
                f"its state for the purged passages ({type(exc).__name__}: {exc}); nothing was "
                "purged"
            ) from exc
