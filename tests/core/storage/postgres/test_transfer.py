"""Export, import and backup on PostgreSQL, as a user runs them.

After an import the store goes on numbering where the export left off
(documents, items, merges, the change log past its recorded mark); an
export reads a batch at a time and lets its reader use the store between
rows; a bad line is one line of error and leaves the store empty; and
``memors-mcp backup FILE`` writes a memors SQLite file of one snapshot,
even while another process writes, that opens with memors and holds the
same rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from export_files import body, seal
from memors_core import Memory
from memors_core.storage.postgres import transfer
from memors_core.storage.sqlite.transfer import SqliteTransfer
from memors_core.testing import CLIResult, passages_about, run_cli
from store_checks import store_problems

from .conftest import Roles

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def cli(db: str | Path, *args: str, ok: tuple[int, ...] = (0,), cwd: Path) -> CLIResult:
    r = run_cli(*args, "--db", str(db), db=db, cwd=cwd)
    assert r.code in ok, r
    return r


def page_content(payload: dict) -> str:
    return "\n".join(p["text"].replace("[[", "").replace("]]", "") for p in payload["passages"])


def fill(memory: Memory) -> None:
    """Documents, facts, a page, items of several states, a merge, a forget."""
    for i, text in enumerate(passages_about("Raft", 4)):
        memory.remember(text, uri=f"raft-{i}")
    memory.remember("A log replication protocol.", entities=["Raft consensus"])
    memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01")
    memory.propose_merge(["Raft", "Raft consensus"])
    for item in memory.compact(kinds=["merge"]).items:
        memory.submit(item.id, accept=True)
    item = next(i for i in memory.compact().items if i.kind == "page")
    memory.submit(item.id, content=page_content(item.payload), title="Raft", force=True)
    extra = memory.remember("A passage that is forgotten.")
    memory.forget(extra.passages[0], reason="wrong")


def export_lines(db: str | Path) -> list[dict[str, Any]]:
    with Memory.open(db, readonly=True) as memory:
        return list(memory.export())


#: The numbered rows: the table and its identity column.
NUMBERED = (("documents", "rowid"), ("work_items", "id"), ("pages", "rowid"),
            ("merge_candidates", "id"), ("facts", "rowid"))  # fmt: skip


def highest(memory: Memory) -> dict[str, int]:
    with memory.store.read():
        return {
            table: memory.store.scalar(f"SELECT COALESCE(MAX({column}), 0) FROM {table}")
            for table, column in NUMBERED
        }


def test_postgresql_writes_exports_sqlite_reads() -> None:
    assert transfer.PgTransfer.schema == SqliteTransfer.schema
    assert transfer.PgTransfer.reads_schemas == SqliteTransfer.reads_schemas
    assert transfer.PgTransfer.tables == SqliteTransfer.tables


def test_after_an_import_new_rows_get_new_numbers(postgres_url: str, tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    with Memory.open(source) as memory:
        fill(memory)
        imported = highest(memory)
    lines = [json.dumps(line) for line in export_lines(source)]
    with Memory.open(postgres_url) as memory:
        memory.import_(lines, "source")
        assert highest(memory) == imported
        # every kind of numbered row takes the next number, none collides
        memory.remember("\n\n".join(passages_about("Zab", 4)), uri="zab")
        memory.record_fact("Zab", "leader", "z1")
        memory.propose_merge(["Zab", "Raft"])
        item = next(i for i in memory.compact().items if i.kind == "page")
        memory.submit(item.id, content=page_content(item.payload), title="Zab", force=True)
        after = highest(memory)
    assert all(after[t] == imported[t] + 1 for t in ("documents", "pages", "facts")), after
    assert after["merge_candidates"] > imported["merge_candidates"]
    assert item.id > imported["work_items"]


def test_the_change_log_goes_on_past_its_imported_mark(postgres_url: str, tmp_path: Path) -> None:
    """A store whose change log was pruned keeps its high-water mark in the
    clock; after an import the log's numbers start above it, so compaction's
    incremental scans (marked at that clock) still see every new change."""
    source = tmp_path / "source.db"
    with Memory.open(source) as memory:
        fill(memory)
    lines = export_lines(source)[:-1]  # (without its closing line: sealed again below)
    lines = [x for x in lines if x.get("table") != "clock" or x["row"]["name"] != "changes"]
    lines.append({"table": "clock", "row": {"name": "changes", "value": 1_000_000}})
    with Memory.open(postgres_url) as memory:
        memory.import_(seal([json.dumps(x) for x in lines]), "source")
        memory.compact()  # the full scan: its marks are at the imported clock
        memory.record_fact("Raft", "leader", "n9", valid_from="2024-01-01")
        with memory.store.read():
            assert memory.store.scalar("SELECT MIN(seq) FROM changes") > 1_000_000
        kinds = [i.kind for i in memory.compact().items]
        assert "conflict" in kinds, kinds


def test_an_export_reads_in_batches_and_lets_its_reader_use_the_store(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory.open(postgres_url) as memory:
        fill(memory)
        whole = list(memory.export())
        monkeypatch.setattr(transfer, "BATCH", 2)
        rows = memory.export()
        again = [next(rows) for _ in range(5)]
        # between two rows of the export, the same memory answers other calls
        passage = next(x["row"]["id"] for x in whole[1:] if x["table"] == "passages")
        assert memory.get(f"memo://passage/{passage}").text
        again += list(rows)
        assert again == whole
        # an export left unread half-way leaves the store usable
        unread = memory.export()
        next(unread), next(unread)
        del unread
        assert list(memory.export()) == whole


def test_a_bad_line_is_one_line_of_error_and_leaves_the_store_empty(
    postgres_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "source.db"
    with Memory.open(source) as memory:
        fill(memory)
    lines = body(cli(source, "export", cwd=tmp_path).out.splitlines())  # sealed again below
    passage = next(n for n, line in enumerate(lines) if '"table": "passages"' in line)
    wrong_type = json.loads(lines[passage])
    wrong_type["row"]["rowid"] = "not a number"
    an_object = json.loads(lines[passage])
    an_object["row"]["text"] = {"nested": True}
    nul = json.loads(lines[passage])
    nul["row"]["text"] = "a NUL \x00 byte"
    unknown = json.loads(lines[passage])
    unknown["row"]["colour"] = "blue"
    broken = tmp_path / "broken.jsonl"
    for bad, message in (
        ([*lines, lines[passage]], "cannot restore this passages row"),  # a row twice
        ([*lines[:passage], json.dumps(wrong_type), *lines[passage + 1 :]], "cannot restore"),
        ([*lines[:passage], json.dumps(an_object), *lines[passage + 1 :]], "a JSON dict"),
        ([*lines[:passage], json.dumps(nul), *lines[passage + 1 :]], "a NUL character"),
        ([*lines[:passage], json.dumps(unknown), *lines[passage + 1 :]], "colour"),
    ):
        broken.write_text("\n".join(seal(bad)) + "\n", encoding="utf-8")
        r = cli(postgres_url, "import", str(broken), ok=(2,), cwd=tmp_path)
        assert message in r.err and len(r.err.strip().splitlines()) == 1, r.err
        assert "Traceback" not in r.err
        with Memory.open(postgres_url, readonly=True) as memory, memory.store.read():
            assert memory.store.scalar("SELECT COUNT(*) FROM documents") == 0  # nothing kept
    # a good file then imports; a second import is refused
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(seal(lines)) + "\n", encoding="utf-8")
    cli(postgres_url, "import", str(good), cwd=tmp_path)
    r = cli(postgres_url, "import", str(good), ok=(2,), cwd=tmp_path)
    assert "import needs an empty store" in r.err


def test_a_backup_is_a_sqlite_file_memors_opens(postgres_url: str, tmp_path: Path) -> None:
    with Memory.open(postgres_url) as memory:
        fill(memory)
    target = tmp_path / "backup.db"
    r = cli(postgres_url, "backup", str(target), cwd=tmp_path)
    conn = apsw.Connection(str(target))
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    assert r.out.startswith(f"backed up to {target}: copied ")
    assert r.out.rstrip().endswith(f"({pages} SQLite pages)"), r.out
    assert cli(postgres_url, "backup", str(target), "--json", ok=(2,), cwd=tmp_path).err
    assert store_problems(target) == []  # integrity, search indexes, no orphans
    assert export_lines(target) == export_lines(postgres_url)
    for query in ("raft leader", "replication"):
        on_pg = cli(postgres_url, "search", query, "--json", cwd=tmp_path).json["results"]
        on_file = cli(target, "search", query, "--json", cwd=tmp_path).json["results"]
        assert on_pg and [h["address"] for h in on_file] == [h["address"] for h in on_pg]
    # and the file goes on as a store of its own
    with Memory.open(target) as memory:
        memory.remember("\n\n".join(passages_about("Zab", 4)), uri="zab")
        assert any(i.kind == "page" for i in memory.compact().items)


@pytest.mark.parametrize("name", ["nowhere/deeper/x.db", "."])
def test_a_backup_to_a_bad_path_is_one_line(postgres_url: str, tmp_path: Path, name: str) -> None:
    with Memory.open(postgres_url) as memory:
        memory.remember("something")
    r = cli(postgres_url, "backup", str(tmp_path / name), ok=(2,), cwd=tmp_path)
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "nowhere").exists()


WRITER = r"""
import sys
from memors_core import Memory
with Memory.open(sys.argv[1]) as memory:
    for i in range(int(sys.argv[2])):
        memory.remember(f"Write number {i} about [[Topic {i % 7}]] and its replicas.", uri=f"w/{i}")
        print(i, flush=True)
