"""Which keyword of a JSON Schema is enforced by what: the enforcement report.

Every keyword occurrence is classified, with its JSON Pointer, into one tier:
- `grammar`: the backend's token mask enforces it; output breaking it cannot be decoded;
- `validator`: the mask does not (or gets it wrong); the post-decode JSON Schema check does.
  Such keywords are left out of the schema the backend compiles (which only relaxes it);
- `annotation`: no effect on what is valid (`title`, `description`, ...);
- `rejected`: nothing here enforces it. The schema is refused (400) naming each one.

Each backend has its own table (`KeywordTable`): what its masks enforce is a fact about that
backend and version, measured, not assumed (see tests/grammars/test_keywords.py).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import FormatChecker

from grammars._walk import iter_schema_nodes

Tier = Literal["grammar", "validator", "annotation", "rejected"]
TIERS: tuple[Tier, ...] = ("grammar", "validator", "annotation", "rejected")

ANNOTATIONS = frozenset({
    "title", "description", "examples", "default", "$comment", "$schema", "$id", "id",
    "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding",
    "contentSchema", "discriminator", "$vocabulary"})

# Annotation keywords of other published vocabularies that ride along in JSON Schemas, as
# their own specifications define them: none changes what is valid. (OpenAPI 3.0's
# `nullable` does, so it is not here: it is rejected with a hint.)
VOCABULARY_ANNOTATIONS: dict[str, frozenset[str]] = {
    "OpenAPI 3": frozenset({"example", "xml", "externalDocs"}),
    "JSON Hyper-Schema": frozenset({
        "links", "base", "media", "mediaType", "binaryEncoding", "pathStart",
        "fragmentResolution", "readonly", "alternate"}),
    "jsonschema2pojo": frozenset({
        "javaType", "javaName", "javaInterfaces", "javaEnumNames", "javaEnums",
        "existingJavaType", "customDatePattern", "customTimePattern", "customDateTimePattern",
        "excludedFromEqualsAndHashCode", "javaJsonView", "extendsJavaClass"}),
    "json-editor / react-jsonschema-form": frozenset({
        "options", "propertyOrder", "headerTemplate", "enumNames", "enum_titles"}),
    "json-schema-faker": frozenset({"faker", "chance"}),
    "Ajv": frozenset({"$async", "errorMessage"}),
}
_VOCABULARY_OF = {key: name for name, keys in VOCABULARY_ANNOTATIONS.items() for key in keys}
# Prefixes that mark a key as no rule: OpenAPI's extensions (`x-`), keys commented out or
# private by convention (`_comment`, `_uniqueItems`), JSON-LD (`@context`), and
# react-jsonschema-form's `ui:` options.
ANNOTATION_PREFIXES = ("x-", "_", "@", "ui:")

# Unknown keywords that are rules elsewhere: what to write instead.
_INSTEAD = {
    "nullable": "OpenAPI 3.0's nullable: write the type as [<type>, \"null\"]",
    "divisibleBy": "draft-03's divisibleBy is multipleOf",
    "extends": "draft-03's extends is allOf",
    "disallow": "draft-03's disallow is not: {\"type\": ...}",
    "optional": "draft-03's optional: list the other properties in \"required\"",
    "min": "did you mean 'minimum'?", "max": "did you mean 'maximum'?",
    "minValue": "did you mean 'minimum'?", "maxValue": "did you mean 'maximum'?",
    "constant": "did you mean 'const'?", "unique": "did you mean 'uniqueItems'?",
    "requires": "did you mean 'required' or 'dependentRequired'?",
}

# Every applicator and assertion of JSON Schema (2020-12, and the older drafts' forms): the
# post-decode validator (jsonschema, with the schema's own draft) enforces each of them, so
# any one a backend's mask does not enforce is validator-tier for that backend.
JSON_SCHEMA_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "dependentSchemas", "prefixItems", "items", "contains", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "$ref", "$defs", "definitions", "format", "additionalItems",
    "dependencies"})

# Formats the validator really checks with what is installed (some need optional packages).
VALIDATOR_FORMATS = frozenset(FormatChecker().checkers)

# Keywords whose presence lets an object hold keys beyond `properties`: with them, a strict
# grammar ("no unlisted keys") would refuse valid values, so the grammar schema allows extras.
_OPENS_OBJECT = ("patternProperties", "unevaluatedProperties", "dependentSchemas", "if",
                 "then", "else", "dependencies", "allOf", "anyOf", "oneOf")


@dataclass(frozen=True)
class KeywordTable:
    """What one backend's masks enforce."""

    backend: str
    grammar: frozenset[str]
    formats: frozenset[str]
    # The backend forbids keys that `properties` does not list when additionalProperties is
    # absent (stricter than JSON Schema); reported where it applies.
    strict_objects: bool = True
    # With `pattern` or `format`, length bounds are not enforced by the mask.
    lengths_with_pattern: bool = False
    # allOf with one branch is enforced; with several, not.
    multi_allof: bool = False
    # anyOf/oneOf/allOf and other assertions in the same schema: the mask intersects them.
    # (xgrammar 0.2.9 does not: it takes the branches and drops the rest, or refuses valid
    # values where `properties` stand beside; one side goes to the validator.)
    unions_beside_properties: bool = False
    # multipleOf on `number` (not only `integer`) values.
    multiple_of_numbers: bool = False
    # `required` names that `properties` does not list.
    required_unlisted: bool = False
    # A keyword no vocabulary here knows (`standsFor`, `pbj`, a typo of `maxLength`):
    # "rejected" (default: it may be a rule someone expects enforced) or "annotation" (JSON
    # Schema 2020-12's own reading of unknown keywords). Unknown formats likewise.
    unknown_keywords: Literal["rejected", "annotation"] = "rejected"
    # JSON Schema's `pattern` matches anywhere in the string ("^https?://" accepts
    # "https://x"); backends match the whole string. "full" (default, as every constrained
    # decoder): the mask generates whole matches, which the report notes for unanchored
    # patterns. "search": the grammar gets `.*` where the pattern is not anchored, JSON
    # Schema's reading.
    patterns: Literal["full", "search"] = "full"
    # A schema without `type` whose keywords belong to one type ({"properties": ...}):
    # True (default, as backends do): generated as that type, which the report notes.
    # False: JSON Schema's reading (the keywords constrain that type; any other type is
    # valid too), compiled with every type listed.
    implied_types: bool = True
    # The mask writes a `number` with bounds in at most this many decimals and no exponent
    # (xgrammar 0.2.9: 0.1234567 and 1e-3 cannot be written under "minimum": 0).
    bounded_number_decimals: int | None = None
    # Bounds on `number` values: "grammar" (default; the mask keeps them, in that many
    # decimals, which the report notes) or "validator" (the mask writes any number, the
    # validator checks the bounds: JSON Schema's reading of which values may be written).
    number_bounds: Literal["grammar", "validator"] = "grammar"
    # Keywords under which the mask writes no escapes (\" \\ \n ...) in a string (xgrammar
    # 0.2.9: "a\nb" under maxLength 4 is refused).
    no_escapes_under: frozenset[str] = frozenset()
    # Lengths and patterns: "grammar" (default; in the mask, which then writes such strings
    # without escapes where it cannot, as the report notes) or "validator" (any string is
    # written and the validator checks them).
    bounded_strings: Literal["grammar", "validator"] = "grammar"
    # Formats whose mask is narrower than the format, compiled as a union of formats that
    # together cover it: (format, (format, ...)) pairs.
    format_unions: tuple[tuple[str, tuple[str, ...]], ...] = ()


