"""`strictcall-bench serve`'s numbers without a server: arrival schedules, the runner's open
and closed loops over a scripted SSE transport, the statistics and goodput, /metrics, the
report, compare; the bench requirements' pins; and that the module imports where torch,
xgrammar and the server's packages are not installed."""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from bench.serve import metrics
from bench.serve.compare import change, differences, pairs
from bench.serve.compare import markdown as compare_markdown
from bench.serve.record import Record, read_records, write_records
from bench.serve.report import markdown, write
from bench.serve.runner import LoadPlan, run
from bench.serve.schedule import Setting, SettingError, arrivals, interleaved, rotated
from bench.serve.stats import SloError, by_workload, meets_slo, parse_slo, summarize
from bench.serve.targets import Target
from bench.serve.validity import Expect
from bench.serve.workload import WorkItem, mixed, workload_hash

ROOT = Path(__file__).resolve().parents[2]


def test_constant_arrivals_are_even_and_bounded():
    rng = random.Random(0)
    assert arrivals(2, kind="constant", rng=rng, count=4) == [0, 0.5, 1.0, 1.5]
    assert arrivals(2, kind="constant", rng=rng, duration_s=1.2) == [0, 0.5, 1.0]
    assert arrivals(2, kind="constant", rng=rng, count=9, duration_s=1.0) == [0, 0.5]
    assert arrivals(math.inf, kind="poisson", rng=rng, count=3) == [0, 0, 0]
    with pytest.raises(SettingError, match="give --num-requests"):
        arrivals(math.inf, kind="poisson", rng=rng, duration_s=5)


def test_poisson_arrivals_have_the_rate_and_repeat_with_the_seed():
    times = arrivals(4, kind="poisson", rng=random.Random(7), count=4000)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert 0.23 < sum(gaps) / len(gaps) < 0.27  # mean gap 1/rate
    assert len({round(g, 6) for g in gaps}) > 3900  # not evenly spaced
    assert times == arrivals(4, kind="poisson", rng=random.Random(7), count=4000)


def test_targets_interleave_in_time():
    merged = interleaved(["a", "b"], 2, kind="constant", seed=0, count=3)
    assert [(t, n, s) for t, n, s in merged] == [
        (0.0, "a", 0), (0.25, "b", 0), (0.5, "a", 1), (0.75, "b", 1), (1.0, "a", 2),
        (1.25, "b", 2)]
    poisson = interleaved(["a", "b"], 5, kind="poisson", seed=1, count=20)
    assert [t for t, _, _ in poisson] == sorted(t for t, _, _ in poisson)
    assert {n for _, n, _ in poisson} == {"a", "b"} and len(poisson) == 40
    assert rotated(["a", "b", "c"], 4) == ["b", "c", "a"]


def _rec(target="t", setting="rate 1/s", *, start=0.0, e2e=1.0, ttft=0.2, tokens=5,
         outcome="valid", status=200, itl=(0.1, 0.2), phase="measure", prompt=10,
         workload="w", error=None, scheduled=None):
    return Record(target=target, setting=setting, phase=phase, workload=workload, item="i",
                  api="chat", seq=0, start_s=start, e2e_s=e2e, scheduled_s=scheduled,
                  ttft_s=ttft, itl_s=tuple(itl), prompt_tokens=prompt,
                  completion_tokens=tokens, outcome=outcome, status=status, error=error)


def test_summary_percentiles_throughput_and_goodput():
    records = [_rec(start=0, e2e=1.0, ttft=0.1), _rec(start=0.5, e2e=2.0, ttft=0.6),
               _rec(start=1.0, e2e=1.5, ttft=0.3, outcome="invalid"),
               _rec(start=1.5, e2e=0.2, ttft=None, outcome="error", status=503, tokens=None),
               _rec(start=9, phase="warmup")]
    (row,) = summarize(records, {"ttft_ms": 500})
    assert (row["n"], row["finished"], row["valid"], row["invalid"], row["error"]) == (
        4, 3, 2, 1, 1)
    assert row["errors_by_status"] == {"503": 1}
    assert row["seconds"] == pytest.approx(2.5)  # first send 0.0, last answer 0.5 + 2.0
    assert row["requests_per_s"] == pytest.approx(3 / 2.5)
    assert row["output_tokens_per_s"] == pytest.approx(15 / 2.5)
    assert row["prompt_tokens_per_s"] == pytest.approx(30 / 2.5)
    assert row["slo_met"] == 2 and row["good"] == 1  # the invalid one met the SLO: no good
    assert row["goodput_per_s"] == pytest.approx(1 / 2.5)
    assert row["ttft_ms"]["p50"] == pytest.approx(300) and row["ttft_ms"]["p99"] == \
        pytest.approx(600)
    assert row["e2e_ms"]["p90"] == pytest.approx(2000)
    assert row["tpot_ms"]["p50"] == pytest.approx((1.5 - 0.3) / 4 * 1000)
    assert row["itl_ms"]["p50"] == pytest.approx(100) and row["itl_ms"]["p99"] == \
        pytest.approx(200)


