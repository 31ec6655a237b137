"""`strictcall-bench latency` without a model: the workload's requests per wire dialect, the
schema check of every answer, the SSE reading and timing (over httpx's mock transport), the
statistics and ratios, the report, and systems that cannot start reported as skipped."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from bench.speed.latency import plan_waves
from bench.speed.latency_client import timed_request
from bench.speed.latency_report import build_report, markdown, write_report
from bench.speed.latency_stats import (
    Sample,
    Wave,
    cold_vs_warm,
    kind_ratios,
    paired_ratios,
    percentile,
    summarize,
)
from bench.speed.latency_workload import Answer, Prompt, check, request_body

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                           "days": {"type": "integer", "minimum": 1}},
          "required": ["city", "days"]}
PROMPT = Prompt(id="p1", messages=({"role": "user", "content": "Weather in Oslo, 3 days?"},),
                functions=({"name": "get_weather", "description": "Weather for a city.",
                            "parameters": SCHEMA},
                           {"name": "get_time", "description": "Local time.",
                            "parameters": {"type": "object", "properties": {}}}),
                target="get_weather")
GOOD = '{"city":"Oslo","days":3}'


def test_each_dialect_is_asked_its_own_way():
    openai_json = request_body(PROMPT, "json", dialect="openai", max_tokens=50)
    llama_json = request_body(PROMPT, "json", dialect="llamacpp", max_tokens=50)
    assert openai_json["response_format"]["type"] == "json_schema"
    assert openai_json["response_format"]["json_schema"]["schema"] == SCHEMA
    # llama-cpp-python answers OpenAI's form with a 500: its own form carries the schema
    assert llama_json["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert openai_json["messages"] == llama_json["messages"]  # the same question for all
    forced = request_body(PROMPT, "forced", dialect="llamacpp", max_tokens=50)
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert [t["function"]["name"] for t in forced["tools"]] == ["get_weather", "get_time"]
    # llama-server takes no named choice: "required" over the named function alone
    peer_forced = request_body(PROMPT, "forced", dialect="llama-server", max_tokens=50)
    assert peer_forced["tool_choice"] == "required"
    assert [t["function"]["name"] for t in peer_forced["tools"]] == ["get_weather"]
    vllm_forced = request_body(PROMPT, "forced", dialect="openai", max_tokens=50)
    assert all(t["function"]["strict"] for t in vllm_forced["tools"])  # or unconstrained
    assert request_body(PROMPT, "auto", dialect="openai", max_tokens=50) is None
    assert request_body(PROMPT, "auto", dialect="strictcall", max_tokens=50)[
        "tool_choice"] == "auto"
    free = request_body(PROMPT, "free", dialect="strictcall", max_tokens=50)
    assert "response_format" not in free and "tools" not in free
    assert json.dumps(SCHEMA) in free["messages"][0]["content"]  # the shape, in words
    for body in (openai_json, llama_json, forced, free):
        assert (body["temperature"], body["max_tokens"], body["stream"]) == (0, 50, True)


@pytest.mark.parametrize(("kind", "answer", "outcome"), [
    ("json", Answer(content=GOOD, finish_reason="stop"), "valid"),
    ("json", Answer(content='{"city":"Oslo"}', finish_reason="stop"), "invalid"),
    ("json", Answer(content='{"city":"Oslo","days":0}', finish_reason="stop"), "invalid"),
    ("json", Answer(content=GOOD[:-1], finish_reason="stop"), "invalid"),
    ("json", Answer(content=GOOD, finish_reason="length"), "cut_off"),  # never valid
    ("json", Answer(error="HTTP 500: boom"), "error"),
    ("free", Answer(content=f"Sure: {GOOD} there.", finish_reason="stop"), "valid"),
    ("free", Answer(content="It is sunny.", finish_reason="stop"), "invalid"),
    ("forced", Answer(tool_calls=(("get_weather", GOOD),), finish_reason="tool_calls"),
     "valid"),
    ("forced", Answer(tool_calls=(("get_time", "{}"),), finish_reason="tool_calls"),
     "invalid"),  # not the function named in tool_choice
    ("forced", Answer(content=GOOD, finish_reason="stop"), "invalid"),
    ("auto", Answer(tool_calls=(("get_time", "{}"),), finish_reason="tool_calls"), "valid"),
    ("auto", Answer(tool_calls=(("nope", "{}"),), finish_reason="tool_calls"), "invalid"),
    ("auto", Answer(content="No tool needed.", finish_reason="stop"), "no_call"),
    ("auto", Answer(tool_calls=(("get_weather", '{"city":1}'),), finish_reason="length"),
     "cut_off"),
])
def test_every_answer_is_checked_against_the_schema(kind, answer, outcome):
    assert check(PROMPT, kind, answer) == outcome


def _sse(events: list[dict], *, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(e)}\n\n" for e in events]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


def _timed(content: bytes, status: int = 200):
    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(status, content=content))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await timed_request(client, {"stream": True})
    return asyncio.run(go())


def test_a_streamed_tool_call_is_assembled_and_counted_from_usage():
    events = [{"choices": [{"delta": {"role": "assistant"}}]},
              {"choices": [{"delta": {"tool_calls": [
                  {"index": 0, "id": "c", "function": {"name": "get_weather",
                                                        "arguments": ""}}]}}]},
              {"choices": [{"delta": {"tool_calls": [
                  {"index": 0, "function": {"arguments": '{"city":"Oslo",'}}]}}]},
              {"choices": [{"delta": {"tool_calls": [
                  {"index": 0, "function": {"arguments": '"days":3}'}}]},
                            "finish_reason": "tool_calls"}]},
              {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 11}}]
    timed = _timed(_sse(events))
    assert timed.answer.tool_calls == (("get_weather", GOOD),)
    assert timed.answer.finish_reason == "tool_calls" and timed.answer.error is None
    assert (timed.prompt_tokens, timed.completion_tokens, timed.tokens_from) == (40, 11,
                                                                                "usage")
    assert 0 <= timed.ttft_s <= timed.e2e_s
    assert timed.tpot_s == pytest.approx((timed.e2e_s - timed.ttft_s) / 10)
    assert check(PROMPT, "forced", timed.answer) == "valid"


def test_a_name_repeated_in_every_chunk_is_one_name():
    """llama-cpp-python's server sends the whole function name with every fragment."""
    events = [{"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"name": "get_weather", "arguments": part}}]}}]}
        for part in ('{"city":', '"Oslo","days":3}')]
    events.append({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    assert _timed(_sse(events)).answer.tool_calls == (("get_weather", GOOD),)


def test_without_usage_tokens_are_the_chunks_that_carried_output():
    events = [{"choices": [{"delta": {"content": p}}]} for p in ('{"city"', ':"Oslo",',
                                                                 '"days":3}')]
    events[-1]["choices"][0]["finish_reason"] = "stop"
    timed = _timed(_sse(events))
    assert (timed.answer.content, timed.completion_tokens, timed.tokens_from) == (
        GOOD, 3, "chunks")


@pytest.mark.parametrize(("content", "status", "error"), [
    (b'{"detail": "boom"}', 500, "HTTP 500"),
    (_sse([{"choices": [{"delta": {"content": "{"}}]}], done=False), 200, "without data"),
    (_sse([{"choices": [{"delta": {"role": "assistant"}}]}]), 200, "without a finish_reason"),
    (_sse([{"choices": [{"delta": {"content": "{"}}]}, {"status": 503, "detail": "gone"}]),
     200, "stream error event"),
])
def test_failures_are_errors_not_timings(content, status, error):
    timed = _timed(content, status)
    assert error in timed.answer.error
    assert check(PROMPT, "json", timed.answer) == "error"


def _s(system: str, prompt: str, e2e: float, *, kind: str = "json", outcome: str = "valid",
       pass_: str = "warm", c: int = 1, tokens: int = 11, ttft: float = 0.1) -> Sample:
    return Sample(system=system, kind=kind, concurrency=c, pass_=pass_, prompt_id=prompt,
                  occurrence=0, outcome=outcome, e2e_s=e2e, ttft_s=ttft,
                  tpot_s=(e2e - ttft) / (tokens - 1), prompt_tokens=50,
                  completion_tokens=tokens)


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (
        50.0, 90.0, 99.0)


def test_summary_counts_outcomes_and_throughput_from_wave_time():
    samples = [_s("a", "p1", 1.0), _s("a", "p2", 3.0, outcome="cut_off"),
               _s("a", "p3", 2.0, outcome="invalid"),
               Sample(system="a", kind="json", concurrency=1, pass_="warm", prompt_id="p4",
                      occurrence=0, outcome="error", error="HTTP 500")]
    (row,) = summarize(samples, [Wave("a", "json", 1, "warm", 4, 8.0)])
    assert (row["n"], row["valid"], row["cut_off"], row["invalid"], row["error"]) == (
        4, 1, 1, 1, 1)
    assert row["e2e_s_p50"] == 2.0 and row["e2e_s_p99"] == 3.0  # the error is not timed
    # answers per second: a refused request is not throughput
    assert row["requests_per_s"] == 3 / 8 and row["tokens_per_s"] == pytest.approx(33 / 8)
    assert row["ms_per_token_overall"] == pytest.approx(1000 * 6 / 33)
    assert row["prompt_tokens_p50"] == 50


def test_ratios_pair_prompts_both_answered_validly():
    ours = [_s("ours", "p1", 2.0), _s("ours", "p2", 4.0), _s("ours", "p3", 0.1)]
    peer = [_s("peer", "p1", 1.0), _s("peer", "p2", 1.0),
            _s("peer", "p3", 1.0, outcome="invalid")]  # fast and invalid: not paired
    (row,) = paired_ratios(ours + peer, "ours", "peer")
    assert (row["pairs"], row["e2e_ratio"]) == (2, 3.0)  # median of 2x and 4x
    assert row["ttft_ratio"] == 1.0
    cold = [_s("ours", "p1", 9.0, pass_="cold")]
    assert paired_ratios(cold + peer, "ours", "peer") == []  # warm against warm only


def test_constrained_against_free_counts_any_finished_answer():
    samples = [_s("a", "p1", 2.1, kind="json"), _s("a", "p1", 4.1, kind="free",
                                                   outcome="cut_off", tokens=21)]
    (row,) = kind_ratios(samples, "a", "json", "free")
    assert row["kind"] == "json/free" and row["pairs"] == 1
    assert row["tpot_ratio"] == pytest.approx(1.0)


def test_cold_against_warm_rows():
    samples = [_s("a", "p1", 3.0, pass_="cold", ttft=1.0), _s("a", "p1", 2.0, ttft=0.2)]
    (row,) = cold_vs_warm(summarize(samples, []))
    assert (row["cold_ttft_s_p50"], row["warm_ttft_s_p50"]) == (1.0, 0.2)


def test_waves_repeat_prompts_to_fill_and_number_their_occurrences():
    prompts = [Prompt(id=f"q{i}", messages=(), functions=(), target="f") for i in range(3)]
    planned = plan_waves(prompts, 2)
    assert [[(p.id, n) for p, n in w] for w in planned] == [[("q0", 0), ("q1", 0)],
                                                          [("q2", 0)]]
    (wave,) = plan_waves(prompts, 4)
    assert [(p.id, n) for p, n in wave] == [("q0", 0), ("q1", 0), ("q2", 0), ("q0", 1)]


def _report(tmp_path: Path) -> dict:
    samples = [_s("strictcall-torch", "p1", 2.0), _s("strictcall-torch", "p1", 1.0, c=4),
               _s("llamacpp-server", "p1", 1.0), _s("llamacpp-server", "p1", 0.5, c=4),
               _s("strictcall-torch", "p1", 3.0, pass_="cold")]
    waves = [Wave(s.system, s.kind, s.concurrency, s.pass_, 1, s.e2e_s) for s in samples]
    statuses = [{"name": "strictcall-torch", "status": "ran", "peer": False, "command": "x",
                 "settings": {"grammar": "xgrammar", "any_whitespace": False}},
                {"name": "llamacpp-server", "status": "ran", "peer": True, "command": "y"},
                {"name": "vllm-server", "status": "skipped", "reason": "not installed",
                 "install": "make setup-vllm", "command": ""}]
    return build_report({"systems": "all", "out": tmp_path, "limit": 1}, statuses, samples,
                        waves, {"strictcall-torch": {"decode_steps": 30, "prefix_hits": 2}})


def test_report_markdown_json_and_plots(tmp_path):
    report = _report(tmp_path)
    (ratio,) = [r for r in report["ratios"] if r["concurrency"] == 1]
    assert (ratio["ours"], ratio["other"], ratio["e2e_ratio"]) == (
        "strictcall-torch", "llamacpp-server", 2.0)
    text = markdown(report)
    assert "| vllm-server | skipped | - | not installed (install: `make setup-vllm`) |" in text
    assert "| strictcall-torch | ran | grammar=xgrammar; any_whitespace=False | `x` |" in text
    assert "| strictcall-torch | llamacpp-server | json | 1 | warm | 1 | 2 |" in text
    assert "prefix_hits" in text and "TTFT s cold" in text
    paths = write_report(report, tmp_path / "out")
    assert json.loads(paths["json"].read_text())["ratios"]
    for key in ("plot_latency", "plot_throughput"):
        assert paths[key].read_bytes()[:4] == b"\x89PNG"
    assert "![latency.png](latency.png)" in paths["markdown"].read_text()
