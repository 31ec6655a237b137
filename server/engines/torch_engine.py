"""TorchEngine: a transformers causal LM with its own KV-cache decode loop (engines/loop.py),
on CPU (fp32) or a CUDA GPU (bf16, the grammar bitmask applied on the device).

Each request is prefilled after the longest prefix of its prompt found in the prefix cache
(engines/prefix_cache.py), then joins one left-padded batch cache (engines/kv_batch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache

from grammars import MaskingBackend, make_backend
from server.engines import rules
from server.engines.drafts import Speculation
from server.engines.kv_batch import KvBatch
from server.engines.loop import DecodeRow, SteppedEngine
from server.engines.prefix_cache import PrefixCache
from server.engines.scheduler import SchedulePolicy
from server.engines.tokenizer_files import load_tokenizer


class TorchEngine(SteppedEngine):
    def __init__(self, model_dir: Path, *, device: str = "auto", threads: int = 1,
                 max_batch: int = 8, model_name: str | None = None,
                 grammar_backend: str = "xgrammar", step_timeout_s: float = 60.0,
                 jump_forward: bool = True, prefix_cache_bytes: int = 256 * 2**20,
                 schedule: SchedulePolicy | None = None,
                 speculation: Speculation | None = None) -> None:
        from transformers import AutoModelForCausalLM

        self.device = _pick_device(device)
        if self.device.type == "cpu":
            torch.set_num_threads(threads)
        dtype = torch.float32 if self.device.type == "cpu" else torch.bfloat16
        self.tokenizer = load_tokenizer(model_dir)
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
        self._start(name="torch-engine", max_batch=max_batch, step_timeout_s=step_timeout_s,
                    jump_forward=jump_forward, schedule=schedule, speculation=speculation)

    def memory(self) -> dict[str, int]:
        return {"prefix_cache_budget_bytes": self._prefixes.max_bytes,
                "prefix_cache_bytes": self._prefixes.size_bytes, **super().memory()}

    def _reusable(self, prompt: Sequence[int]) -> int:
        return self._prefixes.longest(tuple(prompt))

    def _begin(self, seq: DecodeRow) -> None:
        hit = self._prefixes.lookup(seq.request.prompt_ids)
        if hit is not None:
            self._counts["prefix_hits"] += 1
            self._counts["prefix_reused_tokens"] += hit.tokens
            seq.state = DynamicCache(ddp_cache_data=hit.layers, config=self.model.config)
            seq.prefilled = hit.tokens
        seq.timings["prefix_reused_tokens"] = seq.prefilled

    @torch.inference_mode()
    def _prefill_chunk(self, seq: DecodeRow, n: int) -> torch.Tensor | None:
        prompt = seq.request.prompt_ids
        ids = torch.tensor([prompt[seq.prefilled:seq.prefilled + n]], dtype=torch.long,
                           device=self.device)
        out = self.model(input_ids=ids, cache=seq.state, use_cache=True, logits_to_keep=1)
        seq.state = out.cache
        seq.prefilled += n
        self._counts["prefill_tokens"] += n
        if seq.prefilled < len(prompt):
            return None
        self._prefixes.store(prompt, [(layer.keys, layer.values) for layer in out.cache.layers])
        logits: torch.Tensor = out.logits[0, -1, :].float()
        return logits

    def _join(self, seq: DecodeRow) -> None:
        self._batch.add(seq.state, len(seq.request.prompt_ids))
        seq.state = None

    def _released(self, seq: DecodeRow) -> None:
        seq.state = None

    @torch.inference_mode()
    def _step_logits(self, rows: list[DecodeRow]) -> torch.Tensor:
        feeds = [s.pending + s.drafts for s in rows]
        counts = [len(f) for f in feeds]
        mask, positions = self._batch.step_inputs(counts)
        width = max(counts)  # rows right-aligned; a shorter row's padding is masked out
        tokens = torch.tensor([[0] * (width - len(f)) + f for f in feeds],
                              dtype=torch.long, device=self.device)
        outputs = [1 + len(s.drafts) for s in rows]
        out = self.model(input_ids=tokens, attention_mask=mask, position_ids=positions,
                         cache=self._batch.cache, use_cache=True,
                         logits_to_keep=max(outputs))
        self._batch.advance(mask, counts)
        if max(outputs) == 1:
            last: torch.Tensor = out.logits[:, -1, :]
            return last
        return torch.cat([out.logits[r, -k:, :] for r, k in enumerate(outputs)])

    def _rewind(self, seq: DecodeRow, n: int) -> None:
        self._batch.rewind(self._rows.index(seq), n)

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