def test_slo_forms_and_edges():
    assert parse_slo("ttft_ms=500, e2e_ms=2000") == {"ttft_ms": 500, "e2e_ms": 2000}
    assert parse_slo(None) == {}
    for bad in ("ttft=5", "ttft_ms=fast"):
        with pytest.raises(SloError):
            parse_slo(bad)
    one_token = _rec(tokens=1, ttft=0.1, e2e=0.1)
    assert one_token.tpot_s is None and meets_slo(one_token, {"tpot_ms": 1})
    assert not meets_slo(_rec(ttft=None), {"ttft_ms": 10_000})
    assert not meets_slo(_rec(outcome="error"), {})


def test_unknown_prompt_tokens_give_no_prompt_throughput_and_workloads_split():
    records = [_rec(prompt=None, workload="a"), _rec(workload="b", outcome="cut_off"),
               _rec(setting="concurrency 2", workload="a")]
    rows = summarize(records, {})
    assert [r["setting"] for r in rows] == ["rate 1/s", "concurrency 2"]
    assert rows[0]["prompt_tokens_per_s"] is None
    assert [(r["workload"], r["n"], r["cut_off"]) for r in by_workload(records)] == [
        ("a", 2, 0), ("b", 1, 1)]


def test_records_round_trip(tmp_path):
    records = [_rec(scheduled=0.5, error="x"), _rec(itl=())]
    write_records(records, tmp_path / "r.jsonl")
    assert read_records(tmp_path / "r.jsonl") == records


VLLM_BEFORE = """# HELP vllm:request_success_total Count
vllm:request_success_total{finished_reason="stop",model_name="q"} 10.0
vllm:request_success_total{finished_reason="length",model_name="q"} 2.0
vllm:generation_tokens_total{model_name="q"} 500.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="q"} 3.0
vllm:time_to_first_token_seconds_count{model_name="q"} 12.0
vllm:time_to_first_token_seconds_sum{model_name="q"} 1.2
vllm:kv_cache_usage_perc{model_name="q"} 0.1
python_gc_objects_collected_total{generation="0"} 77.0
"""
VLLM_AFTER = VLLM_BEFORE.replace("} 10.0", "} 18.0").replace("} 500.0", "} 900.0") \
    .replace("_count{model_name=\"q\"} 12.0", "_count{model_name=\"q\"} 20.0") \
    .replace("_sum{model_name=\"q\"} 1.2", "_sum{model_name=\"q\"} 3.2") \
    .replace("perc{model_name=\"q\"} 0.1", "perc{model_name=\"q\"} 0.4")


def test_metrics_keep_our_names_and_read_the_run():
    before = metrics.parse(VLLM_BEFORE)
    assert 'vllm:request_success_total{finished_reason="stop",model_name="q"}' in before
    assert not any("bucket" in k or k.startswith("python") for k in before)
    got = metrics.summary(before, metrics.parse(VLLM_AFTER))
    assert got["requests finished"] == 8 and got["generation tokens"] == 400
    assert got["server TTFT mean s"] == pytest.approx(2.0 / 8)
    assert got["KV cache usage (after)"] == pytest.approx(0.4)
    ours = metrics.summary(metrics.parse("strictcall:generation_tokens_total{model_name=\"m\"} 1"),
                           metrics.parse("strictcall:generation_tokens_total{model_name=\"m\"} 9"))
    assert ours == {"generation tokens": 8}
    assert metrics.summary(None, None) == {}


