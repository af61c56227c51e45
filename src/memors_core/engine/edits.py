"""The small writes of SPEC §4: forget, record a fact, propose a merge.

Each runs inside the caller's write transaction (a
:class:`~memors_core.storage.api.Tx`) on typed repository calls; the
arguments were checked by :class:`~memors_core.memory.Memory`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memors_core.domain.ids import address
from memors_core.domain.model import FactRecorded, Forgotten, MergeProposed
from memors_core.errors import BadInput, NotFound, Refused
from memors_core.log import get_logger

if TYPE_CHECKING:
    from memors_core.storage.api import Tx

log = get_logger("memors")

FORGETTABLE = ("document", "passage", "fact", "page")


def forget(tx: Tx, namespace: str, kind: str, ident: str, reason: str | None) -> Forgotten:
    """Tombstone a document (and its live passages), a passage, a fact or a
    page. Forgetting something already forgotten changes nothing."""
    lookup = {
        "document": tx.documents.get,
        "passage": tx.passages.get,
        "fact": tx.facts.get,
        "page": tx.pages.get,
    }
    if lookup[kind](ident, namespace) is None:
        raise NotFound(f"nothing at {address(kind, ident)} in namespace {namespace!r}")
    done: list[str] = []
    if kind == "document":
        passages = tx.passages.live_of_document(ident)
        for passage in tx.tombstones.add_many(
            namespace, "passage", passages, "forgotten", reason or "document forgotten"
        ):
            done.append(address("passage", passage))
    if tx.tombstones.add(namespace, kind, ident, "forgotten", reason):
        done.insert(0, address(kind, ident))
    return Forgotten(
        address=address(kind, ident), status=tx.tombstones.state(ident), forgotten=done
    )


def record_fact(
    tx: Tx,
    namespace: str,
    subject: str,
    predicate: str,
    value: str,
    valid_from: str | None,
    valid_to: str | None,
    source: str | None,
) -> FactRecorded:
    tx.namespaces.touch(namespace)
    ident = tx.facts.record(namespace, subject, predicate, value, valid_from, valid_to, source)
    tx.after_commit(log.info, "fact_recorded", namespace=namespace, fact=address("fact", ident))
    return FactRecorded(fact=address("fact", ident))


def propose_merge(
    tx: Tx, namespace: str, first_name: str, second_name: str, again: bool = False, services=None
) -> MergeProposed:
    """Open a merge candidate between two entities (names or addresses);
    the first is the one that survives if the merge is accepted. ``again``
    opens a rejected pair again (a person's explicit proposal)."""
    first = tx.entities.resolve(first_name, namespace)
    second = tx.entities.resolve(second_name, namespace)
    if first == second:
        raise BadInput(f"{first_name!r} and {second_name!r} are already one entity")
    opened = tx.merges.open(namespace, first, second, "proposed")
    candidate, status = opened.id, opened.status
    if status == "rejected":
        if again:
            from memors_core.engine.corrections import propose_again

            return propose_again(
                services,
                tx,
                namespace,
                candidate,
                [address("entity", first), address("entity", second)],
            )
        raise Refused(
            f"merging {first_name!r} and {second_name!r} was rejected before; "
            "propose it again on purpose with again (CLI --again)"
        )
    return MergeProposed(
        candidate=candidate,
        entities=[address("entity", first), address("entity", second)],
        status=status,
    )
