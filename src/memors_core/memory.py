"""The service: every operation of SPEC §4 as a method of :class:`Memory`.

The CLI and the MCP server are thin wrappers over this class; they call the
same methods and print ``wire.to_json`` of what comes back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memors_core.domain import dates, ids
from memors_core.domain.ids import parse_address
from memors_core.domain.inputs import check_namespace, opt_str, req_str
from memors_core.domain.model import (
    Corrected,
    CorrectionList,
    DocumentList,
    EntityList,
    EntityRef,
    EntityView,
    FactList,
    FactRecorded,
    FactView,
    Forgotten,
    ItemList,
    LintReport,
    MergeProposed,
    NamespaceFigures,
    NamespaceOverview,
    PageList,
    PassageRef,
    Purged,
    Reindexed,
    Remembered,
    RememberedMany,
    SearchResults,
)
from memors_core.domain.rows import DOCUMENT_SORTS, PAGE_SORTS
from memors_core.domain.search import check_request as check_search
from memors_core.engine import edits, vectors, views
from memors_core.engine.ingest import Ingest
from memors_core.engine.progress import Progress
from memors_core.engine.services import Services
from memors_core.errors import BadInput, MemorsError, NotFound
from memors_core.log import get_logger
from memors_core.plugins.manager import Plugins, build_plugin_manager
from memors_core.settings import FIELD_SETTING, Limits
from memors_core.storage import open_storage

if TYPE_CHECKING:
    from memors_core.plugins.kinds import KindRegistry
    from memors_core.storage.api import Storage

log = get_logger("memors")

GRANULARITIES = views.GRANULARITIES


class Memory:
    """A memors store: open one with :meth:`Memory.open`.

    Methods take ``namespace="default"`` and return attrs objects (see
    :mod:`memors_core.domain.model`); :func:`memors_core.wire.to_json` gives their
    JSON. A Memory may be shared by threads: its store runs one transaction
    at a time.
    """

    def __init__(
        self, store: Storage, pm: Plugins | None = None, *, background_vectors: bool = True
    ) -> None:
        self.store = store
        #: The plugins; their hooks are called through its methods only.
        self.pm = pm if pm is not None else build_plugin_manager()
        if not store.readonly:
            # Each kind's own state (the duplicate prefix index) at the version
            # it knows, before anything scans; a read-only open changes nothing.
            store.migrate_kinds(self.kinds.migrations(store.engine))
        self.limits = Limits()
        self._ingest = Ingest(store, self.pm, self.limits)
        self._services = Services(store, self.pm, self.limits)
        #: Namespaces whose new passages wait for vectors that this Memory
        #: leaves to another process (``background_vectors=False``).
        self.vectors_wanted: set[str] = set()
        self._remembering = 0
        self._background: vectors.Background | None = None
        if background_vectors and not store.readonly:
            self._background = vectors.Background(store, lambda: self._remembering > 0)
            self._ingest.on_new_passages = self._background.wake
        else:
            self._ingest.on_new_passages = self.vectors_wanted.add

    @property
    def kinds(self) -> KindRegistry:
        """The registered kinds (the plugins', read each time: never a stale copy)."""
        return self.pm.kinds

    @property
    def plugin_errors(self) -> dict[str, str]:
        """Installed plugins that failed to load and were set aside: entry-point
        name -> what went wrong, one line. Everything else works; their kinds
        (a kind is named like its plugin) cannot be compacted or submitted."""
        return self.pm.plugin_errors

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        plugin_manager: Plugins | None = None,
        readonly: bool = False,
        background_vectors: bool = True,
    ) -> Memory:
        """Open (creating if needed) the store at ``path`` (default per SPEC §3):
        a file for the SQLite engine, or a ``postgresql://`` address for the
        PostgreSQL engine (extra ``memors[postgres]``; docs/postgres.md).

        A purge that was killed after its erasure committed is finished here
        (on SQLite its FTS merges, VACUUM and WAL checkpoint), unless the
        store is busy.

        ``readonly``: open it to read only, as ``lint`` does — nothing is
        created or changed (a store that does not exist yet reads as an
        empty one) and every operation that would write refuses. On SQLite,
        when no other process has the store open, writers wait while this
        Memory is open: close it soon.

        ``background_vectors`` (the ``semantic`` extra): a daemon thread of
        this process gives the passages remembered here their vectors, after
        they are stored and while this process is not remembering (remember
        never waits for the model; :meth:`wait_for_vectors` does). False:
        nothing here makes them, and :attr:`vectors_wanted` names the
        namespaces that need them, for a ``reindex --vectors`` elsewhere
        (a one-shot ``memors-mcp remember`` starts one).
        """
        if readonly:
            return cls(open_storage(path, readonly=True), plugin_manager)
        from memors_core.engine.purge import finish_pending

        store = open_storage(path)
        try:
            finish_pending(store, wait=False)
            return cls(store, plugin_manager, background_vectors=background_vectors)
        except BaseException:
            store.close()
            raise

    @property
    def path(self) -> Path | str:
        """Where the store is: its file (SQLite), or its address without the
        password (PostgreSQL)."""
        return self.store.path

    def close(self) -> None:
        """Close the store; a background run of vectors stops after the
        model's batch under way (what it leaves is made by the next run)."""
        if self._background is not None:
            self._background.stop()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- remember --------------------------------------------------------------

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
        entities its passages mention. With the ``semantic`` extra, its new
        passages get their vectors after this returns, off the write path
        (see :meth:`open`'s ``background_vectors``; a search finds them by
        their words meanwhile). ``progress`` gets a
        :class:`~memors_core.engine.progress.Progress` now and then (passages
        prepared, then stored)."""
        check_namespace(namespace)
        with self._writing():
            return self._ingest.one(
                namespace, text, uri, title, entities, metadata, progress=progress
            )

    def remember_many(
        self,
        documents: Iterable[dict[str, Any]],
        namespace: str = "default",
        *,
        batch: int | None = None,
        progress: Callable[[Progress], None] | None = None,
        where: Callable[[int], str] | None = None,
    ) -> RememberedMany:
        """Store many documents, one transaction per ``batch`` of them (by
        default the engine's: 500 on SQLite, 2,000 on PostgreSQL, the first
        batches an eighth of that, doubling, so storing starts sooner).

        Each document is a mapping with ``text`` and optional ``uri``,
        ``title``, ``entities``, ``metadata``. A bad document stops the load
        with an error naming it (``where(n)`` names the n-th, counting from
        1; default ``document n``); the batches before it stay stored.
        ``progress`` gets a :class:`~memors_core.engine.progress.Progress` now and
        then: ``documents`` stored so far (phase ``storing``, or
        ``preparing`` while a batch is split in this process), with a big
        document's passages, or the batch's, as ``done`` of ``total``. New
        passages get their vectors off the write path, as :meth:`remember`'s.
        """
        check_namespace(namespace)
        with self._writing():
            return self._ingest.many(
                documents,
                namespace,
                batch=self.store.capabilities.bulk_documents if batch is None else batch,
                ramp=batch is None,
                progress=progress,
                where=where,
            )

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        # A background run of vectors holds back while this process remembers.
        self._remembering += 1
        try:
            yield
        finally:
            self._remembering -= 1

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
        subject = req_str(subject, "subject", 200)
        predicate = req_str(predicate, "predicate", lim, FIELD_SETTING)
        value = req_str(value, "value", lim, FIELD_SETTING)
        valid_from = opt_str(valid_from, "valid_from", 64)
        valid_to = opt_str(valid_to, "valid_to", 64)
        source = opt_str(source, "source", 200)
        with self.store.write(namespace=namespace, role="add") as tx:
            return edits.record_fact(
                tx, namespace, subject, predicate, value, valid_from, valid_to, source
            )

    # --- merges ----------------------------------------------------------------------

    def propose_merge(
        self, entities: list[str], namespace: str = "default", again: bool = False
    ) -> MergeProposed:
        """Open a merge candidate between two entities (names or addresses);
        the first is the one that survives if the merge is accepted. A pair
        rejected before (or a merge undone) opens again only with ``again``."""
        check_namespace(namespace)
        if not isinstance(entities, list | tuple) or len(entities) != 2:
            raise BadInput("propose_merge takes exactly two entity names")
        if not isinstance(again, bool):
            raise BadInput("again must be true or false")
        first, second = (req_str(e, "an entity name", 200) for e in entities)
        with self.store.write(namespace=namespace) as tx:
            return edits.propose_merge(tx, namespace, first, second, again, self._services)

    # --- corrections -------------------------------------------------------------------

    def rename_entity(self, entity: str, name: str, namespace: str = "default") -> Corrected:
        """Give an entity (a name or an address) a new name; its old names
        stay aliases, so they still resolve. Renaming back undoes it."""
        from memors_core.engine import corrections

        check_namespace(namespace)
        entity = req_str(entity, "an entity name or address", 300)
        name = req_str(name, "the new name", 200)
        with self.store.write() as tx:
            return corrections.rename(tx, namespace, entity, name)

    def undo_merge(self, entity: str, namespace: str = "default") -> Corrected:
        """Undo the merge that took ``entity`` (the name or address of the
        entity merged away) into another: both stand apart again, the aliases
        the merge gave are taken back, and both pages go stale."""
        from memors_core.engine import corrections

        check_namespace(namespace)
        entity = req_str(entity, "an entity name or address", 300)
        with self.store.write() as tx:
            return corrections.undo_merge(tx, namespace, entity)

    def reopen(
        self, item: int | str, reason: str | None = None, namespace: str = "default"
    ) -> Corrected:
        """Reopen a done or skipped item: undo what it did (a conflict's
        superseded facts come back as new rows; an accepted merge separates;
        a rejected one opens again; the passages a kept duplicate forgot come
        back as new passages, in a new version of their documents) and put it
        back on the queue."""
        from memors_core.engine import corrections
        from memors_core.engine.compaction import parse_item_id

        check_namespace(namespace)
        item_id = parse_item_id(item)
        if reason is not None:
            reason = req_str(reason, "a reason", 2000)
        with self.store.write() as tx:
            return corrections.reopen(self._services, tx, namespace, item_id, reason)

    def corrections(
        self, namespace: str = "default", action: str | None = None, target: str | None = None
    ) -> CorrectionList:
        """The audit of the corrections made in a namespace, oldest first:
        renames, merges (what each moved, so it can be undone), merges
        undone, items reopened (with what they restored) and merges proposed
        again. ``action`` keeps one action's, ``target`` those about one
        address (an entity, an item)."""
        from memors_core.engine import corrections

        check_namespace(namespace)
        if action is not None and action not in corrections.ACTIONS:
            raise BadInput(
                f"unknown correction {action!r}: use one of {', '.join(corrections.ACTIONS)}"
            )
        if target is not None:
            target = req_str(target, "an address", 300)
            parse_address(target)
        with self.store.read() as tx:
            return corrections.listing(tx, namespace, action, target)

    # --- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        granularity: str = "passage",
        limit: int = 10,
        as_of: str | None = None,
        namespace: str = "default",
        mode: str | None = None,
    ) -> SearchResults:
        """Search live rows: by their words (BM25, words OR-ed, entity-aware)
        and, for passages with vectors (the ``semantic`` extra), by meaning.
        ``mode``: ``lexical``, ``semantic`` or ``hybrid`` (both, fused); by
        default ``hybrid`` where the namespace's passages have vectors, else
        ``lexical``. A mode that cannot be used falls back to the words, and
        the result's ``notice`` says why (docs/search.md)."""
        check_namespace(namespace)
        check_search(query, granularity, limit, self.limits.query_chars, mode)
        as_of_ts = dates.normalise(as_of, "as_of") if as_of is not None else None
        with self.store.read() as tx:
            used, notice = views.search_mode(
                tx, namespace, granularity, mode, vectors.unwanted(self.store)
            )
            # By meaning too: the question is embedded on another thread
            # while the words' ranking is read (each a few milliseconds).
            vector = None if used == "lexical" else vectors.embedding(query)
            hits = views.search(tx, namespace, query, granularity, limit, as_of_ts, used, vector)
        return SearchResults(results=hits, mode=used, notice=notice)

    def reindex_vectors(
        self,
        namespace: str = "default",
        *,
        progress: Callable[[Progress], None] | None = None,
    ) -> Reindexed:
        """Give every live passage of ``namespace`` without a vector one (the
        ``semantic`` extra): for a store written before the extra was
        installed, after an import, or after a load that was stopped before
        its vectors were stored; a vector of an older kind (made before
        passages were embedded with their entities' names) is made again.
        BadInput, saying why, where this process
        cannot make vectors. ``progress`` hears how many are done."""
        check_namespace(namespace)
        return vectors.reindex(self.store, namespace, progress)

    def make_vectors(self, namespace: str = "default") -> int:
        """Give the passages of ``namespace`` without a vector one, in this
        thread, unless another run is embedding the namespace (it looks
        again before it stops): what ``memors-mcp reindex --vectors
        --background`` runs. Returns how many vectors were stored; 0 where
        this process makes none."""
        check_namespace(namespace)
        if vectors.unwanted(self.store) is not None:
            return 0
        ran = vectors.catch_up(self.store, namespace, wait=False)
        return ran[1] if ran else 0

    def resume_vectors(self) -> None:
        """Have the background run (see :meth:`open`) give every namespace's
        passages without a vector one: what a run that was killed or
        stopped left, or a store written before the extra was installed
        (the MCP server does this when it starts)."""
        if self._background is None or vectors.unwanted(self.store) is not None:
            return
        for namespace in self.namespaces():
            self._background.wake(namespace)

    def wait_for_vectors(self, timeout: float | None = None) -> bool:
        """Wait until this Memory's background run has given the passages
        remembered here their vectors (at once where it makes none); False
        if ``timeout`` seconds passed first. Passages another process is
        embedding are not waited for: :meth:`vectors_waiting` counts them."""
        return True if self._background is None else self._background.wait(timeout)

    def vectors_waiting(self, namespace: str = "default") -> int:
        """How many live passages of ``namespace`` have no vector yet, or
        one of an older kind to be made again (0 where this process makes
        no vectors: no ``semantic`` extra, ``MEMORS_VECTORS=off``, or a
        store that cannot keep them)."""
        check_namespace(namespace)
        return vectors.waiting(self.store, namespace)

    # --- get -----------------------------------------------------------------------------

    def get(self, address: str, namespace: str = "default") -> Any:
        """One thing by address, with its links; forgotten and superseded
        rows are shown too, marked as such."""
        check_namespace(namespace)
        kind, ident = parse_address(address)
        if kind == "passage":  # (a live passage is one statement: one round trip on a server)
            view = self.store.brief_read(lambda tx: views.get(tx, kind, ident, namespace))
        else:
            with self.store.read() as tx:
                view = views.get(tx, kind, ident, namespace)
        if view is None:
            raise NotFound(f"nothing at {ids.address(kind, ident)} in namespace {namespace!r}")
        return view

    def get_many(self, addresses: Iterable[str], namespace: str = "default") -> dict[str, Any]:
        """Many things by address in one read, as :meth:`get` shows each:
        address -> view, those that are not there (or not addresses) left out."""
        check_namespace(namespace)
        wanted = _parsed(addresses)
        with self.store.read() as tx:
            return views.get_many(tx, wanted, namespace)

    # --- forget and purge ------------------------------------------------------------------

    def forget(
        self, address: str, reason: str | None = None, namespace: str = "default"
    ) -> Forgotten:
        """Tombstone a document (and its live passages), a passage, a fact or
        a page. Forgetting something already forgotten changes nothing."""
        check_namespace(namespace)
        kind, ident = parse_address(address)
        reason = opt_str(reason, "reason", self.limits.field_chars, FIELD_SETTING)
        if kind not in edits.FORGETTABLE:
            raise BadInput(
                f"only documents, passages, facts and pages can be forgotten, not a {kind}"
            )
        with self.store.write(namespace=namespace, role="content") as tx:
            return edits.forget(tx, namespace, kind, ident, reason)

    def purge(self, address: str, namespace: str = "default") -> Purged:
        """Erase a document, passage, fact or page for good (and the pages
        that cite erased passages), leaving an audit row without content."""
        from memors_core.engine.purge import purge

        check_namespace(namespace)
        kind, ident = parse_address(address)
        return purge(self.store, self.pm, namespace, kind, ident, self.limits)

    # --- export, import, backup ----------------------------------------------------------------

    def export(self, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """Every row of the store (or of ``namespace``) as JSON-ready
        objects, a header first and a closing line of counts and checksum
        last: one line each of an export file (``json.dumps`` each, or use
        :meth:`export_lines`). Read in one snapshot while the iterator is
        consumed."""
        from memors_core.engine.transfer import export_rows

        return export_rows(self.store, namespace)

    def export_lines(self, namespace: str | None = None) -> Iterator[str]:
        """The lines of an export file, as ``memors-mcp export`` writes
        them (each without its newline)."""
        from memors_core.engine.transfer import export_lines

        return export_lines(self.store, namespace)

    def import_(
        self,
        lines: Iterable[str | bytes],
        source: str = "import",
        *,
        allow_unverified: bool = False,
    ) -> dict[str, Any]:
        """Replay an export (its lines, text or UTF-8 bytes) into this store,
        which must hold no content yet; all or nothing. A file cut short,
        altered or inconsistent is refused naming the first problem;
        ``allow_unverified`` accepts an export of an older memors, which
        has no closing line to check. ``source`` names it in errors."""
        from memors_core.engine.transfer import import_rows

        return import_rows(self.store, lines, source, allow_unverified=allow_unverified)

    def backup(self, path: str) -> dict[str, Any]:
        """Copy the whole store to a new file at ``path``, consistent while
        other processes write: ``{"path", "pages"}``."""
        from memors_core.engine.transfer import backup

        return backup(self.store, path)

    # --- listings ---------------------------------------------------------------------------

    def entities(
        self, namespace: str = "default", *, offset: int = 0, limit: int | None = None
    ) -> EntityList:
        """The namespace's entities by name (``offset``/``limit``: one page of them)."""
        check_namespace(namespace)
        offset, limit = _page_bounds(offset, limit)
        with self.store.read() as tx:
            return views.entities(tx, namespace, offset, limit)

    def overview(
        self, namespace: str = "default", *, entities: int = 50, corrections: int = 10
    ) -> NamespaceOverview:
        """What a namespace's home shows, in one read: its figures
        (:meth:`figures`), its first ``entities`` entities with how many
        there are, and its newest ``corrections`` corrections, newest first,
        with how many there are. A fixed number of look-ups, however large
        the store."""
        from memors_core.engine import corrections as audit

        check_namespace(namespace)
        _page_bounds(0, entities)
        _page_bounds(0, corrections)
        with self.store.read() as tx:
            # (the figures, the page of entities and the corrections sent together)
            *counted, page, (newest, total) = tx.together(
                *views.figure_reads(tx, namespace),
                lambda: tx.entities.listed(namespace, 0, entities),
                lambda: audit.newest(tx, namespace, corrections),
            )
            (figures,) = views.figures_of(tx, self.kinds.names(), namespace, counted)
            listed = views.entities_of(tx, namespace, page)
        return NamespaceOverview(
            namespace=namespace,
            figures=figures,
            entities=listed,
            corrections=newest,
            corrections_total=total,
        )

    def figures(self) -> list[NamespaceFigures]:
        """Every namespace's figures, by name (``default`` always among them):
        live and stale pages, open items by kind, and the store-wide counts
        of items done and pages marked stale; the figures of :meth:`metrics`,
        read at once without its exposition."""
        with self.store.read() as tx:
            return views.figures(tx, self.kinds.names())

    def entity_count(self, namespace: str = "default") -> int:
        """How many entities (not counting those merged into others) the namespace has."""
        check_namespace(namespace)
        with self.store.read() as tx:
            return views.entity_count(tx, namespace)

    def pages(
        self,
        namespace: str = "default",
        *,
        sort: str = "title",
        stale: bool = False,
        offset: int = 0,
        limit: int = 50,
    ) -> PageList:
        """One page of the namespace's live pages (only the stale ones if
        ``stale``), ordered by ``sort`` (:data:`PAGE_SORTS`), with how many there are."""
        check_namespace(namespace)
        offset, limit = _page_bounds(offset, limit)
        sort = _sort(sort, PAGE_SORTS)
        with self.store.read() as tx:
            return views.pages(tx, namespace, sort, offset, limit or 50, stale=bool(stale))

    def documents(
        self, namespace: str = "default", *, sort: str = "title", offset: int = 0, limit: int = 50
    ) -> DocumentList:
        """One page of the namespace's live documents, ordered by ``sort``
        (:data:`DOCUMENT_SORTS`), with how many there are."""
        check_namespace(namespace)
        offset, limit = _page_bounds(offset, limit)
        sort = _sort(sort, DOCUMENT_SORTS)
        with self.store.read() as tx:
            return views.documents(tx, namespace, sort, offset, limit or 50)

    def labels(self, addresses: Iterable[str], namespace: str = "default") -> dict[str, str]:
        """What a person calls each address: an entity's name, a document's
        title (else its URI), a page's title, a fact written out (address ->
        label; passages, items and what is not there are left out)."""
        check_namespace(namespace)
        wanted = _parsed(addresses)
        if not wanted:  # (nothing to look up: no read)
            return {}
        with self.store.read() as tx:
            return views.labels(tx, namespace, wanted)

    def produced(self, item: int, namespace: str = "default") -> str | None:
        """The address of the page version the work item ``item`` wrote (a
        ``page`` or ``stale`` item that was done); None if it wrote none."""
        check_namespace(namespace)
        if isinstance(item, bool) or not isinstance(item, int):
            raise BadInput(f"item must be an item id, got {item!r}")
        with self.store.read() as tx:
            found = tx.pages.of_item(item, namespace)
        return None if found is None else ids.address("page", found)

    def fact_history(self, subject: str, namespace: str = "default") -> list[FactView]:
        """Every fact about ``subject`` (name or address), forgotten and
        superseded ones too, oldest first: a timeline of what was held true."""
        check_namespace(namespace)
        subject = req_str(subject, "subject", 200)
        with self.store.read() as tx:
            return views.fact_history(tx, namespace, subject)

    def absorbed(self, entity: str, namespace: str = "default") -> list[EntityRef]:
        """The entities merged into ``entity`` (a name or address, read as the
        entity it is now: a merged one's name names its survivor), oldest first."""
        check_namespace(namespace)
        entity = req_str(entity, "entity name", 200)
        with self.store.read() as tx:
            return views.absorbed(tx, namespace, entity)

    def entity(self, name: str, namespace: str = "default") -> EntityView:
        """The entity called ``name`` (or one of its aliases, or at that
        entity address; case and white space do not matter), with its live
        passages, facts and page; NotFound if there is none."""
        check_namespace(namespace)
        name = req_str(name, "entity name", 200)
        with self.store.read() as tx:
            return views.entity_named(tx, name, namespace)

    def facts(self, subject: str | None = None, namespace: str = "default") -> FactList:
        """The live facts of the namespace, or only those about ``subject``
        (an entity's name or address), oldest first."""
        check_namespace(namespace)
        if subject is not None:
            subject = req_str(subject, "subject", 200)
        with self.store.read() as tx:
            return views.facts(tx, namespace, subject)

    def items(
        self,
        kind: str | None = None,
        status: str | None = None,
        namespace: str = "default",
        *,
        after: int = 0,
        limit: int | None = None,
    ) -> ItemList:
        """The namespace's work items by id (``kind``, ``status`` filter them;
        ``after`` an item id and ``limit`` page through them)."""
        from memors_core.engine.compaction import ITEM_STATUSES

        check_namespace(namespace)
        # Listing stored items needs no plugin: a kind whose plugin failed to load is known.
        known = isinstance(kind, str) and (kind in self.kinds or kind in self.plugin_errors)
        if kind is not None and not known:
            raise BadInput(
                f"unknown kind {kind!r}: registered kinds are {', '.join(self.kinds.names())}"
            )
        if status is not None and status not in ITEM_STATUSES:
            raise BadInput(f"unknown status {status!r}: use one of {', '.join(ITEM_STATUSES)}")
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise BadInput(f"after must be an item id (an integer ≥ 0), got {after!r}")
        _, limit = _page_bounds(0, limit)
        with self.store.read() as tx:
            return views.items(tx, namespace, kind, status, after, limit)

    def item_count(
        self, kind: str | None = None, status: str | None = None, namespace: str = "default"
    ) -> int:
        """How many work items :meth:`items` lists, without paging."""
        check_namespace(namespace)
        with self.store.read() as tx:
            return tx.items.count(namespace, kind, status)

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
        ``more`` counts those after the last one returned (for paging).
        With the ``semantic`` extra, passages of the namespace still without
        a vector are then given one off this path, as after :meth:`remember`."""
        from memors_core.engine.compaction import compact

        check_namespace(namespace)
        done = compact(
            self._services, namespace, kinds, limit, full=full, progress=progress, after=after
        )
        if vectors.waiting(self.store, namespace):
            self._ingest.on_new_passages(namespace)  # type: ignore[misc]
        return done

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
        return submit(
            self._services,
            namespace,
            item,
            resolution,
            fields,
            dry_run=dry_run,
            force=force,
            fingerprint=fingerprint,
        )

    def lint(self, namespace: str = "default", rules: list[str] | None = None) -> LintReport:
        """A read-only report of problems. The rules read a read-only store:
        this one if it was opened ``readonly``, else the file opened again
        read-only for the run (a rule cannot write).

        ``rules``: report only these rules' findings (None: every rule's). A
        finding whose work item was skipped, with nothing it depends on changed
        since, is acknowledged and left out; facts that expired as history
        (recorded once they had ended, or followed by a newer fact) are not
        findings."""
        from memors_core.engine.lint import check_rules, run_lint

        check_namespace(namespace)
        check_rules(rules, self.pm)
        with contextlib.ExitStack() as stack:
            storage = self.store
            if not storage.readonly:
                storage = open_storage(storage.location, readonly=True)
                stack.callback(storage.close)
            with storage.read() as tx:
                return run_lint(tx, namespace, self.pm, rules)

    def metrics(self) -> str:
        """The Prometheus text exposition for the whole store."""
        from memors_core.engine.metrics import exposition

        return exposition(self.store, self.kinds.names())

    def namespaces(self) -> list[str]:
        """Every namespace that was ever written to, sorted."""
        with self.store.read() as tx:
            return tx.namespaces.names()

    def passage_refs(self, ids: Iterable[str]) -> list[PassageRef]:
        """References to passages, in the order given (missing ones left out)."""
        with self.store.read() as tx:
            return views.passage_refs(tx, ids)


def _sort(sort: object, allowed: tuple[str, ...]) -> str:
    if sort not in allowed:
        raise BadInput(f"sort must be one of {', '.join(allowed)}, got {str(sort)[:40]!r}")
    return str(sort)


def _page_bounds(offset: object, limit: object) -> tuple[int, int | None]:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise BadInput(f"offset must be an integer ≥ 0, got {offset!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadInput(f"limit must be a positive integer, got {limit!r}")
    return offset, limit


def _parsed(addresses: Iterable[str]) -> list[tuple[str, str, str]]:
    """Each distinct address as (address, kind, id), in order; what is not
    an address is left out."""
    wanted = []
    for address in dict.fromkeys(addresses):
        try:
            wanted.append((address, *parse_address(address)))
        except BadInput:
            continue
    return wanted


__all__ = ["MemorsError", "Memory"]
