"""The Responses API through the real server on the embedded model, driven by the official
`openai` SDK (`responses.create`, `.stream`, `.parse`) and by an OpenAI Agents SDK agent.
The model is tiny: each test asks for output a grammar guarantees (a forced call, a bounded
JSON schema), and asserts shapes and validity, not the model's wisdom."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.live import MODEL

pytestmark = pytest.mark.slow

PARAMETERS = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 40},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}
WEATHER = {"type": "function", "name": "get_weather", "strict": True,
           "description": "Get the current weather for a city.", "parameters": PARAMETERS}
ASK = "What is the weather in Paris, in celsius?"
CAPITAL_SCHEMA = {"type": "object", "additionalProperties": False,
                  "required": ["city", "country"],
                  "properties": {"city": {"type": "string", "maxLength": 40},
                                 "country": {"type": "string", "maxLength": 40}}}


class Capital(BaseModel):
    city: str = Field(max_length=40)
    country: str = Field(max_length=40)
    continent: Literal["Africa", "Asia", "Europe", "North America", "South America",
                       "Oceania", "Antarctica"]


class Forecast(BaseModel):
    city: str = Field(max_length=40)
    sky: Literal["sunny", "cloudy", "rainy", "snowy"]
    celsius: int = Field(ge=-60, le=60)


def test_create_text(live_client):
    resp = live_client.responses.create(model=MODEL, input="Say hello in one sentence.",
                                   instructions="You are friendly.", max_output_tokens=40)
    assert resp.id.startswith("resp_") and resp.status in ("completed", "incomplete")
    assert resp.output_text.strip() and resp.output[0].type == "message"
    assert resp.usage.output_tokens > 0 and resp.instructions == "You are friendly."


def test_create_forced_call_and_function_call_output_round_trip(live_client):
    first = live_client.responses.create(model=MODEL, input=ASK, tools=[WEATHER],
                                    tool_choice="required", parallel_tool_calls=False)
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.call_id.startswith("call_") and call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), PARAMETERS)
    second = live_client.responses.create(
        model=MODEL, tools=[WEATHER], tool_choice="none", max_output_tokens=60,
        input=[{"role": "user", "content": ASK}, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id,
                "output": "Sunny, 21 degrees celsius."}])
    assert second.output_text.strip()
    assert all(item.type == "message" for item in second.output)


def test_create_named_tool_choice(live_client):
    resp = live_client.responses.create(model=MODEL, input=ASK, tools=[WEATHER],
                                   tool_choice={"type": "function", "name": "get_weather"})
    assert [item.name for item in resp.output] == ["get_weather"]


def test_create_with_reasoning(live_client):
    """reasoning.effort runs the reasoning pass: a reasoning item first (its text as
    reasoning_text, no summary), then the call, still valid, and the reasoning's tokens."""
    resp = live_client.responses.create(model=MODEL, input=ASK, tools=[WEATHER],
                                   tool_choice="required", parallel_tool_calls=False,
                                   reasoning={"effort": "minimal", "summary": "auto"})
    thought, call = resp.output
    assert thought.type == "reasoning" and thought.id.startswith("rs_")
    assert thought.summary == [] and thought.content[0].type == "reasoning_text"
    assert thought.content[0].text.strip() and "</think>" not in thought.content[0].text
    assert call.type == "function_call" and call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), PARAMETERS)
    spent = resp.usage.output_tokens_details.reasoning_tokens
    assert 1 <= spent <= 32 + len("</think>") and spent < resp.usage.output_tokens
    assert resp.reasoning.effort == "minimal"


def test_create_json_schema_text_format(live_client):
    resp = live_client.responses.create(
        model=MODEL, input="What is the capital of France?",
        text={"format": {"type": "json_schema", "name": "capital", "strict": True,
                         "schema": CAPITAL_SCHEMA}})
    assert resp.status == "completed"
    jsonschema.validate(json.loads(resp.output_text), CAPITAL_SCHEMA)


def test_stream_text(live_client):
    deltas = []
    with live_client.responses.stream(model=MODEL, input="Say hello in one sentence.",
                                 max_output_tokens=60) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text == "".join(deltas)
    assert final.output_text.strip() and final.usage.output_tokens > 0


def test_stream_function_call(live_client):
    fragments = []
    with live_client.responses.stream(model=MODEL, input=ASK, tools=[WEATHER],
                                 tool_choice="required", parallel_tool_calls=False) as stream:
        for event in stream:
            if event.type == "response.function_call_arguments.delta":
                fragments.append(event.delta)
        final = stream.get_final_response()
    (call,) = final.output
    assert call.type == "function_call" and call.arguments == "".join(fragments)
    assert len(fragments) > 1  # arguments arrive in pieces as they are decoded
    jsonschema.validate(call.parsed_arguments, PARAMETERS)


def test_parse_with_pydantic_text_format(live_client):
    resp = live_client.responses.parse(model=MODEL, input="What is the capital of France?",
                                  text_format=Capital)
    assert isinstance(resp.output_parsed, Capital)


def test_sdk_raises_readable_errors(live_client):
    with pytest.raises(openai.BadRequestError) as err:
        live_client.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
    assert "not found" in str(err.value) and err.value.param == "previous_response_id"
    assert err.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError, match="no reasoning summarizer") as err:
        live_client.responses.create(model=MODEL, input="hi",
                                reasoning={"effort": "high", "summary": "detailed"})
    assert err.value.param == "reasoning.summary"


