"""strictcall-upstream in `strictcall-bench latency`: it needs the run's vllm-server (and
fronts that very process), and the closing note reads its ratio against it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.speed.latency_overhead import print_upstream_overhead, upstream_overhead
from bench.speed.latency_systems import UPSTREAM, Skipped, Where, launch_for


def test_strictcall_upstream_fronts_the_runs_vllm_server(tmp_path):
    where = Where(model_dir=tmp_path, gguf=None, vllm_python=tmp_path / "python",
                  llamacpp_python=Path(sys.executable))
    with pytest.raises(Skipped, match="fronts the run's vllm-server") as skipped:
        launch_for(UPSTREAM, where)
    assert "vllm-server" in skipped.value.install
    launch = launch_for(UPSTREAM, Where(**{**where.__dict__, "vllm_url": "http://v:1"}))
    command = " ".join(launch.command)
    assert "--engine upstream --upstream http://v:1" in command
    assert launch.command[0] == sys.executable  # no vLLM needed in StrictCall's Python


def test_the_closing_note_gives_the_ratio_and_both_sides_lengths(capsys):
    def row(system, kind, prompt, out):
        return {"system": system, "kind": kind, "concurrency": 1, "pass": "warm",
                "prompt_tokens_p50": prompt, "completion_tokens_p50": out}

    report = {"settings": [row("strictcall-upstream", "forced", 120, 30),
                           row("vllm-server", "forced", 90, 12),
                           row("strictcall-upstream", "json", 80, 20),
                           row("vllm-server", "json", 80, 20)],
              "ratios": [{"ours": "strictcall-upstream", "other": "vllm-server", "kind": k,
                          "concurrency": 1, "pairs": 8, "e2e_ratio": e, "ttft_ratio": 1.0,
                          "tpot_ratio": 1.01}
                         for k, e in (("forced", 1.8), ("json", 1.03))]}
    report["upstream_overhead"] = upstream_overhead(report)
    assert [(r["kind"], r["e2e_ratio"], r["prompt_tokens"]) for r in
            report["upstream_overhead"]] == [("forced", 1.8, (120, 90)), ("json", 1.03, (80, 80))]
    print_upstream_overhead(report)
    said = capsys.readouterr().out
    assert "json at concurrency 1: end to end 1.03x, per output token 1.01x over 8" in said
    assert "forced calls are not the same decode on both sides" in said
