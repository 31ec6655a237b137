"""State that is bounded and fails fast, in process: a state store that stops answering is a
503 with Retry-After within its deadline while chat keeps answering; a full store answers
a `store=true` Responses call 503 before its decode; the sweeper deletes what expired."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from server.background import sweep
from server.state import MemoryStateStore
from server.state.timed import TimedStateStore
from tests.scripted import assert_problem
from tests.server.state.conftest import Clock


class Stuck(MemoryStateStore):
    """A store whose every operation waits while `paused` is set (a database SIGSTOPped)."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = threading.Event()
        self.resumed = threading.Event()

    def get(self, namespace, key):
        if self.paused.is_set():
            self.resumed.wait(30)
        return super().get(namespace, key)

    def create(self, namespace, key, value, *, ttl_s=None):
        if self.paused.is_set():
            self.resumed.wait(30)
        return super().create(namespace, key, value, ttl_s=ttl_s)


def test_a_store_that_stops_answering_is_a_503_in_time_and_chat_goes_on(scripted, replies,
                                                                        monkeypatch):
    stuck = Stuck()
    monkeypatch.setattr("server.state.url._open_inner", lambda settings, url: stuck)
    with scripted(replies, contracts=["tests.server.state.replica_contracts"],
                  state_url="memory://", state_timeout_s=0.5, state_workers=2) as client:
        stuck.paused.set()
        try:
            started = time.monotonic()
            answers = [client.post("/v1/tools/transfer_funds/invoke", json={
                "arguments": {"amount": 5, "hold_s": 0}, "idempotency_key": f"idem-p-{n}"})
                for n in range(12)]  # more than the store's threads and queue: still bounded
            elapsed = time.monotonic() - started
            for answer in answers:
                problem = assert_problem(answer, 503, says="state store")
                assert problem["error"]["code"] == "state_unavailable"
                assert int(answer.headers["Retry-After"]) >= 1
            chat = client.post("/v1/chat/completions", json={
                "model": "scripted", "messages": [{"role": "user", "content": "hi"}]})
            assert chat.status_code == 200  # it needs no state
        finally:
            stuck.resumed.set()
        assert elapsed < 12 * 0.5 + 3  # each waited its deadline at most, none hung
        ok = client.post("/v1/tools/transfer_funds/invoke", json={
            "arguments": {"amount": 5, "hold_s": 0}, "idempotency_key": "idem-p-after"})
        assert ok.status_code == 200 and ok.json()["outcome"] == "succeeded"


def test_a_full_store_answers_a_stored_response_503_before_its_decode(scripted, tmp_path):
    decoded: list[str] = []

    def script(prompt: str) -> str:
        decoded.append(prompt)
        return "Hello."

    path = tmp_path / "state.sqlite3"
    with scripted(script, state_url=f"sqlite://{path}", state_max_bytes=65536) as client:
        inner = client.app.state.state.inner
        with pytest.raises(Exception, match="full"):  # fill it up
            for n in range(10_000):
                inner.put("filler", str(n), {"pad": "x" * 2000})
        refused = client.post("/v1/responses", json={"model": "scripted", "input": "hi"})
        problem = assert_problem(refused, 503, says="full")
        assert problem["error"]["code"] == "state_unavailable" and decoded == []
        kept_nothing = client.post("/v1/responses", json={"model": "scripted", "input": "hi",
                                                          "store": False})
        assert kept_nothing.status_code == 200 and len(decoded) == 1


def test_the_sweeper_deletes_what_expired():
    clock = Clock()
    inner = MemoryStateStore(clock)
    state = TimedStateStore(inner, workers=2, timeout_s=5, shown="memory")
    for n in range(2500):
        inner.put("responses", f"old-{n}", {}, ttl_s=10)
    inner.put("responses", "young", {}, ttl_s=100)
    inner.put("idempotency", "forever", {})
    clock.now += 50
    assert asyncio.run(sweep(state)) == 2500  # in batches, until none is left
    assert set(inner._records) == {("responses", "young"), ("idempotency", "forever")}
    state.close()


def test_each_store_sweeps_only_expired_records(records):
    records.put("n", "gone", {}, ttl_s=-1)  # (its time ran out a second ago, no sleep)
    records.put("n", "kept", {}, ttl_s=60)
    records.put("n", "forever", {})
    assert records.sweep(limit=10) == 1 and records.sweep(limit=10) == 0
    assert records.get("n", "kept") is not None and records.get("n", "forever") is not None
