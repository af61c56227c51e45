"""What a single remember sends, in statements (issue 32 point 1).

On PostgreSQL every statement is a round trip, and a single document's
remember is a dozen of them: its answer (the live passages of the new
version, each with the entities it names) is read in one statement, not
three. Counted at the driver, on the run's engine.
"""

from __future__ import annotations

import pytest

from store_checks import statements


def test_a_remember_reads_its_answer_in_one_statement(memory, monkeypatch):
    memory.remember("[[Raft]] elects a leader.", uri="doc-0")
    with statements(memory, monkeypatch) as seen:
        out = memory.remember(
            "[[Raft]] replicates a log.\n\nA term ends when [[Paxos]] is named.",
            uri="doc-1",
            entities=["Consensus"],
        )
    assert len(out.passages) == 2 and len(out.entities) == 3
    stored = max(i for i, s in enumerate(seen) if "INSERT INTO passages" in s)
    # after the passages are stored: reads of the passages, their
    # tombstones or their mentions are the answer's
    answer = [
        s
        for s in seen[stored + 1 :]
        if s.lstrip().startswith("SELECT")
        and "search" not in s
        and ("passages" in s or "mentions" in s)
    ]
    assert len(answer) == 1, answer


def _answer_as_looked_up(memory, document: str) -> tuple[list[str], list[str]]:
    """A remember's answer from the store's one-at-a-time look-ups: the
    latest version's live passages, and the entities they name in order."""
    ident = document.rsplit("/", 1)[1]
    with memory.store.read() as tx:
        version = tx.documents.latest_version(ident).version
        live = set(tx.passages.live_of_document(ident))
        passages = [p for p in tx.documents.version_passages(ident, version) if p in live]
        named = tx.passages.entities_of_many(passages)
    entities = list(dict.fromkeys(e for p in passages for e in named.get(p, ())))
    return [f"memo://passage/{p}" for p in passages], [f"memo://entity/{e}" for e in entities]


def test_a_remembers_answer_is_what_the_store_holds(memory):
    text = "[[Raft]] elects a leader.\n\nIt keeps a log with [[Zab]]."
    first = memory.remember(text, uri="doc", entities=["Ops"])
    assert (first.passages, first.entities) == _answer_as_looked_up(memory, first.document)
    assert len(first.passages) == 2 and len(first.entities) == 3
    memory.forget(first.passages[1])
    again = memory.remember(text, uri="doc", entities=["Ops"])  # unchanged: not revived
    assert again.passages == first.passages[:1]
    assert (again.passages, again.entities) == _answer_as_looked_up(memory, again.document)
    changed = memory.remember(
        "[[Raft]] elects a leader.\n\n[[Paxos]] and [[Ops]] agree.", uri="doc"
    )
    assert changed.passages[0] == first.passages[0] and len(changed.passages) == 2
    assert (changed.passages, changed.entities) == _answer_as_looked_up(memory, changed.document)


