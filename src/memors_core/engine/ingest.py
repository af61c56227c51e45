"""Ingestion: documents split into passages, linked to entities, versioned.

Remembering a document again under the same ``uri`` stores a new version
that reuses the unchanged passages and supersedes the dropped ones; the same
text, title and metadata again store nothing. A bulk load stores one
transaction per batch while a helper process splits and shingles the next.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memors_core import semantic
from memors_core.domain import specifics, text
from memors_core.domain.dates import now
from memors_core.domain.ids import address, uuid7
from memors_core.domain.inputs import check_document
from memors_core.domain.model import Remembered, RememberedMany
from memors_core.domain.rows import Document, DocumentVersion, LatestDocument, NewPassage
from memors_core.engine import vectors
from memors_core.engine.prepare import Prepared, prepare_passages
from memors_core.engine.progress import Progress, Reporter
from memors_core.errors import BadInput, MemorsError
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.plugins.manager import Plugins
    from memors_core.settings import Limits
    from memors_core.storage.api import Storage, Tx

log = get_logger("memors")

#: New passages stored per statement (one statement each for the passages,
#: their mentions and profiles): bounded, so a huge document streams.
STORE_BATCH = 1000
#: A ramped bulk load's first batches: an eighth of its batch, a quarter,
#: a half. The load's first rows wait for the helper process to prepare the
#: first batch (and on PostgreSQL for its terms to be counted) with the
#: other core idle, so that batch is small.
RAMP_STEPS = 3


def _batch_sizes(batch: int, ramp: bool) -> Iterator[int]:
    """Each batch's size in documents: ``batch``, after (with ``ramp``) an
    eighth of it, a quarter and a half."""
    if ramp:
        for shift in range(RAMP_STEPS, 0, -1):
            yield max(1, batch >> shift)
    while True:
        yield batch


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _remembered(tx: Tx, doc_id: str, version: int) -> Remembered:
    # The live passages only: remembering the same text again does not
    # revive a passage forgotten since, so it is not listed as if it were.
    # (One query whatever the number of passages: on a server engine each
    # is a round trip, and one per passage was once most of a remember's.)
    shown = tx.passages.live_of_version(doc_id, version)
    passages = [p for p, _ in shown]
    entities: dict[str, None] = {}
    for _, named in shown:
        entities.update(dict.fromkeys(named))
    return Remembered(
        document=address("document", doc_id),
        passages=[address("passage", p) for p in passages],
        entities=[address("entity", e) for e in entities],
    )


class _Rows:
    """New documents, versions, passages, mentions and profiles waiting to
    be stored together: a bulk load's documents go to the store a few
    statements per batch rather than a few per document (on a server
    engine each is a round trip and a statement to plan)."""

    __slots__ = (
        "documents",
        "entities",
        "held",
        "links",
        "namespace",
        "passages",
        "placed",
        "profiles",
        "stamp",
        "tx",
        "versions",
    )

    def __init__(self, tx: Tx, namespace: str, stamp: str) -> None:
        self.tx = tx
        self.namespace = namespace
        self.stamp = stamp
        self.documents: list[Document] = []
        self.versions: list[DocumentVersion] = []
        #: The documents of ``versions`` (:meth:`holds` asks, once a document).
        self.held: set[str] = set()
        self.passages: list[NewPassage] = []
        self.links: list[tuple[str, str]] = []
        self.profiles: list[tuple[str, str]] = []
        #: Each passage of a later version, at its position:
        #: (document, version, position, passage).
        self.placed: list[tuple[str, int, int, str]] = []
        #: The entities the batch's documents named, by name: looked up (or
        #: made) once a transaction, not once a document.
        self.entities: dict[str, str] = {}

    def add_version(self, version: DocumentVersion) -> None:
        """A version to store with the passages (before their places in it)."""
        self.versions.append(version)
        self.held.add(version.document)

    def holds(self, document: str) -> bool:
        """Whether a version of ``document`` waits here to be stored."""
        return document in self.held

    def store(self) -> None:
        """Store what waits, in the order its checks need (a version after
        its document, passages after their version, a later version's
        places after its new passages)."""
        tx = self.tx
        if not (self.documents or self.versions or self.passages or self.placed):
            return  # (links and profiles only ever come with passages)
        with tx.pipelined():  # (none of them waits for another's answer)
            tx.documents.insert_many(self.documents)
            tx.documents.add_versions(self.versions)
            tx.passages.add_many(self.namespace, self.passages, self.stamp)
            tx.passages.mention_many(self.links)
            tx.passages.add_profiles(self.profiles)
            tx.documents.link_passages(self.placed)
        for rows in (
            self.documents,
            self.versions,
            self.passages,
            self.links,
            self.profiles,
            self.placed,
            self.held,
        ):
            rows.clear()


class _NotAdding(Exception):
    """A document a write of role ``add`` cannot store: it needs the
    namespace's turn (role ``content``)."""


