"""Limits and backpressure over a ScriptedEngine: body size (413), max_tokens cap (400), the
bounded admission (429 / 503), the time limit (504), shutting down (503), lone surrogates
(400 on every API) and the request id on every response.

A decode that takes long is a request held at the engine (server/engines/scripted.py
`Hold`) until the test releases it: each limit is shown to fire while a request is known to
be in the engine, never by a sleep or a stopwatch."""

from __future__ import annotations

import json
import threading
import time

import pytest
from fastapi.testclient import TestClient

from server.api.admission import Admission
from server.api.app import create_app
from server.engines.scripted import Hold, ScriptedEngine
from server.errors import Overloaded, Unavailable
from server.settings import Settings
from tests.scripted import assert_error, assert_problem

# A held request is let go after this long whatever happens: a server that waits instead of
# answering then fails its test (answered 200 after the release) instead of hanging it. A
# bound, not a claim about speed: each test asserts its answer came while still held.
HOLD_BOUND_S = 60
USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "scripted", "messages": USER}


@pytest.fixture()
def make_client(model_dir):
    """A client over a ScriptedEngine; with `held=True` its requests wait at `client.hold`
    until the test releases them, or HOLD_BOUND_S passes (all released at the end)."""
    clients = []

    def make(*, held: bool = False, **settings) -> TestClient:
        hold = Hold()
        if held:
            bound = threading.Timer(HOLD_BOUND_S, hold.release)
            bound.daemon = True
            bound.start()
        else:
            hold.release()
        engine = ScriptedEngine(model_dir, lambda prompt: "Hello.", hold=hold)
        app = create_app(Settings(served_model_name="scripted", **settings), lambda s: engine)
        client = TestClient(app)
        clients.append(client.__enter__())
        client.engine, client.hold = engine, hold
        return client

    yield make
    for client in clients:
        client.hold.release()
        client.__exit__(None, None, None)


