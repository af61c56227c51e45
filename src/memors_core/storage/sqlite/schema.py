"""The database schema, as migrations stepped by ``PRAGMA user_version``.

Raw tables (documents and their versions, passages, facts, tombstones,
pages with their sources, sentences and facts, entities, the purge audit)
are append-only: triggers refuse UPDATE, DELETE, and an INSERT that would
replace a row (``INSERT OR REPLACE``, ``REPLACE``, an upsert) on every
connection, memors' own or a plain SQLite one. Since version 3, the one way past the DELETE
triggers is purge's: inside its own write transaction it drops them, erases,
and creates them again before it commits (:func:`no_delete_triggers`), so no
other connection ever sees a store without them.
"""

from __future__ import annotations

from memors_core.storage.sql.tables import (
    FIRST_PURGEABLE,
    FIRST_RAW_TABLES,
    PAGE_RECORDS,
)


def _append_only(table: str) -> str:
    return f"""
CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, 'memors: {table} rows are never modified'); END;
CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
WHEN NOT EXISTS (SELECT 1 FROM purge_gate)
BEGIN SELECT RAISE(ABORT, 'memors: {table} rows are never deleted (only purge erases)'); END;
"""


V1 = """
CREATE TABLE namespaces(
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE documents(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    uri TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX documents_uri ON documents(namespace, uri);

CREATE TABLE document_versions(
    document TEXT NOT NULL REFERENCES documents(id),
    version INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    title TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    PRIMARY KEY(document, version)
) WITHOUT ROWID;

CREATE TABLE passages(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    document TEXT NOT NULL REFERENCES documents(id),
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    hash TEXT NOT NULL,
    shingles BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX passages_document ON passages(document);
CREATE INDEX passages_namespace ON passages(namespace, rowid);

CREATE TABLE version_passages(
    document TEXT NOT NULL,
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    passage TEXT NOT NULL,
    PRIMARY KEY(document, version, position)
) WITHOUT ROWID;

CREATE TABLE tombstones(
    rowid INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    target TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('forgotten', 'superseded')),
    reason TEXT,
    item INTEGER,
    created_at TEXT NOT NULL
);
CREATE INDEX tombstones_namespace ON tombstones(namespace, rowid);

CREATE TABLE entities(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    folded TEXT NOT NULL,
    canonical TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (namespace, key)
);
CREATE INDEX entities_canonical ON entities(canonical);
CREATE INDEX entities_folded ON entities(namespace, folded);
CREATE TRIGGER entities_names_fixed BEFORE UPDATE OF id, namespace, name, key, folded ON entities
BEGIN SELECT RAISE(ABORT, 'memors: entity names are never modified'); END;
CREATE TRIGGER entities_no_delete BEFORE DELETE ON entities
WHEN NOT EXISTS (SELECT 1 FROM purge_gate)
BEGIN SELECT RAISE(ABORT, 'memors: entities are never deleted'); END;

CREATE TABLE aliases(
    entity TEXT NOT NULL REFERENCES entities(id),
    namespace TEXT NOT NULL,
    alias TEXT NOT NULL,
    key TEXT NOT NULL,
    folded TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (entity, key)
) WITHOUT ROWID;
CREATE INDEX aliases_key ON aliases(namespace, key);
CREATE INDEX aliases_folded ON aliases(namespace, folded);

CREATE TABLE mentions(
    passage TEXT NOT NULL,
    entity TEXT NOT NULL,
    PRIMARY KEY (passage, entity)
) WITHOUT ROWID;
CREATE INDEX mentions_entity ON mentions(entity, passage);

CREATE TABLE facts(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    subject TEXT NOT NULL REFERENCES entities(id),
    predicate TEXT NOT NULL,
    value TEXT NOT NULL,
    predicate_folded TEXT NOT NULL,
    value_folded TEXT NOT NULL,
    valid_from TEXT,
    valid_to TEXT,
    from_ts TEXT,
    to_ts TEXT,
    source TEXT,
    recorded_at TEXT NOT NULL
);
CREATE INDEX facts_subject ON facts(subject, predicate_folded);
CREATE INDEX facts_namespace ON facts(namespace, rowid);

CREATE TABLE merge_candidates(
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    first TEXT NOT NULL REFERENCES entities(id),
    second TEXT NOT NULL REFERENCES entities(id),
    pair TEXT NOT NULL,
    origin TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'accepted', 'rejected')),
    created_at TEXT NOT NULL,
    decided_at TEXT,
    UNIQUE (namespace, pair)
);
CREATE INDEX merge_candidates_open ON merge_candidates(namespace, status);

CREATE TABLE pages(
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    entity TEXT NOT NULL REFERENCES entities(id),
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL,
    previous TEXT REFERENCES pages(id),
    is_inference INTEGER NOT NULL DEFAULT 1 CHECK (is_inference = 1),
    item INTEGER,
    flags TEXT NOT NULL DEFAULT '{}',
    built_seq INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX pages_entity ON pages(entity);
CREATE INDEX pages_namespace ON pages(namespace);

CREATE TABLE page_sources(
    page TEXT NOT NULL,
    passage TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (page, passage)
) WITHOUT ROWID;
CREATE INDEX page_sources_passage ON page_sources(passage);

CREATE TABLE page_stale(
    rowid INTEGER PRIMARY KEY,
    page TEXT NOT NULL,
    cause TEXT NOT NULL,
    target TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX page_stale_page ON page_stale(page);

CREATE TABLE work_items(
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'done', 'skipped', 'obsolete')),
    fingerprint TEXT NOT NULL,
    payload TEXT NOT NULL,
    resolution TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX work_items_open ON work_items(namespace, kind, key) WHERE status = 'open';
CREATE INDEX work_items_key ON work_items(namespace, kind, key, id);
CREATE INDEX work_items_status ON work_items(namespace, status, kind);

CREATE TABLE counters(
    name TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    event TEXT NOT NULL DEFAULT '',
    value INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, kind, event)
) WITHOUT ROWID;

CREATE TABLE purges(
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    target TEXT NOT NULL,
    erased TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TRIGGER purges_no_update BEFORE UPDATE ON purges
BEGIN SELECT RAISE(ABORT, 'memors: the purge audit is never modified'); END;
CREATE TRIGGER purges_no_delete BEFORE DELETE ON purges
BEGIN SELECT RAISE(ABORT, 'memors: the purge audit is never deleted'); END;

CREATE TABLE purge_gate(opened_at TEXT NOT NULL);

CREATE VIRTUAL TABLE passages_fts USING fts5(
    text, content='passages', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER passages_fts_insert AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER passages_fts_delete AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;

CREATE VIRTUAL TABLE pages_fts USING fts5(
    title, content, content='pages', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER pages_fts_insert AFTER INSERT ON pages BEGIN
    INSERT INTO pages_fts(rowid, title, content) VALUES (new.rowid, new.title, new.content);
END;
CREATE TRIGGER pages_fts_delete AFTER DELETE ON pages BEGIN
    INSERT INTO pages_fts(pages_fts, rowid, title, content)
    VALUES ('delete', old.rowid, old.title, old.content);
END;

CREATE VIRTUAL TABLE facts_fts USING fts5(subject, predicate, value, tokenize='porter unicode61');
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts(rowid, subject, predicate, value)
    VALUES (new.rowid, (SELECT name FROM entities WHERE id = new.subject), new.predicate, new.value);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
    DELETE FROM facts_fts WHERE rowid = old.rowid;
END;

CREATE VIRTUAL TABLE entities_fts USING fts5(name, aliases, tokenize='porter unicode61');
CREATE TRIGGER entities_fts_insert AFTER INSERT ON entities BEGIN
    INSERT INTO entities_fts(rowid, name, aliases) VALUES (new.rowid, new.name, '');
END;
CREATE TRIGGER aliases_fts_insert AFTER INSERT ON aliases BEGIN
    UPDATE entities_fts SET aliases = (
        SELECT group_concat(alias, ' ; ') FROM aliases WHERE entity = new.entity
    ) WHERE rowid = (SELECT rowid FROM entities WHERE id = new.entity);
END;
""" + "".join(_append_only(t) for t in FIRST_RAW_TABLES)

