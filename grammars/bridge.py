"""xgrammar with llguidance as a bridge over cold compiles (`--cold-compile bridge`).

xgrammar compiles a schema ahead (milliseconds to seconds, then cached); llguidance builds
its masks lazily and compiles in 1-2 ms. Bridged, a request whose schema is not compiled yet
does not wait: it decodes under llguidance's mask while xgrammar compiles in the background,
and later requests use xgrammar's cached grammar.

Honest about what it enforces: llguidance's keyword table reads the schema xgrammar would
compile, and a keyword xgrammar's mask would enforce but llguidance's leaves to the validator
(`oneOf` whose branches may overlap, `minProperties`, ...) is compiled out and reported as
validator tier for the bridged request (`reported`): the validator checks every answer
against the client's schema either way. So are, loosening the bridged mask only, the
keywords beside a `$ref` (xgrammar's mask ignores them; llguidance's would intersect them
with the target), those beside a union whose branch is a recursive `$ref`, which
llguidance refuses to intersect ("circular references with sibling keys"), and, where
llguidance finds a union and the `type` beside it share no value ("incompatible types"),
each `type` beside a union (xgrammar's mask takes the branches alone). Not bridged,
so they wait for xgrammar as without the bridge: structural tags, a schema llguidance's
table refuses or its compiler fails on otherwise, and a string left with both `format` and
`pattern` (the keyword layer leaves a pattern beside a format xgrammar enforces to the
validator, since xgrammar's mask follows the format alone; llguidance's would intersect
the two, which refused xAPI's valid `mailto:` addresses under `"^mailto:"`).
The bridge reads the grammar schema, which the keyword layer made from a client schema it
had already checked: it analyzes it with llguidance's table but does not check it against
the metaschema again (that alone cost up to 400 ms on Kubernetes schemas, past the time the
bridge is there to save). Masks share one bitmask layout; xgrammar's kernel applies both.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grammars._walk import iter_schema_nodes
from grammars.backend_types import CompiledGrammar, GrammarMatcher, MaskingBackend
from grammars.errors import GrammarError
from grammars.keywords import EnforcementReport, KeywordUse, analyze
from grammars.loosening import MAX_LOOSENED, loosened, loosening
from grammars.specs import (
    GrammarSpec,
    JsonSchemaSpec,
    TextOrToolCallsSpec,
    ToolCallsSpec,
    ToolSpec,
)

if TYPE_CHECKING:
    import numpy as np


log = logging.getLogger("strictcall.grammars")

# Grammar schemas this long (in JSON text) are bridged before xgrammar starts, not beside it.
# On JSONSchemaBench here, of the JsonSchemaStore grammar schemas over 32 kB one of nine
# compiled in xgrammar within the 25 ms a miss waits for it (goss, 34.7 kB: 24 ms); the
# rest took 47 ms to 24 s. Side by side on this machine's two cores, the two compilers
# slowed the bridge: 25 ms alone, 45 ms beside xgrammar (Kubernetes kb_144); CI/CD's ci.json
# (43.9 kB) 28 ms alone, 62 ms beside it. Shorter ones start both: most compile in xgrammar
# before the wait is over.
BRIDGE_FIRST_BYTES = 32_000


def bridge_first(spec: GrammarSpec) -> bool:
    """Whether `spec` is long enough that its bridge should run before xgrammar's compile,
    alone on the CPU, so that its first mask comes sooner (module constant above)."""
    if isinstance(spec, TextOrToolCallsSpec):
        spec = spec.calls
    if isinstance(spec, JsonSchemaSpec):
        return len(spec.schema_json) >= BRIDGE_FIRST_BYTES
    if isinstance(spec, ToolCallsSpec):
        return sum(len(t.parameters_json) for t in spec.tools) >= BRIDGE_FIRST_BYTES
    return False  # structural tags: never bridged


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

    def __init__(self, primary: MaskingBackend,
                 fast: MaskingBackend | Future[MaskingBackend]) -> None:
        """`fast`: the llguidance backend, or its build still running (its token trie takes
        about a quarter of a second, overlapped with the model's load); the first use
        waits for it, and the settings made meanwhile are applied to it then."""
        self.primary = primary
        self._fast = fast
        self._held: list[Callable[[MaskingBackend], None]] = []  # settings made meanwhile
        self._lock = threading.Lock()
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

    @property
    def fast(self) -> MaskingBackend:
        with self._lock:
            if isinstance(self._fast, Future):
                built = self._fast.result()
                for setting in self._held:
                    setting(built)
                self._fast, self._held = built, []
            return self._fast

    def ready(self) -> None:
        self.primary.ready()
        _ = self.fast

    def _to_fast(self, setting: Callable[[MaskingBackend], None]) -> None:
        with self._lock:
            if isinstance(self._fast, Future):
                self._held.append(setting)
                return
        setting(self._fast)

    def set_strict_objects(self, strict: bool) -> None:
        self.primary.set_strict_objects(strict)
        self._to_fast(lambda fast: fast.set_strict_objects(strict))
        self.keywords = self.primary.keywords

    def set_json_layout(self, layout: str) -> None:
        self.primary.set_json_layout(layout)
        self._to_fast(lambda fast: fast.set_json_layout(layout))

    # -- the bridge -----------------------------------------------------------------------
    def bridge(self, spec: GrammarSpec) -> CompiledGrammar | None:
        """llguidance's grammar for `spec`, or None where it is not bridged (module doc).
        Where llguidance refuses a recursive `$ref` with keywords beside it, those keywords
        are left out of the bridged schema (only loosening it) and reported as the
        validator's, and it compiles again; up to `MAX_LOOSENED` such refs."""
        loosen: frozenset[str] = frozenset()
        try:
            while True:
                fast_spec, demoted = self._fast_spec(spec, loosen)
                try:
                    inner = self.fast.compile(fast_spec)
                    break
                except GrammarError as exc:
                    target = loosening(exc)
                    if target is None or target in loosen or len(loosen) >= MAX_LOOSENED:
                        raise
                    loosen |= {target}
        except (GrammarError, _NotBridged):
            return None
        except Exception:  # a bridge is a shortcut: on any surprise, wait for xgrammar
            log.warning("the cold-compile bridge failed on a schema; it waits for xgrammar",
                        exc_info=True)
            return None
        return CompiledGrammar(spec, _Bridged(inner, demoted), inner.compile_seconds,
                               inner.size_bytes)

    def _fast_spec(self, spec: GrammarSpec, loosen: frozenset[str] = frozenset()
                   ) -> tuple[GrammarSpec, tuple[KeywordUse, ...]]:
        """`spec` as llguidance's table reads it, and the keywords it leaves to the validator."""
        if isinstance(spec, JsonSchemaSpec):
            schema, demoted = self._read(spec.schema_json, "", loosen)
            return JsonSchemaSpec(_compact(schema)), demoted
        if isinstance(spec, ToolCallsSpec | TextOrToolCallsSpec):
            calls = spec.calls if isinstance(spec, TextOrToolCallsSpec) else spec
            tools, demoted = [], ()
            for tool in calls.tools:
                schema, lost = self._read(tool.parameters_json, f"{tool.name}#", loosen)
                tools.append(ToolSpec(tool.name, _compact(schema)))
                demoted += lost
            read = dataclasses.replace(calls, tools=tuple(tools))
            if isinstance(spec, TextOrToolCallsSpec):
                return dataclasses.replace(spec, calls=read), demoted
            return read, demoted
        raise _NotBridged  # structural tags: xgrammar's only

    def _read(self, text: str, prefix: str, loosen: frozenset[str] = frozenset()
              ) -> tuple[dict[str, Any], tuple[KeywordUse, ...]]:
        """The schema llguidance compiles for the schema `text` (a grammar schema: the
        keyword layer has checked the client's schema it came from, so it is analyzed, not
        checked against the metaschema again, which cost up to 400 ms on large schemas), and
        what it leaves to the validator. Cold path: the text is parsed twice rather than
        deep-copied, and the edited schema walked once for both edits."""
        schema = json.loads(text)
        if not isinstance(schema, dict):
            raise _NotBridged
        if any("format" in n and "pattern" in n for n, _ in iter_schema_nodes(schema)):
            raise _NotBridged  # the two masks read the pair differently (module doc)
        lost: tuple[KeywordUse, ...] = ()
        analysis = analyze(schema, self.fast.keywords, copy_of=json.loads(text))
        if analysis.report.of("rejected"):
            raise _NotBridged
        grammar_schema, dropped = loosened(analysis.grammar_schema, analysis.report, loosen)
        if dropped:
            lost += tuple(u for u in analysis.report.uses if u.tier == "grammar"
                          and any(u.pointer == p or u.pointer.startswith(p + "/")
                                  for p in dropped))
        demoted = tuple(u._replace(pointer=prefix + u.pointer, tier="validator",
                                   note=DEMOTED_NOTE)
                        for u in (*analysis.report.of("validator"), *lost))
        return grammar_schema, demoted

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


def _compact(schema: dict[str, Any]) -> str:
    """The bridged schema's text: compact, keys as they stand (a bridged grammar is never a
    cache key, so it needs no canonical form)."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


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
