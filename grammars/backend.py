"""The xgrammar backend: grammar spec -> compiled grammar -> per-request matcher.

Two levels, as in vLLM's structured-output layer (`grammars.backend_types`): the backend
compiles (engine level), an `XgrammarMatcher` follows one request's tokens and fills its row
of the batch's token bitmask.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import time
import weakref
from typing import Any

import numpy as np

from grammars import xgrammar_parts as xgr
from grammars.backend_types import CompiledGrammar, GrammarMatcher, MaskingBackend
from grammars.errors import InvalidSchemaError, native_reason
from grammars.keywords import XGRAMMAR_KEYWORDS
from grammars.specs import GrammarSpec, TaggedSpec

# Compact output: no free whitespace, `,` and `:` separators, no keys outside the schema.
COMPILE_OPTIONS: dict[str, Any] = {"any_whitespace": False, "separators": (",", ":"),
                                   "strict_mode": True}
# Each JSON layout's (item, key) separators (`--json-layout`).
SEPARATORS = {"compact": (",", ":"), "spaced": (", ", ": ")}


class XgrammarMatcher(GrammarMatcher):
    """One request's position in its xgrammar grammar."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        self._m = xgr.new_matcher(compiled.handle)

    def accept_token(self, token_id: int) -> bool:
        return bool(self._m.accept_token(token_id, False))

    def fill_bitmask(self, bitmask: np.ndarray, row: int) -> None:
        self._m.fill_next_token_bitmask(bitmask, row, False)

    def is_terminated(self) -> bool:
        """True once the grammar is complete and a stop token was accepted."""
        return bool(self._m.is_terminated())

    def forced_tokens(self) -> list[int]:
        return list(self._m.find_jump_forward_tokens())

    def accepted_count(self, token_ids: list[int]) -> int:
        count = 0
        for token in token_ids:
            if not self._m.accept_token(token, False):
                break
            count += 1
        if count:
            self._m.rollback(count)
        return count


class TokenBitmasks(MaskingBackend):
    """A masking backend whose batch token masks are in xgrammar's layout (one bit per
    token, int32 words per row, in a numpy array on the host, where every matcher fills
    them); outlines-core and llguidance write the same layout.

    Applied to numpy logits (the llama.cpp engine's) with numpy; to torch logits with
    xgrammar's kernel, on the logits' device. Logits past `vocab_size` (a model's padded
    rows) are left as they are, as xgrammar's kernel leaves them."""

    vocab_size: int

    def allocate_bitmask(self, batch_size: int) -> np.ndarray:
        return np.full((batch_size, (self.vocab_size + 31) // 32), -1, dtype=np.int32)

    def apply_bitmask(self, logits: Any, bitmask: np.ndarray, rows: list[int]) -> None:
        """Set logits of forbidden tokens to -inf, in place, for the given rows."""
        if isinstance(logits, np.ndarray):
            allowed = np.unpackbits(bitmask[rows].view(np.uint8), axis=-1,
                                    bitorder="little")[:, :self.vocab_size]
            for row, bits in zip(rows, allowed, strict=True):
                np.putmask(logits[row, :self.vocab_size], bits == 0, -np.inf)
            return
        import torch  # the logits are torch's: it is loaded
        from xgrammar.matcher import apply_token_bitmask_inplace

        mask = torch.from_numpy(bitmask).to(logits.device, non_blocking=True)
        apply_token_bitmask_inplace(logits, mask, vocab_size=self.vocab_size, indices=rows)


class XgrammarBackend(TokenBitmasks):
    name = "xgrammar"
    version = importlib.metadata.version("xgrammar")
    persistent = True

    def __init__(self, tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int],
                 compile_threads: int = 1, strict_objects: bool = True) -> None:
        self.vocab_size = vocab_size
        self.set_strict_objects(strict_objects)
        self._info = tokenizer_info(tokenizer, vocab_size=vocab_size,
                                    stop_token_ids=stop_token_ids)
        # Our own GrammarCache does the caching, with keys we control and counters we report.
        self._compiler = xgr.GrammarCompiler(self._info, max_threads=compile_threads,
                                             cache_enabled=False)
        self.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer, vocab_size, stop_token_ids)

    def set_strict_objects(self, strict: bool) -> None:
        """Strict (the default, as in vLLM and OpenAI's strict mode): an object schema that
        lists `properties` and says nothing of `additionalProperties` gets no other keys.
        Off: JSON Schema's own reading, any other key with any value. Set before compiling."""
        self._options: dict[str, Any] = {**getattr(self, "_options", COMPILE_OPTIONS),
                                         "strict_mode": strict}
        self.keywords = dataclasses.replace(XGRAMMAR_KEYWORDS, strict_objects=strict)

    def set_json_layout(self, layout: str) -> None:
        self._options = {**self._options, "separators": SEPARATORS[layout]}

    @property
    def options_key(self) -> str:
        return json.dumps(self._options, sort_keys=True)

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        start = time.perf_counter()
        try:
            if isinstance(spec, TaggedSpec):
                handle = self._compiler.compile_structural_tag(json.dumps(spec.structural_tag()))
            else:
                handle = self._compiler.compile_json_schema(spec.json_schema(), **self._options)
        except (RuntimeError, ValueError) as exc:  # xgrammar reports bad schemas this way
            raise InvalidSchemaError("the grammar backend rejected the schema: "
                                     f"{native_reason(str(exc))}",
                                     hint="Simplify or correct the schema.") from None
        return CompiledGrammar(spec, handle, time.perf_counter() - start,
                               int(handle.memory_size_bytes))

    def compile_raw(self, schema: Any, *, strict_objects: bool | None = None) -> Any:
        """The raw schema straight into xgrammar, no keyword layer (benchmarks: "alone"; and
        with strict_objects=False, to tell a strict-objects refusal from a mask error)."""
        options = dict(self._options)
        if strict_objects is not None:
            options["strict_mode"] = strict_objects
        return self._compiler.compile_json_schema(json.dumps(schema), **options)

    def serialize(self, compiled: CompiledGrammar) -> str:
        return str(compiled.handle.serialize_json())

    def deserialize(self, spec: GrammarSpec, text: str) -> CompiledGrammar:
        """A grammar from the disk store; xgrammar checks it was made for this tokenizer."""
        start = time.perf_counter()
        handle = xgr.CompiledGrammar.deserialize_json(text, self._info)
        return CompiledGrammar(spec, handle, time.perf_counter() - start,
                               int(handle.memory_size_bytes))

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        """Whether the mask lets `text` through as one complete value (benchmarks, tests)."""
        matcher = xgr.new_matcher(compiled.handle, terminate_without_stop_token=True)
        return bool(matcher.accept_string(text, False)) and bool(matcher.is_completed())

    def matcher(self, compiled: CompiledGrammar) -> XgrammarMatcher:
        return XgrammarMatcher(compiled)