# Version 2: incremental compaction. Triggers log every change that can
# affect an entity-centred work item (the canonical entity it touches) in
# `changes`; `compact_marks` holds, per namespace and kind, how far the last
# scan read that log and the passage and tombstone row ids.
V2 = """
CREATE TABLE changes(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused after pruning
    namespace TEXT NOT NULL,
    entity TEXT NOT NULL
);
CREATE INDEX changes_namespace ON changes(namespace, seq);

CREATE TABLE compact_marks(
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    change_seq INTEGER NOT NULL,
    passage_seq INTEGER NOT NULL,
    tombstone_seq INTEGER NOT NULL,
    PRIMARY KEY (namespace, kind)
) WITHOUT ROWID;

CREATE TRIGGER changes_mention AFTER INSERT ON mentions BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id = new.entity;
END;
CREATE TRIGGER changes_fact AFTER INSERT ON facts BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id = new.subject;
END;
CREATE TRIGGER changes_page AFTER INSERT ON pages BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id = new.entity;
END;
CREATE TRIGGER changes_page_stale AFTER INSERT ON page_stale BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT e.namespace, e.canonical FROM pages p JOIN entities e ON e.id = p.entity
    WHERE p.id = new.page;
END;
CREATE TRIGGER changes_tombstone AFTER INSERT ON tombstones BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT e.namespace, e.canonical FROM mentions m JOIN entities e ON e.id = m.entity
    WHERE new.type = 'passage' AND m.passage = new.target
    UNION ALL
    SELECT e.namespace, e.canonical FROM facts f JOIN entities e ON e.id = f.subject
    WHERE new.type = 'fact' AND f.id = new.target
    UNION ALL
    SELECT e.namespace, e.canonical FROM pages p JOIN entities e ON e.id = p.entity
    WHERE new.type = 'page' AND p.id = new.target;
END;
CREATE TRIGGER changes_entity AFTER INSERT ON entities BEGIN
    INSERT INTO changes(namespace, entity) VALUES (new.namespace, new.id);
END;
CREATE TRIGGER changes_canonical AFTER UPDATE OF canonical ON entities BEGIN
    INSERT INTO changes(namespace, entity) VALUES (new.namespace, old.canonical);
    INSERT INTO changes(namespace, entity) VALUES (new.namespace, new.canonical);
END;
CREATE TRIGGER changes_alias AFTER INSERT ON aliases BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id = new.entity;
END;
CREATE TRIGGER changes_merge_candidate AFTER INSERT ON merge_candidates BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id IN (new.first, new.second);
END;
CREATE TRIGGER changes_merge_decision AFTER UPDATE OF status ON merge_candidates BEGIN
    INSERT INTO changes(namespace, entity)
    SELECT namespace, canonical FROM entities WHERE id IN (new.first, new.second);
END;
"""

