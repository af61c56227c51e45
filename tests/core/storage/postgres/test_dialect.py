"""The shared SQL rendered for PostgreSQL: what each rewrite does, and that
a rendered statement runs with its parameters in the right places."""

from __future__ import annotations

import pytest

from memors_core.storage.postgres.dialect import render

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def test_plain_placeholders_keep_their_order():
    r = render("SELECT a FROM t WHERE b = ? AND c = ?")
    assert r.sql == "SELECT a FROM t WHERE b = %s AND c = %s"
    assert list(r.params(("x", 2))) == ["x", 2]


def test_numbered_placeholders_repeat_their_parameter():
    r = render("SELECT 1 WHERE ?2 IS NULL OR (k = ?2 AND n = ?1)")
    assert r.sql == "SELECT 1 WHERE %s IS NULL OR (k = %s AND n = %s)"
    assert list(r.params(("ns", "kind"))) == ["kind", "kind", "ns"]


def test_named_placeholders_become_positional():
    r = render("SELECT * FROM t WHERE :ns IS NULL OR namespace = :ns")
    assert r.sql == "SELECT * FROM t WHERE %s IS NULL OR namespace = %s"
    assert r.params({"ns": "a"}) == ["a", "a"]


def test_percent_signs_and_literals_survive():
    r = render("SELECT 'a ? b :c %' || x FROM t WHERE y LIKE ? || '%'")
    assert r.sql == "SELECT 'a ? b :c %%' || x FROM t WHERE y LIKE %s || '%%'"
    assert list(r.params(("p",))) == ["p"]


def test_a_json_list_parameter_reads_as_rows():
    r = render("SELECT id FROM t WHERE id IN (SELECT value FROM json_each(?))")
    assert r.sql == (
        "SELECT id FROM t WHERE id IN "
        "(SELECT value FROM json_array_elements_text(CAST(%s AS json)) AS value)"
    )
    aliased = render("SELECT p.id FROM json_each(?) j CROSS JOIN passages p ON p.id = j.value")
    assert aliased.sql == (
        "SELECT p.id FROM json_array_elements_text(CAST(%s AS json)) AS j(value) "
        "JOIN passages p ON p.id = j.value"
    )


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "INSERT OR IGNORE INTO n(name) VALUES (?)",
            "INSERT INTO n(name) VALUES (%s) ON CONFLICT DO NOTHING",
        ),
        (
            "INSERT OR IGNORE INTO m(a, b) VALUES (?, ?) RETURNING a",
            "INSERT INTO m(a, b) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING a",
        ),
    ],
)
def test_insert_or_ignore_is_on_conflict_do_nothing(sql, expected):
    assert render(sql).sql == expected


def test_mixing_named_and_positional_parameters_is_refused():
    with pytest.raises(ValueError, match="mixes"):
        render("SELECT ? WHERE x = :x")


def test_rendered_statements_run_on_the_server(postgres_url):
    import psycopg

    with psycopg.connect(postgres_url, cursor_factory=psycopg.ClientCursor) as conn:
        r = render(
            "SELECT value FROM json_each(?) WHERE value <> ?2 AND 'it''s 100%' <> ?2 ORDER BY value"
        )
        rows = conn.execute(r.sql, r.params(('["b","a","c"]', "c"))).fetchall()
        assert rows == [("a",), ("b",)]
