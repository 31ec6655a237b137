"""What to compile: a request is reduced to a frozen, hashable grammar spec.

Kinds:
- `JsonSchemaSpec`: one JSON value matching a schema (`response_format`, a named tool's arguments).
- `ToolCallsSpec`: a JSON array of calls, each `{"name": <one of the tools>, "arguments": {...}}`.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from grammars._walk import iter_schema_nodes
from grammars.errors import InvalidSchemaError, UnsupportedSchemaError
from grammars.keywords import (
    Analysis,
    EnforcementReport,
    KeywordTable,
    KeywordUse,
    Tier,
    analyze,
)
from grammars.metaschema import check_json_value, check_metaschema
from grammars.patterns import PatternError, client_regex


def canonical_json(schema: Any) -> str:
    """Compact JSON with keys sorted, except inside `properties`, whose order the grammar keeps."""
    return json.dumps(_canonical(schema), separators=(",", ":"), ensure_ascii=False)


def _canonical(node: Any, *, keep_order: bool = False) -> Any:
    if isinstance(node, dict):
        keys = list(node) if keep_order else sorted(node)
        return {k: _canonical(node[k], keep_order=(k == "properties" and not keep_order))
                for k in keys}
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    return node


def check_schema(schema: Any, *, table: KeywordTable, where: str = "schema") -> Analysis:
    """Validate a client JSON Schema against its draft's metaschema and classify every keyword;
    refuse it, naming each keyword, if any is enforced by nothing here. Remembered per
    schema text: clients send the same tools with every request, and the metaschema check
    of a large schema costs hundreds of milliseconds. (The result is shared: read only.)"""
    if not isinstance(schema, dict):
        raise InvalidSchemaError(f"{where} must be a JSON object, got {type(schema).__name__}",
                                 hint="Send a JSON Schema object such as {\"type\": \"object\"}.")
    rows, grammar_schema, grammar_json = _checked(
        json.dumps(schema, sort_keys=False, ensure_ascii=False), where, table)
    return Analysis(EnforcementReport(table.backend, tuple(map(KeywordUse._make, rows))),
                    grammar_schema, grammar_json)


# What a check keeps: the report's uses as plain tuples of strings and a flag, which the
# cyclic collector stops tracking (kept as objects, the uses were most of what a full
# collection walked: 57,000 of 71,000 objects after 300 Kubernetes schemas, a 19 ms pause;
# a tuple subclass such as `KeywordUse` stays tracked), the grammar schema and its canonical
# text, which a spec is keyed by and a hit need not write again.
_Checked = tuple[tuple[tuple[str, str, Tier, str, bool], ...], dict[str, Any], str]


@functools.lru_cache(maxsize=1024)
def _checked(text: str, where: str, table: KeywordTable) -> _Checked:
    analysis = _analysis(text, where, table)
    return (tuple((u.pointer, u.keyword, u.tier, u.note, u.implicit)
                  for u in analysis.report.uses), analysis.grammar_schema,
            canonical_json(analysis.grammar_schema))


def _analysis(text: str, where: str, table: KeywordTable) -> Analysis:
    schema = json.loads(text)
    check_json_value(schema, where=where)
    check_metaschema(schema, where=where)
    _check_patterns(schema, where)
    analysis = analyze(schema, table, copy_of=json.loads(text))  # (a parse, not a deep copy)
    rejected = analysis.report.of("rejected")
    if rejected:
        first = rejected[0]
        more = f" (and {len(rejected) - 1} more)" if len(rejected) > 1 else ""
        raise UnsupportedSchemaError(
            f"{where} uses {first.keyword!r}{more}, which nothing here enforces: {first.note}",
            pointer=first.pointer,
            hint="Remove it, or express the rule with keywords listed by "
                 "POST /v1/grammars/compile, or check it in your own code.",
            details=[u.to_json() for u in rejected])
    return analysis


def _check_patterns(schema: dict[str, Any], where: str) -> None:
    """Every pattern runs in RE2 (grammars/patterns.py), in linear time: one it cannot
    compile (a lookahead, a backreference) is refused up front, not left to fail or hang on
    an output later. jsonschema's `unevaluatedProperties` would run `patternProperties` in
    Python's backtracking `re`, so the two together are refused too."""
    unevaluated = properties = ""
    for node, pointer in iter_schema_nodes(schema):
        found = [(f"{pointer}/pattern", node["pattern"])] \
            if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            properties = properties or f"{pointer}/patternProperties"
            found += [(f"{pointer}/patternProperties", p) for p in node["patternProperties"]]
        if "unevaluatedProperties" in node:
            unevaluated = unevaluated or f"{pointer}/unevaluatedProperties"
        for where_in, pattern in found:
            try:
                client_regex(pattern)
            except PatternError as exc:
                raise UnsupportedSchemaError(
                    f"{where} has a pattern the server cannot run: {exc}", pointer=where_in,
                    hint="Write it without lookarounds or backreferences (RE2's syntax, a "
                         "subset of ECMA-262's), or check it in your own code.") from None
    if unevaluated and properties:
        raise UnsupportedSchemaError(
            f"{where} uses 'unevaluatedProperties' beside 'patternProperties' "
            f"(at {properties!r}), which the validator cannot run in linear time",
            pointer=unevaluated,
            hint="Use 'additionalProperties' in the object that has the 'patternProperties'.")