class Ingest:
    """Remembering documents into a storage, with the plugins' entity extractors."""

    def __init__(self, storage: Storage, plugins: Plugins, limits: Limits) -> None:
        self.storage = storage
        self.plugins = plugins
        self.limits = limits
        #: Called with a namespace after a write committed passages that
        #: need vectors (the ``semantic`` extra on): whoever makes them.
        self.on_new_passages: Callable[[str], None] | None = None

    def one(
        self,
        namespace: str,
        body: Any,
        uri: Any = None,
        title: Any = None,
        entities: Any = None,
        metadata: Any = None,
        *,
        progress: Callable[[Progress], None] | None = None,
    ) -> Remembered:
        """Store one document (see :meth:`memors_core.Memory.remember`)."""
        doc = check_document(self.limits, body, uri, title, entities, metadata)
        report = Reporter(progress)
        prepared = prepare_passages(doc[0], self.limits.passages_per_document, report)
        created: list[tuple[str, str]] | None = [] if self.makes_vectors else None
        try:
            # (a write that only adds runs beside the namespace's others, on
            # an engine with many writers: a document new to it, or one it
            # has unchanged)
            out = self._stored(namespace, doc, prepared, report, created, "add")
        except _NotAdding:
            # A new version supersedes passages (pages citing them go
            # stale): it takes the namespace's turn, the add undone (it
            # gave up before storing a passage: ``created`` is still empty).
            out = self._stored(namespace, doc, prepared, report, created, "content")
        self._new_passages(namespace, created)
        return out

    def _stored(
        self,
        namespace: str,
        doc: tuple,
        prepared: Prepared,
        report: Reporter,
        created: list[tuple[str, str]] | None,
        role: str,
    ) -> Remembered:
        """One checked document stored in a write of ``role``."""
        with self.storage.write(namespace=namespace, role=role) as tx:
            out = self._one(
                tx,
                namespace,
                *doc,
                prepared=prepared,
                report=report,
                created=created,
                adding=role == "add",
            )
        assert isinstance(out, Remembered)
        return out

    @functools.cached_property
    def makes_vectors(self) -> bool:
        """Whether remembering gives new passages vectors (the ``semantic``
        extra is installed and on, and the store can keep them). Where the
        extra is installed but the store cannot keep vectors, one warning
        says so."""
        reason = vectors.unwanted(self.storage)
        if reason is not None and semantic.unavailable() is None:
            log.warning("vectors_unavailable", store=self.storage.location, reason=reason)
        return reason is None

    def _new_passages(self, namespace: str, created: list[tuple[str, str]] | None) -> None:
        """Say that a committed write created passages that need vectors:
        they are made off this path (:mod:`memors_core.engine.vectors`), so
        remembering never waits for the model."""
        if created and self.on_new_passages is not None:
            self.on_new_passages(namespace)

    def _entity_count(self, namespace: str) -> int:
        with self.storage.read() as tx:
            return tx.entities.count(namespace)

    def many(
        self,
        documents: Iterable[dict[str, Any]],
        namespace: str,
        *,
        batch: int = 500,
        ramp: bool = False,
        progress: Callable[[Progress], None] | None = None,
        where: Callable[[int], str] | None = None,
    ) -> RememberedMany:
        """Store many documents, one transaction per ``batch`` (see
        :meth:`memors_core.Memory.remember_many`); with ``ramp``, the first
        batches are smaller (:data:`RAMP_STEPS`)."""
        load = _BulkLoad(self, namespace, Reporter(progress))
        before = self._entity_count(namespace)
        sizes = _batch_sizes(batch, ramp)
        load.run(self._checked(documents, where or (lambda n: f"document {n}")), sizes)
        totals = load.totals
        return RememberedMany(
            documents=totals["documents"],
            passages=totals["passages"],
            entities=self._entity_count(namespace) - before,
            new=totals["new"],
            new_versions=totals["new_versions"],
            unchanged=totals["unchanged"],
        )

    def _checked(
        self, documents: Iterable[dict[str, Any]], name: Callable[[int], str]
    ) -> Iterator[tuple]:
        """The documents of a bulk load, checked one by one as they are read;
        a bad one is bad input naming it (``name(n)``, n from 1)."""
        for n, raw in enumerate(documents, 1):
            if not isinstance(raw, dict):
                raise BadInput(f"{name(n)}: expected a JSON object")
            extra = set(raw) - {"text", "uri", "title", "entities", "metadata"}
            if extra:
                raise BadInput(f"{name(n)}: unexpected field(s) {', '.join(sorted(extra))}")
            try:
                yield check_document(
                    self.limits,
                    raw.get("text"),
                    raw.get("uri"),
                    raw.get("title"),
                    raw.get("entities"),
                    raw.get("metadata"),
                )
            except BadInput as exc:
                raise BadInput(f"{name(n)}: {exc.message}") from None

    def _one(
        self,
        tx: Tx,
        namespace: str,
        body: str,
        uri: str | None,
        title: str | None,
        names: list[str],
        metadata: dict,
        *,
        counts_only: bool = False,
        prepared: Prepared | None = None,
        touch: bool = True,
        report: Reporter | None = None,
        documents: int = 0,
        created: list[tuple[str, str]] | None = None,
        stamp: str | None = None,
        latest: dict[str, LatestDocument] | None = None,
        rows: _Rows | None = None,
        adding: bool = False,
    ) -> Remembered | tuple[int, str]:
        """Store one document; with ``counts_only`` return just how many
        passages it has and how it fared (``new``, ``new_versions`` or
        ``unchanged``: bulk loads need no addresses back). ``prepared``
        carries the passages, their shingles, hashes and links when a bulk load computed
        them ahead (see :func:`prepare_passages`). ``created`` gets the
        ``(id, text)`` of each passage stored new (to embed once committed).
        A bulk load passes its transaction's ``stamp``, the documents its
        uris named when it began (``latest``, kept up to date here), and
        ``rows``, where a new document's rows wait to be stored with the
        batch's. ``adding``: the write may only add (``Storage.write``'s
        role ``add``); a document that needs more (a new version, or
        entities linked to the passages it has) raises :class:`_NotAdding`
        before it changes anything."""
        doc_hash = text.content_hash(body)
        prepared = self._within_limit(body, prepared)
        pieces = prepared[0]
        stamp = stamp or now()
        if touch:  # (held back: it goes with the look-up, in the transaction's first message)
            tx.namespaces.touch(namespace)
        previous = _previous(tx, namespace, uri, latest)
        reuse: dict[str, list[str]] = {}
        if previous is not None:
            doc_id, last = previous.document.id, previous.version
            if rows is not None and rows.holds(doc_id):
                rows.store()  # (what it reads of its last version waits in the batch)
            if adding and names:
                raise _NotAdding  # (linked to its passages even when unchanged)
            if _unchanged(tx, namespace, previous, (doc_hash, title, metadata), names):
                if counts_only:
                    return len(pieces), "unchanged"
                return _remembered(tx, doc_id, last)
            if adding:
                raise _NotAdding
            version = last + 1
            reuse = _reusable(tx, doc_id, last)
        else:
            doc_id, version = uuid7(), 1
        own = rows is None  # this document's rows are stored when it is done
        if own:
            rows = _Rows(tx, namespace, stamp)
        if previous is None:
            rows.documents.append(Document(doc_id, namespace, uri, stamp))
        rows.add_version(DocumentVersion(doc_id, version, doc_hash, title, metadata, stamp))
        if latest is not None and uri is not None:
            latest[uri] = LatestDocument(
                previous.document if previous else Document(doc_id, namespace, uri, stamp),
                version,
                rows.versions[-1],  # (this version's row, stored with the batch)
            )
        where = _Where(namespace, doc_id, version, specifics.document_stamps(metadata))
        big = report is not None and len(pieces) > 256
        progress = functools.partial(report, task="remember", documents=documents) if big else None
        self._passages(tx, rows, where, prepared, names, reuse, created, progress)
        if own:
            rows.store()
        if progress is not None:
            progress(True, phase="storing", done=len(pieces), total=len(pieces))
        return _finished(tx, where, len(pieces), reuse, counts_only)

    def _within_limit(self, body: str, prepared: Prepared | None) -> Prepared:
        """The document's passages (split now unless a bulk load did it
        ahead), refused when there are more than the limit."""
        limit = self.limits.passages_per_document
        if prepared is None:
            prepared = prepare_passages(body, limit)
        if len(prepared[0]) > limit:
            raise BadInput(
                f"document has {len(prepared[0])} passages; the limit is {limit} "
                "(MEMORS_MAX_PASSAGES)"
            )
        return prepared

    def _passages(
        self,
        tx: Tx,
        rows: _Rows,
        where: _Where,
        prepared: Prepared,
        names: list[str],
        reuse: dict[str, list[str]],
        created: list[tuple[str, str]] | None,
        progress: Callable[..., None] | None,
    ) -> None:
        """Each passage of the document: one of the previous version's
        when its text is unchanged (``reuse``), else a new row with its
        mentions and, when it names an entity, its profile. New passages
        and their mentions go to the store in batches (one round trip
        each on a server engine), the entity names looked up once."""
        namespace, doc_id, version = where.namespace, where.document, where.version
        ensure = tx.entities.ensure
        # No plugin extracts entities (the usual case): no hook call per passage.
        extract = self.plugins.has_entity_extractors
        known = rows.entities  # (the batch's: one look-up a name a transaction)

        def entity(name: str) -> str:
            if name not in known:
                known[name] = ensure(name, namespace).id
            return known[name]

        doc_entities = [entity(n) for n in names]

        pieces, blobs, hashes, links, ready = prepared
        for position, (piece, shingles, phash, named, made) in enumerate(
            zip(pieces, blobs, hashes, links, ready, strict=True)
        ):
            if progress is not None and not position & 127:  # a big document: say how far
                progress(phase="storing", done=position, total=len(pieces), unit="passages")
            kept = reuse.get(phash)
            if kept:
                passage = kept.pop(0)
            else:
                passage = uuid7()
                rows.passages.append(
                    NewPassage(passage, doc_id, version, position, piece, phash, shingles)
                )
                if created is not None:
                    created.append((passage, piece))
                extracted = self.plugins.extract_entities(piece, namespace) if extract else []
                linked = list(dict.fromkeys([*doc_entities, *map(entity, [*named, *extracted])]))
                if linked:
                    rows.links.extend((passage, e) for e in linked)
                    # A passage that mentions an entity may be a page's source:
                    # its token data for the substitution check is computed now, once.
                    if made is None:  # not made ahead by the bulk loader's helper
                        made = specifics.profile(piece, where.stamps)
                    elif where.stamps:
                        made = specifics.dated(made, where.stamps)
                    rows.profiles.append((passage, specifics.dump_profile(made)))
                if len(rows.passages) >= STORE_BATCH:
                    rows.store()
            if version > 1:  # version 1's order is the passages' own positions
                rows.placed.append((doc_id, version, position, passage))


