"""The built-in checks on page submissions: omission and corruption.

Both read only the item's payload (the snapshot the writer was given), so a
page is judged against exactly what its author could see.
"""

from __future__ import annotations

from typing import Any

from memors_core.domain.model import CheckResult, PageResolution
from memors_core.domain.text import content_words, page_sentences
from memors_core.plugins.hookspecs import hookimpl

OMISSION_THRESHOLD = 0.75
CORRUPTION_THRESHOLD = 0.5


def _fact_words(fact: dict[str, Any]) -> set[str]:
    return content_words(f"{fact.get('predicate', '')} {fact.get('value', '')}")


def omission(title: str, content: str, facts: list[dict[str, Any]]) -> CheckResult:
    """Flag each fact whose content words (predicate and value) are less
    than 75% present in the page."""
    page = content_words(f"{title}\n{content}")
    flagged = []
    for fact in facts:
        words = _fact_words(fact)
        coverage = 1.0 if not words else len(words & page) / len(words)
        if coverage < OMISSION_THRESHOLD:
            flagged.append({"fact": fact["address"], "coverage": round(coverage, 4)})
    return CheckResult(passed=not flagged, flagged=flagged)


def corruption(content: str, sources: list[set[str]]) -> CheckResult:
    """Flag each page sentence that shares fewer than half of its content
    words with every source; report its best overlap."""
    flagged = []
    for sentence in page_sentences(content):
        words = content_words(sentence)
        best = max((len(words & src) / len(words) for src in sources), default=0.0)
        if best < CORRUPTION_THRESHOLD:
            flagged.append({"sentence": sentence, "overlap": round(best, 4)})
    return CheckResult(passed=not flagged, flagged=flagged)


def page_sources(payload: dict[str, Any], cites: list[str] | None) -> list[set[str]]:
    """Content-word sets of the cited passages and of the subject's facts."""
    passages = payload.get("passages") or []
    wanted = None if cites is None else set(cites)
    sources = [
        content_words(p["text"]) for p in passages if wanted is None or p["address"] in wanted
    ]
    for fact in payload.get("facts") or []:
        sources.append(content_words(f"{fact.get('subject', '')} ") | _fact_words(fact))
    return sources


@hookimpl
def memors_check_submission(
    resolution: Any, payload: dict[str, Any]
) -> dict[str, CheckResult] | None:
    if not isinstance(resolution, PageResolution):
        return None
    return {
        "omission": omission(resolution.title, resolution.content, payload.get("facts") or []),
        "corruption": corruption(resolution.content, page_sources(payload, resolution.cites)),
    }
