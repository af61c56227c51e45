"""The compaction engine: the work-item queue and submissions.

Kinds (plugins) say which items should exist (``scan``) and how a
resolution is stored (``apply``); the engine keeps the queue idempotent,
refreshes and obsoletes items, refuses outdated submissions, runs the check
hooks and counts every event in the store's persisted counters.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from memors_core.domain import valid_text
from memors_core.domain.counters import WORK_ITEMS_TOTAL
from memors_core.domain.dates import now
from memors_core.domain.ids import parse_address
from memors_core.domain.model import (
    CheckResult,
    Compacted,
    ItemSummary,
    SkipResolution,
    SubmitReport,
)
from memors_core.domain.rows import ScanMark
from memors_core.engine.progress import Progress, Reporter
from memors_core.errors import (
    BadInput,
    MemorsError,
    NotFound,
    PluginError,
    Refused,
    StoreBusy,
    StoreUnavailable,
)
from memors_core.plugins.kinds import (
    Candidate,
    Changes,
    CheckContext,
    Item,
    Kind,
    KindContext,
    Scan,
)
from memors_core.wire import structure

if TYPE_CHECKING:
    from memors_core.engine.services import Services
    from memors_core.storage.api import Storage, Tx

from memors_core.log import get_logger

log = get_logger("memors.compaction")

ITEM_STATUSES = ("open", "done", "skipped", "obsolete")
EVENTS = ("created", "refreshed", "done", "skipped", "obsolete", "refused")
FLAG_FIELDS = ("accept", "reject", "skip")


def load_item(storage: Storage, item_id: int, namespace: str) -> Item | None:
    with storage.read() as tx:
        return tx.items.get(item_id, namespace)


def list_items(
    storage: Storage, namespace: str, kind: str | None = None, status: str | None = None
) -> list[Item]:
    with storage.read() as tx:
        return tx.items.list(namespace, kind, status)


def _count(tx: Tx, kind: str, event: str, by: int = 1) -> None:
    tx.counters.bump(WORK_ITEMS_TOTAL, kind, event, by)


def selected_kinds(services: Services, kinds: Any) -> list[Kind]:
    names = services.kinds.names()
    if kinds is None or kinds == []:
        return [services.kinds.get(n) for n in names]
    if isinstance(kinds, str):
        kinds = [k for k in kinds.replace(",", " ").split() if k]
    if not isinstance(kinds, list | tuple) or not all(isinstance(k, str) for k in kinds):
        raise BadInput("kinds must be a list of kind names")
    unknown = [k for k in kinds if k not in services.kinds]
    broken = [k for k in unknown if k in services.plugin_errors]
    if broken:  # a kind is named like its plugin
        raise PluginError(
            "; ".join(
                f"kind {k!r} cannot run: its plugin {k!r} failed to load: {services.plugin_errors[k]}"
                for k in broken
            )
        )
    if unknown:
        raise BadInput(
            f"unknown kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
            f"registered kinds are {', '.join(names) or '(none)'}"
        )
    return [services.kinds.get(n) for n in dict.fromkeys(kinds)]


#: The entities the change log names since a kind's mark, by (that mark,
#: the clocks when they were read): what one compaction's kinds share.
ChangesRead = dict[tuple[int, ScanMark], frozenset[str]]


def _changes_since(
    tx: Tx, namespace: str, mark: ScanMark, heads: ScanMark, read: ChangesRead | None = None
) -> Changes:
    """What changed in ``namespace`` since ``mark``, the clocks now being
    ``heads``. A compaction's kinds, scanned one after the other, mostly
    share one mark: the log is read once for them (``read``). The log only
    grows past its clock (a change logged since moves ``heads``; a prune
    removes entries no mark is below), so the same mark and clocks name the
    same entities."""
    key = (mark.changes, heads)
    entities = None if read is None else read.get(key)
    if entities is None:
        entities = frozenset(tx.changes.entities_since(namespace, mark.changes))
        if read is not None:
            read[key] = entities
    return Changes(
        entities=set(entities),  # (each kind its own set: a kind may change it)
        passage_seq=mark.passages,
        tombstone_seq=mark.tombstones,
    )


def _scan_kind(
    services: Services,
    tx: Tx,
    namespace: str,
    kind: Kind,
    full: bool,
    report: Reporter | None = None,
    base: int = 0,
    read: ChangesRead | None = None,
    asked: ScanMark | None = None,
) -> int:
    """Bring one kind's open items in line with its scanner; returns how many were created.

    A kind that supports it scans only what changed since its last scan
    (its scan mark); ``full`` forces a rescan of everything. ``read``: the
    change log as the compaction's kinds before it read it. ``asked``: the
    clocks when the compaction was asked for; an incremental kind whose
    mark has reached them (another compaction scanned it meanwhile) has
    nothing to scan.
    """
    # The kind's mark, its open items, and the clocks when no content write
    # of the namespace is under way (a scan runs beside them: what one
    # commits later is past its mark), read together.
    mark, open_items, heads = tx.together(
        lambda: tx.changes.mark(namespace, kind.name),
        lambda: tx.items.open_keys(namespace, kind.name),
        lambda: tx.changes.settled_heads(namespace),
    )
    incremental = not full and mark is not None and getattr(kind, "incremental", False)
    if _scanned_past(kind, mark, asked):
        return 0
    ctx = KindContext(tx, namespace, not incremental, services.limits)
    said: dict[str, Any] = {"items": None, "step": None}  # from the kind's own reports
    if report is not None:
        ctx.on_progress = _kind_progress(report, kind.name, said, base)
    if incremental:
        ctx.changes = _changes_since(tx, namespace, mark, heads, read)
    ctx.open_keys = MappingProxyType(open_items)
    ctx.heads = heads
    seen: set[str] = set()
    created = 0
    stamp = now()
    found = kind.scan(ctx)
    new: list[Candidate] = []  # candidates without an open item, decided a batch at a time
    refreshes: list[tuple[int, str, Any]] = []  # (item, fingerprint, payload), sent at the end
    for cand in found:
        if cand.key in seen:
            continue
        seen.add(cand.key)
        if report is not None and not len(seen) & 31:
            report(
                task="compact",
                phase=kind.name,
                step="items",
                done=len(seen),
                total=said["items"],
                unit="items",
                created=base + created,
            )
        existing = open_items.get(cand.key)
        if existing is None:
            new.append(cand)
            if len(new) == NEW_ITEMS_BATCH:
                created += _open_items(tx, namespace, kind.name, new, stamp)
                new.clear()
        elif existing.fingerprint != cand.fingerprint:
            refreshes.append((existing.id, cand.fingerprint, cand.payload()))
    created += _open_items(tx, namespace, kind.name, new, stamp)
    # What the scan re-examined (read once it has run: a kind may fill it as it goes).
    scope = found.scope if incremental and isinstance(found, Scan) else None
    obsolete = [
        open_item.id
        for key, open_item in open_items.items()
        if key not in seen and (scope is None or key in scope)
    ]
    _finish_kind(tx, namespace, kind.name, refreshes, obsolete, created, heads, stamp)
    return created


def _left_to_scan(tx: Tx, namespace: str, kinds: list[Kind], asked: ScanMark) -> list[Kind]:
    """The kinds another compaction has not scanned past ``asked`` (their
    marks read in one message)."""
    marks = tx.together(*[lambda k=k: tx.changes.mark(namespace, k.name) for k in kinds])
    return [k for k, mark in zip(kinds, marks, strict=True) if not _scanned_past(k, mark, asked)]


def _scanned_past(kind: Kind, mark: ScanMark | None, asked: ScanMark | None) -> bool:
    """Whether ``kind`` has nothing to scan for a compaction asked for at
    the clocks ``asked``: it scans what changed since its mark alone (a
    kind that scans everything each time may find what no clock counts),
    and its mark is at or past them on each clock."""
    return (
        asked is not None
        and mark is not None
        and getattr(kind, "incremental", False)
        and mark.changes >= asked.changes
        and mark.passages >= asked.passages
        and mark.tombstones >= asked.tombstones
    )


def _finish_kind(
    tx: Tx,
    namespace: str,
    kind: str,
    refreshes: list[tuple[int, str, Any]],
    obsolete: list[int],
    created: int,
    heads: ScanMark,
    stamp: str,
) -> None:
    """A kind's last writes: its items refreshed and made obsolete, its
    counts, its mark. None waits for an answer: on a server engine they go
    with the transaction's commit, in one message."""
    with tx.later():
        for ident, fingerprint, payload in refreshes:
            tx.items.refresh(ident, fingerprint, payload, stamp)
            tx.after_commit(log.info, "item_refreshed", namespace=namespace, kind=kind, item=ident)
        for ident in obsolete:
            tx.items.obsolete(ident, stamp)
            tx.after_commit(log.info, "item_obsolete", namespace=namespace, kind=kind, item=ident)
        _count(tx, kind, "created", created)
        _count(tx, kind, "refreshed", len(refreshes))
        _count(tx, kind, "obsolete", len(obsolete))
        tx.changes.set_mark(namespace, kind, heads)


