"""The torch engine on a GPU: constrained against unconstrained time per output token at
batch 1 and 32, mask time per decode step (fill + apply), jump-forward on and off, on
random-weight Llama-shaped models (1B and 8B configs) with the embedded model's tokenizer.

    strictcall-bench gpu-decode [--sizes 1b,8b] [--batches 1,32] [--tokens 48] [--rounds 2]
                                [--tiny] [--device auto] [--out bench/results/gpu_decode]

Sized to finish in under 8 minutes on one H200 (no network needed: the weights are made
here, the tokenizer is read from the embedded model's directory or --tokenizer DIR).
`--tiny` runs a 2-layer config on the CPU, for the test and for a quick look.

Random weights under a grammar can wander: the schema bounds every string (maxLength) and
choice (enum), max_tokens is fixed, and the tokens each run produced are counted and
reported. Time per output token is a request's decode time over its tokens after the first
(batch 32: all requests share each step). Jump-forward is measured where the engine takes
`jump_forward=` (otherwise reported as unsupported).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import torch

from bench.common.results_file import add_save_flag, save
from grammars import JsonSchemaSpec
from server.engines.base import GenerationRequest, SamplingParams
from server.model_store import embedded_model_dir

# Llama 3.2 1B and Llama 3.1 8B shapes, our tokenizer's vocabulary; tiny for the CPU.
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    "1b": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
           "num_attention_heads": 32, "num_key_value_heads": 8},
    "8b": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8},
}
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "kind": {"enum": ["alpha", "beta", "gamma"]},
    "count": {"type": "integer", "minimum": 0, "maximum": 999},
    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 6}}},
    "required": ["name", "kind", "count", "tags"]}
PROMPT = "Describe one item as JSON with a name, a kind, a count and tags."
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja", "generation_config.json")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.tiny:
        args.sizes, args.device = "tiny", "cpu" if args.device == "auto" else args.device
    tokenizer_dir = args.tokenizer or embedded_model_dir()
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise SystemExit(f"no tokenizer.json in {str(tokenizer_dir)!r}: run `strictcall "
                         "fetch-model` first, or pass --tokenizer DIR (the embedded "
                         "model's directory, copied to a machine without network)")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for size in args.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix=f"gpu-decode-{size}-") as tmp:
            model_dir = make_model(size, tokenizer_dir, Path(tmp), device=args.device)
            rows += measure_size(size, model_dir, args)
        print(f"{size}: done at {time.perf_counter() - started:.0f} s", file=sys.stderr)
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "device": _device_name(
        args.device), "seconds": round(time.perf_counter() - started, 1), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_decode.json").write_text(json.dumps(result, indent=1))
    if args.save:
        save("gpu-decode", result, argv)
    text = table(result)
    (args.out / "gpu_decode.md").write_text(text + "\n")
    print(text)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strictcall-bench gpu-decode", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1b,8b", help=f"of {', '.join(SHAPES)}")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--tokens", type=int, default=48, help="max_tokens of every request")
    p.add_argument("--rounds", type=int, default=2, help="runs of each setting")
    p.add_argument("--tiny", action="store_true", help="the tiny config on the CPU")
    p.add_argument("--device", default="auto")
    p.add_argument("--tokenizer", type=Path, help="a directory with the tokenizer files")
    p.add_argument("--out", type=Path, default=Path("bench/results/gpu_decode"))
    add_save_flag(p)
    return p


def make_model(size: str, tokenizer_dir: Path, out: Path, *, device: str) -> Path:
    """A random-weight Llama of shape `size` in `out`, with the tokenizer's files beside it
    (bf16 on CUDA, made on the device: initializing 8B parameters on the CPU is slow)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    shape: dict[str, Any] = SHAPES[size]
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
                         **shape)
    cuda = device != "cpu" and torch.cuda.is_available()
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):
        # Any: transformers' @wraps(Module.to) makes mypy see .to() unbound (self first)
        model = cast(Any, LlamaForCausalLM(config)).to(torch.bfloat16 if cuda else torch.float32)
    model.save_pretrained(out)
    del model
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file() and name != "generation_config.json":
            shutil.copy(tokenizer_dir / name, out / name)
    if cuda:
        torch.cuda.empty_cache()
    return out


def measure_size(size: str, model_dir: Path, args: argparse.Namespace
                 ) -> list[dict[str, Any]]:
    """Every setting on one model: unconstrained and constrained with jump-forward off (or
    the engine's only behaviour), then constrained with it on where the engine has it."""
    from server.engines.torch_engine import TorchEngine

    batches = [int(b) for b in args.batches.split(",")]
    takes_jf = "jump_forward" in inspect.signature(TorchEngine.__init__).parameters
    rows: list[dict[str, Any]] = []
    for jump_forward in ([False, True] if takes_jf else [None]):
        options: dict[str, Any] = {} if jump_forward is None else {"jump_forward": jump_forward}
        engine = TorchEngine(model_dir, device=args.device, max_batch=max(batches),
                             **options)
        try:
            modes = ["unconstrained", "constrained"] if not jump_forward else ["constrained"]
            for batch in batches:
                for mode in modes:
                    label = mode if jump_forward is None else (
                        f"{mode}, jump-forward {'on' if jump_forward else 'off'}")
                    rows.append({"size": size, "batch": batch, "mode": label,
                                 **measure(engine, mode, batch, args)})
        finally:
            engine.close()
    if not takes_jf:
        rows.append({"size": size, "mode": "jump-forward", "note": "unsupported: this "
                     "TorchEngine takes no jump_forward argument"})
    return rows


