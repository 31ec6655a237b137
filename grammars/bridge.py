"""xgrammar with llguidance as a bridge over cold compiles (`--cold-compile bridge`).

xgrammar compiles a schema ahead (milliseconds to seconds, then cached); llguidance builds
its masks lazily and compiles in 1-2 ms. Bridged, a request whose schema is not compiled yet
does not wait: it decodes under llguidance's mask while xgrammar compiles in the background,
and later requests use xgrammar's cached grammar.

Honest only where the two enforce the same thing: a spec is bridged when every keyword
xgrammar's mask enforces in it is enforced by llguidance's mask too (its keyword table puts
each in the grammar tier, and drops nothing), so the request's enforcement report, made with
xgrammar's table, holds under either mask. Anything else (structural tags, keywords
llguidance approximates or refuses) waits for xgrammar, as without the bridge. Masks share
one bitmask layout; xgrammar's kernel applies both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grammars._walk import iter_schema_nodes
from grammars.backend_types import CompiledGrammar, GrammarMatcher, MaskingBackend
from grammars.errors import GrammarError
from grammars.specs import (GrammarSpec, JsonSchemaSpec, TextOrToolCallsSpec, ToolCallsSpec,
                            check_schema)

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class _Bridged:
    """The handle of a grammar llguidance compiled for the bridge."""

    inner: CompiledGrammar


class BridgedBackend(MaskingBackend):
    """Is the primary (xgrammar) for the cache: same name, version, options and keyword
    table, so keys, the disk store and every report are xgrammar's. `bridge` gives the
    llguidance grammar for a spec while xgrammar's is not ready."""

    def __init__(self, primary: MaskingBackend, fast: MaskingBackend) -> None:
        self.primary, self.fast = primary, fast
        self.name, self.version = primary.name, primary.version
        self.tokenizer_fingerprint = primary.tokenizer_fingerprint
        self.persistent = primary.persistent
        self.vocab_size = primary.vocab_size

    @property
    def keywords(self):  # noqa: ANN201 - KeywordTable; the primary's, kept in step
        return self.primary.keywords

    @property
    def options_key(self) -> str:
        return self.primary.options_key

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        return self.primary.compile(spec)

    def serialize(self, compiled: CompiledGrammar) -> str:
        return self.primary.serialize(compiled)

    def deserialize(self, spec: GrammarSpec, text: str) -> CompiledGrammar:
        return self.primary.deserialize(spec, text)

    def set_strict_objects(self, strict: bool) -> None:
        self.primary.set_strict_objects(strict)
        self.fast.set_strict_objects(strict)

    # -- the bridge -----------------------------------------------------------------------
    def bridge(self, spec: GrammarSpec) -> CompiledGrammar | None:
        """llguidance's grammar for `spec`, or None where it would not enforce the same."""
        if not self.bridgeable(spec):
            return None
        try:
            inner = self.fast.compile(spec)
        except GrammarError:
            return None
        return CompiledGrammar(spec, _Bridged(inner), inner.compile_seconds, inner.size_bytes)

    def bridgeable(self, spec: GrammarSpec) -> bool:
        if isinstance(spec, JsonSchemaSpec):
            schemas: list[Any] = [spec.json_schema()]
        elif isinstance(spec, ToolCallsSpec | TextOrToolCallsSpec):
            calls = spec.calls if isinstance(spec, TextOrToolCallsSpec) else spec
            schemas = [calls.json_schema()]
        else:
            return False  # structural tags: xgrammar's only
        return all(self._same_enforcement(s) for s in schemas)

    def _same_enforcement(self, schema: Any) -> bool:
        # Measured (strictcall-bench cold-compile): a string with both `format` and `pattern`
        # is read differently by the two masks (llguidance refused valid URIs): not bridged.
        if any("format" in node and "pattern" in node for node, _ in iter_schema_nodes(schema)):
            return False
        try:
            analysis = check_schema(schema, table=self.fast.keywords)
        except GrammarError:
            return False
        tiers = {use.tier for use in analysis.report.uses}
        return tiers <= {"grammar", "annotation"} and analysis.grammar_schema == schema

    # -- masks --------------------------------------------------------------------------
    def matcher(self, compiled: CompiledGrammar) -> GrammarMatcher:
        if isinstance(compiled.handle, _Bridged):
            return self.fast.matcher(compiled.handle.inner)
        return self.primary.matcher(compiled)

    def allocate_bitmask(self, batch_size: int) -> torch.Tensor:
        return self.primary.allocate_bitmask(batch_size)

    def apply_bitmask(self, logits: torch.Tensor, bitmask: torch.Tensor,
                      rows: list[int]) -> None:
        self.primary.apply_bitmask(logits, bitmask, rows)

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        if isinstance(compiled.handle, _Bridged):
            return self.fast.accepts(compiled.handle.inner, text)
        return self.primary.accepts(compiled, text)


def is_bridged(compiled: CompiledGrammar) -> bool:
    return isinstance(compiled.handle, _Bridged)
