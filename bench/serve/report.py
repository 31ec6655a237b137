"""The serve benchmark's results: one JSON document (what ran, where, on what, and the
numbers), the raw records beside it (records.jsonl), a markdown rendering and a plot."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common.markdown_table import cell, table
from bench.serve import metrics
from bench.serve.record import Record, write_records
from bench.serve.runner import LoadPlan, Outcome
from bench.serve.stats import PERCENTILES, by_workload, summarize
from bench.serve.targets import Target
from bench.serve.workload import WorkItem, workload_hash

FILES = {"json": "serve.json", "records": "records.jsonl", "markdown": "serve.md",
         "plot": "serve.png"}


def build(*, command: str, targets: list[Target], workloads: list[str],
          items: list[WorkItem], plan: LoadPlan, slo: dict[str, float],
          outcome: Outcome) -> dict[str, Any]:
    return {
        "benchmark": "strictcall-bench serve", "command": command,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "targets": [t.shown() for t in targets],
        "workload": {"names": workloads, "items": len(items), "hash": workload_hash(items),
                     "apis": dict(Counter(i.api for i in items))},
        "load": {"settings": [s.label for s in plan.settings], "num_requests": plan.count,
                 "duration_s": plan.duration_s, "arrivals": plan.arrivals,
                 "warmup": plan.warmup, "interleave": plan.interleave, "seed": plan.seed,
                 "max_tokens": plan.max_tokens, "extra_body": plan.extra_body,
                 "timeout_s": plan.timeout_s},
        "slo": slo, "machine": machine(),
        "settings": summarize(outcome.records, slo),
        "by_workload": by_workload(outcome.records),
        "metrics": {t.name: {"summary": metrics.summary(outcome.metrics_before[t.name],
                                                        outcome.metrics_after[t.name]),
                             "before": outcome.metrics_before[t.name],
                             "after": outcome.metrics_after[t.name]} for t in targets},
        "records": FILES["records"],
    }


def machine() -> dict[str, Any]:
    """Where the client ran (on a GPU node, usually the servers' machine too)."""
    info: dict[str, Any] = {"host": platform.node(), "platform": platform.platform(),
                            "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            got = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=10, check=False)
            info["gpus"] = [g.strip() for g in got.stdout.splitlines() if g.strip()]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def write(result: dict[str, Any], records: list[Record], out: Path) -> dict[str, Path]:
    """serve.json, records.jsonl, serve.md and serve.png under `out`; their paths."""
    from bench.serve.plot import plot

    out.mkdir(parents=True, exist_ok=True)
    paths = {key: out / name for key, name in FILES.items()}
    write_records(records, paths["records"])
    paths["json"].write_text(json.dumps(result, indent=1))
    if not plot(result, paths["plot"]):
        del paths["plot"]
    paths["markdown"].write_text(markdown(result, plot=FILES["plot"] if "plot" in paths
                                          else None))
    return paths


def markdown(result: dict[str, Any], *, plot: str | None = None) -> str:
    slo = result["slo"]
    shown_slo = ", ".join(f"{k} <= {v:g}" for k, v in slo.items()) or "none set"
    parts = ["# strictcall-bench serve", "", f"`{result['command']}`", "",
             f"{result['created']}, on {_machine(result['machine'])}", "",
             _targets(result), "",
             f"Workload: {', '.join(result['workload']['names'])}; "
             f"{result['workload']['items']} distinct requests, sha256 "
             f"{result['workload']['hash'][:16]}. Load: {_load(result['load'])}.", "",
             "## Per target and setting", "",
             "Times in ms, each as p50 / p90 / p95 / p99. Valid: the answer matched its "
             "schema; cut off: ended at max_tokens; no call: an auto tool choice answered "
             f"in text; unchecked: free text. Goodput: requests/s within the SLO ({shown_slo})"
             " whose answer was usable (valid, no call or unchecked).", "",
             settings_table(result["settings"])]
    errors = [(r["target"], r["setting"], r["errors_by_status"]) for r in result["settings"]
              if r["errors_by_status"]]
    if errors:
        parts += ["", "## Errors by status", "", table(["target", "setting", "errors"], [
            [t, s, ", ".join(f"{k}: {v}" for k, v in e.items())] for t, s, e in errors])]
    if len({r["workload"] for r in result["by_workload"]}) > 1:
        parts += ["", "## By workload (every setting)", "", table(
            ["target", "workload", "n", "valid", "invalid", "cut off", "no call",
             "unchecked", "errors", "e2e ms p50"],
            [[r["target"], r["workload"], r["n"], r["valid"], r["invalid"], r["cut_off"],
              r["no_call"], r["unchecked"], r["error"], r["e2e_ms_p50"]]
             for r in result["by_workload"]])]
    served = {name: m["summary"] for name, m in result["metrics"].items() if m["summary"]}
    if served:
        keys = list(dict.fromkeys(k for s in served.values() for k in s))
        parts += ["", "## The targets' own /metrics over the run", "", table(
            ["target", *keys], [[name, *(s.get(k) for k in keys)]
                                for name, s in served.items()])]
    if plot:
        parts += ["", f"![latency and throughput against load]({plot})"]
    return "\n".join(parts) + "\n"


def settings_table(rows: list[dict[str, Any]]) -> str:
    return table(["target", "setting", "n", "valid", "invalid", "cut off", "no call",
                  "unchecked", "errors", "req/s", "out tok/s", "goodput/s", "TTFT",
                  "TPOT", "ITL", "e2e"],
                 [[r["target"], r["setting"], r["n"], r["valid"], r["invalid"], r["cut_off"],
                   r["no_call"], r["unchecked"], r["error"], r["requests_per_s"],
                   r["output_tokens_per_s"], r["goodput_per_s"],
                   *(spread(r[k]) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"))]
                  for r in rows])


def spread(dist: dict[str, float | None]) -> str:
    return " / ".join(cell(dist[f"p{q}"]) for q in PERCENTILES)


def _targets(result: dict[str, Any]) -> str:
    return table(["target", "URL", "model", "dialect", "/metrics"], [
        [t["name"], t["url"], t["model"], t["dialect"],
         "yes" if result["metrics"][t["name"]]["before"] is not None else "no"]
        for t in result["targets"]])


def _load(load: dict[str, Any]) -> str:
    bound = [f"{load['num_requests']} requests" if load["num_requests"] else "",
             f"{load['duration_s']:g} s" if load["duration_s"] else ""]
    return (f"{', '.join(load['settings'])} ({load['arrivals']} arrivals at a rate); "
            f"{' or '.join(b for b in bound if b)} per target and setting; "
            f"{load['warmup']} warm-up per target; interleaved by {load['interleave']}")


def _machine(info: dict[str, Any]) -> str:
    gpus = f", {'; '.join(info['gpus'])}" if info.get("gpus") else ""
    memory = f", {info['memory_gib']} GiB" if "memory_gib" in info else ""
    return f"{info['host']} ({info['platform']}, {info['cpus']} CPUs{memory}{gpus})"
