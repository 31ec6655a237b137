"""Client patterns run in RE2 (grammars/patterns.py): a backtracking pattern that Python's
`re` would run for hours over a few dozen characters answers at once in the validator, the
schema check and grounding; what RE2 cannot run is refused up front with the reason."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from grammars import (
    GrammarError,
    PatternError,
    PatternTimeout,
    UnsupportedSchemaError,
    check_schema,
    client_regex,
)
from grammars.keywords import XGRAMMAR_KEYWORDS
from grammars.validate import validator_for

# Shapes of catastrophic backtracking in Python's `re` (nested and overlapping quantifiers),
# each with a text that makes `re` try exponentially many ways before failing.
HOSTILE = [
    (r"^(a+)+$", "a" * 64 + "!"),
    (r"^(a|a)*$", "a" * 64 + "!"),
    (r"^(a|aa)+$", "a" * 64 + "!"),
    (r"^([a-z0-9]+\s?)+@x$", "abc " * 30 + "!"),
    (r"^(\d+)*[a-z]$", "1" * 64 + "!"),
    (r"(x+x+)+y", "x" * 64),
]


def finishes(work: Callable[[], Any], *, within: float = 20.0) -> Any:
    """`work()`'s result; fails (rather than hanging the run) if it is still running after
    `within` seconds, which Python's `re` on these inputs would be for hours."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), "a client pattern ran in a backtracking engine"
    return out[0]


@pytest.mark.parametrize(("pattern", "text"), HOSTILE)
def test_the_validator_runs_a_backtracking_pattern_in_linear_time(pattern, text):
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    check_schema(schema, table=XGRAMMAR_KEYWORDS)  # accepted: RE2 runs it
    assert finishes(lambda: validator_for(schema).is_valid({"s": text})) is False


@pytest.mark.parametrize(("pattern", "text"), HOSTILE)
def test_pattern_properties_and_additional_properties_run_in_re2(pattern, text):
    schema = {"type": "object", "patternProperties": {pattern: {"type": "integer"}},
              "additionalProperties": False}
    errors = finishes(lambda: list(validator_for(schema).iter_errors({text: 1})))
    assert errors and "does not match any of the regexes" in errors[0].message


# Where RE2 and jsonschema's own keywords must agree (ECMA-262 syntax both run).
AGREE = [
    ({"pattern": "^[A-Z]{2}-[0-9]{4}$"}, ["AR-0042", "ar-0042", "AR-42", 7]),
    ({"patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
     [{"x-a": "1"}, {"x-a": 1}, {"y": "1"}, {}, "not an object"]),
    ({"properties": {"a": {}}, "patternProperties": {"^b": {}},
      "additionalProperties": {"type": "integer"}}, [{"a": "s", "b1": "s", "c": 1},
                                                     {"c": "s"}]),
    ({"properties": {"a": {}}, "additionalProperties": False}, [{"a": 1}, {"a": 1, "b": 2}]),
]


@pytest.mark.parametrize(("schema", "instances"), AGREE)
def test_re2_keywords_agree_with_jsonschema(schema, instances):
    for instance in instances:
        ours = validator_for(schema).is_valid(instance)
        theirs = jsonschema.Draft202012Validator(schema).is_valid(instance)
        assert ours == theirs, (schema, instance)


@pytest.mark.parametrize("pattern", [r"^[z-a]$", r"^(abc$", r"a**"])
def test_a_pattern_nothing_compiles_is_refused_with_its_pointer(pattern):
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    with pytest.raises(GrammarError) as caught:  # (the metaschema's `format: regex` first)
        check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert caught.value.pointer == "/properties/code/pattern"
    keys = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
            "patternProperties": {pattern: {}}}  # (no `format: regex` on these in draft-04)
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema(keys, table=XGRAMMAR_KEYWORDS)
    assert caught.value.pointer == "/patternProperties"
    assert "does not compile" in caught.value.message
    with pytest.raises(PatternError):
        client_regex(pattern)


# What RE2 cannot run (lookarounds, backreferences, repetitions over 1000) runs under a
# time budget: right verdicts where it answers in time...
BUDGETED = [
    (r"^(?=.*\d)[a-z\d]{6,}$", ["abc123", "abcdef", "a1"], [True, False, False]),
    (r"^(\w)\1$", ["aa", "ab"], [True, False]),
    (r"^[a-z]+(?<!c)$", ["abd", "abc"], [True, False]),
    (r"^a{1001}$", ["a" * 1001, "a" * 1000], [True, False]),
]


@pytest.mark.parametrize(("pattern", "texts", "verdicts"), BUDGETED)
def test_what_re2_cannot_run_is_checked_under_a_budget(pattern, texts, verdicts):
    schema = {"type": "string", "pattern": pattern}
    check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert [validator_for(schema).is_valid(t) for t in texts] == verdicts


def test_a_search_past_its_budget_is_a_violation_naming_the_pattern():
    """...and past the budget, a violation that names the pattern: never a silent pass."""
    pattern = r"^(?=a)(a|aa)+$"  # a lookahead (so not RE2) that backtracks
    errors = finishes(lambda: list(validator_for({"type": "string", "pattern": pattern})
                                   .iter_errors("a" * 64 + "!")))
    assert len(errors) == 1 and pattern in errors[0].message
    assert "took longer than" in errors[0].message
    with pytest.raises(PatternTimeout):  # (its budget ends it, as it ended the one above)
        client_regex(pattern).search("a" * 64 + "!")


def test_unevaluated_properties_beside_pattern_properties_is_refused():
    schema = {"type": "object", "allOf": [{"patternProperties": {"^a": {}}}],
              "unevaluatedProperties": False}
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema(schema, table=XGRAMMAR_KEYWORDS)
    assert caught.value.pointer == "/unevaluatedProperties"


def test_ecma_classes_are_ascii_and_unicode_properties_run():
    assert client_regex(r"^\d+$").search("123") is not None
    assert client_regex(r"^\d+$").search("١٢٣") is None  # ECMA-262's \d: ASCII digits
    assert client_regex(r"^\p{L}+$").search("привет") is not None
    spans = [m.span() for m in client_regex(r"\d+").finditer("карта 4417, сумма 12")]
    assert spans == [(6, 10), (18, 20)]  # offsets in characters, not UTF-8 bytes
