"""Erasure that erases: after ``purge`` the text is gone from the database file.

A distinctive marker is remembered (in a passage, a title, metadata, a page
that cites it, a later page version built on that one, work-item payloads,
the duplicate kind's prefix index, the passages' profiles, a wiki-linked
entity name, a fact) and
purged through the real CLI; then the bytes of the db file (and -wal, -shm,
if any) hold no trace of it, FTS index and free pages included, while the
audit row remains and names the address, never the content.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import apsw
import pytest

from memors_core import MemorsError, Memory, hookimpl
from memors_core.plugins.kinds import Kind
from memors_core.testing import CLIResult, passages_about, run_cli, temporary_memory
from memors_core.wire import to_json
from store_checks import connect, rows_of

# FTS5 keeps terms lower-cased and porter-stemmed, prefix-compressed against the term
# before them in a leaf: so the marker starts with letters no other word here starts
# with, and the tests look for its tail too.
MARKER = "Qjzv7erasemarker3"
PIECES = [MARKER, MARKER.lower(), MARKER[4:].lower(), "erasemarker3"]
# A long sentence, so that a copy without the marker is still a near-duplicate.
SENTENCE = (
    "[[Raft]] stores the {} token in every log entry it replicates to each follower node of "
    "the cluster, and the leader waits for a majority of the followers to acknowledge the "
    "entry before it commits the entry and answers the client that sent the request."
)


def traces(db: Path) -> dict[str, list[str]]:
    """Which spellings of the marker each file of the store still holds."""
    found = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            data = path.read_bytes()
            hits = [
                p
                for p in PIECES
                if p.encode() in data
                or p.encode("utf-16-le") in data
                or p.encode("utf-16-be") in data
            ]
            if hits:
                found[path.name] = hits
    return found


def cli(
    db: Path, *args: str, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> CLIResult:
    r = run_cli(*args, db=db, env=env)
    assert r.code in ok, r
    return r


def page_text(payload: dict) -> str:
    return "\n".join(p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"])


def build(db: Path) -> dict:
    """A store where the marker reached every place content can reach."""
    with Memory.open(db) as memory:
        secret = memory.remember(
            f"{SENTENCE.format(MARKER)}\n\n"
            f"A second paragraph naming [[{MARKER} Project]] as its origin.",
            uri="secret.txt",
            title=f"Notes on {MARKER}",
            metadata={"tag": MARKER},
        )
        for i, text in enumerate(passages_about("Raft", 3)):
            memory.remember(text, uri=f"raft-{i}")
        # a near-duplicate of the secret passage in another document: a duplicate item
        memory.remember(SENTENCE.format("secret"), uri="copy.txt")
        kinds = {i.kind: i for i in memory.compact().items}
        assert {"page", "duplicate"} <= set(kinds)
        page_item = kinds["page"]
        first = memory.submit(page_item.id, content=page_text(page_item.payload), title="Raft")
        assert first.stored
        # a later version of the page, written from a payload that carried the first
        memory.remember("\n\n".join(passages_about("Raft", 6)[4:]), uri="more.txt")
        stale = next(i for i in memory.compact(kinds=["stale"]).items)
        assert MARKER in json.dumps(stale.payload)
        second = memory.submit(stale.id, content=page_text(stale.payload), title="Raft")
        assert second.stored
        other = memory.remember("\n\n".join(passages_about("Paxos", 3)), uri="paxos.txt")
        fact = memory.record_fact("Raft", "token", MARKER)
        memory.compact()
        with memory.store.write() as tx:  # what a check keeps of each passage: its words
            tx.passages.add_profiles(
                [(p.rsplit("/", 1)[1], json.dumps([MARKER, "token"])) for p in secret.passages]
            )
        if memory.store.engine == "sqlite":
            memory.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {
            "document": secret.document,
            "passages": secret.passages,
            "pages": [first.address, second.address],
            "page_item": page_item.id,
            "stale_item": stale.id,
            "duplicate_item": kinds["duplicate"].id,
            "fact": fact.fact,
            "other": other.document,
            "rowids": [
                r[0]
                for r in rows_of(
                    memory,
                    "SELECT rowid FROM passages WHERE document = ?",
                    (secret.document[len("memo://document/") :],),
                )
            ],
        }


@pytest.mark.sqlite_only("reads the bytes of the database, -wal and -shm files")
def test_purging_a_document_leaves_no_trace_of_its_text_in_the_file(fresh_store, tmp_path: Path):
    db = fresh_store("purge.db")
    made = build(db)
    assert traces(db)  # the marker is there to begin with

    out = json.loads(cli(db, "purge", made["document"], "--yes", "--json").out)
    assert made["document"] in out["erased"] and set(made["passages"]) <= set(out["erased"])
    # pages citing an erased passage go, and so does every later version built on them
    assert set(made["pages"]) <= set(out["erased"])
    cli(db, "purge", made["fact"], "--yes")

    leftover = traces(db)
    assert leftover == {}, f"the purged text survives in {leftover}"

    with Memory.open(db) as memory:
        for target in [made["document"], *made["passages"], *made["pages"], made["fact"]]:
            with pytest.raises(MemorsError, match="nothing at"):
                memory.get(target)
        assert memory.search(MARKER, granularity="all").results == []
        # work items that carried the text are redacted, and say so
        for key in ("page_item", "stale_item", "duplicate_item"):
            item = memory.get(f"memo://item/{made[key]}")
            assert item.payload == {"purged": "this item referred to content that was purged"}
        # the audit names what was erased, never the content
        rows = rows_of(memory, "SELECT target, erased FROM purges ORDER BY id")
        assert [r[0] for r in rows] == [made["document"], made["fact"]]
        assert made["document"] in json.loads(rows[0][1])
        # the rest of the store is whole and still works
        assert memory.get(made["other"]).status == "live"
        assert memory.search("paxos").results
        queue = memory.compact()
        assert any(i.kind == "page" for i in queue.items)  # Raft needs a page again
        # the duplicate kind's prefix index holds nothing of the erased passages
        rowids = json.dumps(made["rowids"])
        for table in ("dup_prefix", "dup_recent"):
            assert not rows_of(
                memory,
                f"SELECT * FROM {table} WHERE passage IN (SELECT value FROM json_each(?))",
                (rowids,),
            )
    conn = connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    for (ix,) in conn.execute("SELECT id FROM search_indexes").fetchall():
        conn.execute(f"INSERT INTO search_{ix}(search_{ix}) VALUES ('integrity-check')")
    conn.close()


def test_purging_one_passage_erases_it_and_what_was_built_on_it(fresh_store, tmp_path: Path):
    db = fresh_store("passage.db")
    made = build(db)
    secret = made["passages"][0]
    out = json.loads(cli(db, "purge", secret, "--yes", "--json").out)
    assert secret in out["erased"] and made["document"] not in out["erased"]
    with Memory.open(db) as memory:
        doc = memory.get(made["document"])  # the document stays, without that passage
        assert secret not in doc.passages and doc.passages
        for page in made["pages"]:
            with pytest.raises(MemorsError):
                memory.get(page)
        ids = [p.rsplit("/", 1)[1] for p in made["passages"]]
        with memory.store.read() as tx:  # its profile went with it, the other's stays
            assert set(tx.passages.profiles(ids)) == {ids[1]}
        assert memory.search(MARKER).results  # the other passage still says it
        memory.purge(made["passages"][1])
        assert memory.search(MARKER).results == []
        assert memory.search(MARKER, granularity="page").results == []
        # the entity only the purged passage named is gone with it; Raft stays
        names = [e.name for e in memory.entities().entities]
        assert "Raft" in names and not [n for n in names if MARKER in n]
        # the title and metadata belong to the document, which was not purged
        kept = memory.get(made["document"])
        assert MARKER in kept.title and kept.metadata == {"tag": MARKER}
        assert kept.passages == []


def test_purging_a_fact_erases_the_pages_built_with_it(fresh_store):
    db = fresh_store("fact.db")
    with Memory.open(db) as memory:
        memory.remember("\n\n".join(passages_about("Raft", 3)), uri="raft.txt")
        fact = memory.record_fact("Raft", "token", MARKER).fact
        (item,) = memory.compact(kinds=["page"]).items
        page = memory.submit(
            item.id, content=page_text(item.payload) + f"\n\nThe token is {MARKER}.", title="Raft"
        ).address
        assert to_json(memory.get(page))["facts"] == [fact]
        memory.remember("\n\n".join(passages_about("Paxos", 3)), uri="paxos.txt")
        (other,) = memory.compact(kinds=["page"]).items
        kept = memory.submit(other.id, content=page_text(other.payload), title="Paxos").address
    out = json.loads(cli(db, "purge", fact, "--yes", "--json").out)
    # The page may state the fact: it goes with it; a page built without it stays.
    assert fact in out["erased"] and page in out["erased"] and kept not in out["erased"]
    with Memory.open(db) as memory:
        with pytest.raises(MemorsError, match="nothing at"):
            memory.get(page)
        assert memory.search(MARKER, granularity="all").results == []
        assert memory.get(kept).status == "live"


@pytest.mark.sqlite_only("tampers through apsw (PostgreSQL: tests/core/storage/postgres)")
def test_the_audit_is_append_only_and_holds_no_content(fresh_store, tmp_path: Path):
    db = fresh_store("audit.db")
    made = build(db)
    cli(db, "purge", made["document"], "--yes")
    conn = apsw.Connection(str(db))
    with pytest.raises(apsw.ConstraintError, match="never"):
        conn.execute("UPDATE purges SET erased = '[]'")
    with pytest.raises(apsw.ConstraintError, match="never"):
        conn.execute("DELETE FROM purges")
    row = conn.execute("SELECT namespace, target, erased, created_at FROM purges").fetchone()
    assert MARKER.lower() not in json.dumps(row).lower()
    conn.close()


@pytest.mark.sqlite_only("a reader's snapshot holding SQLite's WAL, and the file's bytes")
def test_purge_while_another_process_reads_still_leaves_no_trace(fresh_store, tmp_path: Path):
    """A reader holding a snapshot keeps the WAL from being emptied into the
    file; purge waits for it (within the busy timeout) instead of leaving the
    old pages behind. The reader stays connected while the file is checked, so
    no closing connection tidies up in purge's place."""
    db = fresh_store("busy.db")
    made = build(db)
    reader = apsw.Connection(str(db))
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM passages").fetchall()  # a snapshot, held
    released: list[float] = []

    def let_go() -> None:
        released.append(time.monotonic())  # (before the COMMIT: purge cannot end earlier)
        reader.execute("COMMIT")

    release = threading.Timer(3.0, let_go)
    release.start()
    try:
        # (the busy timeout it waits within: 20x the reader's three seconds, so a
        # loaded machine's late timer cannot outlast it)
        cli(db, "purge", made["document"], "--yes", env={"MEMORS_BUSY_TIMEOUT_MS": "60000"})
        # It waited for the reader: it ended after the reader let go, however slow the machine.
        assert released and time.monotonic() >= released[0]
        cli(db, "purge", made["fact"], "--yes")
        assert traces(db) == {}
    finally:
        release.join()
        reader.close()


class _Stubborn:
    """A plugin whose kind cannot erase its state."""

    @hookimpl
    def memors_register_kinds(self, registry) -> None:
        class StubbornKind(Kind):
            name = "stubborn"
            description = "keeps an index of passage text and fails to erase it"
            hint = "skip"

            def scan(self, ctx):
                return []

            def erase(self, ctx, passages):
                raise RuntimeError("index is read-only")

        registry.add(StubbornKind())


def test_a_kind_that_cannot_erase_its_state_refuses_the_purge_by_name():
    with temporary_memory(plugins=[("stubborn-plugin", _Stubborn())]) as memory:
        doc = memory.remember(f"The {MARKER} is here.")
        with pytest.raises(MemorsError, match=r"'stubborn'.*'stubborn-plugin'.*nothing was purged"):
            memory.purge(doc.document)
        assert memory.get(doc.document).status == "live"
        assert rows_of(memory, "SELECT * FROM purges") == []
