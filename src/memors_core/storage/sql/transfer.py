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

import json
from typing import Any

from memors_core.domain.inputs import check_namespace
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
    # People's corrections (renames, merges undone, items reopened): the
    # audit rows first, then the names and alias changes that cite them.
    (
        "corrections",
        "SELECT * FROM corrections WHERE :ns IS NULL OR namespace = :ns ORDER BY id",
    ),
    (
        "entity_names",
        "SELECT * FROM entity_names WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
    (
        "alias_changes",
        "SELECT * FROM alias_changes WHERE :ns IS NULL OR namespace = :ns ORDER BY rowid",
    ),
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


#: Columns that hold JSON text, and the JSON type each must be (None: any).
JSON_COLUMNS: dict[tuple[str, str], type | None] = {
    ("document_versions", "metadata"): dict,
    ("pages", "flags"): dict,
    ("page_sentences", "sources"): list,
    ("page_sentences", "flags"): list,
    ("work_items", "payload"): dict,
    ("work_items", "resolution"): None,
    ("purges", "erased"): list,
}
#: Columns that count or mark a clock: never below zero.
NOT_NEGATIVE = frozenset({("counters", "value"), ("clock", "value")})
#: The values a row holds (JSON's scalars, and bytes for BLOB columns).
VALUE_TYPES = (type(None), bool, int, float, str, bytes)
_JSON_NAMES: dict[type, str] = {dict: "an object", list: "an array"}
#: The column names some table checks beyond the value's type.
_CHECKED_COLUMNS = frozenset(
    {"namespace", "name"} | {c for _t, c in JSON_COLUMNS} | {c for _t, c in NOT_NEGATIVE}
)

#: How a restored row meets one the store already holds (a store that
#: ``compact`` or any other command opened has its namespaces rows, its
#: counters and its clocks): the export's row is the store's now; a clock
#: keeps the higher mark (each engine adds its own clause for ``clock``).
RECONCILE = {
    "namespaces": "ON CONFLICT (name) DO UPDATE SET created_at = excluded.created_at",
    "counters": "ON CONFLICT (name, kind, event) DO UPDATE SET value = excluded.value",
}

#: Rows that refer to rows the store must hold (where no foreign key says
#: so at insert): (what is missing, a query of the first such row's key).
REFERENCES: list[tuple[str, str]] = [
    (
        "a document without a version",
        "SELECT d.id FROM documents d WHERE NOT EXISTS "
        "(SELECT 1 FROM document_versions v WHERE v.document = d.id) ORDER BY d.rowid LIMIT 1",
    ),
    (
        # (unless a purge erased them: purging a document's only passage leaves it none)
        "a document's first version without its passages",
        "SELECT v.document FROM document_versions v WHERE v.version = 1 AND NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.document = v.document AND p.version = 1) "
        "AND NOT EXISTS (SELECT 1 FROM purges) LIMIT 1",
    ),
    (
        "a document's later version without its passage list",
        "SELECT v.document FROM document_versions v WHERE v.version > 1 AND NOT EXISTS "
        "(SELECT 1 FROM version_passages vp WHERE vp.document = v.document "
        "AND vp.version = v.version) LIMIT 1",
    ),
    (
        "a passage of a document version the file does not hold",
        "SELECT p.id FROM passages p WHERE NOT EXISTS (SELECT 1 FROM document_versions v "
        "WHERE v.document = p.document AND v.version = p.version) ORDER BY p.rowid LIMIT 1",
    ),
    (
        "a version_passages row of a document version the file does not hold",
        "SELECT vp.document FROM version_passages vp WHERE NOT EXISTS (SELECT 1 FROM "
        "document_versions v WHERE v.document = vp.document AND v.version = vp.version) LIMIT 1",
    ),
    (
        "a version_passages row of a passage the file does not hold",
        "SELECT vp.passage FROM version_passages vp WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = vp.passage) LIMIT 1",
    ),
    (
        "a mention of a passage the file does not hold",
        "SELECT m.passage FROM mentions m WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = m.passage) LIMIT 1",
    ),
    (
        "a mention of an entity the file does not hold",
        "SELECT m.entity FROM mentions m WHERE NOT EXISTS "
        "(SELECT 1 FROM entities e WHERE e.id = m.entity) LIMIT 1",
    ),
    (
        "a page citing a passage the file does not hold",
        "SELECT s.page FROM page_sources s WHERE NOT EXISTS "
        "(SELECT 1 FROM passages p WHERE p.id = s.passage) LIMIT 1",
    ),
    *(
        (
            f"a {table} row of a page the file does not hold",
            f"SELECT t.page FROM {table} t WHERE NOT EXISTS "
            "(SELECT 1 FROM pages p WHERE p.id = t.page) LIMIT 1",
        )
        for table in ("page_sources", "page_sentences", "page_facts", "page_stale")
    ),
]


def row_columns(table: str, row: dict[str, Any]) -> list[str]:
    """The columns of one exported row, once its table and column names are
    known to be safe to put in SQL and its values to be ones the store can
    hold; BadInput (one line, no position) otherwise."""
    if table not in TABLE_NAMES:
        raise BadInput(f"no table {table!r} in an export")
    cols = list(row)
    if not cols or not all(isinstance(c, str) and c.replace("_", "").isalnum() for c in cols):
        raise BadInput("bad column name")
    for col in cols:
        _check_value(table, col, row[col])
    return cols


def _check_value(table: str, col: str, value: Any) -> None:
    if isinstance(value, str):
        # (the common case first, and the message built only for a refusal)
        if "\x00" in value:
            raise BadInput(f"the {table} row's {col} contains a NUL character")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise BadInput(
                    f"the {table} row's {col} holds a lone surrogate, which is not Unicode text"
                ) from None
    elif not isinstance(value, VALUE_TYPES):
        raise BadInput(
            f"the {table} row's {col} is a JSON {type(value).__name__}, not a value a column holds"
        )
    if col in _CHECKED_COLUMNS:
        _check_column(table, col, value)


def _check_column(table: str, col: str, value: Any) -> None:
    what = f"the {table} row's {col}"
    if col == "namespace" or (table, col) == ("namespaces", "name"):
        try:
            check_namespace(value)
        except BadInput as exc:
            raise BadInput(f"{what}: {exc}") from None
    if (table, col) in NOT_NEGATIVE and isinstance(value, int) and value < 0:
        raise BadInput(f"{what} is negative ({value})")
    if (table, col) in JSON_COLUMNS and value is not None:
        want = JSON_COLUMNS[table, col]
        if not _is_json(value, want):
            shape = f"{_JSON_NAMES[want]} as " if want is not None else ""
            raise BadInput(f"{what} is not {shape}JSON text")


def _is_json(value: Any, want: type | None) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return False
    return want is None or isinstance(parsed, want)


def check_references(first: Any) -> None:
    """BadInput naming the first row that refers to a row the store lacks;
    ``first(sql)`` runs a query of :data:`REFERENCES` and returns its value."""
    for what, sql in REFERENCES:
        key = first(sql)
        if key is not None:
            raise BadInput(f"the rows do not hold together: {what} ({key})")


def row_dict(cols: list[str], values: Any) -> dict[str, Any]:
    """One result row as ``{column: value}``. ``SELECT rowid, *`` names
    ``rowid`` twice where it is a declared column (on both engines): both
    carry the same value, and the row keeps one, first."""
    return dict(zip(cols, values, strict=True))
