"""The built-in substitution check: a page sentence's numbers, dates,
relative times and names must appear in the sources it aligns with (SPEC §5;
the rules are in :mod:`memors_core.domain.specifics` and
:mod:`memors_core.domain.grounding`).

Registered like any check plugin. The sources' token data is read from the
store (computed once when each passage was stored); a passage stored before
the store kept it is read from the payload's text.
"""

from __future__ import annotations

from typing import Any

from memors_core.domain.grounding import cited_passages, read_citations, sources_of, substitution
from memors_core.domain.ids import parse_address
from memors_core.domain.model import CheckResult, PageResolution
from memors_core.domain.specifics import Profile, document_stamps, load_profile, profile
from memors_core.errors import BadAddress
from memors_core.plugins.hookspecs import hookimpl


def _stored_profiles(store: Any, namespace: str):
    def load(rows: list[dict[str, Any]]) -> dict[str, Profile]:
        ids = {parse_address(p["address"], expect=("passage",))[1]: p for p in rows}
        found = store.passages.profiles(list(ids))
        out = {ids[i]["address"]: load_profile(data) for i, data in found.items()}
        stamps: dict[str, list[str]] = {}
        for ident, row in ids.items():
            if ident in found:
                continue
            # Stored before the store kept token data: read it now, with its
            # document's dates.
            doc = row.get("document") or ""
            if doc not in stamps:
                stamps[doc] = _document_stamps(store, namespace, doc)
            out[row["address"]] = profile(row["text"], stamps[doc])
        return out

    return load


def _document_stamps(store: Any, namespace: str, document: str) -> list[str]:
    try:
        ident = parse_address(document, expect=("document",))[1]
    except BadAddress:  # a payload from a plugin's kind may name none
        return []
    if store.documents.get(ident, namespace) is None:
        return []
    version = store.documents.latest_version(ident)
    return document_stamps(version.metadata if version else None)


@hookimpl
def memors_check_submission(
    context: Any, resolution: Any, payload: dict[str, Any]
) -> dict[str, CheckResult] | None:
    if not isinstance(resolution, PageResolution):
        return None
    sentences = read_citations(resolution.content, payload)
    cited = cited_passages(sentences, payload, resolution.cites)
    passages, facts = sources_of(payload, cited, _stored_profiles(context.store, context.namespace))
    entity = payload.get("entity") or {}
    names = [entity.get("name") or "", *(entity.get("aliases") or [])]
    return {"substitution": substitution(sentences, passages, facts, [n for n in names if n])}
