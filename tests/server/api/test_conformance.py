"""Real OpenAI-ecosystem clients against the real server on the embedded model: the official
`openai` SDK (plain, streaming, tool round trip, `parse`) and pydantic-ai."""

from __future__ import annotations

import json
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

from tests.live import MODEL

pytestmark = pytest.mark.slow

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def _accumulate(stream):
    content, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.id or call["id"]
                if tc.function:
                    call["name"] += tc.function.name or ""
                    call["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage


def test_sdk_streaming_text(live_client):
    stream = live_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hello in one sentence."}],
        max_tokens=40, stream=True, stream_options={"include_usage": True})
    content, calls, finish, usage = _accumulate(stream)
    assert content.strip() and not calls
    assert finish in ("stop", "length")
    assert usage.completion_tokens > 0


def test_sdk_streaming_tool_calls_are_valid(live_client):
    stream = live_client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                            tool_choice="required", stream=True,
                                            parallel_tool_calls=False, max_tokens=100)
    _, calls, finish, _ = _accumulate(stream)
    assert finish == "tool_calls", finish
    (call,) = calls
    assert call["id"].startswith("call_") and call["name"] == "get_weather"
    jsonschema.validate(json.loads(call["arguments"]), WEATHER["function"]["parameters"])


def test_sdk_tool_round_trip_with_tool_results(live_client):
    first = live_client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                           tool_choice="required", parallel_tool_calls=False)
    call = first.choices[0].message.tool_calls[0]
    messages = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id,
                       "content": "Sunny, 21 degrees celsius."}]
    second = live_client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER],
                                            tool_choice="none", max_tokens=60)
    assert second.choices[0].message.content
    assert not second.choices[0].message.tool_calls


class Capital(BaseModel):
    city: str = Field(max_length=40)
    country: str = Field(max_length=40)
    continent: Literal["Africa", "Asia", "Europe", "North America", "South America",
                       "Oceania", "Antarctica"]


def test_sdk_parse_with_pydantic_response_format(live_client):
    completion = live_client.chat.completions.parse(
        model=MODEL, response_format=Capital, max_tokens=120,
        messages=[{"role": "user", "content": "What is the capital of France?"}])
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Capital)


def test_sdk_auto_mode_calls_are_valid_or_text(live_client):
    resp = live_client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER],
                                          max_tokens=120)
    choice = resp.choices[0]
    if choice.finish_reason == "tool_calls":
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments),
                                WEATHER["function"]["parameters"])
    else:
        assert choice.finish_reason in ("stop", "length") and choice.message.content


class Forecast(BaseModel):
    city: str = Field(max_length=40)
    sky: Literal["sunny", "cloudy", "rainy", "snowy"]
    celsius: int = Field(ge=-60, le=60)


def _run_agent(live_server: str, build, prompt: str, *, stream: bool = False):
    """Run a pydantic-ai agent against the server in a fresh event loop, closing its client."""
    import asyncio

    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def main():
        async with AsyncOpenAI(base_url=f"{live_server}/v1", api_key="unused",
                               max_retries=0) as oai:
            agent = build(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=oai)))
            if not stream:
                return await agent.run(prompt)
            async with agent.run_stream(prompt) as result:
                return await result.get_output()

    return asyncio.run(main())


def test_pydantic_ai_agent_with_a_tool_and_structured_output(live_server):
    """The tool is forced on the first step (pydantic-ai's per-step `tool_choice`, sent as a
    named tool_choice), then only the output tool is left: the tool must run, and every call
    the agent saw must fit its tool's schema."""
    from dataclasses import dataclass

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.settings import ToolOrOutput

    seen: list[str] = []

    @dataclass
    class WeatherFirst(AbstractCapability):
        def get_model_settings(self):
            return lambda ctx: {"tool_choice": ToolOrOutput(function_tools=[])} if seen \
                else {"tool_choice": ["get_weather"]}

    def build(model):
        agent = Agent(model, output_type=Forecast, retries=3, capabilities=[WeatherFirst()],
                      model_settings={"max_tokens": 200})

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """Get the current weather for a city."""
            seen.append(city)
            return f"Sunny and 21C in {city}"

        return agent

    result = _run_agent(live_server, build, "What is the weather in Paris?")
    assert isinstance(result.output, Forecast)
    assert len(seen) == 1 and isinstance(seen[0], str), seen  # the tool ran, once
    schemas = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"], "additionalProperties": False},
               "final_result": Forecast.model_json_schema()}
    parts = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert [p.tool_name for p in parts] == ["get_weather", "final_result"], parts
    for part in parts:
        jsonschema.validate(part.args_as_dict(), schemas[part.tool_name])
    print(f"\npydantic-ai: output={result.output!r}; get_weather called for {seen}")


def test_pydantic_ai_streaming_structured_output(live_server):
    from pydantic_ai import Agent

    def build(model):
        return Agent(model, output_type=Forecast, retries=3, model_settings={"max_tokens": 200})

    output = _run_agent(live_server, build, "Describe the weather in Oslo today.", stream=True)
    assert isinstance(output, Forecast)