def _kind_progress(
    report: Reporter, kind: str, said: dict[str, Any], base: int
) -> Callable[[str, int, int | None, str], None]:
    """A kind's ``ctx.on_progress``: its steps reported as the compaction's
    phase ``kind``; what it says of its items (their total) kept in ``said``."""

    def on_progress(step: str, done: int, total: int | None, unit: str) -> None:
        if step == "items":
            said["items"] = total
        new_step, said["step"] = step != said["step"], step
        report(
            new_step,  # a step's first report always goes out, then ten a second
            task="compact",
            phase=kind,
            step=step,
            done=done,
            total=total,
            unit=unit,
            created=base,
        )

    return on_progress


#: Candidates without an open item looked up and opened together: two
#: statements a batch where there were two a candidate.
NEW_ITEMS_BATCH = 256


def _open_items(tx: Tx, namespace: str, kind: str, candidates: list[Candidate], stamp: str) -> int:
    """Open an item for each candidate that has no open one, unless the last
    item of its key was skipped or done with the candidate's fingerprint
    (nothing changed since it was decided); how many were opened."""
    last = tx.items.last_for_keys(namespace, kind, [c.key for c in candidates])
    fresh = [
        c
        for c in candidates
        if not (
            (done := last.get(c.key)) is not None
            and done.status in ("skipped", "done")
            and done.fingerprint == c.fingerprint
        )
    ]
    ids = tx.items.create_many(
        namespace, kind, [(c.key, c.fingerprint, c.payload()) for c in fresh], stamp
    )
    for c in fresh:
        tx.after_commit(log.info, "item_created", namespace=namespace, kind=kind, item=ids[c.key])
    return len(fresh)


