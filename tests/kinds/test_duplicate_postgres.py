"""The duplicate kind on a PostgreSQL store: its prefix index
(:mod:`memors_kinds.duplicate.postgres_index`) finds what the exact join
finds, scan after scan; ``keep`` and forgetting behave as on SQLite; the
kind's tables are created by its migrations and recorded in kind_schema.

Skipped, with the reason, when no test server answers
(:func:`memors_core.testing.postgres.available`); failed instead when
MEMORS_REQUIRE_POSTGRES is set. Purge and search on PostgreSQL are not
used here (being written elsewhere): erasing a purged passage is tested on
the index itself.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from fractions import Fraction
from types import SimpleNamespace

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core import Memory
from memors_core.domain.ids import address
from memors_core.testing import postgres
from memors_core.wire import to_json
from memors_kinds.duplicate import THRESHOLD, clusters, postgres_index, sqlite_index
from memors_kinds.duplicate import _rounded as four  # as a payload shows a Jaccard
from memors_kinds.duplicate.join import prefix_piece

pytestmark = pytest.mark.postgres_run("the duplicate kind on PostgreSQL stores of its own")

LICENCE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy "
    "of this software to deal in the software without restriction."
)
NEAR = LICENCE.replace("without restriction.", "without any restriction.")


def _require_server() -> None:
    postgres.require_server()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, migrated store database, dropped afterwards."""
    _require_server()
    url = postgres.new_database()
    try:
        yield url
    finally:
        postgres.drop_database(url)


@pytest.fixture
def memory(pg_url: str) -> Iterator[Memory]:
    m = Memory.open(pg_url)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture(scope="module")
def index_store() -> Iterator[object]:
    """One store for the index's own tests; each works in a transaction it rolls back."""
    _require_server()
    url = postgres.new_database()
    m = Memory.open(url)
    try:
        yield m.store
    finally:
        m.close()
        postgres.drop_database(url)


class RolledBack(Exception):
    pass


def duplicates(memory: Memory) -> list[dict]:
    return to_json(memory.compact(kinds=["duplicate"]))["items"]


def open_clusters(memory: Memory) -> dict[frozenset[str], dict]:
    items = to_json(memory.items(kind="duplicate", status="open"))["items"]
    return {frozenset(p["address"] for p in i["payload"]["passages"]): i for i in items}


def query(memory: Memory, sql: str) -> list[tuple]:
    """Rows of one statement of PostgreSQL's own SQL, in a read transaction."""
    with memory.store.read() as tx:
        return tx.native("postgres").execute(sql).fetchall()


def status(memory: Memory, addr: str) -> str:
    return to_json(memory.get(addr))["status"]


@pytest.fixture
def trio(memory):
    a = memory.remember(f"{LICENCE}\n\nThe alpha tool sorts files.", uri="alpha").passages
    b = memory.remember(f"{LICENCE}\n\nThe beta tool counts lines.", uri="beta").passages
    c = memory.remember(f"{NEAR}\n\nThe gamma tool prints dates.", uri="gamma").passages
    return memory, [a[0], b[0], c[0]]


# --- a scan -----------------------------------------------------------------------------


def test_near_duplicates_across_documents_are_one_item(trio):
    memory, members = trio
    notice = "This notice must be kept with every copy of the release notes, in full."
    memory.remember(f"{notice}\n\nIntro.\n\n{notice}", uri="one-document-twice")
    (item,) = duplicates(memory)
    payload = item["payload"]
    assert sorted(p["address"] for p in payload["passages"]) == sorted(members)
    assert payload["pair_count"] == 3 == len(payload["pairs"])
    assert 0.75 <= payload["jaccard"] < 1.0
    for p in payload["passages"]:
        assert p["best_match"] in members and p["best_match"] != p["address"]
    assert duplicates(memory) == [item]  # nothing changed: the same item


def test_a_late_copy_joins_its_cluster_by_an_incremental_scan(trio):
    memory, members = trio
    duplicates(memory)
    late = memory.remember(LICENCE, uri="late").passages[0]
    (item,) = duplicates(memory)
    assert sorted(p["address"] for p in item["payload"]["passages"]) == sorted([*members, late])
    assert item["payload"]["pair_count"] == 6


# --- incremental scans equal a full rescan ---------------------------------------------------


