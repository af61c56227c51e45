"""The built-in checks on page submissions the seed names: omission and
corruption (the rules and their data live in :mod:`memors_core.domain.grounding`).

Both read only the item's payload (the snapshot the writer was given), so a
page is judged against exactly what its author could see.
"""

from __future__ import annotations

from typing import Any

from memors_core.domain.grounding import (
    cited_passages,
    corruption,
    lost_citations,
    lost_refs,
    omission,
    read_citations,
    sources_of,
)
from memors_core.domain.model import CheckResult, PageResolution
from memors_core.plugins.hookspecs import hookimpl

__all__ = ["corruption", "omission"]


@hookimpl
def memors_check_submission(
    resolution: Any, payload: dict[str, Any]
) -> dict[str, CheckResult] | None:
    if not isinstance(resolution, PageResolution):
        return None
    sentences = read_citations(resolution.content, payload)
    cited = cited_passages(sentences, payload, resolution.cites)
    passages, facts = sources_of(payload, cited, with_profiles=False)
    entity = payload.get("entity") or {}
    names = [n for n in [entity.get("name"), *(entity.get("aliases") or [])] if n]
    out = {
        "omission": omission(resolution.title, resolution.content, payload.get("facts") or []),
        "corruption": corruption(sentences, [*passages, *facts], names),
    }
    if lost_refs(payload):  # a stale item whose previous page cited a passage gone since
        out["citations"] = lost_citations(sentences, payload)
    return out