# The raw tables' unique keys: an INSERT that names an existing one would
# replace the row (or, as an upsert, update it), so it is refused before
# SQLite gets to its conflict clause. (Version 3 made these triggers; a
# raw table added later has its own, in its migration.)
UNIQUE_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "documents": (("rowid",), ("id",)),
    "document_versions": (("document", "version"),),
    "version_passages": (("document", "version", "position"),),
    "passages": (("rowid",), ("id",)),
    "facts": (("rowid",), ("id",)),
    "tombstones": (("rowid",), ("target",)),
    "pages": (("rowid",), ("id",)),
    "page_sources": (("page", "passage"),),
    "entities": (("rowid",), ("id",), ("namespace", "key")),
    "purges": (("id",),),
}


def _no_replace(table: str, keys: tuple[tuple[str, ...], ...]) -> str:
    taken = " OR ".join(
        f"EXISTS (SELECT 1 FROM {table} WHERE " + " AND ".join(f"{c} = new.{c}" for c in key) + ")"
        for key in keys
    )
    return f"""
CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table}
WHEN {taken}
BEGIN SELECT RAISE(ABORT, 'memors: {table} rows are never replaced'); END;
"""


def no_delete_triggers(table: str) -> tuple[str, str]:
    """SQL that drops, and SQL that creates, ``table``'s DELETE trigger."""
    what = "entities are" if table == "entities" else f"{table} rows are"
    return (
        f"DROP TRIGGER {table}_no_delete",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, 'memors: {what} never deleted (only purge erases)'); END",
    )


