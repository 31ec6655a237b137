"""Free text's cost per decode step, StrictCall beside llama.cpp's own `llama-server`, in one
run: the same GGUF, one compute thread each, greedy, one client.

    strictcall-bench decode-step [--systems strictcall-llamacpp,llama-server] [--rounds 5]
        [--tokens 128] [--out bench/results/decode-step]

Per prompt and round, each server is asked the same long-text question twice, not streamed:
for 1 token and for `--tokens`; its time per step is (T(n) - T(1)) / (n - 1), with n the
tokens it wrote (the prompt's prefill and the HTTP round trip fall out of the difference;
under the json kind the short answer is 16 tokens, not 1).
Both servers have seen each prompt before it is timed (the first round is not counted), so
neither prefills more than the other. Asked alike and measured by the same client, the two
figures compare the servers' decode loops on the same model; llama-server's own count
(`timings.predicted_per_token_ms`, its forward passes without the HTTP path) is printed
beside. Requests alternate between the servers. Timings are for comparing in one run.

`--kinds free,json` asks for the same text under a grammar too (a json_schema answer
whose one property is the text, so both run to the same `--tokens`). StrictCall's own
account of each answer (its /health counters, one client at a time): model steps, the
tokens the grammar forced apart from those sampled, and each step's time split into the
model's forward pass and the host's mask, sampling and bookkeeping.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common.results_file import add_save_flag, save
from bench.speed.latency_systems import ROOT, RunningServer, Skipped, Where, find_gguf, launch_for
from bench.speed.latency_workload import MODEL
from server.model_store import default_cache_dir, embedded_model_dir

PROMPTS = (
    "Write a long story about a dragon who learns to bake bread in a small village.",
    "Describe, in detail, how a city changes over the four seasons of one year.",
    "Explain to a new employee, step by step, how a bank checks a money transfer.",
    "Write a long letter from a sailor to his sister about his first voyage.",
)
# The json kind: the text as one property. (A minLength that kept it open to --tokens would
# be refused by StrictCall: no answer could complete within max_tokens.)
TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": False}
# Tokens of the short answer each long one is taken from: one for free text; under the
# json schema, enough for the object around the text to close.
SHORT = {"free": 1, "json": 16}
KINDS = ("free", "json")
# StrictCall's /health counters that make its own account of an answer
OWN = ("decode_steps", "sampled_tokens", "jump_forward_tokens", "step_forward_us",
       "step_host_us")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cache = default_cache_dir()
    where = Where(model_dir=embedded_model_dir(cache), gguf=args.gguf or find_gguf(cache),
                  vllm_python=Path(sys.executable), llamacpp_python=Path(sys.executable),
                  threads=args.threads, server_args=tuple(shlex.split(args.server_args)))
    systems: dict[str, str] = {}
    statuses = []
    with tempfile.TemporaryDirectory(prefix="strictcall-step-") as scratch, \
            contextlib.ExitStack() as stack:
        for name in args.systems.split(","):
            try:
                launch = launch_for(name, where)
                server = stack.enter_context(RunningServer(launch, startup_s=300,
                                                           scratch=Path(scratch)))
            except Skipped as skip:
                statuses.append({"name": name, "status": "skipped", "reason": skip.reason,
                                 "install": skip.install})
                print(f"skipped {name}: {skip.reason}", file=sys.stderr)
                continue
            systems[name] = server.base_url
            statuses.append({"name": name, "status": "ran", "command": launch.shown()})
        if not systems:
            print("no system could start", file=sys.stderr)
            return 1
        kinds = [k for k in args.kinds.split(",") if k]
        if unknown := set(kinds) - set(KINDS):
            print(f"unknown --kinds {sorted(unknown)}; choose from {KINDS}", file=sys.stderr)
            return 2
        rows = measure(systems, rounds=args.rounds, tokens=args.tokens, kinds=kinds)
    summary = summarize(rows, order=list(systems))
    report = {"args": {k: str(v) for k, v in vars(args).items()}, "systems": statuses,
              "summary": summary, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "decode-step.json").write_text(json.dumps(report, indent=1))
    print_summary(summary)
    if args.save:
        save("decode-step", {"tokens": args.tokens, "rounds": args.rounds,
                             "systems": statuses, "summary": summary, "rows": rows}, argv)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strictcall-bench decode-step", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="strictcall-llamacpp,llama-server")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds over the prompts")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--kinds", default="free", help="free, json, or both (comma-separated)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--server-args", default="", help="more `strictcall serve` flags")
    p.add_argument("--gguf", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/scratch/decode-step")
    add_save_flag(p)
    return p


def _counters(client: httpx.Client, base: str) -> dict[str, int]:
    """StrictCall's engine counters (OWN) from /health; {} from a server without them."""
    try:
        engine = client.get(f"{base}/health").json().get("engine")
    except (httpx.HTTPError, ValueError, AttributeError):
        return {}
    return {k: int(engine[k]) for k in OWN if isinstance(engine, dict) and k in engine}


def _ask(client: httpx.Client, base: str, prompt: str, n: int, kind: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": n, "temperature": 0, "seed": 0,
                            "messages": [{"role": "user", "content": prompt}]}
    if kind == "json":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "text", "schema": TEXT_SCHEMA}}
    before = _counters(client, base)
    start = time.perf_counter()
    resp = client.post(f"{base}/v1/chat/completions", json=body)
    seconds = time.perf_counter() - start
    resp.raise_for_status()
    after = _counters(client, base)
    data = resp.json()
    timings = data.get("timings") or {}
    return {"s": seconds, "tokens": int(data["usage"]["completion_tokens"]),
            "own_ms_per_token": timings.get("predicted_per_token_ms"),
            "own": {k: after[k] - before.get(k, 0) for k in after} or None}