def edited(rng: random.Random, words: list[str], vocab: list[str]) -> list[str]:
    out = list(words)
    for _ in range(rng.randint(0, 4)):
        at = rng.randrange(len(out))
        op = rng.choice(["sub", "ins", "del"])
        if op == "sub":
            out[at] = rng.choice(vocab)
        elif op == "ins":
            out.insert(at, rng.choice(vocab))
        elif len(out) > 1:
            del out[at]
    return out


def batches(seed: int) -> list[list[list[str]]]:
    """Four batches of documents: originals first, their edited copies (Jaccard
    all around 0.75) and exact copies in later batches, unrelated passages
    throughout."""
    rng = random.Random(seed)
    vocab = [f"t{i}" for i in range(40)]
    bases = [[rng.choice(vocab) for _ in range(rng.randint(12, 40))] for _ in range(8)]
    out: list[list[list[str]]] = []
    for n in range(4):
        docs = []
        for d in range(5):
            passages = [[f"u{n}x{d}x{k}" for k in range(rng.randint(4, 12))]]
            base = rng.choice(bases)
            passages.append(base if d == 0 or rng.random() < 0.3 else edited(rng, base, vocab))
            docs.append([" ".join(p) for p in passages])
        out.append(docs)
    return out


def expected_clusters(memory: Memory) -> dict[frozenset[str], tuple[int, float]]:
    """What an exact join over every live passage finds (the full scan's join)."""
    with memory.store.read() as tx:
        rows = [(r.id, r.document, r.shingles) for r in tx.passages.live_shingles("default")]
    found = clusters([r for r in rows if r[2]])
    return {
        frozenset(address("passage", m) for m in c["members"]): (
            c["pair_count"],
            four(c["jaccard"]),  # as a payload shows it
        )
        for c in found
    }


@pytest.mark.parametrize("copy_rows", [0, 10**9], ids=["copy", "insert"])
@pytest.mark.parametrize("fold_ratio", [0, 10**9], ids=["recent-index-kept", "folded-each-time"])
def test_incremental_scans_equal_a_full_rescan(memory, monkeypatch, fold_ratio, copy_rows):
    """Batches of documents, each compacted incrementally, some passages forgotten
    in between: the open items always match the exact join over every live
    passage, and a full rescan at the end changes none of them."""
    monkeypatch.setattr(postgres_index, "FOLD_RATIO", fold_ratio)
    monkeypatch.setattr(postgres_index, "COPY_ROWS", copy_rows)
    rng = random.Random(5)
    doc = 0
    for n, batch in enumerate(batches(seed=11)):
        new: set[str] = set()
        for texts in batch:
            doc += 1
            new.update(memory.remember("\n\n".join(texts), uri=f"doc-{doc}").passages)
        if n == 2:  # forget a member of each of two clusters
            for members in list(open_clusters(memory))[:2]:
                memory.forget(sorted(members)[rng.randrange(len(members))])
        duplicates(memory)
        got = open_clusters(memory)
        want = expected_clusters(memory)
        assert set(got) == set(want), n
        for members, (pair_count, jaccard) in want.items():
            payload = got[members]["payload"]
            assert (payload["pair_count"], payload["jaccard"]) == (pair_count, jaccard)
        if n:  # an incremental scan: the new passages found pairs
            assert any(members & new for members in got), n
    recent = query(memory, "SELECT COUNT(*) FROM dup_recent")[0][0]
    assert (recent == 0) == bool(fold_ratio)
    items = {i["id"]: i["payload"] for i in to_json(memory.items(status="open"))["items"]}
    memory.compact(kinds=["duplicate"], full=True)
    again = {i["id"]: i["payload"] for i in to_json(memory.items(status="open"))["items"]}
    assert again == items


# --- keep and forget ------------------------------------------------------------------------


def test_keep_forgets_the_near_duplicates_of_the_kept_member(trio):
    memory, members = trio
    (item,) = duplicates(memory)
    report = to_json(memory.submit(item["id"], keep=members[1]))
    assert report["kept"] == [members[1]] and report["left"] == []
    assert sorted(report["forgotten"]) == sorted([members[0], members[2]])
    assert [status(memory, p) for p in members] == ["forgotten", "live", "forgotten"]
    assert duplicates(memory) == []


BASE = [f"w{i}" for i in range(40)]


def variant(changed: dict[int, str]) -> str:
    return " ".join(changed.get(i, w) for i, w in enumerate(BASE)) + "."


