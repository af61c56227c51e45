"""Every MCP tool's output schema says what the tool really returns.

The schemas are TypedDicts in ``memors_mcp.tools``, written by hand; what the
tools return is ``wire.to_json`` of the attrs result classes in
``memors_core.domain.model``. Nothing ties the two together but this test:
it reads each tool's published output schema through a real MCP client
session and compares it, field by field, with the class the tool mirrors.

What the wire emits is not read from the class alone but found by
unstructuring an instance with the converter itself: a field the wire drops
when it has its default (``errors`` of a compaction, a live row's
tombstones) must be optional in the schema, every other field required.
"""

from __future__ import annotations

import copy
import types
import typing
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from mcp import Client

from memors_core import Memory
from memors_core.domain import model
from memors_core.testing import temporary_store
from memors_core.wire import to_json
from memors_mcp.server import build_server


@attrs.frozen
class Mirror:
    """What a tool's structured content is built from.

    ``classes``: the attrs class (``get``: every view it may return; the
    schema then describes the fields they share, plus the tombstones).
    ``extras``: fields the MCP layer or the kinds add (name -> required).
    ``flattened``: fields whose contents the wire lifts to the top level.
    """

    classes: tuple[type, ...]
    extras: dict[str, bool] = attrs.field(factory=dict)
    flattened: tuple[str, ...] = ()


VIEWS = (
    model.DocumentView,
    model.PassageView,
    model.FactView,
    model.EntityView,
    model.PageView,
    model.ItemView,
)

MIRRORS: dict[str, Mirror] = {
    # memors_mcp.paging adds `paged` to an answer too long for one page.
    "remember": Mirror((model.Remembered,), extras={"paged": False}),
    "record_fact": Mirror((model.FactRecorded,)),
    "propose_merge": Mirror((model.MergeProposed,)),
    "rename_entity": Mirror((model.Corrected,)),
    "undo_merge": Mirror((model.Corrected,)),
    "reopen": Mirror((model.Corrected,)),
    "search": Mirror((model.SearchResults,), extras={"paged": False}),
    # tools.get adds where the web view shows the row (wire.with_web_url).
    "get": Mirror(VIEWS, extras={"url": True, "paged": False}),
    "forget": Mirror((model.Forgotten,), extras={"paged": False}),
    # tools.fit_budget always counts `more` and adds `next` when there is more.
    "compact": Mirror((model.Compacted,), extras={"more": True, "next": False}),
    # What the built-in kinds put in their report (`ctx.report`): duplicate
    # and conflict items.
    "submit": Mirror(
        (model.SubmitReport,),
        extras={
            "kept": False,
            "forgotten": False,
            "left": False,
            "superseded": False,
            "bounded": False,
            "bound": False,
            "survivor": False,
            "merged": False,
            "paged": False,
        },
        flattened=("outcome",),
    ),
    "lint": Mirror((model.LintReport,), extras={"paged": False}),
    "corrections": Mirror((model.CorrectionList,), extras={"paged": False}),
}

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(model))


