"""The per-passage work of remembering that needs no store: split, shingle,
hash, and the token data of each passage that links an entity.

A bulk load's helper process (:mod:`memors_core.engine._shingle_worker`) runs
it ahead of the batch being stored.
"""

from __future__ import annotations

from typing import Any

from memors_core.domain import specifics, text

#: Passages, their packed shingles, content hashes, ``[[wiki links]]``, and
#: for each passage that has a link its substitution profile (else None).
Prepared = tuple[
    list[str], list[bytes], list[str], list[list[str]], list["specifics.Profile | None"]
]


def prepare_passages(
    body: str,
    limit: int | None = None,
    report: Any = None,
    profiles: bool = False,
    named: bool = False,
) -> Prepared:
    """A document's passages with each one's packed shingle hashes, content
    hash and ``[[wiki links]]``: the per-passage work that needs no store,
    which a bulk load's helper process does ahead (and with ``profiles``, the
    substitution profile of each passage that mentions an entity: each one
    with a link, every one when the document itself names entities
    (``named``); ingest computes the others' only for the passages it
    stores new that an entity plugin finds a name in). A document of more than
    ``limit`` passages gets only its passages (it is refused: no need to
    shingle millions of them first). ``report`` (a
    :class:`~memors_core.engine.progress.Reporter`) hears how many are shingled."""
    pieces = text.split_passages(body)
    if limit is not None and len(pieces) > limit:
        return pieces, [], [], [], []
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
    links = [text.wiki_links(p) for p in pieces]
    return (
        pieces,
        blobs,
        [text.content_hash(p) for p in pieces],
        links,
        [
            specifics.profile(p) if profiles and (named or linked) else None
            for p, linked in zip(pieces, links, strict=True)
        ],
    )
