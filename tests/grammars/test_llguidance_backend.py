"""llguidance as a grammar backend: its keyword table, checked against its own masks the way
xgrammar's and outlines-core's are, and its matcher driving the same bitmask layout.
(The accept/reject tables it shares with xgrammar are in test_backend.py.)"""

import json

import pytest
import torch

from grammars import (
    InvalidSchemaError,
    JsonSchemaSpec,
    ToolCallsSpec,
    ToolSpec,
    UnsupportedSchemaError,
    check_schema,
    make_backend,
)
from grammars.specs import canonical_json
from tests.grammars.test_keywords import GRAMMAR, PARTIAL, VALIDATOR, validator_accepts


@pytest.fixture(scope="module")
def llg(tokenizer):
    return make_backend("llguidance", tokenizer, vocab_size=len(tokenizer),
                        stop_token_ids=[tokenizer.eos_token_id])


def _tier(table, schema, pointer, keyword):
    uses = check_schema(schema, table=table).report.uses
    return [u.tier for u in uses if (u.pointer, u.keyword) == (pointer, keyword)]


def mask_accepts(backend, schema, text):
    spec = JsonSchemaSpec.from_schema(schema, table=backend.keywords)
    return backend.accepts(backend.compile(spec), text)


# Where llguidance 1.9.1 differs from xgrammar 0.2.9, each with a value breaking only that
# keyword: (schema, keyword, pointer, value).
DIFFERENCES = [
    # Lengths beside a pattern or a format: the validator's, as with xgrammar (llguidance's
    # intersection refuses valid strings: see test_values_its_mask_writes).
    ({"type": "string", "pattern": "^[a-f]+$", "maxLength": 3}, "maxLength", "/maxLength",
     '"abcdef"'),
    ({"type": "string", "format": "email", "minLength": 8}, "minLength", "/minLength",
     '"a@b.co"'),
    # multipleOf on numbers, and on integers with any divisor and bounds.
    ({"type": "number", "multipleOf": 0.5}, "multipleOf", "/multipleOf", "1.25"),
    ({"type": "integer", "multipleOf": 5, "minimum": 0}, "multipleOf", "/multipleOf", "3"),
    ({"type": "integer", "multipleOf": 2000}, "multipleOf", "/multipleOf", "3"),
    # Formats it compiles; the validator checks the rest it knows (llguidance refuses
    # formats it lacks: they are left out of its schema).
    *[({"type": "string", "format": f}, "format", "/format", bad) for f, bad in [
        ("email", '"ab"'), ("uri", '"a b"'), ("ipv4", '"1.2.3.400"'), ("ipv6", '"1.2.3.4"'),
        ("uri-reference", '"a b"'), ("regex", '"("')]],
    # min/maxProperties beside optional properties: it refuses the schema, so the validator.
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "maxProperties": 1}, "maxProperties", "/maxProperties", '{"a":1,"b":2}'),
    ({"type": "object", "minProperties": 1}, "minProperties", "/minProperties", "{}"),
]

# As in test_outlines_backend.py: the shared cases, with this backend's own tiers.
CASES = [(s, k, p, bad) for s, k, p, bad in GRAMMAR] + \
        [(s, k, p, bad) for s, k, p, bad, _ in VALIDATOR] + \
        [(s, k, p, bad) for s, k, p, bad, *_ in PARTIAL] + DIFFERENCES


@pytest.mark.parametrize(("schema", "keyword", "pointer", "bad"), CASES,
                         ids=[f"{k}{i}" for i, (_, k, _, _) in enumerate(CASES)])
def test_llguidance_table_matches_its_masks(llg, schema, keyword, pointer, bad):
    """grammar tier alone: the mask refuses the breaking value; any validator part: the mask
    lets it through and the validator refuses it. Either way it never comes back as valid."""
    tiers = _tier(llg.keywords, schema, pointer, keyword)
    if tiers == ["grammar"]:
        assert not mask_accepts(llg, schema, bad)
    else:
        assert "validator" in tiers
        assert mask_accepts(llg, schema, bad)
    if keyword != "additionalProperties":
        assert not validator_accepts(schema, json.loads(bad))


@pytest.mark.parametrize(("schema", "good"), [
    # Escapes under lengths and patterns are written (xgrammar's mask leaves them out).
    ({"type": "string", "maxLength": 4}, json.dumps('a"b')),
    ({"type": "string", "maxLength": 4}, json.dumps("a\nb")),
    ({"type": "string", "pattern": "^[a-z\"]+$"}, json.dumps('a"b')),
    # A repeated pattern beside a length (JSONSchemaBench Github_medium o21115): llguidance
    # alone refuses this valid value; the table leaves the length to the validator.
    ({"type": "string", "pattern": "^(?:\\S+\\s+){0,49}\\S+$", "maxLength": 500},
     '"The lab is wheelchair accessible."'),
    # Any decimals under number bounds (xgrammar: at most 6).
    ({"type": "number", "minimum": 0}, "0.12345678901234567"),
    # Unanchored patterns: whole matches, as the table's "full" policy says...
    ({"type": "string", "pattern": "abc"}, '"abc"'),
])
def test_values_its_mask_writes(llg, schema, good):
    assert llg.keywords.no_escapes_under == frozenset()
    assert mask_accepts(llg, schema, good)