def _scan_kinds(
    services: Services,
    namespace: str,
    chosen: list[Kind],
    full: bool,
    report: Reporter | None,
    errors: list[dict[str, str]],
) -> int:
    """Scan the chosen kinds of ``namespace``; how many items they created
    (a kind that fails is said in ``errors`` and the others go on).

    A scan runs beside the namespace's content writes (remembering, facts,
    forgetting) and takes turns with its other scans. The clocks as the
    compaction is asked for say what it must scan (what was committed by
    then): one that waited for another compaction finds the kinds that one
    scanned past them done, and scans only the others.

    Where scans wait only for each other (``Capabilities.scans_beside_writes``)
    the kinds are scanned in one turn, each in a savepoint: compactions of
    a busy namespace then queue once each, and one that waited finds every
    kind scanned past its clocks. Turns of one kind each interleaved them:
    a queue of compactions, each kind of each waiting for all the others'.
    Elsewhere each kind is a transaction of its own, so that the writers
    its turn holds off go between them."""
    store = services.store
    asked = None if full else store.brief_read(lambda tx: tx.changes.heads())
    one_turn = store.capabilities.scans_beside_writes
    with store.write(namespace=namespace, role="scan") if one_turn else nullcontext() as turn:
        created = 0
        pruned = False
        read: ChangesRead = {}
        scanning = chosen
        if asked is not None and chosen:
            if turn is not None:  # (in the compaction's turn: no savepoint of its own)
                scanning = _left_to_scan(turn, namespace, chosen, asked)
            else:
                with store.write(namespace=namespace, role="scan") as tx:
                    scanning = _left_to_scan(tx, namespace, chosen, asked)
            if not scanning:
                return 0
        for n, kind in enumerate(scanning, 1):
            if report is not None:
                report(True, task="compact", phase=kind.name, step="scanning", created=created)
            try:
                with store.write(namespace=namespace, role="scan") as tx:
                    created += _scan_kind(
                        services, tx, namespace, kind, full, report, created, read, asked
                    )
                    if n == len(scanning):
                        _listed_and_pruned(tx, namespace)
                        pruned = True
            except (StoreBusy, StoreUnavailable):
                raise  # the store's trouble, not the kind's: the next kind would meet it too
            except Exception as exc:  # a broken plugin never takes the others down
                owner = services.kinds.owner(kind.name)
                log.error(
                    "kind_failed", namespace=namespace, kind=kind.name, plugin=owner, error=str(exc)
                )
                errors.append(
                    {"kind": kind.name, "plugin": owner, "error": f"{type(exc).__name__}: {exc}"}
                )
        if not pruned:  # (the last kind failed)
            with store.write(namespace=namespace, role="scan") as tx:
                _listed_and_pruned(tx, namespace)
        return created


