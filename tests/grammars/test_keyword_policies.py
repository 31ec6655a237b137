"""The server's generation policies, each measured against the backend's masks: what the
default generates (and the report says), and what JSON Schema's reading lets through."""

import json

import pytest

from grammars import JsonSchemaSpec, UnsupportedSchemaError, check_schema
from grammars.keywords import XGRAMMAR_KEYWORDS
from grammars.validate import validator_for
from tests.grammars.test_keywords import mask_accepts


def test_unknown_keywords_can_be_annotations_by_policy(backend):
    import dataclasses

    schema = {"type": "object", "properties": {"a": {"type": "string", "standsFor": "X",
                                                     "format": "non-blank"}}}
    lenient = dataclasses.replace(XGRAMMAR_KEYWORDS, unknown_keywords="annotation")
    analysis = check_schema(schema, table=lenient)
    notes = {u.keyword: (u.tier, u.note) for u in analysis.report.uses}
    assert notes["standsFor"][0] == notes["format"][0] == "annotation"
    assert "policy" in notes["standsFor"][1]
    with pytest.raises(UnsupportedSchemaError):
        check_schema(schema, table=XGRAMMAR_KEYWORDS)


def test_strict_objects_off_allows_unlisted_keys(backend, tokenizer):
    from grammars import XgrammarBackend

    loose = XgrammarBackend(tokenizer, vocab_size=len(tokenizer),
                            stop_token_ids=[tokenizer.eos_token_id], strict_objects=False)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    spec = JsonSchemaSpec.from_schema(schema, table=loose.keywords)
    assert loose.accepts(loose.compile(spec), '{"a":1,"b":[true]}')
    strict = JsonSchemaSpec.from_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert not backend.accepts(backend.compile(strict),
                               '{"a":1,"b":[true]}')
    assert loose.options_key != backend.options_key  # never the same cache entry


SEARCHES = [("^https?://", ["https://e.com/a", "xhttps://"]),
            ("[a-z]{3}", ["abc", "1abc2", "ab"]),
            ("^a$|b", ["a", "xbx", "ax"]),
            ("(a|b)$", ["xa", "ab", "ax"]),
            ("^\\d+$", ["12", "1x"]),
            ("a\\$", ["a$z", "a"])]


@pytest.mark.parametrize(("pattern", "values"), SEARCHES)
def test_patterns_search_policy_matches_like_json_schema(backend, pattern, values):
    import dataclasses
    import re

    search = dataclasses.replace(XGRAMMAR_KEYWORDS, patterns="search")
    grammar = check_schema({"type": "string", "pattern": pattern}, table=search).grammar_schema
    full = check_schema({"type": "string", "pattern": pattern},
                        table=XGRAMMAR_KEYWORDS).grammar_schema
    for value in values:
        text = json.dumps(value)
        assert mask_accepts(backend, grammar, text) == bool(re.search(pattern, value)), value
        assert mask_accepts(backend, full, text) == bool(re.fullmatch(pattern, value)), value


@pytest.mark.parametrize(("schema", "kind", "other"), [
    ({"properties": {"a": {"type": "integer"}}, "required": ["a"]}, "object", "[1]"),
    ({"items": {"type": "integer"}}, "array", '"s"'),
    ({"maxLength": 2}, "string", "123"),
    ({"minimum": 3}, "number", '{}'),
])
def test_untyped_schemas_are_generated_as_their_keywords_imply(backend, schema, kind, other):
    import dataclasses

    implied = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    note = next(u for u in implied.report.uses if u.implicit and u.keyword == "type").note
    assert f"generated as {kind}" in note
    assert not mask_accepts(backend, implied.grammar_schema, other)
    reading = dataclasses.replace(XGRAMMAR_KEYWORDS, implied_types=False, strict_objects=False)
    loose = check_schema(schema, table=reading).grammar_schema
    assert mask_accepts(backend, loose, other)  # JSON Schema: the keywords bind one type
    assert validator_for(schema).is_valid(json.loads(other))


