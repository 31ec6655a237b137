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

import copy
import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grammars._walk import iter_schema_nodes
from grammars.backend_types import CompiledGrammar, GrammarMatcher, MaskingBackend
from grammars.errors import GrammarError
from grammars.keywords import EnforcementReport, KeywordUse, analyze
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
                    target = _circular_ref(exc) or _unread_pattern(exc) or (
                        UNION_TYPES if "incompatible types" in exc.message else None)
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
        grammar_schema = analysis.grammar_schema  # a copy of its own: edited in place
        nodes = list(iter_schema_nodes(grammar_schema))
        into = _ref_prefixes(nodes)
        if _annotations_out(nodes, into, analysis.report):  # walked again, as it now is
            nodes = list(iter_schema_nodes(grammar_schema))
            into = _ref_prefixes(nodes)
        dropped = _beside_refs_out(nodes, into)
        if UNION_TYPES in loosen:
            dropped += _types_beside_unions_out(grammar_schema)
        patterns = {t for t in loosen if t.startswith(PATTERN)}
        if patterns:
            dropped += _patterns_out(grammar_schema, {t[len(PATTERN):] for t in patterns})
        if refs := loosen - patterns - {UNION_TYPES}:
            grammar_schema, more = _ref_siblings_out(grammar_schema, refs)
            dropped += more
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


# Loosened on llguidance's "incompatible types": every `type` beside a union.
UNION_TYPES = "#types beside unions"
# How many recursive `$ref`s (each with keywords beside it) one bridged schema may loosen.
MAX_LOOSENED = 8
# Loosened on a regex llguidance refuses: this prefix and the pattern's text.
PATTERN = "#pattern "
_REGEX = re.compile(r"(?:lookarounds|not supported).*? in regex /\^\(\?:(.*)\)\$/", re.DOTALL)
_CIRCULAR = re.compile(r"circular references with sibling keys are not supported: \S*?#(\S*)")


def _unread_pattern(exc: GrammarError) -> str | None:
    """The `pattern` llguidance's regex engine refused (an end anchor inside a group,
    `^([^,]+(,|$)){3,}$`, reads to it as a lookaround; RE2 and the validator run it), marked
    for `loosen`, if that is what `exc` says."""
    found = _REGEX.search(exc.message)
    return PATTERN + found.group(1) if found else None


def _patterns_out(schema: dict[str, Any], patterns: set[str]) -> list[str]:
    """In place, each `pattern` that is one of `patterns` taken off; returns the pointers.
    Only loosening: the validator checks it after decoding, as without the bridge."""
    dropped = []
    for node, pointer in iter_schema_nodes(schema):
        if node.get("pattern") in patterns:
            dropped.append(f"{pointer}/pattern")
            del node["pattern"]
    return dropped


def _circular_ref(exc: GrammarError) -> str | None:
    """The fragment (`/definitions/x`) of the recursive `$ref` llguidance refused to
    intersect with the keywords beside it, if that is what `exc` says."""
    found = _CIRCULAR.search(exc.message)
    return found.group(1).rstrip(".") if found else None


# Kept: they say where `$ref`s resolve.
_RESOLVING = frozenset({"$id", "id", "$schema", "$anchor", "$dynamicAnchor", "$vocabulary"})
_JSON_TYPES = frozenset({"object", "array", "string", "number", "boolean", "null"})
_UNIONS = ("anyOf", "oneOf", "allOf")
_COMBINATORS = frozenset({*_UNIONS, "$ref"})
_DEFINITIONS = frozenset({"$defs", "definitions"})


def _annotations_out(nodes: list[tuple[dict[str, Any], str]], into: frozenset[str],
                     report: EnforcementReport) -> bool:
    """In place, what changes no value's validity taken off the schema llguidance compiles:
    annotations (`description`, `x-taplo`, ...; not one a `$ref` points into), and beside
    a union or `$ref` alone, a `type` listing every type, `additionalProperties` and
    `items` that allow anything (`true`, `{}`).
    llguidance intersects a union's or a `$ref`'s target with any keyword beside it, and
    cannot where the target is recursive ("circular references with sibling keys"); less
    text is also less to compile. Returns whether a subschema went with them (`nodes`
    then holds some no longer in the schema)."""
    notes = {u.pointer for u in report.uses if u.tier == "annotation"}
    gone = False
    for node, pointer in nodes:
        for key in [k for k in node if k not in _RESOLVING and f"{pointer}/{k}" in notes]:
            if f"{pointer}/{key}/" not in into:
                gone = gone or isinstance(node[key], dict | list)
                del node[key]
        rest = node.keys() - {"type", "additionalProperties", "items"}
        if rest and rest <= _COMBINATORS:
            types = node.get("type")
            if isinstance(types, list) and set(types) >= _JSON_TYPES:
                del node["type"]
            for key in ("additionalProperties", "items"):  # no properties, no prefixItems
                if node.get(key, False) in (True, {}):
                    gone = gone or node[key] == {}
                    del node[key]
    return gone


