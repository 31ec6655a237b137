"""`strictcall-bench bfcl` without a model: the lenient reading of calls from free text (the
unconstrained setting), on BFCL's own gold answers, and the valid-call check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.accuracy.bfcl import (
    described,
    parse_calls,
    schema_valid,
    settings_from,
    table,
    unsupported_row,
    with_instructions,
)
from bench.accuracy.bfcl_ast import check, load
from tests.conftest import evaldata

CATEGORIES = ("simple_python", "multiple", "parallel")


def _pairs(category: str, limit: int = 40) -> list[tuple[dict, dict]]:
    evaldata(f"bfcl/BFCL_v4_{category}.json")  # skips without it (fails in CI)
    evaldata(f"bfcl/possible_answer/BFCL_v4_{category}.json")
    return load(category, limit)


def _pick(value: Any) -> Any:
    """A gold value: nested dicts hold lists of acceptable values; take the first given."""
    if isinstance(value, dict):
        return {k: _pick(_first(v) if isinstance(v, list) else v) for k, v in value.items()}
    return value


def _first(acceptable: list[Any]) -> Any:
    return next(v for v in acceptable if v != "")


def _gold(answer: dict) -> list[dict[str, Any]]:
    """The answer's calls, wire-shaped, each optional parameter given its first value."""
    calls = []
    for expected in answer["ground_truth"]:
        (name, params), = expected.items()
        calls.append({"name": name, "arguments": {
            k: _pick(_first(v)) for k, v in params.items() if any(x != "" for x in v)}})
    return calls


def _renderings(calls: list[dict[str, Any]]) -> dict[str, str]:
    listed = json.dumps(calls)
    out = {"tagged": f"<tool_call>{listed}</tool_call>",
           "unclosed": f"<tool_call>{listed}",
           "prose around the tags": f"Sure.\n<tool_call>\n{listed}\n</tool_call>\nDone.",
           "trailing text": f"<tool_call>{listed} and that is all",
           "bare list": listed,
           "fenced": f"Here you go:\n```json\n{json.dumps(calls, indent=2)}\n```",
           "one tag per call": "".join(f"<tool_call>{json.dumps(c)}</tool_call>\n"
                                       for c in calls),
           "string arguments": json.dumps([{**c, "arguments": json.dumps(c["arguments"])}
                                           for c in calls])}
    if len(calls) == 1:
        out["bare object"] = json.dumps(calls[0])
        out["tagged object"] = f"<tool_call>{json.dumps(calls[0])}</tool_call>"
    return out


@pytest.mark.parametrize("category", CATEGORIES)
def test_gold_answers_parse_back_in_every_rendering(category):
    for _question, answer in _pairs(category):
        calls = _gold(answer)
        want = [(c["name"], c["arguments"]) for c in calls]
        for style, text in _renderings(calls).items():
            got = parse_calls(text)
            assert got == want, (answer["id"], style)
            assert check(got, answer), (answer["id"], style)


@pytest.mark.parametrize("category", CATEGORIES)
def test_gold_answers_validate_against_the_functions(category):
    for question, answer in _pairs(category, 20):
        calls = [(c["name"], c["arguments"]) for c in _gold(answer)]
        assert schema_valid(calls, question["function"]), answer["id"]


@pytest.mark.parametrize("text", [
    "", "I cannot call a function for that.", "<tool_call>", "<tool_call></tool_call>",
    "[]", "<tool_call>[]</tool_call>", "{}", '{"arguments": {"a": 1}}',
    '[{"name": 3, "arguments": {}}]', '[{"name": "f"}]', '[{"name": "f", "arguments": [1]}]',
    '[{"name": "f", "arguments": "not json"}]',
    '<tool_call>[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "argu',
    '<tool_call>[{"name": "f", "arguments": {"a": 1}}, 7]</tool_call>',
    '<tool_call>[{"name": "f", "arguments": {"a": 1}}]</tool_call><tool_call>oops',
])
def test_unparseable_text_is_no_valid_call(text):
    assert parse_calls(text) is None


def test_a_truncated_parallel_answer_is_not_read_as_its_first_call():
    question, answer = _pairs("parallel", 1)[0]
    text = json.dumps(_gold(answer))
    assert parse_calls(f"<tool_call>{text[:-10]}") is None


def test_valid_calls_name_the_questions_functions_and_fit_their_schemas():
    question, answer = _pairs("simple_python", 1)[0]
    (name, arguments), = [(c["name"], c["arguments"]) for c in _gold(answer)]
    functions = question["function"]
    assert schema_valid([(name, arguments)], functions)
    assert not schema_valid([], functions)
    assert not schema_valid([("not_a_function", arguments)], functions)
    required = _required(functions[0])
    assert required, "the first simple_python function has required parameters"
    assert not schema_valid([(name, {k: v for k, v in arguments.items()
                                     if k != required[0]})], functions)
    assert not schema_valid([(name, {**arguments, required[0]: {"wrong": "type"}})],
                            functions)


def _required(function: dict) -> list[str]:
    return list(function["parameters"].get("required", []))


def test_unconstrained_prompt_describes_tools_as_json_schema():
    question, _ = _pairs("simple_python", 1)[0]
    tools = described(question["function"])
    assert tools[0]["parameters"]["type"] == "object"  # BFCL's "dict", converted
    messages = with_instructions(question["question"][0], "INSTRUCTIONS")
    assert messages[0] == {"role": "system", "content": "INSTRUCTIONS"}
    joined = with_instructions([{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}], "INSTRUCTIONS")
    assert joined[0]["content"] == "Be brief.\n\nINSTRUCTIONS" and len(joined) == 2


def test_settings_expand_one_reasoning_setting_per_budget():
    assert settings_from("unconstrained,constrained,reasoning", "32,128") == {
        "unconstrained": None, "constrained": {},
        "reasoning-32": {"reasoning_budget": 32}, "reasoning-128": {"reasoning_budget": 128}}
    with pytest.raises(SystemExit):
        settings_from("greedy", "32")


def test_an_unsupported_setting_is_a_table_row_not_a_failure():
    rendered = table([unsupported_row("parallel", "reasoning-32", "unknown field")])
    assert "| parallel | reasoning-32 | - | unsupported |" in rendered