def test_keeping_one_end_of_a_chain_forgets_only_its_near_duplicates(memory):
    # A~B~C: A and B differ in the first 3 words, C in the last 3; A and C are unlike.
    texts = {
        "A": variant({0: "a0", 1: "a1", 2: "a2"}),
        "B": variant({}),
        "C": variant({37: "c37", 38: "c38", 39: "c39"}),
    }
    addr = {n: memory.remember(t, uri=f"doc-{n}").passages[0] for n, t in texts.items()}
    (item,) = duplicates(memory)
    report = to_json(memory.submit(item["id"], keep=addr["A"]))
    assert report["forgotten"] == [addr["B"]] and report["left"] == [addr["C"]]
    assert {n: status(memory, a) for n, a in addr.items()} == {
        "A": "live",
        "B": "forgotten",
        "C": "live",
    }
    assert duplicates(memory) == []  # A and C are not near duplicates


def test_a_forgotten_passage_leaves_its_cluster(trio):
    memory, members = trio
    duplicates(memory)
    memory.forget(members[2])
    (fresh,) = duplicates(memory)  # the item, refreshed: its cluster shrank
    assert sorted(p["address"] for p in fresh["payload"]["passages"]) == sorted(members[:2])
    memory.forget(members[0])
    assert duplicates(memory) == []
    # The one left live is still indexed: a new copy of it is found.
    copy = memory.remember(f"{LICENCE}\n\nThe delta tool.", uri="delta").passages[0]
    (again,) = duplicates(memory)
    assert sorted(p["address"] for p in again["payload"]["passages"]) == sorted([members[1], copy])


# --- the kind's migrations ------------------------------------------------------------------


def test_the_index_is_created_by_the_kinds_migrations_and_recorded_once(pg_url):
    with Memory.open(pg_url) as memory:
        for n in range(3):
            memory.remember(LICENCE, uri=f"licence-{n}")
        assert [len(i["payload"]["passages"]) for i in duplicates(memory)] == [3]
        ((version, applied_at),) = query(
            memory, "SELECT version, applied_at FROM kind_schema WHERE kind = 'duplicate'"
        )
        assert version == len(postgres_index.MIGRATIONS)
        tables = {
            r[0]
            for r in query(
                memory,
                "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'dup%'",
            )
        }
        assert tables == {
            "dup_prefix",
            "dup_recent",
            "dup_folded",
            "dup_members",
            "dup_indexed",
            "dup_settled",
        }
        collations = query(
            memory,
            "SELECT DISTINCT collation_name FROM information_schema.columns "
            "WHERE table_name LIKE 'dup%' AND data_type = 'text'",
        )
        assert collations == [("C",)]  # byte order, as SQLite's
    # Opened again: nothing runs again, and the index is where the last scan left it.
    with Memory.open(pg_url) as memory:
        assert query(memory, "SELECT namespace FROM dup_indexed") == [("default",)]
        memory.remember(LICENCE, uri="late")
        assert [len(i["payload"]["passages"]) for i in duplicates(memory)] == [4]
        assert query(
            memory, "SELECT version, applied_at FROM kind_schema WHERE kind = 'duplicate'"
        ) == [(version, applied_at)]


# --- the index itself -------------------------------------------------------------------------

token_sets = st.lists(
    st.frozensets(st.integers(0, 14), min_size=1, max_size=12), min_size=2, max_size=12
)


def blob(tokens: frozenset[int]) -> bytes:
    return b"".join(t.to_bytes(8, "little") for t in sorted(tokens))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token_sets, st.lists(st.booleans(), min_size=12, max_size=12), st.sampled_from([1, 10**6]))
