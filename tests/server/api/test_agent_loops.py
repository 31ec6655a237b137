"""Agent loops that end, on the embedded model through a real server: the OpenAI Agents SDK
(Responses API) and LangChain's agent (Chat Completions) with one function tool
get_weather(city, days) run to a text answer that uses the tool's result within 3 model
turns, with tool_choice auto and required (the turn after a result starts in free text and
an answered call is not written again: tests/server/pipeline/test_agent_loop.py;
bench/dialogue/agent_loop.py measures it over more tools and prompts)."""

from __future__ import annotations

import asyncio

import pytest

from tests.live import MODEL

pytestmark = pytest.mark.slow
QUESTION = "What's the weather in Oslo for the next 2 days?"


def _forecast(city: str, days: int) -> str:
    return f"{city}: sunny, 21 C for the next {days} days"


def _uses_the_result(answer: str) -> bool:
    return "21" in answer or "sunny" in answer.lower()


@pytest.mark.parametrize("tool_choice", ["auto", "required"])
def test_an_agents_sdk_run_ends_in_a_text_answer_within_3_turns(live_server, tool_choice):
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no traces sent anywhere
    calls: list[tuple[str, int]] = []

    @function_tool
    def get_weather(city: str, days: int) -> str:
        """Weather forecast for a city for a number of days."""
        calls.append((city, days))
        return _forecast(city, days)

    async def run() -> str:
        async with AsyncOpenAI(base_url=f"{live_server}/v1", api_key="unused",
                               max_retries=0) as client:
            agent = Agent(name="weather", instructions="You answer weather questions.",
                          tools=[get_weather],
                          model=OpenAIResponsesModel(MODEL, client),
                          model_settings=ModelSettings(tool_choice=tool_choice))
            result = await Runner.run(agent, QUESTION, max_turns=3)
            return str(result.final_output)

    answer = asyncio.run(run())  # MaxTurnsExceeded if it loops
    assert len(calls) == 1 and calls[0][0] == "Oslo", calls
    assert _uses_the_result(answer), answer


def test_a_langchain_agent_ends_in_a_text_answer_within_3_turns(live_server):
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    calls: list[tuple[str, int]] = []

    @tool
    def get_weather(city: str, days: int) -> str:
        """Weather forecast for a city for a number of days."""
        calls.append((city, days))
        return _forecast(city, days)

    model = ChatOpenAI(model=MODEL, base_url=f"{live_server}/v1", api_key="unused",
                       max_retries=0)
    agent = create_agent(model, tools=[get_weather],
                         system_prompt="You answer weather questions.")
    # Each model turn and each tool run is a step: 3 model turns and 2 tool runs at most.
    out = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]},
                       {"recursion_limit": 6})
    turns = [m for m in out["messages"] if isinstance(m, AIMessage)]
    assert len(turns) <= 3 and not turns[-1].tool_calls
    assert len(calls) == 1 and calls[0][0] == "Oslo", calls
    assert _uses_the_result(str(turns[-1].content)), turns[-1].content
