"""POST /v1/messages (the Anthropic Messages API) over a ScriptedEngine: translation both
ways, tool_choice, tool results, refusals in Anthropic's error shape, and streaming events
accumulated by the `anthropic` SDK's own accumulator."""

from __future__ import annotations

import json

import pytest
from anthropic.lib.streaming._messages import accumulate_event

from server.api.messages.render import stop_of, to_message
from server.api.messages.translate import to_task
from server.api.messages.wire import MessagesRequest
from server.pipeline.answer import Answer, Call, Usage
from server.task import NamedTool
from tests.scripted import assert_error

WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                             "days": {"type": "integer"}},
                            "required": ["city"]}}
NOOP = {"name": "noop", "input_schema": {"type": "object"}}
USER = [{"role": "user", "content": "Weather in Paris?"}]
# What open_dispute's grounded fields may copy from.
DISPUTE = [{"role": "user", "content": "Card ending 4417: someone charged 10 on 2026-11-01, "
            "and again on 2099-01-01. That is fraud. And the weather in Oslo?"}]
PARIS = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'


class Script:
    """The call pass (the prompt ends with the opened call block) answers `calls`; a text
    pass answers `text`."""

    def __init__(self) -> None:
        self.calls, self.text = "[]", "Hello."

    def __call__(self, prompt: str) -> str:
        return self.calls if prompt.endswith("<tool_call>") else self.text


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def client(scripted, script):
    with scripted(script, contracts=["contracts.examples"]) as c:
        yield c


def create(client, **body):
    body = {"model": "scripted", "max_tokens": 64, "messages": USER, **body}
    return client.post("/v1/messages", json=body)


def message(resp) -> dict:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["type"] == "message" and body["role"] == "assistant"
    assert body["id"].startswith("msg_") and body["model"] == "scripted"
    assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0
    return body


def stream_events(resp) -> list[dict]:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in resp.text.strip().split("\n\n"):
        name_line, data_line = block.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert name_line == f"event: {data['type']}"
        events.append(data)
    return events


def accumulate(events: list[dict]):
    """What `client.messages.stream(...).get_final_message()` builds from the events."""
    snapshot, buffers = None, {}
    for event in events:
        assert event["type"] != "error", event
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


# -- answers ----------------------------------------------------------------------------

def test_text_answer(client, script):
    script.text = "Sunny."
    body = message(create(client))
    assert body["content"] == [{"type": "text", "text": "Sunny."}]
    assert body["stop_reason"] == "end_turn" and body["stop_sequence"] is None
    assert "strictcall" not in body


def test_any_forces_a_tool_use(client, script):
    script.calls = '[{"name":"get_weather","arguments":{"city":"Paris","days":2}}]'
    body = message(create(client, tools=[WEATHER, NOOP], tool_choice={"type": "any"}))
    (block,) = body["content"]
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_")
    assert block["name"] == "get_weather" and block["input"] == {"city": "Paris", "days": 2}
    assert body["stop_reason"] == "tool_use"


def test_tool_choice_tool_names_the_tool(client, script):
    script.calls = '[{"name":"noop","arguments":{}}]'
    choice = {"type": "tool", "name": "noop"}
    body = message(create(client, tools=[WEATHER, NOOP], tool_choice=choice))
    assert [(b["name"], b["input"]) for b in body["content"]] == [("noop", {})]
    assert_error(create(client, tools=[WEATHER], tool_choice={"type": "tool", "name": "x"}),
                 400, says="unknown tool 'x'")


def test_auto_calls_or_answers(client, script):
    script.calls = PARIS
    assert message(create(client, tools=[WEATHER]))["stop_reason"] == "tool_use"
    script.calls, script.text = "[]", "No tool needed."
    body = message(create(client, tools=[WEATHER], tool_choice={"type": "auto"}))
    assert body["content"] == [{"type": "text", "text": "No tool needed."}]
    assert body["stop_reason"] == "end_turn"


def test_none_never_calls(client, script):
    script.text = "Just text."
    body = message(create(client, tools=[WEATHER], tool_choice={"type": "none"}))
    assert body["content"][0]["text"] == "Just text."
    assert not client.app.state.pipeline.engine.prompts[-1].endswith("<tool_call>")


def test_disable_parallel_tool_use_allows_one_call(client, script):
    script.calls = PARIS[:-1] + ',{"name":"get_weather","arguments":{"city":"Rome"}}]'
    any_tool = {"type": "any"}
    assert len(message(create(client, tools=[WEATHER], tool_choice=any_tool))["content"]) == 2
    one = {"type": "any", "disable_parallel_tool_use": True}
    resp = create(client, tools=[WEATHER], tool_choice=one)
    # The grammar allows one call only, so the scripted second call is refused by the engine.
    assert_error(resp, 503, kind="overloaded_error", says="breaks the grammar")
    assert resp.headers["Retry-After"] == "1"


