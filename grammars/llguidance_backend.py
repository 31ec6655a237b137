"""The llguidance backend: JSON Schema (or a Lark grammar) -> an Earley parser over lazily built
lexer states, so a schema no one has sent before compiles in milliseconds.

A `MaskingBackend` as `XgrammarBackend` is. Its masks are written straight into rows of
xgrammar's bitmask layout (one bit per token in int32 words) through llguidance's raw-pointer
call, and applied as xgrammar's are: llguidance's own torch apply is `torch.compile`d and
costs 8-20 s on its first call.

Laziness moves work from compile to decode: lexer states are built when a mask first needs
them. `compile` therefore also computes the first token's mask, so its time is what the first
token of a cold request waits for, and bench/speed/decode_speed.py reports the per-token mask time.

What its masks enforce: `LLGUIDANCE_KEYWORDS` (grammars/keywords/_table.py), measured on
llguidance 1.9.1 in tests/grammars/test_llguidance_backend.py. It has no strict-objects
option: strict objects are written into the compiled schema (`additionalProperties: false`
where the schema is silent), as xgrammar's strict mode reads it.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import json
import time
from typing import Any

import llguidance
import numpy as np

from grammars._walk import iter_schema_nodes
from grammars.backend import SEPARATORS, TokenBitmasks, tokenizer_fingerprint
from grammars.backend_types import CompiledGrammar, GrammarMatcher
from grammars.errors import InvalidSchemaError, native_reason
from grammars.keywords import LLGUIDANCE_KEYWORDS
from grammars.specs import GrammarSpec, StructuralTagSpec, TextOrToolCallsSpec

# Compact output as xgrammar's COMPILE_OPTIONS: `,` and `:`, no free whitespace. oneOf is
# read as anyOf (llguidance refuses it otherwise); the keyword table sends "exactly one" to
# the validator where the branches may overlap. Not lenient: a keyword it does not implement
# is an error, never silently dropped.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":",
                "coerce_one_of": True, "lenient": False}

# Formats llguidance 1.9.1 lacks (and the validator here cannot check): compiled as the
# patterns their RFCs define (RFC 6901; draft-handrews-relative-json-pointer).
FORMAT_PATTERNS = {
    "json-pointer": "^(?:/(?:[^~/]|~[01])*)*$",
    "relative-json-pointer": "^(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)$",
}


class LlguidanceMatcher(GrammarMatcher):
    """One request's position in its grammar: a copy of the compiled template matcher, which
    shares the lexer states built so far."""

    def __init__(self, template: llguidance.LLMatcher, stop_token_ids: frozenset[int]) -> None:
        self._m = template.deep_copy()
        self._stop = stop_token_ids
        self._terminated = False

    def accept_token(self, token_id: int) -> bool:
        # Checked first: a refused token would put llguidance's matcher in an error state for
        # good, where the interface wants a refusal that leaves the matcher where it was.
        if self._terminated:
            return False
        if token_id in self._stop:
            # Not fed to llguidance: once nothing but the end can follow it has stopped
            # itself and would refuse the stop token.
            self._terminated = bool(self._m.is_accepting())
            return self._terminated
        return self._m.validate_tokens([token_id]) == 1 and bool(self._m.consume_token(token_id))

    def fill_bitmask(self, bitmask: np.ndarray, row: int) -> None:
        target = bitmask[row]
        self._m.unsafe_compute_mask_ptr(target.ctypes.data, target.nbytes)

    def is_terminated(self) -> bool:
        """True once the grammar is complete and a stop token was accepted."""
        return self._terminated

    def forced_tokens(self) -> list[int]:
        if self._terminated or self._m.is_stopped():
            return []
        return [t for t in self._m.compute_ff_tokens() if t not in self._stop]

    def accepted_count(self, token_ids: list[int]) -> int:
        if self._terminated or self._m.is_stopped():
            return 0
        upto = next((i for i, t in enumerate(token_ids) if t in self._stop), len(token_ids))
        return int(self._m.validate_tokens(token_ids[:upto])) if upto else 0


def _tokenizer_json(tokenizer: Any) -> str:
    """The tokenizer.json llguidance reads, from a fast tokenizer's Rust tokenizer (with the
    added tokens a config may hold beyond the file) without its padding and truncation,
    as `llguidance.hf.from_tokenizer` takes it; that module imports transformers, and a
    llama.cpp server's tokenizer comes without it (server/engines/json_tokenizer.py)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("llguidance needs a fast (tokenizers) tokenizer, not "
                         f"{type(tokenizer).__name__}")
    backend = copy.copy(backend)
    backend.no_padding()
    backend.no_truncation()
    return str(backend.to_str())


