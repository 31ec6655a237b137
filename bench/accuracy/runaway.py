"""Runaway guards, measured: forced tool calls on BFCL (simple_python, multiple, parallel)
against a real server on the embedded model, each prompt with the guards off and on (per
request, alternating, same server), max_tokens 256, greedy.

    strictcall-bench runaway [--limit 20] [--offset 0] [--out bench/results/scratch/runaway.json]
    strictcall-bench runaway --cutoffs cutoffs.jsonl  # each cut-off answer's text, to read
    strictcall-bench runaway --thresholds     # the repeat lengths in BFCL's gold values

Per category and setting: cut-off rate (finish_reason "length"), valid-call rate, BFCL AST
accuracy, mean latency and completion tokens; beside `off`, how many answers each guard
setting changed, and of those how many it made BFCL-correct and how many it broke.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.accuracy.bfcl_ast import check, load
from bench.common.results_file import add_save_flag, save
from server.process import ServerProcess

CATEGORIES = ("simple_python", "multiple", "parallel")
SETTINGS = {"off": {"dedupe_calls": False, "loop_guard": "off"},
            "stop": {"dedupe_calls": True, "loop_guard": "stop"},
            "steer": {"dedupe_calls": True, "loop_guard": "steer"}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench runaway", description=__doc__)
    p.add_argument("--limit", type=int, default=20, help="prompts per category")
    p.add_argument("--offset", type=int, default=0,
                   help="skip this many prompts per category first (prompts past a run's)")
    p.add_argument("--cutoffs", type=Path, default=None,
                   help="write each cut-off answer (prompt id, setting, text, guard note), "
                        "and each call the server rejected (422), to this JSON-lines file")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/runaway.json"))
    p.add_argument("--thresholds", action="store_true")
    p.add_argument("--categories", default=",".join(CATEGORIES))
    p.add_argument("--settings", default=",".join(SETTINGS), help="of off, stop, steer")
    add_save_flag(p)
    args = p.parse_args(argv)
    if args.thresholds:
        return _thresholds()
    rows = _run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    if args.save:
        save("runaway", rows, argv)
    print(_table(rows))
    return 0


def _run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from openai import OpenAI

    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    cutoffs = []
    with ServerProcess("--served-model-name", "m") as server:
        client = OpenAI(base_url=f"{server.base_url}/v1", api_key="-", max_retries=0,
                        timeout=600)
        for category in args.categories.split(","):
            pairs = load(category)[args.offset:args.offset + args.limit]
            for i, (question, answer) in enumerate(pairs):
                for setting in args.settings.split(","):
                    one = _ask(client, question, answer, SETTINGS[setting], args.max_tokens)
                    samples.setdefault((category, setting), []).append(one)
                    if one["cut_off"] or one.get("rejected"):
                        cutoffs.append({"id": question["id"], "guards": setting,
                                        "rejected": one.get("rejected", False),
                                        "text": one["text"], "note": one["note"]})
                print(f"\r{category}: {i + 1}/{len(pairs)}", end="", file=sys.stderr)
            print(file=sys.stderr)
    if args.cutoffs is not None:
        args.cutoffs.write_text("".join(json.dumps(c) + "\n" for c in cutoffs))
    rows = [_summary(category, setting, s) for (category, setting), s in samples.items()]
    for row in rows:  # what each guard setting changed, prompt by prompt, against `off`
        base = samples.get((row["category"], "off"))
        if base is not None and row["guards"] != "off":
            row.update(_changed(base, samples[(row["category"], row["guards"])]))
    return rows


def _changed(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, int]:
    """Of the same prompts, answered with the guards off and on: how many answers differ,
    how many of those became BFCL-correct, and how many stopped being."""
    pairs = [(a, b) for a, b in zip(off, on, strict=True) if a["text"] != b["text"]]
    return {"changed": len(pairs),
            "fixed": sum(b["correct"] and not a["correct"] for a, b in pairs),
            "broke": sum(a["correct"] and not b["correct"] for a, b in pairs)}


def _ask(client: Any, question: dict[str, Any], answer: dict[str, Any], guards: dict[str, Any],
         max_tokens: int) -> dict[str, Any]:
    from openai import UnprocessableEntityError

    tools = [{"type": "function", "function": f} for f in question["function"]]
    start = time.perf_counter()
    try:
        resp = client.chat.completions.create(
            model="m", messages=question["question"][0], tools=tools, tool_choice="required",
            max_tokens=max_tokens, temperature=0, extra_body={"strictcall": guards})
    except UnprocessableEntityError as exc:  # a complete call that failed validation
        return {"cut_off": False, "valid": False, "correct": False,
                "seconds": time.perf_counter() - start, "tokens": 0,
                "text": str(exc), "note": None, "rejected": True}
    seconds = time.perf_counter() - start
    choice = resp.choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments))
             for c in choice.message.tool_calls or []]
    text = choice.message.content or json.dumps(
        [{"name": n, "arguments": a} for n, a in calls])
    return {"cut_off": choice.finish_reason == "length", "valid": bool(calls),
            "correct": bool(calls) and check(calls, answer), "seconds": seconds,
            "tokens": resp.usage.completion_tokens, "text": text,
            "note": (resp.model_extra or {}).get("strictcall")}


def _summary(category: str, setting: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(samples)
    return {"category": category, "guards": setting, "n": n,
            "cut_off": sum(s["cut_off"] for s in samples) / n,
            "valid": sum(s["valid"] for s in samples) / n,
            "ast_accuracy": sum(s["correct"] for s in samples) / n,
            "mean_s": statistics.mean(s["seconds"] for s in samples),
            "mean_tokens": statistics.mean(s["tokens"] for s in samples)}


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| category | guards | n | cut off | valid calls | AST accuracy | mean s | "
             "mean tokens | answers changed vs off (fixed / broke) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        changed = (f"{r['changed']} ({r['fixed']} / {r['broke']})" if "changed" in r
                   else "")
        lines.append(f"| {r['category']} | {r['guards']} | {r['n']} | {r['cut_off']:.0%} | "
                     f"{r['valid']:.0%} | {r['ast_accuracy']:.0%} | {r['mean_s']:.2f} | "
                     f"{r['mean_tokens']:.1f} | {changed} |")
    return "\n".join(lines)


def _thresholds() -> int:
    """The longest back-to-back repeat (unit tokens x repeats) in BFCL's gold argument
    values, tokenized with the embedded model's tokenizer: the loop guard's thresholds must
    stay above it."""
    from transformers import AutoTokenizer

    from server.model_store import ensure_embedded_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_embedded_model())
    worst: tuple[int, int, str] = (0, 0, "")
    for category in CATEGORIES:
        for _, answer in load(category):
            for value in _values(answer["ground_truth"]):
                ids = tokenizer.encode(json.dumps(value), add_special_tokens=False)
                for end in range(1, len(ids) + 1):
                    period, repeats = _longest_repeat(ids[:end])
                    if period * repeats > worst[0] * worst[1]:
                        worst = (period, repeats, json.dumps(value)[:60])
    print(f"longest back-to-back repeat in gold values: unit {worst[0]} token(s) x "
          f"{worst[1]} = {worst[0] * worst[1]} tokens, in {worst[2]!r}")
    runs, keys = _shapes([v for c in CATEGORIES for _, a in load(c)
                          for call in a["ground_truth"] for params in call.values()
                          for accepted in params.values() for v in accepted], [])
    print(f"longest run of similar string items in gold arrays: {max(runs, default=0)} "
          f"(item_loops.SIMILAR_RUN must stay above); most times a key stands on its own "
          f"path: {max(keys, default=0)} (KEY_REPEATS must stay above)")
    gold = [v for c in CATEGORIES for _, a in load(c) for call in a["ground_truth"]
            for params in call.values() for accepted in params.values() for v in accepted]
    print(f"most times the same number stands in a row in gold arrays: "
          f"{max(_number_runs(gold), default=0)} (NUMBER_RUN must stay above)")
    return 0


def _number_runs(values: list[Any]) -> list[int]:
    runs: list[int] = []
    for value in values:
        if isinstance(value, dict):
            runs += _number_runs(list(value.values()))
        elif isinstance(value, list):
            run, last = 0, None
            for x in value:
                number = isinstance(x, int | float) and not isinstance(x, bool)
                run = run + 1 if number and x == last else int(number)
                last = x if number else None
                runs.append(run)
            runs += _number_runs(value)
    return runs


def _shapes(values: list[Any], path: list[str]) -> tuple[list[int], list[int]]:
    """For the gold `values`: the similar-item runs of their arrays, and how many times each
    key stands on its path of objects."""
    from server.pipeline.guards.item_loops import similar_run

    runs: list[int] = []
    keys: list[int] = []
    for value in values:
        if isinstance(value, list):
            strings = [x if isinstance(x, str) else None for x in value]
            runs += [similar_run(strings[:end]) for end in range(1, len(strings) + 1)]
            more = _shapes(value, path)
        elif isinstance(value, dict):
            keys += [path.count(k) + 1 for k in value]
            more = ([], [])
            for k, x in value.items():
                sub = _shapes([x], [*path, k])
                more = (more[0] + sub[0], more[1] + sub[1])
        else:
            continue
        runs, keys = runs + more[0], keys + more[1]
    return runs, keys


def _values(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [v for x in node.values() for v in _values(x)]
    if isinstance(node, list):
        return [v for x in node for v in _values(x)] if node else []
    return [node]


def _longest_repeat(ids: list[int]) -> tuple[int, int]:
    best = (0, 0)
    for period in range(1, 17):
        repeats = 1
        while (repeats + 1) * period <= len(ids) and \
                ids[-(repeats + 1) * period: -repeats * period] == ids[-period:]:
            repeats += 1
        if repeats > 1 and period * repeats > best[0] * best[1]:
            best = (period, repeats)
    return best


if __name__ == "__main__":
    raise SystemExit(main())
