"""A restore never loses silently (issue 29, point 3), on each engine.

An export closes with a line counting each table's rows and holding the
SHA-256 of the lines before it. An import refuses a file cut anywhere (at a
line or inside one), altered, or whose rows do not hold together, naming
the first problem in one line, and stores nothing: so one target store
serves every refused example of the property tests, and must still be
empty at the end, when the whole file imports into it. A store that
``compact`` (or any command) opened first takes an import too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from export_files import body, seal
from memors_core import Memory
from memors_core.errors import BadInput
from memors_core.testing import CLIResult, passages_about, run_cli


def cli(db: Path | str, *args: str, ok: tuple[int, ...] = (0,), cwd: Path) -> CLIResult:
    r = run_cli(*args, "--db", str(db), db=db, cwd=cwd)
    assert r.code in ok, r
    return r


def fill(memory: Memory) -> None:
    """Documents (one in two versions), entities, mentions, facts, items,
    counters: rows of most tables, and no purge (which may leave gaps)."""
    for i, text in enumerate(passages_about("Raft", 3)):
        memory.remember(text, uri=f"raft-{i}", metadata={"n": i, "ü": "é"})
    memory.remember("[[Paxos]] ballots.\n\nOld paragraph.", uri="v")
    memory.remember("[[Paxos]] ballots.\n\nNew paragraph.", uri="v")
    memory.record_fact("Raft", "leader", "n1", valid_from="2024-01-01")
    memory.record_fact("Raft", "leader", "n2", valid_from="2024-06-01")
    memory.compact()


def export_of(db: Path | str) -> list[str]:
    with Memory.open(db, readonly=True) as memory:
        return list(memory.export_lines())


def import_into(db: Path | str, lines: list[Any], source: str = "dump.jsonl") -> dict[str, Any]:
    with Memory.open(db) as memory:
        return memory.import_(lines, source)


def holds_nothing(db: Path | str) -> bool:
    """The store's own export counts no row of content (opening it may
    have written its namespaces and counters rows, never more)."""
    closing = json.loads(export_of(db)[-1])
    return not set(closing["rows"]) - {"namespaces", "counters", "clock"}


def refused(db: Path | str, lines: list[Any]) -> str:
    """Import ``lines``: the one-line refusal; the store is left as it was."""
    with pytest.raises(BadInput) as caught:
        import_into(db, lines)
    message = str(caught.value)
    assert "\n" not in message, message
    assert holds_nothing(db), message
    return message


@pytest.fixture
def source(fresh_store) -> tuple[Path | str, list[str]]:
    db = fresh_store("source.db")
    with Memory.open(db) as memory:
        fill(memory)
    return db, export_of(db)


def test_the_closing_line_counts_every_table_and_sums_the_lines_before_it(source, tmp_path):
    db, lines = source
    written = cli(db, "export", cwd=tmp_path).out
    assert written == "\n".join(lines) + "\n"  # the CLI writes the library's lines
    header, closing = json.loads(lines[0]), json.loads(lines[-1])
    assert header["format"] == "memors-export" and header["version"] == 2
    assert set(closing) == {"end", "rows", "sha256"}
    tables = [json.loads(line)["table"] for line in lines[1:-1]]
    assert closing["rows"] == {t: tables.count(t) for t in dict.fromkeys(tables)}
    assert {"documents", "passages", "facts", "work_items", "counters"} <= set(closing["rows"])
    # `head -n -1 FILE | sha256sum`, as docs/cli.md says
    before = written.encode("utf-8").rsplit(b"\n", 2)[0] + b"\n"
    assert closing["sha256"] == hashlib.sha256(before).hexdigest()
    assert seal(body(lines)) == lines  # the documented format, rebuilt independently


def test_an_export_cut_at_any_byte_or_line_is_refused_and_stores_nothing(source, fresh_store):
    _db, lines = source
    data = ("\n".join(lines) + "\n").encode("utf-8")
    target = fresh_store("target.db")

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(draw: st.DataObject) -> None:
        if draw.draw(st.booleans(), "at a line"):
            kept = draw.draw(st.integers(0, len(lines) - 1), "lines kept")
            cut = [line + "\n" for line in lines[:kept]]
        else:
            # anywhere up to the closing line's last byte (only its newline may go)
            at = draw.draw(st.integers(0, len(data) - 2), "bytes kept")
            cut = data[:at].splitlines(keepends=True)
        message = refused(target, cut)
        assert any(
            said in message
            for said in ("is incomplete", "is cut short", "is empty", "not a memors export")
        ), message

    check()
    # Every refusal stored nothing, so the store still takes the whole file.
    out = import_into(target, data.splitlines(keepends=True))
    assert out["verified"] is True
    assert export_of(target) == lines


def test_an_export_cut_inside_a_character_is_cut_short_not_bad_text(source, fresh_store):
    """A copy that stopped inside a multi-byte character ends in a byte that is
    not UTF-8 on its own: it is a file cut short, and says so."""
    _db, lines = source
    data = ("\n".join(lines) + "\n").encode("utf-8")
    inside = next(i for i, b in enumerate(data) if b >= 0xC0) + 1  # after a lead byte
    message = refused(fresh_store("target.db"), data[:inside].splitlines(keepends=True))
    assert "is cut short" in message, message


def test_an_altered_export_is_refused_or_restores_the_very_same_rows(source, fresh_store):
    """A byte changed anywhere: refused, storing nothing, unless the change
    leaves every row the same (an escape spelled another way)."""
    _db, lines = source
    data = ("\n".join(lines) + "\n").encode("utf-8")
    target = fresh_store("target.db")
    accepted = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(data) - 2), st.integers(0x20, 0x7E))
    def check(at: int, byte: int) -> None:
        if data[at] == byte or data[at] == 0x0A:
            return  # (a newline changed is a line cut in two: the test above)
        altered = data[:at] + bytes([byte]) + data[at + 1 :]
        try:
            import_into(target, altered.splitlines(keepends=True))
        except BadInput as exc:
            assert "\n" not in str(exc) and holds_nothing(target), str(exc)
            return
        accepted.append(at)
        assert export_of(target) == lines, at  # the same rows, and a new store for the next
        raise AssertionError(f"an alteration at byte {at} was accepted")

    check()
    assert not accepted


def test_lines_dropped_repeated_moved_or_edited_are_refused(source, fresh_store):
    _db, lines = source
    target = fresh_store("target.db")
    n = len(lines)
    passages = [i for i, line in enumerate(lines) if '"table": "passages"' in line]
    edited = json.loads(lines[passages[0]])
    edited["row"]["text"] = edited["row"]["text"].replace("Raft", "Paxos")
    end = json.loads(lines[-1])
    for altered, says in (
        (
            [*lines[: passages[1]], *lines[passages[1] + 1 :]],
            f"dump.jsonl:{n - 1}: the file holds {len(passages) - 1} passages row(s) where its "
            f"closing line counts {len(passages)}: lines are missing or were added",
        ),
        # a row twice: the store refuses the second before the count is reached
        ([*lines[:-1], lines[passages[0]], lines[-1]], f"dump.jsonl:{n}: cannot restore this"),
        (
            [*lines[:5], lines[6], lines[5], *lines[7:]],
            f"dump.jsonl:{n}: the lines before the closing line do not have its checksum: "
            "the file was altered after export",
        ),
        (
            [
                *lines[: passages[0]],
                json.dumps(edited, ensure_ascii=False),
                *lines[passages[0] + 1 :],
            ],
            "do not have its checksum",
        ),
        ([*lines, lines[1]], f"dump.jsonl:{n + 1}: a line after the export's closing line"),
        ([*lines, *lines], f"dump.jsonl:{n + 1}: a line after the export's closing line"),
        (
            [*lines[:-1], json.dumps({**end, "sha256": "0" * 63})],
            f"dump.jsonl:{n}: a malformed closing line",
        ),
        (
            [*lines[:-1], json.dumps({**end, "rows": {**end["rows"], "facts": -1}})],
            "a malformed closing line",
        ),
        ([lines[0].replace('"version": 2', '"version": 3'), *lines[1:]], "export format 3"),
    ):
        message = refused(target, altered)
        assert says in message, message
    import_into(target, lines)
    assert export_of(target) == lines


def _first(lines: list[str], table: str, where: Any = lambda row: True) -> int:
    return next(
        i
        for i, line in enumerate(lines)
        if json.loads(line).get("table") == table and where(json.loads(line)["row"])
    )


def _with(lines: list[str], at: int, **values: Any) -> list[str]:
    obj = json.loads(lines[at])
    obj["row"].update(values)
    return [*lines[:at], json.dumps(obj, ensure_ascii=False), *lines[at + 1 :]]


def test_a_whole_file_whose_rows_do_not_hold_together_is_refused(source, fresh_store):
    """Sealed again after the change (so counts and checksum agree): the
    rows themselves are checked, and the first problem is named."""
    _db, lines = source
    rows = body(lines)
    target = fresh_store("target.db")
    item = _first(rows, "work_items")
    counter = _first(rows, "counters")
    ns = _first(rows, "namespaces")
    doc = json.loads(rows[_first(rows, "documents")])["row"]["id"]
    of_doc = [
        i
        for i, line in enumerate(rows)
        if json.dumps(doc) in line
        and json.loads(line)["table"] in ("documents", "document_versions")
    ]
    first_passage = _first(rows, "passages", lambda r: r["document"] == doc)
    doc_passages = {json.loads(rows[i])["row"]["id"] for i in range(len(rows))
                    if json.loads(rows[i]).get("table") == "passages"
                    and json.loads(rows[i])["row"]["document"] == doc}  # fmt: skip
    without_passages = [
        line
        for line in rows
        if not (
            json.loads(line).get("table") in ("passages", "mentions")
            and (json.loads(line)["row"].get("document") == doc
                 or json.loads(line)["row"].get("passage") in doc_passages)
        )
    ]  # fmt: skip
    version = _first(rows, "document_versions")
    cases = [
        # passages without their document (and its versions): refused at the first of them
        (
            [line for i, line in enumerate(rows) if i not in of_doc],
            f"dump.jsonl:{first_passage - len(of_doc) + 1}: cannot restore this passages row",
        ),
        (
            _with(rows, item, payload="{not json"),
            f"dump.jsonl:{item + 1}: the work_items row's payload is not an object as JSON text",
        ),
        (_with(rows, item, payload="[1, 2]"), "payload is not an object as JSON text"),
        (
            _with(rows, version, metadata="null"),
            f"dump.jsonl:{version + 1}: the document_versions row's metadata is not an object",
        ),
        (
            _with(rows, ns, name="no spaces allowed"),
            f"dump.jsonl:{ns + 1}: the namespaces row's name: bad namespace 'no spaces allowed'",
        ),
        (
            _with(rows, _first(rows, "facts"), namespace="elsewhere"),
            "a facts row of namespace 'elsewhere', which the file declares no namespaces row for",
        ),
        (
            _with(rows, counter, value=-3),
            f"dump.jsonl:{counter + 1}: the counters row's value is negative (-3)",
        ),
        (
            _with(rows, first_passage, text={"not": "text"}),
            "the passages row's text is a JSON dict, not a value a column holds",
        ),
        (
            without_passages,
            f"dump.jsonl: the rows do not hold together: a document's first version without "
            f"its passages ({doc}); nothing was imported",
        ),
        (
            [
                *rows,
                json.dumps(
                    {
                        "table": "version_passages",
                        "row": {
                            "document": doc,
                            "version": 1,
                            "position": 9,
                            "passage": "p-missing",
                        },
                    }
                ),
            ],
            "the rows do not hold together: a version_passages row of a passage the file "
            "does not hold (p-missing)",
        ),
    ]
    for altered, says in cases:
        message = refused(target, seal(altered))
        assert says in message, message
    import_into(target, lines)
    assert export_of(target) == lines


def test_an_export_of_an_older_memors_needs_allow_unverified(source, fresh_store):
    """No version in the header, no closing line: it cannot be told from a
    file cut short, so it is refused unless the caller accepts it; its rows
    are checked all the same."""
    _db, lines = source
    header = {k: v for k, v in json.loads(lines[0]).items() if k != "version"}
    older = [json.dumps(header, ensure_ascii=False), *body(lines)[1:]]
    target = fresh_store("target.db")
    message = refused(target, older)
    assert message.startswith("dump.jsonl was written by an older memors: it has no closing line")
    assert "--allow-unverified" in message
    with Memory.open(target) as memory:
        counter = _first(older, "counters")
        with pytest.raises(BadInput, match="the counters row's value is negative"):
            memory.import_(_with(older, counter, value=-1), "old", allow_unverified=True)
        out = memory.import_(older, "old", allow_unverified=True)
    assert out["verified"] is False
    assert export_of(target) == lines


@pytest.mark.parametrize("namespaces", [("default",), ("default", "other")])
def test_a_store_that_compact_set_up_takes_the_import(
    source, fresh_store, tmp_path: Path, namespaces: tuple[str, ...]
):
    """docs/postgres.md sets a store up with `compact` before anything is in
    it: the namespaces, counters and clock rows it wrote are met, not
    refused, and the store then holds every row of the export, as exported."""
    db, lines = source
    dump = tmp_path / "dump.jsonl"
    dump.write_text(cli(db, "export", cwd=tmp_path).out, encoding="utf-8")
    target = fresh_store("target.db")
    for ns in namespaces:
        cli(target, "compact", "--ns", ns, cwd=tmp_path)
    out = cli(target, "import", str(dump), "--json", cwd=tmp_path).json
    assert out["verified"] is True and out["rows"]["passages"] > 0
    after = body(export_of(target))
    assert set(body(lines)[1:]) <= set(after[1:])  # every row, with the export's values
    extra = [line for line in after[1:] if line not in set(body(lines))]
    other = json.dumps({"table": "namespaces", "row": {"name": "other"}})[:-3]
    own = ('"table": "counters"', '"table": "clock"')  # counts of its work, marks of its clocks
    assert all(any(t in line for t in own) or line.startswith(other) for line in extra), extra
    assert any(line.startswith(other) for line in extra) == ("other" in namespaces)
    with Memory.open(target) as memory:
        assert memory.search("raft leader").results
        assert memory.namespaces() == sorted({"default", *namespaces})
