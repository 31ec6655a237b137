"""`strictcall-bench serve` for real: the default StrictCall (server.process.ServerProcess)
and llama.cpp's own OpenAI server (llama-cpp-python, started as the latency bench starts
its peer), both on the embedded model, measured at a request rate and at a concurrency with
a shipped workload and a user's JSONL; every number of the report is computed again here
from the raw records the run wrote."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.tiers import cannot_run

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}},
          "required": ["city"], "additionalProperties": False}
USER_LINES = [
    {"id": "chat-forced", "body": {
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
                                                     "parameters": SCHEMA}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": 24, "temperature": 0}},
    {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
    {"api": "responses", "id": "responses-json", "body": {
        "input": "Name a city as JSON.", "max_output_tokens": 24,
        "text": {"format": {"type": "json_schema", "name": "city", "schema": SCHEMA}}}},
]
SLO = {"ttft_ms": 3000, "e2e_ms": 8000}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    from bench.speed.latency_systems import RunningServer, Skipped, Where, find_gguf, launch_for
    from server.model_store import default_cache_dir, embedded_model_dir
    from server.process import ServerProcess

    cache = default_cache_dir()
    where = Where(model_dir=embedded_model_dir(cache), gguf=find_gguf(cache),
                  vllm_python=Path(sys.executable), llamacpp_python=Path(sys.executable))
    try:
        launch = launch_for("llamacpp-server", where)
        with ServerProcess("--served-model-name", "m") as ours, \
                RunningServer(launch, startup_s=300,
                              scratch=tmp_path_factory.mktemp("llamacpp")) as peer:
            yield ours.base_url, peer.base_url
    except Skipped as skip:
        cannot_run(f"llama.cpp's server cannot run here: {skip.reason} ({skip.install})")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", "serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def _nearest_rank(values: list[float], q: int) -> float | None:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1] if ordered else None


@pytest.mark.slow
def test_serve_against_strictcall_and_llamacpp(servers, tmp_path):
    ours, peer = servers
    mine = tmp_path / "mine.jsonl"
    mine.write_text("\n".join(json.dumps(line) for line in USER_LINES))
    out = tmp_path / "run"
    got = _bench("--target", f"strictcall={ours}/v1,dialect=strictcall",
                 "--target", f"llamacpp={peer},dialect=llamacpp",
                 "--workload", f"bfcl-json,{mine}", "--bfcl-limit", "2",
                 "--rate", "2", "--concurrency", "2", "--num-requests", "5",
                 "--max-tokens", "24", "--warmup", "1",
                 "--slo", ",".join(f"{k}={v}" for k, v in SLO.items()), "--out", str(out))
    assert got.returncode == 0, got.stderr[-3000:]
    result = json.loads((out / "serve.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [t["name"] for t in result["targets"]] == ["strictcall", "llamacpp"]
    assert result["targets"][0]["model"] == "m"  # read from its /v1/models
    assert len(result["workload"]["hash"]) == 64 and result["workload"]["items"] == 5
    assert {(r["target"], r["setting"]) for r in result["settings"]} == {
        (t, s) for t in ("strictcall", "llamacpp") for s in ("rate 2/s", "concurrency 2")}
    assert Counter(r["phase"] for r in records) == {"warmup": 2, "measure": 20}
    for row in result["settings"]:
        _check_row(row, [r for r in records if r["phase"] == "measure"
                         and (r["target"], r["setting"]) == (row["target"], row["setting"])])
    _check_answers(records)
    _check_metrics(result, records)
    text = (out / "serve.md").read_text()
    for row in result["settings"]:
        assert f"| {row['target']} | {row['setting']} | {row['n']} | {row['valid']} |" in text
    assert (out / "serve.png").stat().st_size > 10_000
    same = _bench("compare", str(out / "serve.json"), str(out / "serve.json"))
    assert same.returncode == 0 and "(+0%)" in same.stdout


def _check_row(row: dict, mine: list[dict]) -> None:
    """The row's numbers, computed again from its records."""
    assert row["n"] == len(mine) == 5  # every request of the workload
    assert {o: row[o] for o in ("valid", "invalid", "cut_off", "no_call", "unchecked",
                                "error")} == {o: sum(r["outcome"] == o for r in mine)
                                              for o in ("valid", "invalid", "cut_off",
                                                        "no_call", "unchecked", "error")}
    done = [r for r in mine if r["outcome"] != "error"]
    seconds = max(r["start_s"] + r["e2e_s"] for r in mine) - min(r["start_s"] for r in mine)
    assert row["seconds"] == pytest.approx(seconds)
    assert row["requests_per_s"] == pytest.approx(len(done) / seconds)
    assert row["output_tokens_per_s"] == pytest.approx(
        sum(r["completion_tokens"] for r in done) / seconds)
    good = [r for r in done if r["outcome"] in ("valid", "no_call", "unchecked")
            and r["ttft_s"] is not None and r["ttft_s"] * 1000 <= SLO["ttft_ms"]
            and r["e2e_s"] * 1000 <= SLO["e2e_ms"]]
    assert row["goodput_per_s"] == pytest.approx(len(good) / seconds)
    columns = {"ttft_ms": [r["ttft_s"] * 1000 for r in done if r["ttft_s"] is not None],
               "e2e_ms": [r["e2e_s"] * 1000 for r in done],
               "itl_ms": [g * 1000 for r in done for g in r["itl_s"]],
               "tpot_ms": [(r["e2e_s"] - r["ttft_s"]) * 1000 / (r["completion_tokens"] - 1)
                           for r in done if r["ttft_s"] is not None
                           and r["completion_tokens"] >= 2]}
    for key, values in columns.items():
        for q in (50, 90, 95, 99):
            assert row[key][f"p{q}"] == pytest.approx(_nearest_rank(values, q)), (key, q)
    errors = Counter(str(r["status"]) for r in mine if r["outcome"] == "error"
                     and r["status"] is not None and r["status"] >= 300)
    assert {k: v for k, v in row["errors_by_status"].items() if k.isdigit()} == errors
    if row["setting"].startswith("rate"):
        assert all(r["scheduled_s"] is not None for r in mine)


