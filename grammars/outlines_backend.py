"""The outlines-core backend: JSON Schema -> regular expression -> token-level DFA index.

A `MaskingBackend` as `XgrammarBackend` is (compile, matcher, bitmask), so the engines and
the cache do not know which one they drive. Its masks use xgrammar's bitmask layout (one bit per
token
in int32 words), so they are applied as xgrammar's are, as in vLLM's outlines backend.

What its masks enforce differs from xgrammar's: `OUTLINES_KEYWORDS`, measured on
outlines-core 0.2.14 (tests/grammars/test_outlines_backend.py). Two limits are structural:
the schema becomes a regular expression, so recursive `$ref`s are unrolled to a fixed depth
(deeper values cannot be written), and there are no structural tags (tool_choice="auto" with
--auto-tools trigger needs xgrammar).
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from outlines_core import Guide, Index, Vocabulary
from outlines_core.json_schema import build_regex_from_schema

from grammars.backend import TokenBitmasks, tokenizer_fingerprint
from grammars.backend_types import CompiledGrammar, GrammarMatcher
from grammars.errors import InvalidSchemaError
from grammars.keywords import XGRAMMAR_KEYWORDS, KeywordTable
from grammars.specs import GrammarSpec, TaggedSpec

# How many times a recursive $ref is unrolled into the regular expression.
RECURSION_DEPTH = 3

OUTLINES_KEYWORDS: KeywordTable = replace(
    XGRAMMAR_KEYWORDS, backend="outlines-core",
    # Measured: these are not enforced by the regex outlines-core 0.2.14 builds.
    grammar=XGRAMMAR_KEYWORDS.grammar - {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "maxProperties"},
    # Its date-time and time patterns let a missing time zone through: validator tier.
    formats=frozenset({"date", "uuid", "uri", "email"}),
    lengths_with_pattern=False, format_unions=(), format_subsets=(),
    extras_take_odd_names=False,
    bounded_number_decimals=None,
    # Its length masks write escapes; a pattern is put into the regex as it is.
    no_escapes_under=frozenset({"pattern"}))


@dataclass(frozen=True)
class _Handle:
    regex: str
    index: Index


class OutlinesMatcher(GrammarMatcher):
    def __init__(self, compiled: CompiledGrammar, eos_ids: frozenset[int]) -> None:
        self._guide = Guide(compiled.handle.index)
        self._eos = eos_ids
        self._done = False

    def accept_token(self, token_id: int) -> bool:
        if token_id in self._eos:  # allowed where the value is complete
            self._done = any(t in self._eos for t in self._guide.get_tokens())
            return self._done
        try:
            self._guide.advance(token_id)
        except ValueError:
            return False
        return True

    def fill_bitmask(self, bitmask: np.ndarray, row: int) -> None:
        target = bitmask[row]
        self._guide.write_mask_into(target.ctypes.data, target.size, target.itemsize)

    def is_terminated(self) -> bool:
        return self._done


class OutlinesBackend(TokenBitmasks):
    name = "outlines-core"
    version = importlib.metadata.version("outlines-core")

    def __init__(self, tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int],
                 strict_objects: bool = True) -> None:
        self.vocab_size = vocab_size
        self._tokenizer = tokenizer
        self._eos = frozenset(stop_token_ids)
        self._vocabulary = _vocabulary(tokenizer, stop_token_ids)
        self.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer, vocab_size,
                                                           stop_token_ids)
        self.keywords = OUTLINES_KEYWORDS
        self.set_strict_objects(strict_objects)  # strict only: False is refused

    @property
    def options_key(self) -> str:
        return f"whitespace=;recursion={RECURSION_DEPTH}"

    def _regex(self, schema: Any) -> str:
        return str(build_regex_from_schema(json.dumps(schema), "", RECURSION_DEPTH))

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        if isinstance(spec, TaggedSpec):
            raise InvalidSchemaError(
                "the outlines-core backend has no structural tags (tool_choice=auto with "
                "--auto-tools trigger, model formats other than smollm2, the reasoning pass)",
                hint="Use --auto-tools decide and no reasoning, or the xgrammar backend.")
        start = time.perf_counter()
        try:
            regex = self._regex(spec.json_schema())
            index = Index(regex, self._vocabulary)
        except (ValueError, RuntimeError, TypeError) as exc:
            raise InvalidSchemaError(f"outlines-core rejected the schema: {exc}",
                                     hint="Simplify or correct the schema.") from None
        return CompiledGrammar(spec, _Handle(regex, index), time.perf_counter() - start,
                               _size(index))

    def compile_raw(self, schema: Any) -> Any:
        return Index(self._regex(schema), self._vocabulary)

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        index = compiled.handle.index
        state = index.get_initial_state()
        for token in self._tokenizer.encode(text, add_special_tokens=False):
            state = index.get_next_state(state, token)
            if state is None:
                return False
        return bool(index.is_final_state(state))

    def matcher(self, compiled: CompiledGrammar) -> OutlinesMatcher:
        return OutlinesMatcher(compiled, self._eos)


def _size(index: Index) -> int:
    """Rough memory of the index: its transitions (a state, a token, a next state each)."""
    return 24 * sum(len(t) for t in index.get_transitions().values())


def _vocabulary(tokenizer: Any, stop_token_ids: list[int]) -> Vocabulary:
    """Token id -> the bytes it writes, as outlines-core wants them (special tokens out)."""
    decoder = _byte_decoder()
    special = set(tokenizer.all_special_ids) | set(stop_token_ids)
    tokens: dict[bytes, list[int]] = {}
    for text, token_id in tokenizer.get_vocab().items():
        if token_id in special:
            continue
        if all(ch in decoder for ch in text):  # byte-level BPE (GPT-2 style)
            raw = bytes(decoder[ch] for ch in text)
        elif text.startswith("<0x") and text.endswith(">") and len(text) == 6:  # byte fallback
            raw = bytes([int(text[3:5], 16)])
        else:  # SentencePiece: "▁" is a space
            raw = text.replace("\u2581", " ").encode()
        tokens.setdefault(raw, []).append(token_id)
    return Vocabulary(min(stop_token_ids), tokens)


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte -> printable character table."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}