# Per tokenizer object: a server's backends (xgrammar's, the bridge's llguidance) share one.
_FINGERPRINTS: weakref.WeakKeyDictionary[Any, dict[tuple[int, tuple[int, ...]], str]] = \
    weakref.WeakKeyDictionary()


def tokenizer_info(tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int]) -> Any:
    """xgrammar's TokenizerInfo for `tokenizer`: `from_huggingface` for transformers'
    tokenizers; for another over a Rust tokenizer (`backend_tokenizer`: a llama.cpp server's,
    server/engines/json_tokenizer.py), what that method reads of a fast tokenizer (the
    vocabulary by id; its type and whether it adds a prefix space from the tokenizer's JSON,
    by xgrammar's own detection) given to the constructor. The two agree
    (tests/server/engines/test_json_tokenizer.py)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if type(tokenizer).__module__.partition(".")[0] == "transformers" or backend is None:
        return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size,
                                                  stop_token_ids=stop_token_ids)
    encoded = [""] * vocab_size
    for text, token_id in tokenizer.get_vocab().items():
        if token_id < vocab_size:
            encoded[token_id] = text
    detected = xgr.TokenizerInfo._detect_metadata_from_hf(backend.to_str())
    return xgr.TokenizerInfo(encoded, vocab_type=detected["vocab_type"], vocab_size=vocab_size,
                             stop_token_ids=stop_token_ids,
                             add_prefix_space=detected["add_prefix_space"])


def tokenizer_fingerprint(tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> str:
    """A hash of the vocabulary, its size and the stop tokens (the grammar caches' key),
    computed once per tokenizer object (about a tenth of a second for 49k tokens)."""
    key = (vocab_size, tuple(sorted(stop_token_ids)))
    try:
        known = _FINGERPRINTS.setdefault(tokenizer, {})
    except TypeError:  # not weakly referenceable: computed each time
        known = {}
    if key not in known:
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        payload = json.dumps([vocab, vocab_size, list(key[1])], ensure_ascii=False)
        known[key] = hashlib.sha256(payload.encode()).hexdigest()[:16]
    return known[key]