def test_number_bounds_policy(backend):
    """xgrammar 0.2.9 writes bounded numbers in at most 6 decimals and no exponent: the
    default keeps the bounds in the mask (and says so); "validator" leaves them to the
    post-decode check, so every valid number can be written."""
    import dataclasses

    schema = {"type": "number", "minimum": 0, "maximum": 1}
    kept = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert {u.tier for u in kept.report.uses if u.keyword in ("minimum", "maximum")} \
        == {"grammar"}
    assert "6 decimals" in next(u.note for u in kept.report.uses if u.keyword == "minimum")
    assert mask_accepts(backend, kept.grammar_schema, "0.25")
    assert not mask_accepts(backend, kept.grammar_schema, "2")
    assert not mask_accepts(backend, kept.grammar_schema, "0.1234567")  # valid, not written
    late = dataclasses.replace(XGRAMMAR_KEYWORDS, number_bounds="validator")
    loose = check_schema(schema, table=late)
    assert {u.tier for u in loose.report.uses if u.keyword in ("minimum", "maximum")} \
        == {"validator"}
    assert mask_accepts(backend, loose.grammar_schema, "0.1234567")
    assert mask_accepts(backend, loose.grammar_schema, "1e-9")
    assert not validator_for(schema).is_valid(2)
    # Integers keep their bounds in the mask either way: no decimals to lose.
    integer = check_schema({"type": "integer", "minimum": 0}, table=late)
    assert [u.tier for u in integer.report.uses if u.keyword == "minimum"] == ["grammar"]


@pytest.mark.parametrize("schema", [{"type": "string", "maxLength": 8},
                                    {"type": "string", "pattern": "^[a-z\"]+$"}])
def test_bounded_strings_policy(backend, schema):
    """xgrammar 0.2.9 writes no escapes in a string under a length bound or pattern: the
    default keeps them in the mask (and says so); "validator" lets such strings be written."""
    import dataclasses

    value = 'a"b'
    assert validator_for(schema).is_valid(value)
    kept = check_schema(schema, table=XGRAMMAR_KEYWORDS)
    key = next(k for k in schema if k != "type")
    use = next(u for u in kept.report.uses if u.keyword == key)
    assert use.tier == "grammar" and "without escapes" in use.note
    assert not mask_accepts(backend, kept.grammar_schema, json.dumps(value))
    late = dataclasses.replace(XGRAMMAR_KEYWORDS, bounded_strings="validator")
    loose = check_schema(schema, table=late)
    assert [u.tier for u in loose.report.uses if u.keyword == key] == ["validator"]
    assert mask_accepts(backend, loose.grammar_schema, json.dumps(value))


def test_policies_are_named_and_json_schema_reading_departs_from_none():
    from grammars.keywords import JSON_SCHEMA_READING, departures, with_policies

    assert departures(XGRAMMAR_KEYWORDS) == ["strict_objects", "patterns", "implied_types",
                                             "number_bounds", "bounded_strings"]
    assert departures(with_policies(XGRAMMAR_KEYWORDS, JSON_SCHEMA_READING)) == []
    with pytest.raises(ValueError, match="backend"):
        with_policies(XGRAMMAR_KEYWORDS, {"backend": "other"})


@pytest.mark.parametrize("name", ["xgrammar", "llguidance", "bridge"])
def test_the_spaced_json_layout_writes_json_dumps_separators_and_nothing_else(name, tokenizer):
    from grammars import BRIDGE, GrammarPolicy, make_backend

    def backend(layout):
        made = make_backend(BRIDGE if name == "bridge" else name, tokenizer,
                            vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])
        return made, GrammarPolicy.for_backend(made, json_layout=layout)

    schema = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "b": {"type": "array", "items": {"type": "string"}}},
              "required": ["a", "b"]}
    value = {"a": 1, "b": ["x", "y"]}
    spaced, policy = backend("spaced")
    compiled = spaced.compile(policy.json_schema_spec(schema))
    assert spaced.accepts(compiled, json.dumps(value))  # `, ` and `: `
    assert not spaced.accepts(compiled, json.dumps(value, separators=(",", ":")))
    assert not spaced.accepts(compiled, json.dumps(value, indent=1))  # no other whitespace
    if name == "bridge":  # the bridge's own mask: the same layout
        bridged = spaced.bridge(policy.json_schema_spec(schema))
        assert bridged is not None and spaced.accepts(bridged, json.dumps(value))
    compact, _ = backend("compact")
    assert compact.options_key != spaced.options_key  # never the same cache entry


def test_a_backend_that_writes_compact_json_only_refuses_the_spaced_layout(tokenizer):
    from grammars import GrammarPolicy, make_backend

    outlines = make_backend("outlines", tokenizer, vocab_size=len(tokenizer),
                            stop_token_ids=[tokenizer.eos_token_id])
    with pytest.raises(ValueError, match="compact JSON only"):
        GrammarPolicy.for_backend(outlines, json_layout="spaced")