# Version 3: data safety. The purge gate was a table any connection could
# write a row into; now the DELETE triggers refuse unconditionally and purge
# drops them inside its own transaction. An insert that would replace a raw
# row is refused. `purge_pending` records, per audit row, the erasure steps
# still to run after the delete committed (FTS merges, VACUUM, the WAL
# checkpoint), so a purge killed half-way is finished by the next run.
V3 = (
    "".join(f"DROP TRIGGER {t}_no_delete;\n" for t in FIRST_PURGEABLE)
    + "".join(no_delete_triggers(t)[1] + ";\n" for t in FIRST_PURGEABLE)
    + "DROP TABLE purge_gate;\n"
    + "".join(_no_replace(t, keys) for t, keys in UNIQUE_KEYS.items())
    + """
CREATE TABLE purge_pending(
    purge INTEGER PRIMARY KEY REFERENCES purges(id),
    steps TEXT NOT NULL
);
"""
)

# Version 4: the storage boundary. `clock` holds the high-water mark of the
# passage and tombstone clocks across purges (SQLite would hand out the row
# ids above the highest remaining row again); `kind_schema` records which
# migrations of each kind's own state were applied.
V4 = """
CREATE TABLE clock(
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE kind_schema(
    kind TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    applied_at TEXT NOT NULL
) WITHOUT ROWID;
"""

# Version 5: grounded pages (issue 16). A page records each checked
# sentence with the addresses it cites (`page_sentences`, `sources` a JSON
# list) and the facts it was built with (`page_facts`, in the order
# written): raw rows, erased with their page. `passage_profiles` is derived:
# per-passage token data the checks compute once, recomputed when missing
# (not exported), erased with its passage.
PAGE_RECORD_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "page_sentences": (("page", "position"),),
    "page_facts": (("page", "fact"),),
}

V5 = """
CREATE TABLE page_sentences(
    page TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    sources TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (page, position)
) WITHOUT ROWID;

CREATE TABLE page_facts(
    page TEXT NOT NULL,
    fact TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (page, fact)
) WITHOUT ROWID;
CREATE INDEX page_facts_fact ON page_facts(fact);

CREATE TABLE passage_profiles(
    passage TEXT PRIMARY KEY,
    data TEXT NOT NULL
) WITHOUT ROWID;
""" + "".join(
    f"CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}\n"
    f"BEGIN SELECT RAISE(ABORT, 'memors: {t} rows are never modified'); END;\n"
    + no_delete_triggers(t)[1]
    + ";\n"
    + _no_replace(t, PAGE_RECORD_KEYS[t])
    for t in PAGE_RECORDS
)

# Version 6: search that ranks right (issue 17). The four store-wide FTS5
# tables give way to one contentless FTS5 index per kind of row and
# namespace (`search_indexes` names them, `search_<id>` holds each, made by
# memors_core.storage.sqlite.search), so a namespace's statistics and its
# search cost are its own. Triggers only note which rows changed in
# `search_queue`; the write transaction indexes them just before it commits
# (`added` = 1: a row new in this transaction, never indexed yet). Every
# existing row is queued here, so the migration's own commit builds the
# new indexes.
_SEARCH_QUEUE = "INSERT INTO search_queue(kind, namespace, row, added)"
_TOMBSTONE_TARGET = """
    SELECT 'p', namespace, rowid, 0 FROM passages WHERE id = {t}.target AND {t}.type = 'passage'
    UNION ALL
    SELECT 'g', namespace, rowid, 0 FROM pages WHERE id = {t}.target AND {t}.type = 'page'
    UNION ALL
    SELECT 'f', namespace, rowid, 0 FROM facts WHERE id = {t}.target AND {t}.type = 'fact';"""
_ENTITY_ROWS = """
    SELECT 'p', p.namespace, p.rowid, 0 FROM mentions m JOIN passages p ON p.id = m.passage
    WHERE m.entity = {e}.id
    UNION ALL SELECT 'f', namespace, rowid, 0 FROM facts WHERE subject = {e}.id
    UNION ALL SELECT 'g', namespace, rowid, 0 FROM pages WHERE entity = {e}.id
    UNION ALL SELECT 'e', {e}.namespace, {e}.rowid, 0;"""

