"""`strictcall-bench latency` without a model: the workload's requests per wire dialect, the
schema check of every answer, the SSE reading and timing (over httpx's mock transport), the
statistics and ratios, the report, and systems that cannot start reported as skipped."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
import pytest

from bench.speed.decode_step import summarize as step_summary
from bench.speed.latency import Plan, plan_waves
from bench.speed.latency_client import timed_request
from bench.speed.latency_like import tools_seen
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
from bench.speed.latency_systems import (
    Launch,
    RunningServer,
    Skipped,
    Where,
    find_gguf,
    launch_for,
    llama_server_shape,
)
from bench.speed.latency_workload import Answer, Prompt, check, compact_grammar, request_body

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


def test_a_system_that_cannot_start_is_skipped_with_the_reason(tmp_path):
    where = Where(model_dir=tmp_path, gguf=None, vllm_python=tmp_path / "no-python",
                  llamacpp_python=Path(sys.executable))
    with pytest.raises(Skipped, match="does not exist") as skipped:
        launch_for("vllm-server", where)
    assert "make setup-vllm" in skipped.value.install
    refusing = Launch("refuses", "strictcall", False, (
        sys.executable, "-c", "import sys; print('error: unrecognized arguments: --x'); "
        "sys.exit(2)"))
    with pytest.raises(Skipped, match="exited with 2.*unrecognized arguments: --x"), \
            RunningServer(refusing, startup_s=30, scratch=tmp_path):
        pass


def test_vllms_own_server_gets_the_structured_outputs_strictcall_gives_vllm(tmp_path,
                                                                           monkeypatch):
    """Like with like: the vllm-server peer is started with the structured-outputs config
    StrictCall's vLLM engine passes to vLLM (no free whitespace), and both say so."""
    import bench.speed.latency_systems as systems
    from server.engines.vllm_engine import STRUCTURED_OUTPUTS_CONFIG

    monkeypatch.setattr(systems, "_require", lambda *args: None)  # no vLLM needed to plan
    where = Where(model_dir=tmp_path, gguf=None, vllm_python=Path(sys.executable),
                  llamacpp_python=Path(sys.executable))
    peer, ours = launch_for("vllm-server", where), launch_for("strictcall-vllm", where)
    flag = peer.command.index("--structured-outputs-config")
    assert json.loads(peer.command[flag + 1]) == STRUCTURED_OUTPUTS_CONFIG == {
        "backend": "xgrammar", "disable_any_whitespace": True}
    for key in ("structured_outputs_config", "dtype", "max_model_len", "enforce_eager",
                "threads"):
        assert peer.settings[key] == ours.settings[key], key
    assert "--structured-outputs-config '{" in peer.shown()  # a command one can paste
    assert launch_for("strictcall-torch", where).settings["any_whitespace"] is False
    vllm_python = tmp_path / "vllm-python"
    variant = launch_for("strictcall-vllm-spec", Where(
        model_dir=tmp_path, gguf=None, vllm_python=vllm_python,
        llamacpp_python=Path(sys.executable),
        variants=(("strictcall-vllm-spec", ("--engine", "vllm", "--vllm-speculate-tokens",
                                            "4")),)))
    assert variant.command[0] == str(vllm_python)  # a variant on vLLM runs in vLLM's Python
    assert variant.settings["structured_outputs_config"] == STRUCTURED_OUTPUTS_CONFIG


def test_each_concurrency_is_cold_then_warm_on_prompts_of_its_own():
    prompts = [Prompt(id=f"p{i}", messages=(), functions=(), target="f") for i in range(6)]
    passes = Plan(prompts, ["forced", "json"], [1, 4, 16], 50, cold_pass=True).passes()
    assert [(p, c) for p, c, _, _ in passes] == [("cold", 1), ("warm", 1), ("cold", 4),
                                                   ("warm", 4), ("cold", 16), ("warm", 16)]
    own = [tuple(q.id for q in qs) for _, _, _, qs in passes]
    assert own[0] == own[1] == ("p0", "p1") and own[2] == own[3] == ("p2", "p3")
    assert not set(own[0]) & set(own[2]) and not set(own[2]) & set(own[4])
    warm_only = Plan(prompts, ["json"], [1, 4], 50, cold_pass=False).passes()
    assert [(p, c, len(qs)) for p, c, _, qs in warm_only] == [("warm", 1, 6), ("warm", 4, 6)]


