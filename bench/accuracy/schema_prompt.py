"""What goes into the prompt for a JSON answer, measured: the raw JSON Schema, a compact
rendering, or nothing beyond the grammar; and llama.cpp's `llama-server` on the same
questions, as the peer's accuracy to match.

    strictcall-bench schema-prompt [--limit 20] [--categories simple_python,multiple]
        [--peer llama-server] [--styles raw,compact,none] [--layouts compact,spaced]
        [--clients 1]

BFCL questions, each asking for the function's arguments under `response_format` with the
function's JSON Schema (the first function of the question), greedy, max_tokens 200,
streamed, against one real server on the embedded model per JSON layout (`--json-layout`:
compact `,` `:`, the default, or spaced `, ` `: `); the renderings alternate per question,
and every server is asked every question. The peer (`make setup-peers`; `--peer ''`
leaves it out) gets the same messages and `response_format`: its grammar, from the schema,
allows whitespace, and nothing is added to its prompt. Per rendering: median prompt tokens,
median time to first token and end to end, valid JSON answers, cut-offs, BFCL AST accuracy
of the arguments.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.accuracy.bfcl_ast import check, load
from bench.common.results_file import add_save_flag, save
from grammars import bfcl_to_json_schema
from server.process import ServerProcess

STYLES = ("raw", "compact", "none")
LAYOUTS = ("compact", "spaced")
PEER_ROW = "peer"  # the peer's row: its name is in the row's "system"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench schema-prompt", description=__doc__)
    p.add_argument("--limit", type=int, default=20, help="questions per category")
    p.add_argument("--categories", default="simple_python,multiple")
    p.add_argument("--peer", default="llama-server",
                   help="a peer asked the same questions ('' for none): llama-server")
    p.add_argument("--styles", default=",".join(STYLES),
                   help=f"renderings of the schema in StrictCall's prompt, of {STYLES}")
    p.add_argument("--layouts", default=LAYOUTS[0],
                   help=f"StrictCall's JSON layouts (--json-layout), one server each, of "
                        f"{LAYOUTS}")
    p.add_argument("--clients", type=int, default=1,
                   help="questions asked at once (accuracy does not depend on it; the peer "
                        "gets as many slots)")
    p.add_argument("--out", type=Path, default=Path("bench/results/scratch/schema-prompt.json"))
    add_save_flag(p)
    args = p.parse_args(argv)
    from openai import OpenAI

    styles = [s for s in args.styles.split(",") if s]
    if unknown := [s for s in styles if s not in STYLES]:
        raise SystemExit(f"unknown style {unknown[0]!r}; use {', '.join(STYLES)}")
    layouts = [s for s in args.layouts.split(",") if s]
    if unknown := [s for s in layouts if s not in LAYOUTS]:
        raise SystemExit(f"unknown layout {unknown[0]!r}; use {', '.join(LAYOUTS)}")
    # (layout, style) -> samples; the peer's under ("", PEER_ROW)
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {
        (layout, style): [] for layout in layouts for style in styles}
    with contextlib.ExitStack() as stack:
        clients = {}
        for layout in layouts:
            server = stack.enter_context(ServerProcess(
                "--served-model-name", "m", "--max-batch", str(args.clients),
                "--json-layout", layout))
            clients[layout] = OpenAI(base_url=f"{server.base_url}/v1", api_key="-",
                                     max_retries=0, timeout=600)
        peer = _peer(args.peer, stack, slots=args.clients) if args.peer else None
        if peer is not None:
            samples[("", PEER_ROW)] = []

        def one(pair: tuple[dict[str, Any], dict[str, Any]]
                ) -> dict[tuple[str, str], dict[str, Any]]:
            question, answer = pair
            got = {(layout, style): _ask(clients[layout], question, answer, style)
                   for layout in layouts for style in styles}
            if peer is not None:
                got[("", PEER_ROW)] = _ask(peer, question, answer, None)
            return got

        pairs = [pair for category in args.categories.split(",")
                 for pair in load(category, args.limit)]
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            for i, got in enumerate(pool.map(one, pairs)):  # in question order
                for key, sample in got.items():
                    samples[key].append(sample)
                print(f"\r{i + 1}/{len(pairs)} questions", end="", file=sys.stderr)
        print(file=sys.stderr)
    rows = [_summary(style, s) for (_, style), s in samples.items()]
    for row, (layout, _) in zip(rows, samples, strict=True):
        row["system"] = args.peer if row["schema_prompt"] == PEER_ROW else "strictcall"
        if layout:
            row["json_layout"] = layout
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    # Per question, each setting's verdict: for paired comparisons (McNemar's test).
    args.out.with_suffix(".questions.json").write_text(json.dumps(
        [{"setting": f"{layout or 'peer'}/{style}",
          "correct": [int(x["correct"]) for x in got]}
         for (layout, style), got in samples.items()]))
    if args.save:
        save("schema-prompt", rows, argv)
    print(_table(rows))
    return 0


def _peer(name: str, stack: contextlib.ExitStack, *, slots: int) -> Any:
    """The peer's server, started for the run, and an OpenAI client for it."""
    from openai import OpenAI

    from bench.speed.latency_systems import RunningServer, Where, find_gguf, launch_for
    from server.model_store import default_cache_dir, embedded_model_dir

    cache = default_cache_dir()
    where = Where(model_dir=embedded_model_dir(cache), gguf=find_gguf(cache),
                  vllm_python=Path(sys.executable), llamacpp_python=Path(sys.executable),
                  slots=slots)
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="schema-prompt-")))
    running = stack.enter_context(RunningServer(launch_for(name, where), startup_s=300,
                                                scratch=scratch))
    return OpenAI(base_url=f"{running.base_url}/v1", api_key="-", max_retries=0, timeout=600)


def _ask(client: Any, question: dict[str, Any], answer: dict[str, Any], style: str | None
         ) -> dict[str, Any]:
    """One question; `style` is how StrictCall writes the schema into the prompt (None: a
    peer, asked with nothing of StrictCall's)."""
    function = question["function"][0]
    schema = bfcl_to_json_schema(function["parameters"])
    started = time.perf_counter()
    first, text, usage, finish = None, "", None, None
    stream = client.chat.completions.create(
        model="m", messages=question["question"][0], max_tokens=200, temperature=0,
        stream=True, stream_options={"include_usage": True},
        response_format={"type": "json_schema", "json_schema": {
            "name": "arguments", "schema": schema}},
        extra_body={"strictcall": {"schema_prompt": style}} if style else None)
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
    lines = ["| system | JSON layout | schema in prompt | n | prompt tokens (median) | "
             "TTFT s (median) | end to end s (median) | output tokens (mean) | valid | "
             "cut off | AST accuracy |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.get('system', 'strictcall')} | {r.get('json_layout', '')} | "
                     f"{r['schema_prompt']} | {r['n']} | "
                     f"{r['prompt_tokens_median']} | "
                     f"{r['ttft_s_median']} | {r['e2e_s_median']} | "
                     f"{r['mean_output_tokens']} | {r['valid']:.0%} | {r['cut_off']:.0%} | "
                     f"{r['ast_accuracy']:.0%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
