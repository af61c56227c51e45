"""A bulk insert's search terms counted by the client (issue 32, migration
19, ``storage/postgres/terms.py``): each staged passage's terms, counts
and length are exactly what the server's own stemming of its text gives
(in another order: the index reads a passage's terms by value),
on texts shaped to break the counting; the index a bulk load leaves is
the server's; a rebuilt index (new seeds) is noticed; the application
role loads the same way."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memors_core.domain.rows import NewPassage
from memors_core.memory import Memory
from memors_core.storage.postgres import terms
from memors_core.testing import postgres

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")

#: Words that stem together, differ only in case, are numbers of the
#: parser's several kinds, or hold nothing but separators.
VOCABULARY = [
    "run", "running", "Runs", "RUN", "the", "The", "THE", "leader", "leaders", "Leading",
    "quorum", "1e5", "3", "2024", "abc123", "123abc", "x", "0x1F", "v2", "_", "a_b",
    "caf\u00e9", "na\u00efve",  # beyond ASCII: left to the server
]  # fmt: skip
SEPARATORS = [" ", "  ", "\n", ", ", ". ", "-", "/", "@", ".", "'", "\t", "!?"]

#: Each passage's index row of a bulk load (its terms packed: a row per
#: term and passage keeps no counts here) against the server's stemming of
#: its text, hashed with its namespace's index number: (rows, rows that differ).
#: A row's terms with their counts, in one order (a passage's terms are
#: read by value: their order in its row is no one's concern).
_PAIRS = "ARRAY(SELECT (x.term, x.tf) FROM unnest({0}.terms, {0}.tfs) AS x(term, tf) ORDER BY 1)"
_PACKED = (
    "SELECT count(*), count(*) FILTER (WHERE "
    + _PAIRS.format("t")
    + " IS DISTINCT FROM "
    + _PAIRS.format("d")
    + " OR t.n IS DISTINCT FROM d.length) "
    "FROM passages p JOIN search_stats s ON s.kind = 'p' AND s.namespace = p.namespace "
    "JOIN search_docs d ON d.kind = 'p' AND d.rowid = p.rowid "
    "CROSS JOIN LATERAL memors_search_terms_of(p.text, s.id) t WHERE d.pack > 0"
)


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    postgres.require_server()
    url = postgres.new_database()
    yield url
    postgres.drop_database(url)


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(
        st.lists(
            st.one_of(
                st.sampled_from(VOCABULARY),
                st.from_regex(r"[A-Za-z0-9]{1,12}", fullmatch=True),
            ),
            max_size=30,
        )
    )
    glue = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(words), max_size=len(words)))
    return "".join(w + g for w, g in zip(words, glue, strict=True))


#: Texts past the counting's limits: a word at the positions' cap, one too
#: long to index, more words than a tsvector numbers, one of each kind.
EDGES = [
    "cat " * 300 + "dog",
    "x" * 2100 + " short words here",
    "a," * 16_500,
    "Word " * 254 + "word",
    "",
    "...",
]


class _Aborted(Exception):
    pass


def _staged_against_server(
    url: str, bodies: list[str], announced: bool = False
) -> tuple[int, list[tuple]]:
    """Insert ``bodies`` as one bulk insert (``announced``: as a bulk load
    does, its texts said to be coming and its rows sent without waiting),
    compare each staged passage's row with the server's stemming of its
    text before the transaction ends, and roll back. Returns (passages
    staged, rows that differ)."""
    out: list = []
    with Memory.open(url) as memory:
        memory.remember("A first passage makes the namespace's index.")
        store = memory.store
        try:
            with store.write(namespace="default") as tx:
                rows = [
                    NewPassage(f"p{n:05d}", "d", 1, n, body, f"h{n}", b"")
                    for n, body in enumerate(bodies)
                ]
                conn = tx.native("postgres")
                conn.execute(
                    "INSERT INTO documents(id, namespace, uri, created_at) "
                    "VALUES ('d', 'default', 'd.txt', '2026-01-01T00:00:00Z')"
                )
                conn.execute(
                    "INSERT INTO document_versions(document, version, text_hash, title, "
                    "metadata, created_at) VALUES ('d', 1, 'h', NULL, '{}', "
                    "'2026-01-01T00:00:00Z')"
                )
                if announced:
                    tx.passages.coming("default", bodies)
                    with tx.pipelined():
                        tx.passages.add_many("default", rows, "2026-01-01T00:00:00Z")
                else:
                    tx.passages.insert_many("default", rows, "2026-01-01T00:00:00Z")
                staged = conn.execute("SELECT count(*) FROM search_staged").fetchone()[0]
                out = conn.execute(
                    f"SELECT g.id, {_PAIRS.format('g')}, {_PAIRS.format('t')}, g.n, t.n "
                    "FROM search_staged g JOIN passages p ON p.id = g.id "
                    "CROSS JOIN LATERAL memors_search_terms_of(p.text, g.ix) t "
                    f"WHERE {_PAIRS.format('g')} IS DISTINCT FROM {_PAIRS.format('t')} "
                    "OR g.n <> t.n"
                ).fetchall()
                raise _Aborted
        except _Aborted:
            pass
    return staged, out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bodies=st.lists(texts(), min_size=1, max_size=12), announced=st.booleans())
def test_staged_terms_are_what_the_server_makes_of_each_text(
    store_url: str, bodies: list[str], announced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terms, "STAGED_FROM", 1)
    # (texts said to be coming are counted a few at a time: words new in a
    # later few are stemmed then, the others' counted at once)
    monkeypatch.setattr(terms, "EXPECT_BATCH", 3)
    staged, different = _staged_against_server(store_url, bodies, announced)
    assert different == []
    assert staged == sum(1 for b in bodies if b.isascii())


def test_texts_past_the_counting_limits_are_counted_or_left_to_the_server(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terms, "STAGED_FROM", 1)
    staged, different = _staged_against_server(store_url, EDGES)
    assert different == []
    # all but the text of more words than a tsvector numbers
    assert staged == len(EDGES) - 1


def test_a_batch_of_texts_without_words_stages_empty_rows(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terms, "STAGED_FROM", 1)
    staged, different = _staged_against_server(store_url, ["", "...", " - "])
    assert (staged, different) == (3, [])


@pytest.mark.parametrize(
    "values",
    [[], [0], [-1, 1], [2**63 - 1, -(2**63), 255, -256, 65536], list(range(-3000, 3000, 7))],
)
def test_numbers_packed_here_reach_the_server_as_they_are(
    store_url: str, values: list[int]
) -> None:
    small = [v for v in values if -(2**15) <= v < 2**15]
    with psycopg.connect(store_url) as conn:
        cur = terms._binary(psycopg.Cursor(conn))
        cur.execute(
            "SELECT %b::bigint[], %b::smallint[], (%b::bigint[])[2:3]",
            (terms.Int8Array.of(values), terms.Int2Array.of(small), terms.Int8Array.of(values)),
        )
        big, little, middle = cur.fetchone()
    assert (big, little, middle) == (values, small, values[1:3])


def _documents(count: int, seed: int) -> list[dict]:
    import random

    rng = random.Random(seed)
    words = [*VOCABULARY, *(f"w{n}" for n in range(80))]
    return [
        {
            "uri": f"doc-{seed}-{n}.txt",
            "text": "\n\n".join(
                " ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + "."
                for _ in range(3)
            ),
        }
        for n in range(count)
    ]


def _ascii(documents: list[dict]) -> int:
    """How many of the documents' passages (their paragraphs) are ASCII."""
    return sum(p.isascii() for d in documents for p in d["text"].split("\n\n"))