@dataclass(frozen=True)
class JsonSchemaSpec:
    """One JSON value matching `schema_json` (canonical JSON text)."""

    schema_json: str

    @classmethod
    def from_schema(cls, schema: Any, *, table: KeywordTable,
                    where: str = "schema") -> JsonSchemaSpec:
        return cls.from_analysis(check_schema(schema, where=where, table=table))

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> JsonSchemaSpec:
        return cls(analysis.grammar_json or canonical_json(analysis.grammar_schema))

    @cached_property
    def key(self) -> str:
        return _digest("json_schema", self.schema_json)

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = json.loads(self.schema_json)
        return schema


@dataclass(frozen=True)
class ToolSpec:
    name: str
    parameters_json: str

    @classmethod
    def from_parameters(cls, name: str, parameters: Any, *,
                        table: KeywordTable) -> ToolSpec:
        checked = check_schema(parameters, where=f"parameters of tool {name!r}", table=table)
        return cls.from_analysis(name, checked)

    @classmethod
    def from_analysis(cls, name: str, analysis: Analysis) -> ToolSpec:
        return cls(name, analysis.grammar_json or canonical_json(analysis.grammar_schema))


@dataclass(frozen=True)
class ToolCallsSpec:
    """A JSON array of `min_calls`..`max_calls` calls (no upper bound when `max_calls` is None)."""

    tools: tuple[ToolSpec, ...]
    min_calls: int = 1
    max_calls: int | None = None

    def __post_init__(self) -> None:
        if not self.tools:
            raise InvalidSchemaError("a tool-call grammar needs at least one tool")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise InvalidSchemaError(f"tool names must be unique; repeated: {dup}")

    @cached_property
    def key(self) -> str:
        body = json.dumps([[t.name, t.parameters_json] for t in self.tools], separators=(",", ":"))
        return _digest("tool_calls", f"{self.min_calls}:{self.max_calls}:{body}")

    def json_schema(self) -> dict[str, Any]:
        calls, defs = [], {}
        for i, tool in enumerate(self.tools):
            arguments, tool_defs = _hoist_defs(json.loads(tool.parameters_json), f"t{i}_")
            defs.update(tool_defs)
            calls.append({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            })
        schema: dict[str, Any] = {
            "type": "array",
            "items": calls[0] if len(calls) == 1 else {"anyOf": calls},
            "minItems": self.min_calls,
        }
        if self.max_calls is not None:
            schema["maxItems"] = self.max_calls
        if defs:
            schema["$defs"] = defs
        return schema


def _hoist_defs(schema: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move a tool's local definitions to the root of the call-array schema, renamed with
    `prefix`, so its `$ref`s still resolve once the tool is nested under `arguments`."""
    body = copy.deepcopy(schema)
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        for name, sub in body.pop(key, {}).items():
            defs[f"{prefix}{name}"] = sub
    root_name = f"{prefix}__root"

    def rewrite(ref: str) -> str:
        for key in ("#/$defs/", "#/definitions/"):
            if ref.startswith(key):
                return f"#/$defs/{prefix}{ref[len(key):]}"
        if ref == "#":
            defs[root_name] = body
            return f"#/$defs/{root_name}"
        raise UnsupportedSchemaError(
            f"$ref {ref!r} cannot be resolved once the tool is nested in a call",
            hint="Point $ref at '#/$defs/NAME' (or '#').")

    for node, _ in [*iter_schema_nodes(body), *(p for d in list(defs.values())
                                                for p in iter_schema_nodes(d))]:
        if isinstance(node.get("$ref"), str):
            node["$ref"] = rewrite(node["$ref"])
    return body, defs


@dataclass(frozen=True)
class TextOrToolCallsSpec:
    """Free text; once the model writes `begin`, a `ToolCallsSpec` array, then `end`, then
    nothing more. For tool_choice="auto": any call it makes is valid, or it answers in text."""

    calls: ToolCallsSpec
    begin: str  # the model format's own call markers (SmolLM2's "<tool_call>")
    end: str

    @cached_property
    def key(self) -> str:
        return _digest("text_or_tool_calls", f"{self.begin}\0{self.end}\0{self.calls.key}")

    def structural_tag(self) -> dict[str, Any]:
        content = {"type": "json_schema", "json_schema": self.calls.json_schema(),
                   # xgrammar requires >= 1: at most one whitespace character in a row
                   "max_whitespace_cnt": 1}
        return {"type": "structural_tag", "format": {
            "type": "triggered_tags", "triggers": [self.begin],
            "tags": [{"type": "tag", "begin": self.begin, "content": content, "end": self.end}],
            "at_least_one": False, "stop_after_first": True}}


@dataclass(frozen=True)
class StructuralTagSpec:
    """A model format's own output grammar as an xgrammar structural tag: a family's tool-call
    syntax with each tool's arguments under its schema (`xgrammar.get_model_structural_tag`),
    a free reasoning block before the answer, or both. `tag` is its canonical JSON text;
    `label` says what it is for, in logs and the cache."""

    tag: str
    label: str = "structural_tag"

    @classmethod
    def of(cls, tag: dict[str, Any], *, label: str = "structural_tag") -> StructuralTagSpec:
        # Not key-sorted: a JSON Schema's property order is the order the grammar writes.
        return cls(json.dumps(tag, ensure_ascii=False), label)

    @cached_property
    def key(self) -> str:
        return _digest("structural_tag", self.tag)

    def structural_tag(self) -> dict[str, Any]:
        tag: dict[str, Any] = json.loads(self.tag)
        return tag


# The specs compiled as structural tags (the others are one JSON Schema each).
TaggedSpec = TextOrToolCallsSpec | StructuralTagSpec
GrammarSpec = JsonSchemaSpec | ToolCallsSpec | TextOrToolCallsSpec | StructuralTagSpec


def _digest(kind: str, text: str) -> str:
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()
