"""Constrained vs unconstrained decode speed, grammar-cache lookup time and the per-token mask
time (fill + apply), per grammar backend, in one run (this machine is shared and noisy:
compare the ratios, not the absolute numbers).

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

    engine = TorchEngine(resolve_model(args.model), device=args.device, threads=args.threads,
                         grammar_backend=backend_name)
    try:
        backend = engine.grammar_backend
        cache = GrammarCache(backend)
        spec = JsonSchemaSpec.from_schema(STORY, table=backend.keywords)
        ids = engine.encode(engine.render_chat([{"role": "user", "content": PROMPT}]))
        free, constrained, tokens = asyncio.run(_decode_rounds(engine, ids,
                                                               cache.get(spec).grammar, args))
        lookups = _lookup_times(cache, backend.keywords, bfcl=not args.no_bfcl)
        masks = _mask_times(backend, spec, tokens)
    finally:
        engine.close()
    return _result(free, constrained, lookups, masks, args)


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


async def _decode_rounds(engine: Engine, ids: tuple[int, ...], grammar: CompiledGrammar,
                         args: argparse.Namespace) -> tuple[list[float], list[float], list[int]]:
    """Alternate constrained and unconstrained runs of the same prompt, the free run capped at
    the length the constrained one produced (per-step cost grows with the KV length), so that
    load changes on the machine hit both alike. Returns decode tokens/s per run, and the
    tokens of the longest constrained run."""
    free: list[float] = []
    constrained: list[float] = []
    tokens: list[int] = []
    lengths: list[int] = []
    await engine.generate(GenerationRequest(ids, SamplingParams(max_tokens=8)))  # warm-up
    for _ in range(args.rounds):
        c = await engine.generate(GenerationRequest(ids, SamplingParams(args.tokens), grammar))
        f = await engine.generate(GenerationRequest(ids, SamplingParams(c.completion_tokens)))
        if c.completion_tokens < 3 or f.completion_tokens != c.completion_tokens:
            continue  # the free run ended early: lengths differ, the pair says nothing
        lengths.append(c.completion_tokens)
        tokens = max(tokens, list(c.token_ids), key=len)
        for r, sink in ((c, constrained), (f, free)):
            # Decode steps per second: every sampled token after the prefill's first one,
            # the closing EOS included (it costs a forward pass like any other token).
            sink.append((r.timings["sampled"] - 1) / r.timings["decode_s"])
    if not lengths:
        raise SystemExit("no comparable pair of runs: try another --tokens")
    args.lengths = lengths
    return free, constrained, tokens


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


def _result(free: list[float], constrained: list[float], lookups: dict[str, Any],
            masks: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
    # Median of per-pair ratios: each pair ran back to back under the same machine load.
    ratio = statistics.median(c / f for c, f in zip(constrained, free, strict=False))
    step_ms = 1000 / statistics.median(constrained)
    return {"unconstrained_tok_s_median": round(statistics.median(free), 2),
            "constrained_tok_s_median": round(statistics.median(constrained), 2),
            "ratio_constrained_over_unconstrained": round(ratio, 3), "ratio_goal": 0.95,
            "rounds": args.rounds, "max_tokens": args.tokens, "threads": args.threads,
            "pairs": len(args.lengths), "tokens_per_run_median": statistics.median(args.lengths),
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in lookups.items()},
            "hit_lookup_goal_ms": 1.0,
            "decode_step_ms_median": round(step_ms, 2),
            **{k: round(v, 4) for k, v in masks.items()},
            "mask_share_of_step": round(masks["mask_ms_per_token_median"] / step_ms, 4),
            "mask_share_goal": 0.05}


if __name__ == "__main__":
    raise SystemExit(main())
