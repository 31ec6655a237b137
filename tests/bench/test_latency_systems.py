"""`strictcall-bench latency`'s systems without a model: a system that cannot start is
skipped with the reason, what each peer is started with (vLLM's structured outputs,
llama-server's slots, context, AMX buffers and compact grammar), each concurrency's cold
and warm passes, the decode-step pairs, the GGUF found, like with like against the peer's
best configuration, and a peer whose template renders no tools."""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
import pytest

from bench.speed.decode_step import summarize as step_summary
from bench.speed.latency import Plan
from bench.speed.latency_like import tools_seen
from bench.speed.latency_report import build_report, markdown
from bench.speed.latency_stats import (
    Sample,
    Wave,
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
from bench.speed.latency_workload import Prompt, compact_grammar, request_body
from tests.bench.test_latency_bench import GOOD, PROMPT, SCHEMA


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