def test_llama_server_gets_a_slot_per_client_and_strictcalls_context(tmp_path):
    built = tmp_path / "llama-server"
    where = Where(model_dir=tmp_path, gguf=tmp_path / "m.gguf", vllm_python=tmp_path,
                  llamacpp_python=tmp_path, llama_server=built, slots=16)
    with pytest.raises(Skipped) as info:
        launch_for("llama-server", where)
    assert "make setup-peers" in info.value.install
    built.write_text("")
    launch = launch_for("llama-server", where)
    command = launch.shown()
    assert launch.peer and launch.dialect == "llama-server"
    for flag in ("-np 16", "-c 8192", "--kv-unified", "-t 1", "--jinja"):
        assert flag in command, flag
    body = request_body(PROMPT, "json", dialect="llama-server", max_tokens=9)
    assert body is not None and body["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("amx", [True, False])
def test_peers_keep_weights_out_of_amx_buffers_on_an_amx_cpu(tmp_path, monkeypatch, amx):
    import bench.speed.latency_systems as systems

    monkeypatch.setattr(systems, "cpu_has_amx", lambda: amx)
    (tmp_path / "llama-server").write_text("")
    where = Where(model_dir=tmp_path, gguf=tmp_path / "m.gguf", vllm_python=tmp_path,
                  llamacpp_python=tmp_path, llama_server=tmp_path / "llama-server")
    assert ("--no-repack" in launch_for("llama-server", where).command) is amx
    monkeypatch.setattr(systems, "_require", lambda *args: None)
    python_peer = launch_for("llamacpp-server", where)
    assert (python_peer.command[1:3] == ("-c", systems._NO_REPACK)) is amx
    assert python_peer.settings["weight_repacking"].startswith("off") is amx


def test_decode_step_pairs_the_same_prompt_rounds():
    rows = [{"system": s, "round": r, "prompt": 0, "tokens": 128, "ms_per_step": ms,
             "own_ms_per_token": own}
            for s, r, ms, own in (("a", 1, 11.0, None), ("b", 1, 10.0, 9.0),
                                  ("a", 2, 12.0, None), ("b", 2, 8.0, 9.5))]
    summary = step_summary(rows)
    assert summary["a"]["ms_per_step_median"] == 11.5
    assert summary["b"]["own_ms_per_token_median"] == 9.25
    # the median of the rounds' ratios (1.1 and 1.5) beside the medians' ratio (11.5 / 9)
    assert summary["ratio"] == {"ours": "a", "other": "b", "pairs": 2, "median": 1.3,
                                "of_medians": pytest.approx(11.5 / 9)}


def test_find_gguf_prefers_the_embedded_model(tmp_path):
    assert find_gguf(tmp_path) is None
    (tmp_path / "models" / "x").mkdir(parents=True)
    (tmp_path / "models" / "x" / "other.gguf").write_bytes(b"")
    (tmp_path / "models" / "x" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"")
    assert find_gguf(tmp_path).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_a_real_run_against_a_torch_server(tmp_path, capsys):
    """The whole bench, for real: a `strictcall serve` process on the embedded model, two
    BFCL questions, concurrency 1; llama.cpp's server beside it where it is installed
    (otherwise reported as skipped)."""
    from bench.speed.latency import main

    assert main(["--systems", "strictcall-torch,llamacpp-server", "--limit", "2",
                 "--kinds", "forced,json", "--concurrency", "1", "--max-tokens", "24",
                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "latency.json").read_text())
    status = {s["name"]: s["status"] for s in report["systems"]}
    assert status["strictcall-torch"] == "ran" and "llamacpp-server" in status
    ours = [r for r in report["settings"] if r["system"] == "strictcall-torch"]
    assert {(r["kind"], r["pass"]) for r in ours} == {(k, p) for k in ("forced", "json")
                                                      for p in ("cold", "warm")}
    for row in ours:
        assert row["n"] == 2 and row["error"] == 0
        assert row["valid"] + row["cut_off"] == 2  # the grammar: nothing else is possible
        assert row["prompt_tokens_p50"] > 0 and row["e2e_s_p50"] > 0
    assert (tmp_path / "latency.png").exists() and (tmp_path / "throughput.png").exists()
    assert "## Per setting" in capsys.readouterr().out


def test_llama_server_shapes_name_their_slots_and_the_compact_grammar(tmp_path):
    built = tmp_path / "llama-server"
    built.write_text("")
    where = Where(model_dir=tmp_path, gguf=tmp_path / "m.gguf", vllm_python=tmp_path,
                  llamacpp_python=tmp_path, llama_server=built, slots=16)
    two = launch_for("llama-server-np2", where)
    assert "-np 2" in two.shown() and two.dialect == "llama-server" and two.peer
    compact = launch_for("llama-server-compact", where)
    assert "-np 16" in compact.shown() and compact.dialect == "llama-server-compact"
    assert launch_for("llama-server-compact-np2", where).settings["slots"] == 2
    assert llama_server_shape("strictcall-llamacpp") is None
    assert llama_server_shape("llama-server-np0") is None  # no server has no slot
    # the compact dialect is asked json only, with a grammar in place of the schema
    assert request_body(PROMPT, "forced", dialect="llama-server-compact", max_tokens=9) is None
    body = request_body(PROMPT, "json", dialect="llama-server-compact", max_tokens=9)
    assert body is not None and "response_format" not in body


def test_the_compact_grammar_is_llama_cpps_without_free_whitespace():
    """Checked by another GBNF reader (xgrammar's): the JSON StrictCall writes is in it, the
    same answer with a space anywhere is not, and the schema still holds."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string as accepts

    grammar = xgrammar.Grammar.from_ebnf(compact_grammar(SCHEMA))
    assert accepts(grammar, GOOD)
    for spaced in ('{"city": "Oslo","days":3}', '{ "city":"Oslo","days":3}',
                   '{"city":"Oslo", "days":3}', '{"city":"Oslo","days":3} ',
                   '{\n  "city":"Oslo","days":3}'):
        assert not accepts(grammar, spaced), spaced
    assert not accepts(grammar, '{"city":"Oslo"}')  # days is required
    assert not accepts(grammar, '{"city":"Oslo","days":"3"}')


def _setting(system: str, c: int, e2e: list[float], tokens: int, seconds: float
             ) -> tuple[list[Sample], Wave]:
    samples = [Sample(system=system, kind="json", concurrency=c, pass_="warm",
                      prompt_id=f"p{i}", occurrence=0, outcome="valid", e2e_s=t, ttft_s=0.1,
                      tpot_s=(t - 0.1) / (tokens - 1), completion_tokens=tokens)
               for i, t in enumerate(e2e)]
    return samples, Wave(system, "json", c, "warm", len(e2e), seconds)


def test_like_with_like_takes_each_measure_from_the_peers_best_configuration():
    got = [_setting("strictcall-llamacpp", 4, [1.0, 1.2, 1.4], 15, 3.0),
           # a slot per client: the better median, the worse throughput
           _setting("llama-server", 4, [1.1, 1.3, 1.5], 30, 4.0),
           # two slots, as StrictCall's batch: the better throughput
           _setting("llama-server-np2", 4, [1.6, 1.7, 1.8], 30, 2.5),
           _setting("llama-server-compact", 4, [0.9, 1.0, 1.1], 15, 2.0)]
    samples = [s for row, _ in got for s in row]
    statuses = [{"name": "strictcall-llamacpp", "status": "ran", "peer": False, "command": "x"},
                *({"name": n, "status": "ran", "peer": True, "command": "y"} for n in
                  ("llama-server", "llama-server-np2", "llama-server-compact"))]
    report = build_report({"out": "x"}, statuses, samples, [w for _, w in got], {})
    rows = {r["peer"]: r for r in report["like_with_like"]}
    assert set(rows) == {"llama-server", "llama-server-compact"}  # -np2 joins its family
    spaced = rows["llama-server"]
    assert (spaced["peer_e2e_s_p50"], spaced["peer_e2e_s_p50_by"]) == (1.3, "llama-server")
    assert spaced["peer_requests_per_s_by"] == "llama-server-np2"
    assert spaced["peer_requests_per_s"] == pytest.approx(3 / 2.5)
    assert (spaced["completion_tokens_p50"], spaced["peer_completion_tokens_p50"]) == (15, 30)
    assert spaced["e2e_ratio_of_medians"] == pytest.approx(1.2 / 1.3)
    assert spaced["paired_prompts"] == 3
    # faster end to end on half the tokens, but slower per token and below the best rate
    assert spaced["goal"] == "missed: throughput, per token"
    assert rows["llama-server-compact"]["goal"] == "missed: median, throughput, per token"
    assert "llama-server-np2" in markdown(report)  # the configuration behind a best is named
    from bench.report.page_speed import _like_headline

    head = _like_headline(report)
    assert head.startswith("strictcall-llamacpp / the peer's best, warm, 4 clients: json, "
                           "llama-server: median 0.92x, answers/s 0.83x")
    assert "tokens 15:30; json, llama-server-compact: median" in head
    assert head.endswith("goal missed at llama-server warm 4 (throughput, per token), "
                         "llama-server-compact warm 4 (median, throughput, per token)")


def test_a_peer_whose_template_renders_no_tools_is_not_compared_on_forced_calls():
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert not body.get("stream") and body["max_tokens"] == 1
        return httpx.Response(200, json={"usage": {"prompt_tokens": 34}})  # tools or not

    async def seen() -> dict:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer),
                                     base_url="http://peer") as client:
            return await tools_seen(client, "llama-server", PROMPT)

    got = asyncio.run(seen())
    assert got["rendered"] is False and got["prompt_tokens_with_tools"] == 34
    forced = [Sample(system=n, kind="forced", concurrency=1, pass_="warm", prompt_id="p1",
                     occurrence=0, outcome="valid", e2e_s=1.0, ttft_s=0.1, tpot_s=0.01,
                     completion_tokens=20) for n in ("strictcall-llamacpp", "llama-server")]
    statuses = [{"name": "strictcall-llamacpp", "status": "ran", "peer": False, "command": "x"},
                {"name": "llama-server", "status": "ran", "peer": True, "command": "y",
                 "tools_prompt": got}]
    report = build_report({"out": "x"}, statuses, forced, [], {})
    (row,) = report["like_with_like"]
    assert row["goal"] == "not comparable: the peer's template rendered no tools"
    assert "34 / 34 (no tools rendered)" in markdown(report)
    from bench.report.page_speed import _like_headline

    assert _like_headline(report).endswith(
        "forced, llama-server: the peer's template rendered no tools (valid 1 of 1 against 1 "
        "of 1)")  # and no "goal met": nothing was compared
