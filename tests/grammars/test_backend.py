"""Accept/reject table: what the compiled grammar lets through, fed token by token, for each
masking backend that has structural tags (xgrammar, llguidance; outlines-core has its own
file)."""

import pytest

from grammars import (
    InvalidSchemaError,
    JsonSchemaSpec,
    TextOrToolCallsSpec,
    ToolCallsSpec,
    ToolSpec,
)
from grammars.keywords import XGRAMMAR_KEYWORDS

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOLS = ToolCallsSpec((
    ToolSpec.from_parameters("f", OBJ, table=XGRAMMAR_KEYWORDS),
    ToolSpec.from_parameters("g", {"type": "object", "properties": {
        "item": {"$ref": "#/$defs/Item"}}, "required": ["item"],
        "$defs": {"Item": {"type": "string", "enum": ["x", "y"]}}}, table=XGRAMMAR_KEYWORDS),
), max_calls=1)


@pytest.fixture(scope="module", params=["xgrammar", "llguidance"])
def masking(request, backend, tokenizer):
    if request.param == "xgrammar":
        return backend
    from grammars import make_backend

    return make_backend(request.param, tokenizer, vocab_size=len(tokenizer),
                        stop_token_ids=[tokenizer.eos_token_id])


CASES = [
    (OBJ, '{"a":1}', True),
    (OBJ, '{"a": 1}', False),          # compact separators only
    (OBJ, '{"a":"1"}', False),         # wrong type
    (OBJ, "{}", False),                # missing required
    (OBJ, '{"a":1,"b":2}', False),     # no keys outside the schema
    ({"type": "string", "maxLength": 3}, '"abc"', True),
    ({"type": "string", "maxLength": 3}, '"abcd"', False),
    ({"type": "string", "enum": ["duplicate", "fraud"]}, '"fraud"', True),
    ({"type": "string", "enum": ["duplicate", "fraud"]}, '"other"', False),
    ({"type": "string", "format": "date"}, '"2026-11-29"', True),
    ({"type": "string", "format": "date"}, '"yesterday"', False),
    ({"type": "integer", "minimum": 0, "maximum": 10}, "10", True),
    ({"type": "integer", "minimum": 0, "maximum": 10}, "11", False),
    ({"type": "string", "pattern": "^[0-9]{4}$"}, '"4417"', True),
    ({"type": "string", "pattern": "^[0-9]{4}$"}, '"44a7"', False),
]


def _accepts(backend, tokenizer, spec, text: str) -> bool:
    matcher = backend.matcher(backend.compile(spec))
    for token in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.accept_token(token):
            return False
    return matcher.accept_token(tokenizer.eos_token_id) and matcher.is_terminated()


@pytest.mark.parametrize(("schema", "text", "ok"), CASES)
def test_json_schema_grammar(masking, tokenizer, schema, text, ok):
    spec = JsonSchemaSpec.from_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert _accepts(masking, tokenizer, spec, text) is ok


@pytest.mark.parametrize(("text", "ok"), [
    ('[{"name":"f","arguments":{"a":1}}]', True),
    ('[{"name":"g","arguments":{"item":"y"}}]', True),
    ('[{"name":"g","arguments":{"item":"z"}}]', False),   # enum through a hoisted $ref
    ('[{"name":"h","arguments":{"a":1}}]', False),        # no such tool
    ('[{"name":"f","arguments":{"a":1}},{"name":"f","arguments":{"a":2}}]', False),  # max 1
    ("[]", False),                                         # at least one call
    ('[{"arguments":{"a":1},"name":"f"}]', False),         # name comes first
])
def test_tool_calls_grammar(masking, tokenizer, text, ok):
    assert _accepts(masking, tokenizer, TOOLS, text) is ok


AUTO = TextOrToolCallsSpec(TOOLS, "<tool_call>", "</tool_call>")