# The table's server policies (the rest are facts about a backend). Defaults: what
# constrained decoders generate. JSON_SCHEMA_READING: every value the schema allows can be
# written (the validator still checks every output).
POLICIES = ("strict_objects", "unknown_keywords", "patterns", "implied_types", "number_bounds",
            "bounded_strings")
JSON_SCHEMA_READING: dict[str, Any] = {
    "strict_objects": False, "unknown_keywords": "annotation", "patterns": "search",
    "implied_types": False, "number_bounds": "validator", "bounded_strings": "validator"}


def with_policies(table: KeywordTable, policies: dict[str, Any]) -> KeywordTable:
    unknown = set(policies) - set(POLICIES)
    if unknown:
        raise ValueError(f"not keyword policies: {sorted(unknown)}")
    return dataclasses.replace(table, **policies)


def departures(table: KeywordTable) -> list[str]:
    """The policies by which `table` generates less than JSON Schema allows."""
    return [p for p in POLICIES if p != "unknown_keywords"
            and getattr(table, p) != JSON_SCHEMA_READING[p]]


XGRAMMAR_KEYWORDS = KeywordTable(
    backend="xgrammar",
    # Measured on xgrammar 0.2.9 (tests/grammars/test_keywords.py): the rest of
    # JSON_SCHEMA_KEYWORDS (uniqueItems, not, if/then/else, dependentRequired, contains,
    # propertyNames, unevaluated*, and patternProperties, which it gets wrong) is not.
    grammar=frozenset({
        "type", "properties", "required", "additionalProperties", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
        "$ref", "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format",
        "minProperties", "maxProperties"}),
    # Measured on xgrammar 0.2.9: these formats reject non-matching strings; others
    # ("phone", "iri", "regex", ...) are accepted as any string.
    formats=frozenset({
        "date-time", "date", "time", "email", "uuid", "uri", "uri-reference", "uri-template",
        "ipv4", "ipv6", "hostname", "duration", "json-pointer", "relative-json-pointer"}),
    # Measured on xgrammar 0.2.9: its uri-reference mask refuses every absolute URI
    # ("http://x"), which RFC 3986 makes URI references too.
    format_unions=(("uri-reference", ("uri", "uri-reference")),),
    bounded_number_decimals=6,
    no_escapes_under=frozenset({"minLength", "maxLength", "pattern"}),
)


