"""Constrained vs unconstrained decode speed, grammar-cache lookup time and the per-token mask
time (fill + apply), per grammar backend, in one run (this machine is shared and noisy:
compare the ratios, not the absolute numbers). The ratio is per decode step, one token a step
on both sides (jump-forward off), so that the grammar's cost is all that differs; the
served configuration (jump-forward on: forced tokens fed several a step) is reported beside
it, per output token and per step.

    .venv/bin/python -m bench.speed.decode_speed [--model DIR] [--rounds 5] [--tokens 64] \
        [--backend xgrammar,llguidance] [--no-bfcl]

The cache-lookup figures are over the first 50 BFCL simple_python questions' tool-call
grammars (../shared/evaldata/bfcl/BFCL_v4_simple_python.json). Without that file the bench
refuses to run, unless --no-bfcl asks for the one story schema instead (the output says so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench.common.results_file import add_save_flag, save
from bench.speed import vocab_masks
from grammars import (
    CompiledGrammar,
    GrammarCache,
    JsonSchemaSpec,
    KeywordTable,
    MaskingBackend,
    ToolCallsSpec,
    ToolSpec,
    bfcl_to_json_schema,
)
from server.engines.base import Engine, GenerationRequest, SamplingParams
from server.model_store import resolve_model

BFCL = (Path(__file__).resolve().parents[2].parent
        / "shared/evaldata/bfcl/BFCL_v4_simple_python.json")
STORY = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 60},
                                          "story": {"type": "string", "maxLength": 2000}},
         "required": ["title", "story"]}
PROMPT = "Write a long story about a lighthouse keeper, as a JSON object with a title."


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not args.no_bfcl and not BFCL.exists():
        raise SystemExit(f"{BFCL} is missing: the cache-lookup figures are measured over BFCL "
                         "tool-call grammars. Place the shared evaluation data at "
                         f"{BFCL.parents[1]}, or pass --no-bfcl to measure over the one "
                         "story schema (not comparable with BFCL figures)")
    results = {name: _measure(name.strip(), args) for name in args.backend.split(",")}
    # The mask's cost by vocabulary size: SmolLM2's 49k beside Gemma 3's 262k.
    vocabularies = {} if args.no_vocabularies else vocab_masks.by_vocabulary()
    if args.save:
        save("decode-speed", {"backends": results, "masks_by_vocabulary": vocabularies}, argv)
    if args.json:
        out = results if len(results) > 1 else next(iter(results.values()))
        print(json.dumps({**out, "masks_by_vocabulary": vocabularies} if vocabularies
                         else out))
        return 0
    for name, result in results.items():
        print(f"== {name}")
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {value}")
    if vocabularies:
        print("== xgrammar mask per token, by vocabulary")
        print(vocab_masks.table(vocabularies))
    return 0


def _measure(backend_name: str, args: argparse.Namespace) -> dict[str, Any]:
    from server.engines.torch_engine import TorchEngine

    def load(*, jump_forward: bool) -> TorchEngine:
        return TorchEngine(resolve_model(args.model), device=args.device,
                           threads=args.threads, grammar_backend=backend_name,
                           jump_forward=jump_forward)

    # As served (jump-forward on), and step by step: one token a step on both sides, so the
    # grammar's mask and bookkeeping are all that differ.
    engine, stepwise = load(jump_forward=True), load(jump_forward=False)
    try:
        backend = engine.grammar_backend
        cache = GrammarCache(backend)
        spec = JsonSchemaSpec.from_schema(STORY, table=backend.keywords)
        ids = engine.encode(engine.render_chat([{"role": "user", "content": PROMPT}]))
        rounds, tokens = asyncio.run(_decode_rounds(
            engine, stepwise, ids, cache.get(spec).grammar,
            GrammarCache(stepwise.grammar_backend).get(spec).grammar, args))
        lookups = _lookup_times(cache, backend.keywords, bfcl=not args.no_bfcl)
        masks = _mask_times(backend, spec, tokens)
    finally:
        engine.close()
        stepwise.close()
    return _result(rounds, lookups, masks, args)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--backend", default="xgrammar",
                   help="comma-separated grammar backends: xgrammar, llguidance, outlines")
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    p.add_argument("--no-bfcl", dest="no_bfcl", action="store_true",
                   help="measure cache lookups over the story schema, without BFCL's file")
    p.add_argument("--no-vocabularies", action="store_true",
                   help="skip the mask times by vocabulary (SmolLM2 beside Gemma 3)")
    add_save_flag(p)
    return p.parse_args(argv)


async def _decode_rounds(engine: Engine, stepwise: Engine, ids: tuple[int, ...],
                         grammar: CompiledGrammar, step_grammar: CompiledGrammar,
                         args: argparse.Namespace) -> tuple[list[dict[str, float]], list[int]]:
    """Per round, back to back on the same prompt: a constrained run as served (jump-forward
    on: what the grammar forces is fed with the next sampled token, several tokens a step),
    the same constrained run one token a step (`stepwise`), and a free run capped at the
    constrained run's length (per-step cost grows with the KV length), so that load changes
    on the machine hit all three alike. Returns per round the decode rates (below) and the
    tokens of the longest constrained run."""
    rounds: list[dict[str, float]] = []
    tokens: list[int] = []
    for warm in (engine, stepwise):
        await warm.generate(GenerationRequest(ids, SamplingParams(max_tokens=8)))
    for _ in range(args.rounds):
        c = await engine.generate(GenerationRequest(ids, SamplingParams(args.tokens), grammar))
        s = await stepwise.generate(GenerationRequest(ids, SamplingParams(args.tokens),
                                                      step_grammar))
        f = await engine.generate(GenerationRequest(ids, SamplingParams(c.completion_tokens)))
        if c.completion_tokens < 3 or not (
                f.completion_tokens == s.completion_tokens == c.completion_tokens):
            continue  # a run ended early: lengths differ, the round says nothing
        tokens = max(tokens, list(c.token_ids), key=len)
        rounds.append({
            "tokens": c.completion_tokens,
            "forced": c.timings.get("forced", 0),
            # Steps per second: every sampled token after the prefill's first one, the
            # closing EOS included (it costs a forward pass like any other token).
            "free_steps_s": _rate(f.timings["sampled"], f),
            "stepwise_steps_s": _rate(s.timings["sampled"], s),
            "served_steps_s": _rate(c.timings["sampled"], c),
            # Output tokens per second after the first: what a client sees.
            "free_tok_s": _rate(f.completion_tokens, f),
            "served_tok_s": _rate(c.completion_tokens, c)})
    if not rounds:
        raise SystemExit("no comparable round of runs: try another --tokens")
    return rounds, tokens


def _rate(count: float, result: Any) -> float:
    return float((count - 1) / result.timings["decode_s"])


def _mask_times(backend: MaskingBackend, spec: JsonSchemaSpec,
                tokens: list[int]) -> dict[str, float]:
    """Milliseconds per token to fill one bitmask row and apply it to the logits, replaying
    a constrained run's tokens on a freshly compiled grammar (so states a lazy backend builds
    on first need are paid here, as by a request for a schema no one sent before)."""
    matcher = backend.matcher(backend.compile(spec))
    bitmask = backend.allocate_bitmask(1)
    logits = torch.zeros((1, backend.vocab_size))
    fill, apply = [], []
    for token in tokens:
        start = time.perf_counter()
        matcher.fill_bitmask(bitmask, 0)
        filled = time.perf_counter()
        backend.apply_bitmask(logits, bitmask, [0])
        fill.append((filled - start) * 1000)
        apply.append((time.perf_counter() - filled) * 1000)
        if not matcher.accept_token(token):
            raise SystemExit(f"{backend.name}: the replayed run breaks its own grammar")
    total = sorted(f + a for f, a in zip(fill, apply, strict=False))
    return {"mask_fill_ms_median": statistics.median(fill),
            "mask_apply_ms_median": statistics.median(apply),
            "mask_ms_per_token_median": statistics.median(total),
            "mask_ms_per_token_p99": total[int(len(total) * 0.99)],
            "mask_ms_first_token": fill[0] + apply[0]}


def _lookup_times(cache: GrammarCache, table: KeywordTable, *, bfcl: bool) -> dict[str, Any]:
    """Median milliseconds for a cache hit on BFCL tool-call grammars (or, without `bfcl`,
    on the story schema's): the lookup alone, and the whole request-path cost (schema check
    + canonical key + lookup)."""
    questions = [json.loads(line) for line in BFCL.open()][:50] if bfcl else []
    params = [[(f["name"], bfcl_to_json_schema(f["parameters"])) for f in q["function"]]
              for q in questions] or [[("f", STORY)]]

    def spec_for(tools: list[tuple[str, dict[str, Any]]]) -> ToolCallsSpec:
        return ToolCallsSpec(tuple(ToolSpec.from_parameters(n, p, table=table)
                                   for n, p in tools))

    specs = [spec_for(t) for t in params]
    for spec in specs:
        cache.get(spec)  # compile once: everything below is a hit
    compile_ms = [cache.get(s).grammar.compile_seconds * 1000 for s in specs]
    lookup, path = [], []
    for _ in range(20):
        for spec, tools in zip(specs, params, strict=False):
            lookup.append(cache.get(spec).seconds * 1000)
            start = time.perf_counter()
            assert cache.get(spec_for(tools)).hit
            path.append((time.perf_counter() - start) * 1000)
    return {"lookup_grammars": f"{len(specs)} BFCL simple_python tool-call grammars" if bfcl
            else "1 story schema's tool-call grammar (--no-bfcl)",
            "cold_compile_ms_median": statistics.median(compile_ms),
            "hit_lookup_ms_median": statistics.median(lookup),
            "hit_lookup_ms_p99": sorted(lookup)[int(len(lookup) * 0.99)],
            "hit_request_path_ms_median": statistics.median(path)}


def _result(rounds: list[dict[str, float]], lookups: dict[str, Any], masks: dict[str, float],
            args: argparse.Namespace) -> dict[str, Any]:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    def ratios(over: str, under: str) -> dict[str, float]:
        # The median of per-round ratios (each round ran back to back under the same load)
        # beside the ratio of the medians.
        return {"median_ratio": round(statistics.median(r[over] / r[under] for r in rounds), 3),
                "ratio_of_medians": round(median(over) / median(under), 3)}

    step_ms = 1000 / median("stepwise_steps_s")
    per_step = ratios("stepwise_steps_s", "free_steps_s")
    return {"unconstrained_tok_s_median": round(median("free_steps_s"), 2),
            "constrained_tok_s_median": round(median("stepwise_steps_s"), 2),
            # the headline: one token a step on both sides, the grammar's cost alone
            "ratio_constrained_over_unconstrained": per_step["median_ratio"],
            "ratio_goal": 0.95, "per_step": per_step,
            # as served: jump-forward feeds forced tokens several a step, so a served step
            # costs more and the answer needs fewer of them
            "served_per_step": ratios("served_steps_s", "free_steps_s"),
            "served_per_output_token": ratios("served_tok_s", "free_tok_s"),
            "served_tok_s_median": round(median("served_tok_s"), 2),
            "forced_tokens_median": median("forced"),
            "rounds": args.rounds, "max_tokens": args.tokens, "threads": args.threads,
            "pairs": len(rounds), "tokens_per_run_median": median("tokens"),
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in lookups.items()},
            "hit_lookup_goal_ms": 1.0,
            "decode_step_ms_median": round(step_ms, 2),
            **{k: round(v, 4) for k, v in masks.items()},
            "mask_share_of_step": round(masks["mask_ms_per_token_median"] / step_ms, 4),
            "mask_share_goal": 0.05,
            "per_round": [{k: round(v, 3) for k, v in r.items()} for r in rounds]}

if __name__ == "__main__":
    raise SystemExit(main())
