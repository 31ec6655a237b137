"""tool_choice="auto" and stream=true over a ScriptedEngine."""

from __future__ import annotations

import json

import pytest

from tests.scripted import OTHER, TOOL, USER, Replies, assert_problem

# What open_dispute's grounded fields may copy from.
DISPUTE = [{"role": "user", "content": "Card ending 4417: someone charged 10 on 2026-11-01, "
            "and again on 2099-01-01. That is fraud."}]


@pytest.fixture()
def replies():
    return Replies()


@pytest.fixture()
def client(scripted, replies):
    with scripted(replies, contracts=["contracts.examples"]) as c:
        yield c


def chat(client, **body):
    body = {"model": "scripted", "messages": USER, **body}
    return client.post("/v1/chat/completions", json=body)


def events(resp) -> list:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/event-stream")
    lines = [line[6:] for line in resp.text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def assemble(chunks: list) -> dict:
    """What an SDK accumulator would build from the chunks."""
    content, calls, finish, usage = "", {}, None, None
    for chunk in chunks:
        assert "error" not in chunk, chunk
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                call["name"] += tc["function"].get("name") or ""
                call["arguments"] += tc["function"].get("arguments") or ""
            finish = choice["finish_reason"] or finish
    return {"content": content, "calls": [calls[i] for i in sorted(calls)], "finish": finish,
            "usage": usage}


# -- tool_choice="auto", strategy "decide" (the default) ------------------------------

class Decide:
    """The first pass (prompt ends with the opened call block) answers `calls`; the text pass
    answers `text`."""

    def __init__(self) -> None:
        self.calls, self.text = "[]", "Paris is in France."

    def __call__(self, prompt: str) -> str:
        return self.calls if prompt.endswith("<tool_call>") else self.text


@pytest.fixture()
def decide(client):
    script = Decide()
    client.app.state.pipeline.engine.script = script
    return script


def test_decide_no_call_answers_in_a_second_text_pass(client, decide):
    body = chat(client, tools=[TOOL]).json()  # auto is the default with tools
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Paris is in France.",
                                 "tool_calls": None, "reasoning_content": None,
                                 "reasoning": None}
    assert choice["finish_reason"] == "stop"
    prompts = client.app.state.pipeline.engine.prompts[-2:]
    assert "empty list" in prompts[0] and "get_weather" not in prompts[1]
    assert body["usage"]["prompt_tokens"] > len(prompts[0]) // 8  # both passes counted


def test_decide_call(client, decide):
    decide.calls = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    choice = chat(client, tools=[TOOL, OTHER], tool_choice="auto").json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris"}


def test_decide_call_must_be_valid(client, decide):
    decide.calls = '[{"name":"get_weather","arguments":{"town":"Paris"}}]'
    assert_problem(chat(client, tools=[TOOL]), 503, says="breaks the grammar")


def test_decide_parallel_calls_are_limited_in_the_grammar(client, decide):
    decide.calls = ('[{"name":"get_weather","arguments":{"city":"A"}},'
                    '{"name":"get_weather","arguments":{"city":"B"}}]')
    assert len(chat(client, tools=[TOOL]).json()["choices"][0]["message"]["tool_calls"]) == 2
    assert_problem(chat(client, tools=[TOOL], parallel_tool_calls=False), 503,
                   says="breaks the grammar")


def test_decide_fallback_keeps_the_response_format(client, decide):
    decide.text = '{"answer":"no tool"}'
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}}}}
    body = chat(client, tools=[TOOL], response_format=fmt).json()
    assert json.loads(body["choices"][0]["message"]["content"]) == {"answer": "no tool"}


def test_decide_contract_call_is_validated_and_normalized(client, decide):
    decide.calls = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2026-11-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    body = chat(client, messages=DISPUTE,
                tools=[{"type": "function", "function": {"name": "open_dispute"}}]).json()
    args = json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert args["original_operation_id"] is None and body["strictcall"]["repaired"] is False


def test_decide_streams_the_text_pass(client, decide):
    decide.text = "No tool needed here, friend."
    got = assemble(events(chat(client, stream=True, tools=[TOOL],
                               stream_options={"include_usage": True})))
    assert got["content"] == "No tool needed here, friend." and not got["calls"]
    assert got["finish"] == "stop" and got["usage"]["completion_tokens"] > 3


def test_decide_streams_calls(client, decide):
    decide.calls = '[{"name":"get_weather","arguments":{"city":"Oslo"}}]'
    got = assemble(events(chat(client, stream=True, tools=[TOOL])))
    assert got["calls"][0]["name"] == "get_weather" and got["finish"] == "tool_calls"
    assert json.loads(got["calls"][0]["arguments"]) == {"city": "Oslo"}


def test_tool_choice_none_never_calls(client, replies):
    replies.text = '<tool_call>[{"name":"get_weather","arguments":{"city":"Paris"}}]</tool_call>'
    choice = chat(client, tools=[TOOL], tool_choice="none").json()["choices"][0]
    assert choice["message"]["tool_calls"] is None and choice["finish_reason"] == "stop"


# -- tool_choice="auto", strategy "trigger" ---------------------------------------------

@pytest.fixture()
def trigger(scripted, replies):
    with scripted(replies, auto_tools="trigger") as c:
        yield c


