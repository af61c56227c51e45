"""The wire format: one cattrs converter, built by a factory, owns the JSON.

Frontends call :func:`to_json` on what :class:`memors_core.Memory` returns;
kinds call :func:`structure` to turn a submitted resolution into their attrs
class, and get a readable :class:`BadInput` when it does not fit.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.v import format_exception

from memors_core.errors import BadInput

T = TypeVar("T")


class _Expected(TypeError):
    """Raised by the structure hooks below: its message is already readable."""


def make_converter() -> cattrs.Converter:
    """A fresh converter: attrs classes to and from the JSON of SPEC §10."""
    conv = cattrs.Converter(forbid_extra_keys=True)
    _structure_strictly(conv)
    _unstructure_without_empty_extras(conv)
    return conv


def _structure_strictly(conv: cattrs.Converter) -> None:
    """Strings, booleans and integers are taken only as themselves (no
    ``"1"`` for 1, no 1 for true), each refusal one readable message."""

    def structure_str(value: Any, _type: type) -> str:
        if not isinstance(value, str):
            raise _Expected(f"expected a string, got {type(value).__name__}")
        return value

    def structure_bool(value: Any, _type: type) -> bool:
        if not isinstance(value, bool):
            raise _Expected(f"expected true or false, got {type(value).__name__}")
        return value

    def structure_int(value: Any, _type: type) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Expected(f"expected an integer, got {type(value).__name__}")
        return value

    def structure_str_list(value: Any, _type: type) -> list[str]:
        # A single string is accepted where a list of strings is expected
        # (`keep: "memo://fact/…"` reads as naturally as a one-element list).
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list | tuple):
            raise _Expected(f"expected a list of strings, got {type(value).__name__}")
        return [structure_str(v, str) for v in value]

    conv.register_structure_hook(str, structure_str)
    conv.register_structure_hook(bool, structure_bool)
    conv.register_structure_hook(int, structure_int)
    conv.register_structure_hook_func(lambda t: t == list[str], structure_str_list)


def _unstructure_without_empty_extras(conv: cattrs.Converter) -> None:
    """Results leave out the fields that are there only sometimes (a
    plugin's errors, paging, a notice, a live row's tombstone) when empty,
    so the JSON keeps SPEC §10's shape."""
    from memors_core.domain.model import Compacted

    base = conv.get_unstructure_hook(Compacted)

    def unstructure_compacted(value: Compacted) -> dict[str, Any]:
        out = base(value)
        if not out.get("errors"):
            out.pop("errors", None)  # SPEC §10's shape unless a plugin failed
        if out.get("more") is None:
            out.pop("more", None)  # only when paging
        return out

    conv.register_unstructure_hook(Compacted, unstructure_compacted)

    from memors_core.domain.model import SearchHit, SearchResults

    base_hit = conv.get_unstructure_hook(SearchHit)

    def unstructure_hit(value: SearchHit) -> dict[str, Any]:
        out = base_hit(value)
        if out.get("unverified") is None:
            out.pop("unverified", None)  # only on a page stored over flags
        return out

    conv.register_unstructure_hook(SearchHit, unstructure_hit)

    base_search = conv.get_unstructure_hook(SearchResults)

    def unstructure_search(value: SearchResults) -> dict[str, Any]:
        out = base_search(value)
        if out.get("notice") is None:
            out.pop("notice", None)  # only when the mode asked for was not used
        return out

    conv.register_unstructure_hook(SearchResults, unstructure_search)

    from memors_core.domain.model import (
        TOMBSTONE_FIELDS,
        DocumentView,
        FactView,
        PageView,
        PassageView,
    )

    for view in (DocumentView, PassageView, FactView, PageView):
        base_view = conv.get_unstructure_hook(view)

        def unstructure_view(value: Any, base_view: Any = base_view) -> dict[str, Any]:
            out = base_view(value)
            for key in TOMBSTONE_FIELDS:  # a live row has no tombstone to describe
                if key in out and out[key] is None:
                    del out[key]
            return out

        conv.register_unstructure_hook(view, unstructure_view)

    from memors_core.domain.model import SubmitReport

    base_report = conv.get_unstructure_hook(SubmitReport)

    def unstructure_report(value: SubmitReport) -> dict[str, Any]:
        out = base_report(value)
        for key, extra in out.pop("outcome", {}).items():
            out.setdefault(key, extra)  # a kind's fields never hide the report's own
        return out

    conv.register_unstructure_hook(SubmitReport, unstructure_report)


@cache
def converter() -> cattrs.Converter:
    return make_converter()


def to_json(obj: Any) -> Any:
    """Unstructure an attrs result into plain JSON-ready data."""
    return converter().unstructure(obj)


def _format(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, _Expected):
        return str(exc)
    return format_exception(exc, type_)


def _describe(exc: BaseException, what: str) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        return f"unexpected field(s) for {what}: {', '.join(sorted(exc.extra_fields))}"
    try:
        messages = cattrs.transform_error(exc, path=what, format_exception=_format)
    except Exception:  # transform_error only knows cattrs' own exceptions
        messages = [str(exc)]
    return "; ".join(messages)


def structure(data: Any, cls: type[T], what: str | None = None) -> T:
    """Structure ``data`` into ``cls`` or raise a one-line :class:`BadInput`."""
    what = what or cls.__name__
    if not isinstance(data, dict):
        raise BadInput(f"{what} must be a JSON object, got {type(data).__name__}")
    try:
        return converter().structure(data, cls)
    except (ClassValidationError, ForbiddenExtraKeysError, TypeError, ValueError) as exc:
        raise BadInput(_describe(exc, what)) from None


def with_web_url(data: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``get``'s JSON with ``url``, where the web view shows the row (the path
    under ``memors-mcp serve --http``), right after ``status``."""
    from memors_core.domain.ids import web_path

    if not isinstance(data, dict) or "address" not in data:
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        out[key] = value
        if key == "status":
            out["url"] = web_path(data["address"], namespace)
    out.setdefault("url", web_path(data["address"], namespace))
    return out
