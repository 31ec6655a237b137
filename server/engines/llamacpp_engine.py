"""LlamaCppEngine: llama.cpp (through llama-cpp-python's C API) running a GGUF, stepped by
the shared decode loop (engines/loop.py), so grammar masks, jump-forward, sampling, stop
strings, seeds, cancellation and the watchdog are the same as in the torch engine. Its logits
are numpy arrays (sampled with a numpy generator per request): a llama.cpp server never
imports torch (`keep_torch_out` in engines/factory.py).

One llama.cpp context with a unified KV cache holds every sequence: rows of the running
batch use sequence ids 0..max_batch-1 and decode together in one `llama_decode` per step
(a row fed its pending tokens at their own positions). Prefix reuse keeps finished prompts'
KV state in host memory (`llama_state_seq_get_data`, a copy of the prompt's cells, bounded
by --prefix-cache-mb, least recently used out), as llama-server's prompt cache does; a new
prompt sharing a prefix with a kept one has that state written back into its row
(`llama_state_seq_set_data`), cut to the shared prefix, and prefills only the rest. Kept
prompts are not kept in the KV cache itself: its attention spans every cell in use, masked
or not, so prompts parked there made every decode step slower (measured: 7.6 ms a step with
nothing else in the cache, 10-13 ms beside 3000 cells of other sequences). Logits are read in
place from llama.cpp's buffer and masked there: no copies per step."""

from __future__ import annotations

import ctypes
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from grammars import MaskingBackend, import_backends, make_backend
from server.engines import rules
from server.engines.drafts import Speculation
from server.engines.loop import DecodeRow, SteppedEngine
from server.engines.scheduler import SchedulePolicy
from server.engines.tokenizer_files import load_tokenizer
from server.model_store import find_gguf

log = logging.getLogger("strictcall.engine")

_MIN_REUSE = 16  # shorter shared prefixes (a template's first tokens) are not worth a lookup


class LlamaCppConfigError(Exception):
    pass