def test_trigger_answers_in_text(trigger, replies):
    replies.text = "Paris is in France."
    choice = chat(trigger, tools=[TOOL]).json()["choices"][0]
    assert choice["message"]["content"] == "Paris is in France."
    assert choice["finish_reason"] == "stop"
    assert trigger.app.state.pipeline.engine.prompts[-1].endswith("<|im_start|>assistant\n")


def test_trigger_call_after_some_text(trigger, replies):
    replies.text = ('Let me look. <tool_call>[{"name":"get_weather","arguments":'
                    '{"city":"Paris"}}]</tool_call>')
    choice = chat(trigger, tools=[TOOL, OTHER]).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me look."


def test_trigger_call_must_be_valid(trigger, replies):
    replies.text = '<tool_call>[{"name":"get_weather","arguments":{"town":"Paris"}}]</tool_call>'
    assert_problem(chat(trigger, tools=[TOOL]), 503, says="breaks the grammar")


def test_trigger_streams_text_then_call(trigger, replies):
    replies.text = ('Checking. <tool_call>[{"name":"get_weather","arguments":{"city":"Oslo"}}]'
                    '</tool_call>')
    got = assemble(events(chat(trigger, stream=True, tools=[TOOL])))
    assert got["content"] == "Checking."
    assert got["calls"][0]["name"] == "get_weather" and got["finish"] == "tool_calls"
    assert json.loads(got["calls"][0]["arguments"]) == {"city": "Oslo"}


# -- stream=true -------------------------------------------------------------------------

def test_stream_text_with_usage(client, replies):
    replies.text = "Hello there, how are you?"
    chunks = events(chat(client, stream=True, stream_options={"include_usage": True}))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 2
    got = assemble(chunks)
    assert got["content"] == "Hello there, how are you?" and got["finish"] == "stop"
    assert chunks[-1]["choices"] == [] and got["usage"]["completion_tokens"] > 0
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1


def test_stream_stop_string_never_leaks(client, replies):
    replies.text = "one two STOP three"
    got = assemble(events(chat(client, stream=True, stop=["STOP"])))
    assert got["content"] == "one two "


def test_stream_json(client, replies):
    replies.text = '{"answer":42}'
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"answer": {"type": "integer"}}}}}
    got = assemble(events(chat(client, stream=True, response_format=fmt)))
    assert json.loads(got["content"]) == {"answer": 42} and got["finish"] == "stop"


def test_stream_required_tool_calls(client, replies):
    replies.text = ('[{"name":"get_weather","arguments":{"city":"Paris","days":2}},'
                    '{"name":"noop","arguments":{}}]')
    chunks = events(chat(client, stream=True, tools=[TOOL, OTHER], tool_choice="required"))
    got = assemble(chunks)
    assert got["finish"] == "tool_calls" and got["content"] == ""
    assert [c["name"] for c in got["calls"]] == ["get_weather", "noop"]
    assert json.loads(got["calls"][0]["arguments"]) == {"city": "Paris", "days": 2}
    assert got["calls"][1]["arguments"] == "{}"
    assert all(c["id"].startswith("call_") for c in got["calls"])
    fragments = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert len(fragments) > 3  # arguments arrive in pieces, not at the end


def test_stream_contract_arguments_arrive_normalized(client, replies):
    replies.text = ('[{"name":"reissue_card","arguments":{"card_last4":"4417","city":"Kazan",'
                    '"branch_id":101}}]')
    replies_then = {"n": 0}
    original = replies.__call__

    def script(prompt):  # the repair prompt gets the fixed branch
        replies_then["n"] += 1
        return '{"branch_id":301}' if "is not valid yet" in prompt[-400:] else original(prompt)

    client.app.state.pipeline.engine.script = script
    chunks = events(chat(client, stream=True, tool_choice="required",
                         tools=[{"type": "function", "function": {"name": "reissue_card"}}]))
    got = assemble(chunks)
    assert json.loads(got["calls"][0]["arguments"])["branch_id"] == 301
    assert chunks[-1]["strictcall"]["repaired"] is True


def test_stream_contract_failure_ends_with_an_error_event(client, replies):
    replies.text = ('[{"name":"open_dispute","arguments":{"card_last4":"4417",'
                    '"operation_date":"2099-01-01","amount":"10","reason":"fraud",'
                    '"original_operation_id":null}}]')
    resp = chat(client, stream=True, tool_choice="required", strictcall={"max_repair_attempts": 0,
                                                             "grounding": False},
                messages=DISPUTE,
                tools=[{"type": "function", "function": {"name": "open_dispute"}}])
    chunks = events(resp)
    assert chunks[-1]["status"] == 422 and chunks[-1]["error"]["type"] == "invalid_output_error"
    assert not any(c.get("choices") and c["choices"][0]["finish_reason"] for c in chunks[:-1])


def test_stream_cut_off_is_length(client, replies):
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris is lovely"}}]'
    got = assemble(events(chat(client, stream=True, tools=[TOOL], tool_choice="required",
                               max_tokens=6)))
    assert got["finish"] == "length"


def test_stream_request_errors_are_plain_400s(client):
    assert_problem(chat(client, stream=True, tool_choice="required"), 400, param="tool_choice")
