"""Keeping SQLite's search indexes (see :mod:`memors_core.storage.sqlite.search`).

Triggers note each changed row in ``search_queue``; :func:`flush` runs in
every write transaction just before it commits and puts the noted rows
into (or takes them out of) the FTS5 index of their kind and namespace,
making the index the first time that namespace gets a row of its kind.
Kept apart from the search itself so opening a store stays light.
"""

from __future__ import annotations

import apsw

from memors_core.storage.sql.repo import entity_name, json_list, live_alias

TYPE_CHECKING = False  # (not typing's: this module is on ``memors-mcp search``'s lean path)
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

# SQL: the row ``alias`` has no tombstone (as memors_core.storage.sql.records.live).
_LIVE = "NOT EXISTS (SELECT 1 FROM tombstones t_ WHERE t_.target = {}.id)"

KINDS = {"p": "passages", "g": "pages", "f": "facts", "e": "entities"}
PASSAGE, PAGE, FACT, ENTITY = "p", "g", "f", "e"

# The distinct canonical entities a row is about, as entity terms.
_TERMS_OF = (
    "coalesce((SELECT ' ' || group_concat(t, ' ') FROM (SELECT DISTINCT char(57344) || "
    "ce.rowid AS t FROM {tables} JOIN entities ce ON ce.id = e.canonical WHERE {where})), '')"
)
_CLEAN = "replace({}, char(57344), ' ')"

#: Per kind: the SQL of the indexed body of the rows ``r`` whose rowids are
#: in the JSON array ``?`` and that belong in the index (live; canonical).
BODIES = {
    PASSAGE: f"""SELECT r.rowid, {_CLEAN.format("r.text")} || {
        _TERMS_OF.format(
            tables="mentions m JOIN entities e ON e.id = m.entity", where="m.passage = r.id"
        )
    }
        FROM passages r WHERE r.rowid IN (SELECT value FROM json_each(?)) AND {
        _LIVE.format("r")
    }""",
    PAGE: f"""SELECT r.rowid, {_CLEAN.format("r.title || char(10) || r.content")} || {
        _TERMS_OF.format(tables="entities e", where="e.id = r.entity")
    }
        FROM pages r WHERE r.rowid IN (SELECT value FROM json_each(?)) AND {_LIVE.format("r")}""",
    FACT: f"""SELECT r.rowid, {
        _CLEAN.format(
            f"(SELECT {entity_name('s')} FROM entities s WHERE s.id = r.subject)"
            " || char(10) || r.predicate"
            " || char(10) || r.value"
        )
    } || {_TERMS_OF.format(tables="entities e", where="e.id = r.subject")}
        FROM facts r WHERE r.rowid IN (SELECT value FROM json_each(?)) AND {_LIVE.format("r")}""",
    ENTITY: f"""SELECT r.rowid, {
        _CLEAN.format(
            f"{entity_name('r')} || coalesce((SELECT char(10) || group_concat(a.alias, "
            f"char(10)) FROM aliases a WHERE a.entity = r.id AND {live_alias('a')}), '')"
        )
    } || {_TERMS_OF.format(tables="entities e", where="e.id = r.id")}
        FROM entities r WHERE r.rowid IN (SELECT value FROM json_each(?)) AND r.canonical = r.id""",
}


def index_table(ix: int) -> str:
    return f"search_{ix}"


def create_index(conn: apsw.Connection, ix: int) -> None:
    table = index_table(ix)
    conn.execute(
        f"CREATE VIRTUAL TABLE {table} USING fts5(body, content='', contentless_delete=1, "
        f"tokenize='porter unicode61');"
        f"CREATE VIRTUAL TABLE {table}_terms USING fts5vocab({table}, 'row');"
    )


def index_tables(conn: apsw.Connection) -> list[str]:
    """Every search index of the store."""
    return [index_table(r[0]) for r in conn.execute("SELECT id FROM search_indexes ORDER BY id")]


def flush(conn: apsw.Connection) -> None:
    """Index the rows ``search_queue`` names (inside the write transaction
    that changed them): take each out of its index, put it back if it
    still belongs there."""
    if conn.execute("SELECT 1 FROM search_queue LIMIT 1").fetchone() is None:
        return
    groups: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    # Only what the triggers write: any connection to the file can write
    # this table, and a row of no kind or no row number is dropped with the
    # rest rather than failing every write.
    for kind, namespace, row, added in conn.execute(
        "SELECT kind, namespace, row, max(added) FROM search_queue "
        "WHERE kind IN ('p', 'g', 'f', 'e') AND typeof(row) = 'integer' "
        "AND typeof(namespace) = 'text' "
        "GROUP BY kind, namespace, row ORDER BY kind, namespace, row"
    ):
        new, old = groups.setdefault((kind, namespace), ([], []))
        (new if added else old).append(row)
    for (kind, namespace), (new, old) in groups.items():
        ix = conn.execute(
            "SELECT id FROM search_indexes WHERE kind = ? AND namespace = ?", (kind, namespace)
        ).fetchone()
        if ix is None:
            if not new:
                continue  # (nothing of this kind was ever indexed here)
            conn.execute(
                "INSERT INTO search_indexes(kind, namespace) VALUES (?, ?)", (kind, namespace)
            )
            ix = (conn.last_insert_rowid(),)
            create_index(conn, ix[0])
        table = index_table(ix[0])
        if old:
            conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT value FROM json_each(?))",
                (json_list(old),),
            )
        conn.execute(
            f"INSERT INTO {table}(rowid, body) {BODIES[kind]} AND r.namespace = ?",
            (json_list(new + old), namespace),
        )
    conn.execute("DELETE FROM search_queue")


def term_counts(api: apsw.FTS5ExtensionApi, *args: Any) -> str:
    """``memors_terms(index)``: the row's length, then each phrase's count
    in it, space-separated."""
    counts = [len(api.phrase_locations(i)[0]) for i in range(api.phrase_count)]
    return " ".join(map(str, [api.column_size(0), *counts]))


def register(conn: apsw.Connection) -> None:
    """What a connection needs to search: the auxiliary function."""
    conn.register_fts5_function("memors_terms", term_counts)
