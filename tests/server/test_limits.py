"""Limits and backpressure over a ScriptedEngine: body size (413), max_tokens cap (400), the
bounded admission (429 / 503), the time limit (504), shutting down (503), lone surrogates
(400 on every API) and the request id on every response."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from fastapi.testclient import TestClient

from server.api.admission import Admission
from server.api.app import create_app
from server.engines.base import GenerationRequest, GenerationResult
from server.engines.scripted import ScriptedEngine
from server.errors import Overloaded, Unavailable
from server.settings import Settings
from tests.server.test_api import assert_problem
from tests.server.test_messages_api import assert_error

USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "scripted", "messages": USER}


class StalledEngine(ScriptedEngine):
    """Answers like ScriptedEngine after `stall_s` seconds: a decode that takes long."""

    stall_s = 0.0

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(self.stall_s)
        return await super().generate(request)


@pytest.fixture()
def make_client(model_dir):
    clients = []

    def make(**settings) -> TestClient:
        engine = StalledEngine(model_dir, lambda prompt: "Hello.")
        app = create_app(Settings(served_model_name="scripted", **settings), lambda s: engine)
        client = TestClient(app)
        clients.append(client.__enter__())
        client.engine = engine
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


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
    client = make_client(max_batch=1, max_queued=1)
    admission = client.app.state.admission
    assert admission.capacity == 2
    admission.inside = 2  # two requests decoding or queued
    started = time.monotonic()
    body = assert_problem(client.post("/v1/chat/completions", json=CHAT), 429)
    assert time.monotonic() - started < 5  # shed, not queued
    assert body["retryable"] is True and body["error"]["type"] == "rate_limit_error"
    resp = client.post("/v1/messages", json={**CHAT, "max_tokens": 8})
    assert_error(resp, 429, kind="rate_limit_error")
    assert int(resp.headers["retry-after"]) >= 1
    admission.inside = 0
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert admission.inside == 0  # every place taken was given back
    client.engine.alive = lambda: False
    down = client.post("/v1/responses", json={"model": "scripted", "input": "hi"})
    assert_problem(down, 503, says="engine is not running")
    assert down.headers["retry-after"]


def test_request_over_its_time_limit_is_cancelled_with_504(make_client):
    client = make_client(request_timeout_s=0.5)
    client.engine.stall_s = 30
    started = time.monotonic()
    body = assert_problem(client.post("/v1/chat/completions", json=CHAT), 504,
                          says="0.5 s time limit")
    assert time.monotonic() - started < 10 and body["retryable"] is True
    stream = client.post("/v1/chat/completions", json={**CHAT, "stream": True})
    assert stream.status_code == 200 and "request-timeout" in stream.text
    assert client.app.state.admission.inside == 0


def test_shutting_down_refuses_new_requests_with_503(make_client):
    client = make_client()
    client.app.state.shutdown_deadline = time.monotonic() + 30  # what SIGTERM sets
    refused = client.post("/v1/chat/completions", json=CHAT)
    assert_problem(refused, 503, says="shutting down")
    assert refused.headers["retry-after"] and refused.json()["retryable"] is True
    assert client.get("/health").status_code == 503  # load balancers: send no more here


def test_a_running_request_is_answered_503_before_the_grace_ends(make_client):
    client = make_client()
    client.engine.stall_s = 30

    async def shut_down_soon():
        await asyncio.sleep(0.3)  # after the gate let the request in
        client.app.state.shutdown_deadline = time.monotonic() + 1.5

    client.portal.start_task_soon(shut_down_soon)
    started = time.monotonic()
    assert_problem(client.post("/v1/chat/completions", json=CHAT), 503,
                   says="shutting down and could not finish")
    assert time.monotonic() - started < 10


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
