"""xgrammar with llguidance as a bridge over cold compiles (`--cold-compile bridge`).

xgrammar compiles a schema ahead (milliseconds to seconds, then cached); llguidance builds
its masks lazily and compiles in 1-2 ms. Bridged, a request whose schema is not compiled yet
does not wait: it decodes under llguidance's mask while xgrammar compiles in the background,
and later requests use xgrammar's cached grammar.

Honest about what it enforces: llguidance's keyword table reads the schema xgrammar would
compile, and a keyword xgrammar's mask would enforce but llguidance's leaves to the validator
(`oneOf` whose branches may overlap, `minProperties`, ...) is compiled out and reported as
validator tier for the bridged request (`reported`): the validator checks every answer
against the client's schema either way. Not bridged, so they wait for xgrammar as without
the bridge: structural tags, a schema llguidance's table refuses or its compiler fails on,
and a string with both `format` and `pattern` (measured: llguidance's mask refused valid
URIs there, which the validator cannot undo). Masks share one bitmask layout; xgrammar's
kernel applies both.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grammars._walk import iter_schema_nodes
from grammars.backend_types import CompiledGrammar, GrammarMatcher, MaskingBackend
from grammars.errors import GrammarError
from grammars.keywords import Analysis, EnforcementReport, KeywordUse
from grammars.specs import (
    GrammarSpec,
    JsonSchemaSpec,
    TextOrToolCallsSpec,
    ToolCallsSpec,
    ToolSpec,
    check_schema,
)

if TYPE_CHECKING:
    import numpy as np


DEMOTED_NOTE = ("served under llguidance's mask while xgrammar compiled (cold-compile "
                "bridge), which leaves this to the validator")


@dataclass(frozen=True)
class _Bridged:
    """The handle of a grammar llguidance compiled for the bridge, with the keywords its
    mask leaves to the validator where xgrammar's would not (pointers as in the request's
    report: a tool's prefixed `name#`)."""

    inner: CompiledGrammar
    demoted: tuple[KeywordUse, ...] = ()


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
        self.keywords = primary.keywords  # the primary's, kept in step

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
        self.keywords = self.primary.keywords

    # -- the bridge -----------------------------------------------------------------------
    def bridge(self, spec: GrammarSpec) -> CompiledGrammar | None:
        """llguidance's grammar for `spec`, or None where it is not bridged (module doc)."""
        try:
            fast_spec, demoted = self._fast_spec(spec)
            inner = self.fast.compile(fast_spec)
        except (GrammarError, _NotBridged):
            return None
        return CompiledGrammar(spec, _Bridged(inner, demoted), inner.compile_seconds,
                               inner.size_bytes)

    def _fast_spec(self, spec: GrammarSpec) -> tuple[GrammarSpec, tuple[KeywordUse, ...]]:
        """`spec` as llguidance's table reads it, and the keywords it leaves to the validator."""
        if isinstance(spec, JsonSchemaSpec):
            analysis, demoted = self._read(spec.json_schema(), "")
            return JsonSchemaSpec.from_analysis(analysis), demoted
        if isinstance(spec, ToolCallsSpec | TextOrToolCallsSpec):
            calls = spec.calls if isinstance(spec, TextOrToolCallsSpec) else spec
            tools, demoted = [], ()
            for tool in calls.tools:
                analysis, lost = self._read(json.loads(tool.parameters_json), f"{tool.name}#")
                tools.append(ToolSpec.from_analysis(tool.name, analysis))
                demoted += lost
            read = dataclasses.replace(calls, tools=tuple(tools))
            if isinstance(spec, TextOrToolCallsSpec):
                return dataclasses.replace(spec, calls=read), demoted
            return read, demoted
        raise _NotBridged  # structural tags: xgrammar's only

    def _read(self, schema: Any, prefix: str) -> tuple[Analysis, tuple[KeywordUse, ...]]:
        if any("format" in node and "pattern" in node for node, _ in iter_schema_nodes(schema)):
            raise _NotBridged
        analysis = check_schema(schema, table=self.fast.keywords)  # GrammarError: not bridged
        demoted = tuple(dataclasses.replace(u, pointer=prefix + u.pointer, note=DEMOTED_NOTE)
                        for u in analysis.report.of("validator"))
        return analysis, demoted

    # -- masks --------------------------------------------------------------------------
    def matcher(self, compiled: CompiledGrammar) -> GrammarMatcher:
        if isinstance(compiled.handle, _Bridged):
            return self.fast.matcher(compiled.handle.inner)
        return self.primary.matcher(compiled)

    def allocate_bitmask(self, batch_size: int) -> np.ndarray:
        return self.primary.allocate_bitmask(batch_size)

    def apply_bitmask(self, logits: Any, bitmask: np.ndarray,
                      rows: list[int]) -> None:
        self.primary.apply_bitmask(logits, bitmask, rows)

    def accepts(self, compiled: CompiledGrammar, text: str) -> bool:
        if isinstance(compiled.handle, _Bridged):
            return self.fast.accepts(compiled.handle.inner, text)
        return self.primary.accepts(compiled, text)


class _NotBridged(Exception):
    """A spec the bridge leaves to xgrammar."""


def is_bridged(compiled: CompiledGrammar) -> bool:
    return isinstance(compiled.handle, _Bridged)


def bridge_demoted(compiled: CompiledGrammar) -> tuple[KeywordUse, ...]:
    """What a bridged grammar's mask leaves to the validator where xgrammar's would not."""
    return compiled.handle.demoted if isinstance(compiled.handle, _Bridged) else ()


def reported(compiled: CompiledGrammar, report: EnforcementReport) -> EnforcementReport:
    """The request's enforcement report under the mask it decoded with: xgrammar's report,
    with what a bridged llguidance mask left to the validator moved to that tier."""
    left = {(u.pointer, u.keyword): u for u in bridge_demoted(compiled)}
    if not left:
        return report
    uses = [left.pop((u.pointer, u.keyword), u) if u.tier == "grammar" else u
            for u in report.uses]
    return EnforcementReport(report.backend, (*uses, *left.values()))