class _Where:
    """Where a document's passages go: its namespace, id and version, and
    the dates its metadata stamps on them."""

    __slots__ = ("document", "namespace", "stamps", "version")

    def __init__(self, namespace: str, document: str, version: int, stamps: Any) -> None:
        self.namespace = namespace
        self.document = document
        self.version = version
        self.stamps = stamps


def _previous(
    tx: Tx, namespace: str, uri: str | None, latest: dict[str, LatestDocument] | None
) -> LatestDocument | None:
    """The document ``uri`` names and its latest version, if any (from the
    bulk load's ``latest`` when it has one)."""
    if uri is None:
        return None
    if latest is not None:
        return latest.get(uri)
    return tx.documents.latest_by_uri(namespace, uri)


def _unchanged(
    tx: Tx,
    namespace: str,
    previous: LatestDocument,
    same_as: tuple[str, str | None, dict],
    names: list[str],
) -> bool:
    """Whether the document's latest version already has this text hash,
    title and metadata (``same_as``); if so the entities named this time
    are still linked to its passages, and no new version is made. (The
    version's row as its look-up read it, else read now.)"""
    doc_id, last = previous.document.id, previous.version
    same = previous.last or tx.documents.version(doc_id, last)
    doc_hash, title, metadata = same_as
    if same is None or (same.text_hash, same.title, _dumps(same.metadata)) != (
        doc_hash,
        title,
        _dumps(metadata),
    ):
        return False
    if names:
        passages = tx.documents.version_passages(doc_id, last)
        for name in names:
            entity = tx.entities.ensure(name, namespace).id
            for passage in passages:
                tx.passages.mention(passage, (entity,))
    return True