# vLLM 0.32/0.33 pin xgrammar 0.2.8 and refuse, before compiling, schemas with features its
# xgrammar gets wrong (`has_xgrammar_unsupported_json_features`): multipleOf among them.
VLLM_XGRAMMAR_KEYWORDS = dataclasses.replace(
    XGRAMMAR_KEYWORDS, backend="vllm-xgrammar",
    grammar=XGRAMMAR_KEYWORDS.grammar - {"multipleOf"})


@dataclass(frozen=True)
class KeywordUse:
    pointer: str
    keyword: str
    tier: Tier
    note: str = ""
    # Reports a keyword's absence (an object without additionalProperties under strict
    # objects), not an occurrence.
    implicit: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "keyword": self.keyword,
                               "tier": self.tier}
        if self.note:
            out["note"] = self.note
        if self.implicit:
            out["implicit"] = True
        return out


@dataclass(frozen=True)
class EnforcementReport:
    backend: str
    uses: tuple[KeywordUse, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        found = Counter(u.tier for u in self.uses)
        return {tier: found.get(tier, 0) for tier in TIERS}

    def of(self, tier: Tier) -> list[KeywordUse]:
        return [u for u in self.uses if u.tier == tier]

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "counts": self.counts(),
                "keywords": [u.to_json() for u in self.uses]}

    def prefixed(self, prefix: str) -> EnforcementReport:
        return EnforcementReport(self.backend, tuple(
            dataclasses.replace(u, pointer=prefix + u.pointer) for u in self.uses))

    @staticmethod
    def merge(backend: str, reports: list[EnforcementReport]) -> EnforcementReport:
        return EnforcementReport(backend, tuple(u for r in reports for u in r.uses))

    def summary(self, *, listed: int = 4) -> str:
        """One header line: counts per tier, then where the validator-only keywords are."""
        counts = self.counts()
        text = ", ".join(f"{t}={counts[t]}" for t in TIERS if t != "rejected")
        late = self.of("validator")
        if late:
            shown = " ".join(f"{u.keyword}@{u.pointer or '/'}" for u in late[:listed])
            more = f" +{len(late) - listed}" if len(late) > listed else ""
            text += f"; validator: {shown}{more}"
        return text


@dataclass(frozen=True)
class Analysis:
    """A schema's report, and the schema the backend compiles (validator-tier keywords out)."""

    report: EnforcementReport
    grammar_schema: dict[str, Any]


