"""Which reasoning budget a request gets: its own `strictcall.reasoning_budget`, else its
`reasoning_effort`, else the largest its contracts ask for, else the server's default (off,
or "medium" for a family that thinks); and how it shares max_tokens with the answer."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from contracts import ContractRegistry, contract_of, tool
from grammars import GrammarCache, GrammarPolicy
from server.api.chat.translate import to_task
from server.api.chat.wire import ChatCompletionRequest
from server.engines.scripted import ScriptedEngine
from server.errors import InvalidRequest
from server.formats.families import SERVED
from server.identity import Caller
from server.pipeline.chat import ChatPipeline, Parts
from server.settings import Settings
from server.task import Task


@tool(name="plan_route", description="Plan a delivery route", reasoning=64)
class PlanRoute(BaseModel):
    stops: list[str]


@pytest.fixture(scope="module")
def engine(model_dir):
    return ScriptedEngine(model_dir, lambda prompt: "")


def _pipeline(engine, *, fmt="smollm2", reasoning=None, **settings) -> ChatPipeline:
    return ChatPipeline(engine, GrammarCache(engine.grammar_backend),
                        Settings(reasoning=reasoning, **settings), Parts(
                            GrammarPolicy.for_backend(engine.grammar_backend),
                            registry=ContractRegistry([contract_of(PlanRoute)]),
                            fmt=SERVED[fmt]))


def _task(**body) -> Task:
    return to_task(ChatCompletionRequest.model_validate(
        {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], **body}))


def _budget(pipeline: ChatPipeline, task: Task) -> int:
    """The reasoning budget the prepared request decodes with."""
    return asyncio.run(pipeline.prepare(task, Caller({}))).options.reasoning


ROUTE = [{"type": "function", "function": {"name": "plan_route"}}]
OTHER = [{"type": "function", "function": {"name": "other", "parameters": {}}}]


@pytest.mark.parametrize("body, fmt, default, expected", [
    ({}, "smollm2", None, 0),                                    # off by default
    ({}, "qwen_3", None, 512),                                   # a family that thinks
    ({"reasoning_effort": "none"}, "qwen_3", None, 0),
    ({}, "smollm2", 100, 100),                                   # --reasoning
    ({"reasoning_effort": "low"}, "smollm2", None, 128),
    ({"reasoning_effort": "low", "strictcall": {"reasoning_budget": 7}}, "smollm2", None, 7),
    ({"tools": ROUTE}, "smollm2", None, 64),                     # the contract asks
    ({"tools": ROUTE, "reasoning_effort": "minimal"}, "smollm2", None, 32),
    ({"tools": ROUTE, "tool_choice": "none"}, "smollm2", None, 0),
    ({"tools": OTHER}, "smollm2", None, 0),
])
def test_budget_precedence(engine, body, fmt, default, expected):
    assert _budget(_pipeline(engine, fmt=fmt, reasoning=default), _task(**body)) == expected


FORCED = {"tools": OTHER, "tool_choice": "required"}


@pytest.mark.parametrize("body, settings, budget, max_tokens", [
    # No max_tokens: the answer keeps the default (512), the reasoning gets its own on top.
    ({}, {}, 512, 1024),
    (FORCED, {}, 512, 1024),
    (FORCED, {"default_max_tokens": 100}, 512, 612),
    ({"reasoning_effort": "none"}, {}, 0, 512),
    # The server's cap is the max_tokens: the budget is cut to leave the answer half.
    ({}, {"max_tokens_cap": 600}, 300, 600),
    # A max_tokens that counts both: a budget not given in tokens is cut to half of it.
    ({"max_tokens": 300}, {}, 150, 300),
    ({"max_completion_tokens": 300, "reasoning_effort": "high"}, {}, 150, 300),
    ({"max_tokens": 2000}, {}, 512, 2000),
    ({"max_tokens": 1}, {}, 0, 1),                              # no room to think
    # One given in tokens is kept while it leaves the answer a token.
    ({"max_tokens": 100, "strictcall": {"reasoning_budget": 99}}, {}, 99, 100),
])
def test_the_reasoning_leaves_the_answer_its_room(engine, body, settings, budget,
                                                  max_tokens):
    """max_tokens counts the reasoning and the answer together, as OpenAI's, Anthropic's,
    vLLM's and SGLang's do: the embedded model thinks to the budget, and a budget as long
    as max_tokens left a forced call no room (docs/reasoning.md)."""
    prepared = asyncio.run(_pipeline(engine, fmt="qwen_3", **settings).prepare(
        _task(**body), Caller({})))
    assert prepared.options.reasoning == budget
    assert prepared.decode.request.sampling.max_tokens == max_tokens


def test_a_budget_given_in_tokens_that_leaves_no_answer_is_a_400(engine):
    with pytest.raises(InvalidRequest) as caught:
        _budget(_pipeline(engine, fmt="qwen_3"),
                _task(max_tokens=64, strictcall={"reasoning_budget": 64}))
    assert caught.value.param == "strictcall.reasoning_budget"
    assert "must be less than max_tokens (64)" in caught.value.detail


DISPUTE_LIKE = [{"type": "function", "function": {"name": "open_case", "parameters": {
    "type": "object", "required": ["card_last4", "amount", "operation_date", "reason"],
    "properties": {k: {"type": "string"} for k in
                   ("card_last4", "amount", "operation_date", "reason")}}}}]


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                  "function": {"name": "open_case"}}])
def test_a_forced_call_keeps_the_room_it_needs(engine, choice):
    """A free pass cut from max_tokens never takes the forced call's room: at max_tokens
    60, half (30) would leave the four-field call less than its skeleton and values."""
    from server.pipeline.call_room import VALUE_TOKENS, forced_call_tokens

    task = _task(tools=DISPUTE_LIKE, tool_choice=choice, max_tokens=60)
    pipeline = _pipeline(engine, fmt="qwen_3")
    call = forced_call_tokens(task, ContractRegistry(), engine.encode)
    assert call > 4 * VALUE_TOKENS
    assert _budget(pipeline, task) == max(0, 60 - call) < 30
    assert _budget(pipeline, _task(tools=DISPUTE_LIKE, max_tokens=60)) == 30  # auto: half
    with pytest.raises(InvalidRequest) as caught:
        _budget(pipeline, _task(tools=DISPUTE_LIKE, tool_choice=choice, max_tokens=60,
                                strictcall={"reasoning_budget": 40}))
    assert f"the forced call needs about {call} tokens" in caught.value.detail
