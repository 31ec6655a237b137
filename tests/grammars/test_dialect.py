import pytest

from grammars import InvalidSchemaError, bfcl_to_json_schema, check_schema
from grammars.keywords import XGRAMMAR_KEYWORDS
from tests.conftest import bfcl

CASES = [
    ({"type": "dict", "properties": {"a": {"type": "float"}}},
     {"type": "object", "properties": {"a": {"type": "number"}}}),
    ({"type": "tuple", "items": {"type": "integer"}},
     {"type": "array", "items": {"type": "integer"}}),
    ({"type": "dict", "properties": {"x": {"type": "any", "description": "d"}}},
     {"type": "object", "properties": {"x": {"description": "d"}}}),
    ({"type": "dict", "properties": {"o": {"type": "string", "optional": True,
                                            "default": "u"}}},
     {"type": "object", "properties": {"o": {"type": "string", "default": "u"}}}),
    # A property *named* "type" keeps its name; only schema positions are converted.
    ({"type": "dict", "properties": {"type": {"type": "dict", "properties": {}}}},
     {"type": "object", "properties": {"type": {"type": "object", "properties": {}}}}),
    ({"type": ["float", "null"]}, {"type": ["number", "null"]}),
    ({"anyOf": [{"type": "dict"}, {"type": "tuple"}]},
     {"anyOf": [{"type": "object"}, {"type": "array"}]}),
    ({"type": "object", "properties": {"s": {"type": "string"}}},
     {"type": "object", "properties": {"s": {"type": "string"}}}),
]


@pytest.mark.parametrize(("bfcl_schema", "expected"), CASES)
def test_bfcl_dialect_converts(bfcl_schema, expected):
    assert bfcl_to_json_schema(bfcl_schema) == expected


def test_conversion_does_not_mutate_input():
    schema = {"type": "dict", "properties": {"a": {"type": "float"}}}
    bfcl_to_json_schema(schema)
    assert schema["type"] == "dict"


@pytest.mark.parametrize("bad", [{"type": "decimal"}, {"type": 3}, ["not", "a", "dict"]])
def test_bfcl_dialect_rejects_unknown_types(bad):
    with pytest.raises(InvalidSchemaError):
        bfcl_to_json_schema(bad)


@pytest.mark.parametrize("name", ["BFCL_v4_simple_python.json", "BFCL_v4_multiple.json",
                                  "BFCL_v4_parallel.json"])
def test_every_bfcl_function_converts_to_valid_json_schema(name):
    functions = [f for q in bfcl(name) for f in q["function"]]
    assert len(functions) >= 200
    for fn in functions:
        converted = bfcl_to_json_schema(fn["parameters"])
        analysis = check_schema(converted, table=XGRAMMAR_KEYWORDS)
        assert not analysis.report.of("rejected")
        # One BFCL function requires names its `properties` do not list: the validator's.
        assert all(u.keyword == "required" and "not in 'properties'" in u.note
                   for u in analysis.report.of("validator"))
        assert "dict" not in str(converted.get("type"))
