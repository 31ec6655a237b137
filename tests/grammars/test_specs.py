import json

import pytest

from grammars import (
    InvalidSchemaError,
    JsonSchemaSpec,
    ToolCallsSpec,
    ToolSpec,
    canonical_json,
    check_schema,
)
from grammars.keywords import XGRAMMAR_KEYWORDS


def test_canonical_json_sorts_keywords_but_keeps_property_order():
    a = {"type": "object", "properties": {"z": {"type": "string", "maxLength": 3}, "a": {}}}
    b = {"properties": {"z": {"maxLength": 3, "type": "string"}, "a": {}}, "type": "object"}
    assert canonical_json(a) == canonical_json(b)
    assert list(json.loads(canonical_json(a))["properties"]) == ["z", "a"]
    swapped = {"type": "object", "properties": {"a": {}, "z": {"type": "string",
                                                                "maxLength": 3}}}
    assert canonical_json(swapped) != canonical_json(a)


def test_a_property_named_properties_is_not_reordered_as_a_keyword():
    schema = {"type": "object", "properties": {"properties": {"type": "object", "properties": {
        "y": {}, "x": {}}}}}
    inner = json.loads(canonical_json(schema))["properties"]["properties"]["properties"]
    assert list(inner) == ["y", "x"]


@pytest.mark.parametrize("schema", [{"type": "strng"}, {"minLength": -1}, {"required": "a"},
                                    "not an object"])
def test_invalid_json_schema_is_refused(schema):
    with pytest.raises(InvalidSchemaError):
        check_schema(schema, table=XGRAMMAR_KEYWORDS)


def test_tool_calls_spec_shapes_the_call_array():
    tool = ToolSpec.from_parameters("f", {"type": "object", "properties": {"a": {}}},
                                    table=XGRAMMAR_KEYWORDS)
    schema = ToolCallsSpec((tool,), min_calls=1, max_calls=1).json_schema()
    assert schema["minItems"] == 1 and schema["maxItems"] == 1
    assert schema["items"]["properties"]["name"] == {"const": "f"}
    assert "maxItems" not in ToolCallsSpec((tool,)).json_schema()


def test_tool_defs_are_hoisted_and_refs_rewritten():
    params = {"type": "object", "properties": {"item": {"$ref": "#/$defs/Item"}},
              "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    other = {"type": "object", "properties": {"item": {"$ref": "#/definitions/Item"}},
             "definitions": {"Item": {"type": "string"}}}
    spec = ToolCallsSpec((ToolSpec.from_parameters("a", params, table=XGRAMMAR_KEYWORDS),
                          ToolSpec.from_parameters("b", other, table=XGRAMMAR_KEYWORDS)))
    schema = spec.json_schema()
    assert set(schema["$defs"]) == {"t0_Item", "t1_Item"}
    calls = schema["items"]["anyOf"]
    assert calls[0]["properties"]["arguments"]["properties"]["item"] == {
        "$ref": "#/$defs/t0_Item"}
    assert calls[1]["properties"]["arguments"]["properties"]["item"] == {
        "$ref": "#/$defs/t1_Item"}


def test_duplicate_tool_names_are_refused():
    tool = ToolSpec.from_parameters("f", {"type": "object"}, table=XGRAMMAR_KEYWORDS)
    with pytest.raises(InvalidSchemaError, match="unique"):
        ToolCallsSpec((tool, tool))


def test_spec_keys_differ_by_kind_and_content():
    a = JsonSchemaSpec.from_schema({"type": "object"}, table=XGRAMMAR_KEYWORDS)
    b = JsonSchemaSpec.from_schema({"type": "array"}, table=XGRAMMAR_KEYWORDS)
    tool = ToolSpec.from_parameters("f", {"type": "object"}, table=XGRAMMAR_KEYWORDS)
    assert len({a.key, b.key, ToolCallsSpec((tool,)).key,
                ToolCallsSpec((tool,), max_calls=1).key}) == 4


def test_a_remembered_check_keeps_nothing_the_cyclic_collector_walks():
    # Kept as objects, a check's keyword uses were most of what a full collection walked
    # (57,000 of 71,000 objects after 300 Kubernetes schemas: a 19 ms pause). Kept as plain
    # tuples of strings, the collector stops tracking them at its first pass.
    import gc

    from grammars.keywords import KeywordUse
    from grammars.specs import _checked, check_schema

    schema = {"type": "object", "properties": {
        f"p{i}": {"type": "string", "description": f"field {i}", "maxLength": 9}
        for i in range(50)}, "required": ["p0"]}
    analysis = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert all(isinstance(u, KeywordUse) for u in analysis.report.uses)
    rows, _, text = _checked(json.dumps(schema, ensure_ascii=False), "schema",
                             XGRAMMAR_KEYWORDS)
    assert text == canonical_json(analysis.grammar_schema)  # a hit writes it no more
    assert [KeywordUse(*r) for r in rows] == list(analysis.report.uses)
    # Plain tuples of strings and flags all the way down: what the collector stops tracking
    # (shown on a copy made here: the cached one may sit in a heap another test froze).
    assert type(rows) is tuple and all(
        type(r) is tuple and all(type(v) in (str, bool) for v in r) for r in rows)
    copy = tuple(tuple(list(r)) for r in rows)
    gc.collect()
    gc.collect()  # (a tuple of tuples goes once its items have gone, at a later pass)
    assert not gc.is_tracked(copy) and not any(gc.is_tracked(r) for r in copy)
    # A hit gives the same report, as objects of its own.
    again = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert again.report == analysis.report and again.report is not analysis.report
