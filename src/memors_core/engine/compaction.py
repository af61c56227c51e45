"""The compaction engine: the work-item queue and submissions.

Kinds (plugins) say which items should exist (``scan``) and how a
resolution is stored (``apply``); the engine keeps the queue idempotent,
refreshes and obsoletes items, refuses outdated submissions, runs the check
hooks and counts every event in the store's persisted counters.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memors_core.domain.dates import now
from memors_core.domain.ids import parse_address
from memors_core.domain.model import (
    CheckResult,
    Compacted,
    ItemSummary,
    PageResolution,
    SkipResolution,
    SubmitReport,
)
from memors_core.engine.progress import Progress, Reporter
from memors_core.errors import BadInput, MemorsError, NotFound, PluginError, Refused, StoreBusy
from memors_core.plugins.kinds import Changes, CheckContext, Item, Kind, KindContext
from memors_core.plugins.manager import call_each
from memors_core.storage.sqlite.connection import Store
from memors_core.storage.sqlite.ops import WORK_ITEMS_TOTAL
from memors_core.wire import structure

if TYPE_CHECKING:
    from memors_core.memory import Memory

from memors_core.log import get_logger

log = get_logger("memors.compaction")

ITEM_STATUSES = ("open", "done", "skipped", "obsolete")
EVENTS = ("created", "refreshed", "done", "skipped", "obsolete", "refused")
FLAG_FIELDS = ("accept", "reject", "skip")

_ITEM_COLS = (
    "id, namespace, kind, key, status, fingerprint, payload, resolution, created_at, updated_at"
)


def _item(row: tuple) -> Item:
    return Item(
        id=row[0],
        namespace=row[1],
        kind=row[2],
        key=row[3],
        status=row[4],
        fingerprint=row[5],
        payload=json.loads(row[6]),
        resolution=json.loads(row[7]) if row[7] else None,
        created_at=row[8],
        updated_at=row[9],
    )


def load_item(store: Store, item_id: int, namespace: str) -> Item | None:
    row = store.one(
        f"SELECT {_ITEM_COLS} FROM work_items WHERE id = ? AND namespace = ?", (item_id, namespace)
    )
    return None if row is None else _item(row)


def list_items(
    store: Store, namespace: str, kind: str | None = None, status: str | None = None
) -> list[Item]:
    sql = f"SELECT {_ITEM_COLS} FROM work_items WHERE namespace = ?"
    params: list[Any] = [namespace]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    return [_item(r) for r in store.all(sql + " ORDER BY id", tuple(params))]


def _count(store: Store, kind: str, event: str, by: int = 1) -> None:
    if by:
        store.bump(WORK_ITEMS_TOTAL, kind, event, by)


def selected_kinds(memory: Memory, kinds: Any) -> list[Kind]:
    names = memory.kinds.names()
    if kinds is None or kinds == []:
        return [memory.kinds.get(n) for n in names]
    if isinstance(kinds, str):
        kinds = [k for k in kinds.replace(",", " ").split() if k]
    if not isinstance(kinds, list | tuple) or not all(isinstance(k, str) for k in kinds):
        raise BadInput("kinds must be a list of kind names")
    unknown = [k for k in kinds if k not in memory.kinds]
    broken = [k for k in unknown if k in memory.plugin_errors]
    if broken:  # a kind is named like its plugin
        raise PluginError(
            "; ".join(
                f"kind {k!r} cannot run: its plugin {k!r} failed to load: {memory.plugin_errors[k]}"
                for k in broken
            )
        )
    if unknown:
        raise BadInput(
            f"unknown kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
            f"registered kinds are {', '.join(names) or '(none)'}"
        )
    return [memory.kinds.get(n) for n in dict.fromkeys(kinds)]


def _changes_since(store: Store, namespace: str, mark: tuple[int, int, int]) -> Changes:
    touched = {
        r[0]
        for r in store.all(
            "SELECT DISTINCT entity FROM changes WHERE namespace = ? AND seq > ?",
            (namespace, mark[0]),
        )
    }
    entities = set(touched)
    for (canonical,) in store.all(
        "SELECT DISTINCT canonical FROM entities WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(touched)),),
    ):
        entities.add(canonical)
    return Changes(entities=entities, passage_seq=mark[1], tombstone_seq=mark[2])


def _scan_kind(
    memory: Memory,
    namespace: str,
    kind: Kind,
    full: bool,
    report: Reporter | None = None,
    base: int = 0,
) -> int:
    """Bring one kind's open items in line with its scanner; returns how many were created.

    A kind that supports it scans only what changed since its last scan
    (its marks in ``compact_marks``); ``full`` forces a rescan of everything.
    """
    store = memory.store
    heads = store.one(
        "SELECT (SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'changes'), "
        "(SELECT COALESCE(MAX(rowid), 0) FROM passages), "
        "(SELECT COALESCE(MAX(rowid), 0) FROM tombstones)"
    )
    mark = store.one(
        "SELECT change_seq, passage_seq, tombstone_seq FROM compact_marks "
        "WHERE namespace = ? AND kind = ?",
        (namespace, kind.name),
    )
    incremental = not full and mark is not None and getattr(kind, "incremental", False)
    ctx = KindContext(store, namespace, memory.ops, not incremental)
    said: dict[str, Any] = {"items": None, "step": None}  # from the kind's own reports
    if report is not None:

        def on_progress(step: str, done: int, total: int | None, unit: str) -> None:
            if step == "items":
                said["items"] = total
            new_step, said["step"] = step != said["step"], step
            report(
                new_step,  # a step's first report always goes out, then ten a second
                task="compact",
                phase=kind.name,
                step=step,
                done=done,
                total=total,
                unit=unit,
                created=base,
            )

        ctx.on_progress = on_progress
    if incremental:
        ctx.changes = _changes_since(store, namespace, mark)
    open_items = {
        key: (ident, fp)
        for ident, key, fp in store.all(
            "SELECT id, key, fingerprint FROM work_items WHERE namespace = ? AND kind = ? "
            "AND status = 'open'",
            (namespace, kind.name),
        )
    }
    seen: set[str] = set()
    created = refreshed = 0
    stamp = now()
    for cand in kind.scan(ctx):
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
        if existing is not None:
            if existing[1] != cand.fingerprint:
                store.conn.execute(
                    "UPDATE work_items SET fingerprint = ?, payload = ?, updated_at = ? WHERE id = ?",
                    (cand.fingerprint, _dumps(cand.payload()), stamp, existing[0]),
                )
                refreshed += 1
                store.after_commit(
                    log.info,
                    "item_refreshed",
                    namespace=namespace,
                    kind=kind.name,
                    item=existing[0],
                )
            continue
        last = store.one(
            "SELECT status, fingerprint FROM work_items WHERE namespace = ? AND kind = ? "
            "AND key = ? ORDER BY id DESC LIMIT 1",
            (namespace, kind.name, cand.key),
        )
        if last is not None and last[0] in ("skipped", "done") and last[1] == cand.fingerprint:
            continue  # skipped (or done) and nothing changed since: not recreated
        cur = store.conn.execute(
            "INSERT INTO work_items(namespace, kind, key, status, fingerprint, payload, "
            "created_at, updated_at) VALUES (?, ?, ?, 'open', ?, ?, ?, ?) RETURNING id",
            (
                namespace,
                kind.name,
                cand.key,
                cand.fingerprint,
                _dumps(cand.payload()),
                stamp,
                stamp,
            ),
        )
        ident = cur.fetchall()[0][0]  # step RETURNING to the end before COMMIT
        created += 1
        store.after_commit(
            log.info, "item_created", namespace=namespace, kind=kind.name, item=ident
        )
    scope = ctx.scope if incremental else None
    obsolete = [
        (ident, key)
        for key, (ident, _fp) in open_items.items()
        if key not in seen and (scope is None or key in scope)
    ]
    for ident, _key in obsolete:
        store.conn.execute(
            "UPDATE work_items SET status = 'obsolete', updated_at = ? WHERE id = ?", (stamp, ident)
        )
        store.after_commit(
            log.info, "item_obsolete", namespace=namespace, kind=kind.name, item=ident
        )
    _count(store, kind.name, "created", created)
    _count(store, kind.name, "refreshed", refreshed)
    _count(store, kind.name, "obsolete", len(obsolete))
    store.conn.execute(
        "INSERT INTO compact_marks(namespace, kind, change_seq, passage_seq, tombstone_seq) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(namespace, kind) DO UPDATE SET "
        "change_seq = excluded.change_seq, passage_seq = excluded.passage_seq, "
        "tombstone_seq = excluded.tombstone_seq",
        (namespace, kind.name, *heads),
    )
    return created


def _prune_changes(store: Store, namespace: str) -> None:
    """Drop the part of the change log every kind has read."""
    low = store.scalar(
        "SELECT MIN(change_seq) FROM compact_marks WHERE namespace = ?", (namespace,)
    )
    if low is not None:
        store.conn.execute("DELETE FROM changes WHERE namespace = ? AND seq <= ?", (namespace, low))


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def compact(
    memory: Memory,
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
    chosen = selected_kinds(memory, kinds)
    store = memory.store
    created = 0
    errors: list[dict[str, str]] = []
    if kinds is None or kinds == []:  # every kind: say which could not run
        errors.extend(
            {"kind": name, "plugin": name, "error": f"plugin failed to load: {reason}"}
            for name, reason in sorted(memory.plugin_errors.items())
        )
    report = Reporter(progress) if progress else None
    for kind in chosen:
        if report is not None:
            report(True, task="compact", phase=kind.name, step="scanning", created=created)
        try:
            with store.write():
                store.touch_namespace(namespace)
                created += _scan_kind(memory, namespace, kind, full, report, created)
        except StoreBusy:
            raise
        except Exception as exc:  # a broken plugin never takes the others down
            owner = memory.kinds.owner(kind.name)
            log.error(
                "kind_failed", namespace=namespace, kind=kind.name, plugin=owner, error=str(exc)
            )
            errors.append(
                {"kind": kind.name, "plugin": owner, "error": f"{type(exc).__name__}: {exc}"}
            )
    with store.write():
        _prune_changes(store, namespace)
    names = [k.name for k in chosen]
    marks = ",".join("?" * len(names))
    open_after = f"namespace = ? AND status = 'open' AND kind IN ({marks}) AND id > ?"

    def count_open(above: int) -> int:
        if not names:
            return 0
        return store.scalar(
            f"SELECT COUNT(*) FROM work_items WHERE {open_after}", (namespace, *names, above)
        )

    with store.read():
        total = count_open(0)
        rows = []
        if names and limit != 0:
            # paging: the items after the last one seen (item ids start at 1)
            sql = f"SELECT {_ITEM_COLS} FROM work_items WHERE {open_after} ORDER BY id"
            params: tuple = (namespace, *names, after or 0)
            if limit is not None:
                sql += " LIMIT ?"
                params += (limit,)
            rows = store.all(sql, params)
        # how many open items follow the ones returned
        more = None if after is None else count_open(rows[-1][0] if rows else after)
    items = [
        ItemSummary(i.id, i.kind, i.status, i.fingerprint, i.payload) for i in map(_item, rows)
    ]
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
    return merged


def page_diff(previous: str, new: str) -> str:
    """A unified line diff ("" when there is no previous page and nothing new)."""
    if previous == new:
        return ""
    lines = difflib.unified_diff(
        previous.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="previous",
        tofile="submitted",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def submit(
    memory: Memory,
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
    store = memory.store
    try:
        with store.write():
            return _submit(memory, namespace, item_id, merged, dry_run, force, fingerprint)
    except Refused as exc:
        kind = getattr(exc, "kind", None)
        if kind and not dry_run:
            with store.write():
                _count(store, kind, "refused")
            log.info(
                "item_refused", namespace=namespace, kind=kind, item=item_id, reason=exc.message
            )
        raise


def _call_kind(memory: Memory, kind: Kind, method: Callable[..., Any], *args: Any) -> Any:
    """Call one of a kind's methods; an error that is not a :class:`MemorsError`
    (a bug in the plugin) becomes a :class:`PluginError` naming the kind and
    its plugin. The caller's transaction rolls back: nothing is stored."""
    try:
        return method(*args)
    except MemorsError:
        raise
    except Exception as exc:
        raise PluginError(
            f"kind {kind.name!r} (plugin {memory.kinds.owner(kind.name)!r}) failed in "
            f"{method.__name__}: {type(exc).__name__}: {exc}; nothing was stored"
        ) from exc


