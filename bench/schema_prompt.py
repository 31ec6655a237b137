"""What goes into the prompt for a JSON answer, measured: the raw JSON Schema, a compact
rendering, or nothing beyond the grammar.

    strictcall-bench schema-prompt [--limit 20] [--categories simple_python,multiple]

BFCL questions, each asking for the function's arguments under `response_format` with the
function's JSON Schema (the first function of the question), greedy, max_tokens 200,
streamed, against one real server on the embedded model; the three renderings alternate
per question. Per rendering: median prompt tokens, median time to first token and end to
end, valid JSON answers, cut-offs, BFCL AST accuracy of the arguments.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.bfcl_ast import check, load
from bench.results_file import add_save_flag, save
from grammars import bfcl_to_json_schema
from server.process import ServerProcess

STYLES = ("raw", "compact", "none")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench schema-prompt", description=__doc__)
    p.add_argument("--limit", type=int, default=20, help="questions per category")
    p.add_argument("--categories", default="simple_python,multiple")
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/schema-prompt.json"))
    add_save_flag(p)
    args = p.parse_args(argv)
    from openai import OpenAI

    samples: dict[str, list[dict[str, Any]]] = {s: [] for s in STYLES}
    with ServerProcess("--served-model-name", "m") as server:
        client = OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                        timeout=600)
        for category in args.categories.split(","):
            pairs = load(category, args.limit)
            for i, (question, answer) in enumerate(pairs):
                for style in STYLES:
                    samples[style].append(_ask(client, question, answer, style))
                print(f"\r{category}: {i + 1}/{len(pairs)}", end="", file=sys.stderr)
            print(file=sys.stderr)
    rows = [_summary(style, s) for style, s in samples.items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    if args.save:
        save("schema-prompt", rows, argv)
    print(_table(rows))
    return 0


def _ask(client: Any, question: dict[str, Any], answer: dict[str, Any], style: str
         ) -> dict[str, Any]:
    function = question["function"][0]
    schema = bfcl_to_json_schema(function["parameters"])
    started = time.perf_counter()
    first, text, usage, finish = None, "", None, None
    stream = client.chat.completions.create(
        model="m", messages=question["question"][0], max_tokens=200, temperature=0,
        stream=True, stream_options={"include_usage": True},
        response_format={"type": "json_schema", "json_schema": {
            "name": "arguments", "schema": schema}},
        extra_body={"strictcall": {"schema_prompt": style}})
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if choice.delta.content and first is None:
                first = time.perf_counter() - started
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    seconds = time.perf_counter() - started
    try:
        args = json.loads(text) if finish == "stop" else None
    except json.JSONDecodeError:
        args = None
    truth = [c for c in answer["ground_truth"] if function["name"] in c][:1]
    correct = args is not None and bool(truth) and check(
        [(function["name"], args)], {"ground_truth": truth})
    return {"prompt_tokens": usage.prompt_tokens if usage else 0,
            "tokens": usage.completion_tokens if usage else 0, "ttft": first or seconds,
            "seconds": seconds, "valid": args is not None, "cut_off": finish == "length",
            "correct": correct}


def _summary(style: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(samples)
    return {"schema_prompt": style, "n": n,
            "prompt_tokens_median": statistics.median(s["prompt_tokens"] for s in samples),
            "ttft_s_median": round(statistics.median(s["ttft"] for s in samples), 3),
            "e2e_s_median": round(statistics.median(s["seconds"] for s in samples), 3),
            "mean_output_tokens": round(statistics.mean(s["tokens"] for s in samples), 1),
            "valid": sum(s["valid"] for s in samples) / n,
            "cut_off": sum(s["cut_off"] for s in samples) / n,
            "ast_accuracy": sum(s["correct"] for s in samples) / n}


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| schema in prompt | n | prompt tokens (median) | TTFT s (median) | end to end s "
             "(median) | output tokens (mean) | valid | cut off | AST accuracy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['schema_prompt']} | {r['n']} | {r['prompt_tokens_median']} | "
                     f"{r['ttft_s_median']} | {r['e2e_s_median']} | "
                     f"{r['mean_output_tokens']} | {r['valid']:.0%} | {r['cut_off']:.0%} | "
                     f"{r['ast_accuracy']:.0%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
