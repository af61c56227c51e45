"""The vector part of the storage contract on PostgreSQL with pgvector (a
server of the test process's own: Debian's PostgreSQL 15 has no pgvector),
and what the tests' own server says when it has none."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memors_core.testing.storage_contract import (
    PgvectorStorage,
    PostgresStorage,
    VectorContract,
    add_document,
    forget,
    remember,
    unit_vector,
)

pytestmark = pytest.mark.semantic


class TestPgvectorContract(PgvectorStorage, VectorContract):
    def test_the_store_keeps_vectors(self, storage) -> None:
        assert storage.capabilities.vectors, storage.capabilities.vectors_missing
        assert storage.capabilities.vectors_missing == ""


class TestTheGraph(PgvectorStorage):
    """pgvector's HNSW index finds a large namespace's nearest passages
    (docs/search.md): the namespace's share of the walk, exact below."""

    def test_the_graph_finds_the_exact_nearest_passages(self, storage, monkeypatch) -> None:
        import numpy as np

        from memors_core.storage.postgres import vectors

        with storage.read() as tx:
            assert tx.native("postgres").execute(
                "SELECT to_regclass('passage_vectors_hnsw') IS NOT NULL"
            ).fetchone() == (True,)
        monkeypatch.setattr(vectors, "EXACT_BELOW", 10)  # (a test's namespace is small)
        kept: dict[str, bytes] = {}
        with storage.write() as tx:
            for namespace, count in (("default", 60), ("other", 140)):
                _, ids = add_document(tx, [f"passage {n}" for n in range(count)], namespace)
                pairs = [(p, unit_vector(n * 7 + len(namespace))) for n, p in enumerate(ids)]
                assert tx.vectors.add(namespace, pairs) == count
                if namespace == "default":
                    kept = dict(pairs)
        for seed in range(5):
            question = unit_vector(1000 + seed)
            q = np.frombuffer(question, dtype="<f4")
            cosine = {p: float(np.frombuffer(v, dtype="<f4") @ q) for p, v in kept.items()}
            want = sorted(cosine, key=lambda p: -cosine[p])[:10]
            with storage.read() as tx:
                found = tx.search.passages_like("default", question, 10).rows
            assert [h.address.rsplit("/", 1)[1] for h in found] == want
            assert [h.score for h in found] == [pytest.approx(cosine[p], abs=1e-5) for p in want]

    def test_the_walk_is_decided_and_made_in_one_round_trip(self, storage, monkeypatch) -> None:
        """Over the network every statement waits for the server: how far to
        walk, the walk and the passages' texts go in one message."""
        import psycopg

        from memors_core.storage.postgres import vectors

        monkeypatch.setattr(vectors, "EXACT_BELOW", 10)
        with storage.write() as tx:
            _, ids = add_document(tx, [f"passage {n}" for n in range(40)])
            assert tx.vectors.add("default", [(p, unit_vector(n)) for n, p in enumerate(ids)])
        sent: list[str] = []
        execute = psycopg.Cursor.execute

        def counted(cur, query, *args, **kwargs):
            sent.append(str(query))
            return execute(cur, query, *args, **kwargs)

        with storage.read() as tx:
            monkeypatch.setattr(psycopg.Cursor, "execute", counted)
            found = tx.search.passages_like("default", unit_vector(3), 5).rows
            named = tx.search.passages_like("nowhere", unit_vector(3), 5).rows
            monkeypatch.undo()
        assert found[0].address == f"memo://passage/{ids[3]}" and found[0].text == "passage 3"
        assert len(found) == 5 and named == []
        assert len(sent) == 2, sent  # one a search (the first with the read's BEGIN)

    def test_a_store_whose_vectors_predate_the_graph_gets_it_when_opened(self, tmp_path) -> None:
        store = self.make_storage(tmp_path, "store")
        with store.write() as tx:
            tx.native("postgres").execute("DROP INDEX passage_vectors_hnsw")
        store.close()
        store = self.make_storage(tmp_path, "store")
        try:
            with store.read() as tx:
                assert tx.native("postgres").execute(
                    "SELECT to_regclass('passage_vectors_hnsw') IS NOT NULL"
                ).fetchone() == (True,)
        finally:
            store.close()

    def test_vectors_stored_before_kinds_are_of_the_text_alone_when_opened(self, tmp_path) -> None:
        from memors_core import semantic

        store = self.make_storage(tmp_path, "store")
        with store.write() as tx:
            _, ids = add_document(tx, ["made before kinds"])
            assert tx.vectors.add("default", [(ids[0], unit_vector(1))]) == 1
            sql = tx.native("postgres")
            sql.execute("DROP FUNCTION memors_vectors_remake(bigint, vector, text)")
            sql.execute("ALTER TABLE passage_vectors DROP COLUMN kind")
        store.close()
        store = self.make_storage(tmp_path, "store")
        try:
            with store.read() as tx:
                assert tx.vectors.missing_count("default", semantic.TEXT_ONLY) == 0
                assert [m[1] for m in tx.vectors.missing("default", 0, 5)] == ids
            with store.write() as tx:
                assert tx.vectors.add("default", [(ids[0], unit_vector(2))]) == 1
            with store.read() as tx:
                assert tx.vectors.missing_count("default") == 0
                [hit] = tx.search.passages_like("default", unit_vector(2), 1).rows
            assert hit.score == pytest.approx(1.0, abs=1e-5)
        finally:
            store.close()

    def test_a_graph_built_with_other_options_is_built_again_when_opened(self, tmp_path) -> None:
        """A store whose graph has pgvector's default links (what memors
        built before) gets the denser one, which keeps more of the exact
        nearest passages for the same walk (docs/performance.md)."""
        want = ["ef_construction=128", "m=24"]

        def options(store) -> list[str]:
            with store.read() as tx:
                (got,) = (
                    tx.native("postgres")
                    .execute(
                        "SELECT reloptions FROM pg_class WHERE relname = 'passage_vectors_hnsw'"
                    )
                    .fetchone()
                )
            return sorted(got or [])

        store = self.make_storage(tmp_path, "store")
        assert options(store) == want
        with store.write() as tx:
            tx.native("postgres").execute(
                "DROP INDEX passage_vectors_hnsw; CREATE INDEX passage_vectors_hnsw "
                "ON passage_vectors USING hnsw (vector vector_cosine_ops)"
            )
        store.close()
        store = self.make_storage(tmp_path, "store")
        try:
            assert options(store) == want
        finally:
            store.close()