def test_the_batch_probe_finds_what_the_sqlite_probe_finds(index_store, sets, recent, tokens):
    """On raw token sets from a tiny universe (pairs sit on the size and
    position bounds), probed all in one batch (or one token per query): every
    pair with Jaccard >= 3/4 is a candidate, and the candidates are exactly
    those of the SQLite probe, whichever table each set was indexed in."""
    lite = apsw.Connection(":memory:")
    for step in sqlite_index.MIGRATIONS:
        lite.execute(step)
    # (adding and probing use the engine's own connection only)
    reference = sqlite_index.SqlitePrefixIndex(SimpleNamespace(conn=lite))
    prefixes = [(i + 1, *prefix_piece(blob(s))) for i, s in enumerate(sets)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postgres_index, "PROBE_TOKENS", tokens)
        try:
            with index_store.write() as tx:
                index = postgres_index.PostgresPrefixIndex(tx.native("sql"))
                for prefix, late in zip(prefixes, recent, strict=False):
                    index.add([prefix], recent=late)
                    reference.add([prefix], recent=late)
                found = index.candidates(prefixes)
                raise RolledBack
        except RolledBack:
            pass
    assert found == reference.candidates(prefixes)
    for i, s in enumerate(sets):
        for j, other in enumerate(sets):
            if j != i and Fraction(len(s & other), len(s | other)) >= THRESHOLD:
                assert j + 1 in found.get(i + 1, []), (sorted(s), sorted(other))


def test_passages_indexed_twice_are_kept_once(index_store, monkeypatch):
    """A full scan's batch goes by COPY, which cannot skip a row already
    there: the batch is then inserted skipping it, and the scan goes on."""
    monkeypatch.setattr(postgres_index, "COPY_ROWS", 1)
    rng = random.Random(3)
    sets = [frozenset(rng.sample(range(1000), 40)) for _ in range(50)]
    prefixes = [(i + 1, *prefix_piece(blob(s))) for i, s in enumerate(sets)]
    try:
        with index_store.write() as tx:
            index = postgres_index.PostgresPrefixIndex(tx.native("sql"))
            index.add(prefixes[:30], recent=False)
            first = tx.native("postgres").execute("SELECT COUNT(*) FROM dup_prefix").fetchone()
            index.add(prefixes, recent=False)  # the first 30 again
            total = tx.native("postgres").execute("SELECT COUNT(*) FROM dup_prefix").fetchone()
            raise RolledBack
    except RolledBack:
        pass
    per_passage = [len(p[2]) // 8 for p in prefixes]
    assert first == (sum(per_passage[:30]),) and total == (sum(per_passage),)


def test_erase_removes_a_passage_from_both_prefix_tables_and_its_cluster(index_store):
    """What purge calls: the passage's prefix rows (hashes of its words) go,
    wherever they were indexed, and it leaves its remembered cluster."""
    copy = frozenset(range(20))
    prefixes = [(seq, *prefix_piece(blob(copy))) for seq in (1, 2, 3)]
    try:
        with index_store.write() as tx:
            conn = tx.native("postgres")
            index = postgres_index.PostgresPrefixIndex(tx.native("sql"))
            index.add(prefixes[:2], recent=False)
            index.add(prefixes[2:], recent=True)
            index.remember_clusters("ns", [["p1", "p2", "p3"]])
            assert index.candidates(prefixes[:1]) == {1: [2, 3]}
            index.erase([(2, "p2"), (3, "p3")])
            assert index.candidates(prefixes[:1]) == {}
            left = [
                conn.execute(f"SELECT COUNT(*) FROM {t} WHERE passage <> 1").fetchone()[0]
                for t in postgres_index.PREFIX_TABLES
            ]
            assert left == [0, 0]
            assert index.clusters_holding("ns", {"p1"}) == ({"p1"}, {"p1"})
            raise RolledBack
    except RolledBack:
        pass


# --- round trips ------------------------------------------------------------------------------


def test_an_incremental_scan_adds_and_probes_in_one_message_and_notes_its_clock_with_the_fold(
    trio, monkeypatch
):
    """Over a network every statement waits for the server: an incremental
    scan sends its new passages' prefix rows with the probe that finds
    their partners (the probe, after them, finds them too), and notes how
    far the namespace is indexed with the fold's look-up."""
    memory, members = trio
    duplicates(memory)
    sent = postgres.messages_sent(monkeypatch)
    late = memory.remember(LICENCE, uri="late").passages[0]
    sent.clear()
    memory.compact(kinds=["duplicate"])
    added = [s for s in sent if "INSERT INTO dup_recent" in s]
    assert len(added) == 1 and "WITH t(tokens)" in added[0], sent
    noted = [s for s in sent if "INSERT INTO dup_indexed" in s]
    assert len(noted) == 1 and "FROM dup_folded" in noted[0], sent
    (item,) = duplicates(memory)  # the late copy found its partners all the same
    assert sorted(p["address"] for p in item["payload"]["passages"]) == sorted([*members, late])
