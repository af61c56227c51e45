"""Lint: a read-only report of problems, with addresses.

The built-in rules use the same definitions as the kinds that act on them
(:mod:`memors_core.storage.sqlite.ops`), so lint and compaction never disagree: one
function each decides which facts disagree (``contradiction`` and the
``conflict`` kind), which entities need a page (``missing-page`` and the
``page`` kind) and which pages are stale (``stale-page``, the ``stale``
kind and the ``memors_kb_pages_stale`` gauge).

Lint opens the file with SQLite's read-only flag and never writes. A
read-only connection to a WAL database would still create the ``-wal`` and
``-shm`` files when they are missing (and cannot remove them again), so
when no other connection is open, lint locks writers out for its short run
and reads the file as immutable instead; the directory is left exactly as
it was found.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import apsw

from memors_core.domain.ids import address
from memors_core.domain.model import Finding, LintReport
from memors_core.engine.purge import pending_purges
from memors_core.errors import BadInput, MemorsError
from memors_core.log import get_logger
from memors_core.plugins.hookspecs import hookimpl
from memors_core.plugins.kinds import LintContext
from memors_core.plugins.manager import call_each
from memors_core.storage.sqlite.connection import Store
from memors_core.storage.sqlite.ops import Operations
from memors_core.storage.sqlite.schema import SCHEMA_VERSION

log = get_logger("memors.lint")

#: The rules core ships, in the order they run.
BUILTIN_RULES = (
    "contradiction",
    "orphan-entity",
    "missing-page",
    "stale-page",
    "expired-fact",
    "unfinished-purge",
)

# SQLite's lock bytes on Unix (os_unix.c): every connection holds a read lock
# on the SHARED range while it is open in WAL mode.
_PENDING_BYTE = 0x40000000
_SHARED_FIRST = _PENDING_BYTE + 2
_SHARED_SIZE = 510
# POSIX locks belong to the process, not the thread: one quiet lint at a time.
_quiet_lock = threading.Lock()


def _fact_line(ops: Operations, fact_id: str) -> str:
    refs = ops.fact_refs([fact_id])
    if not refs:
        return fact_id
    f = refs[0]
    return f"{f.subject} {f.predicate} {f.value!r}"


@hookimpl
def memors_lint_rules(context: LintContext) -> list[Finding]:
    ops, ns = context.ops, context.namespace
    findings: list[Finding] = []
    for a, b in ops.conflicting_facts(ns):
        findings.append(
            Finding(
                "contradiction",
                address("fact", a),
                f"{_fact_line(ops, a)} contradicts {_fact_line(ops, b)} over an overlapping time",
                [address("fact", b)],
            )
        )
    for entity in ops.orphan_entities(ns):
        name = ops.entity_row(entity)[2]
        findings.append(
            Finding(
                "orphan-entity",
                address("entity", entity),
                f"entity {name!r} has no live passages and no live facts",
            )
        )
    for entity, count in ops.entities_needing_page(ns):
        name = ops.entity_row(entity)[2]
        findings.append(
            Finding(
                "missing-page",
                address("entity", entity),
                f"entity {name!r} has {count} live passages and no page",
            )
        )
    for page, changes in ops.stale_pages(ns):
        findings.append(
            Finding(
                "stale-page",
                address("page", page[0]),
                f"page {page[1]!r} is stale: {_changes_line(changes)}",
                [c["address"] for c in changes],
            )
        )
    for fact, valid_to in ops.expired_facts(ns):
        findings.append(
            Finding(
                "expired-fact",
                address("fact", fact),
                f"{_fact_line(ops, fact)} expired at {valid_to}",
            )
        )
    for audit, target, steps in pending_purges(context.store, ns):
        findings.append(
            Finding(
                "unfinished-purge",
                target,
                f"the purge of {target} (audit record {audit}) did not finish: the file may "
                f"still hold its text ({', '.join(steps)} left); run `memors-mcp purge "
                f"{target} --yes` again to finish it",
            )
        )
    return findings


def _changes_line(changes: list[dict[str, str]]) -> str:
    if not changes:
        return "marked stale (its entity was merged)"
    counts: dict[str, int] = {}
    for c in changes:
        counts[c["change"]] = counts.get(c["change"], 0) + 1
    words = {"forgotten": "forgotten", "superseded": "superseded", "new": "new"}
    parts = [f"{n} {words.get(change, change)} passage(s)" for change, n in counts.items()]
    return ", ".join(parts) + " since it was written"


# --- opening the file without changing anything --------------------------------


def _sidecars_absent(path: Path) -> bool:
    return not any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm", "-journal"))


@contextlib.contextmanager
def _writers_locked_out(path: Path) -> Iterator[bool]:
    """Hold SQLite's exclusive lock on ``path`` if nobody else has it open.

    Yields True when the lock is held: then no connection is open (an open
    WAL connection always holds a shared lock) and none can start (it waits
    on its busy timeout), so the file can be read as immutable.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not a POSIX system
        yield False
        return
    with _quiet_lock:
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, _SHARED_SIZE, _SHARED_FIRST)
            except OSError:
                yield False
                return
            # A connection may have come and gone between the first look and the lock.
            yield _sidecars_absent(path)
        finally:
            os.close(fd)  # also releases the lock


