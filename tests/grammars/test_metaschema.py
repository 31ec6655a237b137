"""Client schemas checked before anything reads them (grammars/metaschema.py): as a JSON
value, then against their draft's metaschema; each refusal names the JSON Pointer."""

from __future__ import annotations

import pytest

from grammars import MAX_NESTING, InvalidSchemaError, checked_client_schema

DRAFT_04 = "http://json-schema.org/draft-04/schema#"


def _nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(("schema", "pointer", "says"), [
    ({"type": "object", "required": [{}]}, "/required/0", "is not of type 'string'"),
    ({"type": "object", "required": 5}, "/required", "is not of type 'array'"),
    ({"type": "object", "required": [[1]]}, "/required/0", "is not of type 'string'"),
    ({"$schema": {}, "type": "object"}, "/$schema", "is not of type 'string'"),
    ({"type": "strnig"}, "/type", "is not valid under any of the given schemas"),
    ({"type": "object", "properties": 5}, "/properties", "is not of type 'object'"),
    ({"properties": {"a/b~c": {"minLength": -1}}}, "/properties/a~1b~0c/minLength",
     "less than the minimum"),
    ({"anyOf": []}, "/anyOf", "should be non-empty"),
    ({"enum": 3}, "/enum", "is not of type 'array'"),
    ({"pattern": "("}, "/pattern", "is not a 'regex'"),
    ({"description": "\ud800"}, "/description", "lone UTF-16 surrogate"),
    ({"properties": {"\udfff": {}}}, "/properties/\udfff", "lone UTF-16 surrogate"),
    ({"enum": ["ok", "x\ud83d"]}, "/enum/1", "lone UTF-16 surrogate"),
    ({"type": "number", "minimum": float("nan")}, "/minimum", "nan"),
    ({"const": [float("inf")]}, "/const/0", "inf"),
])
def test_a_malformed_schema_is_refused_naming_the_pointer(schema, pointer, says):
    with pytest.raises(InvalidSchemaError) as info:
        checked_client_schema(schema, where="the schema")
    assert info.value.pointer == pointer
    assert says in info.value.message and info.value.message.startswith("the schema ")


@pytest.mark.parametrize("schema", [None, [], "object", 3, True])
def test_a_schema_that_is_no_object_is_refused(schema):
    with pytest.raises(InvalidSchemaError, match="must be a JSON object"):
        checked_client_schema(schema, where="the schema")


