"""The HTTP API over a ScriptedEngine: request validation, error envelopes, response shapes."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.settings import Settings
from tests.scripted import OTHER, TOOL, USER, Replies, assert_problem
from tests.server.api.held_compile import HeldCompile


def chat(client, **body):
    body.setdefault("model", "scripted")
    body.setdefault("messages", USER)
    return client.post("/v1/chat/completions", json=body)


def test_health_and_models(client):
    assert client.get("/health").json()["status"] == "ok"
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["scripted"]


def test_text_completion_shape(client, replies):
    replies.text = "Sunny."
    body = chat(client).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Sunny.",
                                             "tool_calls": None, "reasoning_content": None,
                                             "reasoning": None}  # as vLLM's server sends
    assert body["choices"][0]["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_required_tool_call(client, replies):
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris","days":2}}]'
    resp = chat(client, tools=[TOOL, OTHER], tool_choice="required")
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "days": 2}
    assert resp.headers["X-StrictCall-Grammar-Cache"] == "miss"
    again = chat(client, tools=[TOOL, OTHER], tool_choice="required")
    assert again.headers["X-StrictCall-Grammar-Cache"] == "hit"


def test_tools_are_described_in_the_prompt(client, replies, model_dir):
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    engine = client.app.state.pipeline.engine
    chat(client, tools=[TOOL], tool_choice="required")
    prompt = engine.prompts[-1]
    assert '"name": "get_weather"' in prompt and '"type": "object"' in prompt
    assert prompt.endswith("<|im_start|>assistant\n<tool_call>")


@pytest.mark.parametrize(("style", "present", "absent"), [
    ("compact", ["- get_weather: Weather for a city", "arguments: {city: string, days?: integer}"],
     ['"type": "object"']),
    ("none", ["- get_weather: Weather for a city"], ["arguments:", '"type"', "days"]),
])
def test_tool_prompt_writes_tools_shorter_for_a_required_call(client, replies, style, present,
                                                              absent):
    """The default, auto, is none for a call forced to a named tool and full for "required"
    (measured: README, "What goes into the prompt for a tool call")."""
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    engine = client.app.state.pipeline.engine
    full = chat(client, tools=[TOOL], tool_choice="required", strictcall={"tool_prompt": "full"})
    long_prompt = engine.prompts[-1]
    short = chat(client, tools=[TOOL], tool_choice="required",
                 strictcall={"tool_prompt": style})
    prompt = engine.prompts[-1]
    assert full.status_code == short.status_code == 200
    assert all(text in prompt for text in present), prompt
    assert not any(text in prompt for text in absent), prompt
    assert prompt.endswith("<|im_start|>assistant\n<tool_call>")
    assert short.json()["usage"]["prompt_tokens"] < full.json()["usage"]["prompt_tokens"]
    assert len(prompt) < len(long_prompt)
    assert_problem(chat(client, tools=[TOOL], tool_choice="required",
                        strictcall={"tool_prompt": "tiny"}), 400)
    if style == "none":
        named = {"type": "function", "function": {"name": "get_weather"}}
        chat(client, tools=[TOOL, OTHER], tool_choice=named)  # the server's default: auto
        assert engine.prompts[-1] == prompt
        chat(client, tools=[TOOL], tool_choice="required")
        assert engine.prompts[-1] == long_prompt


def test_parallel_calls_allowed_unless_disabled(client, replies):
    two = ('[{"name":"get_weather","arguments":{"city":"A"}},'
           '{"name":"get_weather","arguments":{"city":"B"}}]')
    replies.text = two
    calls = chat(client, tools=[TOOL], tool_choice="required").json()["choices"][0]
    assert len(calls["message"]["tool_calls"]) == 2
    assert_problem(chat(client, tools=[TOOL], tool_choice="required",
                        parallel_tool_calls=False), 503, says="breaks the grammar")


def test_named_tool_choice_restricts_to_that_tool(client, replies):
    replies.text = '[{"name":"noop","arguments":{}}]'
    choice = {"type": "function", "function": {"name": "noop"}}
    body = chat(client, tools=[TOOL, OTHER], tool_choice=choice).json()
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "noop"


def test_response_format_json_schema(client, replies):
    replies.text = '{"answer":42}'
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"answer": {"type": "integer"}},
        "required": ["answer"]}}}
    body = chat(client, response_format=fmt).json()
    assert json.loads(body["choices"][0]["message"]["content"]) == {"answer": 42}
    assert body["choices"][0]["finish_reason"] == "stop"


def test_response_format_json_object(client, replies):
    replies.text = '{"free":[1,"two"]}'
    body = chat(client, response_format={"type": "json_object"}).json()
    assert json.loads(body["choices"][0]["message"]["content"]) == {"free": [1, "two"]}


def test_length_cut_off_is_never_a_tool_call(client, replies):
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris is lovely"}}]'
    body = chat(client, tools=[TOOL], tool_choice="required", max_tokens=5).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["tool_calls"] is None
    assert body["usage"]["completion_tokens"] == 5


def test_length_cut_off_json_is_marked_length(client, replies):
    replies.text = '{"answer":12345678}'
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"answer": {"type": "integer"}}}}}
    choice = chat(client, response_format=fmt, max_tokens=3).json()["choices"][0]
    assert choice["finish_reason"] == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(choice["message"]["content"])


def test_assistant_tool_calls_and_tool_results_round_trip(client, replies):
    replies.text = "It is sunny."
    messages = USER + [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    ]
    body = chat(client, messages=messages, tools=[TOOL], tool_choice="none").json()
    assert body["choices"][0]["message"]["content"] == "It is sunny."
    prompt = client.app.state.pipeline.engine.prompts[-1]
    assert '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]' in prompt
    assert "sunny, 21C" in prompt


# -- bad input: always a 4xx problem that names the field and says what to do ---------------

@pytest.mark.parametrize(("body", "param", "says"), [
    ({"messages": []}, "messages", "at least 1"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, None, "messages"),
    ({"temperature": 3}, "temperature", "less than or equal"),
    ({"max_tokens": 0}, "max_tokens", "greater than or equal"),
    ({"frobnicate": True}, "frobnicate", "unknown field"),
    ({"tool_choice": "required"}, "tool_choice", "no tools"),
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name", "unknown tool 'nope'"),
    ({"logprobs": True}, "logprobs", "not supported"),
    ({"frequency_penalty": 0.5}, "frequency_penalty", "not supported"),
    ({"logit_bias": {"42": 5}}, "logit_bias", "not supported"),
    ({"functions": [{"name": "f"}]}, "functions", "use `tools`"),
    ({"modalities": ["text", "audio"]}, "modalities", "not supported"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "stream=true"),
    ({"n": 2}, "n", "n > 1"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({"tools": [TOOL, TOOL], "tool_choice": "required"}, "tools[1].function.name", "twice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "strng"}}}}}], "tool_choice": "required"},
     "tools[0].function.parameters", "unknown type 'strng'"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "minLength": -1}}}}}],
      "tool_choice": "required"}, "tools[0].function.parameters", "not a valid JSON Schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "nullable": True}}}}}],
      "tool_choice": "required"}, "tools[0].function.parameters", "nullable"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"p": {"type": "string", "format": "phone"}}}}}},
     "response_format.json_schema.schema", "'format'"),
    ({"max_tokens": 10_000_000}, "max_tokens", "context"),
])
def test_bad_requests_get_400(client, body, param, says):
    assert_problem(chat(client, **body), 400, param=param, says=says)


@pytest.mark.parametrize("body", [
    {"user": "u1", "metadata": {"k": "v"}, "store": False, "service_tier": "auto"},
    {"logprobs": False, "frequency_penalty": 0, "presence_penalty": 0.0, "n": 1,
     "modalities": ["text"]},
])
def test_harmless_fields_are_accepted(client, body):
    assert chat(client, **body).status_code == 200


def test_body_that_is_not_json(client):
    resp = client.post("/v1/chat/completions", content=b"{nope",
                       headers={"content-type": "application/json"})
    assert_problem(resp, 400, says="not valid JSON")


def test_unknown_model_is_404(client):
    assert_problem(chat(client, model="gpt-4o"), 404, param="model", says="/v1/models")


def test_unknown_route_is_problem_404(client):
    assert_problem(client.get("/v1/nothing"), 404, says="no route")


def test_prompt_longer_than_context_is_400(client):
    long = [{"role": "user", "content": "word " * 9000}]
    assert_problem(chat(client, messages=long), 400, param="messages", says="context")


def test_retryable_errors_say_when_to_retry():
    from server.errors import EngineFailure, InvalidRequest

    body = EngineFailure("engine restarting").problem("/v1/chat/completions")
    assert body["retryable"] is True and body["retry_after"] == 1 and body["status"] == 503
    assert "retry_after" not in InvalidRequest("bad").problem("/x")


def test_engine_failure_is_a_retryable_503(client, replies):
    def broken(prompt):
        raise RuntimeError("worker died")

    client.app.state.pipeline.engine.script = broken
    resp = chat(client)
    body = assert_problem(resp, 503, says="engine failed")
    assert body["retryable"] is True and resp.headers["Retry-After"] == "1"
    assert "worker died" not in resp.text  # the exception's text is for the log only


class FailingOnce(ScriptedEngine):
    """A scripted engine whose next `generate` raises `error` (once), as a decode step that
    fails mid-batch would; every later call answers normally."""

    def __init__(self, model_dir, script, error: Exception) -> None:
        super().__init__(model_dir, script)
        self.error: Exception | None = error

    async def generate(self, request):
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return await super().generate(request)


@pytest.fixture()
def failing(model_dir, replies):
    engine = FailingOnce(model_dir, replies, RuntimeError("/secret/path/model.bin exploded"))
    app = create_app(Settings(served_model_name="scripted"), lambda s: engine)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_a_failed_engine_step_is_a_503_and_the_engine_keeps_serving(failing, replies):
    replies.text = "Sunny."
    resp = chat(failing)
    body = assert_problem(resp, 503, says="retry")
    assert body["retryable"] is True and resp.headers["Retry-After"] == "1"
    after = chat(failing)
    assert after.status_code == 200, after.text
    assert after.json()["choices"][0]["message"]["content"] == "Sunny."
    assert failing.get("/health").json()["status"] == "ok"


@pytest.mark.parametrize("stream", [False, True])
def test_engine_error_text_never_reaches_the_client(failing, stream):
    resp = chat(failing, stream=stream)
    assert "/secret" not in resp.text and "exploded" not in resp.text, resp.text
    assert "Traceback" not in resp.text and "model.bin" not in resp.text
    assert "engine failed" in resp.text


def test_unexpected_exceptions_say_internal_error_only(model_dir):
    engine = ScriptedEngine(model_dir, Replies())

    def render_chat(messages):
        raise RuntimeError("/secret/path/model.bin exploded")

    engine.render_chat = render_chat  # fails outside the engine call: no EngineFailure
    app = create_app(Settings(served_model_name="scripted"), lambda s: engine)
    with TestClient(app, raise_server_exceptions=False) as c:
        resp = chat(c)
    body = assert_problem(resp, 500, says="internal error")
    assert "/secret" not in resp.text and "exploded" not in resp.text
    assert body["detail"] == "internal error; the server log has the details"


# max_tools: over it, the server selects the most relevant tools (or, with
# --tool-selection off, answers this 400): tests/server/execution/test_policy_api.py.
@pytest.mark.parametrize(("body", "param", "limit"), [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(25)}}}}],
      "tool_choice": "required"}, "tools[0].function.parameters", "max_optional_params"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {f"p{i}": {"type": ["string", "null"]}
                                         for i in range(17)},
        "required": [f"p{i}" for i in range(17)]}}}], "tool_choice": "required"},
     "tools[0].function.parameters", "max_union_params"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "enum": list(range(1001))}}}}, "response_format.json_schema.schema", "max_enum_values"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": (
        lambda f: f(f, 12))(lambda f, n: {"type": "array", "items": f(f, n - 1)} if n else {})}}},
     "response_format.json_schema.schema", "max_depth"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "description": "x" * 100_001}}}}, "response_format.json_schema.schema",
     "max_schema_bytes"),
])
def test_each_budget_is_a_400_with_measured_and_limit(client, body, param, limit):
    problem = assert_problem(chat(client, **body), 400, param=param, says=limit)
    assert problem["error"]["code"] == "budget_exceeded"
    assert problem["limit"] == limit and problem["measured"] > problem["allowed"]


def test_slow_compile_times_out_while_other_requests_are_served(model_dir, replies):
    """A schema whose compile does not end is a 400 at the timeout; meanwhile other requests
    are answered, and /health stays up. The compile is held until the test releases it:
    everything here is shown to happen while it is still running."""
    import threading

    held: dict = {}

    def factory(settings):
        engine = ScriptedEngine(model_dir, replies)
        held["compile"] = engine.grammar_backend.compile = HeldCompile(
            engine.grammar_backend.compile)
        return engine

    app = create_app(Settings(served_model_name="scripted", compile_timeout_s=0.5), factory)
    slow_fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": {
        "type": "object", "description": "slowpoke"}}}
    with TestClient(app) as c:
        compile_, out = held["compile"], {}
        thread = threading.Thread(target=lambda: out.update(
            slow=chat(c, response_format=slow_fmt)), daemon=True)
        thread.start()
        assert compile_.entered.wait(timeout=60), "the slow compile never started"
        replies.text = "fast"
        fast = chat(c)
        assert c.get("/health").status_code == 200
        thread.join(timeout=60)
        # The fast request and the timeout both came while the compile was still held.
        assert not compile_.left.is_set() and not thread.is_alive()
        compile_.release.set()
    assert fast.status_code == 200
    problem = assert_problem(out["slow"], 400, says="longer than 0.5 s")
    assert problem["error"]["code"] == "grammar_timeout"


def test_metrics_in_prometheus_text(client, replies):
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    chat(client, tools=[TOOL], tool_choice="required")
    chat(client, tools=[TOOL], tool_choice="required")
    chat(client, tool_choice="required")  # a 400
    chat(client, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "enum": list(range(1001))}}})  # over budget
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert "# TYPE strictcall_grammar_compile_seconds histogram" in text
    assert 'strictcall_grammar_compile_seconds_bucket{le="+Inf"} 1' in text
    assert "strictcall_grammar_cache_hits_total 1" in text
    assert "strictcall_grammar_cache_misses_total 1" in text
    assert 'strictcall_requests_rejected_total{reason="budget_exceeded"} 1' in text
    assert 'strictcall_requests_rejected_total{reason="invalid-request"} 1' in text


def test_stop_string_is_named_in_stop_reason(client, replies):
    replies.text = "one two STOP three"
    choice = chat(client, stop=["END", "STOP"]).json()["choices"][0]
    assert choice["message"]["content"] == "one two "
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", "STOP")
    replies.text = "one two"
    assert chat(client, stop=["STOP"]).json()["choices"][0]["stop_reason"] is None


def test_an_unusable_grammar_cache_dir_fails_neither_startup_nor_requests(model_dir, tmp_path,
                                                                          replies):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    settings = Settings(served_model_name="scripted", cache_dir=blocker, grammar_disk_cache=True)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, replies))
    replies.text = '[{"name":"get_weather","arguments":{"city":"Paris"}}]'
    with TestClient(app) as c:  # warm-up compiles the contracts' grammars without a store
        assert c.get("/health").json()["status"] == "ok"
        body = chat(c, tools=[TOOL], tool_choice="required").json()
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