def _listed_and_pruned(tx: Tx, namespace: str) -> None:
    """The namespace listed and the change log pruned, with the last kind's
    commit (its write's last statements). Not before: in one turn, a later
    kind's clocks wait for the namespace's writers under way, and a writer
    adding the namespace's first rows would wait for the row listing it."""
    with tx.later():
        tx.namespaces.touch(namespace)
        tx.changes.prune(namespace)


def compact(
    services: Services,
    namespace: str,
    kinds: Any = None,
    limit: int | None = None,
    *,
    full: bool = False,
    progress: Callable[[Progress], None] | None = None,
    after: int | None = None,
) -> Compacted:
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise BadInput(f"after must be an item id (a whole number), got {after!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise BadInput(f"limit must be a whole number (0 for counts only), got {limit!r}")
    if limit is not None and limit >= 2**62:
        limit = None  # more than any queue holds (and than SQLite can bind): all of them
    chosen = selected_kinds(services, kinds)
    store = services.store
    errors: list[dict[str, str]] = []
    if kinds is None or kinds == []:  # every kind: say which could not run
        errors.extend(
            {"kind": name, "plugin": name, "error": f"plugin failed to load: {reason}"}
            for name, reason in sorted(services.plugin_errors.items())
        )
    report = Reporter(progress) if progress else None
    created = _scan_kinds(services, namespace, chosen, full, report, errors)
    names = [k.name for k in chosen]
    found: list[Item] = []
    more = None
    if limit == 0 and after is None:  # the count alone: one statement, one message
        total = store.brief_read(lambda tx: tx.items.count_open(namespace, names)) if names else 0
    else:
        with store.read() as tx:
            total = tx.items.count_open(namespace, names) if names else 0
            if names and limit != 0:
                # paging: the items after the last one seen (item ids start at 1)
                found = tx.items.open_after(namespace, names, after or 0, limit)
            # how many open items follow the ones returned
            if after is not None:
                more = tx.items.count_open(namespace, names, found[-1].id if found else after)
    items = [ItemSummary(i.id, i.kind, i.status, i.fingerprint, i.payload) for i in found]
    return Compacted(
        namespace=namespace, created=created, open=total, items=items, errors=errors, more=more
    )


# --- submit -----------------------------------------------------------------


def parse_item_id(item: Any) -> int:
    if isinstance(item, bool):
        raise BadInput("item must be an item id like 42 or memo://item/42")
    if isinstance(item, int):
        if not 1 <= item < 2**63:
            raise BadInput(f"item ids are positive integers, got {item}")
        return item
    if isinstance(item, str):
        _, ident = parse_address(item, expect=("item",))
        return int(ident)
    raise BadInput("item must be an item id like 42 or memo://item/42")


def merge_resolution(resolution: Any, fields: dict[str, Any]) -> dict[str, Any]:
    if resolution is None:
        merged: dict[str, Any] = {}
    elif isinstance(resolution, dict):
        merged = dict(resolution)
    else:
        raise BadInput("resolution must be a JSON object")
    for key, value in fields.items():
        if value is None or (key in FLAG_FIELDS and value is False):
            continue
        if key in merged and merged[key] != value:
            raise BadInput(f"{key!r} is given twice with different values")
        merged[key] = value
    # Text that cannot be stored (a lone surrogate, a NUL) is refused by the
    # name of its field before any kind sees it.
    bad = valid_text.first_problem(merged, "resolution")
    if bad:
        raise BadInput(bad.removeprefix("resolution."))
    return merged


def rescan(services: Services, tx: Tx, namespace: str, kind: Kind, item: Item) -> int | None:
    """Scan ``kind`` now (after a correction undid what ``item`` did); the open item
    for ``item``'s key, else the newest open item the scan created, else None."""
    before = {o.id for o in tx.items.open_keys(namespace, kind.name).values()}
    _scan_kind(services, tx, namespace, kind, full=False)
    now_open = tx.items.open_keys(namespace, kind.name)
    if item.key in now_open:
        return now_open[item.key].id
    created = sorted({o.id for o in now_open.values()} - before)
    return created[-1] if created else None


def submit(
    services: Services,
    namespace: str,
    item_ref: Any,
    resolution: Any,
    fields: dict[str, Any],
    *,
    dry_run: bool = False,
    force: bool = False,
    fingerprint: str | None = None,
) -> SubmitReport:
    item_id = parse_item_id(item_ref)
    merged = merge_resolution(resolution, fields)
    for flag, value in (("dry_run", dry_run), ("force", force)):
        if not isinstance(value, bool):
            raise BadInput(f"{flag} must be true or false")
    merged.pop("dry_run", None)
    merged.pop("force", None)
    echoed = merged.pop("fingerprint", None)  # also accepted inside the resolution
    if fingerprint is not None and echoed is not None and echoed != fingerprint:
        raise BadInput("'fingerprint' is given twice with different values")
    fingerprint = fingerprint if fingerprint is not None else echoed
    if fingerprint is not None and (not isinstance(fingerprint, str) or not fingerprint.strip()):
        raise BadInput(
            "fingerprint must be the item's fingerprint as compact or items show gave it"
        )
    store = services.store
    try:
        with store.write(namespace=namespace) as tx:
            return _submit(services, tx, namespace, item_id, merged, dry_run, force, fingerprint)
    except Refused as exc:
        kind = getattr(exc, "kind", None)
        if kind and not dry_run:
            with store.write(namespace=namespace) as tx:
                _count(tx, kind, "refused")
            log.info(
                "item_refused", namespace=namespace, kind=kind, item=item_id, reason=exc.message
            )
        raise


def _call_kind(services: Services, kind: Kind, method: Callable[..., Any], *args: Any) -> Any:
    """Call one of a kind's methods; an error that is not a :class:`MemorsError`
    (a bug in the plugin) becomes a :class:`PluginError` naming the kind and
    its plugin. The caller's transaction rolls back: nothing is stored."""
    try:
        return method(*args)
    except MemorsError:
        raise
    except Exception as exc:
        if services.store.database_failed(exc):
            raise  # the store's transaction says what failed (a lost connection)
        raise PluginError(
            f"kind {kind.name!r} (plugin {services.kinds.owner(kind.name)!r}) failed in "
            f"{method.__name__}: {type(exc).__name__}: {exc}; nothing was stored"
        ) from exc


def _wrong_fingerprint(item: Item, given: str) -> NoReturn:
    """Refuse a submission whose fingerprint is not the item's: refreshed
    since, unless the item never was or the text is no fingerprint at all (a typo)."""
    shaped = len(given) == len(item.fingerprint) and all(
        c in "0123456789abcdef" for c in given.lower()
    )
    if item.updated_at == item.created_at or not shaped:
        why = (
            f"item {item.id} has not changed since it was handed out"
            if shaped
            else f"an item's fingerprint looks like {item.fingerprint}"
        )
        raise BadInput(
            f"fingerprint {given[:80]!r} is not item {item.id}'s ({why}): mistyped? "
            f"nothing was stored — copy it from compact or items show {item.id}"
        )
    raise _refuse(
        item.kind,
        f"item {item.id} was refreshed since that payload was handed out (fingerprint "
        f"{given}, now {item.fingerprint}); nothing was stored — run compact "
        f"or items show {item.id} again for the current payload",
    )


def _refuse(kind: str, message: str) -> Refused:
    exc = Refused(message)
    exc.kind = kind  # type: ignore[attr-defined]
    return exc


def _open_item(
    services: Services, tx: Tx, namespace: str, item_id: int, fingerprint: str | None
) -> tuple[Item, Kind]:
    """The item to submit and its kind: refused unless it exists, its kind is
    installed, it is open, and (given one) its fingerprint is the one sent."""
    item = tx.items.get(item_id, namespace)
    if item is None:
        raise NotFound(f"no work item {item_id} in namespace {namespace!r}")
    kind = services.kinds.get(item.kind)
    if kind is None and item.kind in services.plugin_errors:
        raise PluginError(
            f"item {item_id} is of kind {item.kind!r}, whose plugin {item.kind!r} failed to "
            f"load: {services.plugin_errors[item.kind]}; nothing was stored"
        )
    if kind is None:
        raise BadInput(
            f"item {item_id} is of kind {item.kind!r}, which is not installed or is disabled"
        )
    if item.status != "open":
        raise _refuse(
            item.kind,
            f"item {item_id} is {item.status}, not open; nothing was stored "
            "(run compact to see the open items)",
        )
    if fingerprint is not None and fingerprint.strip() != item.fingerprint:
        _wrong_fingerprint(item, fingerprint.strip())
    return item, kind


def _resolution(kind: Kind, item: Item, merged: dict[str, Any]) -> tuple[bool, Any]:
    """Whether the submission is a skip (``skip`` is taken out of ``merged``),
    and the resolution read from ``merged``: a :class:`SkipResolution`, or
    the kind's own resolution class; one that does not fit is bad input."""
    skip = merged.pop("skip", False)
    if skip is not False and skip is not True:
        raise BadInput("skip must be true or false")
    if skip:
        extra = sorted(set(merged) - {"reason"})
        if extra:
            raise BadInput(f"skip takes only a reason, not {', '.join(extra)}")
        res: Any = structure(merged, SkipResolution, "a skip")
        if not res.reason.strip():
            raise BadInput("skip needs a reason (--reason R)")
        return True, res
    if "reason" in merged and set(merged) == {"reason"}:
        raise BadInput("a reason alone does nothing: add skip (--skip) or a resolution")
    try:
        return False, structure(merged, kind.resolution, "resolution")
    except BadInput as exc:
        a = "an" if kind.name[:1].lower() in "aeiou" else "a"
        hint = f"; {a} {kind.name} item takes {kind.hint}" if kind.hint else ""
        raise BadInput(
            f"item {item.id} is {a} {kind.name} item and this resolution does not fit "
            f"({exc.message}){hint}, or skip with a reason"
        ) from None


def _check_still_current(services: Services, kind: Kind, ctx: KindContext, item: Item) -> None:
    """Refuse an item that no longer applies, or whose inputs changed since
    its payload was handed out (the kind computes it afresh)."""
    current = _call_kind(services, kind, kind.current, ctx, item)
    if current is None:
        raise _refuse(
            item.kind,
            f"item {item.id} no longer applies (what it was about has changed); nothing was "
            "stored — run compact again",
        )
    if current.fingerprint != item.fingerprint:
        raise _refuse(
            item.kind,
            f"the inputs of item {item.id} changed since its payload was handed out; nothing "
            "was stored — run compact again for a fresh payload",
        )


def _skip(tx: Tx, namespace: str, item: Item, res: SkipResolution, dry_run: bool) -> SubmitReport:
    if not dry_run:
        _finish(tx, item, "skipped", {"skip": True, "reason": res.reason})
        tx.after_commit(log.info, "item_skipped", namespace=namespace, kind=item.kind, item=item.id)
    return SubmitReport(
        item=item.id,
        kind=item.kind,
        status="open" if dry_run else "skipped",
        stored=not dry_run,
        address=None,
        diff="",
        checks={},
        message="dry run: nothing stored" if dry_run else "skipped",
    )


def _not_stored(
    tx: Tx,
    namespace: str,
    item: Item,
    ctx: KindContext,
    checks: dict[str, CheckResult],
    flagged: list[str],
    diff: str,
    refused: bool,
    dry_run: bool,
) -> SubmitReport:
    """A dry run's report, or a refusal's (a check flagged it, no force): counted
    unless it was a dry run."""
    if refused and not dry_run:
        _count(tx, item.kind, "refused")
        tx.after_commit(
            log.info,
            "item_refused",
            namespace=namespace,
            kind=item.kind,
            item=item.id,
            checks=flagged,
        )
    return SubmitReport(
        item=item.id,
        kind=item.kind,
        status="open",
        stored=False,
        address=None,
        diff=diff,
        checks=checks,
        message=(
            f"refused by {', '.join(flagged)}: nothing stored (fix it, or force)"
            if refused
            else "dry run: every check ran, nothing stored"
        ),
        outcome=dict(ctx.report),
    )


def _submit(
    services: Services,
    tx: Tx,
    namespace: str,
    item_id: int,
    merged: dict[str, Any],
    dry_run: bool,
    force: bool,
    fingerprint: str | None = None,
) -> SubmitReport:
    """One submission, inside its write: the item must be open, its kind
    installed and its inputs unchanged, and the resolution must fit the
    kind; then a skip, a refusal or dry run (nothing stored), or the store."""
    item, kind = _open_item(services, tx, namespace, item_id, fingerprint)
    skip, res = _resolution(kind, item, merged)
    ctx = KindContext(tx, namespace, True, services.limits)
    _check_still_current(services, kind, ctx, item)
    if skip:
        return _skip(tx, namespace, item, res, dry_run)
    _call_kind(services, kind, kind.validate, ctx, item, res)
    checks, flagged = run_checks(services, tx, namespace, kind, item, res)
    diff = _call_kind(services, kind, kind.diff, item, res) or ""
    refused = bool(flagged) and not force
    if refused or dry_run:
        return _not_stored(tx, namespace, item, ctx, checks, flagged, diff, refused, dry_run)
    ctx.flags = {name: checks[name].flagged for name in flagged}
    with services.store.write():  # a savepoint: a failing apply leaves the item open
        addr = _call_kind(services, kind, kind.apply, ctx, item, res)
    stored = stored_resolution(merged, force, ctx.report)
    _finish(tx, item, "done", stored)
    tx.after_commit(
        log.info,
        "item_done",
        namespace=namespace,
        kind=item.kind,
        item=item_id,
        address=addr,
        forced=bool(flagged),
    )
    return SubmitReport(
        item=item_id,
        kind=item.kind,
        status="done",
        stored=True,
        address=addr,
        diff=diff,
        checks=checks,
        message="stored with flags (forced)" if flagged else "stored",
        outcome=dict(ctx.report),
    )


def stored_resolution(
    merged: dict[str, Any], force: bool, outcome: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a done item keeps as its resolution: what was submitted, and
    what the kind reported doing (``outcome``: a duplicate item's ``kept``,
    ``forgotten`` and ``left``), so ``get`` of the item shows it later."""
    out = dict(merged)
    if force:
        out["force"] = True
    if outcome:
        out["outcome"] = dict(outcome)
    return out


def _finish(tx: Tx, item: Item, status: str, resolution: dict[str, Any]) -> None:
    # An item is completed exactly once: a second finish finds it closed.
    if not tx.items.finish(item.id, status, resolution, now()):  # pragma: no cover
        raise _refuse(item.kind, f"item {item.id} was completed by someone else")
    _count(tx, item.kind, status)


def run_checks(
    services: Services, tx: Tx, namespace: str, kind: Kind, item: Item, res: Any
) -> tuple[dict[str, CheckResult], list[str]]:
    ctx = CheckContext(tx, namespace, kind)
    checks = services.pm.check_submission(ctx, item, res, item.payload)
    flagged = [name for name, result in checks.items() if not result.passed]
    return checks, flagged
