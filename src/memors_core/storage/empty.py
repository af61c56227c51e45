"""The store of an address where none exists yet, opened read-only: empty,
and of no engine.

A read-only open creates nothing, so a PostgreSQL database that holds no
memors schema yet reads as an empty store. That store is not the engine's
(it has no tables to read) nor any other engine's: every read of
:mod:`memors_core.storage.api`'s protocols answers what an empty store
answers (nothing listed, nothing found, every count 0, every clock at 0), and
every write is refused in one line, as on any store opened read-only. The
answers follow from each method's declared return type, so a method added
to the protocol is answered too; the few whose empty answer is not the
type's plain empty value are named in :data:`_ANSWERS`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

from memors_core.domain.ids import address, parse_address
from memors_core.domain.search import Ranked
from memors_core.errors import MemorsError, NotFound, PluginError
from memors_core.storage import api


def _no_document(document: str) -> Any:
    raise NotFound(f"no document {address('document', document)}")


def _no_entity(name_or_address: str, namespace: str) -> Any:
    if name_or_address.startswith("memo://"):
        parse_address(name_or_address, expect=("entity",))  # (BadInput for a bad one)
        raise NotFound(f"no entity {name_or_address} in namespace {namespace!r}")
    raise NotFound(f"no entity named {name_or_address!r} in namespace {namespace!r}")


def _no_entity_id(ident: str) -> Any:
    raise NotFound(f"no entity {address('entity', ident)}")


#: Answers that are not the plain empty value of the return type (the
#: look-ups that raise NotFound do, in the shared repositories' words).
_ANSWERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("Tombstones", "is_live"): lambda *a, **k: True,  # (an unknown id is live)
    ("Tombstones", "state"): lambda *a, **k: "live",
    ("Transfer", "is_empty"): lambda *a, **k: True,
    ("Documents", "latest_version"): _no_document,
    ("Entities", "resolve"): _no_entity,
    ("Entities", "require"): _no_entity_id,
    ("Counters", "read_many"): lambda names: {name: {} for name in names},
    ("Corrections", "newest"): lambda *a, **k: ([], 0),
    ("Entities", "listed"): lambda *a, **k: ([], 0),
}

# (Purges.record is a write in an erasing transaction, which is refused.)
_WRITES = {("Purges", "record")}


def _empty(annotation: str) -> Callable[..., Any] | None:
    """What a read declared to return ``annotation`` answers on an empty
    store (None: not a read's type)."""
    a = annotation.replace(" ", "")
    if a == "None":
        return None
    if a.endswith("|None") or a == "Any":
        return lambda *a, **k: None
    plain: dict[str, Callable[[], Any]] = {
        "list": list,
        "Sequence": list,
        "set": set,
        "dict": dict,
        "Iterator": lambda: iter(()),
        "int": int,
        "float": float,
        "bool": bool,
        "Ranked": lambda: Ranked([], 0.0),
    }
    make = plain.get(a.split("[", 1)[0])
    if make is None:
        return None
    return lambda *a, **k: make()


#: What a brief read returns.
T = TypeVar("T")


class _EmptyRepository:
    """One repository of :class:`EmptyTx`, answering its protocol's reads."""

    def __init__(self, protocol: type, store: EmptyStore) -> None:
        self._protocol = protocol
        self._store = store

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        member = getattr(self._protocol, name)  # AttributeError: not in the protocol
        key = (self._protocol.__name__, name)
        if key == ("Search", "alongside"):  # (the work is done on this empty search)
            return lambda work: functools.partial(work, self)
        if key in _ANSWERS:
            return _ANSWERS[key]
        doc = member.__doc__ or ""
        answer = _empty(str(member.__annotations__.get("return", "None")))
        if answer is None or key in _WRITES or "write)" in doc or "(write" in doc:
            return self._store.refuse
        return answer


class EmptyTx:
    """:class:`memors_core.storage.api.Tx` of an :class:`EmptyStore`."""

    engine = "none"
    # (each an _EmptyRepository answering as its protocol)
    namespaces: api.Namespaces
    documents: api.Documents
    passages: api.Passages
    entities: api.Entities
    facts: api.Facts
    pages: api.Pages
    tombstones: api.Tombstones
    merges: api.MergeCandidates
    items: api.Items
    changes: api.ChangeLog
    counters: api.Counters
    corrections: api.Corrections
    search: api.Search
    vectors: api.Vectors
    purges: api.Purges
    transfer: api.Transfer

    def __init__(self, store: EmptyStore) -> None:
        for name, protocol in api.Tx.__annotations__.items():
            if name != "engine":
                setattr(self, name, _EmptyRepository(getattr(api, protocol), store))

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)  # (there is never a transaction to wait for)

    def pipelined(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def later(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def together(self, *reads: Callable[[], Any]) -> list[Any]:
        return [read() for read in reads]

    def native(self, engine: str) -> Any:
        raise PluginError(
            f"this store does not exist yet and runs on no engine, not {engine}: "
            f"a kind's {engine} module cannot work on it"
        )


class EmptyStore:
    """:class:`memors_core.storage.api.Storage` of an address where no store
    exists yet, opened read-only (see the module's docstring)."""

    engine = "none"
    readonly = True
    capabilities = api.Capabilities(
        vectors_missing="no store exists here yet (any command that writes creates it)"
    )
    purge_steps: tuple[str, ...] = ()
    purge_held: str | None = None

    def __init__(self, location: str) -> None:
        self.location = self.path = location
        self.tx = EmptyTx(self)

    def refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise MemorsError(f"the store {self.location} was opened read-only; this would change it")

    @contextlib.contextmanager
    def read(self) -> Iterator[EmptyTx]:
        yield self.tx

    def brief_read(self, read: Callable[[EmptyTx], T]) -> T:
        return read(self.tx)

    def write(
        self, *, namespace: str | None = None, role: str = "all"
    ) -> contextlib.AbstractContextManager[EmptyTx]:
        return self.refuse()

    def erasing(self) -> contextlib.AbstractContextManager[EmptyTx]:
        return self.refuse()

    def after_commit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)

    def read_ahead(
        self, namespace: str, documents: Sequence[tuple[str | None, Sequence[str]]]
    ) -> None:
        return None

    def migrate_kinds(self, migrations: dict[str, list[str]]) -> None:
        self.refuse()

    def run_purge_step(self, step: str, *, wait: bool) -> bool:
        return self.refuse()

    def database_failed(self, exc: BaseException) -> bool:
        return False

    def purge_hold(self, target: str) -> str:
        return ""

    def backup(self, path: str) -> dict[str, Any]:
        return self.refuse()

    def close(self) -> None:
        pass
