"""Everything a plugin author needs, from one import.

::

    from memors_core.plugins import BadInput, Candidate, Kind, fingerprint, hookimpl

The kind contract (:class:`Kind`, :class:`Candidate`, :class:`Scan`, the
contexts and :class:`PluginStore`, the store they hold), the hook marker,
the errors a plugin raises, the rows and results it reads and returns, and
the helpers the built-in kinds use to build addresses, payloads and dates.
Built-in kinds, the example plugin and the tutorial import from here and
nowhere else in ``memors_core`` (``tests/core/plugins/test_plugins_import.py``);
tests also use :mod:`memors_core.testing`.

Each name is imported on first use (PEP 562): ``memors-mcp search`` reads
``memors_core.plugins.entrypoints`` and must not pay for the rest.
"""

# The TYPE_CHECKING imports are for type checkers, each ``name as name``: an
# explicit re-export (mypy's strict mode reads no other); the test of this
# module holds them equal to _LAZY.

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the quick read path runs without typing

#: Exported name -> the module it lives in.
_LAZY = {
    # the contract between the engine and a kind
    "Candidate": "memors_core.plugins.kinds",
    "Changes": "memors_core.plugins.kinds",
    "CheckContext": "memors_core.plugins.kinds",
    "Kind": "memors_core.plugins.kinds",
    "KindContext": "memors_core.plugins.kinds",
    "KindRegistry": "memors_core.plugins.kinds",
    "LintContext": "memors_core.plugins.kinds",
    "Scan": "memors_core.plugins.kinds",
    "fingerprint": "memors_core.plugins.kinds",
    "PluginStore": "memors_core.plugins.store",
    "hookimpl": "memors_core.plugins.hookspecs",
    # errors
    "BadInput": "memors_core.errors",
    "NotFound": "memors_core.errors",
    "PluginError": "memors_core.errors",
    # rows the store hands out
    "Entity": "memors_core.domain.rows",
    "Fact": "memors_core.domain.rows",
    "Item": "memors_core.domain.rows",
    "Page": "memors_core.domain.rows",
    "Passage": "memors_core.domain.rows",
    # what checks and lint rules answer, what a page item resolves to
    "CheckResult": "memors_core.domain.model",
    "FactRef": "memors_core.domain.model",
    "Finding": "memors_core.domain.model",
    "PageResolution": "memors_core.domain.model",
    "PassageRef": "memors_core.domain.model",
    # addresses and the references payloads show
    "address": "memors_core.domain.ids",
    "parse_address": "memors_core.domain.ids",
    "entity_ref": "memors_core.domain.refs",
    "fact_ref": "memors_core.domain.refs",
    "page_ref": "memors_core.domain.refs",
    "passage_ref": "memors_core.domain.refs",
    # dates (UTC, ISO 8601) and validity intervals
    "interval": "memors_core.domain.dates",
    "normalise": "memors_core.domain.dates",
    "now": "memors_core.domain.dates",
    "now_ts": "memors_core.domain.dates",
    "overlaps": "memors_core.domain.dates",
    # words, as search and the checks read them
    "content_words": "memors_core.domain.text",
    "fold_value": "memors_core.domain.text",
    "page_sentences": "memors_core.domain.text",
    "words": "memors_core.domain.text",
    # a page's citations and the sources of its sentences
    "cited_passages": "memors_core.domain.grounding",
    "read_citations": "memors_core.domain.grounding",
    "sentence_sources": "memors_core.domain.grounding",
    "sources_of": "memors_core.domain.grounding",
    "PAGE_MIN_PASSAGES": "memors_core.domain.rules",
    # JSON in and out, the input limits, logging
    "structure": "memors_core.wire",
    "to_json": "memors_core.wire",
    "Limits": "memors_core.settings",
    "get_logger": "memors_core.log",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:  # pragma: no cover
    from memors_core.domain.dates import (
        interval as interval,
    )
    from memors_core.domain.dates import (
        normalise as normalise,
    )
    from memors_core.domain.dates import (
        now as now,
    )
    from memors_core.domain.dates import (
        now_ts as now_ts,
    )
    from memors_core.domain.dates import (
        overlaps as overlaps,
    )
    from memors_core.domain.grounding import (
        cited_passages as cited_passages,
    )
    from memors_core.domain.grounding import (
        read_citations as read_citations,
    )
    from memors_core.domain.grounding import (
        sentence_sources as sentence_sources,
    )
    from memors_core.domain.grounding import (
        sources_of as sources_of,
    )
    from memors_core.domain.ids import (
        address as address,
    )
    from memors_core.domain.ids import (
        parse_address as parse_address,
    )
    from memors_core.domain.model import (
        CheckResult as CheckResult,
    )
    from memors_core.domain.model import (
        FactRef as FactRef,
    )
    from memors_core.domain.model import (
        Finding as Finding,
    )
    from memors_core.domain.model import (
        PageResolution as PageResolution,
    )
    from memors_core.domain.model import (
        PassageRef as PassageRef,
    )
    from memors_core.domain.refs import (
        entity_ref as entity_ref,
    )
    from memors_core.domain.refs import (
        fact_ref as fact_ref,
    )
    from memors_core.domain.refs import (
        page_ref as page_ref,
    )
    from memors_core.domain.refs import (
        passage_ref as passage_ref,
    )
    from memors_core.domain.rows import (
        Entity as Entity,
    )
    from memors_core.domain.rows import (
        Fact as Fact,
    )
    from memors_core.domain.rows import (
        Item as Item,
    )
    from memors_core.domain.rows import (
        Page as Page,
    )
    from memors_core.domain.rows import (
        Passage as Passage,
    )
    from memors_core.domain.rules import (
        PAGE_MIN_PASSAGES as PAGE_MIN_PASSAGES,
    )
    from memors_core.domain.text import (
        content_words as content_words,
    )
    from memors_core.domain.text import (
        fold_value as fold_value,
    )
    from memors_core.domain.text import (
        page_sentences as page_sentences,
    )
    from memors_core.domain.text import (
        words as words,
    )
    from memors_core.errors import (
        BadInput as BadInput,
    )
    from memors_core.errors import (
        NotFound as NotFound,
    )
    from memors_core.errors import (
        PluginError as PluginError,
    )
    from memors_core.log import (
        get_logger as get_logger,
    )
    from memors_core.plugins.hookspecs import (
        hookimpl as hookimpl,
    )
    from memors_core.plugins.kinds import (
        Candidate as Candidate,
    )
    from memors_core.plugins.kinds import (
        Changes as Changes,
    )
    from memors_core.plugins.kinds import (
        CheckContext as CheckContext,
    )
    from memors_core.plugins.kinds import (
        Kind as Kind,
    )
    from memors_core.plugins.kinds import (
        KindContext as KindContext,
    )
    from memors_core.plugins.kinds import (
        KindRegistry as KindRegistry,
    )
    from memors_core.plugins.kinds import (
        LintContext as LintContext,
    )
    from memors_core.plugins.kinds import (
        Scan as Scan,
    )
    from memors_core.plugins.kinds import (
        fingerprint as fingerprint,
    )
    from memors_core.plugins.store import (
        PluginStore as PluginStore,
    )
    from memors_core.settings import (
        Limits as Limits,
    )
    from memors_core.wire import (
        structure as structure,
    )
    from memors_core.wire import (
        to_json as to_json,
    )


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memors_core.plugins' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
