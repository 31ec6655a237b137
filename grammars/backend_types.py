"""The grammar backend interfaces, two levels as in vLLM's `v1/structured_output`:

- `GrammarBackend` (engine level): a spec in, a `CompiledGrammar` out, plus what the cache
  keys on (name, version, tokenizer fingerprint, options) and the keyword table the spec
  layer reads. Every backend is one, including vLLM's pass-through, whose masks vLLM applies
  in its own process.
- `MaskingBackend(GrammarBackend)`: a backend whose masks the engine applies itself (torch,
  scripted): it hands out one `GrammarMatcher` per request and the batch's token bitmask.

Optional capabilities are declared here with honest defaults, so callers ask the backend
(`persistent`, `set_strict_objects`) instead of probing with `getattr`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from grammars.keywords import KeywordTable
    from grammars.specs import GrammarSpec


@dataclass(frozen=True)
class CompiledGrammar:
    spec: GrammarSpec
    # The backend's own compiled form, read only by the backend that made it: an
    # `xgrammar.CompiledGrammar`, outlines-core's regex and index, or None where the engine
    # compiles the spec itself (vLLM).
    handle: Any
    compile_seconds: float
    size_bytes: int = 0  # memory held, for the cache's byte bound


class GrammarMatcher(abc.ABC):
    """One request's position in its grammar."""

    @abc.abstractmethod
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no advance) when the grammar refuses it."""

    @abc.abstractmethod
    def fill_bitmask(self, bitmask: np.ndarray, row: int) -> None:
        """Write the tokens allowed next into `row` of the batch's bitmask."""

    @abc.abstractmethod
    def is_terminated(self) -> bool:
        """True once the grammar is complete and an end-of-sequence token was accepted."""

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces next (jump-forward), not yet accepted: the engine
        accepts and prefills them without sampling. Never a stop token; where the forced text
        ends inside what could be a longer token, that last piece is left to the model, so
        the split matches what it would have sampled. Backends that cannot tell: none."""
        return []

    def accepted_count(self, token_ids: list[int]) -> int:
        """How many leading tokens of `token_ids` the grammar would accept from here, the
        matcher left where it is (drafts are cut there). Backends that cannot tell
        without advancing: none, so nothing is drafted under them."""
        return 0


class GrammarBackend(abc.ABC):
    """Compiles grammar specs for one tokenizer; `GrammarCache` keys and stores the results."""

    name: str
    version: str
    tokenizer_fingerprint: str
    keywords: KeywordTable
    # Whether `serialize`/`deserialize` work, so compiled grammars can go to the disk store.
    persistent: bool = False

    @property
    @abc.abstractmethod
    def options_key(self) -> str:
        """Every compile option that changes the result, as text (part of the cache key)."""

    @abc.abstractmethod
    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        """Raises `InvalidSchemaError` when the backend refuses the spec."""

    def serialize(self, compiled: CompiledGrammar) -> str:
        raise NotImplementedError(f"the {self.name!r} grammar backend is not persistent; "
                                  "check `persistent` before serializing")

    def deserialize(self, spec: GrammarSpec, text: str) -> CompiledGrammar:
        raise NotImplementedError(f"the {self.name!r} grammar backend is not persistent; "
                                  "check `persistent` before deserializing")

    def set_strict_objects(self, strict: bool) -> None:
        """Strict objects: an object schema that lists `properties` and says nothing of
        `additionalProperties` gets no other keys. Only xgrammar can turn this off, so by
        default asking for it is a configuration error."""
        if not strict:
            raise ValueError(f"the {self.name!r} grammar backend has strict objects only "
                             "(keys not in 'properties' are never generated); use the torch "
                             "engine with the xgrammar backend to turn them off")


    def set_json_layout(self, layout: str) -> None:
        """JSON schemas' output layout: "compact" (`,` and `:`) or "spaced" (`, ` and `: `),
        no other whitespace either way. Set before compiling. Compact only by default."""
        if layout != "compact":
            raise ValueError(f"the {self.name!r} grammar backend writes compact JSON only; "
                             "use the xgrammar or llguidance backend for --json-layout "
                             f"{layout}")


class MaskingBackend(GrammarBackend):
    """A backend whose token masks the engine applies itself, one bitmask row per request."""

    vocab_size: int

    def ready(self) -> None:
        """Wait for any part still being built beside the engine's start-up (the bridge's
        llguidance), raising what building it raised; at once for the rest."""

    @abc.abstractmethod
    def matcher(self, compiled: CompiledGrammar) -> GrammarMatcher:
        """A fresh matcher at the start of `compiled`, for one request."""

    @abc.abstractmethod
    def allocate_bitmask(self, batch_size: int) -> np.ndarray:
        """A bitmask with one row per request of a batch of `batch_size`."""

    @abc.abstractmethod
    def apply_bitmask(self, logits: Any, bitmask: np.ndarray,
                      rows: list[int]) -> None:
        """Set logits of forbidden tokens to -inf, in place, for the given rows."""

    @abc.abstractmethod
    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        """Whether the mask lets `text` through as one complete value (benchmarks, tests)."""