def test_stop_sequence_is_reported(client, script):
    script.text = "one two STOP three"
    body = message(create(client, stop_sequences=["END", "STOP"]))
    assert body["content"] == [{"type": "text", "text": "one two "}]
    assert body["stop_reason"] == "stop_sequence" and body["stop_sequence"] == "STOP"


def test_max_tokens_cut(client, script):
    script.text = "a long answer that goes on and on and on"
    assert message(create(client, max_tokens=3))["stop_reason"] == "max_tokens"


def test_contract_call_carries_the_strictcall_report(client, script):
    script.calls = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2026-11-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    body = message(create(client, tools=[{"name": "open_dispute"}], messages=DISPUTE,
                          tool_choice={"type": "any"}))
    assert body["content"][0]["input"]["original_operation_id"] is None
    assert body["strictcall"]["repaired"] is False


# -- conversations ----------------------------------------------------------------------

ROUND_TRIP = [
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text",
                                                                       "text": "18C, sunny"}]},
        {"type": "text", "text": "Summarize."}]},
]


def test_round_trip_translates_to_the_task():
    task = to_task(MessagesRequest.model_validate({
        "model": "m", "max_tokens": 5, "messages": ROUND_TRIP, "tools": [WEATHER],
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Metric."}],
        "tool_choice": {"type": "tool", "name": "get_weather",
                        "disable_parallel_tool_use": True}}))
    roles = [t.role for t in task.turns]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert task.turns[0].text == "Be brief.\n\nMetric."
    (call,) = task.turns[2].calls
    assert call.id == "toolu_1" and call.arguments == {"city": "Paris"}
    assert task.turns[3].call_id == "toolu_1" and task.turns[3].text == "18C, sunny"
    assert task.tool_choice == NamedTool("get_weather") and task.parallel_tool_calls is False
    assert task.tools[0].parameters == WEATHER["input_schema"]


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none")])
def test_tool_choice_translates(choice, expected):
    task = to_task(MessagesRequest.model_validate({
        "model": "m", "max_tokens": 5, "messages": USER, "tools": [WEATHER],
        "tool_choice": choice}))
    assert task.tool_choice == expected and task.parallel_tool_calls is None


def test_tool_result_round_trip(client, script):
    script.text = "It is 18C and sunny."
    failed = json.loads(json.dumps(ROUND_TRIP))
    failed[2]["content"][0].update(content="timeout", is_error=True)
    body = message(create(client, messages=failed, tools=[WEATHER]))
    assert body["content"] == [{"type": "text", "text": "It is 18C and sunny."}]
    prompt = client.app.state.pipeline.engine.prompts[-1]
    assert "[result of call toolu_1] Error: timeout" in prompt and "Let me check." in prompt


def test_response_translation():
    answer = Answer(id="123", created=0, model="m", content="Calling.",
                    calls=(Call("call_abc", "f", '{"x":1}'),), finish="tool_calls",
                    usage=Usage(prompt_tokens=7, completion_tokens=3))
    assert to_message(answer) == {
        "id": "msg_123", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "Calling."},
                    {"type": "tool_use", "id": "toolu_abc", "name": "f", "input": {"x": 1}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 3}}


@pytest.mark.parametrize(("finish", "stop", "expected"), [
    ("tool_calls", None, ("tool_use", None)), ("length", None, ("max_tokens", None)),
    ("stop", None, ("end_turn", None)), ("stop", "END", ("stop_sequence", "END"))])
def test_stop_reasons(finish, stop, expected):
    assert stop_of(finish, stop) == expected


# -- refusals ---------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "says"), [
    ({"thinking": {"type": "enabled", "budget_tokens": 64}}, "must be less than max_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 0}}, "greater than or equal to 1"),
    ({"thinking": {"type": "between_tools"}}, "thinking type 'between_tools'"),
    ({"thinking": {"type": "enabled", "budget_tokens": 8, "display": "full"}}, "display"),
    ({"top_k": 5}, "top_k"),
    ({"service_tier": "auto"}, "unknown field 'service_tier'"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
     "server tool of type 'web_search_20250305'"),
    ({"tools": [{**WEATHER, "input_schemas": {}}]}, "unknown field 'tools[0].input_schemas'"),
    ({"tool_choice": {"type": "function"}}, "`type` must be one of"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0]: 'image' blocks are not supported"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "messages[0].content[0].text: field required"),
    ({"messages": ROUND_TRIP[:2]}, "final assistant message"),
    ({"messages": [ROUND_TRIP[2]]}, "'toolu_1' answers no tool_use block"),
    ({"max_tokens": None}, "max_tokens"),
    ({"temperature": 1.5}, "temperature"),
])
def test_refusals_are_400s_in_anthropic_shape(client, extra, says):
    assert_error(create(client, **extra), 400, says=says)


