"""The torch engine's cheap CPU wins, measured against llama.cpp in one run: greedy decode
speed of the embedded model at batch 1 (one compute thread) for
- torch fp32 (the torch engine as it ships),
- torch with int8 dynamic quantization of the Linear layers (`torch.ao` quantize_dynamic),
- torch fp32 under `torch.compile` (the decode step; compile time reported apart),
- the llama.cpp engine on the Q4_1 GGUF,
each through the same decode loop (engines/loop.py) on the same prompt, alternating rounds.

    strictcall-bench cpu-variants [--rounds 3] [--tokens 48] [--variants fp32,int8,compile,llamacpp]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.common.results_file import add_save_flag, save
from server.engines.base import Engine, GenerationRequest, SamplingParams
from server.model_store import resolve_model

PROMPT = "Write a long story about a lighthouse keeper."
VARIANTS = ("fp32", "int8", "compile", "llamacpp")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="strictcall-bench cpu-variants", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--threads", type=int, default=1)
    add_save_flag(p)
    args = p.parse_args(argv)
    model_dir = resolve_model(None)
    engines: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for name in args.variants.split(","):
        start = time.perf_counter()
        try:
            engines[name] = _engine(name, model_dir, args.threads)
        except ImportError as exc:
            notes[name] = f"skipped: {exc}"
            continue
        notes[name] = f"ready in {time.perf_counter() - start:.1f} s"
    speeds: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.rounds):
        for name, engine in engines.items():  # alternating: noise hits every variant
            speeds[name].append(_tokens_per_s(engine, args.tokens))
    for engine in engines.values():
        engine.close()
    base = statistics.median(speeds["fp32"]) if speeds.get("fp32") else None
    if args.save:
        save("cpu-variants", {"tokens": args.tokens, "rounds": args.rounds, "speeds": speeds,
                              "notes": notes}, argv)
    print("| variant | tokens/s (median) | vs torch fp32 | notes |")
    print("|---|---|---|---|")
    for name in args.variants.split(","):
        if name not in speeds:
            print(f"| {name} | - | - | {notes[name]} |")
            continue
        median = statistics.median(speeds[name])
        ratio = f"{median / base:.2f}x" if base else "-"
        print(f"| {name} | {median:.1f} | {ratio} | {notes[name]} |")
    return 0


def _engine(name: str, model_dir: Path, threads: int) -> Engine:
    if name == "llamacpp":
        from server.engines.llamacpp_engine import LlamaCppEngine

        return LlamaCppEngine(model_dir, threads=threads, max_batch=1, prefix_cache_bytes=0)
    from server.engines.torch_engine import TorchEngine

    # torch.compile's first steps compile for minutes: not a hung step here.
    engine = TorchEngine(model_dir, device="cpu", threads=threads, max_batch=1,
                         prefix_cache_bytes=0, step_timeout_s=1800)
    if name == "int8":
        engine.model = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            engine.model, {torch.nn.Linear}, dtype=torch.qint8)
    elif name == "compile":
        engine.model.forward = torch.compile(engine.model.forward, dynamic=True)
        _tokens_per_s(engine, 4)  # the compile itself, outside the measurement
    elif name != "fp32":
        raise SystemExit(f"unknown variant {name!r}: use {', '.join(VARIANTS)}")
    return engine


def _tokens_per_s(engine: Engine, tokens: int) -> float:
    ids = engine.encode(engine.render_chat([{"role": "user", "content": PROMPT}]))
    request = GenerationRequest(ids, SamplingParams(max_tokens=tokens))
    result = asyncio.run(engine.generate(request))
    decode_s = result.timings.get("decode_s", 0.0)
    if result.completion_tokens < 2 or decode_s <= 0:
        print(f"warning: {result.completion_tokens} tokens only", file=sys.stderr)
        return 0.0
    return (result.completion_tokens - 1) / decode_s


if __name__ == "__main__":
    sys.exit(main())
