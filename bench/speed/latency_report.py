"""The latency benchmark's report: one JSON document, a markdown rendering of it, and two
PNG plots (end-to-end latency per system; tokens/s against concurrency)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.markdown_table import table
from bench.speed.latency_like import as_ratio, like_with_like
from bench.speed.latency_like import markdown_table as like_table
from bench.speed.latency_stats import (
    Sample,
    Wave,
    cold_vs_warm,
    kind_ratios,
    paired_ratios,
    summarize,
)

# The engine counters worth a column (those a server reports; others are left out).
COUNTERS = ("decode_steps", "sampled_tokens", "jump_forward_tokens", "prefill_tokens",
            "prefix_hits", "prefix_reused_tokens")


def build_report(args: dict[str, Any], statuses: list[dict[str, Any]],
                 samples: list[Sample], waves: list[Wave],
                 counters: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = summarize(samples, waves)
    ran = [s["name"] for s in statuses if s["status"] == "ran"]
    ours = [s["name"] for s in statuses if s["status"] == "ran" and not s.get("peer")]
    ratios = [r for pass_ in ("cold", "warm") for a in ours for b in ran if b != a
              for r in paired_ratios(samples, a, b, pass_=pass_)]
    constrained = [r for name in ran for kind in ("json", "forced")
                   for r in kind_ratios(samples, name, kind, "free")]
    return {"args": {k: str(v) if isinstance(v, Path) else v for k, v in args.items()},
            "systems": statuses, "settings": rows, "ratios": ratios,
            "like_with_like": like_with_like(rows, samples, statuses),
            "constrained_vs_free": constrained, "cold_vs_warm": cold_vs_warm(rows),
            "engine_counters": counters,
            "samples": [s.as_dict() for s in samples],
            "waves": [w.__dict__ for w in waves]}


def write_report(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """latency.json, latency.md and the plots under `out`; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "latency.json", "markdown": out / "latency.md"}
    paths["json"].write_text(json.dumps(report, indent=1))
    paths.update(plot(report, out))
    paths["markdown"].write_text(markdown(report, plots=[p.name for k, p in paths.items()
                                                         if k.startswith("plot")]))
    return paths


def markdown(report: dict[str, Any], *, plots: Sequence[str] = ()) -> str:
    args = report["args"]
    parts = ["# Latency: StrictCall and its peers, one run", "",
             f"`strictcall-bench latency {_flags(args)}`", "", "## Systems", "",
             _systems(report["systems"]), "", "## Per setting", "",
             "Latency columns cover every finished answer (valid or not); `valid` counts "
             "answers that match the schema; `cut off` ended at max_tokens. ms/token p50: "
             "(end to end - TTFT) / (tokens - 1), per request (a tool call's first chunk "
             "comes once its name is decoded); overall: all time / all output tokens.", "",
             _settings(report["settings"])]
    if report.get("like_with_like"):
        parts += ["", "## Like with like: each peer family at its best configuration per "
                  "measure (named in brackets)", "",
                  "Per setting: medians, p99 and throughput over every finished answer; "
                  "output tokens per answer on each side; ms per output token (the decode). "
                  "Ratios < 1: StrictCall is faster. Goal: median below the best peer "
                  "median, answers/s at least the best, per token within 10% of the best.",
                  "", like_table(report["like_with_like"])]
    if report["ratios"]:
        parts += ["", "## Ratios (median over prompts both answered validly; < 1: the "
                  "first system is faster)", "", _ratios(report["ratios"])]
    if report["constrained_vs_free"]:
        parts += ["", "## Constrained against unconstrained, same prompts (any finished "
                  "answer)", "", _ratios(report["constrained_vs_free"])]
    if report["cold_vs_warm"]:
        parts += ["", "## Cold (prompts no server had seen) and warm (the same prompts "
                  "again)", "",
                  _cold(report["cold_vs_warm"])]
    counted = {k: v for k, v in report["engine_counters"].items()
               if any(c in v for c in COUNTERS)}
    if counted:
        parts += ["", "## Engine counters over the run (StrictCall's /health)", "",
                  _counters(counted)]
    parts += ["", *[f"![{name}]({name})" for name in plots]]
    return "\n".join(parts) + "\n"


def _flags(args: dict[str, Any]) -> str:
    shown = ("systems", "url", "limit", "categories", "kinds", "concurrency", "max_tokens")
    return " ".join(f"--{k.replace('_', '-')} {args[k]}" for k in shown
                    if args.get(k) not in (None, ""))


def _systems(statuses: list[dict[str, Any]]) -> str:
    return table(["system", "status", "settings", "command or reason", "ready s",
                  "RSS MiB after the run", "peak RSS MiB",
                  "prompt tokens with / without the tools"], [
        [s["name"], s["status"], _settings_cell(s.get("settings") or {}),
         f"`{s['command']}`" if s["status"] == "ran"
         else f"{s['reason']}" + (f" (install: `{s['install']}`)" if s.get("install") else ""),
         s.get("ready_s"), s.get("rss_mib"), s.get("peak_rss_mib"),
         _tools_cell(s.get("tools_prompt") or {})]
        for s in statuses])


def _tools_cell(seen: dict[str, Any]) -> str:
    if "prompt_tokens_with_tools" not in seen:
        return str(seen.get("error", "-"))
    shown = f"{seen['prompt_tokens_with_tools']} / {seen['prompt_tokens_without']}"
    return shown if seen["rendered"] else shown + " (no tools rendered)"