def test_thinking_disabled_and_metadata_are_accepted(client):
    message(create(client, thinking={"type": "disabled"}, metadata={"user_id": "u1"}))


def test_unknown_model_is_not_found(client):
    assert_error(create(client, model="claude-x"), 404, kind="not_found_error",
                 says="not served here")


def test_other_routes_keep_problem_json(client):
    resp = client.post("/v1/chat/completions", json={"model": "scripted", "top_k": 1,
                                                     "messages": USER})
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert "OpenAI chat completions" in resp.json()["detail"]


# -- streaming --------------------------------------------------------------------------

def test_stream_text(client, script):
    script.text = "Hello there, how are you?"
    events = stream_events(create(client, stream=True))
    assert [e["type"] for e in events[:3]] == ["message_start", "ping", "content_block_start"]
    assert [e["type"] for e in events[-3:]] == ["content_block_stop", "message_delta",
                                                "message_stop"]
    assert len([e for e in events if e["type"] == "content_block_delta"]) > 2
    final = accumulate(events)
    assert [b.type for b in final.content] == ["text"]
    assert final.content[0].text == "Hello there, how are you?"
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0


def test_stream_tool_uses(client, script):
    script.calls = '[{"name":"get_weather","arguments":{"city":"Paris","days":2}},' \
                   '{"name":"noop","arguments":{}}]'
    events = stream_events(create(client, stream=True, tools=[WEATHER, NOOP],
                                  tool_choice={"type": "any"}))
    fragments = [e for e in events if e["type"] == "content_block_delta"]
    assert len(fragments) > 3 and {e["delta"]["type"] for e in fragments} == {"input_json_delta"}
    final = accumulate(events)
    assert [(b.name, b.input) for b in final.content] == [
        ("get_weather", {"city": "Paris", "days": 2}), ("noop", {})]
    assert all(b.id.startswith("toolu_") for b in final.content)
    assert final.stop_reason == "tool_use"
    assert_blocks_run_one_after_another(events)


def assert_blocks_run_one_after_another(events: list[dict]) -> None:
    open_block, started = None, 0
    for e in events:
        if e["type"] == "content_block_start":
            assert open_block is None and e["index"] == started
            open_block, started = e["index"], started + 1
        elif e["type"] in ("content_block_delta", "content_block_stop"):
            assert e["index"] == open_block, e
            open_block = None if e["type"] == "content_block_stop" else open_block
    assert open_block is None


def test_stream_holds_a_contract_call_until_it_is_validated(client, script):
    script.calls = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2026-11-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}},'
                    '{"name":"get_weather","arguments":{"city":"Oslo"}}]')
    events = stream_events(create(client, stream=True, tool_choice={"type": "any"},
                                  tools=[{"name": "open_dispute"}, WEATHER], max_tokens=200,
                                  messages=DISPUTE))
    assert_blocks_run_one_after_another(events)
    final = accumulate(events)
    assert [b.name for b in final.content] == ["open_dispute", "get_weather"], final.content
    assert final.content[0].input["original_operation_id"] is None
    assert final.content[1].input == {"city": "Oslo"}


def test_stream_stop_sequence(client, script):
    script.text = "one two STOP three"
    final = accumulate(stream_events(create(client, stream=True, stop_sequences=["STOP"])))
    assert final.content[0].text == "one two "
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "STOP")


def test_stream_failure_ends_with_an_error_event(client, script):
    script.calls = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    events = stream_events(create(client, stream=True, tool_choice={"type": "any"},
                                  tools=[{"name": "open_dispute"}], messages=DISPUTE,
                                  strictcall={"max_repair_attempts": 0,
                                              "grounding": False}))
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["type"] == "invalid_request_error"
    assert "broke its contract" in events[-1]["error"]["message"]
    assert "message_delta" not in [e["type"] for e in events]


def test_stream_request_errors_come_before_the_stream(client):
    assert_error(create(client, stream=True, tool_choice={"type": "any"}), 400,
                 says="no tools were given")


def test_a_message_without_blocks_is_a_400(client):
    """Found by the fuzz tier: `content: []` left no turn at all (a 500)."""
    resp = client.post("/v1/messages", json={"model": "scripted", "max_tokens": 8,
                                             "messages": [{"role": "user", "content": []}]})
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["type"] == "invalid_request_error"
