"""The post-decode check: whatever the grammar let through, a value that fails the schema is
never returned as valid."""

import asyncio

import pytest

from grammars import GrammarCache, GrammarPolicy
from server.engines.base import GenerationResult
from server.engines.scripted import ScriptedEngine
from server.errors import OutputInvalid
from server.formats.smollm2 import SmolLM2Format
from server.identity import Caller
from server.pipeline.chat import ChatPipeline, Parts
from server.settings import Settings
from server.task import JsonAnswer, Task, ToolDef, Turn

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}


def _result(text: str) -> GenerationResult:
    return GenerationResult(token_ids=(1,), text=text, finish_reason="stop", prompt_tokens=1,
                            grammar_complete=True)


@pytest.fixture(scope="module")
def pipeline(model_dir) -> ChatPipeline:
    engine = ScriptedEngine(model_dir, lambda prompt: "")
    return ChatPipeline(engine, GrammarCache(engine.grammar_backend), Settings(),
                        Parts(GrammarPolicy.for_backend(engine.grammar_backend),
                              SmolLM2Format()))


def _finish(pipeline: ChatPipeline, task: Task, text: str):
    """The checks on `text` as if the decode of `task` had written it."""
    async def run():
        prepared = await pipeline.prepare(task, Caller({}))
        return await pipeline.finisher.finish(prepared, prepared.decode, _result(text), None)
    return asyncio.run(run())


def _task(**fields) -> Task:
    return Task(model="scripted", turns=(Turn("user", "hi"),), **fields)


def test_json_value_failing_the_schema_is_422_with_violations(pipeline):
    with pytest.raises(OutputInvalid) as info:
        _finish(pipeline, _task(answer=JsonAnswer(SCHEMA)), '{"n":9}')
    assert info.value.status == 422
    assert info.value.extensions["violations"] == [
        {"pointer": "/n", "message": "9 is greater than the maximum of 5"}]


def test_tool_arguments_failing_the_schema_are_422(pipeline):
    task = _task(tools=(ToolDef("f", None, SCHEMA),), tool_choice="required")
    with pytest.raises(OutputInvalid, match="arguments of 'f'"):
        _finish(pipeline, task, '[{"name":"f","arguments":{"n":"x"}}]')


def test_valid_value_passes(pipeline):
    checked = _finish(pipeline, _task(answer=JsonAnswer(SCHEMA)), '{"n":5}')
    assert (checked.finish, checked.content) == ("stop", '{"n":5}')
