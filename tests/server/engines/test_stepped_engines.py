"""Jump-forward and prefix reuse in the engines that step the model themselves, on the real
embedded model: each must leave the output unchanged (greedy) and save what it claims to
(model steps, prefilled tokens), as the engines' own counters show."""

from __future__ import annotations

import asyncio
import json

import pytest

from grammars import GrammarCache, JsonSchemaSpec
from server.engines.base import GenerationRequest, SamplingParams
from tests.server.engines.test_torch_engine import stepped_engine

pytestmark = pytest.mark.slow

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit", "days"]}
SYSTEM = ("You are a weather assistant. Answer with the arguments of get_weather(city, "
          "unit, days). " * 8)
QUESTIONS = ["Paris, celsius, for 3 days.", "Weather in Oslo in fahrenheit for a week?",
             "Lima, 2 days, celsius please."]


def answers(engine, *, together: bool = False):
    spec = JsonSchemaSpec.from_schema(WEATHER, table=engine.grammar_backend.keywords)
    cache = GrammarCache(engine.grammar_backend)
    grammar = cache.get(spec).grammar
    cache.close()

    def ask(question):
        ids = engine.encode(engine.render_chat([{"role": "system", "content": SYSTEM},
                                                {"role": "user", "content": question}]))
        return engine.generate(GenerationRequest(ids, SamplingParams(max_tokens=60), grammar))

    async def run():
        if together:
            return await asyncio.gather(*(ask(q) for q in QUESTIONS))
        return [await ask(q) for q in QUESTIONS]

    return asyncio.run(run())


@pytest.fixture(scope="module", params=["torch", "llamacpp"])
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def baseline(kind, model_dir):
    """Neither optimization: one model step per output token, every prompt prefilled whole."""
    engine = stepped_engine(kind, model_dir, max_batch=4, jump_forward=False,
                            prefix_cache_bytes=0)
    try:
        return answers(engine), engine.stats()
    finally:
        engine.close()


def test_jump_forward_keeps_the_answers_in_fewer_model_steps(kind, model_dir, baseline):
    expected, plain = baseline
    engine = stepped_engine(kind, model_dir, max_batch=4, jump_forward=True,
                            prefix_cache_bytes=0)
    try:
        got, stats = answers(engine), engine.stats()
        batched = answers(engine, together=True)  # rows fed different numbers of tokens
    finally:
        engine.close()
    assert [r.text for r in got] == [r.text for r in expected]
    assert [r.text for r in batched] == [r.text for r in expected]
    for result in got:
        assert result.grammar_complete and set(json.loads(result.text)) == set(WEATHER["required"])
    assert stats["jump_forward_tokens"] > 0
    # Forced text may be split into other (fewer) tokens than the model would have sampled,
    # so the steps saved are not exactly the tokens forced.
    assert stats["decode_steps"] < plain["decode_steps"] * 0.6


def test_prefix_reuse_keeps_the_answers_and_prefills_only_the_new_tokens(kind, model_dir,
                                                                        baseline):
    expected, plain = baseline
    engine = stepped_engine(kind, model_dir, max_batch=4, jump_forward=False,
                            prefix_cache_bytes=64 * 2**20)
    try:
        got, stats = answers(engine), engine.stats()
    finally:
        engine.close()
    assert [r.text for r in got] == [r.text for r in expected]
    # The 2nd and 3rd prompts share the system turn with the 1st.
    assert stats["prefix_hits"] == 2
    assert stats["prefill_tokens"] + stats["prefix_reused_tokens"] == plain["prefill_tokens"]
    assert stats["prefix_reused_tokens"] > len(SYSTEM) // 8
    assert got[1].timings["prefix_reused_tokens"] > 0 == got[0].timings["prefix_reused_tokens"]
