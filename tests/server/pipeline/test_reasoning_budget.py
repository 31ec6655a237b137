"""Which reasoning budget a request gets: its own `strictcall.reasoning_budget`, else its
`reasoning_effort`, else the largest its contracts ask for, else the server's default (off,
or "medium" for a family that thinks)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from contracts import ContractRegistry, contract_of, tool
from grammars import GrammarCache, GrammarPolicy
from server.api.chat.translate import to_task
from server.api.chat.wire import ChatCompletionRequest
from server.engines.scripted import ScriptedEngine
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


def _pipeline(engine, *, fmt="smollm2", reasoning=None) -> ChatPipeline:
    return ChatPipeline(engine, GrammarCache(engine.grammar_backend),
                        Settings(reasoning=reasoning), Parts(
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