@pytest.mark.parametrize(("schema", "bad"), [
    # ...never a match inside a longer string (llguidance alone would search: it is anchored).
    ({"type": "string", "pattern": "abc"}, '"xabcx"'),
    # No exponent under number bounds: the report says so (policy --number-bounds).
    ({"type": "number", "minimum": 0}, "1.5E+3"),
])
def test_values_its_mask_refuses_as_the_report_says(llg, schema, bad):
    assert validator_accepts(schema, json.loads(bad))
    assert not mask_accepts(llg, schema, bad)
    notes = [u.note for u in check_schema(schema, table=llg.keywords).report.uses]
    assert any("whole matches" in n or "no exponent" in n for n in notes)


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("hostname", '"a.com"', '"a_b com"'), ("duration", '"P1D"', '"1D"'),
    ("json-pointer", '"/a/~0b/~1c"', '"a"'), ("json-pointer", '""', '"/~2"'),
    ("relative-json-pointer", '"0/a"', '"/a"'), ("relative-json-pointer", '"12#"', '"01"')])
def test_formats_only_its_mask_checks_here(llg, fmt, good, bad):
    """The validator here lacks these checkers (optional packages): the mask is all there is."""
    schema = {"type": "string", "format": fmt}
    assert _tier(llg.keywords, schema, "/format", "format") == ["grammar"]
    assert mask_accepts(llg, schema, good)
    assert not mask_accepts(llg, schema, bad)


@pytest.mark.parametrize("fmt", ["uri-template"])
def test_formats_nothing_here_checks_are_refused_by_name(llg, fmt):
    """xgrammar's mask checks these; llguidance lacks them and so does the validator here."""
    with pytest.raises(UnsupportedSchemaError, match=fmt):
        check_schema({"type": "string", "format": fmt}, table=llg.keywords)


def test_strict_objects_can_be_turned_off(tokenizer):
    loose = make_backend("llguidance", tokenizer, vocab_size=len(tokenizer),
                         stop_token_ids=[tokenizer.eos_token_id])
    loose.set_strict_objects(False)
    assert not loose.keywords.strict_objects
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert mask_accepts(loose, schema, '{"a":1,"b":[2]}')


def test_compile_errors_name_the_first_line(llg):
    spec = JsonSchemaSpec(canonical_json({"type": "string", "format": "date", "maxLength": 3}))
    with pytest.raises(InvalidSchemaError, match="^the grammar backend rejected the schema: ") \
            as info:
        llg.compile(spec)
    assert "\n" not in info.value.message


def test_matcher_masks_tokens_and_a_refused_token_leaves_it_usable(llg, tokenizer):
    tool = ToolSpec.from_parameters("f", {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}, table=llg.keywords)
    matcher = llg.matcher(llg.compile(ToolCallsSpec((tool,), max_calls=1)))
    bitmask = llg.allocate_bitmask(2)
    x = tokenizer.encode("x", add_special_tokens=False)[0]
    for token in tokenizer.encode('[{"name":"f","arguments":{"n":12}}]',
                                  add_special_tokens=False):
        matcher.fill_bitmask(bitmask, 1)
        logits = torch.zeros(2, len(tokenizer))
        llg.apply_bitmask(logits, bitmask, [1])
        assert logits[1, token] == 0  # allowed
        assert torch.isinf(logits[1]).sum() > len(tokenizer) // 2  # most are not
        assert not matcher.accept_token(x)  # refused, and the matcher goes on
        assert matcher.accept_token(token)
    assert not matcher.is_terminated()
    assert matcher.accept_token(tokenizer.eos_token_id) and matcher.is_terminated()
    assert not matcher.accept_token(x)


def test_each_request_gets_its_own_matcher(llg, tokenizer):
    compiled = llg.compile(JsonSchemaSpec(canonical_json({"type": "integer"})))
    first, second = llg.matcher(compiled), llg.matcher(compiled)
    one = tokenizer.encode("1", add_special_tokens=False)[0]
    assert first.accept_token(one)
    assert second.accept_token(tokenizer.encode("2", add_special_tokens=False)[0])
    assert llg.accepts(compiled, "3")  # the compiled template stays at the start