def _connect(path: Path, immutable: bool) -> Store:
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    if immutable:
        target = "file:" + quote(str(path.resolve())) + "?immutable=1"
    else:
        target = "file:" + quote(str(path.resolve())) + "?mode=ro"
    try:
        conn = apsw.Connection(target, flags=flags)
        store = Store(conn, path, readonly=True)
        store._configure()
    except apsw.NotADBError:
        raise BadInput(f"{path} is not a memors database (not SQLite)") from None
    except apsw.CantOpenError:
        raise BadInput(f"cannot open the database {path} for reading") from None
    except apsw.BusyError:
        raise MemorsError(f"the database {path} stayed locked by another process") from None
    except apsw.Error as exc:  # e.g. a device, or a file SQLite cannot read
        raise BadInput(f"cannot read {path} as a database: {exc}") from None
    return store


@contextlib.contextmanager
def open_readonly(path: str | os.PathLike[str]) -> Iterator[Store | None]:
    """A read-only :class:`Store` on ``path``, or None when there is no store yet.

    Opened with ``SQLITE_OPEN_READONLY``: nothing can be written. When no
    other connection is open, the file is read as immutable while writers
    are locked out, so not even the ``-wal``/``-shm`` files appear.
    """
    p = Path(os.path.expanduser(path))  # (Path.expanduser raises on ~nouser)
    if not p.exists():
        yield None
        return
    if p.is_dir():
        raise BadInput(f"{p} is a directory, not a database file")
    with contextlib.ExitStack() as stack:
        quiet = _sidecars_absent(p) and stack.enter_context(_writers_locked_out(p))
        store = _connect(p, immutable=quiet)
        try:
            yield _checked(store)
        finally:
            # Closing SQLite's descriptor may drop our POSIX lock too: close it last.
            store.close()


def _checked(store: Store) -> Store | None:
    version = store.conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return store
    tables = store.scalar("SELECT COUNT(*) FROM sqlite_schema")
    if version == 0 and not tables:
        return None  # an empty file: a store that does not exist yet
    if version == 0:
        raise BadInput(f"{store.path} is an SQLite database, but not a memors store")
    raise BadInput(
        f"{store.path} uses an older memors schema ({version}, this one is {SCHEMA_VERSION}); "
        "any command that writes upgrades it, then run lint again"
    )


# --- running the rules ------------------------------------------------------------


def run_lint(path: str | os.PathLike[str], namespace: str, pm: Any) -> LintReport:
    """Open ``path`` read-only and run every lint rule on ``namespace``.

    A store that does not exist yet has no findings (and is not created).
    A plugin whose rules raise, or return something that is not a list of
    :class:`Finding`, is reported as a ``plugin-error`` finding naming the
    plugin; the other rules still run.
    """
    with open_readonly(path) as store:
        if store is None:
            return LintReport(namespace=namespace, findings=[])
        ctx = LintContext(store, namespace, Operations(store))
        with store.read():
            results, errors = call_each(pm.hook.memors_lint_rules, context=ctx)
    findings: list[Finding] = []
    for plugin, value in results:
        if isinstance(value, list | tuple) and all(isinstance(f, Finding) for f in value):
            findings.extend(value)
        else:
            errors.append((plugin, "returned something that is not a list of Finding"))
    for plugin, error in errors:
        findings.append(
            Finding(
                "plugin-error",
                f"plugin:{plugin}",
                f"lint rules of plugin {plugin!r} failed: {error}",
            )
        )
    log.debug("lint_ran", namespace=namespace, findings=len(findings))
    return LintReport(namespace=namespace, findings=findings)