def in_background(call) -> tuple[threading.Thread, dict]:
    """Run `call()` in a thread; its result lands in the dict under "result"."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=call()), daemon=True)
    thread.start()
    return thread, out


def test_body_over_the_limit_is_413(make_client):
    client = make_client(max_body_bytes=2048)
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 4096}]}
    assert_problem(client.post("/v1/chat/completions", json=big), 413, says="2048")

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"model": "scripted", "messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"x" * 512
        yield b'"}]}'
    assert_problem(client.post("/v1/chat/completions", content=chunks(),
                               headers={"content-type": "application/json"}), 413)
    assert_error(client.post("/v1/messages", json={**big, "max_tokens": 8}), 413,
                 kind="request_too_large")
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200


def test_max_tokens_above_the_cap_is_400_naming_it(make_client):
    client = make_client(max_tokens_cap=64)
    assert_problem(client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 65}), 400,
                   param="max_tokens", says="cap of 64")
    assert_error(client.post("/v1/messages", json={**CHAT, "max_tokens": 1000}), 400,
                 says="cap of 64")
    assert client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 64}).status_code \
        == 200


def test_admission_is_bounded_and_says_when_the_engine_is_down(model_dir):
    engine = ScriptedEngine(model_dir, lambda prompt: "")
    admission = Admission(2, engine=engine)
    admission.enter()
    admission.enter()
    with pytest.raises(Overloaded):
        admission.enter()
    admission.leave()
    admission.enter()
    engine.alive = lambda: False
    with pytest.raises(Unavailable):
        admission.enter()


def test_a_full_server_answers_429_with_retry_after_at_once(make_client):
    client = make_client(held=True, max_batch=1, max_queued=1)
    admission = client.app.state.admission
    assert admission.capacity == 2
    # Two requests take both places: they wait in the engine until released.
    held = [in_background(lambda: client.post("/v1/chat/completions", json=CHAT))
            for _ in range(2)]
    client.hold.wait_for("arrived", 2)
    body = assert_problem(client.post("/v1/chat/completions", json=CHAT), 429)
    assert body["retryable"] is True and body["error"]["type"] == "rate_limit_error"
    resp = client.post("/v1/messages", json={**CHAT, "max_tokens": 8})
    assert_error(resp, 429, kind="rate_limit_error")
    assert int(resp.headers["retry-after"]) >= 1
    # Shed, not queued: both answers came while the two places were still taken.
    assert not client.hold.released and client.hold.arrived == 2 and admission.inside == 2
    client.hold.release()
    for thread, out in held:
        thread.join(timeout=60)
        assert out["result"].status_code == 200
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert admission.inside == 0  # every place taken was given back
    client.engine.alive = lambda: False
    down = client.post("/v1/responses", json={"model": "scripted", "input": "hi"})
    assert_problem(down, 503, says="engine is not running")
    assert down.headers["retry-after"]


def test_request_over_its_time_limit_is_cancelled_with_504(make_client):
    client = make_client(held=True, request_timeout_s=0.5)
    # Held in the engine and never released: only the time limit can answer.
    body = assert_problem(client.post("/v1/chat/completions", json=CHAT), 504,
                          says="0.5 s time limit")
    assert body["retryable"] is True
    stream = client.post("/v1/chat/completions", json={**CHAT, "stream": True})
    assert stream.status_code == 200 and "request-timeout" in stream.text
    client.hold.wait_for("cancelled", 2)  # both decodes were stopped, not left running
    assert not client.hold.released and client.engine.stats()["running"] == 0
    assert client.app.state.admission.inside == 0


def test_shutting_down_refuses_new_requests_with_503(make_client):
    client = make_client()
    client.app.state.shutdown_deadline = time.monotonic() + 30  # what SIGTERM sets
    refused = client.post("/v1/chat/completions", json=CHAT)
    assert_problem(refused, 503, says="shutting down")
    assert refused.headers["retry-after"] and refused.json()["retryable"] is True
    assert client.get("/health").status_code == 503  # load balancers: send no more here


def test_a_running_request_is_answered_503_before_the_grace_ends(make_client):
    client = make_client(held=True)
    thread, out = in_background(lambda: client.post("/v1/chat/completions", json=CHAT))
    client.hold.wait_for("arrived", 1)  # the gate let it in: it is in the engine
    client.app.state.shutdown_deadline = time.monotonic() + 1.5  # what SIGTERM sets
    thread.join(timeout=60)
    assert_problem(out["result"], 503, says="shutting down and could not finish")
    # Answered while the engine still held it (never released): the decode was cancelled.
    client.hold.wait_for("cancelled", 1)
    assert not client.hold.released


@pytest.mark.parametrize(("route", "body", "param"), [
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "@"}]},
     "messages[0].content"),
    ("/v1/messages", {**CHAT, "max_tokens": 8, "messages": [{"role": "user", "content": "@"}]},
     "messages[0].content"),
    ("/v1/responses", {"model": "scripted", "input": "@"}, "input"),
])
def test_lone_surrogate_is_400_naming_where_on_every_api(make_client, route, body, param):
    client = make_client()
    raw = json.dumps(body).replace("@", "a\\ud800b").encode()
    resp = client.post(route, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    error = resp.json()
    detail = error["error"]["message"] if route == "/v1/messages" else error["detail"]
    assert param in detail and "surrogate" in detail
    # a surrogate pair is one character: accepted
    pair = json.dumps(body).replace("@", "\\ud83d\\ude00").encode()
    assert client.post(route, content=pair,
                       headers={"content-type": "application/json"}).status_code == 200


def test_request_id_is_echoed_or_generated_on_every_response(make_client):
    client = make_client(max_tokens_cap=8)
    sent = client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "req-42"})
    assert sent.headers["x-request-id"] == "req-42"
    made = client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 99})
    assert made.status_code == 400 and len(made.headers["x-request-id"]) == 32
    odd = client.get("/health", headers={"X-Request-Id": "has spaces\tand tabs"})
    assert odd.headers["x-request-id"] != "has spaces\tand tabs"
    assert client.get("/no/such/route").headers["x-request-id"]


def test_a_surrogate_deep_in_a_large_body_is_still_named(make_client):
    """A body with more containers than the quick byte scan clears (a tool schema with 200
    properties) is parsed and walked: plain, it passes the fast walk; with one lone
    surrogate in its last description, the slow walk names the place."""
    client = make_client()
    properties = {f"p{i}": {"type": "string", "description": "@" if i == 199 else "ok"}
                  for i in range(200)}
    body = {**CHAT, "tool_choice": "none", "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": properties,
                                     "required": list(properties)}}}]}
    plain = json.dumps(body).replace("@", "fine").encode()
    headers = {"content-type": "application/json"}
    ok = client.post("/v1/chat/completions", content=plain, headers=headers)
    assert ok.status_code == 200, ok.text
    raw = json.dumps(body).replace("@", "a\\udc00b").encode()
    resp = client.post("/v1/chat/completions", content=raw, headers=headers)
    assert resp.status_code == 400, resp.text
    assert "tools[0].function.parameters.properties.p199.description" in resp.json()["detail"]