@pytest.mark.parametrize(("text", "ok"), [
    ("Paris is the capital of France.", True),
    ('<tool_call>[{"name":"f","arguments":{"a":1}}]</tool_call>', True),
    ('Let me check. <tool_call>[{"name":"g","arguments":{"item":"x"}}]</tool_call>', True),
    ('<tool_call>[{"name":"h","arguments":{"a":1}}]</tool_call>', False),   # no such tool
    ('<tool_call>[{"name":"f","arguments":{"a":"1"}}]</tool_call>', False),  # wrong type
    ('<tool_call>[{"name":"f","arguments":{"a":1}}]</tool_call> and more', False),  # stops
    ('<tool_call>[{"name":"f","arguments":{"a":1}},{"name":"f","arguments":{"a":2}}]'
     '</tool_call>', False),                                               # max_calls=1
])
def test_text_or_tool_calls_grammar(masking, tokenizer, text, ok):
    assert _accepts(masking, tokenizer, AUTO, text) is ok


def test_stop_token_is_refused_before_the_value_is_complete(masking, tokenizer):
    spec = JsonSchemaSpec.from_schema(OBJ, table=XGRAMMAR_KEYWORDS)
    matcher = masking.matcher(masking.compile(spec))
    for token in tokenizer.encode('{"a":1', add_special_tokens=False):
        assert matcher.accept_token(token)
    assert not matcher.accept_token(tokenizer.eos_token_id)
    assert not matcher.is_terminated()


def test_bitmask_allows_only_grammar_tokens(masking, tokenizer):
    import torch

    spec = JsonSchemaSpec.from_schema(OBJ, table=XGRAMMAR_KEYWORDS)
    matcher = masking.matcher(masking.compile(spec))
    bitmask = masking.allocate_bitmask(2)
    matcher.fill_bitmask(bitmask, 1)
    logits = torch.zeros((2, masking.vocab_size))
    masking.apply_bitmask(logits, bitmask, [1])
    allowed = [tokenizer.decode([i]) for i in torch.nonzero(logits[1] == 0).flatten().tolist()]
    assert allowed and all(t.startswith("{") for t in allowed)
    assert bool((logits[0] == 0).all())  # row 0 was not in `rows`: untouched


def test_numpy_logits_are_masked_as_torch_logits_are(masking, tokenizer):
    """The llama.cpp engine's logits are numpy arrays, the torch engine's tensors: the same
    bitmask leaves the same tokens in both, over a whole value, and a padded logit past the
    vocabulary is left as it is, as xgrammar's kernel leaves it."""
    import numpy as np
    import torch

    spec = JsonSchemaSpec.from_schema(OBJ, table=XGRAMMAR_KEYWORDS)
    matcher = masking.matcher(masking.compile(spec))
    bitmask = masking.allocate_bitmask(3)
    rng = np.random.default_rng(0)
    for token in [*tokenizer.encode('{"a":1}', add_special_tokens=False), None]:
        matcher.fill_bitmask(bitmask, 2)
        values = rng.standard_normal((3, masking.vocab_size + 1)).astype(np.float32)
        on_numpy, on_torch = values.copy(), torch.from_numpy(values.copy())
        masking.apply_bitmask(on_numpy, bitmask, [2])
        masking.apply_bitmask(on_torch, bitmask, [2])
        assert np.array_equal(on_numpy, on_torch.numpy())
        assert np.isfinite(on_numpy[2]).sum() >= 1 and np.isinf(on_numpy[2]).any()
        assert np.array_equal(on_numpy[:2], values[:2])  # rows not asked for: untouched
        assert on_numpy[2, -1] == values[2, -1]  # past the vocabulary
        if token is not None:
            assert np.isfinite(on_numpy[2, token]) and matcher.accept_token(token)


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
    {"type": "string", "format": "date", "maxLength": 3},
])
def test_length_with_pattern_or_format_is_dropped_by_xgrammar(backend, tokenizer, schema):
    """Why check_schema refuses these combinations: if this starts failing, a newer
    xgrammar enforces them and the refusal can go."""
    from grammars.specs import canonical_json

    spec = JsonSchemaSpec(canonical_json(schema))  # bypasses check_schema on purpose
    too_long = '"abcdefgh"' if "pattern" in schema else '"2026-11-29"'
    assert _accepts(backend, tokenizer, spec, too_long)


def test_backend_reports_schemas_it_cannot_compile(masking):
    spec = JsonSchemaSpec.from_schema({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/Missing"}}}, table=XGRAMMAR_KEYWORDS)
    with pytest.raises(InvalidSchemaError, match="rejected"):
        masking.compile(spec)
