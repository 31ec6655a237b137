"""VllmEngine: vLLM's v1 async engine (`AsyncLLM`) behind the `Engine` seam.

The grammar layer still decides *what* is allowed (the spec, its enforcement report, the
post-decode checks); vLLM compiles the spec and applies the masks itself (on the GPU in
production), through its structured-outputs parameters. So this engine's grammar backend
does not compile: it checks that vLLM will take the spec and hands the spec on.

vLLM is imported only here, and only when this engine is built: `.venv` (torch engine)
does not have it; `.venv-vllm` (`make setup-vllm`) does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grammars import (
    VLLM_XGRAMMAR_KEYWORDS,
    CompiledGrammar,
    GrammarBackend,
    GrammarSpec,
    InvalidSchemaError,
    tokenizer_fingerprint,
)
from server.engines import rules
from server.engines.base import (
    Engine,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
)
from server.engines.json_text import JsonClose
from server.engines.tokenizer_files import load_tokenizer
from server.engines.vllm_specs import structured_outputs

# Compact JSON, as the torch engine writes it; xgrammar, as our tables assume. Benchmarks
# give vLLM's own server the same (bench/speed/latency_systems.py), so both write alike.
STRUCTURED_OUTPUTS_CONFIG: dict[str, Any] = {"backend": "xgrammar",
                                             "disable_any_whitespace": True}

log = logging.getLogger("strictcall.engine")


@dataclass(frozen=True)
class VllmOptions:
    """Engine arguments users of vLLM set; None leaves vLLM's own default."""

    device: str = "auto"
    threads: int = 1
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    dtype: str = "auto"
    enable_prefix_caching: bool | None = None
    seed: int = 0
    # vLLM's n-gram (prompt-lookup) speculative decoding, as the embedded engines' drafts:
    # up to this many tokens a step, from the prompt's last match of at least
    # `speculate_min_match` tokens; 0: off. It works with structured outputs (vLLM drops
    # the drafts its grammar refuses) and on vLLM's CPU build.
    speculate_tokens: int = 0
    speculate_min_match: int = 3


def speculative_config(options: VllmOptions) -> dict[str, Any] | None:
    """vLLM's `speculative_config` for n-gram drafts (None: off). The match is looked up
    from its longest (`prompt_lookup_max`) down to `speculate_min_match` tokens."""
    if options.speculate_tokens <= 0:
        return None
    return {"method": "ngram", "num_speculative_tokens": options.speculate_tokens,
            "prompt_lookup_min": options.speculate_min_match,
            "prompt_lookup_max": max(options.speculate_min_match, 5)}


def cpu_environment(threads: int, cache_dir: Path) -> dict[str, str]:
    """What vLLM's CPU build needs to run well on a small shared machine (see FINDINGS):
    no core pinning, a 1 GiB KV cache, our thread count, its files kept under our cache."""
    return {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_KVCACHE_SPACE": "1",
            "OMP_NUM_THREADS": str(threads), "VLLM_CACHE_ROOT": str(cache_dir / "vllm")}


class VllmGrammarBackend(GrammarBackend):
    """Grammar backend of the vLLM engine: vLLM compiles and applies the masks in its own
    process, so this is no `MaskingBackend`; `compile` only checks that vLLM's xgrammar
    backend accepts the spec, so a refusal is a 400 before decoding. Strict objects only
    (the inherited `set_strict_objects`); nothing to persist."""

    name = "vllm-xgrammar"
    keywords = VLLM_XGRAMMAR_KEYWORDS
    options_key = "vllm:disable_any_whitespace"

    def __init__(self, tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int]) -> None:
        import vllm

        self.version = (f"vllm {vllm.__version__}; "
                        f"xgrammar {importlib.metadata.version('xgrammar')}")
        self.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer, vocab_size,
                                                           stop_token_ids)

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        from vllm.sampling_params import SamplingParams as VllmSamplingParams
        from vllm.sampling_params import StructuredOutputsParams
        from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

        start = time.perf_counter()
        params = VllmSamplingParams(structured_outputs=StructuredOutputsParams(
            **structured_outputs(spec)))
        try:
            validate_xgrammar_grammar(params)
        except ValueError as exc:  # VLLMValidationError is a ValueError
            raise InvalidSchemaError(f"vLLM's grammar backend refuses the schema: {exc}",
                                     hint="Simplify the schema.") from None
        return CompiledGrammar(spec, None, time.perf_counter() - start)