def _example(tp: Any) -> Any:
    """The plainest value of type ``tp`` (for a field with no default)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        return None if type(None) in args else _example(args[0])
    if origin is list:
        return []
    if origin is dict or tp is dict:
        return {}
    if attrs.has(tp):
        return _plainest(tp)
    if tp is Any:
        return None
    return tp()


def _plainest(cls: type) -> Any:
    """An instance of ``cls`` with every default kept, the rest plainest."""
    hints = _hints(cls)
    required = {
        f.name: _example(hints[f.name]) for f in attrs.fields(cls) if f.default is attrs.NOTHING
    }
    return cls(**required)


def _on_the_wire(cls: type) -> tuple[dict[str, Any], set[str]]:
    """The fields of ``cls`` (name -> type) and those the wire may leave out."""
    hints = _hints(cls)
    emitted = to_json(_plainest(cls))
    fields = {f.name: hints[f.name] for f in attrs.fields(cls)}
    return fields, {name for name in fields if name not in emitted}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return root["$defs"][ref.rsplit("/", 1)[-1]]


def _without_none(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007


def _type_mismatches(where: str, tp: Any, schema: dict[str, Any], root: dict) -> list[str]:
    """How ``schema`` fails to describe values of type ``tp`` (empty: it does)."""
    schema = _resolve(schema, root)
    origin = typing.get_origin(tp)
    nullable = origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)
    branches = schema.get("anyOf")
    null_branch = [b for b in branches or [] if b.get("type") == "null"]
    if nullable != bool(null_branch):
        said = "may be null" if null_branch else "is never null"
        return [f"{where}: the schema says it {said}, the class says otherwise"]
    if nullable:
        tp = _without_none(tp)
        origin = typing.get_origin(tp)
        rest = [b for b in branches if b.get("type") != "null"]
        if len(rest) != 1:
            return [f"{where}: the schema allows {len(rest)} non-null types"]
        schema = _resolve(rest[0], root)
    if tp is Any:
        return []
    if tp in _JSON_TYPES:
        expected = _JSON_TYPES[tp]
        if schema.get("type") != expected:
            return [f"{where}: the schema says {schema.get('type')!r}, the class {expected!r}"]
        return []
    if origin is list:
        if schema.get("type") != "array":
            return [f"{where}: the schema says {schema.get('type')!r}, the class a list"]
        (item,) = typing.get_args(tp)
        return _type_mismatches(f"{where}[]", item, schema.get("items", {}), root)
    if origin is dict or tp is dict:
        if schema.get("type") != "object":
            return [f"{where}: the schema says {schema.get('type')!r}, the class a dict"]
        values = typing.get_args(tp)[1] if typing.get_args(tp) else Any
        extra = schema.get("additionalProperties", True)
        if values is Any or isinstance(extra, bool):
            # a JSON object of anything is what the schema can say of it (or of its
            # `properties`, when the schema knows more than the class: a tombstone)
            return [] if values is Any else [f"{where}: the schema says nothing of its values"]
        return _type_mismatches(f"{where}.*", values, extra, root)
    if attrs.has(tp):
        if schema.get("type") != "object":
            return [f"{where}: the schema says {schema.get('type')!r}, the class {tp.__name__}"]
        return mismatches(schema, Mirror((tp,)), root, where=where)
    return [f"{where}: the test does not know how to compare {tp!r}"]


def mismatches(
    schema: dict[str, Any], mirror: Mirror, root: dict[str, Any] | None = None, where: str = ""
) -> list[str]:
    """Every way ``schema`` (an object's JSON Schema) differs from what the
    wire makes of ``mirror``'s classes; empty when it says exactly that."""
    root = root if root is not None else schema
    described: list[tuple[dict[str, Any], set[str]]] = [_on_the_wire(c) for c in mirror.classes]
    # a field every class has is expected; with several classes, a tombstone too
    names = set.intersection(*(set(fields) for fields, _ in described)) - set(mirror.flattened)
    if len(mirror.classes) > 1:
        names |= set(model.TOMBSTONE_FIELDS)
    expected: dict[str, tuple[Any, bool]] = {}
    for name in sorted(names):
        having = [(fields, omitted) for fields, omitted in described if name in fields]
        fields, omitted = having[0]
        required = len(having) == len(described) and not any(name in o for _, o in having)
        tp = fields[name]
        if not required and name in omitted:
            tp = _without_none(tp) if type(None) in typing.get_args(tp) else tp
        expected[name] = (tp, required)
    for name, required in mirror.extras.items():
        tp = expected.get(name, (Any, required))[0]
        expected[name] = (tp, required)

    properties = schema.get("properties", {})
    in_schema = set(properties)
    required_in_schema = set(schema.get("required", []))
    prefix = f"{where}." if where else ""
    found = []
    for name in sorted(set(expected) - in_schema):
        found.append(f"{prefix}{name}: in the class, missing from the schema")
    for name in sorted(in_schema - set(expected)):
        found.append(f"{prefix}{name}: in the schema, not in the class")
    for name in sorted(set(expected) & in_schema):
        tp, required = expected[name]
        if required != (name in required_in_schema):
            said = "required" if name in required_in_schema else "optional"
            really = "always there" if required else "sometimes left out"
            found.append(f"{prefix}{name}: the schema says {said}, on the wire it is {really}")
        found += _type_mismatches(prefix + name, tp, properties[name], root)
    return found


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each tool's output schema, as an MCP client is told it."""

    async def listed(memory: Memory) -> dict[str, dict[str, Any]]:
        async with Client(build_server(memory)) as client:
            tools = (await client.list_tools()).tools
            return {t.name: t.output_schema for t in tools}

    with temporary_store(Path(tmp_path_factory.mktemp("schemas"))) as db, Memory.open(db) as memory:
        return anyio.run(listed, memory)


def test_every_tool_has_a_mirror(schemas: dict[str, dict[str, Any]]) -> None:
    assert set(schemas) == set(MIRRORS)


@pytest.mark.parametrize("tool", sorted(MIRRORS))
def test_output_schema_matches_the_class(schemas: dict[str, dict[str, Any]], tool: str) -> None:
    assert mismatches(schemas[tool], MIRRORS[tool]) == []


# --- the comparison can fail ------------------------------------------------------------------


def test_a_field_dropped_from_a_schema_is_reported(schemas: dict[str, dict[str, Any]]) -> None:
    altered = copy.deepcopy(schemas["remember"])
    del altered["properties"]["entities"]
    altered["required"].remove("entities")
    assert mismatches(altered, MIRRORS["remember"]) == [
        "entities: in the class, missing from the schema"
    ]


def test_a_field_the_class_lacks_is_reported(schemas: dict[str, dict[str, Any]]) -> None:
    altered = copy.deepcopy(schemas["forget"])
    altered["properties"]["erased"] = {"type": "array", "items": {"type": "string"}}
    assert mismatches(altered, MIRRORS["forget"]) == ["erased: in the schema, not in the class"]


def test_a_field_added_to_the_class_is_reported(schemas: dict[str, dict[str, Any]]) -> None:
    grown = attrs.make_class(
        "MergeProposed",
        {
            **{f.name: attrs.field(type=f.type) for f in attrs.fields(model.MergeProposed)},
            "reason": attrs.field(type=str),
        },
        frozen=True,
    )
    assert mismatches(schemas["propose_merge"], Mirror((grown,))) == [
        "reason: in the class, missing from the schema"
    ]


def test_a_wrong_type_is_reported_even_nested(schemas: dict[str, dict[str, Any]]) -> None:
    altered = copy.deepcopy(schemas["search"])
    altered["$defs"]["SearchHit"]["properties"]["score"]["type"] = "string"
    assert mismatches(altered, MIRRORS["search"]) == [
        "results[].score: the schema says 'string', the class 'number'"
    ]


def test_required_and_nullable_are_checked(schemas: dict[str, dict[str, Any]]) -> None:
    altered = copy.deepcopy(schemas["submit"])
    altered["required"].remove("diff")
    altered["properties"]["address"] = {"type": "string"}
    assert mismatches(altered, MIRRORS["submit"]) == [
        "address: the schema says it is never null, the class says otherwise",
        "diff: the schema says optional, on the wire it is always there",
    ]
    dropped_by_the_wire = copy.deepcopy(schemas["compact"])
    dropped_by_the_wire["required"].append("errors")
    assert mismatches(dropped_by_the_wire, MIRRORS["compact"]) == [
        "errors: the schema says required, on the wire it is sometimes left out"
    ]