def measure(engine: Any, mode: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    """`args.rounds` runs of `batch` identical requests at once (after one warm-up run)."""
    backend = engine.grammar_backend
    grammar = backend.compile(JsonSchemaSpec.from_schema(SCHEMA, table=backend.keywords)) \
        if mode == "constrained" else None
    ids = engine.encode(engine.render_chat([{"role": "user", "content": PROMPT}]))
    request = GenerationRequest(ids, SamplingParams(max_tokens=args.tokens), grammar)
    asyncio.run(_batch(engine, request, batch))  # warm-up: kernels, allocator
    before = engine.stats()
    tpot, tokens, steps_s, out_tokens, cut = [], [], [], [], 0
    for _ in range(args.rounds):
        started = time.perf_counter()
        results = asyncio.run(_batch(engine, request, batch))
        steps_s.append(time.perf_counter() - started)
        for r in results:
            tokens.append(r.completion_tokens)
            cut += r.finish_reason == "length"
            if r.timings.get("sampled", 0) > 1 and r.timings.get("decode_s"):
                tpot.append(r.timings["decode_s"] / (r.timings["sampled"] - 1))
        out_tokens.append(max((list(r.token_ids) for r in results), key=len))
    counters = {k: v - before.get(k, 0) for k, v in engine.stats().items()
                if k in ("decode_steps", "jump_forward_tokens")}
    row = {"requests": len(tokens), "cut_off": cut,
           "tokens_p50": statistics.median(tokens), "tokens_max": max(tokens),
           "tpot_ms_p50": round(1000 * statistics.median(tpot), 3) if tpot else None,
           "batch_tokens_per_s": round(sum(tokens) / sum(steps_s), 1), **counters}
    if grammar is not None:
        row.update(mask_times(engine, grammar, max(out_tokens, key=len), batch))
        if row["tpot_ms_p50"]:
            row["mask_share_of_step"] = round(row["mask_ms_per_step"] / row["tpot_ms_p50"], 4)
    return row


async def _batch(engine: Any, request: GenerationRequest, batch: int) -> list[Any]:
    return await asyncio.gather(*(engine.generate(request) for _ in range(batch)))


def mask_times(engine: Any, grammar: Any, tokens: list[int], batch: int) -> dict[str, float]:
    """Median milliseconds per decode step to fill `batch` bitmask rows (one matcher each,
    replaying a run's tokens) and apply them to the batch's logits on the engine's device."""
    backend = engine.grammar_backend
    matchers = [backend.matcher(grammar) for _ in range(batch)]
    bitmask = backend.allocate_bitmask(batch)
    logits = torch.zeros((batch, backend.vocab_size), device=engine.device)
    rows = list(range(batch))
    fill, apply = [], []
    for token in tokens:
        start = time.perf_counter()
        for row, matcher in enumerate(matchers):
            matcher.fill_bitmask(bitmask, row)
        filled = time.perf_counter()
        backend.apply_bitmask(logits, bitmask, rows)
        if engine.device.type == "cuda":
            torch.cuda.synchronize()
        fill.append(1000 * (filled - start))
        apply.append(1000 * (time.perf_counter() - filled))
        for matcher in matchers:
            matcher.accept_token(token)
    if not fill:
        return {}
    return {"mask_fill_ms_per_step": round(statistics.median(fill), 4),
            "mask_apply_ms_per_step": round(statistics.median(apply), 4),
            "mask_ms_per_step": round(statistics.median(
                f + a for f, a in zip(fill, apply, strict=False)),
                                      4)}


def _device_name(device: str) -> str:
    if device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return "cpu"


def table(result: dict[str, Any]) -> str:
    lines = [f"device: {result['device']}; {result['seconds']} s in all", "",
             "| model | batch | mode | tokens p50 (max) | cut off | ms/token p50 | "
             "tokens/s (batch) | mask ms/step (fill + apply) | mask share of step | "
             "jump-forward tokens |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "note" in r:
            lines.append(f"| {r['size']} | - | {r['mode']} | {r['note']} | | | | | | |")
            continue
        mask = "-" if "mask_ms_per_step" not in r else (
            f"{r['mask_ms_per_step']:.3f} ({r['mask_fill_ms_per_step']:.3f} + "
            f"{r['mask_apply_ms_per_step']:.3f})")
        share = r.get("mask_share_of_step")
        lines.append(f"| {r['size']} | {r['batch']} | {r['mode']} | {r['tokens_p50']:g} "
                     f"({r['tokens_max']}) | {r['cut_off']} of {r['requests']} | "
                     f"{r['tpot_ms_p50']} | {r['batch_tokens_per_s']} "
                     f"| {mask} | {'-' if share is None else f'{share:.1%}'} | "
                     f"{r.get('jump_forward_tokens', '-')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