def _ref_prefixes(nodes: list[tuple[dict[str, Any], str]]) -> frozenset[str]:
    """Every pointer some `$ref` among `nodes` points into or at, each ending in "/": a
    keyword at `p` holds a `$ref`'s target if and only if `p + "/"` is in it (one set
    lookup per keyword, not a scan of every `$ref`: large schemas hold thousands)."""
    into: set[str] = set()
    for node, _ in nodes:
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = ref.partition("#")[2] + "/"
            into.update(target[:i + 1] for i, c in enumerate(target) if c == "/")
    return frozenset(into)


def _beside_refs_out(nodes: list[tuple[dict[str, Any], str]], into: frozenset[str]
                     ) -> list[str]:
    """In place, the keywords beside each `$ref` taken off (but the `$ref`, definitions, what
    says where refs resolve, and any keyword a `$ref` points into); returns their pointers.
    xgrammar's mask follows the `$ref` alone and ignores what stands beside it (measured:
    `pattern`, `maxLength`); llguidance's intersects the two. So, beside a `$ref`, the
    bridged mask would be the stricter one: under the whole-match reading of patterns it
    refused a Discord webhook's valid URLs (`"^https?://"` beside `{"$ref": "#/definitions/
    string"}`, JsonSchemaStore) that xgrammar's mask and the validator accept. Taken off,
    the bridge enforces what xgrammar would, and those keywords are the validator's."""
    dropped = []
    for node, pointer in nodes:
        if not isinstance(node.get("$ref"), str):
            continue
        for key in [k for k in node if k not in _COMBINATORS | _RESOLVING | _DEFINITIONS
                    and f"{pointer}/{k}/" not in into]:
            dropped.append(f"{pointer}/{key}")
            del node[key]
    return dropped


def _types_beside_unions_out(schema: dict[str, Any]) -> list[str]:
    """In place, `type` taken off each node that also holds anyOf/oneOf/allOf; returns the
    pointers. xgrammar's mask takes a union's branches and ignores a `type` beside them;
    llguidance's intersects the two and refuses the whole schema where one such node has
    no value left ("incompatible types": `{"type": "object", "oneOf": [{"type": "string"},
    ...]}` under an optional property, Github_hard's Atom feeds), though the schema is
    satisfiable. Taken off, the bridge reads the node as xgrammar's mask does."""
    dropped = []
    for node, pointer in iter_schema_nodes(schema):
        if "type" in node and any(isinstance(node.get(k), list) for k in _UNIONS):
            dropped.append(f"{pointer}/type")
            del node["type"]
    return dropped


def _ref_siblings_out(schema: dict[str, Any], targets: frozenset[str]
                      ) -> tuple[dict[str, Any], list[str]]:
    """`schema` with only its `$ref` and unions left on each node where llguidance would
    intersect one of `targets` (fragments of recursive `$ref`s) with other keywords: a
    `$ref` to it, a union with a branch that is such a `$ref`, and the target itself where
    it is a union. Kept: definitions, and any keyword a `$ref` points into. Returns the
    pointers of the keywords taken off: what is left allows every value the node did."""
    schema = copy.deepcopy(schema)
    dropped = []

    def aims(node: Any) -> bool:
        ref = node.get("$ref") if isinstance(node, dict) else None
        return isinstance(ref, str) and ref.partition("#")[2] in targets

    nodes = list(iter_schema_nodes(schema))
    into = _ref_prefixes(nodes)
    for node, pointer in nodes:
        unions = [node[k] for k in _UNIONS if isinstance(node.get(k), list)]
        if aims(node) or any(aims(b) for u in unions for b in u) \
                or (unions and pointer in targets):
            for key in [k for k in node if k not in _COMBINATORS | _RESOLVING | _DEFINITIONS
                        and f"{pointer}/{k}/" not in into]:
                dropped.append(f"{pointer}/{key}")
                del node[key]
    return schema, dropped


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
