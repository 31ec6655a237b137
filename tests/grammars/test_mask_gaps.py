"""Where xgrammar 0.2.9's masks and JSON Schema part, as its keyword table says, each
measured here against the mask and named in the enforcement report: valid values its format
masks never write (`format_subsets`), and listed names that other keys can take with any
value (`extras_take_odd_names`). Found by the property tests
(tests/grammars/test_properties.py)."""

import json

import pytest

from grammars import JSON_SCHEMA_READING, check_schema, with_policies
from grammars.keywords import XGRAMMAR_KEYWORDS
from grammars.validate import validator_for
from tests.grammars.test_keywords import mask_accepts

# (format, a valid value the mask writes, a valid value it never writes)
SUBSETS = [
    ("email", "a@x.yz.com", "a@mail.x.com"),
    ("email", "john.doe@mail.example.co.uk", "a@ab.c"),
    ("email", "a@localhost", "a@[127.0.0.1]"),
    ("date-time", "2020-01-01T00:00:00Z", "2020-01-01t00:00:00z"),
    ("time", "12:00:00Z", "12:00:00z"),
    ("hostname", "example.com", "Example.com"),
]


@pytest.mark.parametrize(("fmt", "written", "never"), SUBSETS)
def test_the_table_names_what_a_format_mask_never_writes(backend, fmt, written, never):
    schema = {"type": "string", "format": fmt}
    assert mask_accepts(backend, schema, json.dumps(written))
    assert not mask_accepts(backend, schema, json.dumps(never))
    if fmt != "hostname":  # no hostname checker here (the fqdn package is not installed)
        assert validator_for(schema).is_valid(never)
    notes = [u.note for u in check_schema(schema, table=XGRAMMAR_KEYWORDS).report.uses]
    assert any("the mask never writes" in n for n in notes), notes
    assert set(dict(XGRAMMAR_KEYWORDS.format_subsets)) <= XGRAMMAR_KEYWORDS.formats


@pytest.mark.parametrize("name", ["Größe", "é", 'a"b', "a\\b", "日本"])
def test_other_keys_take_odd_listed_names_as_the_report_says(backend, name):
    schema = {"type": "object", "properties": {name: {"type": "integer"}},
              "additionalProperties": True}
    key = json.dumps(name, ensure_ascii=False)
    assert mask_accepts(backend, schema, f'{{{key}:"x"}}')  # any value: the gap
    uses = check_schema(schema, table=XGRAMMAR_KEYWORDS).report.uses
    odd = [u for u in uses if u.keyword == "properties" and u.tier == "validator"]
    assert [u.pointer for u in odd] == [f"/properties/{name}"]
    assert not validator_for(schema).is_valid({name: "x"})  # the validator holds it


@pytest.mark.parametrize(("schema", "table"), [
    # plain names, closed objects (strict or additionalProperties false): no gap
    ({"type": "object", "properties": {"ab": {"type": "integer"}},
      "additionalProperties": True}, XGRAMMAR_KEYWORDS),
    ({"type": "object", "properties": {"Größe": {"type": "integer"}}}, XGRAMMAR_KEYWORDS),
    ({"type": "object", "properties": {"Größe": {"type": "integer"}},
      "additionalProperties": False}, with_policies(XGRAMMAR_KEYWORDS, JSON_SCHEMA_READING)),
])
def test_closed_objects_and_plain_names_hold_their_properties(backend, schema, table):
    name = next(iter(schema["properties"]))
    assert not mask_accepts(backend, schema, json.dumps({name: "x"}, ensure_ascii=False))
    uses = check_schema(schema, table=table).report.uses
    assert not [u for u in uses if u.keyword == "properties" and u.tier == "validator"]


def test_strict_objects_off_opens_objects_to_the_gap():
    schema = {"type": "object", "properties": {"Größe": {"type": "integer"}}}
    reading = with_policies(XGRAMMAR_KEYWORDS, JSON_SCHEMA_READING)
    uses = check_schema(schema, table=reading).report.uses
    assert [u.pointer for u in uses if u.tier == "validator"] == ["/properties/Größe"]
