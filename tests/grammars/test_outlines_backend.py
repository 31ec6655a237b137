"""outlines-core as a second grammar backend: its keyword table, checked against its own
masks the way xgrammar's is, and its matcher driving the same bitmask layout."""

import json

import pytest
import torch

from grammars import GrammarCache, JsonSchemaSpec, ToolCallsSpec, ToolSpec, check_schema
from grammars.errors import InvalidSchemaError
from tests.grammars.test_keywords import GRAMMAR, PARTIAL, VALIDATOR, validator_accepts


@pytest.fixture(scope="module")
def outlines(tokenizer):
    from grammars.outlines_backend import OutlinesBackend

    return OutlinesBackend(tokenizer, vocab_size=len(tokenizer),
                           stop_token_ids=[tokenizer.eos_token_id])


@pytest.fixture(scope="module")
def outlines_cache(outlines):
    # Free-form objects cost outlines-core seconds each (a regex for any JSON object):
    # the cases share them.
    return GrammarCache(outlines)


def _tier(table, schema, pointer, keyword):
    uses = {(u.pointer, u.keyword): u.tier for u in check_schema(schema, table=table)
            .report.uses}
    return uses[(pointer, keyword)]


# Not here: a schema left with only `$defs` (outlines-core refuses it: a 400, not a wrong
# verdict) and values with keys beyond `properties` (it has strict objects only).
CASES = [(s, k, p, bad) for s, k, p, bad in GRAMMAR] + \
        [(s, k, p, bad) for s, k, p, bad, _ in VALIDATOR if k != "$ref"] + \
        [(s, k, p, bad) for s, k, p, bad, *_ in PARTIAL  # the validator's part
         if '"additionalProperties": true' not in json.dumps(s)]


@pytest.mark.parametrize(("schema", "keyword", "pointer", "bad"), CASES,
                         ids=[f"{k}{i}" for i, (_, k, _, _) in enumerate(CASES)])
def test_outlines_table_matches_its_masks(outlines, outlines_cache, schema, keyword, pointer,
                                          bad):
    """grammar tier: the mask refuses the breaking value; validator tier: the mask lets it
    through and the validator refuses it. Either way it never comes back as valid."""
    tier = _tier(outlines.keywords, schema, pointer, keyword)
    compiled = outlines_cache.get(JsonSchemaSpec.from_schema(schema,
                                                             table=outlines.keywords)).grammar
    if tier == "grammar":
        assert not outlines.accepts(compiled, bad)
    else:
        assert tier == "validator"
        assert outlines.accepts(compiled, bad)
    if keyword != "additionalProperties":
        assert not validator_accepts(schema, json.loads(bad))


def test_tables_differ_where_the_backends_do(outlines, backend):
    schema = {"type": "integer", "minimum": 5}
    assert _tier(backend.keywords, schema, "/minimum", "minimum") == "grammar"
    assert _tier(outlines.keywords, schema, "/minimum", "minimum") == "validator"


def test_matcher_masks_tokens_and_terminates(outlines, tokenizer):
    tool = ToolSpec.from_parameters("f", {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}, table=outlines.keywords)
    compiled = GrammarCache(outlines).get(ToolCallsSpec((tool,), max_calls=1)).grammar
    matcher = outlines.matcher(compiled)
    bitmask = outlines.allocate_bitmask(2)
    text = '[{"name":"f","arguments":{"n":12}}]'
    for token in tokenizer.encode(text, add_special_tokens=False):
        matcher.fill_bitmask(bitmask, 1)
        logits = torch.zeros(2, len(tokenizer))
        outlines.apply_bitmask(logits, bitmask, [1])
        assert logits[1, token] == 0  # allowed
        assert torch.isinf(logits[1]).sum() > len(tokenizer) // 2  # most are not
        assert matcher.accept_token(token)
    assert not matcher.accept_token(tokenizer.encode("x", add_special_tokens=False)[0])
    assert matcher.accept_token(tokenizer.eos_token_id) and matcher.is_terminated()


def test_no_structural_tags_and_strict_objects_only(outlines):
    from grammars import TextOrToolCallsSpec

    tool = ToolSpec.from_parameters("f", {"type": "object", "properties": {}},
                                    table=outlines.keywords)
    with pytest.raises(InvalidSchemaError, match="structural tags"):
        outlines.compile(TextOrToolCallsSpec(ToolCallsSpec((tool,)), "<tool_call>",
                                             "</tool_call>"))
    with pytest.raises(ValueError, match="strict objects"):
        outlines.set_strict_objects(False)


@pytest.mark.parametrize(("schema", "writes_escapes"), [
    ({"type": "string", "maxLength": 4}, True),
    ({"type": "string", "pattern": "^[a-z\"]+$"}, False)])
def test_escapes_under_its_string_bounds_are_as_its_table_says(outlines, outlines_cache,
                                                               schema, writes_escapes):
    analysis = check_schema(schema, table=outlines.keywords)
    key = next(k for k in schema if k != "type")
    assert (key in outlines.keywords.no_escapes_under) is not writes_escapes
    compiled = outlines_cache.get(JsonSchemaSpec.from_analysis(analysis)).grammar
    assert outlines.accepts(compiled, json.dumps('a"b')) is writes_escapes