def measure(systems: dict[str, str], *, rounds: int, tokens: int,
            kinds: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    names = list(systems)
    with httpx.Client(timeout=600) as client:
        for r in range(rounds + 1):  # round 0 warms every prompt's prefix on every server
            for i, prompt in enumerate(PROMPTS):
                order = names[(r + i) % len(names):] + names[:(r + i) % len(names)]
                for kind in kinds or ["free"]:
                    for name in order:
                        one = _ask(client, systems[name], prompt, SHORT[kind], kind)
                        many = _ask(client, systems[name], prompt, tokens, kind)
                        if r == 0 or many["tokens"] <= one["tokens"]:
                            continue
                        rows.append({"system": name, "kind": kind, "round": r, "prompt": i,
                                     "tokens": many["tokens"], "ms_per_step":
                                     (many["s"] - one["s"]) / (many["tokens"] - one["tokens"])
                                     * 1e3,
                                     "own_ms_per_token": many["own_ms_per_token"],
                                     **_own_account(many["own"])})
    return rows


def _own_account(own: dict[str, int] | None) -> dict[str, Any]:
    """StrictCall's own account of one answer: its model steps, sampled and forced tokens,
    and ms per step in the forward pass and on the host."""
    if not own or not own.get("decode_steps"):
        return {}
    steps = own["decode_steps"]
    return {"steps": steps, "sampled": own.get("sampled_tokens"),
            "forced": own.get("jump_forward_tokens"),
            "forward_ms_per_step": own.get("step_forward_us", 0) / steps / 1e3,
            "host_ms_per_step": own.get("step_host_us", 0) / steps / 1e3}


def summarize(rows: list[dict[str, Any]], *, order: list[str] | None = None
              ) -> dict[str, Any]:
    """Per system its median ms per step (free text; `by_kind` per kind asked, with
    StrictCall's own account); the first of `order` (the --systems order) against the
    second, per prompt round, on free text."""
    out: dict[str, Any] = {}
    seen = list(dict.fromkeys(r["system"] for r in rows))
    for name in [n for n in (order or seen) if n in seen]:
        by_kind = {kind: _medians([r for r in rows if r["system"] == name
                                   and r.get("kind", "free") == kind])
                   for kind in dict.fromkeys(r.get("kind", "free") for r in rows)}
        out[name] = {**by_kind.get("free", next(iter(by_kind.values()))),
                     "by_kind": {k: v for k, v in by_kind.items() if v["n"]}}
    names = list(out)
    if len(names) >= 2:
        a, b = names[0], names[1]
        free = [r for r in rows if r.get("kind", "free") == "free"]
        pairs = {(r["round"], r["prompt"]): r["ms_per_step"] for r in free if r["system"] == b}
        ratios = [r["ms_per_step"] / pairs[(r["round"], r["prompt"])] for r in free
                  if r["system"] == a and (r["round"], r["prompt"]) in pairs]
        mine, theirs = out[a]["ms_per_step_median"], out[b]["ms_per_step_median"]
        out["ratio"] = {"ours": a, "other": b, "pairs": len(ratios),
                        "median": statistics.median(ratios) if ratios else None,
                        # beside the median of per-round ratios: the medians' own ratio
                        "of_medians": mine / theirs if mine is not None and theirs else None}
    return out


def _medians(mine: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float | None:
        values = [r[key] for r in mine if r.get(key) is not None]
        return statistics.median(values) if values else None

    return {"n": len(mine), "ms_per_step_median": median("ms_per_step"),
            "tokens_median": median("tokens"),
            "own_ms_per_token_median": median("own_ms_per_token"),
            **{f"{key}_median": median(key) for key in (
                "steps", "sampled", "forced", "forward_ms_per_step", "host_ms_per_step")
               if median(key) is not None}}


def print_summary(summary: dict[str, Any]) -> None:
    for name, system in summary.items():
        if name == "ratio":
            continue
        for kind, s in (system.get("by_kind") or {"free": system}).items():
            own = s["own_ms_per_token_median"]
            print(f"{name} ({kind}): {s['ms_per_step_median']:.2f} ms per output token "
                  f"(median of {s['n']}, {s['tokens_median']:.0f} tokens)" + (
                      f"; its own count {own:.2f} ms per token" if own is not None else "")
                  + _own_line(s))
    if (ratio := summary.get("ratio")) and ratio["median"] is not None:
        print(f"{ratio['ours']} / {ratio['other']}: {ratio['median']:.2f}x per output token "
              f"(median over {ratio['pairs']} prompt rounds; the medians' ratio "
              f"{ratio.get('of_medians') or 0:.2f}x)")


def _own_line(s: dict[str, Any]) -> str:
    if "steps_median" not in s:
        return ""
    return (f"; its own account: {s['steps_median']:.0f} model steps for "
            f"{s['sampled_median']:.0f} sampled and {s['forced_median']:.0f} forced tokens, "
            f"{s['forward_ms_per_step_median']:.2f} ms per step in the model and "
            f"{s['host_ms_per_step_median']:.2f} on the host")


if __name__ == "__main__":
    raise SystemExit(main())
