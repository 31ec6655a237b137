"""A real server process: SIGTERM lets the request in flight finish (200), refuses new ones
(503 or a refused connection) and exits within the grace; a lone surrogate is a 400 that
keeps the connection; log lines carry the request id."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time

import httpx
import pytest

from server.process import ServerProcess
from tests.live import MODEL

pytestmark = pytest.mark.slow
GRACE_S = 20
# At least 60 numbers (over a hundred tokens, whatever the model prefers): still decoding
# when SIGTERM comes right after the engine took it.
LONG = {"model": MODEL, "max_tokens": 200,
        "messages": [{"role": "user", "content": "List sixty numbers."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "numbers", "schema": {
            "type": "object", "properties": {"numbers": {
                "type": "array", "items": {"type": "integer"}, "minItems": 60}},
            "required": ["numbers"]}}}}


@pytest.fixture()
def proc(model_dir):
    with ServerProcess("--model", str(model_dir), "--served-model-name", MODEL,
                       "--shutdown-grace-s", str(GRACE_S)) as live_server:
        yield live_server


def test_sigterm_finishes_the_request_in_flight_then_exits(proc):
    answered: dict[str, object] = {}

    def in_flight() -> None:
        resp = httpx.post(f"{proc.base_url}/v1/chat/completions", json=LONG, timeout=120,
                          headers={"X-Request-Id": "req-in-flight"})
        answered.update(status=resp.status_code, at=time.monotonic(),
                        id=resp.headers.get("x-request-id"))

    worker = threading.Thread(target=in_flight)
    worker.start()
    _wait_until_decoding(proc.base_url)  # the request is in the engine, not just sent
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    try:
        late = httpx.post(f"{proc.base_url}/v1/chat/completions", timeout=10, json={
            "model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert late.status_code == 503 and late.headers["retry-after"], late.text
    except httpx.ConnectError:
        pass  # no longer listening: as good as a 503 for a client that retries elsewhere
    worker.join(timeout=GRACE_S + 10)
    assert answered["status"] == 200, proc.log()
    assert answered["at"] > signalled, "the request finished before SIGTERM: make it longer"
    assert answered["id"] == "req-in-flight"
    # uvicorn re-raises the signal once it has shut down: the status says "ended by SIGTERM"
    # (within the grace: wait() raises TimeoutExpired otherwise)
    assert proc.wait(timeout=GRACE_S + 10) in (0, -signal.SIGTERM)
    log = proc.log()
    assert "[req-in-flight]" in log and "finishing in-flight requests" in log
    assert "Application shutdown complete" in log  # the engine was closed, not killed


def _wait_until_decoding(base_url: str, *, bound_s: float = 60.0) -> None:
    """Poll /health until the engine runs a request. `bound_s` is how long before failing,
    not a claim about speed."""
    deadline = time.monotonic() + bound_s
    while httpx.get(f"{base_url}/health").json()["engine"]["running"] == 0:
        assert time.monotonic() < deadline, "the request never reached the engine"
        time.sleep(0.05)


def test_lone_surrogate_is_400_and_the_connection_stays_open(proc):
    conn = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=60)
    body = json.dumps({"model": MODEL, "max_tokens": 4, "messages": [
        {"role": "user", "content": "@"}]}).replace("@", "a\\ud800b")
    for route in ("/v1/chat/completions", "/v1/messages"):
        conn.request("POST", route, body=body, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode()
        assert resp.status == 400 and "surrogate" in text, text
        assert not resp.will_close  # the keep-alive connection is still there
    conn.request("POST", "/v1/chat/completions", body=body.replace("a\\ud800b", "hi"),
                 headers={"content-type": "application/json"})
    assert conn.getresponse().status == 200
    conn.close()
