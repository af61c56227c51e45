"""Internal tables another connection to the file wrote into (issue 29, point 2).

Any process that can open a SQLite file can write its tables. The ones
that drive work at every write (the search queue, the kinds' recorded
state versions) must not turn a junk row into a failure of every command,
or into a search of one namespace that finds another's text.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.sqlite_only("SQLite's own search queue, written through sqlite3")


def write(db, sql: str) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql)
    finally:
        conn.close()


def test_a_search_queue_row_of_no_kind_fails_no_write(cli):
    assert cli("remember", "-", input="Alice met Bob in Paris.").code == 0
    write(
        cli.db,
        "INSERT INTO search_queue(kind, namespace, row, added) VALUES ('zzz', 'default', 1, 1)",
    )
    r = cli("remember", "-", input="Carol met Dave in Rome.")
    assert r.code == 0, r
    r = cli("search", "Rome", "--json")
    assert [h["text"] for h in json.loads(r.out)["results"]] == ["Carol met Dave in Rome."]


def test_a_forged_search_queue_row_puts_no_text_in_another_namespaces_index(cli):
    assert cli("remember", "-", input="Alice met Bob in Paris.").code == 0
    # Row 1 is the default namespace's passage: queue it for namespace `other`.
    write(
        cli.db, "INSERT INTO search_queue(kind, namespace, row, added) VALUES ('p', 'other', 1, 1)"
    )
    assert cli("--ns", "other", "remember", "-", input="Carol met Dave in Rome.").code == 0
    r = cli("--ns", "other", "search", "Paris", "--json")
    assert json.loads(r.out)["results"] == []
    r = cli("search", "Paris", "--json")
    assert [h["text"] for h in json.loads(r.out)["results"]] == ["Alice met Bob in Paris."]


def test_a_kind_state_version_memors_never_wrote_is_named_in_one_line(cli):
    assert cli("remember", "-", input="Alice met Bob in Paris.").code == 0
    write(cli.db, "UPDATE kind_schema SET version = 'abc' WHERE kind = 'duplicate'")
    r = cli("remember", "-", input="Carol met Dave in Rome.")
    assert r.code == 2
    [line] = r.err.strip().splitlines()
    assert "internal error" not in line and "Traceback" not in line
    assert "the kind 'duplicate' records its state at version 'abc'" in line
    assert cli("lint").code == 0  # reading needs no migration