class VllmEngine(Engine):
    def __init__(self, model_dir: Path, *, options: VllmOptions, cache_dir: Path,
                 model_name: str | None = None) -> None:
        import torch

        on_cpu = options.device == "cpu" or (options.device == "auto"
                                             and not torch.cuda.is_available())
        if on_cpu:
            for key, value in cpu_environment(options.threads, cache_dir).items():
                os.environ.setdefault(key, value)
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.tokenizer = load_tokenizer(model_dir)
        self.model_dir = Path(model_dir)
        self.model_name = model_name or Path(model_dir).name
        max_len = options.max_model_len or (2048 if on_cpu else None)
        args: dict[str, Any] = {
            "model": str(model_dir), "tokenizer": str(model_dir),
            "served_model_name": [self.model_name],
            "dtype": "bfloat16" if on_cpu and options.dtype == "auto" else options.dtype,
            "tensor_parallel_size": options.tensor_parallel_size, "seed": options.seed,
            "structured_outputs_config": dict(STRUCTURED_OUTPUTS_CONFIG),
            "disable_log_stats": True,
        }
        if max_len is not None:
            args["max_model_len"] = max_len
        if options.gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = options.gpu_memory_utilization
        if options.enable_prefix_caching is not None:
            args["enable_prefix_caching"] = options.enable_prefix_caching
        if (speculative := speculative_config(options)) is not None:
            args["speculative_config"] = speculative
        if on_cpu:  # CUDA graphs do not exist there; one worker, in the engine-core process
            args.update(enforce_eager=True, distributed_executor_backend="uni")
        started = time.perf_counter()
        self._llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        self.startup_seconds = time.perf_counter() - started
        config = self._llm.vllm_config.model_config
        self.max_context = int(config.max_model_len)
        vocab_size = int(config.get_vocab_size())
        self.eos_token_ids = rules.eos_token_ids(model_dir, self.tokenizer)
        # vLLM ends on the tokenizer's EOS and the generation config's; the rest of ours too.
        self._extra_stop_ids = sorted(self.eos_token_ids - {self.tokenizer.eos_token_id})
        self.grammar_backend = VllmGrammarBackend(
            self.tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(self.eos_token_ids))
        self._counts = {"running": 0, "finished": 0, "cancelled": 0, "grammars_warmed": 0,
                        "ended_at_close": 0}
        log.info("vLLM engine ready in %.1f s (max_model_len %d)", self.startup_seconds,
                 self.max_context)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        from vllm import SamplingParams as VllmSamplingParams
        from vllm import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        s = request.sampling
        grammar = request.grammar
        params = VllmSamplingParams(
            max_tokens=s.max_tokens, temperature=s.temperature, top_p=s.top_p, seed=s.seed,
            stop=list(rules.applied_stop_strings(s, constrained=grammar is not None)),
            stop_token_ids=self._extra_stop_ids,
            structured_outputs=StructuredOutputsParams(**structured_outputs(grammar.spec))
            if grammar is not None else None,
            skip_special_tokens=self.skip_special_tokens,
            output_kind=RequestOutputKind.DELTA)
        request_id = f"strictcall-{uuid.uuid4().hex}"
        # A JSON value's grammar allows only EOS once the value has closed: end there rather
        # than wait a model step for the EOS token (vLLM aborts the request as we leave).
        close = JsonClose.for_spec(grammar.spec if grammar is not None else None)
        tokens: list[int] = []
        pieces: list[str] = []
        finish: str | None = None
        stop_reason: int | str | None = None
        started = time.perf_counter()
        first_at = None
        self._counts["running"] += 1
        try:
            # Cancelling this task (a client that went away), or leaving the loop, makes
            # vLLM abort the request.
            async with contextlib.aclosing(self._llm.generate(
                    TokensPrompt(prompt_token_ids=list(request.prompt_ids)), params,
                    request_id)) as outputs:
                async for out in outputs:
                    output = out.outputs[0]
                    if output.token_ids and first_at is None:
                        first_at = time.perf_counter()
                    for token in output.token_ids:
                        tokens.append(int(token))
                        if request.on_token is not None:
                            request.on_token(int(token))
                    pieces.append(output.text)
                    finish = output.finish_reason or finish
                    stop_reason = output.stop_reason if output.stop_reason is not None \
                        else stop_reason
                    if finish is None and close is not None and close.add(output.text):
                        finish, stop_reason = "stop", None  # as on EOS (JsonClose)
                        self._counts["ended_at_close"] += 1
                        break
        except asyncio.CancelledError:  # vLLM has aborted the request
            self._counts["cancelled"] += 1
            raise
        finally:
            self._counts["running"] -= 1
        self._counts["finished"] += 1
        ended = time.perf_counter()
        reason: FinishReason = "length" if finish == "length" else "stop"
        timings = {"total": ended - started, "first_token": (first_at or ended) - started}
        complete = rules.grammar_complete(constrained=grammar is not None,
                                          ended_on_eos=_ended_on_eos(finish, stop_reason))
        return GenerationResult(tuple(tokens), "".join(pieces), reason, len(request.prompt_ids),
                                grammar_complete=complete, timings=timings)

    async def warm(self, grammars: list[CompiledGrammar]) -> None:
        """Have vLLM compile and cache each grammar now (a one-token decode under it), so no
        request pays for it: vLLM's pinned xgrammar 0.2.8 takes seconds on string lengths."""
        prompt = self.encode(self.render_chat([{"role": "user", "content": "hi"}]))
        one = SamplingParams(max_tokens=1)
        await asyncio.gather(*(self.generate(GenerationRequest(prompt, one, g))
                               for g in grammars))
        self._counts["grammars_warmed"] += len(grammars)

    def stats(self) -> dict[str, int]:
        return dict(self._counts)

    def close(self) -> None:
        self._llm.shutdown()


def _ended_on_eos(finish_reason: str | None, stop_reason: int | str | None) -> bool:
    """vLLM's account of an end on EOS: "stop" with stop_reason None (its EOS token) or a
    token id (one of its stop_token_ids, which here are all EOS ids); a string is a stop
    string (see rules.grammar_complete)."""
    return finish_reason == "stop" and (stop_reason is None or isinstance(stop_reason, int))
