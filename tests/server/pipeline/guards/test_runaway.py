"""Runaway guards through the API over a ScriptedEngine: a call list that repeats a call is
closed before the duplicate; a value that loops stops the decode with finish_reason
"length" and a note; each guard can be turned off per request."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.formats.smollm2 import ListReader
from server.pipeline.guards.runaway import RunawayGuard, repeated_unit
from server.pipeline.request_options import GuardOptions
from server.settings import Settings
from tests.server.pipeline.test_stream_auto import assemble, events

TOOLS = [{"type": "function", "function": {
    "name": "fetch", "description": "Fetch a web page.",
    "parameters": {"type": "object", "properties": {"url": {"type": "string"}},
                   "required": ["url"]}}}]
CALL = '{"name":"fetch","arguments":{"url":"%s"}}'
LOOP = "https://x.org/s?q=1" + "&query_params=" * 30


@pytest.fixture()
def reply():
    return {"text": ""}


@pytest.fixture()
def client(model_dir, reply):
    settings = Settings(served_model_name="scripted")
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda p: reply["text"]))
    with TestClient(app) as c:
        yield c


def chat(client, guards=None, **extra):
    body = {"model": "scripted", "messages": [{"role": "user", "content": "get it"}],
            "tools": TOOLS, "tool_choice": "required", "max_tokens": 400, **extra}
    if guards is not None:
        body["strictcall"] = guards
    return client.post("/v1/chat/completions", json=body)


def test_a_repeated_call_closes_the_list(client, reply):
    a, b = CALL % "https://a.org", CALL % "https://b.org"
    reply["text"] = f"[{a},{b},{a},{b},{a}]"
    resp = chat(client)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    calls = body["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["url"] for c in calls] == [
        "https://a.org", "https://b.org"]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["strictcall"]["runaway"] == {"duplicate_calls_dropped": 1, "calls_kept": 2}
    # Stopped at the duplicate: the tokens after it were never decoded.
    written = len(client.app.state.pipeline.engine.encode(reply["text"]))
    assert body["usage"]["completion_tokens"] < written


# A tool whose card the user gives (grounded) and whose reason the model chooses.
DISPUTE = [{"type": "function", "function": {"name": "dispute", "parameters": {
    "type": "object", "required": ["card", "reason"], "properties": {
        "card": {"type": "string", "pattern": "^[0-9]{4}$", "x-strictcall-grounded": True},
        "reason": {"type": "string", "enum": ["duplicate", "fraud", "not_received"]}}}}}]
DISPUTE_CALL = '{"name":"dispute","arguments":{"card":"%s","reason":"%s"}}'


def test_the_same_user_values_again_are_a_repeat_whatever_else_changes(client, reply):
    """Qwen2.5-0.5B, allowed several calls, lists one dispute under every reason until
    max_tokens: the second call with the card the user gave is the first one again."""
    calls = [DISPUTE_CALL % ("4417", r) for r in ("duplicate", "fraud", "not_received")]
    reply["text"] = "[" + ",".join(calls) + "]"
    resp = chat(client, tools=DISPUTE, messages=[
        {"role": "user", "content": "card 4417 was charged twice"}])
    body = resp.json()
    assert [json.loads(c["function"]["arguments"]) for c in
            body["choices"][0]["message"]["tool_calls"]] == [
        {"card": "4417", "reason": "duplicate"}]
    assert body["strictcall"]["runaway"] == {"duplicate_calls_dropped": 1, "calls_kept": 1}
    # Two cards the user named are two requests: both kept.
    reply["text"] = f"[{DISPUTE_CALL % ('4417', 'fraud')},{DISPUTE_CALL % ('5531', 'fraud')}]"
    resp = chat(client, tools=DISPUTE, messages=[
        {"role": "user", "content": "cards 4417 and 5531 were both charged, fraud"}])
    assert len(resp.json()["choices"][0]["message"]["tool_calls"]) == 2


def test_dedupe_off_per_request_keeps_every_call(client, reply):
    a = CALL % "https://a.org"
    reply["text"] = f"[{a},{a}]"
    resp = chat(client, {"dedupe_calls": False})
    assert len(resp.json()["choices"][0]["message"]["tool_calls"]) == 2
    assert "runaway" not in (resp.json()["strictcall"] or {})


def test_a_stream_never_shows_the_dropped_call(client, reply):
    a, b = CALL % "https://a.org", CALL % "https://b.org"
    reply["text"] = f"[{a},{b},{a}]"
    out = assemble(events(chat(client, stream=True)))
    assert [json.loads(c["arguments"])["url"] for c in out["calls"]] == [
        "https://a.org", "https://b.org"]
    assert out["finish"] == "tool_calls"


def test_a_looping_value_stops_with_length_and_a_note(client, reply):
    reply["text"] = f"[{CALL % LOOP}]"
    resp = chat(client)
    body = resp.json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and not choice["message"]["tool_calls"]
    # The half-written call is the format's syntax, never content; the note says what looped.
    assert not choice["message"]["content"]
    cut = body["strictcall"]["runaway"]["loop_cut"]
    assert "query_params" in cut["unit"] and cut["repeats"] >= 4
    assert body["usage"]["completion_tokens"] < 120


def test_loop_guard_off_lets_the_value_finish(client, reply):
    reply["text"] = f"[{CALL % LOOP}]"
    resp = chat(client, {"loop_guard": "off"})
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["url"] == LOOP


def test_json_answers_are_guarded_too(client, reply):
    reply["text"] = '{"n":"' + "ab" * 40 + '"}'
    resp = client.post("/v1/chat/completions", json={
        "model": "scripted", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {
            "type": "object", "properties": {"n": {"type": "string"}}}}}})
    assert resp.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(("ids", "found"), [
    ([1, 2, 3] * 2, None),
    ([9] + [5] * 23, None),            # 23 < 24 tokens
    ([9] + [5] * 24, (1, 24)),
    ([9] + [7, 8] * 12, (2, 12)),
    ([7, 8, 9] * 3, None),             # 3 repeats < 4
    ([1] + [4, 5, 6, 7, 8, 9] * 4, (6, 4)),
])
def test_repeated_unit(ids, found):
    assert repeated_unit(ids) == found


def test_a_loop_is_found_in_the_last_window_of_tokens_as_in_the_whole_output():
    # Steering reads only the tail `repeated_unit` needs, at every step: the period found
    # there is the one found in the whole output (the repeats may be fewer past the need).
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from server.pipeline.guards.runaway import _LOOP_WINDOW

    units = st.lists(st.integers(0, 3), min_size=1, max_size=17)

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.integers(0, 3), max_size=120), units, st.integers(0, 12),
           st.lists(st.integers(0, 3), max_size=3))
    def check(head, unit, times, after):
        ids = head + unit * times + after
        whole, tail = repeated_unit(ids), repeated_unit(ids[-_LOOP_WINDOW:])
        assert (whole is None) == (tail is None)
        assert whole is None or whole[0] == tail[0]

    check()


def test_steering_avoids_the_token_that_completes_a_loop(tokenizer):
    from server.pipeline.guards.runaway import LOOP_TOKENS, MIN_REPEATS

    prefix = tokenizer.encode('{"url":"x', add_special_tokens=False)
    unit = tokenizer.encode("&query_params=", add_special_tokens=False)
    need = max(MIN_REPEATS, -(-LOOP_TOKENS // len(unit)))
    ids = prefix + unit * (need - 1) + unit[:-1]  # one token short of a loop
    guard = RunawayGuard(ListReader("json"), tokenizer.decode,
                         options=GuardOptions(loop_guard="steer"))
    for token in ids:
        guard.see(token)
    assert guard.trip is None
    assert unit[-1] in guard.steer(ids)  # writing it would complete the loop
    # Nothing is avoided in a value that does not repeat.
    fresh = RunawayGuard(ListReader("json"), tokenizer.decode,
                         options=GuardOptions(loop_guard="steer"))
    plain = tokenizer.encode('{"url":"https://example.org/a', add_special_tokens=False)
    for token in plain:
        fresh.see(token)
    assert fresh.steer(plain) == set()


def test_free_text_is_never_cut(tokenizer):
    guard = RunawayGuard(ListReader("text"), tokenizer.decode, options=GuardOptions())
    for token in tokenizer.encode("ha " * 60):
        assert guard.see(token)
    assert guard.trip is None


def test_the_same_string_item_again_and_again_is_a_loop_but_numbers_are_not(tokenizer):
    """Seen on BFCL parallel_9 and parallel_27 (`"Tenet","Tenet",...` to max_tokens): the
    same string item back to back is a loop; a vector of zeros is a real value."""
    def guarded(text):
        guard = RunawayGuard(ListReader("json"), tokenizer.decode, options=GuardOptions())
        for token in tokenizer.encode(text, add_special_tokens=False):
            guard.see(token)
        return guard.trip

    trip = guarded('{"movie":["No Time To Die",' + '"Tenet",' * 12)
    assert trip is not None and trip.note["loop_cut"]["kind"] == "items"
    assert not trip.text.endswith("]")  # never closed for the model
    assert guarded('{"v":[' + "0," * 30) is None
    assert guarded('{"movie":["Tenet","No Time To Die","Dune","Heat"') is None


AREA = [{"type": "function", "function": {"name": "area", "parameters": {
    "type": "object", "required": ["base", "height"], "properties": {
        "base": {"type": "integer"}, "height": {"type": "integer"},
        "unit": {"type": "string"}}}}}]


def test_without_grounded_fields_the_required_ones_say_which_request_a_call_is(client, reply):
    """Qwen2.5-0.5B, asked one triangle's area, wrote it in units, meters, feet, yards...
    to max_tokens: the same required values again is the same request, streamed or not."""
    calls = ['{"name":"area","arguments":{"base":10,"height":5,"unit":"' + u + '"}}'
             for u in ("units", "meters", "feet")]
    reply["text"] = "[" + ",".join(calls) + "]"
    body = chat(client, tools=AREA).json()
    (call,) = body["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["unit"] == "units"
    out = assemble(events(chat(client, tools=AREA, stream=True)))
    assert [json.loads(c["arguments"])["unit"] for c in out["calls"]] == ["units"]
    reply["text"] = ('[{"name":"area","arguments":{"base":10,"height":5}},'
                     '{"name":"area","arguments":{"base":7,"height":5}}]')
    assert len(chat(client, tools=AREA).json()["choices"][0]["message"]["tool_calls"]) == 2


def test_text_after_the_calls_ends_the_answer_after_them(tokenizer):
    """Seen on Qwen2.5-Coder-0.5B (BFCL multi-turn missing-parameter turns): after a
    complete `ls` call, `<tool_output>` blocks to max_tokens, and the call lost with the
    cut-off. The answer ends after the calls; a second call after the first still comes."""
    from server.formats.syntax import family_syntax
    from server.formats.tag_reader import TagReader

    schema = {"type": "object", "properties": {"a": {"type": "boolean"}}}
    reader = TagReader("auto", family_syntax("qwen_3", [("ls", schema)]))
    call = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'

    def fed(text):
        guard = RunawayGuard(reader, tokenizer.decode, options=GuardOptions())
        for token in tokenizer.encode(text):
            guard.see(token)
            if guard.trip is not None:
                break
        return guard
    babble = call + '\n<tool_output>\n{\n  "current_working_directory": "project"\n}\n' * 3
    guard = fed(babble)
    assert guard.trip is not None and guard.trip.kind == "after_calls"
    assert json.loads(reader.read(guard.trip.text, complete=True).calls) == [
        {"name": "ls", "arguments": {"a": True}}]
    assert guard.trip.note["calls_kept"] == 1
    other = call.replace("true", "false")
    assert fed(call + "\n" + other).trip is None  # two calls: no text between them
    assert fed("I will list them, hidden files too, as you asked.\n" + call).trip is None
