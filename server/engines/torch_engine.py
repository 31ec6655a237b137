"""TorchEngine: a transformers causal LM with its own KV-cache decode loop (engines/loop.py),
on CPU (fp32) or a CUDA GPU (bf16, the grammar bitmask applied on the device).

Each request is prefilled after the longest prefix of its prompt found in the prefix cache
(engines/prefix_cache.py), then joins one left-padded batch cache (engines/kv_batch.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from grammars import MaskingBackend, make_backend
from server.engines import rules
from server.engines.kv_batch import KvBatch
from server.engines.loop import DecodeRow, SteppedEngine
from server.engines.prefix_cache import PrefixCache


class TorchEngine(SteppedEngine):
    def __init__(self, model_dir: Path, *, device: str = "auto", threads: int = 1,
                 max_batch: int = 8, model_name: str | None = None,
                 grammar_backend: str = "xgrammar", step_timeout_s: float = 60.0,
                 jump_forward: bool = True, prefix_cache_bytes: int = 256 * 2**20) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = _pick_device(device)
        if self.device.type == "cpu":
            torch.set_num_threads(threads)
        dtype = torch.float32 if self.device.type == "cpu" else torch.bfloat16
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model_dir = Path(model_dir)
        # Any: transformers' types do not follow a model through .to() and its forward.
        model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        self.model = model.to(self.device).eval()
        self.model_name = model_name or Path(model_dir).name
        config = self.model.config
        self.max_context = int(getattr(config, "max_position_embeddings", 2048))
        self.eos_token_ids = rules.eos_token_ids(model_dir, self.tokenizer)
        self.vocab_size = int(config.vocab_size)
        self.grammar_backend: MaskingBackend = make_backend(
            grammar_backend, self.tokenizer, vocab_size=self.vocab_size,
            stop_token_ids=sorted(self.eos_token_ids))
        self._prefixes = PrefixCache(prefix_cache_bytes)
        self._batch = KvBatch(config)
        self._prefilled: DynamicCache | None = None  # the last prefill's, until it joins
        self._start(name="torch-engine", max_batch=max_batch, step_timeout_s=step_timeout_s,
                    jump_forward=jump_forward)

    @torch.inference_mode()
    def _prefill_logits(self, seq: DecodeRow) -> torch.Tensor:
        prompt = seq.request.prompt_ids
        hit = self._prefixes.lookup(prompt)
        reused = hit.tokens if hit is not None else 0
        ids = torch.tensor([prompt[reused:]], dtype=torch.long, device=self.device)
        self._counts["prefill_tokens"] += len(prompt) - reused
        if hit is not None:
            self._counts["prefix_hits"] += 1
            self._counts["prefix_reused_tokens"] += reused
            past = DynamicCache(ddp_cache_data=hit.layers, config=self.model.config)
            out = self.model(input_ids=ids, cache=past, use_cache=True)
        else:
            out = self.model(input_ids=ids, use_cache=True)
        seq.timings["prefix_reused_tokens"] = reused
        self._prefixes.store(prompt, [(layer.keys, layer.values) for layer in out.cache.layers])
        self._prefilled = out.cache
        return out.logits[0, -1, :].float()

    def _join(self, seq: DecodeRow) -> None:
        assert self._prefilled is not None
        self._batch.add(self._prefilled, len(seq.request.prompt_ids))
        self._prefilled = None

    def _released(self, seq: DecodeRow) -> None:
        self._prefilled = None

    @torch.inference_mode()
    def _step_logits(self, rows: list[DecodeRow]) -> torch.Tensor:
        counts = [len(s.pending) for s in rows]
        mask, positions = self._batch.step_inputs(counts)
        width = max(counts)  # rows right-aligned; a shorter row's padding is masked out
        tokens = torch.tensor([[0] * (width - len(s.pending)) + s.pending for s in rows],
                              dtype=torch.long, device=self.device)
        out = self.model(input_ids=tokens, attention_mask=mask, position_ids=positions,
                         cache=self._batch.cache, use_cache=True)
        self._batch.advance(mask, counts)
        return out.logits[:, -1, :]

    def _keep_rows(self, keep: list[int], rows: list[DecodeRow]) -> None:
        self._batch.keep(keep)

    def close(self) -> None:
        super().close()
        self._prefixes.clear()


def _pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA GPU")
    return torch.device(device)