V6 = (
    "".join(
        f"DROP TRIGGER IF EXISTS {t}_fts_{op};\n"
        for t in ("passages", "pages", "facts", "entities", "aliases")
        for op in ("insert", "delete")
    )
    + "".join(f"DROP TABLE {t}_fts;\n" for t in ("passages", "pages", "facts", "entities"))
    + """
CREATE TABLE search_indexes(
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    UNIQUE (kind, namespace)
);
CREATE TABLE search_queue(
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    row INTEGER NOT NULL,
    added INTEGER NOT NULL
);
"""
    + "".join(
        f"""
CREATE TRIGGER {table}_search_insert AFTER INSERT ON {table} BEGIN
    {_SEARCH_QUEUE} VALUES ('{kind}', new.namespace, new.rowid, 1);
END;
CREATE TRIGGER {table}_search_delete AFTER DELETE ON {table} BEGIN
    {_SEARCH_QUEUE} VALUES ('{kind}', old.namespace, old.rowid, 0);
END;"""
        for table, kind in (("passages", "p"), ("pages", "g"), ("facts", "f"), ("entities", "e"))
    )
    + "".join(
        f"""
CREATE TRIGGER aliases_search_{op} AFTER {op.upper()} ON aliases BEGIN
    {_SEARCH_QUEUE} SELECT 'e', namespace, rowid, 0 FROM entities WHERE id = {row}.entity;
END;
CREATE TRIGGER mentions_search_{op} AFTER {op.upper()} ON mentions BEGIN
    {_SEARCH_QUEUE} SELECT 'p', namespace, rowid, 0 FROM passages WHERE id = {row}.passage;
END;
CREATE TRIGGER tombstones_search_{op} AFTER {op.upper()} ON tombstones BEGIN
    {_SEARCH_QUEUE} {_TOMBSTONE_TARGET.format(t=row)}
END;"""
        for op, row in (("insert", "new"), ("delete", "old"))
    )
    + f"""
CREATE TRIGGER entities_search_merge AFTER UPDATE OF canonical ON entities BEGIN
    {_SEARCH_QUEUE} {_ENTITY_ROWS.format(e="new")}
END;
{_SEARCH_QUEUE} SELECT 'p', namespace, rowid, 1 FROM passages;
{_SEARCH_QUEUE} SELECT 'g', namespace, rowid, 1 FROM pages;
{_SEARCH_QUEUE} SELECT 'f', namespace, rowid, 1 FROM facts;
{_SEARCH_QUEUE} SELECT 'e', namespace, rowid, 1 FROM entities;
"""
)

# Version 7: passages' vectors (the `semantic` extra, issue 17). Derived
# data, never exported: `passage_vectors` holds the vector of each live
# passage that has one (its rowid is the passage's), with the vector's sign
# bits (`code`) that a search compares first; a tombstone or purge takes
# the vector with the passage. `vector_stats` counts each namespace's
# vectors and every change to them, so a process's cache of the codes
# knows at one lookup whether it is still whole.
V7 = """
CREATE TABLE passage_vectors(
    passage INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    code BLOB NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX passage_vectors_codes ON passage_vectors(namespace, passage, code);
CREATE TABLE vector_stats(
    namespace TEXT PRIMARY KEY,
    vectors INTEGER NOT NULL,
    changes INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER passage_vectors_count_insert AFTER INSERT ON passage_vectors BEGIN
    INSERT INTO vector_stats(namespace, vectors, changes) VALUES (new.namespace, 1, 1)
    ON CONFLICT(namespace) DO UPDATE SET vectors = vectors + 1, changes = changes + 1;
END;
CREATE TRIGGER passage_vectors_count_delete AFTER DELETE ON passage_vectors BEGIN
    UPDATE vector_stats SET vectors = vectors - 1, changes = changes + 1
    WHERE namespace = old.namespace;
END;
CREATE TRIGGER tombstones_vectors AFTER INSERT ON tombstones WHEN new.type = 'passage' BEGIN
    DELETE FROM passage_vectors WHERE passage = (SELECT rowid FROM passages WHERE id = new.target);
END;
CREATE TRIGGER passages_vectors AFTER DELETE ON passages BEGIN
    DELETE FROM passage_vectors WHERE passage = old.rowid;
END;
"""

# Version 8: what was not verified never looks verified (issue 31). A page
# stored over its checks' flags (`force`) records, on each sentence, what
# the checks flagged in it (`flags`, a JSON list; empty: it passed), so
# every view can show it as unverified rather than as cited. A sentence
# row written before this has none.
V8 = "ALTER TABLE page_sentences ADD COLUMN flags TEXT NOT NULL DEFAULT '[]';\n"