def _reusable(tx: Tx, doc_id: str, last: int) -> dict[str, list[str]]:
    """The live passages of version ``last`` by their text hash, in the
    version's order: a new version keeps the ones whose text it still has.
    (One look-up, where it was two a passage.)"""
    reuse: dict[str, list[str]] = {}
    for passage, digest in tx.passages.live_hashes_of_version(doc_id, last):
        reuse.setdefault(digest, []).append(passage)
    return reuse


def _finished(
    tx: Tx,
    where: _Where,
    passages: int,
    reuse: dict[str, list[str]],
    counts_only: bool,
) -> Remembered | tuple[int, str]:
    """Supersede what the new version no longer has, log the document once
    committed, and answer (counts only for a bulk load)."""
    tx.tombstones.add_many(
        where.namespace,
        "passage",
        [passage for leftovers in reuse.values() for passage in leftovers],
        "superseded",
        f"document version {where.version}",
    )
    tx.after_commit(
        log.info,
        "document_remembered",
        namespace=where.namespace,
        document=address("document", where.document),
        version=where.version,
        passages=passages,
    )
    if counts_only:
        return passages, ("new" if where.version == 1 else "new_versions")
    return _remembered(tx, where.document, where.version)


#: A batch taken from the helper that nothing was read ahead for yet.
_UNREAD = object()


