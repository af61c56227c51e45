"""The duplicate scan is exact: checked against brute-force all-pairs Jaccard.

Corpora are drawn from a tiny vocabulary so that near duplicates (and exact
copies, and passages under three words) actually occur, and each document
holds several passages so that same-document pairs are exercised too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core import Memory
from memors_core.domain.text import pack_shingles, shingle_hashes, words
from memors_core.testing import temporary_memory, test_engine
from memors_core.wire import to_json
from memors_kinds import duplicate
from memors_kinds.duplicate import THRESHOLD, clusters, similar_pairs, sqlite_index
from memors_kinds.duplicate.join import prefix_piece
from store_checks import rows_of, value_of

VOCAB = ["red", "green", "blue", "gold"]

passage_words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=7)
# A corpus: documents, each a list of passages (lists of words).
corpora = st.lists(st.lists(passage_words, min_size=1, max_size=3), min_size=1, max_size=6)


def trigrams(text: str) -> frozenset[tuple[str, str, str]]:
    ws = words(text)
    return frozenset(zip(ws, ws[1:], ws[2:], strict=False))


def four(value: Fraction | float) -> float:
    """A Jaccard as a payload shows it: the exact ratio cut to four decimals."""
    exact = Fraction(value).limit_denominator(10**6)
    return int(exact * 10_000) / 10_000


def brute_force(records: list[tuple[str, str, str]]) -> dict[frozenset[str], dict]:
    """Every pair from different documents, Jaccard in exact fractions;
    clusters are the connected components of the qualifying pairs."""
    grams = {ident: trigrams(text) for ident, _doc, text in records}
    docs = {ident: doc for ident, doc, _text in records}
    pairs = []
    for a, b in combinations(sorted(grams), 2):
        if docs[a] == docs[b] or not grams[a] or not grams[b]:
            continue
        jac = Fraction(len(grams[a] & grams[b]), len(grams[a] | grams[b]))
        if jac >= Fraction(3, 4):
            pairs.append((a, b, jac))
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b, _j in pairs:
        parent[find(a)] = find(b)
    comps: dict[str, list] = defaultdict(list)
    for a, b, jac in pairs:
        comps[find(a)].append((a, b, jac))
    out = {}
    for es in comps.values():
        members = frozenset(x for a, b, _j in es for x in (a, b))
        out[members] = {
            "jaccard": min(j for _a, _b, j in es),
            "pairs": sorted((a, b, float(j)) for a, b, j in es),
            "pair_count": len(es),
        }
    return out


def records_of(corpus: list[list[list[str]]]) -> list[tuple[str, str, str]]:
    out = []
    for d, doc in enumerate(corpus):
        for p, ws in enumerate(doc):
            out.append((f"p{d:02d}{p:02d}", f"d{d}", " ".join(ws)))
    return out


@settings(max_examples=400, deadline=None)
@given(corpora)
def test_clusters_match_brute_force_all_pairs(corpus):
    records = records_of(corpus)
    found = clusters([(i, d, pack_shingles(shingle_hashes(t))) for i, d, t in records])
    expected = brute_force(records)
    got = {frozenset(c["members"]): c for c in found}
    assert set(got) == set(expected)  # same components, one per cluster
    for members, want in expected.items():
        c = got[members]
        assert c["members"] == sorted(members)
        assert c["pair_count"] == want["pair_count"]
        assert Fraction(c["jaccard"]).limit_denominator(1000) == want["jaccard"]
        assert sorted(c["pairs"]) == want["pairs"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 6), min_size=1, max_size=6), max_size=12, unique=True))
def test_similar_pairs_is_exact_on_token_sets(sets):
    ordered = [sorted(s) for s in sets]
    got = {(i, j): (inter, union) for i, j, inter, union in similar_pairs(ordered)}
    want = {}
    for i, j in combinations(range(len(sets)), 2):
        inter, union = len(sets[i] & sets[j]), len(sets[i] | sets[j])
        if Fraction(inter, union) >= THRESHOLD:
            want[(i, j)] = (inter, union)
    assert got == want


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(corpora)
def test_duplicate_items_match_brute_force(corpus):
    """Through a real store: one open item per cluster, with the right payload."""
    with temporary_memory() as memory:
        records = []
        for d, doc in enumerate(corpus):
            r = memory.remember("\n\n".join(" ".join(ws) for ws in doc), uri=f"doc-{d}")
            texts = [memory.get(p).text for p in r.passages]
            records.extend((p, r.document, t) for p, t in zip(r.passages, texts, strict=True))
        result = to_json(memory.compact(kinds=["duplicate"]))
        expected = brute_force(records)
        assert result["open"] == len(expected) == result["created"]
        got = {
            frozenset(p["address"] for p in i["payload"]["passages"]): i for i in result["items"]
        }
        assert set(got) == set(expected)
        for members, want in expected.items():
            payload = got[members]["payload"]
            assert payload["pair_count"] == want["pair_count"]
            assert payload["jaccard"] == four(want["jaccard"])
            listed = sorted((p["a"], p["b"], p["jaccard"]) for p in payload["pairs"])
            assert listed == [(a, b, four(j)) for a, b, j in want["pairs"]]
            best: dict[str, float] = {}  # each member's best Jaccard to another document's
            for a, b, j in want["pairs"]:
                for x in (a, b):
                    best[x] = max(best.get(x, 0.0), j)
            for p in payload["passages"]:
                shown = {"text"} if "text" in p else {"same_text_as"}  # a copy's text: once
                assert set(p) == {"address", "document", "best_jaccard", "best_match", *shown}
                assert p["best_jaccard"] == four(best[p["address"]])
                assert p["best_match"] in members


def _distinct_words(n: int) -> list[str]:
    return [f"w{i}x" for i in range(n)]


def test_threshold_is_exact_at_three_quarters(memory):
    # 100 shingles vs 75 of them: Jaccard exactly 3/4 -> a duplicate.
    ws = _distinct_words(102)
    memory.remember(" ".join(ws), uri="a")
    memory.remember(" ".join(ws[:77]), uri="b")
    # 99 shingles vs 74 of them: 74/99 = 0.7474… -> not a duplicate.
    vs = [f"v{i}y" for i in range(101)]
    memory.remember(" ".join(vs), uri="c")
    memory.remember(" ".join(vs[:76]), uri="d")
    result = to_json(memory.compact(kinds=["duplicate"]))
    assert result["open"] == 1
    payload = result["items"][0]["payload"]
    assert payload["jaccard"] == 0.75
    assert payload["pair_count"] == 1
    assert {p["text"].split()[0] for p in payload["passages"]} == {"w0x"}


def test_exact_copies_in_many_documents_are_one_cluster(memory):
    licence = "Permission is hereby granted free of charge to any person obtaining a copy"
    for n in range(30):
        memory.remember(f"{licence}\n\nDocument number {n} has its own words here.", uri=f"m{n}")
    result = to_json(memory.compact(kinds=["duplicate"]))
    assert result["open"] == 1
    payload = result["items"][0]["payload"]
    assert len(payload["passages"]) == 30
    assert payload["pair_count"] == 30 * 29 // 2
    assert len(payload["pairs"]) == 30 * 29 // 2
    assert payload["jaccard"] == 1.0


def test_pairs_listed_are_capped_at_1000_but_counted_in_full(memory):
    text = "the same paragraph appears in every single manual page installed"
    for n in range(50):
        memory.remember(text, uri=f"man{n}")
    payload = to_json(memory.compact(kinds=["duplicate"])).get("items")[0]["payload"]
    assert payload["pair_count"] == 50 * 49 // 2
    assert len(payload["pairs"]) == 1000


def test_same_document_copies_and_short_passages_never_count(memory):
    memory.remember("one two three four five\n\none two three four five", uri="same")
    memory.remember("short one\n\nshort one", uri="x")
    memory.remember("short one", uri="y")
    result = to_json(memory.compact(kinds=["duplicate"]))
    assert result["open"] == 0


def assert_open_items_match(memory, records: list[tuple[str, str, str]]) -> None:
    """Compact the duplicate kind (incrementally, after the first time): one
    open item per brute-force cluster, with its pair count and lowest Jaccard."""
    result = to_json(memory.compact(kinds=["duplicate"]))
    expected = brute_force(records)
    got = {
        frozenset(p["address"] for p in i["payload"]["passages"]): i["payload"]
        for i in result["items"]
    }
    assert set(got) == set(expected)
    for members, want in expected.items():
        assert got[members]["pair_count"] == want["pair_count"]
        assert got[members]["jaccard"] == four(want["jaccard"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(st.tuples(corpora, st.lists(st.integers(0, 50), max_size=2)), min_size=2, max_size=4)
)
def test_incremental_scans_find_what_a_full_scan_would(batches):
    """Documents arrive in batches with a compact after each, and some passages
    are forgotten in between: the open items always match brute force."""
    with temporary_memory() as memory:
        records: dict[str, tuple[str, str, str]] = {}
        n = 0
        for corpus, forget in batches:
            for doc in corpus:
                n += 1
                r = memory.remember("\n\n".join(" ".join(ws) for ws in doc), uri=f"doc-{n}")
                for p in r.passages:
                    records[p] = (p, r.document, memory.get(p).text)
            for i in forget[: len(records)]:
                victim = sorted(records)[i % len(records)]
                memory.forget(victim)
                del records[victim]
            assert_open_items_match(memory, list(records.values()))


@st.composite
def mutated_corpus(draw) -> list[list[list[str]]]:
    """Longer passages and their edited copies (a few words substituted,
    inserted or deleted), so Jaccard values land all around 0.75."""
    vocab = [f"t{i}" for i in range(30)]
    bases = draw(st.lists(st.lists(st.sampled_from(vocab), min_size=8, max_size=40), max_size=3))
    passages = []
    for base in bases:
        passages.append(base)
        for _ in range(draw(st.integers(1, 4))):
            words = list(base)
            for _ in range(draw(st.integers(0, 4))):
                at = draw(st.integers(0, len(words) - 1))
                op = draw(st.sampled_from(["sub", "ins", "del"]))
                if op == "sub":
                    words[at] = draw(st.sampled_from(vocab))
                elif op == "ins":
                    words.insert(at, draw(st.sampled_from(vocab)))
                elif len(words) > 1:
                    del words[at]
            passages.append(words)
    docs = draw(st.lists(st.integers(0, 3), min_size=len(passages), max_size=len(passages)))
    corpus: list[list[list[str]]] = [[] for _ in range(4)]
    for words, d in zip(passages, docs, strict=True):
        corpus[d].append(words)
    return [doc for doc in corpus if doc]


@settings(max_examples=300, deadline=None)
@given(mutated_corpus())
def test_clusters_match_brute_force_on_longer_edited_copies(corpus):
    test_clusters_match_brute_force_all_pairs.hypothesis.inner_test(corpus)


def index_module():
    """The duplicate kind's prefix index for this run's engine."""
    if test_engine() == "postgres":
        from memors_kinds.duplicate import postgres_index

        return postgres_index
    return sqlite_index


@pytest.mark.parametrize("fold_ratio", [0, 10**9], ids=["recent-index-kept", "folded-each-time"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(mutated_corpus(), min_size=2, max_size=3))
def test_incremental_scans_on_edited_copies_match_brute_force(fold_ratio, batches):
    """Edited copies (Jaccard all around 0.75, sizes a few tokens apart) arrive
    in later batches than their originals: the prefix index's size and
    position bounds must still find every qualifying pair, whether the new
    passages sit in the small recent index or were folded into the main one."""
    with pytest.MonkeyPatch.context() as patch, temporary_memory() as memory:
        patch.setattr(index_module(), "FOLD_RATIO", fold_ratio)
        records: list[tuple[str, str, str]] = []
        n = 0
        for corpus in batches:
            for doc in corpus:
                n += 1
                r = memory.remember("\n\n".join(" ".join(ws) for ws in doc), uri=f"doc-{n}")
                records.extend((p, r.document, memory.get(p).text) for p in r.passages)
            assert_open_items_match(memory, records)
        recent = value_of(memory, "SELECT COUNT(*) FROM dup_recent")
        if fold_ratio:
            assert recent == 0
        elif any(batches[1:]):
            assert recent > 0


def test_the_recent_index_is_folded_once_it_reaches_an_eighth(memory):
    """Incremental scans index into dup_recent; when the passages since the last
    fold reach 1/8 of those before it, the recent rows move to dup_prefix."""
    text = "paragraph {n} of the handbook explains how the {w} service restarts after a crash"
    for n in range(80):
        memory.remember(text.format(n=n, w=f"w{n}"), uri=f"base-{n}")
    memory.compact(kinds=["duplicate"])  # full: everything in dup_prefix
    main = value_of(memory, "SELECT COUNT(*) FROM dup_prefix")
    assert main > 0 and value_of(memory, "SELECT COUNT(*) FROM dup_recent") == 0
    for n in range(80, 91):  # 11 more passages: 11 * 8 > 80, and 10 * 8 is not
        memory.remember(text.format(n=n, w=f"w{n}"), uri=f"base-{n}")
        memory.compact(kinds=["duplicate"])
        recent = value_of(memory, "SELECT COUNT(*) FROM dup_recent")
        assert (recent == 0) == (n == 90), n
    assert value_of(memory, "SELECT COUNT(*) FROM dup_prefix") > main
    # a copy of a passage that sits in either index is still found
    memory.remember(text.format(n=3, w="w3"), uri="copy-of-3")
    memory.remember(text.format(n=85, w="w85"), uri="copy-of-85")
    result = to_json(memory.compact(kinds=["duplicate"]))
    assert result["open"] == 2


@pytest.mark.sqlite_only("an older SQLite layout of the index, which PostgreSQL never had")
def test_an_index_of_the_older_layout_is_rebuilt(fresh_store, tmp_path: Path):
    """A store compacted by a release that kept no migration record and keyed
    its prefix index by (token, passage): opening it runs the kind's first
    migration, which starts the index afresh, and the next compact rescans
    in full."""
    db = fresh_store("memors.db")
    text = "the deployment guide says to drain every node before the upgrade of {x}"
    with Memory.open(db) as memory:
        for n in range(6):
            memory.remember(text.format(x="the cluster"), uri=f"d{n}")
        memory.compact(kinds=["duplicate"])
        with memory.store.write():
            memory.store.conn.execute(
                "DROP TABLE dup_prefix; CREATE TABLE dup_prefix(token INTEGER NOT NULL, "
                "passage INTEGER NOT NULL, size INTEGER NOT NULL, pos INTEGER NOT NULL, "
                "PRIMARY KEY (token, passage)) WITHOUT ROWID; "
                "DELETE FROM kind_schema WHERE kind = 'duplicate'"
            )
    with Memory.open(db) as memory:
        memory.remember(text.format(x="the cluster"), uri="late")
        result = to_json(memory.compact(kinds=["duplicate"]))
        assert result["open"] == 1
        assert len(result["items"][0]["payload"]["passages"]) == 7
        pk = rows_of(
            memory, "SELECT name FROM pragma_table_info('dup_prefix') WHERE pk > 0 ORDER BY pk"
        )
        assert [r[0] for r in pk] == ["token", "size", "passage"]


def test_purge_erases_a_passage_from_the_recent_index(memory):
    text = "the incident report lists every alert that fired during the outage of {x}"
    for n in range(20):
        memory.remember(text.format(x=f"system {n}"), uri=f"r{n}")
    memory.compact(kinds=["duplicate"])
    late = memory.remember(text.format(x="system 4"), uri="late")
    memory.compact(kinds=["duplicate"])  # incremental: the late passage goes to dup_recent
    rowid = value_of(
        memory, "SELECT rowid FROM passages WHERE id = ?", (late.passages[0].split("/")[-1],)
    )
    assert value_of(memory, "SELECT COUNT(*) FROM dup_recent WHERE passage = ?", (rowid,))
    memory.purge(late.document)
    for table in ("dup_prefix", "dup_recent"):
        assert not value_of(memory, f"SELECT COUNT(*) FROM {table} WHERE passage = ?", (rowid,))


def test_purge_erases_a_passage_from_what_a_decision_settled(memory):
    text = "the incident report lists every alert that fired during the outage of {x}"
    docs = [memory.remember(text.format(x="system 4"), uri=f"s{n}") for n in range(3)]
    (item,) = memory.compact(kinds=["duplicate"]).items
    members = [p["address"] for p in item.payload["passages"]]
    memory.submit(item.id, keep=members[:2])  # two kept: the cluster is settled
    ident = docs[0].passages[0].split("/")[-1]
    count = "SELECT COUNT(*) FROM dup_settled WHERE passage = ?"
    assert value_of(memory, count, (ident,)) == 1
    memory.purge(docs[0].document)
    assert value_of(memory, count, (ident,)) == 0


token_sets = st.lists(
    st.frozensets(st.integers(0, 14), min_size=1, max_size=12), min_size=2, max_size=12
)


@settings(max_examples=500, deadline=None)
@given(token_sets, st.lists(st.booleans(), min_size=12, max_size=12))
def test_prefix_probe_finds_every_pair_reaching_the_threshold(sets, recent):
    """The incremental look-up on raw token sets from a tiny universe, so that
    pairs sit exactly on the size and position bounds: every pair with
    Jaccard >= 3/4 is a candidate, whichever table each set was indexed in."""
    conn = apsw.Connection(":memory:")
    for step in sqlite_index.MIGRATIONS:
        conn.execute(step)
    # (adding and probing use the engine's own connection only)
    index = sqlite_index.SqlitePrefixIndex(SimpleNamespace(conn=conn))
    blobs = [b"".join(t.to_bytes(8, "little") for t in sorted(s)) for s in sets]
    for i, blob in enumerate(blobs):
        index.add([(i + 1, *prefix_piece(blob))], recent=recent[i])
    for i, (s, blob) in enumerate(zip(sets, blobs, strict=True)):
        found = set(index.candidates([(i + 1, *prefix_piece(blob))]).get(i + 1, []))
        for j, other in enumerate(sets):
            if j != i and Fraction(len(s & other), len(s | other)) >= THRESHOLD:
                assert j + 1 in found, (sorted(s), sorted(other))


def test_a_passage_that_reuses_a_purged_row_id_is_indexed(memory):
    """SQLite hands a purged last row's id to the next passage: the prefix
    index must not take that passage for one it already holds."""
    memory.remember("the backup job copies every volume to the remote site", uri="backup")
    note = memory.remember("an unrelated note about the office coffee machine", uri="note")
    memory.compact()
    memory.purge(note.document)  # the passage with the highest row id goes
    text = "the release train leaves every second tuesday with whatever is merged by noon"
    first = memory.remember(text, uri="release-a")  # ... and this one gets its row id
    assert value_of(
        memory, "SELECT rowid FROM passages WHERE id = ?", (first.passages[0].split("/")[-1],)
    ) == value_of(memory, "SELECT MAX(rowid) FROM passages")
    memory.compact()  # full after a purge; the prefix index must now hold release-a
    memory.remember(text, uri="release-b")
    result = to_json(memory.compact(kinds=["duplicate"]))  # incremental: found by look-up
    assert [len(i["payload"]["passages"]) for i in result["items"]] == [2]


def test_a_forget_that_reuses_a_purged_tombstone_row_id_is_seen(memory):
    """A purge in one namespace frees tombstone row ids another namespace's
    marks have passed: a forget there that gets one is still seen."""
    copy = "every pull request needs one approving review and a green build before merge"
    kept = [memory.remember(copy, uri=f"rules-{n}", namespace="team") for n in range(3)]
    scratch = memory.remember("a scratch note that will be purged", uri="s", namespace="tmp")
    memory.forget(scratch.passages[0], namespace="tmp")  # the highest tombstone row id
    first = to_json(memory.compact(kinds=["duplicate"], namespace="team"))
    assert [len(i["payload"]["passages"]) for i in first["items"]] == [3]
    memory.purge(scratch.document, namespace="tmp")  # its tombstone goes
    memory.forget(kept[2].passages[0], namespace="team")  # and this one gets its row id
    result = to_json(memory.compact(kinds=["duplicate"], namespace="team"))
    assert [len(i["payload"]["passages"]) for i in result["items"]] == [2]


# --- same-document pairs cost nothing (issue 13, point 4) --------------------------------


def look_alike_document(passages: int, seed: int = 13, vocabulary: int = 24) -> str:
    """One document of ``passages`` paragraphs of 30-80 words drawn from a
    tiny vocabulary: every passage shares 3-grams with thousands of others,
    and no pair can qualify, since all are in one document."""
    import random

    rng = random.Random(seed)
    vocab = [f"alpha{i}" for i in range(vocabulary)]
    return "\n\n".join(
        " ".join(rng.choice(vocab) for _ in range(rng.randint(30, 80))) for _ in range(passages)
    )


def _scan_events(stderr: str) -> list[dict]:
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == "duplicates_scanned"]


def test_one_document_of_look_alike_passages_verifies_no_pair(cli):
    # 18,000 such passages took 82 s on a first compact: every pair of the
    # document shared prefix tokens and was verified, though none can count.
    path = cli.tmp / "look-alike.txt"
    path.write_text(look_alike_document(3000))
    assert cli("remember", str(path)).code == 0
    res = cli("compact", "--kinds", "duplicate", "--limit", "0", "--json", "--log-level", "debug")
    assert res.code == 0, res
    assert res.json["created"] == 0
    (event,) = _scan_events(res.err)
    assert event["scan"] == "full" and event["passages"] == 3000
    assert event["candidates"] == 0, event  # it was 71,245 pairs verified

    # The incremental scan of another such document (a new one, after an
    # unrelated first scan) verifies no pair of it either.
    (cli.tmp / "other.txt").write_text(look_alike_document(1000, seed=14, vocabulary=30))
    fresh = cli.tmp / "fresh.db"
    env = {"MEMORS_DB": str(fresh)}
    (cli.tmp / "note.txt").write_text("A short note on quorum reads and leader leases.")
    assert cli("remember", str(cli.tmp / "note.txt"), extra_env=env).code == 0
    assert cli("compact", "--kinds", "duplicate", "--limit", "0", extra_env=env).code == 0
    assert cli("remember", str(cli.tmp / "other.txt"), extra_env=env).code == 0
    res = cli(
        "compact", "--kinds", "duplicate", "--limit", "0", "--log-level", "debug", extra_env=env
    )
    assert res.code == 0, res
    (event,) = _scan_events(res.err)
    assert event["scan"] == "incremental" and event["candidates"] == 0, event


def test_a_copy_in_another_document_is_found_among_look_alikes_cheaply(memory):
    body = look_alike_document(2000)
    memory.remember(body, uri="look-alike")
    copy = body.split("\n\n")[1234]
    memory.remember(copy, uri="elsewhere")
    stats: dict[str, int] = {}
    rows = rows_of(memory, "SELECT id, document, shingles FROM passages ORDER BY rowid")
    found = clusters(rows, stats=stats)
    assert [len(c["members"]) for c in found] == [2]
    # Only pairs with the copy are candidates: at most one per passage, not one per pair.
    assert 0 < stats["candidates"] <= 2000, stats
    result = to_json(memory.compact(kinds=["duplicate"]))
    assert result["created"] == 1


@st.composite
def labelled_sets(draw) -> list[tuple[frozenset[int], int]]:
    """Distinct token sets, each a light edit of one of a few bases (so that
    pairs near and at the threshold occur), each with a document label."""
    universe = st.integers(0, 60)
    bases = draw(st.lists(st.frozensets(universe, min_size=4, max_size=30), min_size=1, max_size=3))
    out: dict[frozenset[int], int] = {}
    for _ in range(draw(st.integers(2, 14))):
        s = set(draw(st.sampled_from(bases)))
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()) and len(s) > 1:
                s.discard(draw(st.sampled_from(sorted(s))))
            else:
                s.add(draw(universe))
        out.setdefault(frozenset(s), draw(st.integers(-1, 3)))
    return list(out.items())


@settings(max_examples=300, deadline=None)
@given(labelled_sets())
def test_the_join_with_document_labels_drops_exactly_the_same_document_pairs(sets):
    """Labels skip pairs of one document (label >= 0) and nothing else; the
    positional filter, on sets long enough to exercise it, loses no pair."""
    import numpy as np

    ordered = [sorted(s) for s, _label in sets]
    labels = np.asarray([label for _s, label in sets], dtype=np.int64)
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in ordered], out=offsets[1:])
    flat = np.asarray([t for s in ordered for t in s], dtype=np.uint64)
    first, second, _inter, _union = duplicate.join(flat, offsets, THRESHOLD, labels)
    got = set(zip(first.tolist(), second.tolist(), strict=True))
    want = set()
    for i, j in combinations(range(len(sets)), 2):
        (a, la), (b, lb) = sets[i], sets[j]
        if la == lb >= 0:
            continue
        if Fraction(len(a & b), len(a | b)) >= THRESHOLD:
            want.add((i, j))
    assert got == want
