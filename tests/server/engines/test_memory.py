"""Where the resident memory goes, as /health shows it: the process's RSS and peak, whether
torch is loaded, and (on the llama.cpp engine, slow) the KV cells sized from the settings."""

from __future__ import annotations

import gc
import sys
import time

import pytest

from server.engines.memory import describe, process_memory
from tests.tiers import needs_module


def test_the_process_memory_is_read_from_proc():
    sizes = process_memory()
    assert sizes["rss_bytes"] > 10 * 2**20 and sizes["peak_rss_bytes"] >= sizes["rss_bytes"]
    assert sizes["torch_loaded"] == int("torch" in sys.modules)


def test_the_start_up_heap_is_frozen_while_serving_and_released_at_shutdown(scripted,
                                                                            replies):
    """Once start-up's warming is done, what it left alive is out of the cyclic collector's
    walk (gc.freeze); the app's shutdown gives it back, so its cycles can be collected."""
    with scripted(replies) as client:
        deadline = time.monotonic() + 60
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gc.get_freeze_count() > 10_000
        replies.text = "Hi."
        assert client.post("/v1/chat/completions", json={
            "model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
        ).status_code == 200
    assert gc.get_freeze_count() == 0


def test_the_log_line_gives_sizes_in_mib():
    assert describe({"kv_rows_bytes": 3 * 2**20, "kv_cells": 128}) == \
        "kv_rows 3 MiB, kv_cells 128"


def test_a_llamacpp_server_serves_without_torch(live_server, live_client):
    """The live server runs the default engine, llama.cpp here: torch is kept out of its
    process (engines/factory.py keep_torch_out), and a forced call, a sampled seeded JSON
    answer (twice: the same) and a stream go through masks, steering and sampling in numpy."""
    import json

    import httpx

    assert "kv_cells" in httpx.get(f"{live_server}/health").json()["memory"]  # llama.cpp's
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"]}}}
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    call = live_client.chat.completions.create(
        model="smollm2-135m-instruct", messages=ask, tools=[tool],
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert set(json.loads(call.choices[0].message.tool_calls[0].function.arguments)) == {"city"}
    sampled = [live_client.chat.completions.create(
        model="smollm2-135m-instruct", messages=ask, temperature=1.0, seed=11, max_tokens=40,
        response_format={"type": "json_schema", "json_schema": {
            "name": "w", "schema": tool["function"]["parameters"]}}).choices[0].message.content
        for _ in range(2)]
    assert sampled[0] == sampled[1] and "city" in json.loads(sampled[0])
    chunks = list(live_client.chat.completions.create(
        model="smollm2-135m-instruct", messages=ask, max_tokens=8, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert httpx.get(f"{live_server}/health").json()["memory"]["torch_loaded"] == 0


def test_health_shows_the_memory(client):
    memory = client.get("/health").json()["memory"]
    assert memory["rss_bytes"] > 0 and memory["peak_rss_bytes"] >= memory["rss_bytes"]


@pytest.mark.slow
def test_llamacpp_sizes_its_kv_cells_from_batch_and_prefix_budget(model_dir):
    needs_module("llama_cpp", "make setup")
    from server.engines.llamacpp_engine import LlamaCppEngine

    sizes = {}
    for rows, budget in ((1, 0), (2, 0), (1, 16 * 2**20)):
        engine = LlamaCppEngine(model_dir, threads=1, max_batch=rows, max_context=1024,
                                prefix_cache_bytes=budget)
        sizes[rows, budget] = engine.memory()
        engine.close()
    one, two, parked = sizes[1, 0], sizes[2, 0], sizes[1, 16 * 2**20]
    per_token = one["kv_bytes_per_token"]
    assert one["kv_cells"] == 1024 and one["kv_rows_bytes"] == 1024 * per_token
    assert two["kv_rows_bytes"] == 2 * one["kv_rows_bytes"]  # each row: its context
    # Kept prompts are in host memory, up to the budget: no cells are added for them.
    assert parked["kv_cells"] == one["kv_cells"]
    assert one["prefix_budget_bytes"] == 0 < parked["prefix_budget_bytes"] <= 16 * 2**20
    assert parked["parked_bytes"] == 0


@pytest.mark.slow
def test_llamacpp_kept_prompts_hold_no_cells_and_come_back_whole(model_dir):
    """Kept prompts are copies of their state in host memory, not cells of the KV cache: a
    prompt that needs every cell gets them, a prompt kept before is reused from its copy,
    and the answers are those of an engine that keeps nothing."""
    needs_module("llama_cpp", "make setup")
    import asyncio

    from server.engines.base import GenerationRequest, SamplingParams
    from server.engines.llamacpp_engine import LlamaCppEngine

    def run(budget: int) -> tuple[list[str], dict[str, int]]:
        engine = LlamaCppEngine(model_dir, threads=1, max_batch=1, max_context=512,
                                prefix_cache_bytes=budget)
        try:
            texts = []
            # ~240 prompt tokens kept, then 480 others (most of the 512 cells), then the
            # first again: its prefix comes back from host memory.
            first = "Count the words. " + "apple banana cherry " * 60
            for content in (first, "Name the fruits: " + "pear plum grape fig " * 150, first):
                prompt = engine.encode(engine.render_chat([{"role": "user",
                                                            "content": content}]))
                result = asyncio.run(engine.generate(GenerationRequest(
                    prompt[:480], SamplingParams(max_tokens=8))))
                texts.append(result.text)
            return texts, {**engine.stats(), **engine.memory()}
        finally:
            engine.close()

    plain, plain_stats = run(0)
    kept, stats = run(64 * 2**20)
    assert kept == plain and plain_stats["prefix_hits"] == 0
    assert stats["kv_cells"] == 512 and stats["prefix_hits"] >= 1
    assert stats["prefix_reused_tokens"] >= 200  # the first prompt but its last token
    assert stats["parked_prompts"] >= 2 and 0 < stats["parked_bytes"] <= 64 * 2**20