class TestTheVectorsText:
    """A vector goes to the server as text (``[x,y,…]``): each number in
    the fewest digits that give its float32 back exactly."""

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=40))
    def test_each_number_is_nine_digits_at_most_and_reads_back_exactly(self, numbers) -> None:
        import numpy as np

        from memors_core.storage.postgres.vectors import literal

        vector = np.array(numbers, dtype="<f4").tobytes()
        text = literal(vector)
        assert text.startswith("[") and text.endswith("]")
        parts = text[1:-1].split(",") if numbers else []
        # (Python's repr of the float64 took up to 17 digits: a third longer to send and parse)
        assert all(
            len(p.lstrip("-").split("e")[0].replace(".", "").lstrip("0")) <= 9 for p in parts
        )
        assert np.array(parts, dtype="<f4").tobytes() == vector


class TestTheServerReadsVectorsExactly(PgvectorStorage):
    def test_a_vector_sent_as_text_is_the_same_float32s_on_the_server(self, storage) -> None:
        import numpy as np

        from memors_core.storage.postgres.vectors import literal

        rng = np.random.default_rng(7)
        for scale in (1.0, 1e-30, 3e37):
            vector = (rng.standard_normal(384) * scale).astype("<f4").tobytes()
            with storage.read() as tx:
                # (pgvector's own text form is the shortest that reads back exactly)
                (back,) = (
                    tx.native("postgres")
                    .execute("SELECT %s::vector::text", (literal(vector),))
                    .fetchone()
                )
            assert np.array(back[1:-1].split(","), dtype="<f4").tobytes() == vector


