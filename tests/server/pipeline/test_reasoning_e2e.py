"""The free-reasoning pass through a real server on the embedded model and the `openai`
client: absent by default, present when asked, the answer still valid, the budget forced in
the grammar (1 and 16 tokens), usage counting the reasoning, and one prefill per request."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from tests.live import MODEL

pytestmark = pytest.mark.slow

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
# The end marker's tokens count as reasoning. Under the grammar the model may spell
# "</think>" in smaller pieces than the tokenizer would (at most one token per character).
MARKER_TOKENS = len("</think>")


def _prefills(live_server: str) -> int:
    return httpx.get(f"{live_server}/health").json()["engine"]["prefills"]


def _call(live_client, **extra):
    return live_client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                          tool_choice="required", max_tokens=120, **extra)


def _valid(message) -> None:
    (call,) = message.tool_calls[:1]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments),
                        WEATHER["function"]["parameters"])


def test_no_reasoning_by_default(live_client):
    resp = _call(live_client)
    message = resp.choices[0].message
    assert message.model_extra.get("reasoning_content") is None
    assert message.model_extra.get("reasoning") is None
    assert resp.usage.completion_tokens_details is None
    _valid(message)


@pytest.mark.parametrize("budget", [1, 16])
def test_reasoning_budget_is_forced_and_the_call_stays_valid(live_client, live_server, budget):
    before = _prefills(live_server)
    resp = _call(live_client, extra_body={"strictcall": {"reasoning_budget": budget}})
    assert _prefills(live_server) == before + 1  # one decode: no second prefill for the answer
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    _valid(choice.message)
    reasoning = choice.message.model_extra["reasoning_content"]
    assert isinstance(reasoning, str)
    assert choice.message.model_extra["reasoning"] == reasoning
    assert "</think>" not in reasoning and "<tool_call>" not in reasoning
    spent = resp.usage.completion_tokens_details.reasoning_tokens
    assert 1 <= spent <= budget + MARKER_TOKENS
    assert spent < resp.usage.completion_tokens


def test_reasoning_effort_maps_to_a_budget(live_client):
    resp = _call(live_client, reasoning_effort="minimal")  # 32 tokens
    spent = resp.usage.completion_tokens_details.reasoning_tokens
    assert 1 <= spent <= 32 + MARKER_TOKENS
    _valid(resp.choices[0].message)


def test_json_answer_after_reasoning(live_client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                               "sunny": {"type": "boolean"}},
              "required": ["city", "sunny"]}
    resp = live_client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=120,
        response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": schema}},
        extra_body={"strictcall": {"reasoning_budget": 16}})
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), schema)
    assert isinstance(choice.message.model_extra["reasoning_content"], str)


def test_text_answer_after_reasoning_is_not_empty(live_client):
    resp = live_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hello."}], max_tokens=60,
        extra_body={"strictcall": {"reasoning_budget": 8}})
    choice = resp.choices[0]
    assert choice.message.content and choice.message.content.strip()
    assert "</think>" not in choice.message.content


def test_streamed_reasoning_and_call(live_client):
    stream = _call(live_client, stream=True, stream_options={"include_usage": True},
                   extra_body={"strictcall": {"reasoning_budget": 16}})
    thought, arguments, name, finish, usage = "", "", None, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        thought += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            name = call.function.name or name
            arguments += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and name == "get_weather"
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])
    assert "</think>" not in thought
    assert usage.completion_tokens_details.reasoning_tokens >= 1


def test_stop_with_reasoning_in_free_text_is_a_400(live_client):
    from openai import BadRequestError

    with pytest.raises(BadRequestError) as info:
        live_client.chat.completions.create(
            model=MODEL, messages=ASK, stop=["\n"],
            extra_body={"strictcall": {"reasoning_budget": 8}})
    assert info.value.body["param"] == "stop"
