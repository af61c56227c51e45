"""The storage contract's helpers: storing rows through the protocol, made-up vectors."""

from __future__ import annotations

from memors_core.domain import text
from memors_core.domain.dates import normalise, now
from memors_core.domain.ids import address, uuid7
from memors_core.domain.rows import Document, DocumentVersion, NewPassage
from memors_core.domain.search import SearchQuery, query_words
from memors_core.storage.api import Storage, Tx
from memors_core.testing.storage_contract.fixtures import NS


def add_document(
    tx: Tx, passages: list[str], namespace: str = NS, uri: str | None = None
) -> tuple[str, list[str]]:
    """Store a one-version document with these passages; (document id, passage ids)."""
    tx.namespaces.touch(namespace)
    document = uuid7()
    stamp = now()
    tx.documents.insert(Document(document, namespace, uri, stamp))
    tx.documents.add_version(
        DocumentVersion(document, 1, text.content_hash("\n\n".join(passages)), None, {}, stamp)
    )
    return document, [
        add_passage(tx, document, 1, position, body, namespace)
        for position, body in enumerate(passages)
    ]


def add_passage(
    tx: Tx, document: str, version: int, position: int, body: str, namespace: str = NS
) -> str:
    ident = uuid7()
    shingles = text.pack_shingles(text.shingle_hashes(body))
    tx.passages.insert(
        namespace,
        NewPassage(ident, document, version, position, body, text.content_hash(body), shingles),
        now(),
    )
    return ident


def remember(storage: Storage, body: str, *, about: str | None = None, namespace: str = NS) -> str:
    """One passage in a document of its own (mentioning the entity ``about``); its id."""
    with storage.write() as tx:
        _, [passage] = add_document(tx, [body], namespace)
        if about is not None:
            tx.passages.mention(passage, [tx.entities.ensure(about, namespace).id])
    return passage


def words(query: str, *entities: str) -> SearchQuery:
    """A search for the words of ``query`` (by memors' query rules) and the
    canonical entities ``entities``."""
    return SearchQuery(tuple(query_words(query)), entities)


def forget(storage: Storage, kind: str, ident: str, namespace: str = NS) -> bool:
    with storage.write() as tx:
        return tx.tombstones.add(namespace, kind, ident, "forgotten", "a test forgot it")


def write_page(
    storage: Storage,
    entity: str,
    content: str,
    cites: list[str],
    namespace: str = NS,
    item: int | None = None,
    *,
    sentences: list[tuple[str, list[str]]] = (),  # type: ignore[assignment]
    facts: list[str] = (),  # type: ignore[assignment]
) -> str:
    """A new version of the entity's page citing these passages (written for
    the work item ``item``), with its checked ``sentences`` (each with the
    addresses it cites) and built with the ``facts`` (ids); its id."""
    with storage.write() as tx:
        canonical = tx.entities.ensure(entity, namespace).id
        previous = tx.pages.current(canonical)
        written = tx.pages.write(
            namespace,
            canonical,
            entity,
            content,
            [address("passage", p) for p in cites],
            previous,
            item,
            {},
            sentences=sentences,
            facts=[address("fact", f) for f in facts],
        )
    return written.rsplit("/", 1)[1]


def instant(day: str) -> str:
    """A day as the sortable timestamp search and rules are given (``as_of``, ``now_ts``)."""
    stamp = normalise(day, "day")
    assert stamp is not None
    return stamp


class Boom(Exception):
    """Raised inside a transaction to make it fail."""


def unit_vector(seed: int | list[float]) -> bytes:
    """A unit vector of :data:`memors_core.semantic.DIMENSIONS` float32
    numbers (bytes, as stores keep them): random for a seed, or the given
    leading numbers padded with zeros."""
    import numpy as np

    from memors_core.semantic import DIMENSIONS

    if isinstance(seed, int):
        v = np.random.default_rng(seed).standard_normal(DIMENSIONS)
    else:
        v = np.zeros(DIMENSIONS)
        v[: len(seed)] = seed
    return (v / np.linalg.norm(v)).astype("<f4").tobytes()


def cosine(a: bytes, b: bytes) -> float:
    import numpy as np

    return float(np.frombuffer(a, dtype="<f4") @ np.frombuffer(b, dtype="<f4"))
