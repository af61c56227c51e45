"""Each kind's own state at its newest version, on either SQL engine: the
versions recorded in ``kind_schema`` and the steps that bring a kind's
tables up to date (see :meth:`memors_core.storage.api.Storage.migrate_kinds`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memors_core.domain.dates import now
from memors_core.errors import MemorsError, PluginError
from memors_core.log import get_logger

log = get_logger("memors.store")


def migrate_kinds(
    store: Any,
    migrations: dict[str, list[str]],
    run_step: Callable[[str], object],
    driver_error: type[BaseException],
) -> None:
    """Each kind's own state at its newest version, on either engine (see
    :meth:`memors_core.storage.api.Storage.migrate_kinds`): ``run_step``
    runs one step's SQL script inside the store's write transaction, and
    raises ``driver_error`` when it fails. The usual open finds every kind
    there already: one read, no write lock."""
    known = {kind: len(steps) for kind, steps in migrations.items()}
    if not _kinds_behind(store, known):
        return
    with store.write():
        # Another process may have migrated while we waited for the lock.
        for kind, version in _kinds_behind(store, known).items():
            steps = migrations[kind]
            for step in range(version, len(steps)):
                try:
                    run_step(steps[step])
                except driver_error as exc:
                    raise PluginError(
                        f"kind {kind!r}: migration {step + 1} of its own state "
                        f"failed ({' '.join(str(exc).split())}); nothing was migrated"
                    ) from None
            store.run(
                "INSERT INTO kind_schema(kind, version, applied_at) VALUES (?, ?, ?) "
                "ON CONFLICT(kind) DO UPDATE SET version = excluded.version, "
                "applied_at = excluded.applied_at",
                (kind, len(steps), now()),
            )
            store.after_commit(
                log.info,
                "kind_schema_migrated",
                path=str(store.location),
                kind=kind,
                from_version=version,
                to_version=len(steps),
            )


def _kinds_behind(store: Any, known: dict[str, int]) -> dict[str, int]:
    """Kind -> its recorded version, for the kinds whose state is older
    than their steps; a recorded version newer than a kind knows raises."""
    with store.read():
        recorded = dict(store.all("SELECT kind, version FROM kind_schema"))
    behind = {}
    for kind, version in known.items():
        have = recorded.get(kind, 0)
        if type(have) is not int or have < 0:
            # Only memors writes this table, with whole numbers; re-running
            # migrations over state of unknown version could damage it.
            raise MemorsError(
                f"{store.location}: the kind {kind!r} records its state at version "
                f"{str(have)[:40]!r} in kind_schema, which memors never writes (whole numbers "
                f"only), so it cannot tell which of its {version} migration(s) ran; set the "
                "version the kind's tables are at, or restore a backup"
            )
        if have > version:
            raise MemorsError(
                f"{store.location}: the kind {kind!r} keeps state at version {have}, written "
                f"by a newer release of it (this one knows {version}); upgrade it"
            )
        if have < version:
            behind[kind] = have
    return behind
