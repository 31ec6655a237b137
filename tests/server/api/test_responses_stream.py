"""POST /v1/responses with stream=true over a ScriptedEngine: the event order, and what the
openai SDK's own accumulator (the one behind `responses.stream()`) builds from the events.
Every event is validated against the SDK's `ResponseStreamEvent` union."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from openai import omit
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.settings import Settings
from tests.scripted import Replies
from tests.server.api.test_responses_api import CALL, NOOP, THOUGHT, WEATHER, respond

EVENT = TypeAdapter(ResponseStreamEvent)
OPEN = ["response.created", "response.in_progress"]
MESSAGE_ADDED = ["response.output_item.added", "response.content_part.added"]
MESSAGE_DONE = ["response.output_text.done", "response.content_part.done",
                "response.output_item.done"]
CALL_DONE = ["response.function_call_arguments.done", "response.output_item.done"]
REASONING = ["response.output_item.added", "response.content_part.added",
             "response.reasoning_text.delta", "response.reasoning_text.done",
             "response.content_part.done", "response.output_item.done"]


@pytest.fixture(scope="module")
def replies():
    return Replies()


def _client(model_dir, replies, **settings):
    settings = Settings(served_model_name="scripted", contracts=["contracts.examples"],
                        **settings)
    return TestClient(create_app(settings, lambda s: ScriptedEngine(model_dir, replies)))


@pytest.fixture(scope="module")
def client(model_dir, replies):
    with _client(model_dir, replies) as c:
        yield c


@pytest.fixture(autouse=True)
def plain_script(client, replies):
    client.app.state.pipeline.engine.script = replies


def stream(client, **body) -> list[dict]:
    resp = respond(client, stream=True, **body)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in resp.text.strip().split("\n\n"):
        kind, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert kind == f"event: {event['type']}"
        EVENT.validate_python(event)
        events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def kinds(events: list[dict]) -> list[str]:
    """Event types, runs of one delta type collapsed to one."""
    out: list[str] = []
    for event in events:
        if not (event["type"].endswith(".delta") and out and out[-1] == event["type"]):
            out.append(event["type"])
    return out


def accumulate(events: list[dict], tools=None, text_format=omit):
    """What `client.responses.stream(...).get_final_response()` returns for these events."""
    state = ResponseStreamState(input_tools=tools or [], text_format=text_format)
    final = None
    for event in events:
        for emitted in state.handle_event(EVENT.validate_python(event)):
            if emitted.type == "response.completed":
                final = emitted.response
    return final


def test_text_stream(client, replies):
    replies.text = "Hello there, how are you?"
    events = stream(client)
    assert kinds(events) == [*OPEN, *MESSAGE_ADDED, "response.output_text.delta",
                             *MESSAGE_DONE, "response.completed"]
    assert len([e for e in events if e["type"] == "response.output_text.delta"]) > 2
    assert len({e["response"]["id"] for e in events if "response" in e}) == 1
    final = accumulate(events)
    assert final.output_text == "Hello there, how are you?" and final.status == "completed"
    assert final.usage.output_tokens > 0 and final.output[0].status == "completed"


def test_function_call_stream(client, replies):
    replies.text = CALL[:-1] + ',{"name":"noop","arguments":{}}]'
    events = stream(client, tools=[WEATHER, NOOP], tool_choice="required")
    assert kinds(events) == [
        *OPEN, "response.output_item.added", "response.function_call_arguments.delta",
        "response.output_item.added", "response.function_call_arguments.delta",
        *CALL_DONE, *CALL_DONE, "response.completed"]
    final = accumulate(events, tools=[WEATHER, NOOP])
    first, second = final.output
    assert (first.name, second.name) == ("get_weather", "noop")
    assert first.parsed_arguments == {"city": "Paris", "days": 2}
    assert second.arguments == "{}" and first.call_id.startswith("call_")
    assert first.call_id != second.call_id and first.status == "completed"
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert [a["call_id"] for a in added] == [first.call_id, second.call_id]


def test_json_schema_stream_parses(client, replies):
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: int

    replies.text = '{"answer":42}'
    fmt = {"type": "json_schema", "name": "Answer", "strict": True,
           "schema": {"type": "object", "properties": {"answer": {"type": "integer"}},
                      "required": ["answer"], "additionalProperties": False}}
    final = accumulate(stream(client, text={"format": fmt}), text_format=Answer)
    assert final.output_parsed == Answer(answer=42)


def test_incomplete_stream(client, replies):
    replies.text = "one two three four five six seven eight"
    events = stream(client, max_output_tokens=3)
    assert kinds(events)[-1] == "response.incomplete"
    response = events[-1]["response"]
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["status"] == "incomplete"


def test_cut_off_call_is_not_in_the_final_response(client, replies):
    replies.text = CALL
    events = stream(client, tools=[WEATHER], tool_choice="required", max_output_tokens=12)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    # What was streamed is closed as incomplete; the half-written call is the format's
    # syntax, not a message: the response is incomplete with no output.
    assert [(i["type"], i["status"]) for i in done] == [("function_call", "incomplete")]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["output"] == []


def test_contract_failure_ends_with_an_error_event(client, replies):
    replies.text = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    events = stream(client, tool_choice="required", strictcall={"max_repair_attempts": 0,
                                                             "grounding": False},
                    input="Card ending 4417: 10 charged on 2099-01-01, fraud.",
                    tools=[{"type": "function", "name": "open_dispute", "parameters": None,
                            "strict": True}])
    error = events[-1]
    assert error["type"] == "error" and error["code"] == "contract-violation"
    assert "open_dispute" in error["message"]
    assert not any(e["type"] in ("response.completed", "response.incomplete") for e in events)


def test_contract_arguments_arrive_normalized(client):
    def script(prompt: str) -> str:
        if "is not valid yet" in prompt[-400:]:
            return '{"branch_id":301}'
        return '[{"name":"reissue_card","arguments":{"card_last4":"4417","city":"Kazan",' \
               '"branch_id":101}}]'

    client.app.state.pipeline.engine.script = script
    events = stream(client, tool_choice="required", tools=[
        {"type": "function", "name": "reissue_card", "parameters": None, "strict": True}])
    final = accumulate(events)
    assert json.loads(final.output[0].arguments)["branch_id"] == 301
    assert events[-1]["response"]["strictcall"]["repaired"] is True


def test_text_then_call_stream(model_dir, replies):
    """tool_choice="auto" with the trigger strategy: the text before the call is a message
    item, closed when the call starts."""
    replies.text = ('Checking. <tool_call>[{"name":"get_weather","arguments":{"city":"Oslo"}}]'
                    '</tool_call>')
    with _client(model_dir, replies, auto_tools="trigger") as trigger:
        events = stream(trigger, tools=[WEATHER])
    assert kinds(events) == [*OPEN, *MESSAGE_ADDED, "response.output_text.delta",
                             *MESSAGE_DONE, "response.output_item.added",
                             "response.function_call_arguments.delta", *CALL_DONE,
                             "response.completed"]
    final = accumulate(events, tools=[WEATHER])
    assert final.output_text == "Checking."
    assert final.output[1].parsed_arguments == {"city": "Oslo"}


# -- the reasoning pass ----------------------------------------------------------------------

def test_reasoning_stream(client, replies):
    replies.text = f"{THOUGHT}</think>\nSunny and warm."
    events = stream(client, reasoning={"effort": "low"})
    assert kinds(events) == [*OPEN, *REASONING, *MESSAGE_ADDED, "response.output_text.delta",
                             *MESSAGE_DONE, "response.completed"]
    deltas = [e for e in events if e["type"] == "response.reasoning_text.delta"]
    assert len(deltas) > 1 and "".join(e["delta"] for e in deltas) == THOUGHT
    assert {(e["output_index"], e["content_index"]) for e in deltas} == {(0, 0)}
    done = next(e for e in events if e["type"] == "response.reasoning_text.done")
    assert done["text"] == THOUGHT and done["item_id"].startswith("rs_")
    final = accumulate(events)
    thought, message = final.output
    assert thought.type == "reasoning" and thought.content[0].text == THOUGHT
    assert thought.status == "completed" and thought.summary == []
    assert message.content[0].text == "Sunny and warm."
    assert final.usage.output_tokens_details.reasoning_tokens > 0


def test_reasoning_then_function_call_stream(client, replies):
    replies.text = f"{THOUGHT}</think>\n<tool_call>{CALL}"
    events = stream(client, tools=[WEATHER], tool_choice="required",
                    reasoning={"effort": "minimal"})
    assert kinds(events) == [*OPEN, *REASONING, "response.output_item.added",
                             "response.function_call_arguments.delta", *CALL_DONE,
                             "response.completed"]
    final = accumulate(events, tools=[WEATHER])
    assert [item.type for item in final.output] == ["reasoning", "function_call"]
    assert final.output[1].parsed_arguments == {"city": "Paris", "days": 2}


def test_stream_cut_off_while_thinking(client, replies):
    replies.text = f"{THOUGHT}</think>\nSunny."
    events = stream(client, reasoning={"effort": "low"}, max_output_tokens=3)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(i["type"], i["status"]) for i in done] == [("reasoning", "incomplete"),
                                                        ("message", "incomplete")]
    assert events[-1]["type"] == "response.incomplete"


def test_server_default_reasoning_and_effort_none(model_dir, replies):
    """--reasoning on: a request without `reasoning` thinks; effort "none" turns it off."""
    with _client(model_dir, replies, reasoning=16) as thinking:
        replies.text = f"{THOUGHT}</think>\nSunny."
        assert [e["item"]["type"] for e in stream(thinking)
                if e["type"] == "response.output_item.done"] == ["reasoning", "message"]
        replies.text = "Sunny."
        final = accumulate(stream(thinking, reasoning={"effort": "none"}))
        assert [item.type for item in final.output] == ["message"]
