"""A Qwen3-architecture model (random weights, Qwen3's real tokenizer and chat template)
served by a real `strictcall serve --model-format auto` process, through the `openai`
client: the format is detected, tools go through Qwen's template, the reasoning block is
Qwen's `<think>` (on by default for a family that thinks), and every call comes back valid
from Qwen's own `<tool_call>` syntax, plain and streamed."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from server.process import ServerProcess
from tests.server.formats.real_families import tiny_qwen3

pytestmark = pytest.mark.slow

MODEL = "tiny-qwen3"
# Bounded values only: random weights would write an unbounded string to max_tokens.
LIGHTS = {"type": "function", "function": {
    "name": "set_lights", "description": "Turn the lights on or off in a room",
    "parameters": {"type": "object", "properties": {
        "room": {"type": "string", "enum": ["kitchen", "hall"]}, "on": {"type": "boolean"}},
        "required": ["room", "on"]}}}
ALARM = {"type": "function", "function": {
    "name": "set_alarm", "parameters": {"type": "object", "properties": {
        "hour": {"type": "integer", "minimum": 0, "maximum": 23}}, "required": ["hour"]}}}
ASK = [{"role": "user", "content": "Turn on the kitchen lights."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))
    try:
        with ServerProcess("--model", str(model), "--served-model-name", MODEL,
                           "--model-format", "auto", "--contracts", "contracts.examples",
                           startup_s=240) as proc:
            yield proc
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    with OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                timeout=300) as client:
        yield client


def _check(call) -> None:
    tool = {"set_lights": LIGHTS, "set_alarm": ALARM}[call.function.name]
    jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])


def test_format_detected_and_logged(server):
    assert "model format qwen_3: its chat template has" in server.log_path.read_text()
    assert httpx.get(f"{server.base_url}/health").json()["status"] == "ok"


def test_required_call_with_qwens_thinking_on_by_default(client):
    resp = client.chat.completions.create(model=MODEL, messages=ASK, tools=[LIGHTS, ALARM],
                                          tool_choice="required", max_tokens=700,
                                          parallel_tool_calls=False)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    for call in choice.message.tool_calls:
        _check(call)
    assert isinstance(choice.message.model_extra["reasoning_content"], str)
    spent = resp.usage.completion_tokens_details.reasoning_tokens
    # "medium" by default; under the mask the model may spell "</think>" in pieces (one
    # Qwen token, or up to one per character), and those count as reasoning too.
    assert 1 <= spent <= 512 + len("</think>")


def test_no_thinking_when_effort_is_none(client):
    resp = client.chat.completions.create(model=MODEL, messages=ASK, tools=[LIGHTS],
                                          tool_choice="required", reasoning_effort="none",
                                          max_tokens=200)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    _check(choice.message.tool_calls[0])
    assert choice.message.model_extra.get("reasoning_content") is None


def test_named_tool_and_budget(client):
    resp = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[LIGHTS, ALARM], max_tokens=200,
        tool_choice={"type": "function", "function": {"name": "set_alarm"}},
        extra_body={"strictcall": {"reasoning_budget": 8}})
    (call,) = resp.choices[0].message.tool_calls
    assert call.function.name == "set_alarm"
    _check(call)
    assert resp.usage.completion_tokens_details.reasoning_tokens <= 8 + len("</think>")


def test_streamed_call_and_reasoning(client):
    stream = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[LIGHTS], tool_choice="required", max_tokens=200,
        stream=True, extra_body={"strictcall": {"reasoning_budget": 8}})
    thought, arguments, names, finish = "", {}, {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        thought += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:  # parallel calls: one index each
            names[call.index] = call.function.name or names.get(call.index)
            arguments[call.index] = arguments.get(call.index, "") + \
                (call.function.arguments or "")
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and set(names.values()) == {"set_lights"}
    for text in arguments.values():
        jsonschema.validate(json.loads(text), LIGHTS["function"]["parameters"])
    assert "</think>" not in thought


def test_auto_answers_with_text_or_a_valid_call(client):
    resp = client.chat.completions.create(model=MODEL, messages=ASK, tools=[LIGHTS],
                                          reasoning_effort="none", max_tokens=60)
    choice = resp.choices[0]
    if choice.finish_reason == "tool_calls":
        _check(choice.message.tool_calls[0])
    else:  # text: never a half-written call passed off as content
        assert "<tool_call>" not in (choice.message.content or "") \
            or choice.finish_reason == "length"


def test_json_answer_after_qwens_thinking(client):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    resp = client.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=200,
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
        extra_body={"strictcall": {"reasoning_budget": 8}})
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), schema)


def test_contract_is_enforced_in_qwens_format(client):
    """A registered contract through Qwen's syntax: the call comes back valid under the
    contract's cross-field rule (repaired if need be), never a call that breaks it nor a
    422 or a cut-off in its place (the seeded random weights, greedy, come back valid
    after one repair). The floor: a contract whose every rule the grammar enforces (one
    bounded pattern) comes back as a valid call."""
    from contracts.examples import BRANCHES

    status = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Status of AR-004217?"}],
        tools=[{"type": "function", "function": {"name": "check_access_request_status"}}],
        tool_choice="required", reasoning_effort="none", max_tokens=200,
        parallel_tool_calls=False)
    choice = status.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    assert call.function.name == "check_access_request_status"
    jsonschema.validate(json.loads(call.function.arguments), {
        "type": "object", "properties": {"request_id": {"pattern": "^AR-[0-9]{6}$"}},
        "required": ["request_id"], "additionalProperties": False})
    resp = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Reissue my card in Paris."}],
        tools=[{"type": "function", "function": {"name": "reissue_card"}}],
        tool_choice="required", reasoning_effort="none", max_tokens=200,
        parallel_tool_calls=False, extra_headers={"X-Tenant-Id": "t1"},
        extra_body={"strictcall": {"loop_guard": "steer"}})
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    args = json.loads(call.function.arguments)
    assert args["branch_id"] in BRANCHES[args["city"]]
    assert resp.model_extra["strictcall"]["contracts"][0]["tool"] == "reissue_card"
