"""The post-decode check: whatever the grammar let through, a value that fails the schema is
never returned as valid."""

import asyncio

import pytest

from grammars import JsonSchemaSpec, ToolCallsSpec, ToolSpec
from grammars.keywords import XGRAMMAR_KEYWORDS
from server.engines.base import GenerationResult
from server.errors import OutputInvalid
from server.pipeline.chat import _choice
from server.pipeline.plan import Plan

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}


def _result(text: str) -> GenerationResult:
    return GenerationResult(token_ids=(1,), text=text, finish_reason="stop", prompt_tokens=1,
                            grammar_complete=True)


def _json_choice(plan: Plan, text: str):
    return _choice(plan, _result(text), plan.read_with().read(text, complete=True),
                   complete=True)


def test_json_value_failing_the_schema_is_422_with_violations():
    spec = JsonSchemaSpec.from_schema(SCHEMA, table=XGRAMMAR_KEYWORDS)
    plan = Plan("json", spec, schemas={"": SCHEMA})
    with pytest.raises(OutputInvalid) as info:
        _json_choice(plan, '{"n":9}')
    assert info.value.status == 422
    assert info.value.extensions["violations"] == [
        {"pointer": "/n", "message": "9 is greater than the maximum of 5"}]


def test_tool_arguments_failing_the_schema_are_422(model_dir):
    from grammars import GrammarCache, GrammarPolicy
    from server.engines.scripted import ScriptedEngine
    from server.pipeline.chat import ChatPipeline, Prepared
    from server.pipeline.repair import RepairBudget
    from server.settings import Settings

    engine = ScriptedEngine(model_dir, lambda prompt: "")
    pipeline = ChatPipeline(engine, GrammarCache(engine.grammar_backend), Settings(),
                            policy=GrammarPolicy.for_backend(engine.grammar_backend))
    spec = ToolCallsSpec((ToolSpec.from_parameters("f", SCHEMA, table=XGRAMMAR_KEYWORDS),))
    plan = Plan("tools", spec, schemas={"f": SCHEMA})
    prep = Prepared(plan, None, [], None, {}, RepairBudget(2, 10))
    with pytest.raises(OutputInvalid, match="arguments of 'f'"):
        asyncio.run(pipeline.finish(prep, _result('[{"name":"f","arguments":{"n":"x"}}]')))


def test_valid_value_passes():
    spec = JsonSchemaSpec.from_schema(SCHEMA, table=XGRAMMAR_KEYWORDS)
    plan = Plan("json", spec, schemas={"": SCHEMA})
    assert _json_choice(plan, '{"n":5}').finish_reason == "stop"
