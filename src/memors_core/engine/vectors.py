"""Passages' vectors: made off the write path, after the text is stored.

Remembering stores its passages and returns: it never waits for the model.
The vectors are made afterwards by :func:`catch_up`, which embeds the live
passages of a namespace that have none, oldest first, with no lock held, and
stores them a chunk per write transaction of its own, so other writers never
wait on the model. It runs:

- in a daemon thread of a long-running process (:class:`Background`: the
  MCP server, a program using the library), woken when a remember commits
  and held back while a remember of that process is writing;
- in a detached, low-priority ``memors-mcp reindex --vectors --background``
  that a one-shot ``memors-mcp remember`` starts;
- in ``memors-mcp reindex --vectors`` (:func:`reindex`) and ``compact``.

Only one runs per store and namespace at a time (:func:`lease`, a lock file
of this machine): another that finds it taken leaves the work to the holder,
which looks once more for passages without a vector after it lets go. A
run that is killed or stopped has stored every chunk it finished; the next
one starts from what is still missing. Meanwhile search finds the waiting
passages by their words and says so in its ``notice``.

Nothing here runs when vectors are not wanted (:func:`unwanted`): no extra,
``MEMORS_VECTORS=off``, or an engine that cannot keep them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from memors_core import semantic
from memors_core.domain.model import Reindexed
from memors_core.engine.progress import Progress, Reporter
from memors_core.errors import BadInput, MemorsError
from memors_core.log import get_logger

if TYPE_CHECKING:
    import concurrent.futures

    from memors_core.storage.api import Storage

log = get_logger("memors")

#: Passages embedded, then stored in one write transaction: small enough
#: that a stop, or a remember that wants the machine, waits at most a few
#: seconds on a loaded one.
CHUNK = 64
#: Seconds a background run holds back while this process is remembering,
#: at most, before it embeds one chunk anyway (so a server that writes
#: without pause still gets its vectors).
HOLD_BACK = 2.0


def unwanted(storage: Storage) -> str | None:
    """Why this process makes and searches no vectors on ``storage``, in one
    line a user can act on; None when it does."""
    reason = semantic.unavailable()
    if reason is None and not storage.capabilities.vectors:
        reason = storage.capabilities.vectors_missing or "this store cannot keep vectors"
    return reason


def embed_question(query: str) -> bytes:
    """The vector of a search's question."""
    return semantic.embedder().embed([query])[0]


#: The threads that embed questions while their searches read the words'
#: ranking (made on first use, as many as searches run at once, up to 8).
_questions: concurrent.futures.ThreadPoolExecutor | None = None
_questions_lock = threading.Lock()


def embedding(query: str) -> Callable[[], bytes]:
    """Start embedding a search's question on a thread of its own, and
    return the call that waits for its vector: a hybrid search reads the
    words' ranking meanwhile (the model and the database each work on a
    core of their own), where it used to wait for the model first."""
    import concurrent.futures  # (here: it imports logging, which lean commands never load)

    global _questions
    with _questions_lock:
        if _questions is None:
            _questions = concurrent.futures.ThreadPoolExecutor(
                8, thread_name_prefix="memors-question"
            )
        pending = _questions.submit(embed_question, query)
    return pending.result


def _lease_path(storage: Storage, namespace: str) -> str:
    key = hashlib.sha256(f"{storage.location}\0{namespace}".encode()).hexdigest()[:32]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = os.path.join(tempfile.gettempdir(), f"memors-vectors-{uid}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{key}.lock")


@contextlib.contextmanager
def lease(storage: Storage, namespace: str, *, wait: bool) -> Iterator[bool]:
    """Hold the right to embed ``namespace`` of ``storage`` on this machine:
    yields True when held, False when another run holds it (``wait``: wait
    for it instead). An exclusive ``flock`` on a file in the temporary
    directory, named by the store and namespace: the kernel lets go when
    the holder exits, killed or not. Where no lock can be taken (no
    ``fcntl``, no writable temporary directory) every run may embed: two
    runs at once only do the same work twice (a vector is stored once)."""
    try:
        import fcntl

        handle = open(_lease_path(storage, namespace), "a+b")  # noqa: SIM115
    except (ImportError, OSError):
        yield True
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        handle.close()  # (closing lets go of the lock)


