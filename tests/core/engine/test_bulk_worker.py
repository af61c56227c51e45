"""Bulk loads hand splitting and shingling to a helper process; the result
is the same as doing it in place, and a failure anywhere stops cleanly."""

from __future__ import annotations

import pytest

from memors_core import BadInput, Memory
from memors_core.engine import ingest
from memors_core.engine.prepare import prepare_passages
from store_checks import rows_of


def documents(n: int) -> list[dict]:
    return [
        {
            "text": f"Document {i} opens here.\n\nIts second paragraph names [[Topic {i % 3}]] "
            f"and says replication round {i} keeps node {i} consistent.",
            "uri": f"doc-{i}",
        }
        for i in range(n)
    ]


def stored_passages(memory: Memory) -> list[tuple]:
    return rows_of(
        memory,
        "SELECT d.uri, p.position, p.text, p.shingles FROM passages p "
        "JOIN documents d ON d.id = p.document ORDER BY d.uri, p.position",
    )


def test_a_multi_batch_load_stores_what_preparing_in_place_would(
    fresh_store, tmp_path, monkeypatch
):
    sent = []
    original = ingest._ShingleWorker.send

    def spy(self, texts):
        handed = original(self, texts)
        sent.append((len(texts), handed))
        return handed

    monkeypatch.setattr(ingest._ShingleWorker, "send", spy)
    docs = documents(23)
    with Memory.open(fresh_store("bulk.db")) as memory:
        result = memory.remember_many(docs, batch=5)
        got = stored_passages(memory)
    assert result.documents == 23 and result.passages == 46
    # The helper process took every batch after the first one.
    assert sent and all(n <= 5 and handed for n, handed in sent)
    expected = []
    for doc in docs:
        pieces, blobs, _hashes, _links, _profiles = prepare_passages(doc["text"])
        expected += [
            (doc["uri"], i, p, b) for i, (p, b) in enumerate(zip(pieces, blobs, strict=True))
        ]
    assert got == sorted(expected)


def test_the_helper_process_makes_the_same_token_data_as_remember_in_place(fresh_store):
    # Passages that link an entity get their substitution profile ahead, in the
    # helper process; the document's date metadata is added in the main one.
    docs = [{**d, "metadata": {"date": f"{i + 1} May 2023"}} for i, d in enumerate(documents(12))]
    with Memory.open(fresh_store("bulk.db")) as bulk:
        bulk.remember_many(docs, batch=4)
        got = rows_of(
            bulk,
            "SELECT p.text, f.data FROM passages p JOIN passage_profiles f ON f.passage = p.id "
            "ORDER BY p.text",
        )
    with Memory.open(fresh_store("one.db")) as one:
        for doc in docs:
            one.remember(doc["text"], uri=doc["uri"], metadata=doc["metadata"])
        want = rows_of(
            one,
            "SELECT p.text, f.data FROM passages p JOIN passage_profiles f ON f.passage = p.id "
            "ORDER BY p.text",
        )
    assert len(got) == 12 and got == want
    assert all('"date"' not in data for _, data in got)  # the dates' keys, not their words


def test_without_a_helper_process_the_load_still_completes(fresh_store, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.executable", str(tmp_path / "no-such-python"))
    with Memory.open(fresh_store("bulk.db")) as memory:
        result = memory.remember_many(documents(12), batch=4)
        assert result.documents == 12
        assert len(stored_passages(memory)) == 24


def test_a_bad_document_stops_the_load_after_the_batches_before_it(
    fresh_store, tmp_path, monkeypatch
):
    docs = documents(20)
    docs[12]["text"] = "\n\n".join(f"Paragraph {i} of a long one." for i in range(30))
    monkeypatch.setenv("MEMORS_MAX_PASSAGES", "10")
    with Memory.open(fresh_store("bulk.db")) as memory:
        with pytest.raises(BadInput, match=r"the limit is 10.*the 10 document\(s\) before it"):
            memory.remember_many(docs, batch=5)
        uris = {r[0] for r in rows_of(memory, "SELECT uri FROM documents")}
    assert uris == {f"doc-{i}" for i in range(10)}  # batches 1 and 2; none after the bad one


def test_a_document_naming_entities_has_its_profiles_made_by_the_helper(fresh_store, monkeypatch):
    # Each passage of a document that names entities mentions them, so
    # each needs its substitution profile (a conversation turn naming its
    # speaker, say): the helper process makes them all ahead, where this
    # process made every one while storing (a third of a real
    # conversation's bulk load), and they are what remember in place makes.
    docs = [
        {
            "text": f"Turn {i}: the lease on node {i} renews at 0{i % 9}:30.\n\n"
            f"Then shard {i} moves to rack {i % 4}.",
            "uri": f"turn-{i}",
            "entities": [f"Speaker {i % 3}"],
            "metadata": {"date": f"{i % 28 + 1} May 2023"},
        }
        for i in range(15)
    ]
    made_here = []
    profile = ingest.specifics.profile

    def noted(*args, **kwargs):
        if args[0].startswith(("Turn", "Then")):  # (a passage's, not a date's)
            made_here.append(args[0])
        return profile(*args, **kwargs)

    monkeypatch.setattr(ingest.specifics, "profile", noted)
    query = (
        "SELECT p.text, f.data FROM passages p JOIN passage_profiles f ON f.passage = p.id "
        "ORDER BY p.text"
    )
    with Memory.open(fresh_store("bulk.db")) as bulk:
        bulk.remember_many(docs, batch=5)
        got = rows_of(bulk, query)
    assert made_here == []
    with Memory.open(fresh_store("one.db")) as one:
        for doc in docs:
            one.remember(
                doc["text"], uri=doc["uri"], entities=doc["entities"], metadata=doc["metadata"]
            )
        want = rows_of(one, query)
    assert len(got) == 30 and got == want