def test_a_bulk_load_leaves_the_servers_index_even_after_a_rebuild(store_url: str) -> None:
    with Memory.open(store_url) as memory:
        memory.remember_many(_documents(60, 1), namespace="terms")
        loaded = memory.store.terms.staged
        with psycopg.connect(store_url, autocommit=True) as conn:
            # The index made again: every namespace's number (the seed) is new,
            # and what this process kept of the words is stale.
            conn.execute("SELECT memors_search_rebuild()")
        memory.remember_many(_documents(60, 2), namespace="terms")
        found = memory.search("leaders running quorum", namespace="terms").results
        staged = memory.store.terms.staged
    # the terms of every passage in ASCII were counted here
    assert loaded == _ascii(_documents(60, 1)) and staged == loaded + _ascii(_documents(60, 2))
    assert found
    with psycopg.connect(store_url) as conn:
        # (the rebuild indexed the first load's passages a row per term)
        assert conn.execute(_PACKED).fetchone() == (180, 0)
        assert conn.execute("SELECT count(*) FROM search_staged").fetchone()[0] == 0


@pytest.mark.parametrize("beyond", [20, 300], ids=["a-few-stemmed-there", "many-stemmed-there"])
def test_a_batch_partly_left_to_the_server_is_indexed_as_the_server_would(
    store_url: str, beyond: int
) -> None:
    # A batch's passages beyond ASCII are stemmed in the flush: a few there
    # and then, many (256 or more) by the query the parallel workers may run.
    namespace = f"mixed{beyond}"
    docs = _documents(40, 5) + [
        {"uri": f"cafe-{n}.txt", "text": f"Le caf\u00e9 {n} de Z\u00fcrich, na\u00efve leaders."}
        for n in range(beyond)
    ]
    with Memory.open(store_url) as memory:
        memory.remember_many(docs, namespace=namespace)
        found = memory.search("cafe zurich", namespace=namespace).results
    assert len(found) == min(beyond, 10)
    with psycopg.connect(store_url) as conn:
        rows, different = conn.execute(_PACKED + f" AND p.namespace = '{namespace}'").fetchone()
    assert (rows, different) == (120 + beyond, 0)


