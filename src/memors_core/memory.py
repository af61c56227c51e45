"""The service: every operation of SPEC §4 as a method of :class:`Memory`.

The CLI and the MCP server are thin wrappers over this class; they call the
same methods and print ``wire.to_json`` of what comes back.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from memors_core.domain import dates, text
from memors_core.domain.dates import now
from memors_core.domain.ids import address, parse_address, uuid7
from memors_core.domain.jsonl import parse_line
from memors_core.domain.model import (
    DocumentView,
    EntityList,
    EntitySummary,
    EntityView,
    FactList,
    FactRecorded,
    FactView,
    Forgotten,
    ItemList,
    ItemSummary,
    ItemView,
    MergeProposed,
    PageView,
    PassageRef,
    PassageView,
    Purged,
    Remembered,
    RememberedMany,
    SearchResults,
)
from memors_core.domain.rows import NewPassage
from memors_core.engine.progress import Progress, Reporter
from memors_core.errors import BadInput, MemorsError, NotFound, Refused
from memors_core.log import get_logger
from memors_core.plugins.manager import build_plugin_manager, call_each, collect_kinds
from memors_core.storage.sqlite.connection import Store
from memors_core.storage.sqlite.ops import Operations, check_namespace, live

log = get_logger("memors")

GRANULARITIES = ("passage", "page", "fact", "entity", "all")


def limit_from_env(name: str, default: int) -> int:
    """A positive whole-number setting from the environment, ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadInput(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise BadInput(f"{name} must be a positive integer, got {raw!r}")
    return value


FIELD_SETTING = "MEMORS_MAX_FIELD_CHARS"
METADATA_DEPTH = 64


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels
    (counted without recursion, so any depth can be asked about)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class Limits:
    """Explicit limits on input, each overridable by an environment variable."""

    def __init__(self) -> None:
        self.document_bytes = limit_from_env("MEMORS_MAX_DOCUMENT_BYTES", 10 * 1024 * 1024)
        self.passages_per_document = limit_from_env("MEMORS_MAX_PASSAGES", 100_000)
        self.page_bytes = limit_from_env("MEMORS_MAX_PAGE_BYTES", 1024 * 1024)
        self.query_chars = limit_from_env("MEMORS_MAX_QUERY_CHARS", 10_000)
        self.field_chars = limit_from_env("MEMORS_MAX_FIELD_CHARS", 10_000)


def _opt_str(value: Any, field: str, limit: int, setting: str = "") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInput(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise BadInput(
            f"{field} is too long ({len(value)} characters; at most {limit}"
            f"{', ' + setting if setting else ''})"
        )
    if "\x00" in value:
        raise BadInput(f"{field} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # e.g. undecodable bytes in a command-line argument
        raise BadInput(f"{field} is not valid text (it contains unpaired surrogates)") from None
    return value


def _req_str(value: Any, field: str, limit: int, setting: str = "") -> str:
    out = _opt_str(value, field, limit, setting)
    if out is None or not out.strip():
        raise BadInput(f"{field} must not be empty")
    return out


class Memory:
    """A memors store: open one with :meth:`Memory.open`.

    Methods take ``namespace="default"`` and return attrs objects (see
    :mod:`memors_core.domain.model`); :func:`memors_core.wire.to_json` gives their
    JSON. A Memory may be shared by threads: calls are serialised.
    """

    def __init__(self, store: Store, pm: Any = None) -> None:
        self.store = store
        if pm is None:  # the kinds were collected (and checked) while it was built
            self.pm = build_plugin_manager()
            self.kinds = self.pm.kinds
        else:  # a caller's manager may have gained plugins since
            self.pm = pm
            self.kinds = collect_kinds(pm)
        #: Installed plugins that failed to load and were set aside: entry-point
        #: name -> what went wrong, one line. Everything else works; their kinds
        #: (a kind is named like its plugin) cannot be compacted or submitted.
        self.plugin_errors: dict[str, str] = getattr(self.pm, "plugin_errors", {})
        self.limits = Limits()
        self.ops = Operations(store, self.limits)
        self._lock = threading.RLock()

    @classmethod
    def open(
        cls, path: str | os.PathLike[str] | None = None, *, plugin_manager: Any = None
    ) -> Memory:
        """Open (creating if needed) the store at ``path`` (default per SPEC §3).

        A purge that was killed after its erasure committed is finished here
        (its FTS merges, VACUUM and WAL checkpoint), unless the store is busy.
        """
        from memors_core.engine.purge import finish_pending

        store = Store.open(path)
        try:
            finish_pending(store, wait=False)
        except BaseException:
            store.close()
            raise
        return cls(store, plugin_manager)

    @property
    def path(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- remember --------------------------------------------------------------

    def _extract_entities(self, passage: str, namespace: str) -> list[str]:
        results, _errors = call_each(
            self.pm.hook.memors_extract_entities, text=passage, namespace=namespace
        )
        names: list[str] = []
        for plugin, value in results:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list | tuple):
                # A plugin's bad answer is its own problem, not the caller's.
                log.warning("plugin_bad_result", plugin=plugin, hook="memors_extract_entities")
                continue
            for v in value:
                if isinstance(v, str) and v.strip() and len(" ".join(v.split())) <= 200:
                    names.append(v)
                else:
                    log.warning("plugin_bad_result", plugin=plugin, hook="memors_extract_entities")
        return names

    def _check_document(
        self, text_: Any, uri: Any, title: Any, entities: Any, metadata: Any
    ) -> tuple[str, str | None, str | None, list[str], dict]:
        if not isinstance(text_, str):
            raise BadInput(f"text must be a string, got {type(text_).__name__}")
        size = len(text_.encode("utf-8", "surrogatepass"))
        if size > self.limits.document_bytes:
            raise BadInput(
                f"document too large ({size} bytes; the limit is {self.limits.document_bytes}, "
                "set MEMORS_MAX_DOCUMENT_BYTES to change it)"
            )
        if "\x00" in text_:
            raise BadInput("text contains NUL characters (binary data is not text)")
        try:
            text_.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput("text contains unpaired surrogates (not valid Unicode)") from None
        if not text_.strip():
            raise BadInput("text is empty: there is nothing to remember")
        uri = _opt_str(uri, "uri", self.limits.field_chars, FIELD_SETTING)
        title = _opt_str(title, "title", self.limits.field_chars, FIELD_SETTING)
        if title is None:  # a Markdown document's first `# Heading`
            title = text.first_heading(text_, min(500, self.limits.field_chars))
        if entities is None:
            entities = []
        if isinstance(entities, str):
            entities = [entities]
        if not isinstance(entities, list | tuple):
            raise BadInput("entities must be a list of names")
        names = [_req_str(e, "an entity name", 200) for e in entities]
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise BadInput("metadata must be a JSON object")
        if _nested_deeper_than(metadata, METADATA_DEPTH):
            # Deeper would be stored, then fail every read (recursion limits).
            raise BadInput(f"metadata is nested too deeply (at most {METADATA_DEPTH} levels)")
        try:
            json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise BadInput(f"metadata must be plain JSON: {exc}") from None
        return text_, uri, title, names, metadata

    def remember(
        self,
        text: str,
        uri: str | None = None,
        title: str | None = None,
        entities: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str = "default",
        *,
        progress: Callable[[Progress], None] | None = None,
    ) -> Remembered:
        """Store one document; returns its address, its passages and the
        entities its passages mention. ``progress`` gets a
        :class:`~memors_core.engine.progress.Progress` now and then (passages
        prepared, then stored)."""
        check_namespace(namespace)
        doc = self._check_document(text, uri, title, entities, metadata)
        report = Reporter(progress)
        prepared = prepare_passages(doc[0], self.limits.passages_per_document, report)
        with self._lock, self.store.write():
            return self._remember_one(namespace, *doc, prepared=prepared, report=report)

    def remember_many(
        self,
        documents: Iterable[dict[str, Any]],
        namespace: str = "default",
        *,
        batch: int = 500,
        progress: Callable[[Progress], None] | None = None,
        where: Callable[[int], str] | None = None,
    ) -> RememberedMany:
        """Store many documents, one transaction per ``batch``.

        Each document is a mapping with ``text`` and optional ``uri``,
        ``title``, ``entities``, ``metadata``. A bad document stops the load
        with an error naming it (``where(n)`` names the n-th, counting from
        1; default ``document n``); the batches before it stay stored.
        ``progress`` gets a :class:`~memors_core.engine.progress.Progress` now and
        then: ``documents`` stored so far (phase ``storing``, or
        ``preparing`` while a batch is split in this process), with a big
        document's passages as ``done`` of ``total``.
        """
        check_namespace(namespace)
        name = where or (lambda n: f"document {n}")
        totals = Counter()
        pending: list[tuple] = []
        report = Reporter(progress)

        # From the second batch on, a helper process splits and shingles the
        # next batch while this process stores the current one.
        worker = _ShingleWorker()
        ahead: list[tuple[list[tuple], bool]] = []  # the batch the worker has

        def store_batch(docs: list[tuple], prepared: list[Any]) -> None:
            passages, fared = 0, Counter()
            try:
                with self._lock, self.store.write():
                    self.store.touch_namespace(namespace)
                    for n, (doc, prep) in enumerate(zip(docs, prepared, strict=True)):
                        stored = totals["documents"] + n
                        report(
                            task="remember",
                            phase="storing",
                            documents=stored,
                            done=stored,
                            unit="documents",
                        )
                        pieces, outcome = self._remember_one(
                            namespace,
                            *doc,
                            counts_only=True,
                            prepared=prep,
                            touch=False,
                            report=report,
                            documents=stored,
                        )
                        passages += pieces
                        fared[outcome] += 1
            except BaseException:
                ahead.clear()  # the load stops here: nothing after this batch is stored
                pending.clear()
                raise
            totals["passages"] += passages  # counted once the batch is committed
            totals["documents"] += len(docs)
            totals.update(fared)
            stored = totals["documents"]
            report(
                True,
                task="remember",
                phase="storing",
                documents=stored,
                done=stored,
                unit="documents",
            )

        def flush(more: bool = True) -> None:
            docs = list(pending)
            pending.clear()
            previous = ahead.pop() if ahead else None
            done = worker.collect(previous[0]) if previous else None
            if more or worker.running:
                # Hand this batch to the worker, then store the one it finished.
                ahead.append((docs, worker.send([d[0] for d in docs])))
                if previous:
                    store_batch(previous[0], done)
            else:
                if previous:
                    store_batch(previous[0], done)
                ready = []
                for n, d in enumerate(docs):  # in this process: say so while it runs
                    stored = totals["documents"]
                    report(
                        n == 0,
                        task="remember",
                        phase="preparing",
                        documents=stored,
                        done=n,
                        total=len(docs),
                        unit="documents",
                    )
                    ready.append(prepare_passages(d[0]))
                store_batch(docs, ready)

        def drain() -> None:
            if pending:
                flush(more=False)
            if ahead:
                docs, _sent = ahead.pop()
                store_batch(docs, worker.collect(docs))

        before = self._entity_count(namespace)
        try:
            for n, raw in enumerate(documents, 1):
                if not isinstance(raw, dict):
                    raise BadInput(f"{name(n)}: expected a JSON object")
                extra = set(raw) - {"text", "uri", "title", "entities", "metadata"}
                if extra:
                    raise BadInput(f"{name(n)}: unexpected field(s) {', '.join(sorted(extra))}")
                try:
                    pending.append(
                        self._check_document(
                            raw.get("text"),
                            raw.get("uri"),
                            raw.get("title"),
                            raw.get("entities"),
                            raw.get("metadata"),
                        )
                    )
                except BadInput as exc:
                    raise BadInput(f"{name(n)}: {exc.message}") from None
                if len(pending) >= batch:
                    flush()
        except MemorsError as exc:
            # Everything before the bad document is stored, whatever raised
            # (a bad line, an unreadable file): say how much, so a load can resume.
            try:
                drain()
            finally:
                worker.close()
            stored = totals["documents"]
            raise type(exc)(
                f"{exc.message} (the {stored} document(s) before it were stored)", code=exc.code
            ) from None
        except BaseException:
            worker.close()
            raise
        try:
            drain()
        finally:
            worker.close()
        return RememberedMany(
            documents=totals["documents"],
            passages=totals["passages"],
            entities=self._entity_count(namespace) - before,
            new=totals["new"],
            new_versions=totals["new_versions"],
            unchanged=totals["unchanged"],
        )

    def _entity_count(self, namespace: str) -> int:
        return self.store.scalar("SELECT COUNT(*) FROM entities WHERE namespace = ?", (namespace,))

    def _remember_one(
        self,
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
    ) -> Remembered | tuple[int, str]:
        """Store one document; with ``counts_only`` return just how many
        passages it has and how it fared (``new``, ``new_versions`` or
        ``unchanged``: bulk loads need no addresses back). ``prepared``
        carries the passages, their shingles, hashes and links when a bulk load computed
        them ahead (see :func:`prepare_passages`)."""
        store, ops = self.store, self.ops
        if touch:
            store.touch_namespace(namespace)
        doc_hash = text.content_hash(body)
        if prepared is None:
            prepared = prepare_passages(body, self.limits.passages_per_document)
        pieces, blobs, hashes, links = prepared
        # No plugin extracts entities (the usual case): no hook call per passage.
        extract = bool(self.pm.hook.memors_extract_entities.get_hookimpls())
        if len(pieces) > self.limits.passages_per_document:
            raise BadInput(
                f"document has {len(pieces)} passages; the limit is "
                f"{self.limits.passages_per_document} (MEMORS_MAX_PASSAGES)"
            )
        stamp = now()
        meta_json = ops.dumps(metadata)

        previous = None
        if uri is not None:
            previous = store.one(
                f"""SELECT d.id, (SELECT MAX(version) FROM document_versions v
                                 WHERE v.document = d.id)
                    FROM documents d WHERE d.namespace = ? AND d.uri = ? AND {live("d")}
                    ORDER BY d.rowid DESC LIMIT 1""",
                (namespace, uri),
            )

        reuse: dict[str, list[str]] = {}
        if previous is not None:
            doc_id, last = previous
            same = store.one(
                "SELECT text_hash, title, metadata FROM document_versions "
                "WHERE document = ? AND version = ?",
                (doc_id, last),
            )
            if same == (doc_hash, title, meta_json):
                # No new version; entities named this time are still linked.
                for name in names:
                    entity = ops.ensure_entity(name, namespace)[0]
                    store.conn.executemany(
                        "INSERT OR IGNORE INTO mentions(passage, entity) VALUES (?, ?)",
                        [(p, entity) for p in ops.version_passages(doc_id, last)],
                    )
                return (len(pieces), "unchanged") if counts_only else self._remembered(doc_id, last)
            version = last + 1
            for passage in ops.version_passages(doc_id, last):
                if ops.is_live(passage):
                    phash = store.scalar("SELECT hash FROM passages WHERE id = ?", (passage,))
                    reuse.setdefault(phash, []).append(passage)
        else:
            doc_id, version = uuid7(), 1
            store.conn.execute(
                "INSERT INTO documents(id, namespace, uri, created_at) VALUES (?, ?, ?, ?)",
                (doc_id, namespace, uri, stamp),
            )
        store.conn.execute(
            "INSERT INTO document_versions(document, version, text_hash, title, metadata, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (doc_id, version, doc_hash, title, meta_json, stamp),
        )

        doc_entities = [ops.ensure_entity(n, namespace)[0] for n in names]
        mentioned: dict[str, None] = dict.fromkeys(doc_entities)
        big = report is not None and len(pieces) > 256
        for position, (piece, shingles, phash, named) in enumerate(
            zip(pieces, blobs, hashes, links, strict=True)
        ):
            if big and not position & 127:  # a big document: say how far
                report(
                    task="remember",
                    phase="storing",
                    documents=documents,
                    done=position,
                    total=len(pieces),
                    unit="passages",
                )
            kept = reuse.get(phash)
            if kept:
                passage = kept.pop(0)
            else:
                passage = uuid7()
                store.tx.passages.insert(
                    namespace,
                    NewPassage(passage, doc_id, version, position, piece, phash, shingles),
                    stamp,
                )
                linked = list(doc_entities)
                extracted = self._extract_entities(piece, namespace) if extract else []
                for name in [*named, *extracted]:
                    linked.append(ops.ensure_entity(name, namespace)[0])
                for entity in dict.fromkeys(linked):
                    store.conn.execute(
                        "INSERT OR IGNORE INTO mentions(passage, entity) VALUES (?, ?)",
                        (passage, entity),
                    )
                    mentioned[entity] = None
            if version > 1:  # version 1's order is the passages' own positions
                store.conn.execute(
                    "INSERT INTO version_passages(document, version, position, passage) "
                    "VALUES (?, ?, ?, ?)",
                    (doc_id, version, position, passage),
                )
        if big:
            n = len(pieces)
            report(True, task="remember", phase="storing", documents=documents, done=n, total=n)
        for leftovers in reuse.values():
            for passage in leftovers:
                ops.tombstone(
                    namespace, "passage", passage, "superseded", f"document version {version}"
                )
        store.after_commit(
            log.info,
            "document_remembered",
            namespace=namespace,
            document=address("document", doc_id),
            version=version,
            passages=len(pieces),
        )
        if counts_only:
            return len(pieces), ("new" if version == 1 else "new_versions")
        return self._remembered(doc_id, version)

    def _remembered(self, doc_id: str, version: int) -> Remembered:
        # The live passages only: remembering the same text again does not
        # revive a passage forgotten since, so it is not listed as if it were.
        passages = [p for p in self.ops.version_passages(doc_id, version) if self.ops.is_live(p)]
        entities: dict[str, None] = {}
        for passage in passages:
            for (canonical,) in self.store.all(
                "SELECT e.canonical FROM mentions m JOIN entities e ON e.id = m.entity "
                "WHERE m.passage = ?",
                (passage,),
            ):
                entities[canonical] = None
        return Remembered(
            document=address("document", doc_id),
            passages=[address("passage", p) for p in passages],
            entities=[address("entity", e) for e in entities],
        )

    # --- facts ---------------------------------------------------------------------

    def record_fact(
        self,
        subject: str,
        predicate: str,
        value: str,
        valid_from: str | None = None,
        valid_to: str | None = None,
        source: str | None = None,
        namespace: str = "default",
    ) -> FactRecorded:
        """Store a fact about ``subject`` (an entity name, created if new)."""
        check_namespace(namespace)
        lim = self.limits.field_chars
        subject = _req_str(subject, "subject", 200)
        predicate = _req_str(predicate, "predicate", lim, FIELD_SETTING)
        value = _req_str(value, "value", lim, FIELD_SETTING)
        valid_from = _opt_str(valid_from, "valid_from", 64)
        valid_to = _opt_str(valid_to, "valid_to", 64)
        source = _opt_str(source, "source", 200)
        with self._lock, self.store.write():
            self.store.touch_namespace(namespace)
            ident = self.ops.record_fact(
                namespace, subject, predicate, value, valid_from, valid_to, source
            )
        log.info("fact_recorded", namespace=namespace, fact=address("fact", ident))
        return FactRecorded(fact=address("fact", ident))

    # --- merges ----------------------------------------------------------------------

    def propose_merge(self, entities: list[str], namespace: str = "default") -> MergeProposed:
        """Open a merge candidate between two entities (names or addresses);
        the first is the one that survives if the merge is accepted."""
        check_namespace(namespace)
        if not isinstance(entities, list | tuple) or len(entities) != 2:
            raise BadInput("propose_merge takes exactly two entity names")
        names = [_req_str(e, "an entity name", 200) for e in entities]
        with self._lock, self.store.write():
            first, second = (self.ops.entity_id(n, namespace) for n in names)
            if first == second:
                raise BadInput(f"{names[0]!r} and {names[1]!r} are already one entity")
            cid, status = self.ops.open_merge_candidate(namespace, first, second, "proposed")
            if status == "rejected":
                raise Refused(
                    f"merging {names[0]!r} and {names[1]!r} was rejected before; "
                    "a rejected pair is never proposed again"
                )
        return MergeProposed(
            candidate=cid,
            entities=[address("entity", first), address("entity", second)],
            status=status,
        )

    # --- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        granularity: str = "passage",
        limit: int = 10,
        as_of: str | None = None,
        namespace: str = "default",
    ) -> SearchResults:
        """Full-text search (BM25, words OR-ed) over live rows."""
        check_namespace(namespace)
        if not isinstance(query, str):
            raise BadInput(f"query must be a string, got {type(query).__name__}")
        if len(query) > self.limits.query_chars:
            raise BadInput(
                f"query too long ({len(query)} characters; at most {self.limits.query_chars}, "
                "MEMORS_MAX_QUERY_CHARS)"
            )
        if granularity not in GRANULARITIES:
            raise BadInput(
                f"unknown granularity {granularity!r}: use one of {', '.join(GRANULARITIES)}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise BadInput(f"limit must be an integer from 1 to 1000, got {limit!r}")
        as_of_ts = dates.normalise(as_of, "as_of") if as_of is not None else None
        match = fts_query(query)
        if match is None:
            return SearchResults(results=[])
        from memors_core.engine import search as search_mod

        with self._lock, self.store.read():
            hits = search_mod.run(self.store, namespace, match, granularity, limit, as_of_ts)
        return SearchResults(results=hits)

    # --- get -----------------------------------------------------------------------------

    def get(self, address_: str, namespace: str = "default") -> Any:
        """One thing by address, with its links; forgotten and superseded
        rows are shown too, marked as such."""
        check_namespace(namespace)
        kind, ident = parse_address(address_)
        with self._lock, self.store.read():
            view = getattr(self, f"_get_{kind}")(ident, namespace)
        if view is None:
            raise NotFound(f"nothing at {address(kind, ident)} in namespace {namespace!r}")
        return view

    def _get_document(self, ident: str, namespace: str) -> DocumentView | None:
        row = self.store.one(
            "SELECT uri, created_at FROM documents WHERE id = ? AND namespace = ?",
            (ident, namespace),
        )
        if row is None:
            return None
        version, title, meta = self.store.one(
            "SELECT version, title, metadata FROM document_versions WHERE document = ? "
            "ORDER BY version DESC LIMIT 1",
            (ident,),
        )
        passages = [(p,) for p in self.ops.version_passages(ident, version)]
        versions = [
            {"version": v, "created_at": at, "title": t, "passages": n}
            for v, at, t, n in self.store.all(
                """SELECT v.version, v.created_at, v.title,
                          CASE WHEN v.version = 1
                               THEN (SELECT COUNT(*) FROM passages p
                                     WHERE p.document = v.document AND p.version = 1)
                               ELSE (SELECT COUNT(*) FROM version_passages l
                                     WHERE l.document = v.document AND l.version = v.version)
                          END
                   FROM document_versions v WHERE v.document = ? ORDER BY v.version""",
                (ident,),
            )
        ]
        state, record = self.ops.tombstone_record(ident) or ("live", None)
        return DocumentView(
            address=address("document", ident),
            type="document",
            status=state,
            uri=row[0],
            title=title,
            metadata=json.loads(meta),
            version=version,
            created_at=row[1],
            passages=[address("passage", p[0]) for p in passages],
            versions=versions,
            forgotten=record,
        )

    def _get_passage(self, ident: str, namespace: str) -> PassageView | None:
        row = self.store.one(
            "SELECT document, position, text, hash, created_at FROM passages "
            "WHERE id = ? AND namespace = ?",
            (ident, namespace),
        )
        if row is None:
            return None
        entities = self.store.all(
            "SELECT DISTINCT e.canonical FROM mentions m JOIN entities e ON e.id = m.entity "
            "WHERE m.passage = ?",
            (ident,),
        )
        state, record = self.ops.tombstone_record(ident) or ("live", None)
        return PassageView(
            address=address("passage", ident),
            type="passage",
            status=state,
            document=address("document", row[0]),
            position=row[1],
            text=row[2],
            hash=row[3],
            entities=[address("entity", e[0]) for e in entities],
            created_at=row[4],
            **{state: record} if record else {},
        )

    def _get_fact(self, ident: str, namespace: str) -> FactView | None:
        row = self.store.one(
            "SELECT f.subject, ce.name, f.predicate, f.value, f.valid_from, f.valid_to, f.source, "
            "f.recorded_at, f.to_ts, ce.id FROM facts f JOIN entities e ON e.id = f.subject "
            "JOIN entities ce ON ce.id = e.canonical WHERE f.id = ? AND f.namespace = ?",
            (ident, namespace),
        )
        if row is None:
            return None
        state, record = self.ops.tombstone_record(ident) or ("live", None)
        return FactView(
            address=address("fact", ident),
            type="fact",
            status=state,
            subject=address("entity", row[9]),
            subject_name=row[1],
            predicate=row[2],
            value=row[3],
            valid_from=row[4],
            valid_to=row[5],
            source=address("passage", row[6]) if row[6] else None,
            recorded_at=row[7],
            expired=row[8] is not None and row[8] <= dates.now_ts(),
            **{state: record} if record else {},
        )

    def _get_entity(self, ident: str, namespace: str) -> EntityView | None:
        row = self.store.one(
            "SELECT name, canonical FROM entities WHERE id = ? AND namespace = ?",
            (ident, namespace),
        )
        if row is None:
            return None
        name, canonical = row
        page = self.ops.current_page(canonical)
        merged = canonical != ident
        return EntityView(
            address=address("entity", ident),
            type="entity",
            status="superseded" if merged else "live",
            name=name,
            aliases=[] if merged else self.ops.aliases(ident),
            passages=self.ops.entity_passages(canonical),
            facts=self.ops.entity_facts(canonical),
            page=address("page", page[0]) if page else None,
            merged_into=address("entity", canonical) if merged else None,
        )

    def _get_page(self, ident: str, namespace: str) -> PageView | None:
        row = self.store.one(
            "SELECT pg.entity, pg.title, pg.content, pg.version, pg.previous, pg.flags, "
            "pg.created_at, pg.built_seq FROM pages pg WHERE pg.id = ? AND pg.namespace = ?",
            (ident, namespace),
        )
        if row is None:
            return None
        status, record = self.ops.tombstone_record(ident) or ("live", None)
        page_tuple = (ident, row[1], row[2], row[3], row[7], row[0])
        stale = status == "live" and self.ops.stale_reasons(page_tuple) is not None
        return PageView(
            address=address("page", ident),
            type="page",
            status=status,
            entity=address("entity", self.ops.entity_row(row[0])[3]),
            title=row[1],
            content=row[2],
            version=row[3],
            previous=address("page", row[4]) if row[4] else None,
            is_inference=1,
            sources=[address("passage", p) for p, _h in self.ops.page_sources(ident)],
            stale=stale,
            flags=json.loads(row[5]),
            created_at=row[6],
            **{status: record} if record else {},
        )

    def _get_item(self, ident: str, namespace: str) -> ItemView | None:
        from memors_core.engine.compaction import load_item

        item = load_item(self.store, int(ident), namespace)
        if item is None:
            return None
        return ItemView(
            address=address("item", item.id),
            type="item",
            status=item.status,
            id=item.id,
            kind=item.kind,
            fingerprint=item.fingerprint,
            payload=item.payload,
            resolution=item.resolution,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    # --- forget and purge ------------------------------------------------------------------

    def forget(
        self, address: str, reason: str | None = None, namespace: str = "default"
    ) -> Forgotten:
        """Tombstone a document (and its live passages), a passage, a fact or
        a page. Forgetting something already forgotten changes nothing."""
        check_namespace(namespace)
        kind, ident = parse_address(address)
        reason = _opt_str(reason, "reason", self.limits.field_chars, FIELD_SETTING)
        if kind not in ("document", "passage", "fact", "page"):
            raise BadInput(
                f"only documents, passages, facts and pages can be forgotten, not a {kind}"
            )
        table = {"document": "documents", "passage": "passages", "fact": "facts", "page": "pages"}
        with self._lock, self.store.write():
            if not self.store.one(
                f"SELECT 1 FROM {table[kind]} WHERE id = ? AND namespace = ?", (ident, namespace)
            ):
                raise NotFound(f"nothing at {address} in namespace {namespace!r}")
            done: list[str] = []
            if kind == "document":
                for (passage,) in self.store.all(
                    f"SELECT p.id FROM passages p WHERE p.document = ? AND {live('p')}", (ident,)
                ):
                    if self.ops.tombstone(
                        namespace, "passage", passage, "forgotten", reason or "document forgotten"
                    ):
                        done.append(f"memo://passage/{passage}")
            if self.ops.tombstone(namespace, kind, ident, "forgotten", reason):
                done.insert(0, f"memo://{kind}/{ident}")
            state = self.ops.state_of(ident)
        return Forgotten(address=f"memo://{kind}/{ident}", status=state, forgotten=done)

    def purge(self, address_: str, namespace: str = "default") -> Purged:
        """Erase a document, passage, fact or page for good (and the pages
        that cite erased passages), leaving an audit row without content."""
        from memors_core.engine.purge import purge

        check_namespace(namespace)
        kind, ident = parse_address(address_)
        with self._lock:
            return purge(self, namespace, kind, ident)

    # --- listings ---------------------------------------------------------------------------

    def entities(self, namespace: str = "default") -> EntityList:
        check_namespace(namespace)
        with self._lock, self.store.read():
            rows = self.store.all(
                "SELECT id FROM entities WHERE namespace = ? AND canonical = id ORDER BY name",
                (namespace,),
            )
            out = []
            for (ident,) in rows:
                page = self.ops.current_page(ident)
                out.append(
                    EntitySummary(
                        address=address("entity", ident),
                        name=self.ops.entity_row(ident)[2],
                        aliases=self.ops.aliases(ident),
                        passages=len(self.ops.entity_passage_ids(ident)),
                        facts=len(self.ops.entity_facts(ident)),
                        page=address("page", page[0]) if page else None,
                    )
                )
        return EntityList(namespace=namespace, entities=out)

    def entity(self, name: str, namespace: str = "default") -> EntityView:
        check_namespace(namespace)
        name = _req_str(name, "entity name", 200)
        with self._lock, self.store.read():
            ident = self.ops.entity_id(name, namespace)
            return self._get_entity(ident, namespace)

    def facts(self, subject: str | None = None, namespace: str = "default") -> FactList:
        check_namespace(namespace)
        if subject is not None:
            subject = _req_str(subject, "subject", 200)
        with self._lock, self.store.read():
            if subject is not None:
                return FactList(
                    namespace, self.ops.entity_facts(self.ops.entity_id(subject, namespace))
                )
            rows = self.store.all(
                f"""SELECT {self.ops._FACT_COLS} FROM facts f JOIN entities e ON e.id = f.subject
                    JOIN entities ce ON ce.id = e.canonical WHERE f.namespace = ? AND {live("f")}
                    ORDER BY f.rowid""",
                (namespace,),
            )
            return FactList(namespace, [self.ops.fact_ref(r) for r in rows])

    def items(
        self, kind: str | None = None, status: str | None = None, namespace: str = "default"
    ) -> ItemList:
        from memors_core.engine.compaction import ITEM_STATUSES, list_items

        check_namespace(namespace)
        # Listing stored items needs no plugin: a kind whose plugin failed to load is known.
        known = isinstance(kind, str) and (kind in self.kinds or kind in self.plugin_errors)
        if kind is not None and not known:
            raise BadInput(
                f"unknown kind {kind!r}: registered kinds are {', '.join(self.kinds.names())}"
            )
        if status is not None and status not in ITEM_STATUSES:
            raise BadInput(f"unknown status {status!r}: use one of {', '.join(ITEM_STATUSES)}")
        with self._lock, self.store.read():
            items = list_items(self.store, namespace, kind, status)
        return ItemList(
            namespace,
            [ItemSummary(i.id, i.kind, i.status, i.fingerprint, i.payload) for i in items],
        )

    # --- compaction, lint, metrics -------------------------------------------------------------

    def compact(
        self,
        kinds: list[str] | None = None,
        limit: int | None = None,
        namespace: str = "default",
        *,
        full: bool = False,
        progress: Callable[[Progress], None] | None = None,
        after: int | None = None,
    ):
        """Scan the namespace with every registered kind (or those named),
        create or refresh items, and return the open ones. ``progress``
        gets a :class:`~memors_core.engine.progress.Progress` now and then (each
        kind's name, its step, items created). With ``after``
        (an item id), only the open items after it are returned and
        ``more`` counts those after the last one returned (for paging)."""
        from memors_core.engine.compaction import compact

        check_namespace(namespace)
        with self._lock:
            return compact(self, namespace, kinds, limit, full=full, progress=progress, after=after)

    def submit(
        self,
        item: int | str,
        resolution: dict[str, Any] | None = None,
        *,
        dry_run: bool = False,
        force: bool = False,
        fingerprint: str | None = None,
        namespace: str = "default",
        **fields: Any,
    ):
        """Complete one work item. ``resolution`` is the kind's resolution
        as a mapping; the flat fields (``content``, ``title``, ``cites``,
        ``keep``, ``accept``, ``reject``, ``skip``, ``reason``) are merged
        into it, so both spellings work. ``fingerprint``, the item's as
        handed out with its payload, refuses the submission if the item was
        refreshed since."""
        from memors_core.engine.compaction import submit

        check_namespace(namespace)
        with self._lock:
            return submit(
                self,
                namespace,
                item,
                resolution,
                fields,
                dry_run=dry_run,
                force=force,
                fingerprint=fingerprint,
            )

    def lint(self, namespace: str = "default"):
        """A read-only report of problems (opens the file read-only)."""
        from memors_core.engine.lint import run_lint

        check_namespace(namespace)
        return run_lint(self.path, namespace, self.pm)

    def metrics(self) -> str:
        """The Prometheus text exposition for the whole store."""
        from memors_core.engine.metrics import exposition

        with self._lock:
            return exposition(self)

    def namespaces(self) -> list[str]:
        return [r[0] for r in self.store.all("SELECT name FROM namespaces ORDER BY name")]

    def passage_refs(self, ids: Iterable[str]) -> list[PassageRef]:
        return self.ops.passage_refs(ids)


Prepared = tuple[list[str], list[bytes], list[str], list[list[str]]]


def prepare_passages(body: str, limit: int | None = None, report: Any = None) -> Prepared:
    """A document's passages with each one's packed shingle hashes, content
    hash and ``[[wiki links]]``: the per-passage work that needs no store,
    which a bulk load's helper process does ahead. A document of more than
    ``limit`` passages gets only its passages (it is refused: no need to
    shingle millions of them first). ``report`` (a
    :class:`~memors_core.engine.progress.Reporter`) hears how many are shingled."""
    pieces = text.split_passages(body)
    if limit is not None and len(pieces) > limit:
        return pieces, [], [], []
    if report is None:
        blobs = [text.pack_shingles(text.shingle_hashes(p)) for p in pieces]
    else:
        blobs = []
        for n, p in enumerate(pieces):
            if not n & 127:
                report(
                    n == 0,
                    task="remember",
                    phase="preparing",
                    done=n,
                    total=len(pieces),
                    unit="passages",
                )
            blobs.append(text.pack_shingles(text.shingle_hashes(p)))
        report(True, task="remember", phase="preparing", done=len(pieces), total=len(pieces))
    return (
        pieces,
        blobs,
        [text.content_hash(p) for p in pieces],
        [text.wiki_links(p) for p in pieces],
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

    @property
    def running(self) -> bool:
        return self.proc is not None

    def send(self, texts: list[str]) -> bool:
        """Hand texts to the worker; False if it is not available."""
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

            write_frame(self.proc.stdin, pickle.dumps(texts, protocol=5))
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
        return [prepare_passages(d[0]) for d in docs]

    def _fail(self) -> None:
        self.broken = True
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


def fts_query(query: str, max_words: int = 64) -> str | None:
    """An FTS5 MATCH expression for any user text: its words, quoted, OR-ed.

    Stop words are dropped unless nothing else is left. Words are runs of
    letters and digits, so the quoting can never be broken and no FTS
    syntax error can reach a user. None when the text has no words.
    """
    ws = list(dict.fromkeys(text.words(query)))
    if not ws:
        return None
    stops = text.stop_words()
    content = [w for w in ws if w not in stops] or ws
    return " OR ".join(f'"{w}"' for w in content[:max_words])


def iter_jsonl(lines: Iterable[str], source: str) -> Iterator[dict[str, Any]]:
    """Parse JSON lines, naming the line of the first malformed one."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value = parse_line(line, n, source)
        if not isinstance(value, dict):
            raise BadInput(f"{source}:{n}: each line must be a JSON object")
        yield value


__all__ = ["MemorsError", "Memory", "fts_query", "iter_jsonl"]
