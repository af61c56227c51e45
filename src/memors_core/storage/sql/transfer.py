"""Which rows an export holds, in what order, for both SQL engines.

Both engines name their tables and columns alike (the PostgreSQL schema is
SQLite's, ``rowid`` an ordinary column there), so one list of SELECTs
serves both, and an export written by one imports into the other
unchanged. Each engine runs the statements its own way (SQLite as they
are, PostgreSQL after :func:`memors_core.storage.postgres.dialect.render`)
and inserts the rows it is given; what the two share besides the list is
the check of a row's table and column names before any SQL is built from
them.
"""

from __future__ import annotations

from typing import Any

from memors_core.errors import BadInput

# (table, SELECT of its rows — all of them when :ns is NULL, else one namespace's —
# in an order that import can replay: every row after the rows it refers to)
TABLES: list[tuple[str, str]] = [
    ("namespaces", "SELECT * FROM namespaces WHERE :ns IS NULL OR name = :ns ORDER BY name"),
    (
        "documents",
        "SELECT rowid, * FROM documents WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "document_versions",
        "SELECT v.* FROM document_versions v JOIN documents d ON d.id = v.document "
        "WHERE :ns IS NULL OR d.namespace = :ns ORDER BY d.rowid, v.version",
    ),
    (
        "entities",
        "SELECT rowid, * FROM entities WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "passages",
        "SELECT rowid, * FROM passages WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "version_passages",
        "SELECT vp.* FROM version_passages vp JOIN documents d ON d.id = vp.document "
        "WHERE :ns IS NULL OR d.namespace = :ns ORDER BY d.rowid, vp.version, vp.position",
    ),
    (
        "aliases",
        "SELECT * FROM aliases WHERE :ns IS NULL OR namespace = :ns "
        "ORDER BY created_at, entity, key",
    ),
    (
        "mentions",
        "SELECT m.* FROM mentions m JOIN passages p ON p.id = m.passage "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, m.entity",
    ),
    ("facts", "SELECT rowid, * FROM facts WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid"),
    (
        "merge_candidates",
        "SELECT * FROM merge_candidates WHERE :ns IS NULL OR namespace = :ns ORDER BY id",
    ),
    ("pages", "SELECT rowid, * FROM pages WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid"),
    (
        "page_sources",
        "SELECT s.* FROM page_sources s JOIN pages p ON p.id = s.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, s.passage",
    ),
    (
        "page_sentences",
        "SELECT s.* FROM page_sentences s JOIN pages p ON p.id = s.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, s.position",
    ),
    (
        "page_facts",
        "SELECT f.* FROM page_facts f JOIN pages p ON p.id = f.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY p.rowid, f.position",
    ),
    (
        "page_stale",
        "SELECT s.rowid, s.* FROM page_stale s JOIN pages p ON p.id = s.page "
        "WHERE :ns IS NULL OR p.namespace = :ns ORDER BY s.rowid",
    ),
    (
        "tombstones",
        "SELECT rowid, * FROM tombstones WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    ("work_items", "SELECT * FROM work_items WHERE :ns IS NULL OR namespace = :ns ORDER BY id"),
    ("purges", "SELECT * FROM purges WHERE :ns IS NULL OR namespace = :ns ORDER BY id"),
    # Counters describe the whole store (every namespace's work): only a
    # whole-store export carries them.
    ("counters", "SELECT * FROM counters WHERE :ns IS NULL ORDER BY name, kind, event"),
    # The clocks' high-water marks across purges: a store's, not a namespace's.
    ("clock", "SELECT * FROM clock WHERE :ns IS NULL ORDER BY name"),
]
TABLE_NAMES = frozenset(name for name, _sql in TABLES)
#: Derived state, rebuilt after an import rather than carried: the search
#: indexes (as rows arrive), compaction's change log and marks, the kinds'
#: own tables and their schema records (by the next compact, a full scan)
#: the passages' profiles (computed again when one is missing) and their
#: vectors (``memors-mcp reindex --vectors`` makes them again).
NOT_EXPORTED = (
    "changes",
    "compact_marks",
    "purge_pending",
    "kind_schema",
    "passage_profiles",
    "passage_vectors",
    "vector_stats",
)
#: A store holding a row of any of these is not empty.
CONTENT = ("documents", "entities", "facts", "work_items", "pages", "purges")
#: The statement that tells whether a store is empty (:data:`CONTENT`).
IS_EMPTY = "SELECT " + " AND ".join(f"NOT EXISTS (SELECT 1 FROM {t})" for t in CONTENT)


def row_columns(table: str, row: dict[str, Any]) -> list[str]:
    """The columns of one exported row, once its table and column names are
    known to be safe to put in SQL; BadInput otherwise."""
    if table not in TABLE_NAMES:
        raise BadInput(f"no table {table!r} in an export")
    cols = list(row)
    if not cols or not all(isinstance(c, str) and c.replace("_", "").isalnum() for c in cols):
        raise BadInput("bad column name")
    return cols


def row_dict(cols: list[str], values: Any) -> dict[str, Any]:
    """One result row as ``{column: value}``. ``SELECT rowid, *`` names
    ``rowid`` twice where it is a declared column (on both engines): both
    carry the same value, and the row keeps one, first."""
    return dict(zip(cols, values, strict=True))
