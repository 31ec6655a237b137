"""POST /v1/responses over a ScriptedEngine: translation to the chat pipeline and back, and
what is refused. Every 200 body is validated against the openai SDK's `Response` type."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response

from server.api.responses.request import ResponsesRequest
from server.api.responses.translate import to_task
from tests.scripted import Replies, assert_problem

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                           "days": {"type": "integer"}},
                          "required": ["city"]}, "strict": True}
NOOP = {"type": "function", "name": "noop", "parameters": {"type": "object"}, "strict": False}
CALL = '[{"name":"get_weather","arguments":{"city":"Paris","days":2}}]'
ANSWER = {"type": "json_schema", "name": "answer", "strict": True, "schema": {
    "type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
    "additionalProperties": False}}


@pytest.fixture(scope="module")
def replies():
    return Replies()


@pytest.fixture(scope="module")
def client(scripted, replies):
    with scripted(replies, contracts=["contracts.examples"]) as c:
        yield c


@pytest.fixture(autouse=True)
def plain_script(client, replies):
    client.app.state.pipeline.engine.script = replies
    replies.text = "Hello."


def respond(client, **body):
    body = {"model": "scripted", "input": "Weather in Paris?", **body}
    return client.post("/v1/responses", json=body)


def ok(resp) -> Response:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert "output_text" not in body  # the SDKs compute it
    return Response.model_validate(body)


def last_prompt(client) -> str:
    return client.app.state.pipeline.engine.prompts[-1]


# -- Responses request -> chat pipeline -> Response ------------------------------------------

def test_text_response_shape(client, replies):
    replies.text = "Sunny."
    resp = respond(client, instructions="Be brief.", temperature=0.5, max_output_tokens=50,
                   metadata={"k": "v"})
    got = ok(resp)
    assert got.id.startswith("resp_") and got.object == "response"
    assert got.status == "completed" and got.incomplete_details is None and got.error is None
    (message,) = got.output
    assert message.type == "message" and message.id.startswith("msg_")
    assert message.status == "completed" and message.role == "assistant"
    assert message.content[0].type == "output_text" and message.content[0].annotations == []
    assert got.output_text == "Sunny."
    usage = got.usage
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens > 0
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert (got.instructions, got.temperature, got.max_output_tokens) == ("Be brief.", 0.5, 50)
    assert got.tools == [] and got.tool_choice == "auto" and got.parallel_tool_calls is True
    assert got.text.format.type == "text" and got.metadata == {"k": "v"}
    assert last_prompt(client).startswith("<|im_start|>system\nBe brief.<|im_end|>\n"
                                          "<|im_start|>user\nWeather in Paris?")


def test_input_items_become_chat_turns(client, replies):
    replies.text = "It is sunny."
    items = [
        {"role": "developer", "content": "You report weather."},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Weather in "},
                     {"type": "input_text", "text": "Paris?"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Paris"}', "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "noop", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21C"},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "done"}]},
    ]
    got = ok(respond(client, input=items, tools=[WEATHER, NOOP], tool_choice="none"))
    assert got.output_text == "It is sunny."
    prompt = last_prompt(client)
    assert prompt.startswith("<|im_start|>system\nYou report weather.")
    assert "<|im_start|>user\nWeather in Paris?<|im_end|>" in prompt
    # The assistant's text and both calls are one turn, as the model produced them.
    assert ('<|im_start|>assistant\nChecking.<tool_call>[{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}, {"name": "noop", "arguments": {}}]</tool_call>') in prompt
    assert "[result of call call_1] sunny, 21C" in prompt
    assert "[result of call call_2] done" in prompt


def test_required_function_call(client, replies):
    replies.text = CALL
    resp = respond(client, tools=[WEATHER, NOOP], tool_choice="required")
    got = ok(resp)
    assert got.status == "completed" and got.output_text == ""
    (call,) = got.output
    assert call.type == "function_call" and call.id.startswith("fc_")
    assert call.call_id.startswith("call_") and call.status == "completed"
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris", "days": 2}
    assert [t.name for t in got.tools] == ["get_weather", "noop"]
    assert got.tool_choice == "required"
    assert resp.headers["X-StrictCall-Grammar-Cache"] in ("hit", "miss")


def test_named_tool_choice(client, replies):
    replies.text = '[{"name":"noop","arguments":{}}]'
    got = ok(respond(client, tools=[WEATHER, NOOP],
                     tool_choice={"type": "function", "name": "noop"}))
    assert [item.name for item in got.output] == ["noop"]
    assert got.tool_choice.type == "function" and got.tool_choice.name == "noop"


def test_tool_choice_none_answers_in_text(client, replies):
    replies.text = "No call."
    got = ok(respond(client, tools=[WEATHER], tool_choice="none"))
    assert [item.type for item in got.output] == ["message"]


@pytest.mark.parametrize(("decision", "kinds"), [
    (CALL, ["function_call"]),
    ("[]", ["message"]),  # decided on no call: the text pass answers
])
def test_auto_tool_choice(client, decision, kinds):
    engine = client.app.state.pipeline.engine
    engine.script = lambda prompt: decision if prompt.endswith("<tool_call>") else "Paris."
    got = ok(respond(client, tools=[WEATHER]))
    assert [item.type for item in got.output] == kinds


def test_parallel_tool_calls_false_allows_one_call(client, replies):
    replies.text = CALL[:-1] + ',{"name":"noop","arguments":{}}]'
    assert len(ok(respond(client, tools=[WEATHER, NOOP], tool_choice="required")).output) == 2
    resp = respond(client, tools=[WEATHER, NOOP], tool_choice="required",
                   parallel_tool_calls=False)
    assert_problem(resp, 503, says="breaks the grammar")  # the grammar allows one call


def test_text_format_json_schema(client, replies):
    replies.text = '{"answer":42}'
    got = ok(respond(client, text={"format": ANSWER}))
    assert json.loads(got.output_text) == {"answer": 42}
    assert got.text.format.type == "json_schema" and got.text.format.name == "answer"
    assert got.text.format.schema_ == ANSWER["schema"]
    # By default the grammar alone carries the schema (--schema-prompt none) ...
    assert '"answer"' not in last_prompt(client)
    # ... and a request may ask for it in the prompt too.
    ok(respond(client, text={"format": ANSWER}, strictcall={"schema_prompt": "raw"}))
    assert '"answer": {"type": "integer"}' in last_prompt(client)


def test_text_format_json_object(client, replies):
    replies.text = '{"free":[1,"two"]}'
    got = ok(respond(client, text={"format": {"type": "json_object"}}))
    assert json.loads(got.output_text) == {"free": [1, "two"]}


def test_max_output_tokens_cut_is_incomplete(client, replies):
    replies.text = "one two three four five six seven eight"
    got = ok(respond(client, max_output_tokens=3))
    assert got.status == "incomplete"
    assert got.incomplete_details.reason == "max_output_tokens"
    assert got.output[0].status == "incomplete" and got.usage.output_tokens == 3


def test_cut_off_call_is_never_a_function_call(client, replies):
    replies.text = CALL
    got = ok(respond(client, tools=[WEATHER], tool_choice="required", max_output_tokens=5))
    assert got.status == "incomplete"
    assert [item.type for item in got.output] == ["message"]


def test_contract_call_is_validated_and_repaired(client):
    def script(prompt: str) -> str:  # the repair prompt gets the branch of the right city
        if "is not valid yet" in prompt[-400:]:
            return '{"branch_id":301}'
        return '[{"name":"reissue_card","arguments":{"card_last4":"4417","city":"Kazan",' \
               '"branch_id":101}}]'

    client.app.state.pipeline.engine.script = script
    resp = respond(client, tool_choice="required",
                   tools=[{"type": "function", "name": "reissue_card", "parameters": None,
                           "strict": True}])
    got = ok(resp)
    assert json.loads(got.output[0].arguments)["branch_id"] == 301
    assert resp.json()["strictcall"]["repaired"] is True


# -- the reasoning pass ----------------------------------------------------------------------

# The smollm2 format's reasoning: the prompt opens `<think>`, the model closes it.
THOUGHT = "Paris is in France."


def test_reasoning_comes_as_a_reasoning_item_first(client, replies):
    replies.text = f"{THOUGHT}</think>\nSunny."
    resp = respond(client, reasoning={"effort": "low", "summary": "auto"})
    got = ok(resp)
    assert [item.type for item in got.output] == ["reasoning", "message"]
    thought = got.output[0]
    assert thought.id.startswith("rs_") and thought.status == "completed"
    assert thought.summary == [] and thought.encrypted_content is None  # no summarizer
    assert [(c.type, c.text) for c in thought.content] == [("reasoning_text", THOUGHT)]
    assert got.output_text == "Sunny."
    spent = got.usage.output_tokens_details.reasoning_tokens
    assert 0 < spent < got.usage.output_tokens
    assert (got.reasoning.effort, got.reasoning.summary) == ("low", "auto")
    assert last_prompt(client).endswith("<think>\n")


def test_reasoning_before_a_function_call(client, replies):
    replies.text = f"{THOUGHT}</think>\n<tool_call>{CALL}"
    got = ok(respond(client, tools=[WEATHER], tool_choice="required",
                     reasoning={"effort": "minimal"}))
    assert [item.type for item in got.output] == ["reasoning", "function_call"]
    assert got.output[0].content[0].text == THOUGHT
    assert json.loads(got.output[1].arguments) == {"city": "Paris", "days": 2}


def test_no_reasoning_item_without_the_pass(client, replies):
    got = ok(respond(client, reasoning={"effort": "none"}))
    assert [item.type for item in got.output] == ["message"]
    assert got.usage.output_tokens_details.reasoning_tokens == 0
    assert "<think>" not in last_prompt(client)


@pytest.mark.parametrize(("effort", "served"), [
    ("xhigh", "high"), ("max", "high"), ("minimal", "minimal"), (None, None)])
def test_effort_maps_to_reasoning_effort(effort, served):
    req = ResponsesRequest(model="m", input="hi", reasoning={"effort": effort})
    assert to_task(req).reasoning_effort == served


def test_cut_off_while_thinking(client, replies):
    replies.text = f"{THOUGHT} And more.</think>\nSunny."
    got = ok(respond(client, reasoning={"effort": "low"}, max_output_tokens=3))
    assert got.status == "incomplete"
    assert [(i.type, i.status) for i in got.output] == [("reasoning", "incomplete"),
                                                       ("message", "incomplete")]
    assert got.output_text == ""


def test_reasoning_items_sent_back_are_dropped(client, replies):
    replies.text = "It is sunny."
    items = [{"role": "user", "content": "Weather in Paris?"},
             {"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed",
              "content": [{"type": "reasoning_text", "text": "SECRET THOUGHT"}]},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather",
              "arguments": '{"city":"Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]
    assert ok(respond(client, input=items, tools=[WEATHER], tool_choice="none")
              ).output_text == "It is sunny."
    prompt = last_prompt(client)
    assert "SECRET" not in prompt and "[result of call call_1] sunny" in prompt


# -- refused, by name, before anything is decoded --------------------------------------------

@pytest.mark.parametrize(("body", "param", "says"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id", "not found"),
    ({"conversation": "conv_1"}, "conversation", "no conversations api"),
    ({"background": True}, "background", "no background responses"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt", "stored prompt"),
    ({"reasoning": {"summary": "detailed"}}, "reasoning.summary", "no reasoning summarizer"),
    ({"reasoning": {"generate_summary": "concise"}}, "reasoning.generate_summary",
     "send 'auto'"),
    ({"reasoning": {"effort": "turbo"}}, "reasoning.effort", "input should be"),
    ({"include": ["message.output_text.logprobs"]}, "include", "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs", "not supported"),
    ({"text": {"format": {"type": "text"}, "verbosity": "low"}}, "text.verbosity", "verbosity"),
    ({"stream_options": {"include_obfuscation": False}}, "stream_options", "stream=true"),
    ({"frobnicate": 1}, "frobnicate", "unknown field"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "'web_search'"),
    ({"tools": [{**WEATHER, "defer_loading": True}]}, "tools[0].defer_loading", "tool search"),
    ({"tools": [{**WEATHER, "colour": "red"}]}, "tools[0].colour", "unknown field"),
    ({"input": []}, "input", "empty"),
    ({"input": [{"type": "reasoning", "summary": [], "colour": 1}]}, "input[0].colour",
     "unknown field"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "not supported"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type", "text only"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
     "input[0].arguments", "field required"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "input should be"),
    ({"tool_choice": "required"}, "tool_choice", "no tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}},
     "tool_choice.name", "unknown tool 'nope'"),
    ({"tools": [WEATHER, WEATHER], "tool_choice": "required"}, "tools[1].name", "twice"),
    ({"tools": [{**WEATHER, "parameters": {"type": "object", "properties": {
        "a": {"type": "strng"}}}}], "tool_choice": "required"},
     "tools[0].parameters", "unknown type 'strng'"),
    ({"text": {"format": {**ANSWER, "schema": {"type": "object", "properties": {
        "p": {"type": "string", "format": "phone"}}}}}}, "text.format.schema", "'format'"),
    ({"max_output_tokens": 10_000_000}, "max_output_tokens", "context"),
    ({"temperature": 3}, "temperature", "less than or equal"),
])
def test_refused_with_a_400_that_names_the_field(client, body, param, says):
    assert_problem(respond(client, **body), 400, param=param, says=says)


def test_refused_before_a_stream_starts(client):
    assert_problem(respond(client, stream=True, background=True), 400, param="background")


def test_unknown_model_is_404(client):
    assert_problem(respond(client, model="gpt-4o"), 404, param="model", says="/v1/models")


@pytest.mark.parametrize("body", [
    {"store": False, "metadata": {"k": "v"}, "user": "u1", "safety_identifier": "s",
     "prompt_cache_key": "k", "service_tier": "auto", "truncation": "disabled"},
    {"reasoning": {"effort": None}, "include": [], "max_tool_calls": 3, "truncation": "auto"},
    {"reasoning": {"effort": "none", "summary": "auto"},
     "text": {"format": {"type": "text"}, "verbosity": "medium"}},
    {"tools": [{**WEATHER, "output_schema": {"type": "string"},
                "allowed_callers": ["direct"]}], "tool_choice": "none"},
])
def test_harmless_fields_are_accepted(client, body):
    ok(respond(client, **body))


def test_requests_are_counted_under_the_responses_api(client):
    from prometheus_client.parser import text_string_to_metric_families

    ok(respond(client))
    assert_problem(respond(client, background=True), 400)
    text = client.get("/metrics").text
    counted = {(s.labels["outcome"], s.labels["status"]): s.value
               for family in text_string_to_metric_families(text)
               for s in family.samples
               if s.name == "strictcall:requests_total"
               and s.labels.get("api") == "responses"}
    assert counted[("success", "200")] >= 1 and ("client_error", "400") in counted, counted