class TestWithoutPgvector(PostgresStorage):
    def test_a_server_without_pgvector_keeps_no_vectors_and_says_why(self, storage) -> None:
        with storage.read() as tx:
            has = tx.native("postgres").execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            )
            if has.fetchone():
                pytest.skip("this test server has pgvector")
        assert not storage.capabilities.vectors
        assert "no pgvector extension" in storage.capabilities.vectors_missing
        p = remember(storage, "Raft elects a leader.")
        with storage.read() as tx:
            assert tx.search.passages_like("default", unit_vector(1), 5).rows == []
            assert tx.vectors.count("default") == 0
        assert p


class TestSetUpByTheOwner(PgvectorStorage):
    def test_an_application_role_cannot_set_vectors_up_and_says_who_can(
        self, monkeypatch, tmp_path
    ) -> None:
        import uuid

        import psycopg

        from memors_core.storage.postgres.connection import PgStore
        from memors_core.storage.postgres.privileges import grant_application_role
        from memors_core.testing import pgvector

        monkeypatch.setenv("MEMORS_VECTORS", "off")  # the owner migrates, sets up no vectors
        owner = self.make_storage(tmp_path, "store")
        url = self._databases["store"]
        assert owner.capabilities.vectors is False
        owner.close()
        role = f"agent_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pgvector.server(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN")
        grant_application_role(url, role)
        monkeypatch.setenv("MEMORS_VECTORS", "on")
        agent = PgStore.open(url.replace("postgres@", f"{role}@", 1))
        try:
            assert agent.capabilities.vectors is False
            assert "this role may not set up vectors" in agent.capabilities.vectors_missing
            assert "as its owner" in agent.capabilities.vectors_missing
        finally:
            agent.close()
        # the owner, with the extra, sets them up; the grant again lets the agent use them
        owner = PgStore.open(url)
        assert owner.capabilities.vectors, owner.capabilities.vectors_missing
        owner.close()
        grant_application_role(url, role)
        agent = PgStore.open(url.replace("postgres@", f"{role}@", 1))
        try:
            assert agent.capabilities.vectors
            p = remember(agent, "Raft elects a leader.")
            with agent.write() as tx:
                assert tx.vectors.add("default", [(p, unit_vector(1))]) == 1
            with agent.read() as tx:
                assert [
                    h.text for h in tx.search.passages_like("default", unit_vector(1), 3).rows
                ] == ["Raft elects a leader."]
            forget(agent, "passage", p)  # its trigger takes the vector, in the agent's rights
            with agent.read() as tx:
                assert tx.vectors.count("default") == 0
        finally:
            agent.close()


def test_without_a_pgvector_server_the_semantic_tests_skip_saying_why(tmp_path) -> None:
    """Run the suite's tests of vectors on PostgreSQL (``--engine=postgres``)
    where no PostgreSQL with pgvector can be had (the ``pgserver`` package
    hidden): each skips with the reason, none fails, none passes unseen."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from memors_core.testing import postgres

    if postgres.available() is not None:
        pytest.skip(postgres.available())
    hidden = tmp_path / "no-pgserver" / "pgserver"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("")  # found, but without its PostgreSQL binaries
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hidden.parent), env.get("PYTHONPATH")]))
    root = Path(__file__).resolve().parents[3]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--engine=postgres", "-rs", "tests/core/storage/test_pgvector_contract.py",
         "-k", "TestPgvectorContract"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert "skipped" in summary and "passed" not in summary and "failed" not in summary, summary
    assert "no PostgreSQL with pgvector: the pgserver package" in run.stdout, run.stdout[-3000:]
