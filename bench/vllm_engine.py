"""The vLLM engine, measured through a real `strictcall serve --engine vllm` process:
startup time, decode speed unconstrained vs constrained, and the first request for each
registered contract with the grammar warm-up on vs off (vLLM's pinned xgrammar 0.2.8
compiles length-bounded strings slowly, so a cold first request pays for it).

    .venv-vllm/bin/python -m bench.vllm_engine [--rounds 6]    # or: make bench-vllm
"""

from __future__ import annotations

import argparse
import time

import httpx

EXAMPLES = "contracts.examples"
from server.model_store import ensure_embedded_model
from server.process import ServerProcess

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


def _post(client: httpx.Client, **body) -> tuple[dict, float]:
    body.setdefault("model", MODEL)
    start = time.perf_counter()
    resp = client.post("/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - start
    if resp.status_code not in (200, 422):
        raise SystemExit(f"{resp.status_code}: {resp.text}")
    return resp.json(), elapsed


def _start(model_dir, *extra: str) -> tuple[ServerProcess, float]:
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


def speed(client: httpx.Client, rounds: int) -> tuple[float, float]:
    """Completion tokens per second, unconstrained then constrained, runs interleaved."""
    free_tokens = free_s = json_tokens = json_s = 0.0
    for i in range(rounds):
        topic = TOPICS[i % len(TOPICS)]
        messages = [{"role": "user", "content": f"Write six sentences about {topic}."}]
        body, elapsed = _post(client, messages=messages, max_tokens=160)
        free_tokens += body["usage"]["completion_tokens"]
        free_s += elapsed
        body, elapsed = _post(client, messages=messages, max_tokens=400, response_format={
            "type": "json_schema", "json_schema": {"name": "story", "schema": STORY}})
        json_tokens += body["usage"]["completion_tokens"]
        json_s += elapsed
    return free_tokens / free_s, json_tokens / json_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    model_dir = ensure_embedded_model()

    cold_proc, cold_start = _start(model_dir, "--no-warm-grammars")
    with cold_proc, httpx.Client(base_url=cold_proc.base_url, timeout=600, headers=HEADERS) as client:
        cold = first_requests(client)
        again = first_requests(client)
    warm_proc, warm_start = _start(model_dir)
    with warm_proc, httpx.Client(base_url=warm_proc.base_url, timeout=600, headers=HEADERS) as client:
        warm = first_requests(client)
        free, constrained = speed(client, args.rounds)

    print(f"startup to healthy: {cold_start:.1f} s without grammar warm-up, "
          f"{warm_start:.1f} s with it ({len(CONTRACT_PROMPTS) * 4} contract grammars)")
    print(f"{'contract':30} {'cold 1st':>9} {'cold 2nd':>9} {'warm 1st':>9}  (s, max_tokens=1)")
    for tool in CONTRACT_PROMPTS:
        print(f"{tool:30} {cold[tool]:9.3f} {again[tool]:9.3f} {warm[tool]:9.3f}")
    print(f"{'total':30} {sum(cold.values()):9.3f} {sum(again.values()):9.3f} "
          f"{sum(warm.values()):9.3f}")
    print("(cold 2nd repeats cold 1st's prompt: vLLM's prefix cache also helps it)")
    print(f"decode: unconstrained {free:.1f} tok/s, constrained (json_schema) "
          f"{constrained:.1f} tok/s, ratio {constrained / free:.2f} "
          f"({args.rounds} rounds, interleaved, latency includes prefill)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