def test_contract_call_is_enforced_or_refused(live_client):
    """A registered contract through the Responses API: its schema, its validators and its
    repair apply as for Chat Completions; never a silent pass. The floor: a contract whose
    every rule the grammar enforces (one bounded pattern) must come back as a valid call."""
    from contracts.examples import BRANCHES

    status = live_client.responses.create(
        model=MODEL, max_output_tokens=200,
        input="What is the status of access request AR-004217?",
        tools=[{"type": "function", "name": "check_access_request_status", "parameters": None,
                "strict": True}], tool_choice="required")
    (call,) = status.output
    assert status.status == "completed" and call.name == "check_access_request_status"
    jsonschema.validate(json.loads(call.arguments), {
        "type": "object", "properties": {"request_id": {"pattern": "^AR-[0-9]{6}$"}},
        "required": ["request_id"], "additionalProperties": False})
    assert status.model_extra["strictcall"]["contracts"][0]["tool"] == call.name
    try:
        resp = live_client.responses.create(
            model=MODEL, max_output_tokens=200,
            input="Reissue card 4417 for pickup in Kazan at branch 101.",
            tools=[{"type": "function", "name": "reissue_card", "parameters": None,
                    "strict": True}], tool_choice={"type": "function", "name": "reissue_card"})
    except openai.UnprocessableEntityError as exc:  # out of repair attempts: a problem
        assert exc.response.headers["content-type"].startswith("application/problem+json")
        assert "reissue_card" in str(exc)
        violations = exc.response.json()["violations"]  # the city rule, the validator's
        assert violations and all(v["pointer"] == "/branch_id" for v in violations), violations
        return
    if resp.status == "incomplete":
        assert all(item.type == "message" for item in resp.output)
        return
    (call,) = resp.output
    args = json.loads(call.arguments)
    assert args["branch_id"] in BRANCHES[args["city"]]
    assert resp.model_extra["strictcall"]["contracts"][0]["tool"] == "reissue_card"


def _run_agent(live_server: str, prompt: str, *, stream: bool = False, chain: bool = False):
    """An Agents SDK agent with a function tool (forced on the first turn, then disabled, so
    the second turn is the structured answer) and a structured output. `chain`: each model
    call after the first sends only its new items and the previous response's id."""
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    seen: list[str] = []

    @function_tool(is_enabled=lambda ctx, agent: not seen)
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        seen.append(city)
        return f"Sunny and 21C in {city}"

    async def main():
        async with AsyncOpenAI(base_url=f"{live_server}/v1", api_key="unused",
                               max_retries=0) as oai:
            agent = Agent(name="weather", instructions="Answer questions about the weather.",
                          model=OpenAIResponsesModel(MODEL, oai), tools=[get_weather],
                          output_type=Forecast,
                          model_settings=ModelSettings(tool_choice="required", max_tokens=200))
            if not stream:
                return await Runner.run(agent, prompt, max_turns=4,
                                        auto_previous_response_id=chain)
            result = Runner.run_streamed(agent, prompt, max_turns=4,
                                         auto_previous_response_id=chain)
            async for _ in result.stream_events():
                pass
            return result

    return asyncio.run(main()), seen


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
def test_agents_sdk_agent_with_a_tool_and_structured_output(live_server, stream):
    result, seen = _run_agent(live_server, "What is the weather in Paris?", stream=stream)
    assert isinstance(result.final_output, Forecast)
    assert len(seen) == 1 and isinstance(seen[0], str)
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_output_item"]
    assert kinds[-1] == "message_output_item"
    print(f"\nagents ({'streamed' if stream else 'run'}): get_weather({seen[0]!r}) -> "
          f"{result.final_output!r}")


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
def test_agents_sdk_agent_chains_responses_by_previous_response_id(live_server, live_client,
                                                                  stream):
    """auto_previous_response_id: the SDK sends the tool's output with the first response's
    id only; the server continues from what it stored. A later run goes on from the last
    response's id alone."""
    result, seen = _run_agent(live_server, "What is the weather in Paris?", stream=stream,
                              chain=True)
    assert isinstance(result.final_output, Forecast) and len(seen) == 1
    first, last = (r.response_id for r in (result.raw_responses[0], result.raw_responses[-1]))
    chained = live_client.responses.retrieve(last)
    assert chained.previous_response_id == first
    kinds = [i.type for i in live_client.responses.input_items.list(last, order="asc").data]
    assert kinds == ["message", "function_call", "function_call_output"]
    later = live_client.responses.create(model=MODEL, input="Thanks!", max_output_tokens=20,
                                         previous_response_id=result.last_response_id)
    assert later.previous_response_id == result.last_response_id


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_disconnect_stops_the_decode(live_server, stream):
    import httpx

    from tests.server.api.test_openai_client import (
        assert_one_more_cancelled,
        hang_up_while_decoding,
    )

    before = httpx.get(f"{live_server}/health").json()["engine"]["cancelled"]
    body = {"model": MODEL, "max_output_tokens": 3000, "stream": stream,
            "input": "Write a very long story."}
    if stream:
        with httpx.stream("POST", f"{live_server}/v1/responses", json=body, timeout=30) as resp:
            for line in resp.iter_lines():  # the first text delta, then hang up
                if line == "event: response.output_text.delta":
                    break
    else:  # hung up once the engine is decoding it (3000 tokens to go at most)
        hang_up_while_decoding(live_server, "/v1/responses", body)
    assert_one_more_cancelled(live_server, before)
