"""What the cold-compile bridge takes off a grammar schema before llguidance compiles it
(grammars/bridge.py): only loosening, each keyword taken off reported as the validator's.

Always: annotations (less to compile; llguidance would intersect them with a union's
target), and the keywords beside a `$ref` (xgrammar's mask follows the `$ref` alone). On
llguidance's refusal, one more thing each time (`loosening`, then `loosened` again): the
keywords beside a recursive `$ref` ("circular references with sibling keys"), every
`type` beside a union ("incompatible types"), a `pattern` its regex engine refuses."""

from __future__ import annotations

import copy
import re
from typing import Any

from grammars._walk import iter_schema_nodes
from grammars.errors import GrammarError
from grammars.keywords import EnforcementReport

# Loosened on llguidance's "incompatible types": every `type` beside a union.
UNION_TYPES = "#types beside unions"
# How many recursive `$ref`s (each with keywords beside it) one bridged schema may loosen.
MAX_LOOSENED = 8
# Loosened on a regex llguidance refuses: this prefix and the pattern's text.
PATTERN = "#pattern "
_REGEX = re.compile(r"(?:lookarounds|not supported).*? in regex /\^\(\?:(.*)\)\$/", re.DOTALL)
_CIRCULAR = re.compile(r"circular references with sibling keys are not supported: \S*?#(\S*)")


def loosening(exc: GrammarError) -> str | None:
    """What to take off the bridged schema for llguidance's refusal `exc`, marked for
    `loosened` (None: no loosening cures it)."""
    return _circular_ref(exc) or _unread_pattern(exc) or (
        UNION_TYPES if "incompatible types" in exc.message else None)


def loosened(schema: dict[str, Any], report: EnforcementReport, loosen: frozenset[str]
             ) -> tuple[dict[str, Any], list[str]]:
    """The grammar schema `schema` (a copy of its own: edited in place) as the bridge
    compiles it: annotations and the keywords beside `$ref`s taken off always, and what
    `loosen` names (each from an earlier refusal, `loosening`); and the pointers of what
    it took off (the grammar-tier keywords among them are then the validator's). `report`:
    the keyword analysis `schema` came from."""
    grammar_schema = schema
    nodes = list(iter_schema_nodes(grammar_schema))
    into = _ref_prefixes(nodes)
    if _annotations_out(nodes, into, report):  # walked again, as it now is
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
    return grammar_schema, dropped


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
