"""The real server process, driven by the official `anthropic` client (POST /v1/messages), on
the embedded model. The model is tiny: these check shapes and validity, not its wisdom."""

from __future__ import annotations

import anthropic
import jsonschema
import pytest

from tests.live import MODEL

pytestmark = pytest.mark.slow

WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 40},
               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}}
TIME = {"name": "get_time", "description": "Current time in a timezone",
        "input_schema": {"type": "object", "properties": {
            "timezone": {"type": "string", "maxLength": 40}},
            "required": ["timezone"], "additionalProperties": False}}
TOOLS = {t["name"]: t for t in (WEATHER, TIME)}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


@pytest.fixture(scope="module")
def claude(live_server):
    with anthropic.Anthropic(base_url=live_server, api_key="unused", max_retries=0,
                             timeout=300) as live_client:
        yield live_client


def assert_valid_calls(message) -> list:
    """Every tool_use block names a given tool and its input validates against its schema."""
    calls = [b for b in message.content if b.type == "tool_use"]
    for call in calls:
        assert call.id.startswith("toolu_")
        jsonschema.validate(call.input, TOOLS[call.name]["input_schema"])
    return calls


def assert_message(message, *, stop_reasons: set[str]):
    assert message.type == "message" and message.role == "assistant"
    assert message.model == MODEL and message.id.startswith("msg_")
    assert message.stop_reason in stop_reasons, message
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_create_with_a_named_tool(claude):
    message = claude.messages.create(model=MODEL, max_tokens=128, messages=ASK,
                                     tools=[WEATHER, TIME],
                                     tool_choice={"type": "tool", "name": "get_weather"})
    assert_message(message, stop_reasons={"tool_use"})
    (call,) = assert_valid_calls(message)
    assert call.name == "get_weather"


def test_create_with_any_tool(claude):
    message = claude.messages.create(
        model=MODEL, max_tokens=128, messages=ASK, tools=[WEATHER, TIME],
        tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert_message(message, stop_reasons={"tool_use"})
    assert len(assert_valid_calls(message)) == 1


def test_create_with_thinking(claude):
    """thinking enabled runs the reasoning pass: a thinking block first (empty signature),
    then the tool_use, still valid."""
    message = claude.messages.create(
        model=MODEL, max_tokens=200, messages=ASK, tools=[WEATHER, TIME],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 16})
    assert_message(message, stop_reasons={"tool_use"})
    thinking = message.content[0]
    assert thinking.type == "thinking" and thinking.signature == ""
    assert thinking.thinking.strip() and "</think>" not in thinking.thinking
    assert [b.type for b in message.content[1:]] == ["tool_use"]
    assert len(assert_valid_calls(message)) == 1


def test_create_with_auto(claude):
    message = claude.messages.create(model=MODEL, max_tokens=128, messages=ASK,
                                     tools=[WEATHER, TIME])
    assert_message(message, stop_reasons={"tool_use", "end_turn", "max_tokens"})
    if message.stop_reason == "tool_use":
        assert assert_valid_calls(message)
    else:
        assert [b.type for b in message.content] == ["text"]


def test_stream_with_forced_tools(claude):
    with claude.messages.stream(model=MODEL, max_tokens=128, messages=ASK,
                                tools=[WEATHER, TIME], tool_choice={"type": "any"}) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds  # the SDK saw the arguments arrive in pieces
    assert_message(message, stop_reasons={"tool_use"})
    assert assert_valid_calls(message)


def test_stream_with_auto(claude):
    with claude.messages.stream(model=MODEL, max_tokens=128, messages=ASK,
                                tools=[WEATHER, TIME]) as stream:
        message = stream.get_final_message()
    assert_message(message, stop_reasons={"tool_use", "end_turn", "max_tokens"})
    assert_valid_calls(message)


def test_tool_result_round_trip(claude):
    first = claude.messages.create(model=MODEL, max_tokens=128, messages=ASK, tools=[WEATHER],
                                   tool_choice={"type": "any"})
    (call,) = assert_valid_calls(first)
    conversation = [*ASK, {"role": "assistant", "content": first.content},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                  "content": "18 degrees celsius, sunny"}]}]
    answer = claude.messages.create(model=MODEL, max_tokens=64, messages=conversation,
                                    tools=[WEATHER], tool_choice={"type": "none"})
    assert_message(answer, stop_reasons={"end_turn", "max_tokens"})
    assert [b.type for b in answer.content] == ["text"] and answer.content[0].text.strip()
    again = claude.messages.create(model=MODEL, max_tokens=128, messages=conversation,
                                   tools=[WEATHER])  # auto: another call or an answer
    assert_message(again, stop_reasons={"tool_use", "end_turn", "max_tokens"})
    assert_valid_calls(again)


def test_refusal_raises_bad_request(claude):
    with pytest.raises(anthropic.BadRequestError,
                       match="must be less than max_tokens") as caught:
        claude.messages.create(model=MODEL, max_tokens=64, messages=ASK,
                               thinking={"type": "enabled", "budget_tokens": 1024})
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError, match="not served here"):
        claude.messages.create(model="not-served-here", max_tokens=64, messages=ASK)