def _settings_cell(settings: dict[str, Any]) -> str:
    """What a system was configured with, one `key=value` after another."""
    return "; ".join(f"{k}={json.dumps(v, separators=(',', ':')) if isinstance(v, dict) else v}"
                     for k, v in settings.items()) or "-"


def _settings(rows: list[dict[str, Any]]) -> str:
    return table(["system", "kind", "conc.", "pass", "n", "valid", "cut off", "invalid",
                   "no call", "errors", "prompt tok p50", "out tok p50", "TTFT s p50",
                  "ms/token p50", "ms/token overall", "e2e s p50", "p90", "p99", "req/s",
                  "tok/s"], [
        [r["system"], r["kind"], r["concurrency"], r["pass"], r["n"], r["valid"],
         r["cut_off"], r["invalid"], r["no_call"], r["error"], r["prompt_tokens_p50"],
         r["completion_tokens_p50"], r["ttft_s_p50"], r["tpot_ms_p50"],
         r["ms_per_token_overall"], r["e2e_s_p50"],
         r["e2e_s_p90"], r["e2e_s_p99"], r["requests_per_s"], r["tokens_per_s"]]
        for r in rows])


def _ratios(rows: list[dict[str, Any]]) -> str:
    return table(["system", "against", "kind", "conc.", "pass", "prompts", "e2e ratio",
                   "TTFT ratio", "per-token ratio"], [
        [r["ours"], r["other"], r["kind"], r["concurrency"], r.get("pass", "warm"), r["pairs"],
         r["e2e_ratio"], r["ttft_ratio"], r["tpot_ratio"]] for r in rows])


def _cold(rows: list[dict[str, Any]]) -> str:
    return table(["system", "kind", "conc.", "TTFT s cold", "TTFT s warm", "e2e s cold",
                   "e2e s warm"], [
        [r["system"], r["kind"], r["concurrency"], r["cold_ttft_s_p50"],
         r["warm_ttft_s_p50"], r["cold_e2e_s_p50"], r["warm_e2e_s_p50"]] for r in rows])


def _counters(counters: dict[str, dict[str, Any]]) -> str:
    """The counters, and each decode step's time in the model and on the host (mask,
    sampling, bookkeeping), from the engine's own clocks."""
    keys = [k for k in COUNTERS if any(k in c for c in counters.values())]

    def per_step(c: dict[str, Any], key: str) -> float | None:
        steps = c.get("decode_steps") or 0
        return round(c[key] / steps / 1e3, 2) if steps and key in c else None

    return table(["system", *keys, "model ms per step", "host ms per step"], [
        [name, *(c.get(k) for k in keys), per_step(c, "step_forward_us"),
         per_step(c, "step_host_us")] for name, c in counters.items()])


def print_ratios(report: dict[str, Any]) -> None:
    """One line per ratio against a peer (and between StrictCall's own systems), and each
    system's memory."""
    for s in report["systems"]:
        if s.get("rss_mib") is not None:
            print(f"{s['name']}: RSS {s['rss_mib']:.0f} MiB after the run (peak "
                  f"{s.get('peak_rss_mib', 0):.0f}), ready in {s.get('ready_s') or 0:.1f} s")
    for r in report["ratios"]:
        print(f"{r['ours']} / {r['other']}, {r['kind']} at concurrency {r['concurrency']} "
              f"({r.get('pass', 'warm')}): "
              f"end to end {as_ratio(r['e2e_ratio'])}, per token "
              f"{as_ratio(r['tpot_ratio'])}, first token {as_ratio(r['ttft_ratio'])} "
              f"(median over {r['pairs']} prompts)")


def plot(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """plot_latency: end to end per system and kind at the lowest concurrency (box plots);
    plot_throughput: output tokens/s against concurrency, one line per system and kind."""
    import matplotlib

    matplotlib.use("Agg")  # no display; must come before pyplot
    import matplotlib.pyplot as plt

    warm = [s for s in report["samples"] if s["pass_"] == "warm" and s["e2e_s"] is not None]
    paths: dict[str, Path] = {}
    if warm:
        lowest = min(s["concurrency"] for s in warm)
        groups: dict[str, list[float]] = {}
        for s in warm:
            if s["concurrency"] == lowest:
                groups.setdefault(f"{s['system']}\n{s['kind']}", []).append(s["e2e_s"])
        fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(groups)), 4.5))
        ax.boxplot(list(groups.values()), tick_labels=list(groups))
        ax.set_ylabel("end to end, s")
        ax.set_title(f"Latency per system (concurrency {lowest})")
        ax.tick_params(axis="x", labelsize=7)
        paths["plot_latency"] = _save(fig, out / "latency.png", plt)
    rows = [r for r in report["settings"] if r["pass"] == "warm" and r["tokens_per_s"]]
    if rows:
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for key in dict.fromkeys((r["system"], r["kind"]) for r in rows):
            line = sorted((r["concurrency"], r["tokens_per_s"]) for r in rows
                          if (r["system"], r["kind"]) == key)
            ax.plot(*zip(*line, strict=False), marker="o", label=f"{key[0]} {key[1]}")
        levels = sorted({r["concurrency"] for r in rows})
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency")
        ax.set_ylabel("output tokens/s")
        ax.set_title("Throughput against concurrency")
        ax.legend(fontsize=7)
        paths["plot_throughput"] = _save(fig, out / "throughput.png", plt)
    return paths


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
