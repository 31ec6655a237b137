"""json_text.JsonClose: where a grammar-written JSON object or array closes, in text that comes
in chunks of any size (vLLM's deltas), never earlier, and never for a scalar root."""

from __future__ import annotations

import json
import random

import pytest

from server.engines.json_text import JsonClose

VALUES = [
    {},
    [],
    {"a": 1},
    {"text": "a } ] { [ inside", "quote": 'she said "no"', "slash": "ends with \\"},
    {"nested": [{"x": [1, 2, {"y": "]"}]}, []], "unicode": "привет \u2028 😀"},
    [["\\\"", "\\"], {"k": "\\\\\\\""}],
    {"escapes": "\b\f\n\r\t\u0001"},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("spaced", [False, True])
def test_closes_exactly_at_the_last_bracket_whatever_the_chunks(value, spaced):
    text = json.dumps(value, ensure_ascii=False,
                      separators=(", ", ": ") if spaced else (",", ":"))
    rng = random.Random(text)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6))))
        chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        close = JsonClose()
        seen = ""
        for chunk in chunks:
            seen += chunk
            assert close.add(chunk) == (seen == text), (chunks, seen)


def test_the_whole_value_in_one_chunk_and_text_after_it():
    close = JsonClose()
    assert close.add('{"a":[1]}')
    assert close.add("more")  # stays closed
    assert JsonClose().add('  {"a":1}')  # whitespace before the root


@pytest.mark.parametrize("text", ["123", '"a string"', "true", "null", "-1.5e3"])
def test_a_scalar_root_is_never_called_closed(text):
    close = JsonClose()
    assert not close.add(text)
    assert not close.add("]}")


def test_only_a_spec_whose_whole_output_is_json_gets_one():
    from grammars import JsonSchemaSpec, StructuralTagSpec

    assert isinstance(JsonClose.for_spec(JsonSchemaSpec('{"type":"object"}')), JsonClose)
    assert JsonClose.for_spec(None) is None
    tagged = StructuralTagSpec.__new__(StructuralTagSpec)  # its fields do not matter here
    assert JsonClose.for_spec(tagged) is None
