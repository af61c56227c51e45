"""Typed rows as the references payloads and views hand out: addresses
(``memo://...``), never bare ids."""

from __future__ import annotations

from memors_core.domain.ids import address
from memors_core.domain.model import EntityRef, FactRef, PageRef, PassageRef
from memors_core.domain.rows import Entity, Fact, Page, Passage


def passage_ref(passage: Passage) -> PassageRef:
    return PassageRef(
        address("passage", passage.id), address("document", passage.document), passage.text
    )


def fact_ref(fact: Fact) -> FactRef:
    """The fact with its subject named as its canonical entity is now."""
    return FactRef(
        address("fact", fact.id),
        fact.subject_name,
        fact.predicate,
        fact.value,
        fact.valid_from,
        fact.valid_to,
    )


def entity_ref(entity: Entity, aliases: list[str]) -> EntityRef:
    return EntityRef(address=address("entity", entity.id), name=entity.name, aliases=aliases)


def page_ref(page: Page) -> PageRef:
    return PageRef(address("page", page.id), page.title, page.content, page.version)