# Version 9: corrections (issue 31). People correct memory, and every
# correction is a row of its own: ``corrections`` is the audit of each one
# (a rename, a merge, a merge undone, an item reopened, a rejected merge
# proposed again), append-only; ``entity_names`` holds an entity's names
# after renames (the newest is its name; ``entities.name`` stays as
# written); ``alias_changes`` retracts an alias a merge gave, and restores
# it, without touching ``aliases``.
CORRECTION_TABLES = ("corrections", "entity_names", "alias_changes")

V9 = """
CREATE TABLE corrections(
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX corrections_target ON corrections(namespace, target, id);

CREATE TABLE entity_names(
    rowid INTEGER PRIMARY KEY,
    entity TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    correction INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX entity_names_entity ON entity_names(entity, rowid);

CREATE TABLE alias_changes(
    rowid INTEGER PRIMARY KEY,
    entity TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('retracted', 'restored')),
    correction INTEGER,
    created_at TEXT NOT NULL
);
CREATE INDEX alias_changes_key ON alias_changes(entity, key, rowid);
""" + "".join(
    f"CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}\n"
    f"BEGIN SELECT RAISE(ABORT, 'memors: {t} rows are never modified'); END;\n"
    f"CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}\n"
    f"BEGIN SELECT RAISE(ABORT, 'memors: {t} rows are never deleted'); END;\n"
    for t in CORRECTION_TABLES
)

# Version 10: corrections reach the search index and purge (issue 31). A
# rename or an alias taken back or given again re-indexes the entity (its
# name now, its live aliases) and the facts it is the subject of; and purge
# may erase an entity's names with it (its aliases, renames, their
# retractions and the corrections about it), so the DELETE triggers of the
# correction tables become purge's (:func:`no_delete_triggers`).
NAME_TABLES = ("entity_names", "alias_changes", "corrections")

V10 = (
    """
CREATE TRIGGER entity_names_search AFTER INSERT ON entity_names BEGIN
    INSERT INTO search_queue(kind, namespace, row, added)
    SELECT 'e', namespace, rowid, 0 FROM entities WHERE id = new.entity;
    INSERT INTO search_queue(kind, namespace, row, added)
    SELECT 'f', namespace, rowid, 0 FROM facts WHERE subject = new.entity;
END;
CREATE TRIGGER alias_changes_search AFTER INSERT ON alias_changes BEGIN
    INSERT INTO search_queue(kind, namespace, row, added)
    SELECT 'e', namespace, rowid, 0 FROM entities WHERE id = new.entity;
END;
INSERT INTO search_queue(kind, namespace, row, added)
SELECT 'e', namespace, rowid, 0 FROM entities
WHERE id IN (SELECT entity FROM entity_names UNION SELECT entity FROM alias_changes);
INSERT INTO search_queue(kind, namespace, row, added)
SELECT 'f', namespace, rowid, 0 FROM facts WHERE subject IN (SELECT entity FROM entity_names);
"""
    + "".join(f"DROP TRIGGER {t}_no_delete;\n" for t in NAME_TABLES)
    + "".join(no_delete_triggers(t)[1] + ";\n" for t in NAME_TABLES)
)

# Version 11: the page a work item wrote (the web view's item links to it,
# Pages.of_item) is found by an index, not a scan of every page version.
V11 = "CREATE INDEX pages_item ON pages(item, rowid) WHERE item IS NOT NULL;\n"

# Version 12: what each vector is (issue 30): the model and the form of
# the text it was made from (memors_core.semantic.KIND). The vectors made
# before are of the passage's text alone (semantic.TEXT_ONLY); a vector of
# another kind than the running memors' is made again by the catch-up,
# which replaces it in place (a new vector counts as a change, so a
# process's cache of the codes reads them again).
V12 = """
ALTER TABLE passage_vectors ADD COLUMN kind TEXT NOT NULL DEFAULT 'all-MiniLM-L6-v2-int8';
CREATE TRIGGER passage_vectors_count_update AFTER UPDATE OF vector ON passage_vectors BEGIN
    UPDATE vector_stats SET changes = changes + 1 WHERE namespace = new.namespace;
END;
"""

MIGRATIONS: list[str] = [V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12]
SCHEMA_VERSION = len(MIGRATIONS)
#: The schema of the rows an export holds: versions 6, 7 and 12 changed only
#: derived tables (the search indexes, the vectors); 8 added the sentences'
#: flags; 9's corrections are not exported yet.
EXPORT_SCHEMA = 8
