"""Which of the store's tables are raw (both engines: append-only, erased by purge only)."""

from __future__ import annotations

RAW_TABLES = (
    "documents",
    "document_versions",
    "version_passages",
    "passages",
    "facts",
    "tombstones",
    "pages",
    "page_sources",
)

#: The tables whose rows only purge deletes.
PURGEABLE = (*RAW_TABLES, "entities")

__all__ = ["PURGEABLE", "RAW_TABLES"]
