"""Argument values written as text (the XML-like styles write a string parameter raw and
every other value as JSON), turned back into JSON values by the tool's schema: the one
place that decides whether `12` is the number 12 or the string "12".

The rules follow the grammar xgrammar builds for these styles: a parameter whose schema
takes strings only is raw text (a constrained one, an enum or a pattern, may have whitespace
around it); one that takes no strings is JSON; a union of both is JSON when the text parses
as a value one of its other types takes, else raw; a parameter with no type at all is raw
text unless it is a JSON array or object (xgrammar's `xml_any`)."""

from __future__ import annotations

import json
from typing import Any


def property_schema(schema: Any, name: str, root: Any = None) -> Any:
    """The schema of `schema`'s property `name` ({} when it has none), local $refs
    resolved against `root` (`schema` itself by default)."""
    if not isinstance(schema, dict):
        return {}
    found = (schema.get("properties") or {}).get(name)
    if found is None:
        extra = schema.get("additionalProperties")
        found = extra if isinstance(extra, dict) else {}
    return resolve(found, schema if root is None else root)


def items_schema(schema: Any, root: Any) -> Any:
    items = schema.get("items") if isinstance(schema, dict) else None
    return resolve(items if isinstance(items, dict) else {}, root)


def resolve(schema: Any, root: Any) -> Any:
    """`schema` with a local `$ref` (#/$defs/..., #/definitions/...) followed, once."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#/") or not isinstance(root, dict):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def types_of(schema: Any) -> set[str]:
    """The JSON types a schema takes (empty: it does not say)."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    values = schema.get("enum") if isinstance(schema.get("enum"), list) else None
    if values is None and "const" in schema:
        values = [schema["const"]]
    if values is not None:
        return {json_type(v) for v in values}
    out: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            out |= types_of(branch)
    return out


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def constrained(schema: Any) -> bool:
    """A string schema that lets the grammar put whitespace around the value."""
    return isinstance(schema, dict) and any(k in schema for k in ("enum", "const", "pattern",
                                                                   "format"))


def is_raw_string(schema: Any) -> bool:
    """Whether the text of this parameter is a plain string, written as it is (so it can
    be streamed before it ends): strings only, nothing that lets whitespace around it."""
    return types_of(schema) == {"string"} and not constrained(schema)


def typed(raw: str, schema: Any, *, is_string: bool | None = None) -> Any:
    """The JSON value of a parameter's text. `is_string`: the format said whether it is a
    string (DeepSeek's string="true", Kimi K3's type=, Cohere's type="raw"); None: the
    schema decides."""
    kinds = types_of(schema)
    if is_string or (is_string is None and kinds == {"string"}):
        return string_value(raw, schema)
    if is_string is False or (kinds and "string" not in kinds):
        return json_or_text(raw.strip())
    text = raw.strip()
    if not kinds:  # no type: xgrammar writes a string, or a JSON array or object
        return json_or_text(text) if text[:1] in ("[", "{") else raw
    value = json_or_text(text)
    other = json_type(value)
    if not isinstance(value, str) and (other in kinds or (other == "integer"
                                                          and "number" in kinds)):
        return value
    return raw


def string_value(raw: str, schema: Any) -> str:
    """A string parameter's value: as written, or without the whitespace the grammar lets
    stand around a constrained one (an enum, a const, a pattern, a format)."""
    return raw.strip() if constrained(schema) else raw


def json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def as_text(value: Any) -> str:
    """A value as an XML-like style writes it: a string raw, anything else as JSON (the
    way the families' chat templates write them, `tojson` with its default separators)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
