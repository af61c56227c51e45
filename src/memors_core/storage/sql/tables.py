"""Which of the store's tables are raw (both engines: append-only, erased by purge only)."""

from __future__ import annotations

#: The raw tables of the first schema. The shipped migrations that made
#: them append-only were built from this list, so it never changes.
FIRST_RAW_TABLES = (
    "documents",
    "document_versions",
    "version_passages",
    "passages",
    "facts",
    "tombstones",
    "pages",
    "page_sources",
)

#: Raw tables a later migration added: what a page records of how it was
#: built (each checked sentence with its sources; the facts it was built with).
PAGE_RECORDS = ("page_sentences", "page_facts")

RAW_TABLES = (*FIRST_RAW_TABLES, *PAGE_RECORDS)

#: The tables whose rows only purge deletes, as the first schema had them.
FIRST_PURGEABLE = (*FIRST_RAW_TABLES, "entities")
#: The tables whose rows only purge deletes.
PURGEABLE = (*RAW_TABLES, "entities")

__all__ = ["FIRST_PURGEABLE", "FIRST_RAW_TABLES", "PAGE_RECORDS", "PURGEABLE", "RAW_TABLES"]