def analyze(schema: dict[str, Any], table: KeywordTable = XGRAMMAR_KEYWORDS) -> Analysis:
    grammar_schema = copy.deepcopy(schema)
    uses: list[KeywordUse] = []
    # Walk the original (for pointers) and edit the copy's matching node.
    originals = list(iter_schema_nodes(schema))
    copies = [node for node, _ in iter_schema_nodes(grammar_schema)]
    removed: list[str] = []  # subschemas under validator-only keywords: no mask reaches them
    for (node, pointer), target in zip(originals, copies, strict=True):
        found = _classify_node(node, pointer, target, table)
        if any((pointer + "/").startswith(p + "/") for p in removed):
            found = [KeywordUse(u.pointer, u.keyword, "validator", "inside a validator-only "
                                "keyword") if u.tier == "grammar" else u
                     for u in found if not u.implicit]
        removed.extend(u.pointer for u in found if u.tier == "validator")
        uses.extend(found)
    return Analysis(EnforcementReport(table.backend, tuple(uses)), grammar_schema)


def _classify_node(node: dict[str, Any], pointer: str, target: dict[str, Any],
                   table: KeywordTable) -> list[KeywordUse]:
    uses: list[KeywordUse] = []

    def use(key: str, tier: Tier, note: str = "") -> None:
        uses.append(KeywordUse(f"{pointer}/{key}", key, tier, note))
        if tier == "validator":
            target.pop(key, None)

    def unknown(key: str, why: str) -> None:
        if table.unknown_keywords == "annotation":  # left in: a $ref may point into it
            use(key, "annotation", f"{why} (policy: unknown keywords are annotations)")
        else:
            use(key, "rejected", why)

    patterned = "pattern" in node or "format" in node
    # Beside anyOf/oneOf/allOf, xgrammar 0.2.9's mask takes the branches and ignores other
    # assertions (measured: `minimum`, `enum`, `minLength` next to anyOf or a one-branch allOf
    # were not enforced; `properties` beside allOf refused valid values). One side
    # goes to the validator: the union where `properties`, `enum` or `const` stand beside it
    # (they carry the shape), else the assertions beside it.
    union = any(k in node for k in _UNIONS)
    union_yields = union and any(k in node for k in ("properties", "enum", "const"))
    for key, value in node.items():
        if key in ANNOTATIONS:
            use(key, "annotation")
        elif key in _VOCABULARY_OF:
            use(key, "annotation", f"{_VOCABULARY_OF[key]} annotation")
        elif key.startswith(ANNOTATION_PREFIXES):
            use(key, "annotation", "extension or commented-out key (by its prefix)")
        elif key == "uniqueItems" and value is False:
            use(key, "annotation", "false has no effect")
            target.pop(key, None)
        elif union and not union_yields and not table.unions_beside_properties \
                and key in table.grammar and key not in _BESIDE_UNIONS:
            use(key, "validator", "beside anyOf/oneOf/allOf the mask takes the branches "
                                  "only: checked after decoding")
        elif key == "format":
            formats = dict(table.format_unions).get(value)
            if formats and "anyOf" not in node:
                use(key, "grammar", f"compiled as anyOf formats {list(formats)}: "
                                    f"{table.backend}'s {value!r} mask alone is narrower")
                target.pop(key)
                target["anyOf"] = _format_union(node.get("type"), formats)
            elif value in table.formats and not formats:
                # Masks check a format's shape; calendar rules (no February 30) are left to
                # the validator, which checks every format it knows after decoding.
                use(key, "grammar", "shape by the mask, the rest after decoding"
                    if value in VALIDATOR_FORMATS else "")
            elif value in VALIDATOR_FORMATS:
                use(key, "validator", f"format {value!r}: checked after decoding")
            else:
                unknown(key, f"format {value!r} is checked by nothing here; use a 'pattern' "
                             "instead")
        elif key in table.no_escapes_under and key in table.grammar \
                and table.bounded_strings == "validator":
            use(key, "validator", "checked after decoding, so strings with escapes can be "
                                  "written (policy: --bounded-strings validator)")
        elif key in ("minLength", "maxLength") and patterned and not table.lengths_with_pattern:
            use(key, "validator", "with 'pattern' or 'format', the mask drops length bounds")
        elif key == "allOf" and isinstance(value, list) and len(value) > 1 \
                and not table.multi_allof:
            use(key, "validator", "allOf with several branches: checked after decoding")
        elif key in _UNIONS and union_yields and not table.unions_beside_properties:
            use(key, "validator", f"{key} beside 'properties', 'enum' or 'const': checked "
                                  "after decoding")
        elif key == "multipleOf" and node.get("type") != "integer" \
                and not table.multiple_of_numbers:
            use(key, "validator", f"{table.backend}'s mask checks multipleOf on integers only")
        elif key == "required" and isinstance(value, list) and not table.required_unlisted \
                and not set(value) <= set(node.get("properties") or {}):
            # Names `properties` does not list: the mask refuses them (or, with no
            # properties, ignores `required`); listed names stay with the mask.
            use(key, "validator", "names not in 'properties': checked after decoding")
            listed = [n for n in value if n in (node.get("properties") or {})]
            if listed:
                target[key] = listed
        elif key == "pattern" and key in table.grammar and isinstance(value, str) \
                and not _anchored(value):
            if table.patterns == "search":
                use(key, "grammar", "not anchored: compiled with .* where it is open"
                    + _escapes(table, key))
                target[key] = search_pattern(value)
            else:
                use(key, "grammar", "not anchored: the mask generates whole matches only "
                                    "(policy: --patterns full)" + _escapes(table, key))
        elif key in _BOUNDS and key in table.grammar and table.bounded_number_decimals \
                and node.get("type") != "integer" and not isinstance(value, bool):
            if table.number_bounds == "validator":
                use(key, "validator", "bound on numbers: checked after decoding (policy: "
                                      "--number-bounds validator)")
            else:
                use(key, "grammar", f"numbers are written with at most "
                                    f"{table.bounded_number_decimals} decimals and no "
                                    "exponent (policy: --number-bounds grammar)")
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            if key in table.grammar:
                use(key, "grammar", "draft-4 boolean form, rewritten for the grammar")
                _rewrite_draft4_exclusive(target, key)
            else:
                use(key, "validator", f"not enforced by {table.backend}'s mask")
        elif key == "items" and isinstance(value, list):
            use(key, "grammar", "draft-4 tuple form, rewritten as prefixItems")
        elif key in table.grammar:
            use(key, "grammar", _escapes(table, key).lstrip("; "))
        elif key in JSON_SCHEMA_KEYWORDS:
            use(key, "validator", f"not enforced by {table.backend}'s mask")
        else:
            unknown(key, "unknown keyword: nothing here enforces it" + _instead(key))
    if isinstance(node.get("items"), list):
        _rewrite_tuple_items(target)
    if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
        if any(k in node for k in _OPENS_OBJECT):
            target["additionalProperties"] = True
        elif table.strict_objects:
            uses.append(KeywordUse(f"{pointer}/additionalProperties", "additionalProperties",
                                   "grammar", "absent: keys not in 'properties' are not "
                                              "generated (strict objects)", implicit=True))
    if "patternProperties" in node and node.get("additionalProperties") is not True:
        target["additionalProperties"] = True
    # xgrammar's strict mode reads an absent additionalProperties/items as false once a
    # size keyword is there ({"type": "array", "minItems": 2} would compile to nothing):
    # where no properties/items are listed, say "anything" explicitly, as JSON Schema means
    # (`true` for objects, `{}` for items: the forms both backends read that way).
    if _may_be(node, "object", ("minProperties", "maxProperties", "required")) \
            and "properties" not in node and "additionalProperties" not in node:
        target["additionalProperties"] = True
    if _may_be(node, "array", ("minItems", "maxItems")) and "items" not in node \
            and "prefixItems" not in node:
        target["items"] = {}
    uses.extend(_implied_type(node, pointer, target, table))
    return uses