def waiting(storage: Storage, namespace: str) -> int:
    """How many live passages of ``namespace`` have no vector yet (0 where
    this process makes no vectors)."""
    if unwanted(storage) is not None:
        return 0
    with storage.read() as tx:
        return tx.vectors.missing_count(namespace, semantic.KIND)


def catch_up(
    storage: Storage,
    namespace: str,
    *,
    wait: bool,
    report: Reporter | None = None,
    stop: Callable[[], bool] | None = None,
    hold: Callable[[], None] | None = None,
) -> tuple[int, int] | None:
    """Give the live passages of ``namespace`` without a vector one, oldest
    first, a chunk per write transaction; returns ``(embedded, stored)``
    (a passage forgotten meanwhile, or given a vector by another run, is
    embedded but not stored), or None when another run holds the
    namespace's :func:`lease` and ``wait`` is False. ``stop()`` True ends
    the run between chunks; ``hold()`` is called before each chunk (a
    background run waits there while its process is remembering)."""
    done = stored = 0
    while True:
        with lease(storage, namespace, wait=wait) as held:
            if not held:
                return None if not (done or stored) else (done, stored)
            with storage.read() as tx:
                total = done + tx.vectors.missing_count(namespace, semantic.KIND)
            if report is not None:
                report(True, task="reindex", phase="embedding", done=done, total=total,
                       unit="passages")  # fmt: skip
            model = semantic.embedder()
            after = 0
            while not (stop is not None and stop()):
                if hold is not None:
                    hold()
                with storage.read() as tx:
                    batch = tx.vectors.missing(namespace, after, CHUNK, semantic.KIND)
                    texts = inputs(tx, batch)
                if not batch:
                    break
                after = batch[-1][0]
                try:
                    made = model.embed(
                        texts,
                        lambda n, at=done, of=total: _between(report, stop, at + n, of),
                    )
                except _Stopped:
                    break
                with storage.write(namespace=namespace) as tx:
                    stored += tx.vectors.add(
                        namespace, zip((p for _, p, _ in batch), made, strict=True), semantic.KIND
                    )
                done += len(batch)
                if report is not None:
                    report(task="reindex", phase="embedding", done=done,
                           total=max(total, done), unit="passages")  # fmt: skip
            if report is not None:
                report(True, task="reindex", phase="embedding", done=done,
                       total=max(total, done), unit="passages")  # fmt: skip
        # Let go, then look once more: a run that found the lease taken
        # while this one was finishing left its passages to this one.
        if stop is not None and stop():
            break
        with storage.read() as tx:
            if not tx.vectors.missing(namespace, 0, 1, semantic.KIND):
                break
    if stored:
        log.info("vectors_added", namespace=namespace, added=stored)
    return done, stored


def inputs(tx: Any, batch: list[tuple[int, str, str]]) -> list[str]:
    """What the model reads of each passage of ``batch`` (``(clock, id,
    text)``): its text after the names of the entities it is about, as
    they are now (canonical, renamed), in the order they were first known
    (:func:`memors_core.semantic.passage_input`)."""
    about = tx.passages.entities_of_many(p for _, p, _ in batch)
    names: dict[str, str] = {}
    for ident in {e for es in about.values() for e in es}:
        entity = tx.entities.get(ident)
        if entity is not None:
            names[ident] = entity.name
    return [
        semantic.passage_input(t, [names[e] for e in about.get(p, ()) if e in names])
        for _, p, t in batch
    ]


class _Stopped(Exception):
    """A run asked to stop, between two batches of the model."""


