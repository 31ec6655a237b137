"""The vLLM engine, measured through a real `strictcall serve --engine vllm` process:
startup time, decode speed unconstrained vs constrained, and the first request for each
registered contract with the grammar warm-up on vs off (vLLM's pinned xgrammar 0.2.8
compiles length-bounded strings slowly, so a cold first request pays for it).

Decode speed compares like with like: both runs get the same max_tokens, are streamed, and
count tokens after the first over the time after the first (prefill and the first token
left out). The number of warmed grammars is the server's own (/health).

    .venv-vllm/bin/python -m bench.speed.vllm_engine [--rounds 6] [--max-tokens 400] \
        [--out bench/results/scratch/vllm_engine.json]    # or: make bench-vllm
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common.results_file import add_save_flag, save
from server.model_store import ensure_embedded_model
from server.process import ServerProcess

EXAMPLES = "contracts.examples"

MODEL = "bench-model"
HEADERS = {"X-Tenant-Id": "tenant-bench", "X-User-Id": "user-bench"}
CONTRACT_PROMPTS = {
    "open_dispute": "I was charged twice: 1 200,50 rub yesterday on my card ending 4417.",
    "create_support_ticket": "Open an ops ticket: the VPN is down since 9am.",
    "check_access_request_status": "What is the status of access request AR-004217?",
    "search_products": "Find a lego set for kids under 40.",
    "reissue_card": "Reissue my card 4417, I will pick it up in Kazan at branch 101.",
}
STORY = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 60},
    "sentences": {"type": "array", "items": {"type": "string", "maxLength": 120},
                  "minItems": 6, "maxItems": 6}},
    "required": ["title", "sentences"]}
TOPICS = ["the sea", "a lighthouse", "a fox", "the moon", "a library", "a train"]


def _post(client: httpx.Client, **body: Any) -> tuple[dict[str, Any], float]:
    body.setdefault("model", MODEL)
    start = time.perf_counter()
    resp = client.post("/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - start
    if resp.status_code not in (200, 422):
        raise SystemExit(f"{resp.status_code}: {resp.text}")
    return resp.json(), elapsed


def _start(model_dir: Path, *extra: str) -> tuple[ServerProcess, float]:
    start = time.perf_counter()
    proc = ServerProcess("--engine", "vllm", "--model", str(model_dir), "--served-model-name",
                         MODEL, "--contracts", EXAMPLES, *extra, startup_s=600).__enter__()
    return proc, time.perf_counter() - start


def first_requests(client: httpx.Client) -> dict[str, float]:
    """Latency of each contract's first request: max_tokens=1, so it is mostly the grammar
    (compile or cache hit) plus one prefill."""
    out = {}
    for tool, prompt in CONTRACT_PROMPTS.items():
        _, elapsed = _post(client, max_tokens=1, tool_choice="required",
                           tools=[{"type": "function", "function": {"name": tool}}],
                           messages=[{"role": "user", "content": prompt}])
        out[tool] = elapsed
    return out


def streamed(client: httpx.Client, **body: Any) -> dict[str, float]:
    """One streamed answer: completion tokens, seconds to the first content, and seconds
    from the first content to the last (the decode, prefill left out)."""
    body = {"model": MODEL, **body, "stream": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    first = last = None
    tokens = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        if resp.status_code != 200:
            raise SystemExit(f"{resp.status_code}: {resp.read().decode()}")
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            tokens = (chunk.get("usage") or {}).get("completion_tokens", tokens)
            if any(c["delta"].get("content") for c in chunk.get("choices", [])):
                last = time.perf_counter()
                first = first or last
    if first is None or last is None:
        raise SystemExit(f"no content streamed for {body['messages']}")
    return {"tokens": tokens, "ttft_s": first - start, "decode_s": last - first}


def speed(client: httpx.Client, rounds: int, max_tokens: int) -> dict[str, dict[str, float]]:
    """Decode tokens/s (tokens after the first over the time after the first), free text
    then the same prompt under a JSON schema, same max_tokens, runs interleaved."""
    runs: dict[str, list[dict[str, float]]] = {"unconstrained": [], "constrained": []}
    for i in range(rounds):
        messages = [{"role": "user",
                     "content": f"Write six sentences about {TOPICS[i % len(TOPICS)]}."}]
        runs["unconstrained"].append(streamed(client, messages=messages,
                                              max_tokens=max_tokens))
        runs["constrained"].append(streamed(
            client, messages=messages, max_tokens=max_tokens, response_format={
                "type": "json_schema", "json_schema": {"name": "story", "schema": STORY}}))
    return {name: {"decode_tok_s": sum(r["tokens"] - 1 for r in rs) /
                   sum(r["decode_s"] for r in rs),
                   "tokens_median": statistics.median(r["tokens"] for r in rs),
                   "ttft_s_median": statistics.median(r["ttft_s"] for r in rs),
                   "cut_off": sum(r["tokens"] >= max_tokens for r in rs)}
            for name, rs in runs.items()}


def warmed(client: httpx.Client) -> int:
    """How many grammars the server says its engine warmed at startup (/health)."""
    return int(client.get("/health").json()["engine"]["grammars_warmed"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=400,
                        help="for both decode-speed runs, free and constrained")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scratch/vllm_engine.json"))
    add_save_flag(parser)
    args = parser.parse_args(argv)
    model_dir = ensure_embedded_model()

    cold_proc, cold_start = _start(model_dir, "--no-warm-grammars")
    with cold_proc, httpx.Client(base_url=cold_proc.base_url, timeout=600,
                                 headers=HEADERS) as client:
        cold_warmed = warmed(client)
        cold = first_requests(client)
        again = first_requests(client)
    warm_proc, warm_start = _start(model_dir)
    with warm_proc, httpx.Client(base_url=warm_proc.base_url, timeout=600,
                                 headers=HEADERS) as client:
        warm_warmed = warmed(client)
        warm = first_requests(client)
        decode = speed(client, args.rounds, args.max_tokens)
    report = {"rounds": args.rounds, "max_tokens": args.max_tokens,
              "startup_s": {"no_warm_up": cold_start, "warm_up": warm_start},
              "grammars_warmed": {"no_warm_up": cold_warmed, "warm_up": warm_warmed},
              "first_request_s": {"cold_1st": cold, "cold_2nd": again, "warm_1st": warm},
              "decode": decode, "ratio_constrained_over_unconstrained":
                  decode["constrained"]["decode_tok_s"] / decode["unconstrained"]["decode_tok_s"]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    if args.save:
        save("vllm-engine", report, argv)
    _print(report)
    print(f"report: {args.out}")
    return 0


def _print(report: dict[str, Any]) -> None:
    print(f"startup to healthy: {report['startup_s']['no_warm_up']:.1f} s without grammar "
          f"warm-up ({report['grammars_warmed']['no_warm_up']} grammars warmed), "
          f"{report['startup_s']['warm_up']:.1f} s with it "
          f"({report['grammars_warmed']['warm_up']} grammars warmed, per /health)")
    first = report["first_request_s"]
    print(f"{'contract':30} {'cold 1st':>9} {'cold 2nd':>9} {'warm 1st':>9}  (s, max_tokens=1)")
    for tool in CONTRACT_PROMPTS:
        print(f"{tool:30} {first['cold_1st'][tool]:9.3f} {first['cold_2nd'][tool]:9.3f} "
              f"{first['warm_1st'][tool]:9.3f}")
    print(f"{'total':30} " + " ".join(f"{sum(first[k].values()):9.3f}"
                                      for k in ("cold_1st", "cold_2nd", "warm_1st")))
    print("(cold 2nd repeats cold 1st's prompt: vLLM's prefix cache also helps it)")
    free, constrained = report["decode"]["unconstrained"], report["decode"]["constrained"]
    print(f"decode: unconstrained {free['decode_tok_s']:.1f} tok/s, constrained (json_schema) "
          f"{constrained['decode_tok_s']:.1f} tok/s, ratio "
          f"{report['ratio_constrained_over_unconstrained']:.2f} ({report['rounds']} rounds, "
          f"interleaved, max_tokens {report['max_tokens']} each, tokens after the first over "
          f"the time after the first: prefill left out)")
    for name, run in report["decode"].items():
        print(f"  {name}: {run['tokens_median']:.0f} tokens (median), TTFT "
              f"{run['ttft_s_median']:.3f} s (median), {run['cut_off']} cut off at max_tokens")


if __name__ == "__main__":
    raise SystemExit(main())