def _item(i: int, workload: str = "w") -> WorkItem:
    return WorkItem(id=str(i), workload=workload, api="chat", expect=Expect(),
                    body={"messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4})


def test_items_mix_in_turn_and_hash_what_is_sent():
    a, b = [_item(0, "a"), _item(1, "a"), _item(2, "a")], [_item(0, "b")]
    assert [(i.workload, i.id) for i in mixed([a, b])] == [("a", "0"), ("b", "0"),
                                                           ("a", "1"), ("a", "2")]
    assert workload_hash(a) == workload_hash(list(a)) != workload_hash(a[:2])
    body = a[0].request(model="Qwen", dialect="openai", max_tokens=9,
                        extra={"ignore_eos": True})
    assert body["model"] == "Qwen" and body["stream"] and body["max_tokens"] == 9
    assert body["stream_options"] == {"include_usage": True} and body["ignore_eos"]


class ScriptedServer:
    """Chat streams of three words, 20 ms apart; counts what is in flight at once."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.models: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(404)
        self.models.append(json.loads(request.content)["model"])
        self.running += 1
        self.most = max(self.most, self.running)

        async def body():
            for word in ("a", "b", "c"):
                await asyncio.sleep(0.02)
                event = {"choices": [{"delta": {"content": word}}]}
                yield f"data: {json.dumps(event)}\n\n".encode()
            yield b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'
            self.running -= 1  # done (the client reads no further than [DONE])
            yield b"data: [DONE]\n\n"
        return httpx.Response(200, content=body())


def _run(plan: LoadPlan, server: ScriptedServer, items: int = 4):
    targets = [Target("a", "http://a", "ma"), Target("b", "http://b", "mb")]
    return asyncio.run(run(targets, [_item(i) for i in range(items)], plan,
                           transport=httpx.MockTransport(server)))


def test_the_closed_loop_keeps_its_concurrency_on_every_target_at_once():
    server = ScriptedServer()
    out = _run(LoadPlan(settings=[Setting("concurrency", 2)], count=6, warmup=1), server)
    measured = [r for r in out.records if r.phase == "measure"]
    assert len(out.records) == 2 + 2 * 6 and {r.outcome for r in out.records} == {"unchecked"}
    assert sorted(server.models) == ["ma"] * 7 + ["mb"] * 7
    for target in ("a", "b"):
        assert sorted(r.seq for r in measured if r.target == target) == list(range(6))
    assert all(r.ttft_s and len(r.itl_s) == 2 and r.completion_tokens == 3 for r in measured)
    assert server.most == 4  # both targets' two clients at once (interleaved by requests)
    assert out.metrics_before == {"a": None, "b": None}  # 404: no /metrics


class HeldServer(ScriptedServer):
    """Answers nothing until `until` requests have arrived: a loop that waited for an
    answer before sending the next would never get there (a bounded wait, then an error)."""

    def __init__(self, until: int) -> None:
        super().__init__()
        self.until, self.arrived = until, 0
        self.all_in = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/metrics":
            self.arrived += 1
            if self.arrived == self.until:
                self.all_in.set()
            await asyncio.wait_for(self.all_in.wait(), 30)
        return await super().__call__(request)


def test_the_open_loop_sends_on_schedule_whatever_is_in_flight():
    """Events, not time: every request is sent while none has been answered, each no
    earlier than its slot in the schedule."""
    server = HeldServer(until=12)
    out = _run(LoadPlan(settings=[Setting("rate", 50)], count=6, warmup=0,
                        arrivals="constant"), server)
    assert len(out.records) == 12 and {r.seq for r in out.records} == set(range(6))
    assert {r.outcome for r in out.records} == {"unchecked"}  # none timed out waiting
    assert all(r.scheduled_s is not None and r.start_s >= r.scheduled_s
               for r in out.records)
    slots = sorted(r.scheduled_s for r in out.records if r.scheduled_s is not None)
    assert slots[1] - slots[0] == pytest.approx(0.01)  # 50/s each, the targets staggered
    assert server.most == 12  # all in flight at once: the loop did not wait for answers


def test_a_duration_bounds_a_setting():
    out = _run(LoadPlan(settings=[Setting("concurrency", 1)], duration_s=0.3, warmup=0),
               ScriptedServer())
    # at most what fits in 0.3 s of 60 ms answers (a loaded machine fits fewer, never more)
    assert 1 <= sum(r.target == "a" for r in out.records) <= 6


def test_one_target_at_a_time_when_they_share_hardware():
    server = ScriptedServer()
    targets = [Target("a", "http://a", "m"), Target("b", "http://b", "m")]
    plan = LoadPlan(settings=[Setting("concurrency", 2)], count=4, warmup=0,
                    interleave="settings")
    out = asyncio.run(run(targets, [_item(0)], plan, transport=httpx.MockTransport(server)))
    assert server.most == 2
    first_b = min(r.start_s for r in out.records if r.target == "b")
    assert all(r.end_s <= first_b for r in out.records if r.target == "a")


def _result(rows, **over):
    base = {"command": "strictcall-bench serve ...", "created": "2026-12-01T00:00:00+00:00",
            "targets": [{"name": "t", "url": "http://h", "model": "m", "dialect": "openai"}],
            "workload": {"names": ["w"], "items": 3, "hash": "ab" * 32, "apis": {"chat": 3}},
            "load": {"settings": ["rate 1/s"], "num_requests": 4, "duration_s": None,
                     "arrivals": "poisson", "warmup": 1, "interleave": "requests"},
            "slo": {"ttft_ms": 500}, "machine": {"host": "h", "platform": "p", "cpus": 2},
            "settings": rows, "by_workload": [],
            "metrics": {"t": {"summary": {"generation tokens": 9}, "before": {}, "after": {}}}}
    return {**base, **over}


def test_report_markdown_and_files(tmp_path):
    records = [_rec(), _rec(start=1, outcome="error", status=404, ttft=None)]
    result = _result(summarize(records, {"ttft_ms": 500}))
    text = markdown(result, plot="serve.png")
    assert "| t | rate 1/s | 2 | 1 | 0 | 0 | 0 | 0 | 1 |" in text
    assert "200 / 200 / 200 / 200" in text  # TTFT p50..p99, ms
    assert "| t | rate 1/s | 404: 1 |" in text and "generation tokens" in text
    paths = write(result, records, tmp_path)
    assert set(paths) == {"json", "records", "markdown", "plot"}
    assert paths["plot"].stat().st_size > 1000
    assert read_records(paths["records"]) == records


def test_compare_pairs_settings_and_says_what_differs():
    a = _result(summarize([_rec(e2e=1.0)], {}))
    b = _result(summarize([_rec(e2e=1.5)], {}), workload={
        "names": ["w"], "items": 3, "hash": "cd" * 32, "apis": {}})
    (matched,) = pairs(a, b)
    assert matched[:2] == ("t", "rate 1/s")
    assert change(2.0, 3.0) == pytest.approx(50) and change(0, 1) is None
    assert any("different workloads" in n for n in differences(a, b))
    text = compare_markdown(a, b)
    assert "1000 -> 1500 (+50%)" in text
    renamed = _result([{**a["settings"][0], "target": "vllm"}])
    assert pairs(a, renamed)[0][0] == "t -> vllm"  # one target each: paired by setting


def test_the_requirements_for_a_gpu_node_carry_the_projects_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {re.split("[=<>\\[]", p)[0].lower(): p for p in project["dependencies"]
            + project["optional-dependencies"]["bench"]}
    lines = [line.split("#")[0].strip() for line in
             (ROOT / "bench" / "requirements-serve.txt").read_text().splitlines()]
    for line in filter(None, lines):
        assert pins[line.split("==")[0].lower()] == line


BLOCKED = ("torch", "xgrammar", "transformers", "fastapi", "uvicorn", "starlette",
           "llama_cpp", "vllm", "outlines_core", "llguidance", "prometheus_client", "server")


def test_the_bench_imports_without_torch_xgrammar_or_the_server():
    """In a fresh interpreter where importing any of BLOCKED fails, the whole serve bench
    imports and its help prints (what a GPU node without this repo's venvs has)."""
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import bench.serve.cli, bench.serve.plot, bench.__main__
sys.argv = ["strictcall-bench", "serve", "--help"]
try:
    bench.__main__.main()
except SystemExit as exit:
    assert exit.code == 0, exit.code
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
"""
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert got.returncode == 0, got.stderr
    assert "usage: strictcall-bench serve" in got.stdout
    assert "imported: []" in got.stdout