def test_a_remembers_inserts_do_not_wait_for_each_other(memory, monkeypatch):
    """Its five inserts (document, version, passages, mentions, profiles)
    need no answer but the passages' numbers: on PostgreSQL they are sent
    in the driver's pipeline mode, where none waits for the one before.
    Nor does registering its namespace, held back till the look-up of the
    uri."""
    if memory.store.tx.engine != "postgres":
        return  # (SQLite's statements are calls in its own process)
    import psycopg

    sent: list[tuple[str, bool]] = []
    execute = psycopg.Cursor.execute

    def noted(cur, query, *args, **kwargs):
        sent.append((str(query), bool(cur.connection.pgconn.pipeline_status)))
        return execute(cur, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", noted)
    out = memory.remember("[[Raft]] elects a leader.\n\nIt keeps a [[Log]].", uri="doc")
    monkeypatch.undo()
    assert len(out.passages) == 2 and len(out.entities) == 2
    rows = ("documents", "document_versions", "passages", "mentions", "passage_profiles")
    inserts = [
        (q.split("(")[0].split()[2], piped) for q, piped in sent if q.startswith("INSERT INTO")
    ]
    inserts = [(table, piped) for table, piped in inserts if table in rows]
    assert [table for table, _ in inserts] == list(rows), inserts
    assert all(piped for _, piped in inserts), inserts
    # and the namespace's registration goes with the look-up of the uri,
    # in the message that begins the transaction (held back, no round trip
    # of its own)
    touched = [q for q, _ in sent if "INSERT INTO namespaces" in q]
    assert len(touched) == 1 and touched[0].startswith("BEGIN"), sent
    assert "EXECUTE memors_" in touched[0].split("INSERT INTO namespaces", 1)[1], touched


def _turns(count: int, start: int = 0) -> list[dict]:
    """Conversation turns, each its own document naming its speaker."""
    speakers = ["Iris Sato", "Omar Haddad", "Lena Brandt"]
    return [
        {
            "text": f"Turn {n}: the ferry left at {n % 12} and the harbour was calm.",
            "uri": f"conv/turn{n}",
            "entities": [speakers[n % 3]],
        }
        for n in range(start, start + count)
    ]


def test_a_bulk_load_looks_each_name_up_once_a_batch(memory, monkeypatch):
    # Conversation turns name their speaker, one document each: the
    # speakers are looked up (and made) once in a batch's transaction, not
    # once a turn (on PostgreSQL a round trip each: 30,000 turns took 18 s
    # where they take 6, docs/performance.md).
    with statements(memory, monkeypatch) as seen:
        done = memory.remember_many(_turns(300), batch=1000)
    assert done.documents == 300
    lookup = "SELECT canonical FROM entities WHERE namespace"
    looked_up = [s for s in seen if lookup in s]
    assert 3 <= len(looked_up) <= 6, looked_up  # (each name's look-up, and its alias's)
    with statements(memory, monkeypatch) as seen:  # a second batch: the names are there
        memory.remember_many(_turns(300, start=300), batch=1000)
    assert len([s for s in seen if lookup in s]) == 3
    found = memory.search("ferry harbour calm", limit=3).results
    assert found and all(r.address.startswith("memo://passage/") for r in found)
    speaker = memory.get(memory.get(found[0].address).entities[0])
    assert speaker.name in {"Iris Sato", "Omar Haddad", "Lena Brandt"}
    assert len(speaker.passages) == 200


def test_a_bulk_load_sends_nothing_a_document(memory, monkeypatch):
    # On PostgreSQL a bulk load's statements and round trips are a batch's,
    # however many documents it holds (each document once began a pipeline,
    # a round trip of its own though it sent nothing).
    if memory.store.tx.engine != "postgres":
        pytest.skip("a round trip is PostgreSQL's (SQLite's trace counts each row it inserts)")
    import psycopg

    def sent(count: int, start: int) -> tuple[int, int]:
        pipelines = []
        began = psycopg.Connection.pipeline

        def pipeline(self, *args, **kwargs):
            pipelines.append(1)
            return began(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "pipeline", pipeline)
        with statements(memory, monkeypatch) as seen:
            memory.remember_many(_turns(count, start), batch=1000)
        monkeypatch.undo()
        return len(seen), len(pipelines)

    sent(10, 0)  # (the store's first writes: its namespace, its first names)
    few = sent(100, 100)  # (100 and more: each batch's terms are counted here)
    many = sent(600, 1000)
    assert many == few, (few, many)


def _new_version_statements(memory, monkeypatch, passages: int) -> int:
    uri = f"doc-{passages}"
    lines = [f"Line {n} of the [[Raft]] runbook, first edition." for n in range(passages)]
    first = memory.remember("\n\n".join(lines), uri=uri)
    lines[0] = "Line 0 of the [[Raft]] runbook, second edition."  # one changed, the rest kept
    with statements(memory, monkeypatch) as seen:
        out = memory.remember("\n\n".join(lines), uri=uri)
    # the same document, the kept passages kept, the changed one new, in order
    assert out.document == first.document
    assert out.passages[1:] == first.passages[1:] and out.passages[0] != first.passages[0]
    return len([s for s in seen if "PREPARE" not in s])


def test_a_new_version_is_read_and_placed_in_statements_a_document(memory, monkeypatch):
    # A new version reads which passages of the last one it keeps, and
    # places each of its passages: two reads a kept passage (is it live,
    # its text's hash) and one write a passage, where a few statements
    # now read and place them all. Its statements do not grow with its
    # passages (each is a round trip on PostgreSQL).
    if memory.store.tx.engine != "postgres":
        pytest.skip("a round trip is PostgreSQL's (SQLite's trace counts each row it inserts)")
    few = _new_version_statements(memory, monkeypatch, 3)
    many = _new_version_statements(memory, monkeypatch, 24)
    assert many == few, (few, many)


def test_unchanged_documents_cost_no_statement_each(memory, monkeypatch):
    # Loading again what the store holds (a corpus synced twice) read each
    # document's latest version to find it unchanged; the batch's look-up
    # of its uris reads those versions with them.
    docs = [
        {"text": f"[[Raft]] note {n}: the leader kept its lease.", "uri": f"n{n}"}
        for n in range(20)
    ]
    memory.remember_many(docs)
    counts = []
    for some in (docs[:5], docs):
        with statements(memory, monkeypatch) as seen:
            out = memory.remember_many(some)
        assert (out.unchanged, out.new, out.new_versions) == (len(some), 0, 0)
        counts.append(len([s for s in seen if "PREPARE" not in s]))
    assert counts[0] == counts[1], counts
    # and a single remember of a known uri reads its version with it
    with statements(memory, monkeypatch) as seen:
        again = memory.remember(docs[0]["text"], uri="n0")
    assert again.passages and not [s for s in seen if "FROM document_versions WHERE" in s]


def test_changed_documents_in_bulk_cost_one_read_each(memory, monkeypatch):
    # A bulk load of new versions stored each document's rows on its own
    # (five statements and their checks a document) after reading what it
    # reads; each now reads what its last version holds (one statement)
    # and its rows wait for the batch's.
    if memory.store.tx.engine != "postgres":
        pytest.skip("a round trip is PostgreSQL's (SQLite's trace counts each row it inserts)")
    docs = [
        {"text": f"[[Raft]] note {n}.\n\nIts leader kept the lease {n}.", "uri": f"n{n}"}
        for n in range(25)
    ]
    memory.remember_many(docs)
    counts = []
    for some in (docs[:5], docs[5:]):  # 5, then 20 others: each one's first edit
        edited = [{**d, "text": f"{d['text']}\n\nEdited."} for d in some]
        with statements(memory, monkeypatch) as seen:
            out = memory.remember_many(edited)
        assert out.new_versions == len(some)
        counts.append(len([s for s in seen if "PREPARE" not in s]))
    assert counts[1] - counts[0] == 15, counts  # one read for each of 15 more
