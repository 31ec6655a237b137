"""The hung-step watchdog. Its rules on a clock the test moves; then a fault injected into a
real TorchEngine (the model's forward blocks until the test releases it) through the app:
the hung step's requests get a 503 problem, /health says "degraded" (503) and new requests
are refused until the step returns; what it returns is discarded, and the engine serves
again."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.factory import build_engine
from server.engines.watchdog import StepWatchdog
from server.settings import Settings
from tests.scripted import assert_problem

STEP_TIMEOUT_S = 5.0  # far above a step of the tiny model, even on a busy host
BODY = {"model": "tiny", "max_tokens": 24,
        "messages": [{"role": "user", "content": "Count from one to ten."}]}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_watchdog_flags_a_step_past_its_limit_once_and_sees_it_return():
    clock, hangs, recoveries = Clock(), [], []
    dog = StepWatchdog(10.0, on_hang=lambda s, first: hangs.append(first),
                       on_recover=recoveries.append, clock=clock)
    try:
        with dog.step():
            clock.now = 9.0
            dog.check()
            assert hangs == [] and dog.hung_for is None  # within its limit
            clock.now = 11.0
            dog.check()
            dog.check()
            assert hangs[0] is True and not any(hangs[1:]) and dog.hung_for == 11.0
        assert recoveries == [11.0] and dog.hung_for is None and dog.hangs == 1
        with dog.step():
            clock.now = 12.0  # a new step: timed from its own start
            dog.check()
        assert dog.hangs == 1
    finally:
        dog.close()


class Hang:
    """Wraps a model's forward: the n-th call from `arm(n)` blocks until `release()`."""

    def __init__(self, forward: Callable) -> None:
        self.forward = forward
        self.countdown = 0
        self.released = threading.Event()

    def arm(self, nth: int) -> None:
        self.released.clear()
        self.countdown = nth

    def release(self) -> None:
        self.released.set()

    def __call__(self, *args, **kwargs):
        if self.countdown > 0:
            self.countdown -= 1
            if self.countdown == 0:
                self.released.wait()  # the fault: a step that does not return
        return self.forward(*args, **kwargs)


def failed_while_hung(client: TestClient, body: dict) -> None:
    """A request on a hung step: a retryable 503 naming the watchdog, /health degraded,
    and the next request refused at once while the step is hung."""
    failed = client.post("/v1/chat/completions", json=body)
    problem = assert_problem(failed, 503, says="watchdog")
    assert problem["retryable"] is True and failed.headers["retry-after"]
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "degraded"
    assert "watchdog" in health.json()["problem"]
    assert_problem(client.post("/v1/chat/completions", json=body), 503, says="watchdog")


def healthy(client: TestClient) -> bool:
    return client.get("/health").status_code == 200


def wait_until(check: Callable[[], bool], *, bound_s: float = 120.0) -> None:
    """A bound on how long to wait for the engine, not a claim about its speed."""
    deadline = time.monotonic() + bound_s
    while not check():
        assert time.monotonic() < deadline, "the engine did not come back"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_hung_step_fails_its_requests_and_health_says_degraded(model_dir):
    settings = Settings(model=str(model_dir), served_model_name="tiny", device="cpu",
                        engine="torch", step_timeout_s=STEP_TIMEOUT_S, warm_grammars=False)
    app = create_app(settings, build_engine)
    with TestClient(app) as client:
        engine = app.state.pipeline.engine
        hang = engine.model.forward = Hang(engine.model.forward)
        try:
            hang.arm(1)  # the request's prefill
            failed_while_hung(client, BODY)
        finally:
            hang.release()
        wait_until(lambda: healthy(client))

        hang.arm(3)  # a decode step, after the first tokens went out
        try:
            streamed = client.post("/v1/chat/completions", json={**BODY, "stream": True})
            events = [json.loads(line[6:]) for line in streamed.text.splitlines()
                      if line.startswith("data: {")]
            assert streamed.status_code == 200 and events[-1]["status"] == 503
            assert "watchdog" in events[-1]["detail"]
        finally:
            hang.release()
        wait_until(lambda: healthy(client))

        answered = client.post("/v1/chat/completions", json=BODY)
        assert answered.status_code == 200 and answered.json()["choices"][0]["message"][
            "content"]
        stats = client.get("/health").json()["engine"]
        assert stats["hung_steps"] == 2 and stats["failed_by_watchdog"] == 2
        assert stats["running"] == 0 and stats["queued"] == 0  # the failed rows were dropped