def _alternatives(pattern: str) -> list[str]:
    """The pattern split at its top-level `|` (outside groups and classes)."""
    parts, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _ends_anchored(alt: str) -> bool:
    escapes = len(alt[:-1]) - len(alt[:-1].rstrip("\\"))
    return alt.endswith("$") and escapes % 2 == 0


def _anchored(pattern: str) -> bool:
    return all(a.startswith("^") and _ends_anchored(a) for a in _alternatives(pattern))


def search_pattern(pattern: str) -> str:
    """A whole-string pattern that matches what `pattern` finds anywhere (JSON Schema's
    reading), for backends that match whole strings."""
    out = []
    for alt in _alternatives(pattern):
        head, tail = alt.startswith("^"), _ends_anchored(alt)
        body = alt[1 if head else 0:len(alt) - 1 if tail else len(alt)]
        out.append(("" if head else ".*") + f"(?:{body})" + ("" if tail else ".*"))
    return "|".join(out)


def _format_union(types: Any, formats: tuple[str, ...]) -> list[dict[str, Any]]:
    """anyOf branches for a format mask made of several: typed branches (xgrammar ignores
    untyped ones), and one for the values other than strings that the node allows."""
    branches: list[dict[str, Any]] = [{"type": "string", "format": f} for f in formats]
    if types is None:
        others = ["number", "boolean", "object", "array", "null"]
    else:
        others = [t for t in ([types] if isinstance(types, str) else types) if t != "string"]
    if others:
        branches.append({"type": others if len(others) > 1 else others[0]})
    return branches


