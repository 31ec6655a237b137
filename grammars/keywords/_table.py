"""Each backend's keyword table: what its masks enforce (facts about a backend and version,
measured in tests/grammars/test_keywords.py), and the server's generation policies."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal


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
    # Assertions beside a `$ref` ({"$ref": "#/definitions/s", "maxLength": 5}): the mask
    # intersects them with the target. (xgrammar 0.2.9 does not: it follows the `$ref`
    # alone; they go to the validator.)
    refs_with_siblings: bool = False
    # A `pattern` beside a `format` the mask enforces: the mask intersects the two.
    # (xgrammar 0.2.9 does not: it follows the format and ignores the pattern.)
    patterns_with_format: bool = False
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
    # The mask writes a bounded `number` in any number of decimals but with no exponent
    # (llguidance 1.9.1: 1.5E+3 cannot be written under "minimum": 0).
    bounded_numbers_without_exponent: bool = False
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
    # Where an object lets other keys in, a listed name with a non-ASCII character or a
    # JSON escape ("Größe", 'a"b') can be written as one of those other keys, with any
    # value: the mask does not hold that property to its schema.
    extras_take_odd_names: bool = False
    # Formats whose mask writes only part of what the format allows: (format, the valid
    # values it never writes) pairs, said in the report's note on each such `format`.
    format_subsets: tuple[tuple[str, str], ...] = ()
    # oneOf whose branches are not provably disjoint: the mask enforces "exactly one".
    # (xgrammar 0.2.9 and outlines-core take any branch, anyOf's reading: the mask keeps
    # "at least one", the validator "exactly one".)
    overlapping_oneof: bool = False
    # Lookahead and lookbehind assertions in `pattern`: the mask enforces them. (xgrammar
    # 0.2.9 drops lookaheads and refuses lookbehinds; they are compiled left out, and the
    # validator checks them.)
    lookaround: bool = False
    # multipleOf on integers, enforced only (largest divisor, most integers between the
    # bounds): an integral divisor up to the first, with both bounds at most the second
    # integers apart, or neither bound (xgrammar 0.2.9: (1024, 10000); past them it drops
    # multipleOf). None: no limit.
    multiple_of_limits: tuple[int, int] | None = None


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
    # Measured on xgrammar 0.2.9 (tests/grammars/test_mask_gaps.py; found by
    # tests/grammars/test_properties.py): valid values its format masks never write.
    format_subsets=(
        ("email", "a one-character domain label after the first (a@x.yz.com is written, "
                  "a@mail.x.com is not) or an address literal (a@[127.0.0.1])"),
        ("date-time", "a lowercase 't' or 'z' (RFC 3339 allows both)"),
        ("time", "a lowercase 'z' (RFC 3339 allows it)"),
        ("hostname", "uppercase letters (hostnames are case-insensitive)")),
    bounded_number_decimals=6,
    # Measured on xgrammar 0.2.9 (tests/grammars/test_mask_gaps.py; found by the
    # property tests): {"Größe": null} passes a mask for {"Größe": {"type": "integer"}}
    # beside additionalProperties true.
    extras_take_odd_names=True,
    multiple_of_limits=(1024, 10000),
    no_escapes_under=frozenset({"minLength", "maxLength", "pattern"}),
)


# vLLM 0.32/0.33 pin xgrammar 0.2.8 and refuse, before compiling, schemas with features its
# xgrammar gets wrong (`has_xgrammar_unsupported_json_features`): multipleOf among them.
VLLM_XGRAMMAR_KEYWORDS = dataclasses.replace(
    XGRAMMAR_KEYWORDS, backend="vllm-xgrammar",
    grammar=XGRAMMAR_KEYWORDS.grammar - {"multipleOf"})


# Measured on llguidance 1.9.1 (tests/grammars/test_llguidance_backend.py). Where it differs
# from xgrammar 0.2.9: it writes escapes under lengths and patterns, any decimals under
# number bounds (no exponent), multipleOf on numbers
# and on integers of any size; it refuses min/maxProperties beside optional properties (so
# they are the validator's) and compiles only the formats below (others are left out of the
# compiled schema: the validator checks them; json-pointer formats are compiled as patterns,
# grammars/llguidance_backend.py). oneOf is read as anyOf (coerce_one_of).
# Lengths beside a pattern stay the validator's, as with xgrammar: llguidance intersects
# them, but refuses valid strings once the pattern repeats ("^(?:\S+\s+){0,49}\S+$" with
# maxLength 500 refuses "The lab is").
LLGUIDANCE_KEYWORDS = dataclasses.replace(
    XGRAMMAR_KEYWORDS, backend="llguidance",
    grammar=XGRAMMAR_KEYWORDS.grammar - {"minProperties", "maxProperties"},
    formats=frozenset({"date-time", "date", "time", "email", "uuid", "uri", "ipv4", "ipv6",
                       "hostname", "duration", "json-pointer", "relative-json-pointer"}),
    # (format_subsets: not measured on llguidance. Its masks held listed names "Größe" and
    # 'a"b' to their schemas beside additionalProperties true, tried once by hand.)
    format_unions=(), format_subsets=(), extras_take_odd_names=False, refs_with_siblings=True,
    patterns_with_format=True,
    multiple_of_numbers=True,
    multiple_of_limits=None, bounded_number_decimals=None,
    bounded_numbers_without_exponent=True, no_escapes_under=frozenset())
