"""The storage boundary: :mod:`memors_core.storage.api` says what a store
does; :func:`open_storage` opens one with the engine its address names."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (not typing's: ``memors-mcp search`` imports this package lean)
if TYPE_CHECKING:  # pragma: no cover
    from memors_core.storage.api import Storage


def open_storage(
    location: str | os.PathLike[str] | None = None, *, readonly: bool = False
) -> Storage:
    """The store at ``location`` (a file path for SQLite, a ``postgresql://``
    address for PostgreSQL; None: the default path of SPEC §3), creating it
    (its schema, on PostgreSQL) unless ``readonly``.

    ``readonly``: nothing is created or changed, every write is refused, and
    a store that does not exist yet reads as an empty one.
    """
    if location is None and os.environ.get("MEMORS_DB", "").startswith(
        ("postgresql://", "postgres://")
    ):  # ($MEMORS_DB naming a server's database, not a file)
        location = os.environ["MEMORS_DB"]
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        try:
            from memors_core.storage.postgres.connection import PgStore
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] in (
                "psycopg",
                "psycopg_binary",
                "psycopg_pool",
            ):
                from memors_core.errors import BadInput

                raise BadInput(
                    "a postgresql:// store needs the PostgreSQL engine: "
                    "pip install 'memors[postgres]'"
                ) from None
            raise
        from memors_core.storage.postgres.addresses import safe_location
        from memors_core.storage.postgres.connection import NoStoreYet

        try:
            return PgStore.open(location, readonly=readonly)
        except NoStoreYet:
            # Read-only, a store not created yet reads as an empty one, as on
            # SQLite; of no engine, since it has no tables of any.
            from memors_core.storage.empty import EmptyStore

            return EmptyStore(safe_location(location))
    if readonly:
        from memors_core.settings import default_path
        from memors_core.storage.sqlite.readonly import open_readonly

        return open_readonly(location if location is not None else default_path())
    from memors_core.storage.sqlite.connection import SqliteStore

    return SqliteStore.open(location)
