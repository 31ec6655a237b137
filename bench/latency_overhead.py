"""The closing note when strictcall-upstream ran beside the vllm-server it fronts (the same
vLLM process): StrictCall's overhead as the median per-prompt end-to-end ratio, per kind,
with the prompt and output lengths each side decoded, since on forced calls they differ
by design (StrictCall writes its own prompt and call syntax; vLLM's named tool_choice
constrains the arguments alone)."""

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
        if (ratio["ours"], ratio["other"]) != (OURS, THEIRS) or ratio["e2e_ratio"] is None:
            continue
        mine = rows.get((OURS, ratio["kind"], ratio["concurrency"]), {})
        theirs = rows.get((THEIRS, ratio["kind"], ratio["concurrency"]), {})
        out.append({"kind": ratio["kind"], "concurrency": ratio["concurrency"],
                    "prompts": ratio["pairs"], "e2e_ratio": ratio["e2e_ratio"],
                    "ttft_ratio": ratio["ttft_ratio"],
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
          "same vLLM process, median per-prompt end to end):")
    for r in rows:
        (our_in, their_in), (our_out, their_out) = r["prompt_tokens"], r["output_tokens"]
        print(f"  {r['kind']} at concurrency {r['concurrency']}: {r['e2e_ratio']:.2f}x over "
              f"{r['prompts']} prompts; prompt tokens {our_in} vs {their_in}, output tokens "
              f"{our_out} vs {their_out}")
    if any(r["kind"] == "forced" for r in rows):
        print("  forced: StrictCall's prompt carries its own call instructions and its output "
              "is the whole call (<tool_call>[{\"name\": ..., \"arguments\": ...}]) decoded "
              "by the upstream token by token (no jump-forward there); vLLM's named "
              "tool_choice decodes the arguments object alone, after a chat template that "
              "does not render the tools.")
