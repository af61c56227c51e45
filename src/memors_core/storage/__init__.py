"""The storage boundary: :mod:`memors_core.storage.api` says what a store
does; :func:`open_storage` opens one with the engine its address names."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memors_core.storage.api import Storage


def open_storage(
    location: str | os.PathLike[str] | None = None, *, readonly: bool = False
) -> Storage:
    """The store at ``location`` (a file path for SQLite; None: the default
    path of SPEC §3), creating it unless ``readonly``.

    ``readonly``: nothing is created or changed, every write is refused, and
    a store that does not exist yet reads as an empty one.
    """
    if readonly:
        from memors_core.settings import default_path
        from memors_core.storage.sqlite.readonly import open_readonly

        return open_readonly(location if location is not None else default_path())
    from memors_core.storage.sqlite.connection import Store

    return Store.open(location)
