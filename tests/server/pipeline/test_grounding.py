"""Grounded fields over a ScriptedEngine: the grammar that holds only the conversation's
values (or null), the question where nothing was given, client schemas'
`x-strictcall-grounded` / `x-strictcall-ask`, the prompt that stays the same with grounding
on and off, and the compile endpoint's report. (How candidates are found:
tests/server/dialogue/test_grounding.py.)"""

from __future__ import annotations

import json

import pytest


class Script:
    def __init__(self) -> None:
        self.reply = ""

    def __call__(self, prompt: str) -> str:
        return self.reply


@pytest.fixture()
def script():
    return Script()


@pytest.fixture()
def client(scripted, script):
    with scripted(script, contracts=["contracts.examples"]) as c:
        yield c


ORDER = {"type": "function", "function": {"name": "track_order", "parameters": {
    "type": "object", "properties": {
        "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$",
                     "x-strictcall-grounded": True,
                     "x-strictcall-ask": "What is your order number? It starts with ORD-."},
        "carrier": {"type": "string", "enum": ["dhl", "ups"], "x-strictcall-grounded": True},
        "note": {"type": "string", "maxLength": 40}},
    "required": ["order_id", "carrier"]}}}


def _ask(client, said: str, **extra):
    return client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": said}],
        "tools": [ORDER], "tool_choice": "required", **extra})


def test_a_client_schemas_grounded_fields_copy_or_ask(client, script):
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-10442",'
                    '"carrier":"dhl","note":"late"}}]')
    resp = _ask(client, "Where is ORD-10442? It went with DHL.")
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-StrictCall-Enforcement"].endswith(
        "grounded: track_order#/order_id=1 track_order#/carrier=1")
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == \
        '{"order_id":"ORD-10442","carrier":"dhl","note":"late"}'
    # An id nobody gave cannot even be written: the grammar refuses it at its first digit.
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-99999",'
                    '"carrier":"dhl"}}]')
    refused = _ask(client, "Where is ORD-10442? It went with DHL.")
    assert refused.status_code == 503 and "breaks the grammar" in refused.text
    # Not given: the question the schema asks, with what was collected.
    script.reply = ('[{"name":"track_order","arguments":{"order_id":null,"carrier":"ups"}}]')
    asked = _ask(client, "My parcel sent by UPS is late.")
    body = asked.json()
    assert body["choices"][0]["message"]["content"] == \
        "What is your order number? It starts with ORD-."
    assert body["strictcall"]["needs_input"] == {
        "tool": "track_order", "collected": {"carrier": "ups"}, "language": "en",
        "missing": [{"field": "/order_id",
                     "question": "What is your order number? It starts with ORD-."}]}


def test_grounding_off_lets_the_model_write_anything_the_schema_takes(client, script):
    script.reply = ('[{"name":"track_order","arguments":{"order_id":"ORD-99999",'
                    '"carrier":"dhl"}}]')
    resp = _ask(client, "My parcel is late.", strictcall={"grounding": False})
    assert resp.status_code == 200, resp.text
    assert "grounded" not in resp.headers["X-StrictCall-Enforcement"]