def _refuse(kind: str, message: str) -> Refused:
    exc = Refused(message)
    exc.kind = kind  # type: ignore[attr-defined]
    return exc


def _submit(
    memory: Memory,
    namespace: str,
    item_id: int,
    merged: dict[str, Any],
    dry_run: bool,
    force: bool,
    fingerprint: str | None = None,
) -> SubmitReport:
    store = memory.store
    item = load_item(store, item_id, namespace)
    if item is None:
        raise NotFound(f"no work item {item_id} in namespace {namespace!r}")
    kind = memory.kinds.get(item.kind)
    if kind is None and item.kind in memory.plugin_errors:
        raise PluginError(
            f"item {item_id} is of kind {item.kind!r}, whose plugin {item.kind!r} failed to "
            f"load: {memory.plugin_errors[item.kind]}; nothing was stored"
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
        raise _refuse(
            item.kind,
            f"item {item_id} was refreshed since that payload was handed out (fingerprint "
            f"{fingerprint.strip()}, now {item.fingerprint}); nothing was stored — run compact "
            f"or items show {item_id} again for the current payload",
        )
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
    else:
        if "reason" in merged and set(merged) == {"reason"}:
            raise BadInput("a reason alone does nothing: add skip (--skip) or a resolution")
        try:
            res = structure(merged, kind.resolution, "resolution")
        except BadInput as exc:
            a = "an" if kind.name[:1].lower() in "aeiou" else "a"
            hint = f"; {a} {kind.name} item takes {kind.hint}" if kind.hint else ""
            raise BadInput(
                f"item {item_id} is {a} {kind.name} item and this resolution does not fit "
                f"({exc.message}){hint}, or skip with a reason"
            ) from None

    ctx = KindContext(store, namespace, memory.ops, True)
    current = _call_kind(memory, kind, kind.current, ctx, item)
    if current is None:
        raise _refuse(
            item.kind,
            f"item {item_id} no longer applies (what it was about has changed); nothing was "
            "stored — run compact again",
        )
    if current.fingerprint != item.fingerprint:
        raise _refuse(
            item.kind,
            f"the inputs of item {item_id} changed since its payload was handed out; nothing "
            "was stored — run compact again for a fresh payload",
        )

    if skip:
        if not dry_run:
            _finish(store, item, "skipped", {"skip": True, "reason": res.reason})
            store.after_commit(
                log.info, "item_skipped", namespace=namespace, kind=item.kind, item=item_id
            )
        return SubmitReport(
            item=item_id,
            kind=item.kind,
            status="open" if dry_run else "skipped",
            stored=not dry_run,
            address=None,
            diff="",
            checks={},
            message="dry run: nothing stored" if dry_run else "skipped",
        )

    _call_kind(memory, kind, kind.validate, ctx, item, res)
    checks, flagged = run_checks(memory, namespace, kind, item, res)
    diff = ""
    if isinstance(res, PageResolution):
        previous = (item.payload.get("page") or {}).get("content", "")
        diff = page_diff(previous, res.content)
    refused = bool(flagged) and not force
    if refused or dry_run:
        if refused and not dry_run:
            _count(store, item.kind, "refused")
            store.after_commit(
                log.info,
                "item_refused",
                namespace=namespace,
                kind=item.kind,
                item=item_id,
                checks=flagged,
            )
        return SubmitReport(
            item=item_id,
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
    ctx.flags = {name: checks[name].flagged for name in flagged}
    with store.write():  # a savepoint: a failing apply leaves the item open
        addr = _call_kind(memory, kind, kind.apply, ctx, item, res)
    stored = stored_resolution(merged, force)
    _finish(store, item, "done", stored)
    store.after_commit(
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


def stored_resolution(merged: dict[str, Any], force: bool) -> dict[str, Any]:
    out = dict(merged)
    if force:
        out["force"] = True
    return out


def _finish(store: Store, item: Item, status: str, resolution: dict[str, Any]) -> None:
    cur = store.conn.execute(
        "UPDATE work_items SET status = ?, resolution = ?, updated_at = ? "
        "WHERE id = ? AND status = 'open'",
        (status, _dumps(resolution), now(), item.id),
    )
    del cur
    if store.conn.changes() != 1:  # pragma: no cover - guarded by BEGIN IMMEDIATE
        raise _refuse(item.kind, f"item {item.id} was completed by someone else")
    _count(store, item.kind, status)


def run_checks(
    memory: Memory, namespace: str, kind: Kind, item: Item, res: Any
) -> tuple[dict[str, CheckResult], list[str]]:
    ctx = CheckContext(memory.store, namespace, memory.ops, kind)
    results, errors = call_each(
        memory.pm.hook.memors_check_submission,
        context=ctx,
        item=item,
        resolution=res,
        payload=item.payload,
    )
    checks: dict[str, CheckResult] = {}
    for plugin, value in results:
        if not isinstance(value, dict):
            errors.append((plugin, f"returned {type(value).__name__}, not a mapping of checks"))
            continue
        for name, result in value.items():
            checks[name] = result
    for plugin, error in errors:
        # A check that cannot run cannot vouch for the page: it flags.
        checks[plugin] = CheckResult(passed=False, flagged=[{"error": error}])
    flagged = [name for name, result in checks.items() if not result.passed]
    return checks, flagged
