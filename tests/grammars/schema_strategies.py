"""Hypothesis strategies for the grammar property tests (test_grammar_properties.py): JSON
Schemas of the kind tools and JSON answers use (objects with typed properties, enums,
bounds, string lengths, patterns and formats, arrays with item counts, nesting, required),
values that break them one place at a time, and the text the grammar is asked to accept."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

from hypothesis import strategies as st

NAMES = ("a", "b", "id", "name", "count", "x_1", "Größe", "tags")
PATTERNS = ("^[a-z]+$", "^[0-9]{3}-[0-9]{2}$", "^(foo|bar)$", "^[A-Z][a-z]{0,3}$")
FORMATS = ("date", "date-time", "time", "uuid", "email", "ipv4", "ipv6", "hostname", "uri")
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-50, 50),
                    st.text("abcxyzé \"\\\n", max_size=6))
# Any JSON value: what a model could write, valid or not.
JSON = st.recursive(
    st.one_of(SCALARS, st.floats(allow_nan=False, allow_infinity=False, width=32)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)),
    max_leaves=8)


def _bounds(draw: st.DrawFn, low: int, high: int) -> tuple[int | None, int | None]:
    """An optional lower and upper bound, the lower never above the upper."""
    a = draw(st.none() | st.integers(low, high))
    b = draw(st.none() | st.integers(low, high))
    if a is not None and b is not None and a > b:
        a, b = b, a
    return a, b


@st.composite
def integer_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    low, high = _bounds(draw, -1000, 1000)
    exclusive = draw(st.booleans())
    if low is not None:
        schema["exclusiveMinimum" if exclusive and low != high else "minimum"] = low
    if high is not None:
        schema["maximum"] = high
    step = draw(st.sampled_from([2, 3, 5, 7]))
    if draw(st.integers(0, 4)) == 0 and _multiples(schema, step):
        schema["multipleOf"] = step  # only where some value is left
    return schema


def _multiples(schema: dict[str, Any], step: int) -> tuple[int, int] | None:
    """The first and last k with k * step within the schema's bounds; None if none."""
    low = schema.get("minimum", schema.get("exclusiveMinimum", -10**6 - 1) + 1)
    high = schema.get("maximum", 10**6)
    first, last = -(-low // step), high // step
    return (first, last) if first <= last else None


@st.composite
def number_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    low, high = _bounds(draw, -100, 100)
    if low is not None:
        schema["minimum"] = low / 4
    if high is not None:
        schema["maximum"] = high / 4
    return schema


@st.composite
def string_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    kind = draw(st.sampled_from(["plain", "lengths", "lengths", "pattern", "format",
                                 "format"]))
    if kind == "lengths":
        low, high = _bounds(draw, 0, 8)
        if low is not None:
            schema["minLength"] = low
        if high is not None:
            schema["maxLength"] = high
    elif kind == "pattern":
        schema["pattern"] = draw(st.sampled_from(PATTERNS))
    elif kind == "format":
        schema["format"] = draw(st.sampled_from(FORMATS))
    return schema


def leaf_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        integer_schemas(), number_schemas(), string_schemas(), string_schemas(),
        st.just({"type": "boolean"}), st.just({"type": "null"}),
        st.lists(SCALARS, min_size=1, max_size=4, unique_by=json.dumps)
        .map(lambda values: {"enum": values}),
        SCALARS.map(lambda value: {"const": value}))


@st.composite
def object_schemas(draw: st.DrawFn, children: st.SearchStrategy, *,
                   min_size: int = 0) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=min_size, max_size=5, unique=True))
    schema: dict[str, Any] = {"type": "object",
                              "properties": {n: draw(children) for n in names}}
    schema["required"] = [n for n in names if draw(st.booleans())]
    extra = draw(st.sampled_from(["absent", "absent", False, True]))
    if extra != "absent":
        schema["additionalProperties"] = extra
    return schema


@st.composite
def array_schemas(draw: st.DrawFn, children: st.SearchStrategy) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": draw(children)}
    low, high = _bounds(draw, 0, 4)
    if low is not None:
        schema["minItems"] = low
    if high is not None:
        schema["maxItems"] = high
    return schema


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A schema two or three levels deep whose top is most often an object (a tool's
    parameters), sometimes an array, a union of two leaves, or a leaf. (Chosen by an
    explicit weight: left to st.one_of, nine in ten tops came out leaves.)"""
    nested = st.recursive(
        leaf_schemas(),
        lambda inner: st.one_of(object_schemas(inner), array_schemas(inner)),
        max_leaves=8)
    top = draw(st.integers(0, 9))
    if top < 6:
        return draw(object_schemas(nested, min_size=1 + top % 2))
    if top < 8:
        return draw(array_schemas(nested))
    if top < 9:
        return {"anyOf": draw(st.lists(leaf_schemas(), min_size=2, max_size=2))}
    return draw(leaf_schemas())


def instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid for a schema drawn by `schemas()` (each has some). Its own, for this
    subset of JSON Schema: hypothesis-jsonschema 0.23.1 no longer runs on this hypothesis."""
    if "anyOf" in schema:
        return st.one_of([instances(b) for b in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    return _BY_TYPE[schema["type"]](schema)


def _integers(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    step = schema.get("multipleOf", 1)
    first, last = _multiples(schema, step)  # integer_schemas() leaves some value
    return st.integers(first, last).map(lambda k: k * step)


def _numbers(schema: dict[str, Any]) -> st.SearchStrategy[float | int]:
    low, high = schema.get("minimum"), schema.get("maximum")
    floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
    first = -10**6 if low is None else math.ceil(low)
    last = 10**6 if high is None else math.floor(high)
    return floats | st.integers(first, last) if first <= last else floats


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True)
    if "format" in schema:
        return _FORMATS[schema["format"]]
    return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 12))