def _between(
    report: Reporter | None, stop: Callable[[], bool] | None, done: int, total: int
) -> None:
    """After each batch of the model: progress, and a stop asked for."""
    if stop is not None and stop():
        raise _Stopped
    if report is not None:
        report(task="reindex", phase="embedding", done=done, total=max(total, done),
               unit="passages")  # fmt: skip


def reindex(
    storage: Storage, namespace: str, progress: Callable[[Progress], None] | None = None
) -> Reindexed:
    """Give every live passage of ``namespace`` that has no vector one,
    waiting for a run that holds the namespace to finish first. Safe to
    stop and run again: each chunk commits on its own, and only what is
    missing is made."""
    reason = unwanted(storage)
    if reason is not None:
        raise BadInput(f"cannot make vectors: {reason}")
    semantic.embedder()  # a broken extra says so before anything is read
    ran = catch_up(storage, namespace, wait=True, report=Reporter(progress))
    added = ran[1] if ran else 0
    with storage.read() as tx:
        now = tx.vectors.count(namespace)
    return Reindexed(namespace=namespace, added=added, vectors=now, model=semantic.MODEL)


#: The background threads started, stopped when the interpreter exits.
_started: list[weakref.ref[Background]] = []


def _stop_at_exit(background: Background) -> None:
    """Stop ``background`` at exit if nobody did: a program that ends
    without closing its Memory would otherwise kill the thread inside the
    model (onnxruntime then aborts the process: "terminate called without
    an active exception")."""
    if not _started:
        import atexit

        atexit.register(_stop_started)
    _started[:] = [ref for ref in _started if ref() is not None]
    _started.append(weakref.ref(background))


def _stop_started() -> None:
    for ref in _started:
        background = ref()
        if background is not None:
            background.stop()


class Background:
    """Vectors made by a daemon thread of this process (see the module).

    :meth:`wake` after a remember committed new passages of a namespace;
    ``busy()`` says whether this process is remembering right now (the
    thread holds back meanwhile, :data:`HOLD_BACK` seconds at most per
    chunk); :meth:`wait` until the thread has nothing left to do;
    :meth:`stop` before the store closes (what is left is made by the next
    run). A failure (a broken model) is logged once per wake, with the fix,
    and leaves the passages to be found by their words."""

    def __init__(self, storage: Storage, busy: Callable[[], bool]) -> None:
        self._storage = storage
        self._busy = busy
        self._cond = threading.Condition()
        self._wanted: dict[str, None] = {}
        self._working = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def wake(self, namespace: str) -> None:
        """Make the vectors ``namespace`` lacks, soon."""
        with self._cond:
            if self._stopped:
                return
            self._wanted[namespace] = None
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="memors-vectors", daemon=True
                )
                _stop_at_exit(self)
                self._thread.start()
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every namespace woken has been caught up with; False
        if ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._stopped or (not self._wanted and not self._working), timeout
            )

    def stop(self) -> None:
        """Stop after the model's batch under way (up to 32 texts; the
        chunk's vectors made so far are dropped, and made by the next
        run), and wait for that."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _stopping(self) -> bool:
        return self._stopped

    def _hold(self) -> None:
        until = time.monotonic() + HOLD_BACK
        while self._busy() and not self._stopped and time.monotonic() < until:
            time.sleep(0.02)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or self._wanted)
                if self._stopped:
                    return
                namespace = next(iter(self._wanted))
                del self._wanted[namespace]
                self._working = True
            try:
                catch_up(self._storage, namespace, wait=False, stop=self._stopping, hold=self._hold)
            except MemorsError as exc:
                log.warning(
                    "vectors_not_made",
                    namespace=namespace,
                    reason=exc.message,
                    fix="memors-mcp reindex --vectors",
                )
            except Exception as exc:  # the thread must outlive any one failure
                if not self._stopped:  # (a store closed under a stopping run is expected)
                    log.warning(
                        "vectors_not_made",
                        namespace=namespace,
                        reason=f"{type(exc).__name__}: {exc}",
                        fix="memors-mcp reindex --vectors",
                    )
            finally:
                with self._cond:
                    self._working = False
                    self._cond.notify_all()