def test_the_compile_endpoint_grounds_in_the_messages_it_is_given(client):
    schema = ORDER["function"]["parameters"]
    body = client.post("/v1/grammars/compile", json={
        "schema": schema, "messages": [
            {"role": "system", "content": "The customer's last order: ORD-00007."},
            {"role": "user", "content": "ORD-10442 or ORD-10443, whichever shipped"}]}).json()
    # The user's two ids: the system's order is context, the user's words win over it.
    assert body["grounding"] == {"fields": {"/order_id": 2, "/carrier": 0}}
    grounded = [k for k in body["enforcement"]["keywords"]
                if k["keyword"] == "x-strictcall-grounded"]
    assert [k["pointer"] for k in grounded] == ["/properties/order_id", "/properties/carrier"]
    bad = client.post("/v1/grammars/compile", json={"schema": schema, "messages": [{}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"].startswith("messages[0]")


TAIL = {"type": "function", "function": {"name": "tail", "parameters": {
    "type": "object", "required": ["file_name"], "properties": {
        "file_name": {"type": "string", "x-strictcall-grounded": True},
        "lines": {"type": "integer", "x-strictcall-grounded": True,
                  "description": "The number of lines to display from the end of the file"}}}}}


def test_an_optional_field_the_user_asked_for_without_a_value_is_asked(client, script):
    """"The last several lines": `lines` is optional, but the user wants a count and gave
    none; its "not given" is a question, not a call with the tool's default."""
    script.reply = '[{"name":"tail","arguments":{"file_name":"log.txt","lines":null}}]'
    asked = client.post("/v1/chat/completions", json={
        "model": "scripted", "tools": [TAIL], "tool_choice": "required",
        "messages": [{"role": "user", "content": "Show the last several lines of 'log.txt'."}]})
    body = asked.json()
    assert asked.status_code == 200, asked.text
    assert "tool_calls" not in body["choices"][0]["message"] or \
        not body["choices"][0]["message"]["tool_calls"]
    assert body["strictcall"]["needs_input"]["missing"] == [{
        "field": "/lines",
        "question": "Please tell me: the number of lines to display from the end of the file."}]
    assert body["strictcall"]["needs_input"]["collected"] == {"file_name": "log.txt"}
    # Without the vague count, the field left out is the tool's default: a call.
    script.reply = '[{"name":"tail","arguments":{"file_name":"log.txt","lines":null}}]'
    called = client.post("/v1/chat/completions", json={
        "model": "scripted", "tools": [TAIL], "tool_choice": "required",
        "messages": [{"role": "user", "content": "Show the end of 'log.txt'."}]})
    (call,) = called.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == '{"file_name":"log.txt"}'


TWEET = {"type": "function", "function": {"name": "post_tweet", "parameters": {
    "type": "object", "required": ["content"], "properties": {
        "content": {"type": "string", "x-strictcall-grounded": True},
        "mentions": {"type": "array", "description": "List of users mentioned in the tweet",
                     "items": {"type": "string", "x-strictcall-grounded": True}}}}}}


def test_an_array_the_user_asked_for_without_a_value_is_asked(client, script):
    """BFCL's post_tweet: "tag 'currenttechtrend' and mention someone": the model posted
    with no mention. `mentions` is optional, but the user asked for one and named nobody:
    the array is required in the grammar, its items have no value, and empty is a
    question."""
    def post(said: str):
        return client.post("/v1/chat/completions", json={
            "model": "scripted", "tools": [TWEET], "tool_choice": "required",
            "messages": [{"role": "user", "content": said}]})
    script.reply = '[{"name":"post_tweet","arguments":{"content":"Hello","mentions":[]}}]'
    body = post("Post 'Hello' and mention someone.").json()
    assert not body["choices"][0]["message"].get("tool_calls")
    assert body["strictcall"]["needs_input"]["missing"] == [{
        "field": "/mentions", "question": "Please tell me: list of users mentioned in the tweet."}]
    assert body["strictcall"]["needs_input"]["collected"] == {"content": "Hello"}
    # The grammar does not let the model leave the array out.
    script.reply = '[{"name":"post_tweet","arguments":{"content":"Hello"}}]'
    assert post("Post 'Hello' and mention someone.").status_code == 503
    # A mention named: the call.
    script.reply = '[{"name":"post_tweet","arguments":{"content":"Hello","mentions":["@Julia"]}}]'
    (call,) = post("Post 'Hello' and mention @Julia.").json()["choices"][0]["message"][
        "tool_calls"]
    assert json.loads(call["function"]["arguments"])["mentions"] == ["@Julia"]


GREP = {"type": "function", "function": {
    "name": "grep", "description": "Search a file for lines matching a pattern.", "parameters": {
    "type": "object", "required": ["file_name", "pattern"], "properties": {
        "file_name": {"type": "string"}, "pattern": {"type": "string"}}}}}
GREPPED = [
    {"role": "user", "content": "Search 'report.txt' for 'error'."},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c1", "type": "function", "function": {
            "name": "grep", "arguments": '{"file_name":"report.txt","pattern":"error"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"matching_lines":["error: disk"]}'},
    {"role": "assistant", "content": "One line matches."}]


def _grep(client, *later: dict, tools: list | None = None):
    return client.post("/v1/chat/completions", json={
        "model": "scripted", "tools": tools or [GREP], "tool_choice": "required",
        "messages": [*GREPPED, *later]})


def test_an_earlier_exchanges_call_made_again_unasked_is_asked_about(client, script):
    """BFCL's missing-parameter turns: the user asks for something the tools cannot do
    without a value they left out, and the model writes the call it already made. The
    answer asks (again, or with which values?) instead of running it twice."""
    script.reply = '[{"name":"grep","arguments":{"file_name":"report.txt","pattern":"error"}}]'
    asked = _grep(client, {"role": "user", "content": "Now count the lines of the file."})
    body = asked.json()
    assert asked.status_code == 200, asked.text
    assert not body["choices"][0]["message"].get("tool_calls")
    question = ("This was already done with the same values (file name: report.txt, "
                "pattern: error). Should I do it again, or with which other values?")
    assert body["choices"][0]["message"]["content"] == question
    assert body["strictcall"]["needs_input"]["confirm"] == [
        {"field": "", "value": None, "question": question}]
    # Yes to that question: made. Asked again in words, or the values said again: made.
    for later in ([{"role": "user", "content": "Count them."},
                   {"role": "assistant", "content": question},
                   {"role": "user", "content": "Yes."}],
                  [{"role": "user", "content": "Search it again."}],
                  [{"role": "user", "content": "Search report.txt for 'error'."}]):
        made = _grep(client, *later)
        (call,) = made.json()["choices"][0]["message"]["tool_calls"]
        assert json.loads(call["function"]["arguments"]) == {
            "file_name": "report.txt", "pattern": "error"}
    # A tool that only reads says so: repeating it is a poll, not asked about.
    read = {"type": "function", "function": {**GREP["function"], "parameters": {
        **GREP["function"]["parameters"], "x-strictcall-kind": "read"}}}
    polled = _grep(client, {"role": "user", "content": "Any news?"}, tools=[read])
    assert polled.json()["choices"][0]["message"]["tool_calls"]


LS = {"type": "function", "function": {"name": "ls", "description": "List the files.",
                                       "parameters": {"type": "object", "properties": {
                                           "a": {"type": "boolean"}}}}}
FIND = {"type": "function", "function": {"name": "find", "parameters": {
    "type": "object", "properties": {
        "name": {"type": "string", "x-strictcall-grounded": True,
                 "description": "The name of the file or directory to search for"}}}}}


def test_a_call_that_passes_over_a_specific_thing_the_user_did_not_say_is_a_question(
        client, script):
    """BFCL miss_param_7: "every project that has a specific word in its file name", and
    the model listed the folder (a call whose fields are all given). The answer asks which
    word, in the user's words; with grounding off, the call stands."""
    said = "List every project that has a specific word in its file name."
    script.reply = '[{"name":"ls","arguments":{"a":true}}]'
    def ask(**extra):
        return client.post("/v1/chat/completions", json={
            "model": "scripted", "tools": [LS, FIND], "tool_choice": "required",
            "messages": [{"role": "user", "content": said}], **extra})
    body = ask().json()
    message = body["choices"][0]["message"]
    assert not message.get("tool_calls") and body["choices"][0]["finish_reason"] == "stop"
    assert message["content"] == "Which specific word do you mean?"
    assert body["strictcall"]["needs_input"] == {
        "tool": "ls", "collected": {}, "language": "en",
        "missing": [{"field": "", "question": "Which specific word do you mean?"}]}
    (call,) = ask(strictcall={"grounding": False}).json()["choices"][0]["message"][
        "tool_calls"]
    assert call["function"]["name"] == "ls"


CD = {"type": "function", "function": {"name": "cd", "description": "Change directory.",
                                       "parameters": {"type": "object", "properties": {
                                           "folder": {"type": "string",
                                                      "x-strictcall-grounded": True}}}}}


def test_a_field_of_a_tool_selection_left_out_is_still_asked_for(client, script):
    """More tools than fit (21 here): selection shows five, `cd` not among them; "within a
    directory" with a listing that carries nothing the user said asks for `cd`'s folder."""
    fillers = [{"type": "function", "function": {
        "name": f"weather_{i}", "description": f"Weather forecast for region {i}.",
        "parameters": {"type": "object", "properties": {}}}} for i in range(19)]
    script.reply = '[{"name":"ls","arguments":{"a":true}}]'
    resp = client.post("/v1/chat/completions", json={
        "model": "scripted", "tools": [LS, CD, *fillers], "tool_choice": "required",
        "messages": [{"role": "user", "content": "Show all the files within a directory, "
                                                 "hidden ones too, and list them."}],
        "strictcall": {"select_k": 1}})
    body = resp.json()
    assert resp.status_code == 200, resp.text
    assert body["strictcall"]["tools"]["visible"] == ["ls"]
    assert not body["choices"][0]["message"].get("tool_calls")
    assert body["strictcall"]["needs_input"]["tool"] == "cd"
    assert [m["field"] for m in body["strictcall"]["needs_input"]["missing"]] == ["/folder"]


@pytest.mark.parametrize("unit", ["1 ", "5 руб "])
def test_messages_past_the_context_are_refused_before_grounding_reads_them(
        client, script, monkeypatch, unit):
    """A message of thousands of numbers cost seconds of grounding (and of slots across
    turns) before its 400; the messages' length is checked first."""
    from server.dialogue import evidence
    from tests.scripted import assert_problem

    read: list[int] = []
    real = evidence.evidence_of
    monkeypatch.setattr("server.dialogue.turn.evidence_of",
                        lambda *a, **k: read.append(1) or real(*a, **k))
    said = unit * (24_000 // len(unit))
    resp = client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": said}],
        "tools": [ORDER], "tool_choice": "required"})
    body = assert_problem(resp, 400, param="messages", says="the messages alone are at least")
    assert body["error"]["code"] == "context_length_exceeded"
    assert read == []  # never read as evidence
    # Within the context, the messages are read (the check lets them through).
    script.reply = '[{"name":"track_order","arguments":{"order_id":"ORD-10442","carrier":"dhl"}}]'
    resp = _ask(client, "Where is ORD-10442? It went with DHL.")
    assert resp.status_code == 200 and read, resp.text