@st.composite
def _objects(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, sub in schema["properties"].items():
        if name in schema["required"] or draw(st.booleans()):
            out[name] = draw(instances(sub))
    if schema.get("additionalProperties", True) is not False and draw(st.booleans()):
        spare = [n for n in (*NAMES, "zz") if n not in schema["properties"]]
        out[draw(st.sampled_from(spare))] = draw(JSON)
    return out


def _arrays(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(instances(schema["items"]), min_size=schema.get("minItems", 0),
                    max_size=schema.get("maxItems", 4))


_BY_TYPE = {"integer": _integers, "number": _numbers, "string": _strings,
            "boolean": lambda _: st.booleans(), "null": lambda _: st.none(),
            "object": _objects, "array": _arrays}
_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_HOST = st.lists(_LABEL, min_size=2, max_size=3).map(".".join)
_FORMATS = {
    "date": st.dates().map(lambda d: d.isoformat()),
    # RFC 3339 allows a lowercase "t" and "z"; so do these strategies, now and then.
    "date-time": st.tuples(st.datetimes(timezones=st.just(datetime.UTC)), st.booleans())
    .map(lambda p: p[0].isoformat().replace("+00:00", "Z").lower() if p[1]
         else p[0].isoformat()),
    "time": st.tuples(st.times(), st.sampled_from("Zz")).map(lambda p: p[0].isoformat() + p[1]),
    "uuid": st.uuids().map(str),
    "email": st.one_of(st.emails(), st.tuples(_LABEL, _HOST).map("@".join)),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "hostname": _HOST | _HOST.map(str.upper),
    "uri": st.tuples(st.sampled_from(["https", "http", "urn"]), _HOST)
    .map(lambda p: f"{p[0]}://{p[1]}/x" if p[0] != "urn" else f"urn:{p[1]}"),
}


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one place changed: a leaf replaced by any JSON value, a key added or
    dropped, an item added or dropped. Often invalid; sometimes still valid."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        out = dict(value)
        how = draw(st.sampled_from(["replace", "deeper", "drop", "add"]))
        if how == "drop":
            del out[key]
        elif how == "add":
            out[draw(st.sampled_from(NAMES + ("zz",)))] = draw(JSON)
        else:
            out[key] = draw(mutated(value[key])) if how == "deeper" else draw(JSON)
        return out
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        how = draw(st.sampled_from(["replace", "drop", "add"]))
        if how == "drop":
            return value[:i] + value[i + 1:]
        if how == "add":
            return [*value, draw(JSON)]
        return [*value[:i], draw(mutated(value[i])), *value[i + 1:]]
    return draw(JSON)


def as_text(value: Any, schema: Any) -> str:
    """The value as the grammar writes it: compact JSON, object keys in the order the
    schema's `properties` lists them (the grammar keeps that order), other keys after, and
    an integral number as an integer (JSON Schema counts 0.0 and 0 as one value, and
    `"const": 0` or `"type": "integer"` is written 0, never 0.0)."""
    return json.dumps(_ordered(value, schema), separators=(",", ":"), ensure_ascii=False)


def _ordered(value: Any, schema: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [_ordered(v, items) for v in value]
    if not isinstance(value, dict):
        return value
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    keys = [k for k in props if k in value] + [k for k in value if k not in props]
    return {k: _ordered(value[k], props.get(k)) for k in keys}


# -- malformed schemas (the mutation fuzz tier's compile test) --------------------------------

KEYWORDS = ("type", "properties", "required", "items", "prefixItems", "enum", "const",
            "anyOf", "oneOf", "allOf", "not", "$ref", "$defs", "definitions", "$schema", "$id",
            "$anchor", "$dynamicRef", "pattern", "patternProperties", "format", "minimum",
            "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
            "maxLength", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
            "maxContains", "minProperties", "maxProperties", "additionalProperties",
            "unevaluatedProperties", "propertyNames", "dependentRequired", "dependentSchemas",
            "if", "then", "else", "default", "examples", "description", "title", "nullable",
            "optional", "strict", "x-unknown")
# Values a keyword may meet: every JSON type at its edges, names of types (and near misses),
# refs and regexes that do not resolve or compile, text that is no Unicode.
ODD_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(width=64),
    st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null",
                     "dict", "float", "tuple", "any", "strnig", "", "\ud800", "a\udfff",
                     "#", "#/$defs/a", "#/properties/a", "http://example.com/s.json",
                     "https://json-schema.org/draft/2020-12/schema",
                     "http://json-schema.org/draft-04/schema#", "(", "[a-", "\\p{L}",
                     "(?<=a)b", "a{3,1}", "^$", "date", "uuid", "x" * 5000]),
    st.text(max_size=6))


def malformed_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Objects keyed by JSON Schema keywords (and a few no draft has), nested, with values of
    any type: now and then a valid schema, mostly one a metaschema refuses."""
    keys = st.sampled_from(KEYWORDS)
    return st.recursive(
        st.dictionaries(keys, ODD_LEAVES, max_size=4),
        lambda inner: st.dictionaries(keys, st.one_of(
            ODD_LEAVES, inner, st.lists(st.one_of(inner, ODD_LEAVES), max_size=3),
            st.dictionaries(st.sampled_from(NAMES + KEYWORDS), st.one_of(inner, ODD_LEAVES),
                            max_size=3)), max_size=5),
        max_leaves=16)
