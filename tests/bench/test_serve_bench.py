"""`strictcall-bench serve` without a server: targets, the user's JSONL and its API
detection, what a body constrains and how answers are judged, the Responses and Messages
streams, timing over a scripted SSE transport, and the load settings. (The numbers, the
runner, the report and the import check: test_serve_bench_numbers.py.)"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import httpx
import pytest

from bench.serve.client import send
from bench.serve.schedule import Setting, SettingError, parse_settings
from bench.serve.streams import MessagesStream, ResponsesStream
from bench.serve.targets import TargetError, parse_target, parse_targets
from bench.serve.userfile import UserFileError, detect_api, load_user_file
from bench.serve.validity import Answer, BodyError, Expect, expect_of, judge

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
          "required": ["city"], "additionalProperties": False}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}


def test_a_target_is_a_name_a_url_and_options(monkeypatch):
    t = parse_target("vllm=http://gpu:8000/v1/,model=Qwen/Qwen3-8B,api-key-env=VKEY",
                     default_model="")
    assert (t.name, t.root, t.model, t.dialect) == ("vllm", "http://gpu:8000",
                                                    "Qwen/Qwen3-8B", "openai")
    monkeypatch.setenv("VKEY", "s3cret")
    assert t.headers()["Authorization"] == "Bearer s3cret"
    assert "s3cret" not in json.dumps(t.shown())  # the results name the variable only
    monkeypatch.delenv("VKEY")
    with pytest.raises(TargetError, match="'VKEY' is not set"):
        t.headers()
    assert parse_target("l=http://h:1,dialect=llamacpp", default_model="m").dialect == \
        "llamacpp"


@pytest.mark.parametrize(("spec", "says"), [
    ("http://h:1", "start with a name"), ("a=ftp://h", "not an http"),
    ("a=http://h:1,colour=red", "'colour=red' is not one of"),
    ("a=http://h:1,dialect=sglang", "dialect 'sglang'")])
def test_a_bad_target_says_what_to_write(spec, says):
    with pytest.raises(TargetError, match=says):
        parse_target(spec, default_model="m")


def test_targets_need_distinct_names():
    with pytest.raises(TargetError, match="must differ"):
        parse_targets(["a=http://h:1", "a=http://h:2"], default_model="m")


def _write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    return path


def test_a_user_file_detects_or_takes_each_lines_api(tmp_path):
    items = load_user_file(_write(
        tmp_path,
        {"messages": [{"role": "user", "content": "hi"}], "tools": [CHAT_TOOL]},
        {"input": "hi", "text": {"format": {"type": "json_schema", "schema": SCHEMA}}},
        {"system": "brief", "messages": [{"role": "user", "content": "hi"}],
         "tools": [{"name": "get_weather", "input_schema": SCHEMA}],
         "tool_choice": {"type": "tool", "name": "get_weather"}},
        "",
        {"api": "messages", "id": "plain", "headers": {"X-Tenant-Id": "acme"},
         "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9}}))
    assert [(i.api, i.id) for i in items] == [("chat", "1"), ("responses", "2"),
                                              ("messages", "3"), ("messages", "plain")]
    assert items[0].expect.call == "auto" and items[1].expect.text_schema == SCHEMA
    assert items[2].expect.forced == "get_weather" and items[2].expect.call == "required"
    assert items[3].headers == {"X-Tenant-Id": "acme"} and items[0].workload == "file:mine.jsonl"


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "mine.jsonl:1: not JSON"),
    ({"prompt": "hi"}, "needs \"messages\""),
    ({"system": "s", "response_format": {"type": "json_object"},
      "messages": [{"role": "user", "content": "x"}]}, "both Messages .*declare it"),
    ({"api": "completions", "body": {"prompt": "x"}}, "use one of chat, responses"),
    ({"api": "chat", "body": {"messages": []}, "model": "x"}, "belong inside"),
    ({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {
          "type": "wat"}}}]}, "tools\\['f'\\]: not a JSON Schema")])
def test_a_bad_line_is_refused_with_its_place_and_fix(tmp_path, line, says):
    with pytest.raises(UserFileError, match=says):
        load_user_file(_write(tmp_path, line))


def test_an_empty_file_and_repeated_ids_are_refused(tmp_path):
    with pytest.raises(UserFileError, match="no requests"):
        load_user_file(_write(tmp_path, ""))
    line = {"id": "x", "body": {"messages": [{"role": "user", "content": "x"}]}}
    with pytest.raises(UserFileError, match="same \"id\""):
        load_user_file(_write(tmp_path, line, line))


def test_detection_reads_chat_marks():
    body = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]}
    assert detect_api(body) == "chat"
    assert detect_api({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]}) == "messages"


def test_what_each_api_constrains():
    chat = expect_of("chat", {"tools": [CHAT_TOOL], "tool_choice": {
        "type": "function", "function": {"name": "get_weather"}}})
    assert (chat.call, chat.forced, dict(chat.functions)) == ("required", "get_weather",
                                                              {"get_weather": SCHEMA})
    assert expect_of("chat", {"tools": [CHAT_TOOL], "tool_choice": "none"}).call == "none"
    llama = expect_of("chat", {"response_format": {"type": "json_object", "schema": SCHEMA}})
    assert llama.text_schema == SCHEMA
    assert expect_of("chat", {"response_format": {"type": "json_object"}}).text_schema == {
        "type": "object"}
    responses = expect_of("responses", {"tools": [{"type": "function", "name": "f",
                                                   "parameters": SCHEMA}],
                                        "tool_choice": "required"})
    assert responses.call == "required" and "f" in responses.functions
    bfcl = expect_of("messages", {"tools": [{"name": "f", "input_schema": {
        "type": "dict", "properties": {"x": {"type": "float"}}}}]})
    assert bfcl.functions["f"]["type"] == "object"  # BFCL's dialect, read as JSON Schema
    with pytest.raises(BodyError, match="tools\\[0\\] has no name"):
        expect_of("chat", {"tools": [{"type": "function", "function": {}}]})


FORCED = Expect(functions={"get_weather": SCHEMA, "other": {}}, call="required",
                forced="get_weather")


@pytest.mark.parametrize(("expect", "answer", "outcome"), [
    (FORCED, Answer(tool_calls=(("get_weather", '{"city":"Oslo"}'),), finish_reason="tool_calls"),
     "valid"),
    (FORCED, Answer(tool_calls=(("other", "{}"),), finish_reason="tool_calls"), "invalid"),
    (FORCED, Answer(tool_calls=(("get_weather", '{"town":"Oslo"}'),)), "invalid"),
    (FORCED, Answer(content="Oslo", finish_reason="stop"), "invalid"),
    (FORCED, Answer(tool_calls=(("get_weather", '{"city":"Os'),), finish_reason="length"),
     "cut_off"),
    (Expect(functions={"get_weather": SCHEMA}, call="auto"), Answer(content="Hi"), "no_call"),
    (Expect(), Answer(content="Hi", finish_reason="stop"), "unchecked"),
    (Expect(), Answer(tool_calls=(("f", "{}"),)), "invalid"),  # no tools were offered
    (Expect(text_schema=SCHEMA), Answer(content='{"city":"Oslo"}'), "valid"),
    (Expect(text_schema=SCHEMA), Answer(content='Sure: {"city":"Oslo"}'), "invalid"),
    (Expect(text_schema=SCHEMA, text_lenient=True), Answer(content='Sure: {"city":"Oslo"}'),
     "valid"),
    (Expect(text_schema={"type": "null"}), Answer(content="null"), "valid"),
    (Expect(text_schema={}), Answer(content="not json"), "invalid"),
    (FORCED, Answer(error="HTTP 500: boom"), "error")])
def test_every_answer_is_judged_against_what_its_request_asked(expect, answer, outcome):
    assert judge(expect, answer) == outcome


def test_the_responses_stream_reads_text_calls_usage_and_its_end():
    s = ResponsesStream()
    for i, event in enumerate([
            {"type": "response.created", "response": {}},
            {"type": "response.output_item.added", "output_index": 0,
             "item": {"type": "function_call", "name": "get_weather", "arguments": ""}},
            {"type": "response.function_call_arguments.delta", "output_index": 0,
             "delta": '{"city":'},
            {"type": "response.function_call_arguments.delta", "output_index": 0,
             "delta": '"Oslo"}'},
            {"type": "response.completed", "response": {"status": "completed", "usage": {
                "input_tokens": 30, "output_tokens": 7}}}]):
        s.add(event, float(i))
    assert s.done and s.times == [2.0, 3.0]
    assert s.answer() == Answer(tool_calls=(("get_weather", '{"city":"Oslo"}'),),
                                finish_reason="tool_calls")
    assert s.usage == {"prompt_tokens": 30, "completion_tokens": 7}
    cut = ResponsesStream()
    cut.add({"type": "response.output_text.delta", "delta": "{"}, 0.0)
    cut.add({"type": "response.incomplete", "response": {
        "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}, 1.0)
    assert cut.answer().finish_reason == "length" and cut.answer().content == "{"


def test_the_messages_stream_reads_blocks_stop_reason_and_usage():
    s = MessagesStream()
    for i, event in enumerate([
            {"type": "message_start", "message": {"usage": {"input_tokens": 12}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "Let me see."}},
            {"type": "content_block_start", "index": 1,
             "content_block": {"type": "tool_use", "name": "get_weather", "input": {}}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'}},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
             "usage": {"output_tokens": 9}},
            {"type": "message_stop"}]):
        s.add(event, float(i))
    assert s.done and s.times == [2.0, 4.0]
    assert s.answer() == Answer(content="Let me see.", finish_reason="tool_calls",
                                tool_calls=(("get_weather", '{"city":"Oslo"}'),))
    assert s.usage == {"prompt_tokens": 12, "completion_tokens": 9}


def _sse(events: list[object], gap_s: float = 0.0):
    async def body():
        for event in events:
            if gap_s:
                await asyncio.sleep(gap_s)
            yield f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()
    return body()


def _chat_events(text: str = "Hello there", usage: bool = True) -> list[object]:
    chunks: list[object] = [{"choices": [{"delta": {"role": "assistant"}}]}]
    chunks += [{"choices": [{"delta": {"content": w}}]} for w in text.split()]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    if usage:
        chunks.append({"choices": [], "usage": {"prompt_tokens": 5,
                                                 "completion_tokens": len(text.split())}})
    return chunks + ["[DONE]"]


def _measure(handler, api="chat"):
    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as client:
            return await send(client, api, {"messages": []}, {})
    return asyncio.run(go())


def test_a_streamed_answer_is_timed_event_by_event():
    m = _measure(lambda req: httpx.Response(200, content=_sse(_chat_events("a b c d"),
                                                              gap_s=0.02)))
    assert m.status == 200 and m.answer.content == "abcd" and m.answer.error is None
    assert (m.prompt_tokens, m.completion_tokens, m.tokens_from) == (5, 4, "usage")
    assert len(m.itl_s) == 3 and all(g >= 0.015 for g in m.itl_s)
    assert m.ttft_s >= 0.03 and m.e2e_s >= m.ttft_s + sum(m.itl_s) - 1e-6


def test_without_usage_the_output_events_are_counted():
    m = _measure(lambda req: httpx.Response(200, content=_sse(_chat_events("x y", False))))
    assert (m.completion_tokens, m.tokens_from, m.prompt_tokens) == (2, "chunks", None)


@pytest.mark.parametrize(("response", "status", "says"), [
    (httpx.Response(404, json={"detail": "Not Found"}), 404, "HTTP 404"),
    (httpx.Response(200, content=_sse([{"choices": [{"delta": {"content": "x"}}]}])), 200,
     "ended before its last event"),
    (httpx.Response(200, content=_sse([{"error": {"message": "engine died"}}, "[DONE]"])),
     200, "stream error event")])
def test_failures_are_answers_with_their_status(response, status, says):
    m = _measure(lambda req: response)
    assert m.status == status and says in m.answer.error


def test_a_connection_that_fails_has_no_status():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)
    m = _measure(refuse)
    assert m.status is None and m.answer.error.startswith("ConnectError")


def test_the_api_picks_the_path():
    seen = []

    def handler(request):
        seen.append((request.url.path, request.headers.get("anthropic-version")))
        return httpx.Response(200, content=_sse([{"type": "message_stop"}]))
    _measure(handler, api="messages")
    assert seen == [("/v1/messages", "2023-06-01")]


def test_settings_rates_then_concurrencies():
    assert parse_settings("1,2.5,inf", "4") == [
        Setting("rate", 1), Setting("rate", 2.5), Setting("rate", math.inf),
        Setting("concurrency", 4)]
    assert [s.label for s in parse_settings("2", "1")] == ["rate 2/s", "concurrency 1"]
    for bad, says in (("0", "above 0"), ("fast", "not a number")):
        with pytest.raises(SettingError, match=says):
            parse_settings(bad, None)
    with pytest.raises(SettingError, match="whole number"):
        parse_settings(None, "1.5")
    with pytest.raises(SettingError, match="give --rate"):
        parse_settings(None, None)


@pytest.mark.parametrize(("argv", "says"), [
    (["--target", "vllm"], "start with a name and its URL"),
    (["--target", "a=http://h:1,model=m", "--workload", "bfcl-nothing"],
     "unknown workload 'bfcl-nothing'"),
    (["--target", "a=http://h:1,model=m", "--rate", "0"], "--rate '0': must be above 0"),
    (["--target", "a=http://h:1,model=m", "--slo", "p99=1"], "--slo 'p99=1'"),
    (["--target", "a=http://h:1,model=m", "--extra-body", "[1]"], "a JSON object"),
    (["--target", "a=http://h:1,model=m,api-key-env=STRICTCALL_NO_SUCH_KEY"],
     "'STRICTCALL_NO_SUCH_KEY' is not set"),
    (["--target", "a=http://h:1,model=m", "--workload", "bfcl-json", "--bfcl-dir", "/nowhere"],
     "is missing; pass --bfcl-dir")])
def test_the_command_line_refuses_what_it_cannot_run(argv, says, capsys):
    from bench.serve.cli import main

    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2 and says in capsys.readouterr().err