"""


def test_a_backup_while_another_process_writes_is_whole_and_a_prefix(
    postgres_url: str, tmp_path: Path
) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, postgres_url, "1000000"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMORS_DB": postgres_url},
    )
    assert writer.stdout is not None
    try:
        while int(writer.stdout.readline()) < 50:  # well under way
            pass
        copies = []
        for n in range(3):
            target = tmp_path / f"copy-{n}.db"
            cli(postgres_url, "backup", str(target), cwd=tmp_path)
            copies.append(target)
            writer.stdout.readline()  # at least one more write between copies
        still_writing = writer.poll() is None
    finally:
        writer.kill()
        writer.wait()
    assert still_writing, "the writer finished before the backups"
    counts = []
    for target in copies:
        assert store_problems(target) == []
        with Memory.open(target, readonly=True) as memory, memory.store.read():
            seqs = sorted(
                int(r[0][2:])
                for r in memory.store.all("SELECT uri FROM documents WHERE uri LIKE 'w/%'")
            )
            assert seqs == list(range(len(seqs))), "the copy is not a prefix of the writes"
            assert memory.search("replicas").results
            counts.append(len(seqs))
    assert counts[0] >= 50 and counts == sorted(counts) and counts[-1] > counts[0]


def test_the_application_role_imports_and_the_store_goes_on(roles, tmp_path: Path) -> None:
    """The agents' role (no UPDATE on sequences) imports into the empty store
    the owner migrated, and the next rows still get new numbers."""
    source = tmp_path / "source.db"
    with Memory.open(source) as memory:
        fill(memory)
        imported = highest(memory)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli(source, "export", cwd=tmp_path).out, encoding="utf-8")
    cli(roles.app_url, "import", str(dump), cwd=tmp_path)
    with Memory.open(roles.app_url) as memory:
        assert highest(memory) == imported
        memory.remember("\n\n".join(passages_about("Zab", 4)), uri="zab")
        item = next(i for i in memory.compact().items if i.kind == "page")
        memory.submit(item.id, content=page_content(item.payload), title="Zab", force=True)
        after = highest(memory)
    assert after["documents"] == imported["documents"] + 1
    assert after["pages"] == imported["pages"] + 1
    assert item.id > imported["work_items"]


def test_the_documented_move_imports_into_the_store_the_owner_set_up(roles, tmp_path: Path) -> None:
    """docs/postgres.md: a new database of the owner's, which the owner sets
    up with `compact`, the agents' role granted, and a SQLite store's export
    imported as that role (before, the namespaces row `compact` wrote
    refused the import)."""
    import psycopg
    from psycopg import sql

    from memors_core.storage.postgres.privileges import grant_application_role
    from memors_core.testing import postgres

    source = tmp_path / "source.db"
    with Memory.open(source) as memory:
        fill(memory)
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli(source, "export", cwd=tmp_path).out, encoding="utf-8")
    mine = Roles(dbname=f"{roles.dbname}_move", owner=roles.owner, app=roles.app)
    admin = psycopg.connect(postgres.admin_url(), autocommit=True)
    create = sql.SQL("CREATE DATABASE {} OWNER {}")
    admin.execute(create.format(sql.Identifier(mine.dbname), sql.Identifier(mine.owner)))
    try:
        cli(mine.owner_url, "compact", cwd=tmp_path)
        grant_application_role(mine.owner_url, mine.app)
        out = json.loads(cli(mine.app_url, "import", str(dump), "--json", cwd=tmp_path).out)
        assert out["verified"] is True
        lines = dump.read_text(encoding="utf-8").splitlines()
        moved = cli(mine.app_url, "export", cwd=tmp_path).out.splitlines()
    finally:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        admin.execute(drop.format(sql.Identifier(mine.dbname)))
        admin.close()
    assert set(body(lines)[1:]) <= set(body(moved)[1:])  # every row, as exported
    extra = set(body(moved)[1:]) - set(body(lines)[1:])
    # the store's own: counts of the compact's work, its change log's high-water mark
    assert all('"table": "counters"' in x or '"table": "clock"' in x for x in extra), extra