def test_the_application_role_bulk_loads_with_its_terms_counted() -> None:
    from .conftest import roles_database

    with roles_database() as roles:
        with Memory.open(roles.app_url) as memory:
            memory.remember("A first passage makes the namespace's index.")
            memory.remember_many(_documents(40, 3))
            assert memory.search("leaders quorum").results
            assert memory.store.terms.staged == _ascii(_documents(40, 3))
        with psycopg.connect(roles.owner_url) as conn:
            assert conn.execute(_PACKED).fetchone() == (120, 0)
        with (
            psycopg.connect(roles.app_url) as conn,  # the table is the flush's to read
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT count(*) FROM search_staged")


def _waits(monkeypatch: pytest.MonkeyPatch) -> list[psycopg.Cursor]:
    """Each read whose answer the client asks for in pipeline mode (it
    waits there for every answer sent for before it): the reading cursors."""
    fetch = psycopg.Cursor._fetch_pipeline
    waited: list[psycopg.Cursor] = []  # (kept: a cursor's id is not reused meanwhile)

    def noted(cur: psycopg.Cursor) -> None:
        if cur.connection.pgconn.pipeline_status and not any(c is cur for c in waited):
            waited.append(cur)
        fetch(cur)

    monkeypatch.setattr(psycopg.Cursor, "_fetch_pipeline", noted)
    return waited


def test_a_bulk_batch_waits_for_the_server_as_often_however_many_passages_it_has(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch's passages go to the server a thousand at a time; the client
    # waited for each thousand's numbers and for the stemming of its new
    # words. Its new words are now stemmed when the batch begins, before
    # any row is sent, and its rows go without waiting: the batch waits as
    # often for 120 passages as for 3,600 (whose words are all in their
    # first thousand), and each is indexed as the server would.
    waited = _waits(monkeypatch)
    counts = {}
    with Memory.open(store_url) as memory:
        for namespace, docs in (("few", _documents(40, 7)), ("many", _documents(1200, 8))):
            memory.remember("A first passage makes the namespace's index.", namespace=namespace)
            waited.clear()
            memory.remember_many(docs, namespace=namespace, batch=len(docs))
            counts[namespace] = len(waited)
            assert memory.search("leaders quorum", namespace=namespace).results
    assert counts["few"] == counts["many"], counts
    with psycopg.connect(store_url) as conn:
        rows, different = conn.execute(_PACKED + " AND p.namespace = 'many'").fetchone()
    assert (rows, different) == (3 * 1200, 0)


def test_texts_said_to_come_are_counted_after_the_index_is_made_again_meanwhile(
    store_url: str,
) -> None:
    # A batch said its texts were coming (their words stemmed with the
    # index's number then); the index is made again before its rows go
    # (every number new), and a text it did not announce brings new words:
    # the words are asked for again with the new number, the announced
    # ones too, and every passage is indexed as the server would.
    announced = [p for d in _documents(30, 9) for p in d["text"].split("\n\n")]
    late = ["Zeppelins hover quietly", *(f"Unannounced lighthouse keeper {n}" for n in range(70))]
    stamp = "2026-01-01T00:00:00Z"
    with Memory.open(store_url) as memory:
        memory.remember_many(_documents(30, 10), namespace="remade")  # its words known here
        with memory.store.write(namespace="remade") as tx:
            conn = tx.native("postgres")
            conn.execute(
                "INSERT INTO documents(id, namespace, uri, created_at) "
                f"VALUES ('remade', 'remade', 'remade.txt', '{stamp}')"
            )
            conn.execute(
                "INSERT INTO document_versions(document, version, text_hash, title, metadata, "
                f"created_at) VALUES ('remade', 1, 'h', NULL, '{{}}', '{stamp}')"
            )
            tx.passages.coming("remade", announced)
            with psycopg.connect(store_url, autocommit=True) as other:
                other.execute("SELECT memors_search_rebuild()")
            rows = [
                NewPassage(f"r{n:05d}", "remade", 1, n, body, f"h{n}", b"")
                for n, body in enumerate([*announced, *late])
            ]
            with tx.pipelined():
                tx.passages.add_many("remade", rows, stamp)
        assert memory.search("zeppelins", namespace="remade").results
    with psycopg.connect(store_url) as conn:
        found, different = conn.execute(_PACKED + " AND p.document = 'remade'").fetchone()
    assert (found, different) == (len(rows), 0)


def _batches(count: int, size: int) -> list[dict]:
    """``count`` batches of ``size`` documents, each batch with words of its own."""
    return [
        {
            "uri": f"batch-{b}-{n}.txt",
            "text": f"Batch{b} keeps word{b}x{n} and word{b}y{n % 7} beside the quorum. "
            f"Leaders of batch{b} run {n} times.",
        }
        for b in range(count)
        for n in range(size)
    ]


def test_a_bulk_loads_next_batch_is_counted_before_its_transaction(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While a batch commits (the server flushing its index), a thread takes
    # the next batch from the helper process and counts its terms on a
    # connection of its own, and the first batch is counted before its
    # transaction begins: the words new in each batch are stemmed outside
    # any transaction, not in the batch's own (which then only sends), and
    # every passage is indexed as the server would. A namespace's first
    # load makes its index so, committed before the first batch (the read
    # ahead of the second, while the first commits, waited for it).
    stemmed: list[tuple[bool, frozenset[str]]] = []
    stem = terms.TermCache._stem

    def noted(conn: psycopg.Connection, namespace: str, new: list[str]) -> tuple:
        inside = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        stemmed.append((inside, frozenset(new)))
        return stem(conn, namespace, new)

    monkeypatch.setattr(terms.TermCache, "_stem", staticmethod(noted))
    docs = _batches(3, 120)
    with Memory.open(store_url) as memory:
        for namespace in ("ahead", "first"):
            if namespace == "ahead":
                memory.remember("A first passage makes the namespace's index.", namespace=namespace)
            stemmed.clear()
            done = memory.remember_many(docs, namespace=namespace, batch=120)
            assert done.passages == len(docs)
            assert memory.search("word2x119", namespace=namespace).results
            for batch in range(3):
                own = {f"word{batch}x{n}" for n in range(120)}
                where = {inside for inside, words in stemmed if words & own}
                assert where == {False}, (namespace, batch, stemmed)
    with psycopg.connect(store_url) as conn:
        for namespace in ("ahead", "first"):
            rows, different = conn.execute(_PACKED + f" AND p.namespace = '{namespace}'").fetchone()
            assert (rows, different) == (len(docs), 0)


def test_a_read_ahead_that_fails_costs_the_load_nothing(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connection the next batch is read ahead on is lost: the batch
    # counts its terms in its own transaction, and the load stores and
    # indexes everything as it would have.
    from memors_core.storage.postgres.connection import PgStore

    def lost(self: PgStore, namespace: str, documents: list) -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PgStore, "read_ahead", lost)
    docs = _batches(3, 100)
    with Memory.open(store_url) as memory:
        done = memory.remember_many(docs, namespace="lost-ahead", batch=100)
        assert (done.documents, done.passages) == (300, 300)
        assert memory.search("word1y3", namespace="lost-ahead").results
    with psycopg.connect(store_url) as conn:
        rows, different = conn.execute(_PACKED + " AND p.namespace = 'lost-ahead'").fetchone()
    assert (rows, different) == (300, 0)


def test_a_bulk_load_of_documents_already_there_counts_only_what_it_adds(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Remembered again with a line added, a document keeps its passages
    # and adds one: only the added passages' terms are counted (ahead of
    # their batch or as they are sent), not every passage of every
    # document (two thirds of the client's work in such a load, for
    # passages it never sends), and the index is the server's.
    docs = _batches(2, 120)
    with Memory.open(store_url) as memory:
        memory.remember_many(docs, namespace="again", batch=120)
        counted: list[list[str]] = []
        count = terms._count

        def noted(known: terms._Stemmed, tokens: list[str]) -> object:
            counted.append(tokens)
            return count(known, tokens)

        monkeypatch.setattr(terms, "_count", noted)
        edited = [
            {**d, "text": d["text"] + f"\n\nLater line {n} for edits."} for n, d in enumerate(docs)
        ]
        done = memory.remember_many(edited, namespace="again", batch=120)
        assert done.new_versions == len(docs)
        assert memory.search("edits", namespace="again").results
    assert 0 < len(counted) <= len(docs), len(counted)
    assert all("later" in tokens for tokens in counted)
    with psycopg.connect(store_url) as conn:
        rows, different = conn.execute(_PACKED + " AND p.namespace = 'again'").fetchone()
    assert (rows, different) == (2 * len(docs), 0)
