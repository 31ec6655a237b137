"""The closing note when strictcall-upstream ran beside the vllm-server it fronts (the same
vLLM process): StrictCall's overhead as the median per-prompt end-to-end ratio, per kind,
with the prompt and output lengths each side decoded, since on forced calls they differ
by design (StrictCall writes its own prompt and call syntax; vLLM's named tool_choice
constrains the arguments alone, with its server's whitespace setting)."""

from __future__ import annotations

from typing import Any

OURS, THEIRS = "strictcall-upstream", "vllm-server"


def upstream_overhead(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (kind, concurrency) both answered: the e2e ratio and both sides'
    median prompt and output tokens (warm pass)."""
    rows = {(r["system"], r["kind"], r["concurrency"]): r for r in report["settings"]
            if r["pass"] == "warm"}
    out = []
    for ratio in report["ratios"]:
        if (ratio["ours"], ratio["other"]) != (OURS, THEIRS) or ratio["e2e_ratio"] is None \
                or ratio.get("pass", "warm") != "warm":
            continue
        mine = rows.get((OURS, ratio["kind"], ratio["concurrency"]), {})
        theirs = rows.get((THEIRS, ratio["kind"], ratio["concurrency"]), {})
        out.append({"kind": ratio["kind"], "concurrency": ratio["concurrency"],
                    "prompts": ratio["pairs"], "e2e_ratio": ratio["e2e_ratio"],
                    "ttft_ratio": ratio["ttft_ratio"], "tpot_ratio": ratio["tpot_ratio"],
                    "prompt_tokens": (mine.get("prompt_tokens_p50"),
                                      theirs.get("prompt_tokens_p50")),
                    "output_tokens": (mine.get("completion_tokens_p50"),
                                      theirs.get("completion_tokens_p50"))})
    return out


def print_upstream_overhead(report: dict[str, Any]) -> None:
    rows = report.get("upstream_overhead") or []
    if not rows:
        return
    print("StrictCall's overhead over the vLLM it fronts (strictcall-upstream / vllm-server, "
          "same vLLM process, median per-prompt ratio):")
    for r in rows:
        (our_in, their_in), (our_out, their_out) = r["prompt_tokens"], r["output_tokens"]
        print(f"  {r['kind']} at concurrency {r['concurrency']}: end to end "
              f"{r['e2e_ratio']:.2f}x, per output token {_x(r['tpot_ratio'])} over "
              f"{r['prompts']} prompts; prompt tokens {our_in} vs {their_in}, output tokens "
              f"{our_out} vs {their_out}")
    if any(r["kind"] == "forced" for r in rows):
        print("  forced calls are not the same decode on both sides. The prompt: StrictCall "
              "writes the tool and its call instructions into it; vLLM leaves the tools to "
              "the chat template, and SmolLM2's renders none. The output: StrictCall decodes "
              "the whole call (its <tool_call> list, the name included) under a grammar that "
              "allows one whitespace in a row; vLLM's named tool_choice decodes the arguments "
              "alone under its json kind, whose whitespace is free unless the server was "
              "started with disable_any_whitespace. Compare the per-token ratio and the "
              "lengths above, not the end-to-end ratio alone.")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
