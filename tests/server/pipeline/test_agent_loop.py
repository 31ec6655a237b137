"""The turn after a tool result over a ScriptedEngine: it starts in free text with the call
grammar only behind the model's own marker ("answer-first"), a call already answered since
the user's last message is not written again (the answer follows instead, plain and
streamed), polling is asked for with dedupe_calls off, and another call stays possible.
The embedded model's agent loops: tests/server/api/test_agent_loops.py."""

from __future__ import annotations

import json

import pytest

from server.formats.smollm2 import AUTO_INSTRUCTIONS, DECIDE_INSTRUCTIONS
from server.task import EarlierCall, Turn, answered_calls
from tests.scripted import TOOL
from tests.server.pipeline.test_stream_auto import assemble, events

CALL = {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}
ASKED = [{"role": "user", "content": "Weather in Oslo for 2 days?"}]
LOOP = [*ASKED,
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps(CALL["arguments"])}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Oslo: sunny, 21 C"}]
ANSWER = "Sunny in Oslo, 21 C."
# What tells the two prompts apart: the way out of a call each offers.
TRIGGER_WORDS = "answer the question yourself in plain text"
DECIDE_WORDS = "make the tool calls an empty list"
assert TRIGGER_WORDS in AUTO_INSTRUCTIONS and DECIDE_WORDS in DECIDE_INSTRUCTIONS


def _agent_model(call: dict):
    """A model that, offered the call block after a tool result, writes `call` again (what
    the embedded model did), and answers where only an answer is possible."""
    prompts: list[str] = []

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        written = json.dumps([call], separators=(",", ":"))  # as the grammar writes it
        if TRIGGER_WORDS in prompt:
            return f"<tool_call>{written}</tool_call>"
        if DECIDE_WORDS in prompt:
            return written
        return ANSWER

    return reply, prompts


def _ask(client, messages, **extra):
    return client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": messages, "tools": [TOOL], "tool_choice": "auto",
        **extra})


def test_answered_calls_are_those_since_the_users_last_message_with_a_result():
    first, second, unanswered = (EarlierCall("a", "f", {}), EarlierCall("b", "f", {"x": 1}),
                                 EarlierCall("c", "g", {}))
    turns = [Turn("user", "q1"), Turn("assistant", "", (first,)), Turn("tool", "r", call_id="a"),
             Turn("user", "q2"), Turn("assistant", "", (second, unanswered)),
             Turn("tool", "r", call_id="b")]
    assert answered_calls(turns) == (second,)
    assert answered_calls(turns[:4]) == ()


def test_the_turn_after_a_result_starts_in_free_text(scripted):
    reply, prompts = _agent_model({"name": "get_weather", "arguments": {"city": "Bergen"}})
    with scripted(reply) as client:
        first = _ask(client, ASKED)  # the first turn decides (--auto-tools decide)
        assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
        assert DECIDE_WORDS in prompts[-1]
        later = _ask(client, LOOP)
    assert TRIGGER_WORDS in prompts[-1] and DECIDE_WORDS not in prompts[-1]
    # Another call is still possible after a result: this one is not a repeat.
    message = later.json()["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Bergen"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_already_answered_is_not_written_again(scripted, stream):
    reply, prompts = _agent_model(CALL)
    with scripted(reply) as client:
        resp = _ask(client, LOOP, stream=stream)
    if stream:
        message = assemble(events(resp))
        assert message["calls"] == [] and message["content"] == ANSWER
        assert message["finish"] == "stop"
    else:
        choice = resp.json()["choices"][0]
        assert choice["message"]["tool_calls"] is None
        assert (choice["message"]["content"], choice["finish_reason"]) == (ANSWER, "stop")
    assert TRIGGER_WORDS in prompts[0] and TRIGGER_WORDS not in prompts[1]  # then answered


def test_polling_is_asked_for_with_dedupe_calls_off(scripted):
    reply, _ = _agent_model(CALL)
    with scripted(reply) as client:
        resp = _ask(client, LOOP, strictcall={"dedupe_calls": False})
    calls = resp.json()["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [CALL["arguments"]]


def test_the_old_way_stays_selectable_and_the_repeat_is_still_dropped(scripted):
    """--after-results auto: the call block opened after a result too (what
    bench/dialogue/agent_loop.py compares); the repeat the model writes there is dropped, and the
    empty list answers."""
    reply, prompts = _agent_model(CALL)
    with scripted(reply, after_results="auto") as client:
        resp = _ask(client, LOOP)
    assert DECIDE_WORDS in prompts[0]
    assert resp.json()["choices"][0]["message"]["content"] == ANSWER
