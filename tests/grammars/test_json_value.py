"""The fast check of a parsed value (grammars/json_value.py) against a plain recursive
oracle, written here from the rules: never a pass for a value JSON cannot hold."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammars import MAX_NESTING, InvalidSchemaError, check_json_value
from grammars.json_value import has_surrogate, plain_json

TEXT = st.text(alphabet=st.sampled_from(["a", "é", "😀", "\ud800", "\udfff", "中", " "]),
               max_size=6)
SCALARS = st.none() | st.booleans() | st.integers() | TEXT \
    | st.floats(allow_nan=True, allow_infinity=True)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(TEXT, inner, max_size=4), max_leaves=30)


def oracle(value: Any, depth: int, limit: int) -> bool:
    """The rules, read one by one: no lone surrogate in any string or key, every float
    finite, no container `limit` or more deep below the top one."""
    if isinstance(value, str):
        return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return depth < limit and all(oracle(k, depth, limit) and oracle(v, depth + 1, limit)
                                     for k, v in value.items())
    if isinstance(value, list):
        return depth < limit and all(oracle(v, depth + 1, limit) for v in value)
    return True


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(min_value=1, max_value=4))
def test_the_fast_walk_agrees_with_the_rules(value, limit):
    assert plain_json(value, limit) == oracle(value, 0, limit)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_a_schema_the_fast_walk_refuses_is_refused_by_the_check_with_a_place(value):
    schema = {"enum": [value]}
    if oracle(schema, 0, MAX_NESTING):
        check_json_value(schema, where="the schema")  # no error
        return
    with pytest.raises(InvalidSchemaError) as info:
        check_json_value(schema, where="the schema")
    assert info.value.pointer.startswith("/enum/0")


@pytest.mark.parametrize(("text", "found"), [
    ("plain ascii", False), ("é and 中", False), ("😀", False), ("a\ud800b", True),
    ("\udfff", True), ("x" * 10_000 + "\ud83d", True)])
def test_lone_surrogates_are_found_in_any_text(text, found):
    assert has_surrogate(text) is found


def test_nesting_is_counted_as_the_slow_walk_counts_it():
    deep: Any = 1
    for _ in range(MAX_NESTING - 1):
        deep = [deep]
    assert plain_json({"const": deep}, MAX_NESTING)  # 64 containers: allowed
    check_json_value({"const": deep}, where="the schema")
    assert not plain_json({"const": [deep]}, MAX_NESTING)
    with pytest.raises(InvalidSchemaError, match="more than 64 deep"):
        check_json_value({"const": [deep]}, where="the schema")


def test_types_json_never_makes_go_to_the_slow_walk():
    assert not plain_json({"a": (1, 2)}, MAX_NESTING)
    assert not plain_json({1: "a"}, MAX_NESTING)