def _check_answers(records: list[dict]) -> None:
    """What each server made of each request: StrictCall's constrained answers are valid
    or cut off, never invalid; llama.cpp's server has no Responses API (an error by
    status); every answered request was timed, its tokens counted."""
    for r in records:
        if r["target"] == "strictcall":
            assert r["outcome"] != "error", r
            if r["workload"] == "bfcl-json" or r["item"] in ("chat-forced", "responses-json"):
                assert r["outcome"] in ("valid", "cut_off"), r
        if r["outcome"] != "error":
            assert r["ttft_s"] is not None and r["ttft_s"] <= r["e2e_s"]
            assert r["completion_tokens"] >= 1
    peer_responses = [r for r in records if r["target"] == "llamacpp" and r["api"] ==
                      "responses"]
    assert peer_responses and all(r["outcome"] == "error" and r["status"] >= 400
                                  for r in peer_responses)
    assert {r["api"] for r in records} == {"chat", "responses"}


def _check_metrics(result: dict, records: list[dict]) -> None:
    """StrictCall's /metrics over the run counted what the records say it answered (the
    warm-up came before the first scrape); llama.cpp's server has none."""
    ours = result["metrics"]["strictcall"]
    measured = [r for r in records if r["target"] == "strictcall" and r["phase"] == "measure"]
    assert ours["before"] is not None
    assert ours["summary"]["requests finished"] == len(measured)
    assert ours["summary"]["generation tokens"] == sum(r["completion_tokens"]
                                                      for r in measured)
    assert result["metrics"]["llamacpp"]["before"] is None
