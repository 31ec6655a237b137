"""Every family xgrammar ships, served for real as a user serves it (`strictcall serve
--model-format NAME` on the embedded model, the `openai` client): a forced call to a tool
with a bounded string and an integer range comes back valid, plain and streamed. String
keywords a family's mask cannot hold are checked after decoding
(tests/server/formats/test_families.py); Kimi K3's response block is opened in the prompt.
Without a reasoning pass (--reasoning 0): the embedded 135M model, reasoning in a format it
was not trained on, copies the call markers into its reasoning, and under Gemma 4's (whose
mask cannot hold maxLength) wrote a string value to max_tokens after it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from server.formats.families import XGRAMMAR_FAMILIES
from server.process import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.long]
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"]}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}
ASK = {"model": "m", "tools": [TOOL], "tool_choice": "required", "max_tokens": 300,
       "messages": [{"role": "user", "content": "Weather in Paris for the next 3 days?"}]}


def _streamed(client) -> tuple[list[dict], str | None]:
    arguments: dict[int, str] = {}
    finish = None
    for chunk in client.chat.completions.create(**ASK, stream=True):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                arguments[call.index] = arguments.get(call.index, "") + \
                    (call.function.arguments or "")
    return [json.loads(arguments[i]) for i in sorted(arguments)], finish


@pytest.mark.parametrize("family", sorted(XGRAMMAR_FAMILIES))
def test_a_forced_call_is_valid_plain_and_streamed(model_dir, family):
    from openai import OpenAI

    try:
        server = ServerProcess("--model", str(model_dir), "--model-format", family,
                               "--served-model-name", "m", "--reasoning", "0")
        with server, OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                            timeout=300) as client:
            resp = client.chat.completions.create(**ASK)
            streamed, finish = _streamed(client)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls", (choice.message.content, family)
    for arguments in [json.loads(c.function.arguments) for c in choice.message.tool_calls]:
        jsonschema.validate(arguments, WEATHER)
    assert finish == "tool_calls" and streamed, family
    for arguments in streamed:
        jsonschema.validate(arguments, WEATHER)
