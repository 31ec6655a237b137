"""The hung-step watchdog on the llama.cpp engine (test_watchdog.py holds it on TorchEngine).
A fault is injected into a real LlamaCppEngine serving the embedded GGUF through the app:
its one `llama_decode` call (`_decode`) blocks until the test releases it. A hung prefill,
a hung decode step that carries another prompt's prefill piece (llama.cpp's own `_forward`:
both in one llama_decode) and a hung decode step mid-stream each fail the requests they hold
with a 503 problem; /health says "degraded" (503) and new requests are refused until the
step returns; what it returns is discarded, every KV row it held is freed, and the engine
serves again, two requests at once."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.base import GenerationRequest, SamplingParams
from server.engines.factory import build_engine
from server.errors import EngineFailure
from server.settings import Settings
from tests.server.engines.test_watchdog import failed_while_hung, healthy, wait_until
from tests.tiers import needs_module

pytestmark = pytest.mark.slow

# Far above a step of the embedded model on llama.cpp (a few ms a decode step, well under a
# second for these prompts' prefill, even on a busy host); small, since each hang waits it out.
STEP_TIMEOUT_S = 2.0
# How long an injected hang lasts at most: a bound, so a watchdog that never fires fails the
# test (the step returns, its request answers) instead of hanging it.
HANG_BOUND_S = 30.0
BODY = {"model": "tiny", "max_tokens": 24,
        "messages": [{"role": "user", "content": "Count from one to ten."}]}
Feeds = list[tuple[int, int, list[int], int]]  # LlamaCppEngine._decode's argument


class HangingDecode:
    """Wraps a LlamaCppEngine's `_decode` (its one llama_decode call): once armed, the first
    call that `when(feeds)` picks blocks until `release()`."""

    def __init__(self, decode: Callable[[Feeds], object]) -> None:
        self.decode = decode
        self.when: Callable[[Feeds], bool] | None = None
        self.hung = threading.Event()  # the armed call has started blocking
        self.released = threading.Event()

    def arm(self, when: Callable[[Feeds], bool]) -> None:
        self.hung.clear()
        self.released.clear()
        self.when = when

    def release(self) -> None:
        self.released.set()

    def __call__(self, feeds: Feeds):
        when = self.when
        if when is not None and when(feeds):
            self.when = None
            self.hung.set()
            self.released.wait(HANG_BOUND_S)  # the fault: a llama_decode that does not return
        return self.decode(feeds)


def ask(engine, text: str) -> GenerationRequest:
    ids = engine.encode(engine.render_chat([{"role": "user", "content": text}]))
    return GenerationRequest(ids, SamplingParams(max_tokens=32))


async def both(engine, first: str, second: str) -> list:
    return await asyncio.gather(engine.generate(ask(engine, first)),
                                engine.generate(ask(engine, second)), return_exceptions=True)


@pytest.fixture(scope="module")
def served(model_dir):
    """The app over a LlamaCppEngine with two rows, a prompt's prefill riding whole in the
    next decode step (prefill_share 1, nothing joins as "short"), and no kept prefixes (each
    prompt prefilled, so the merged step below has a piece to carry)."""
    needs_module("llama_cpp", "make setup")
    settings = Settings(model=str(model_dir), served_model_name="tiny", engine="llamacpp",
                        step_timeout_s=STEP_TIMEOUT_S, warm_grammars=False, max_batch=2,
                        prefill_share=1.0, short_prefill=0, prefix_cache_mb=0)
    app = create_app(settings, build_engine)
    with TestClient(app) as client:
        engine = app.state.pipeline.engine
        assert type(engine).__name__ == "LlamaCppEngine"
        yield client, engine


def test_a_hung_llamacpp_step_fails_its_requests_and_the_engine_serves_again(served):
    client, engine = served
    hang = engine._decode = HangingDecode(engine._decode)

    # 1. The request's prefill hangs: its client gets the watchdog's 503 at once.
    hang.arm(lambda feeds: True)
    try:
        failed_while_hung(client, BODY)
        assert hang.hung.is_set(), "the fault was never injected"
    finally:
        hang.release()
    wait_until(lambda: healthy(client))

    # 2. A decode step carrying another prompt's prefill piece (one llama_decode for both)
    # hangs: the row decoding and the prompt being prefilled both fail.
    hang.arm(lambda feeds: len(feeds) > 1)
    try:
        results = asyncio.run(both(engine, "Name three colours.", "Count from one to ten."))
        assert hang.hung.is_set(), f"no decode step carried a prefill piece: {results}"
        assert all(isinstance(r, EngineFailure) and "watchdog" in str(r) for r in results), \
            results
    finally:
        hang.release()
    wait_until(lambda: healthy(client))

    # 3. A decode step after the first tokens were streamed hangs: the stream ends with the
    # watchdog's 503 event.
    steps = engine.stats()["decode_steps"]
    hang.arm(lambda feeds: engine.stats()["decode_steps"] > steps)
    try:
        streamed = client.post("/v1/chat/completions", json={**BODY, "stream": True})
        assert hang.hung.is_set(), "the fault was never injected"
        events = [json.loads(line[6:]) for line in streamed.text.splitlines()
                  if line.startswith("data: {")]
        assert streamed.status_code == 200 and events[-1]["status"] == 503
        assert "watchdog" in events[-1]["detail"]
        assert any(e.get("choices") for e in events[:-1])  # tokens went out before it
    finally:
        hang.release()
    wait_until(lambda: healthy(client))

    # What the hung steps returned was discarded and their KV rows freed: both rows serve
    # two requests at once (a row still held would fail the second one's prefill).
    answered = client.post("/v1/chat/completions", json=BODY)
    assert answered.status_code == 200 and answered.json()["choices"][0]["message"][
        "content"]
    together = asyncio.run(both(engine, "Name three colours.", "Count from one to ten."))
    assert all(not isinstance(r, BaseException) and r.text for r in together), together
    stats = client.get("/health").json()["engine"]
    assert stats["hung_steps"] == 3
    assert stats["failed_by_watchdog"] == 4  # 1 + 2 + 1; the refused one never queued
    assert stats["running"] == 0 and stats["queued"] == 0  # the failed rows were dropped