def _instead(key: str) -> str:
    if key in _INSTEAD:
        return f" ({_INSTEAD[key]})"
    known = sorted(JSON_SCHEMA_KEYWORDS | ANNOTATIONS)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8) \
        or [k for k in known if k.lower() == key.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def _escapes(table: KeywordTable, key: str) -> str:
    if key not in table.no_escapes_under:
        return ""
    return ("; the string is written without escapes (no quote, backslash or control "
            "character; policy: --bounded-strings grammar)")


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

# What a union's neighbours may be without the mask losing them.
_UNIONS = ("anyOf", "oneOf", "allOf")
_BESIDE_UNIONS = frozenset({"type", *_UNIONS, "$defs", "definitions", "$ref"})

_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "minProperties",
               "maxProperties"),
    "array": ("items", "prefixItems", "minItems", "maxItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
ALL_TYPES = ("object", "array", "string", "number", "boolean", "null")


def _implied_type(node: dict[str, Any], pointer: str, target: dict[str, Any],
                  table: KeywordTable) -> list[KeywordUse]:
    """xgrammar applies a type's keywords only where `type` says it (measured on 0.2.9:
    {"maxLength": 2} compiles to any value), so the type is always written out: the types
    the keywords imply (default), or every type (JSON Schema's reading, and beside
    combinators or `$ref`, whose branches decide the type)."""
    if "type" in node or "enum" in node or "const" in node:
        return []
    implied = [kind for kind, keys in _TYPE_KEYWORDS.items() if any(k in target for k in keys)]
    if not implied:
        return []
    combined = any(k in node for k in ("anyOf", "oneOf", "allOf", "$ref"))
    if not table.implied_types or combined:
        target["type"] = list(ALL_TYPES)
        return []
    target["type"] = implied[0] if len(implied) == 1 else implied
    return [KeywordUse(f"{pointer}/type", "type", "grammar",
                       f"absent: generated as {' or '.join(implied)}, as its keywords imply "
                       "(JSON Schema accepts any other type too)", implicit=True)]


def _may_be(node: dict[str, Any], kind: str, keywords: tuple[str, ...]) -> bool:
    types = node.get("type")
    named = types == kind or (isinstance(types, list) and kind in types)
    return named or any(k in node for k in keywords)


def _rewrite_draft4_exclusive(target: dict[str, Any], key: str) -> None:
    bound = "minimum" if key == "exclusiveMinimum" else "maximum"
    if target.pop(key) is True and bound in target:
        target[key] = target.pop(bound)


def _rewrite_tuple_items(target: dict[str, Any]) -> None:
    target["prefixItems"] = target.pop("items")
    extra = target.pop("additionalItems", None)
    if extra is not None:
        target["items"] = extra
