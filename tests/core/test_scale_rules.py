"""The rules that keep compaction fast as a store grows (issue: Performance).

Shingles are computed once, when a passage is remembered, and compaction only
reads them back; the entity-centred scanners (page, stale, conflict, merge)
are SQL over indexes that hands Python the rows that matter, never every row
of a big table to filter in a loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from memors_core import Memory
from memors_core.domain import text
from memors_core.domain.ids import parse_address
from memors_core.wire import to_json
from store_checks import value_of

COPY = (
    "The deployment guide tells operators to drain every node of the cluster before "
    "they upgrade its software, then to bring the nodes back one at a time."
)


def _refuse(*_args, **_kwargs):
    raise AssertionError("compaction recomputed shingles from passage text")


def test_shingles_are_stored_at_remember_and_compaction_never_recomputes_them(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
):
    first = memory.remember(COPY, uri="guide-a")
    memory.remember(COPY, uri="guide-b")
    ident = parse_address(first.passages[0])[1]
    stored = value_of(memory, "SELECT shingles FROM passages WHERE id = ?", (ident,))
    assert stored and stored == text.pack_shingles(text.shingle_hashes(COPY))

    with monkeypatch.context() as patch:  # a full scan reads the stored hashes
        patch.setattr(text, "shingle_hashes", _refuse)
        patch.setattr(text, "words", _refuse)
        full = to_json(memory.compact(kinds=["duplicate"], full=True))
    assert [len(i["payload"]["passages"]) for i in full["items"]] == [2]

    memory.remember(COPY, uri="guide-c")  # remember shingles (unpatched) ...
    with monkeypatch.context() as patch:  # ... and the incremental scan only reads them
        patch.setattr(text, "shingle_hashes", _refuse)
        patch.setattr(text, "words", _refuse)
        incremental = to_json(memory.compact(kinds=["duplicate"]))
    assert [len(i["payload"]["passages"]) for i in incremental["items"]] == [3]


@contextmanager
def rows_read(memory: Memory) -> Iterator[list[int]]:
    """Count the rows SQLite hands to Python while the block runs."""
    seen = [0]

    def count(_cursor, row):
        seen[0] += 1
        return row

    memory.store.conn.row_trace = count
    try:
        yield seen
    finally:
        memory.store.conn.row_trace = None


ENTITY_KINDS = ["page", "stale", "conflict", "merge"]


@pytest.mark.sqlite_only("counts the rows read with apsw's row trace")
def test_entity_scanners_read_only_the_rows_that_matter(memory: Memory):
    """3,000 passages mentioning 300 entities once each, 300 facts that agree,
    and a handful of rows that do need work: a full scan of the four
    entity-centred kinds reads about what it reports, not the store."""
    docs = [
        {
            "text": "\n\n".join(
                f"[[Service {d * 10 + p}]] writes its log record {d}-{p} to the local disk "
                f"before it answers request {p} of batch {d}."
                for p in range(10)
            ),
            "uri": f"ops-{d}",
        }
        for d in range(30)
    ]
    docs += [
        {"text": f"Plain note {n} about nothing in particular, number {n}."} for n in range(2700)
    ]
    memory.remember_many(docs)
    for n in range(300):
        memory.record_fact(f"Service {n}", "owner", f"team {n % 7}")
    # what does need work: a page (3 passages), a conflict, a merge
    memory.remember_many(
        [{"text": f"[[Raft]] elects a leader in term {n}.", "uri": f"raft-{n}"} for n in range(3)]
    )
    memory.record_fact("Service 5", "owner", "team 99")
    memory.remember("[[service-7]] is the same service spelled another way.", uri="alias")
    assert value_of(memory, "SELECT COUNT(*) FROM passages") > 3000

    with rows_read(memory) as seen:
        result = to_json(memory.compact(kinds=ENTITY_KINDS, full=True, limit=0))
    kinds = {i.kind for i in memory.items(status="open").items}
    assert kinds == {"page", "conflict", "merge"}, kinds
    assert result["open"] == 3
    # Payloads of three items plus the bookkeeping: a few dozen rows, where a
    # loop over entities, mentions, facts or passages would read thousands.
    assert seen[0] < 300, seen[0]

    # Incremental, after a change to one entity: fewer still.
    memory.record_fact("Service 42", "owner", "team 98")
    with rows_read(memory) as seen:
        memory.compact(kinds=ENTITY_KINDS, limit=0)
    assert len(memory.items(kind="conflict", status="open").items) == 2
    assert seen[0] < 100, seen[0]