class LlguidanceBackend(TokenBitmasks):
    name = "llguidance"
    version = importlib.metadata.version("llguidance")

    def __init__(self, tokenizer: Any, *, vocab_size: int, stop_token_ids: list[int],
                 strict_objects: bool = True, slices: list[str] | None = None) -> None:
        """`slices`: llguidance's precomputed token subsets that speed its masks up (None:
        its general ones; [] for none: about 16 MiB less resident memory and 0.1 s less
        start-up, and masks about 4x slower, 121 against 33 us a token on a JSON schema
        here, beside a model step of about 8 ms)."""
        self.vocab_size = vocab_size
        self._stop = frozenset(stop_token_ids)
        # ~0.5 s: built once per backend (llguidance's token trie over the vocabulary).
        self._tokenizer = llguidance.LLTokenizer(
            _tokenizer_json(tokenizer), n_vocab=vocab_size, eos_token=sorted(stop_token_ids),
            slices=slices)
        self.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer, vocab_size, stop_token_ids)
        self.set_strict_objects(strict_objects)
        self.set_json_layout("compact")

    def set_strict_objects(self, strict: bool) -> None:
        """Strict (default): an object schema that lists `properties` and says nothing of
        `additionalProperties` gets no other keys. Off: JSON Schema's own reading, which is
        llguidance's. Set before compiling."""
        self._strict = strict
        self.keywords = dataclasses.replace(LLGUIDANCE_KEYWORDS, strict_objects=strict)

    def set_json_layout(self, layout: str) -> None:
        item, key = SEPARATORS[layout]
        self._json_options = {**JSON_OPTIONS, "item_separator": item, "key_separator": key}

    @property
    def options_key(self) -> str:
        return json.dumps({**self._json_options, "strict_objects": self._strict},
                          sort_keys=True)

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        if isinstance(spec, StructuralTagSpec):
            raise InvalidSchemaError(
                "the llguidance backend does not compile xgrammar structural tags (model "
                "formats other than smollm2, and the reasoning pass)",
                hint="Use --grammar-backend xgrammar, or send no reasoning budget.")
        start = time.perf_counter()
        if isinstance(spec, TextOrToolCallsSpec):
            grammar = llguidance.LLMatcher.grammar_from_lark(self._text_or_calls_lark(spec))
        else:
            grammar = self._json_grammar(spec.json_schema(), strict_objects=self._strict,
                                         formats=self.keywords.formats, fresh=True)
        template = self._template(grammar)
        return CompiledGrammar(spec, template, time.perf_counter() - start, len(grammar))

    def compile_raw(self, schema: Any, *, strict_objects: bool | None = None) -> Any:
        """The raw schema straight into llguidance, no keyword layer (benchmarks: "alone").
        With `strict_objects`, a schema the keyword layer made under other policies (the
        benchmark's relaxed grammars): formats outside the table are left out, as in
        `compile`."""
        if strict_objects is None:
            return self._template(self._json_grammar(schema, strict_objects=self._strict))
        return self._template(self._json_grammar(schema, strict_objects=strict_objects,
                                                 formats=self.keywords.formats))

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        """Whether the mask lets `text` through as one complete value (benchmarks, tests)."""
        matcher = compiled.handle.deep_copy()
        tokens = self._tokenizer.tokenize_str(text)
        return bool(matcher.consume_tokens(tokens)) and bool(matcher.is_accepting())

    def matcher(self, compiled: CompiledGrammar) -> LlguidanceMatcher:
        return LlguidanceMatcher(compiled.handle, self._stop)

    def _json_grammar(self, schema: Any, *, strict_objects: bool,
                      formats: frozenset[str] | None = None, fresh: bool = False) -> str:
        """`fresh`: `schema` is this call's own (a parse of the spec's text), edited in place
        rather than copied first."""
        try:
            return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(
                _for_llguidance(schema, strict_objects=strict_objects, formats=formats,
                                options=self._json_options, fresh=fresh)))
        except ValueError as exc:
            raise _rejected(str(exc)) from None

    def _template(self, grammar: str) -> llguidance.LLMatcher:
        """The compiled grammar: a matcher at the start, copied for each request. Its first
        mask is computed here, which builds the lexer states the first token needs."""
        template = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if template.is_error():
            raise _rejected(template.get_error())
        scratch = np.empty((self.vocab_size + 31) // 32, dtype=np.int32)
        template.deep_copy().unsafe_compute_mask_ptr(scratch.ctypes.data, scratch.nbytes)
        return template

    def _text_or_calls_lark(self, spec: TextOrToolCallsSpec) -> str:
        """Free text that never holds `begin`; or such text, `begin`, the calls, `end`, and
        nothing after (xgrammar's triggered tag with stop_after_first). The lazy rule ends
        the text at the first `begin`, as a structural tag's trigger does."""
        calls = _for_llguidance(spec.calls.json_schema(), fresh=True, strict_objects=self._strict,
                                formats=self.keywords.formats, options=self._json_options)
        begin, end = json.dumps(spec.begin), json.dumps(spec.end)
        return (
            "%llguidance {}\n"
            f"start: TEXT | call_head calls {end}\n"
            f"call_head[lazy]: TEXT {begin}\n"
            f"calls: %json {json.dumps(calls)}\n"
            f"TEXT: /(.|\\n)*/ & ~/(.|\\n)*{_lark_regex_literal(spec.begin)}(.|\\n)*/\n")


def _for_llguidance(schema: Any, *, strict_objects: bool,
                    formats: frozenset[str] | None = None,
                    options: dict[str, Any] | None = None, fresh: bool = False) -> Any:
    """The schema as llguidance should read it to mean what the keyword table says:
    - its options in `x-guidance` (replacing any a client sent);
    - strict objects: `additionalProperties: false` where the schema lists properties and
      says nothing of other keys, `items: false` after `prefixItems` (xgrammar's strict mode);
    - every `pattern` anchored: llguidance searches an unanchored pattern (JSON Schema's
      reading), where the table promises whole matches; the "search" policy has already
      rewritten the pattern to `.*(?:...).*` where it wants a search;
    - with `formats` (the table's), any other format left out: llguidance refuses formats it
      does not know, which the table leaves to the validator or reads as annotations."""
    if not isinstance(schema, dict):
        return schema
    if not fresh:  # (`fresh`: the caller's own parse, edited in place)
        schema = copy.deepcopy(schema)
    for node, _ in iter_schema_nodes(schema):
        if strict_objects and ("properties" in node or "patternProperties" in node) \
                and not {"additionalProperties", "unevaluatedProperties"} & node.keys():
            node["additionalProperties"] = False
        if strict_objects and "prefixItems" in node \
                and not {"items", "unevaluatedItems"} & node.keys():
            node["items"] = False
        if isinstance(node.get("pattern"), str):
            node["pattern"] = f"^(?:{node['pattern']})$"
        if formats is not None and node.get("format") in FORMAT_PATTERNS:
            node.setdefault("allOf", []).append(
                {"pattern": FORMAT_PATTERNS[node.pop("format")]})
        if formats is not None and "format" in node and node["format"] not in formats:
            del node["format"]
    schema["x-guidance"] = dict(options or JSON_OPTIONS)
    return schema


def _lark_regex_literal(text: str) -> str:
    """`text` matched literally inside a Lark /.../ regex."""
    return "".join(ch if ch.isalnum() or ch in "_<>=:" else f"\\{ch}" for ch in text)


def _rejected(error: str) -> InvalidSchemaError:
    lines = [line for line in error.strip().splitlines() if line.strip()]
    first_line = native_reason(lines[0]) if lines else "no reason given"
    return InvalidSchemaError(f"the grammar backend rejected the schema: {first_line}",
                              hint="Simplify or correct the schema.")