def _to_logging(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    """llama.cpp's own log lines, into Python logging (so `--log-format json` holds):
    errors as errors, the rest at debug level: load progress, and warnings such as
    "n_ctx_seq > n_ctx_train", which the unified KV cache (one context for all rows and
    parked prefixes) always triggers and which limits no request (`max_context` does)."""
    if level == 4:  # GGML_LOG_LEVEL_ERROR (ggml.h: NONE 0, DEBUG 1, INFO 2, WARN 3)
        log.error("llama.cpp: %s", text.decode(errors="replace").rstrip())
    elif log.isEnabledFor(logging.DEBUG):
        log.debug("llama.cpp: %s", text.decode(errors="replace").rstrip())


def _make_callback() -> Any:  # llama.cpp's ctypes log callback
    import llama_cpp

    return llama_cpp.llama_log_callback(_to_logging)


_LOG_CALLBACK = None  # kept referenced for as long as llama.cpp may call it


def amx_in_build() -> bool:
    """Whether the loaded llama.cpp was built with AMX (GGML_NATIVE on a Sapphire Rapids or
    later CPU). Its AMX weight buffers, repacked at load, crash in ggml_backend_amx_mul_mat
    on any batch of two or more tokens, so on the first prefill: seen with the llama.cpp
    vendored in llama-cpp-python 0.3.36 on Q4_1 weights, and reported upstream
    (llama.cpp #20824, closed without a fix). Call after llama_backend_init."""
    import llama_cpp

    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


class LlamaCppEngine(SteppedEngine):
    def __init__(self, model_dir: Path, *, threads: int = 1, max_batch: int = 8,
                 max_context: int | None = None, model_name: str | None = None,
                 grammar_backend: str = "xgrammar", step_timeout_s: float = 60.0,
                 jump_forward: bool = True, prefix_cache_bytes: int = 256 * 2**20,
                 schedule: SchedulePolicy | None = None,
                 speculation: Speculation | None = None) -> None:
        import llama_cpp

        self._ll = llama_cpp
        gguf = find_gguf(Path(model_dir))
        if gguf is None:
            raise LlamaCppConfigError(
                f"--engine llamacpp needs a .gguf file in {str(model_dir)!r} beside the "
                "tokenizer files; put the model's GGUF there (the embedded model has one)")
        self.model_dir = Path(model_dir)
        self.model_name = model_name or self.model_dir.name
        # llama.cpp's part first: its native calls run beside the Python work of a server
        # that builds its engine in the background while it imports (engines/factory.py).
        self._load(gguf, threads=threads)
        train_ctx = int(llama_cpp.llama_model_n_ctx_train(self._model))
        self.max_context = min(max_context or train_ctx, train_ctx)
        # One request may use the whole context; a full batch, 2048 tokens a row. Beyond
        # that, a step that finds no free cell fails its batch with a 503 (llama_decode 1).
        rows = max(self.max_context, max_batch * min(self.max_context, 2048))
        self._context(threads=threads, seqs=max_batch, cells=rows)
        self._free_rows = list(range(max_batch))
        # The drafts' cost is timed (model steps, in CPU time) on a thread of its own, beside
        # the tokenizer's and the grammar backend's Python; nothing else uses the context yet.
        pricing = ThreadPoolExecutor(1, thread_name_prefix="draft-cost")
        priced = pricing.submit(self._priced, speculation)
        pricing.shutdown(wait=False)
        try:
            self._tokenizer_and_grammars(Path(model_dir), gguf, grammar_backend)
        finally:
            speculation = priced.result()  # the context is free again, however this ends
        self._park_budget = prefix_cache_bytes  # kept prompts' state, in host memory
        self._sizes = {"kv_bytes_per_token": self._kv_bytes_per_token(),
                       "kv_cells": rows,
                       "kv_rows_bytes": rows * self._kv_bytes_per_token(),
                       "prefix_budget_bytes": prefix_cache_bytes}
        # prompt tokens -> their sequence state (llama_state_seq_get_data), oldest first
        self._parked: OrderedDict[tuple[int, ...], ctypes.Array[ctypes.c_uint8]] = \
            OrderedDict()
        self._parked_bytes = 0
        self.feed_limit = self._n_batch
        self._start(name="llamacpp-engine", max_batch=max_batch,
                    step_timeout_s=step_timeout_s, jump_forward=jump_forward,
                    schedule=schedule, speculation=speculation)

    def _tokenizer_and_grammars(self, model_dir: Path, gguf: Path, grammar_backend: str
                                ) -> None:
        # A tokenizer of a class of its own loads transformers, maybe while a server's main
        # thread imports xgrammar (BuildingEngine), which stands transformers in for a moment.
        import_backends()
        self.tokenizer = load_tokenizer(model_dir)
        if self.vocab_size < len(self.tokenizer):
            raise LlamaCppConfigError(
                f"{gguf.name!r} has {self.vocab_size} tokens but the tokenizer in "
                f"{str(gguf.parent)!r} has {len(self.tokenizer)}: they are not the same model")
        self.eos_token_ids = rules.eos_token_ids(model_dir, self.tokenizer)
        self.grammar_backend: MaskingBackend = make_backend(
            grammar_backend, self.tokenizer, vocab_size=self.vocab_size,
            stop_token_ids=sorted(self.eos_token_ids))

    def memory(self) -> dict[str, int]:
        # Read from sizes fixed at start-up: the context is the worker thread's alone.
        return {**self._sizes, "parked_prompts": len(self._parked),
                "parked_bytes": self._parked_bytes, **super().memory()}

    # -- llama.cpp objects ----------------------------------------------------------------
    def _load(self, gguf: Path, *, threads: int) -> None:
        global _LOG_CALLBACK
        ll = self._ll
        if _LOG_CALLBACK is None:
            _LOG_CALLBACK = _make_callback()
        ll.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
        ll.llama_backend_init()
        params = ll.llama_model_default_params()
        if amx_in_build():
            log.info("llama.cpp: this build multiplies with AMX, whose weight buffers crash "
                     "on any batch of two or more tokens (llama.cpp #20824); the weights "
                     "stay in plain CPU buffers")
            params.use_extra_bufts = False
        self._model = ll.llama_model_load_from_file(str(gguf).encode(), params)
        if not self._model:
            raise LlamaCppConfigError(f"llama.cpp could not load {str(gguf)!r}; is it a GGUF "
                                      "file this llama.cpp build supports?")
        vocab = ll.llama_model_get_vocab(self._model)
        self.vocab_size = int(ll.llama_vocab_n_tokens(vocab))

    def _kv_bytes_per_token(self) -> int:
        ll, m = self._ll, self._model
        heads, kv_heads = ll.llama_model_n_head(m), ll.llama_model_n_head_kv(m)
        kv_dim = int(ll.llama_model_n_embd(m)) * int(kv_heads) // max(int(heads), 1)
        return max(1, int(ll.llama_model_n_layer(m)) * kv_dim * 2 * 2)  # K and V, f16

    def _context(self, *, threads: int, seqs: int, cells: int) -> None:
        ll = self._ll
        self._threads = threads
        params = ll.llama_context_default_params()
        params.n_ctx = cells
        self._n_batch = 512
        params.n_batch = params.n_ubatch = self._n_batch
        params.n_seq_max = seqs
        params.n_threads = params.n_threads_batch = threads
        params.kv_unified = True  # sequences share cells: parked prefixes cost no copy
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise LlamaCppConfigError(f"llama.cpp could not make a context of {cells} cells "
                                      f"for {seqs} sequences; lower --max-batch, "
                                      "or --max-model-len")
        self._mem = ll.llama_get_memory(self._ctx)
        self._batch = ll.llama_batch_init(self._n_batch, 0, 1)

    def _decode(self, feeds: list[tuple[int, int, list[int], int]]) -> np.ndarray:
        """One llama_decode: for each (sequence id, first position, tokens, outputs), the
        tokens at their positions; the logits of each feed's last `outputs` tokens, feeds
        in order, [sum of outputs, vocab], in place (valid until the next decode)."""
        b = self._batch
        n = outputs = 0
        for seq_id, pos, tokens, wanted in feeds:
            for i, token in enumerate(tokens):
                b.token[n], b.pos[n], b.n_seq_id[n] = token, pos + i, 1
                b.seq_id[n][0] = seq_id
                b.logits[n] = i >= len(tokens) - wanted
                n += 1
            outputs += min(wanted, len(tokens))
        if n > self._n_batch:  # the loop keeps within feed_limit; never write past the batch
            raise RuntimeError(f"a step of {n} tokens exceeds llama.cpp's batch of "
                               f"{self._n_batch}")
        b.n_tokens = n
        code = self._ll.llama_decode(self._ctx, b)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} (1: no KV cells left for "
                               f"{n} tokens; lower --max-batch or the prompt's length)")
        ptr = self._ll.llama_get_logits(self._ctx)
        array = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                      shape=(max(outputs, 1), self.vocab_size))
        return array[:outputs]

    # -- the loop's hooks ------------------------------------------------------------------
    def _draft_token_cost(self) -> float:
        """A one-token step against one token with one draft and with four, their logits
        at every position, on an empty row, timed alternately (best of three each, after one
        to warm): the extra time per drafted token, in one-token steps, the larger of the
        two (a short draft costs more per token on a CPU: measured here, 1.5 steps for one
        against 1.1 each for four). About 0.3 s on the embedded model.

        On one thread llama.cpp computes in this one, so its CPU time is the clock: other
        threads' Python (a server's imports, beside a BuildingEngine) holding the GIL when
        a decode returns would add their time to the wall clock's (measured: 5 ms on an 18 ms
        step, a third of the difference being timed). More threads: the wall clock."""
        seq = self._free_rows[-1]
        clock = time.thread_time if self._threads == 1 else time.perf_counter
        best = {n: float("inf") for n in (1, 2, 5)}
        for round_ in range(4):
            for n in best:
                start = clock()
                self._decode([(seq, 0, [0] * n, n)])
                took = clock() - start
                self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
                if round_:
                    best[n] = min(best[n], took)
        return max(0.0, max((best[n] / best[1] - 1) / (n - 1) for n in (2, 5)))

    def _reusable(self, prompt: Sequence[int]) -> int:
        return self._best_parked(tuple(prompt))[1]

    def _begin(self, seq: DecodeRow) -> None:
        seq.slot = self._free_rows.pop()
        seq.prefilled = self._reuse_prefix(seq.request.prompt_ids, seq.slot)
        seq.timings["prefix_reused_tokens"] = seq.prefilled

    def _prompt_feed(self, seq: DecodeRow, n: int) -> tuple[int, int, list[int], int]:
        """The next `n` prompt tokens of `seq` as a feed; its logits only at the end."""
        prompt = seq.request.prompt_ids
        end = seq.prefilled + n
        return (seq.slot, seq.prefilled, list(prompt[seq.prefilled:end]),
                1 if end == len(prompt) else 0)

    def _fed(self, seq: DecodeRow, n: int) -> None:
        seq.prefilled += n
        self._counts["prefill_tokens"] += n
        if seq.prefilled == len(seq.request.prompt_ids):
            self._park(seq.request.prompt_ids, seq.slot)

    def _prefill_chunk(self, seq: DecodeRow, n: int) -> np.ndarray | None:
        logits = None
        while n > 0:
            piece = min(n, self._n_batch)
            logits = self._decode([self._prompt_feed(seq, piece)])
            self._fed(seq, piece)
            n -= piece
        return logits[0] if logits is not None and len(logits) else None

    def _row_feeds(self, rows: list[DecodeRow]) -> list[tuple[int, int, list[int], int]]:
        return [(s.slot, len(s.request.prompt_ids) + len(s.out) - len(s.pending),
                 s.pending + s.drafts, 1 + len(s.drafts)) for s in rows]

    def _step_logits(self, rows: list[DecodeRow]) -> np.ndarray:
        return self._decode(self._row_feeds(rows))

    def _forward(self, rows: list[DecodeRow], chunk: tuple[DecodeRow, int] | None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
        """The decode step and the prefill piece in one llama_decode."""
        if chunk is None:
            return self._step_logits(rows), None
        seq, n = chunk
        feed = self._prompt_feed(seq, n)
        logits = self._decode([*self._row_feeds(rows), feed])
        self._fed(seq, n)
        outputs = sum(1 + len(s.drafts) for s in rows)
        return logits[:outputs], (logits[outputs] if feed[3] else None)

    def _rewind(self, seq: DecodeRow, n: int) -> None:
        """The cells after what the row has accepted (its pending tokens are fed next)."""
        kept = len(seq.request.prompt_ids) + len(seq.out) - len(seq.pending)
        self._ll.llama_memory_seq_rm(self._mem, seq.slot, kept, -1)

    def _join(self, seq: DecodeRow) -> None:
        """Its cells are already in its sequence: nothing moves."""

    def _released(self, seq: DecodeRow) -> None:
        self._free_row(seq)

    def _keep_rows(self, keep: list[int], rows: list[DecodeRow]) -> None:
        kept = set(keep)
        for i, seq in enumerate(rows):
            if i not in kept:
                self._free_row(seq)

    def _free_row(self, seq: DecodeRow) -> None:
        if seq.slot >= 0:
            self._ll.llama_memory_seq_rm(self._mem, seq.slot, -1, -1)
            self._free_rows.append(seq.slot)
            seq.slot = -1

    # -- prefix reuse ------------------------------------------------------------------------
    def _best_parked(self, prompt: tuple[int, ...]) -> tuple[tuple[int, ...] | None, int]:
        """The kept prompt sharing the longest prefix with `prompt` (at most all but its
        last token, whose logits the prefill must compute): (its tokens, that length), or
        (None, 0) when none shares `_MIN_REUSE` tokens."""
        best_key, best = None, 0
        for tokens in self._parked:
            n = _common_prefix(tokens, prompt)
            if n > best:
                best_key, best = tokens, n
        best = min(best, len(prompt) - 1)
        return (best_key, best) if best >= _MIN_REUSE else (None, 0)

    def _reuse_prefix(self, prompt: tuple[int, ...], slot: int) -> int:
        key, best = self._best_parked(prompt)
        if key is None:
            return 0
        state = self._parked[key]
        self._parked.move_to_end(key)
        ll = self._ll
        if not ll.llama_state_seq_set_data(self._ctx, state, len(state), slot):
            ll.llama_memory_seq_rm(self._mem, slot, -1, -1)  # no room for it now: prefill
            return 0
        ll.llama_memory_seq_rm(self._mem, slot, best, -1)  # only the shared prefix stays
        self._counts["prefix_hits"] += 1
        self._counts["prefix_reused_tokens"] += best
        return best

    def _park(self, prompt: tuple[int, ...], slot: int) -> None:
        """Keep a copy of the prompt's state (its cells in row `slot`) in host memory."""
        if len(prompt) < _MIN_REUSE or not self._park_budget:
            return
        ll = self._ll
        size = int(ll.llama_state_seq_get_size(self._ctx, slot))
        if size > self._park_budget:
            return
        for kept in [t for t in self._parked if len(t) <= len(prompt)
                     and prompt[:len(t)] == t]:
            self._unpark(kept)  # the new prompt serves its lookups too
        while self._parked and self._parked_bytes + size > self._park_budget:
            self._unpark(next(iter(self._parked)))
            self._counts["prefix_evictions"] += 1
        state = (ctypes.c_uint8 * size)()
        if ll.llama_state_seq_get_data(self._ctx, state, size, slot) != size:
            return
        self._parked[prompt] = state
        self._parked_bytes += size

    def _unpark(self, key: tuple[int, ...]) -> None:
        self._parked_bytes -= len(self._parked.pop(key))

    def close(self) -> None:
        super().close()
        ll = self._ll
        ll.llama_batch_free(self._batch)
        ll.llama_free(self._ctx)
        ll.llama_model_free(self._model)


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