def test_nesting_is_bounded_before_any_recursive_reader():
    checked_client_schema(_nested(MAX_NESTING // 2), where="s")  # items: 2 levels each
    with pytest.raises(InvalidSchemaError, match=f"more than {MAX_NESTING} deep"):
        checked_client_schema(_nested(5000), where="s")  # deeper than the stack


def test_the_draft_named_by_schema_is_the_one_checked():
    draft_04 = {"$schema": DRAFT_04, "type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert checked_client_schema(draft_04, where="s") == draft_04
    with pytest.raises(InvalidSchemaError, match="is not of type 'number'") as info:
        checked_client_schema({**draft_04, "$schema": "https://json-schema.org/draft/2020-12/"
                               "schema"}, where="s")
    assert info.value.pointer == "/exclusiveMinimum"


def test_bfcl_types_are_converted_then_checked():
    bfcl = {"type": "dict", "required": ["x"], "properties": {
        "x": {"type": "float", "optional": False},
        "pair": {"type": "tuple", "items": {"type": "any"}}}}
    assert checked_client_schema(bfcl, where="s", dialect="bfcl") == {
        "type": "object", "required": ["x"], "properties": {
            "x": {"type": "number"}, "pair": {"type": "array", "items": {}}}}
    with pytest.raises(InvalidSchemaError) as info:
        checked_client_schema({"type": "dict", "required": 5}, where="s", dialect="bfcl")
    assert info.value.pointer == "/required"
    with pytest.raises(InvalidSchemaError, match="is not valid under any"):
        checked_client_schema({"type": "dict"}, where="s")  # not in plain JSON Schema


def test_the_message_quotes_a_huge_value_only_in_part():
    with pytest.raises(InvalidSchemaError) as info:
        checked_client_schema({"type": "x" * 100_000}, where="s")
    assert info.value.pointer == "/type" and len(info.value.render()) < 1000


def test_a_valid_schema_passes_unchanged_and_twice():
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
              "required": ["city"], "additionalProperties": False}
    for _ in range(2):  # the second verdict comes from the cache
        assert checked_client_schema(schema, where="s") is schema


@pytest.mark.parametrize(("schema", "pointer"), [
    # BFCL live_simple's shape: an array whose enum lists strings (meant for its items).
    ({"type": "object", "properties": {"units": {"type": "array", "enum": ["c", "f"]}}},
     "/properties/units/enum"),
    ({"type": "array", "items": {"type": "integer", "enum": ["1", 2.5]}}, "/items/enum"),
    ({"allOf": [{"type": "boolean", "const": 1}]}, "/allOf/0/const"),
    ({"type": "object", "properties": {"a~b": {"type": ["string", "null"], "enum": [3]}}},
     "/properties/a~0b/enum"),
])
def test_a_type_that_no_enum_value_has_is_refused_before_any_decode(schema, pointer):
    """No output could be valid: a 400 naming the pointer, not a decode that ends in 422."""
    with pytest.raises(InvalidSchemaError, match="no value is valid here") as info:
        checked_client_schema(schema, where="the schema")
    assert info.value.pointer == pointer


@pytest.mark.parametrize("schema", [
    {"type": "integer", "enum": [1.0, "x"]},  # 1.0 is an integer in JSON Schema
    {"type": ["string", "null"], "enum": [None]},
    {"type": "number", "enum": [3]},
    {"type": "array", "enum": [["c"]]},
    {"type": "object", "const": {}},
    # A branch of a union, a condition or a definition may be the one not meant.
    {"anyOf": [{"type": "array", "enum": ["c"]}, {"type": "string"}]},
    {"not": {"type": "string", "enum": [1]}},
    {"$defs": {"unused": {"type": "string", "enum": [1]}}, "type": "string"},
])
def test_schemas_some_value_satisfies_pass(schema):
    assert checked_client_schema(schema, where="s") == schema


@pytest.mark.parametrize(("schema", "pointer", "says"), [
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 3}}},
     "/properties/n/minimum", "no number is valid here"),
    ({"type": "number", "exclusiveMinimum": 2, "maximum": 2}, "/exclusiveMinimum",
     "no number is valid here"),
    ({"type": "array", "items": {"type": "string", "minLength": 9, "maxLength": 2}},
     "/items/minLength", "no value is valid here"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "/minItems", "no value is valid here"),
    ({"type": "object", "properties": {"a": {}}, "required": ["a", "b"],
      "additionalProperties": False}, "/required", "'b' is required"),
])
def test_bounds_and_required_that_leave_nothing_are_refused_before_any_decode(
        schema, pointer, says):
    with pytest.raises(InvalidSchemaError, match=says) as info:
        checked_client_schema(schema, where="the schema")
    assert info.value.pointer == pointer and info.value.hint


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 3, "maximum": 3},
    {"minimum": 5, "maximum": 3},  # no type: a string still matches
    {"type": ["number", "string"], "minimum": 5, "maximum": 3},
    {"type": "array", "minItems": 2, "maxItems": 2},
    {"type": "object", "required": ["x"], "additionalProperties": False,
     "patternProperties": {"^x$": {}}},
    {"type": "object", "required": ["b"], "properties": {"b": {}},
     "additionalProperties": False},
    {"anyOf": [{"type": "integer", "minimum": 5, "maximum": 3}, {"type": "string"}]},
])
def test_bounds_some_value_meets_pass(schema):
    assert checked_client_schema(schema, where="s") == schema