class _NextBatch:
    """The next batch of a bulk load made ready on a thread of its own while
    this one commits: its passages taken from the helper process, then what
    storing them will need read ahead (:meth:`Storage.read_ahead`: on
    PostgreSQL their search terms counted, the flush of the batch before
    them keeping the server busy meanwhile). A read ahead that fails is
    done again in the batch's own transaction."""

    def __init__(self, load: _BulkLoad, docs: list[tuple]) -> None:
        self.load = load
        self.docs = docs
        self.prepared: list[Prepared] | None = None
        self.found: object = None
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="memors-next-batch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.prepared = self.load.worker.collect(self.docs)
        except BaseException as exc:  # (given to the load's own thread)
            self.failed = exc
            return
        if self.load.worker.stopped:
            return  # (the load stopped meanwhile: nothing is read for it)
        self.found = self.load.read_ahead(self.docs, self.prepared)

    def result(self) -> tuple[list[Prepared], object]:
        """The batch's prepared passages and what was read ahead for them."""
        self.thread.join()
        if self.failed is not None:
            raise self.failed
        assert self.prepared is not None
        return self.prepared, self.found


class _BulkLoad:
    """One bulk load (:meth:`Ingest.many`): documents gathered into batches,
    each stored in one transaction. From the second batch on, a helper
    process splits and shingles the next batch while this process stores
    the current one, and a thread takes it from the helper and reads ahead
    for it while the current one commits (:class:`_NextBatch`)."""

    def __init__(self, ingest: Ingest, namespace: str, report: Reporter) -> None:
        self.ingest = ingest
        self.namespace = namespace
        self.report = report
        self.totals: Counter[str] = Counter()
        self.pending: list[tuple] = []
        self.worker = _ShingleWorker()
        self.ahead: list[tuple[list[tuple], bool]] = []  # the batch the worker has
        self.next: _NextBatch | None = None  # that batch taken and read ahead for

    def run(self, documents: Iterable[tuple], sizes: Iterator[int]) -> None:
        """Store the (checked) documents, in batches of ``sizes``. When
        reading or checking one fails, everything before it is stored,
        whatever raised (a bad line, an unreadable file), and the error says
        how much, so a load can resume."""
        try:
            size = next(sizes)
            for doc in documents:
                self.pending.append(doc)
                if len(self.pending) >= size:
                    self.flush()
                    size = next(sizes)
        except MemorsError as exc:
            try:
                self.drain()
            finally:
                self.close()
            stored = self.totals["documents"]
            raise type(exc)(
                f"{exc.message} (the {stored} document(s) before it were stored)", code=exc.code
            ) from None
        except BaseException:
            self.close()
            raise
        try:
            self.drain()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the helper process (a batch taken from it ahead is dropped)."""
        self.worker.stop()
        self.next = None

    def collect(self, docs: list[tuple]) -> tuple[list[Prepared], object]:
        """The prepared passages of the batch the helper has (``docs``), and
        what was read ahead for them (None: nothing was; ``_UNREAD``: not
        yet, which :meth:`store` does once the helper has the next batch)."""
        taken, self.next = self.next, None
        if taken is not None:
            assert taken.docs is docs
            return taken.result()
        return self.worker.collect(docs), _UNREAD

    def read_ahead(self, docs: list[tuple], prepared: list[Prepared]) -> object:
        """What storing the batch will need, read outside any transaction
        (:meth:`Storage.read_ahead`); None when that fails: the batch's
        own transaction reads it again."""
        try:
            documents = [(d[1], p[0]) for d, p in zip(docs, prepared, strict=True)]
            return self.ingest.storage.read_ahead(self.namespace, documents)
        except Exception as exc:
            log.debug("read_ahead_failed", error=str(exc))
            return None

    def flush(self, more: bool = True) -> None:
        """Hand the pending batch to the worker and store the one it finished;
        the last batch (no ``more``, no worker running) is prepared here."""
        docs = list(self.pending)
        self.pending.clear()
        previous = self.ahead.pop() if self.ahead else None
        done = self.collect(previous[0]) if previous else None
        if more or self.worker.running:
            self.ahead.append((docs, self.worker.send([(d[0], bool(d[3])) for d in docs])))
            if previous and done:
                self.store(previous[0], *done)
        else:
            if previous and done:
                self.store(previous[0], *done)
            self.store(docs, self.prepare_here(docs))

    def prepare_here(self, docs: list[tuple]) -> list[Prepared]:
        """Prepare a batch in this process, saying so while it runs."""
        ready = []
        for n, d in enumerate(docs):
            self.report(
                n == 0,
                task="remember",
                phase="preparing",
                documents=self.totals["documents"],
                done=n,
                total=len(docs),
                unit="documents",
            )
            ready.append(prepare_passages(d[0]))
        return ready

    def drain(self) -> None:
        """Store what is pending and what the worker has."""
        if self.pending:
            self.flush(more=False)
        if self.ahead:
            docs, _sent = self.ahead.pop()
            self.store(docs, *self.collect(docs))

    def store(self, docs: list[tuple], prepared: list[Any], found: object = None) -> None:
        """Store one batch in one transaction (``found``: what was read ahead
        for it); counted once it is committed. The batch the helper has is
        taken and read ahead for while this one commits."""
        if found is _UNREAD:
            # (the first batch is read ahead for here, before its transaction:
            # on PostgreSQL a namespace's first bulk load then makes its search
            # index outside the batch, where the next batch's read ahead, while
            # this one commits, would wait for it)
            found = self.read_ahead(docs, prepared)
        ingest, namespace, report = self.ingest, self.namespace, self.report
        passages, fared = 0, Counter()
        created: list[tuple[str, str]] | None = [] if ingest.makes_vectors else None
        try:
            # (in one pipeline: the batch's rows go to the server as they are
            # made, their answers waited for by the next read or the commit)
            with ingest.storage.write(namespace=namespace, role="content") as tx, tx.pipelined():
                tx.namespaces.touch(namespace)
                # One time for the transaction's rows; the documents its
                # uris name already, looked up at once; new rows and new
                # versions stored together (a document whose last version
                # waits among them has what waits stored before it reads).
                stamp = now()
                latest = tx.documents.latest_by_uris(
                    namespace, [d[1] for d in docs if d[1] is not None]
                )
                # (a document it has already mostly keeps its passages: the
                # few it adds are counted as they are sent)
                new = [p[0] for d, p in zip(docs, prepared, strict=True) if d[1] not in latest]
                tx.passages.coming(namespace, [piece for pieces in new for piece in pieces], found)
                rows = _Rows(tx, namespace, stamp)
                for n, (doc, prep) in enumerate(zip(docs, prepared, strict=True)):
                    stored = self.totals["documents"] + n
                    report(
                        task="remember",
                        phase="storing",
                        documents=stored,
                        done=stored,
                        unit="documents",
                    )
                    pieces, outcome = ingest._one(
                        tx,
                        namespace,
                        *doc,
                        counts_only=True,
                        prepared=prep,
                        touch=False,
                        report=report,
                        documents=stored,
                        created=created,
                        stamp=stamp,
                        latest=latest,
                        rows=rows,
                    )
                    passages += pieces
                    fared[outcome] += 1
                rows.store()
                if self.ahead:
                    self.next = _NextBatch(self, self.ahead[-1][0])
        except BaseException:
            self.ahead.clear()  # the load stops here: nothing after this batch is stored
            self.pending.clear()
            raise
        self.totals["passages"] += passages  # counted once the batch is committed
        self.totals["documents"] += len(docs)
        self.totals.update(fared)
        stored = self.totals["documents"]
        ingest._new_passages(namespace, created)
        report(
            True,
            task="remember",
            phase="storing",
            documents=stored,
            done=stored,
            unit="documents",
        )


class _ShingleWorker:
    """The helper process of a bulk load (``memors_core.engine._shingle_worker``).

    Started on first use; at most one batch is out at a time. If it cannot
    start or fails, the batch is prepared in this process and the load goes
    on without it.
    """

    def __init__(self) -> None:
        self.proc: Any = None
        self.broken = False
        #: The load is over (ended or stopped): a batch still out is not
        #: prepared here either.
        self.stopped = False

    @property
    def running(self) -> bool:
        return self.proc is not None

    def send(self, documents: list[tuple[str, bool]]) -> bool:
        """Hand documents to the worker (each its text, and whether it names
        entities); False if it is not available."""
        if self.broken:
            return False
        try:
            if self.proc is None:
                import subprocess
                import sys

                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "memors_core.engine._shingle_worker"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            import pickle

            from memors_core.engine._shingle_worker import write_frame

            write_frame(self.proc.stdin, pickle.dumps(documents, protocol=5))
            return True
        except Exception:
            self._fail()
            return False

    def collect(self, docs: list[tuple]) -> list[Prepared]:
        """The prepared passages of the batch last sent (or prepared here)."""
        if self.proc is not None and not self.broken:
            try:
                import pickle

                from memors_core.engine._shingle_worker import read_frame

                frame = read_frame(self.proc.stdout)
                if frame is not None:
                    prepared = pickle.loads(frame)
                    if len(prepared) == len(docs):
                        return prepared
            except Exception:
                pass
            self._fail()
        if self.stopped:
            return []
        return [prepare_passages(d[0]) for d in docs]

    def _fail(self) -> None:
        self.broken = True
        self.close()

    def stop(self) -> None:
        """End the worker for good, when the load is over."""
        self.stopped = True
        self.close()

    def close(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except Exception:
                    pass
            try:
                proc.wait(timeout=5)
            except Exception:
                proc.kill()
