"""A test instance in the form a strict grammar writes it: object keys in the order the
schema lists its properties (through $refs and unions), integral floats as integers."""

from __future__ import annotations

from typing import Any

from grammars import validator_for


def canonical_instance(value: Any, schema: Any, root: Any) -> Any:
    """`value` with object keys in the order the schema lists its properties (the order a
    strict grammar writes them), recursively; keys it does not list keep their order, last.
    An integral float is written as the integer it equals (1.0 as 1: JSON Schema's integer)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, dict):
        props = _properties_for(schema, root, value)
        rank = {name: i for i, name in enumerate(props)}
        keys = sorted(value, key=lambda k: (rank.get(k, len(rank)), list(value).index(k)))
        own = _resolve(schema, root)
        extra = own.get("additionalProperties") if isinstance(own, dict) else None
        extra = extra if isinstance(extra, dict) else {}  # the schema of unlisted keys
        return {k: canonical_instance(value[k], props.get(k, extra), root) for k in keys}
    if isinstance(value, list):
        return [canonical_instance(v, _item_schema(schema, root, i), root)
                for i, v in enumerate(value)]
    return value


def _resolve(schema: Any, root: Any) -> Any:
    for _ in range(32):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                and schema["$ref"].startswith("#")):
            return schema
        target: Any = root
        for part in schema["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = target
    return schema


def _branches(schema: Any, root: Any) -> list[dict[str, Any]]:
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return []
    out = [schema]
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []) if isinstance(schema.get(key), list) else []:
            out.extend(_branches(sub, root))
    return out


def _properties_for(schema: Any, root: Any, value: dict[str, Any]) -> dict[str, Any]:
    own = _resolve(schema, root)
    if isinstance(own, dict) and isinstance(own.get("properties"), dict):
        # A union beside `properties` is the validator's: the grammar writes these.
        properties: dict[str, Any] = own["properties"]
        return properties
    branches = [b for b in _branches(schema, root) if isinstance(b.get("properties"), dict)]
    # The grammar writes a value in the order of the branch it matches.
    matching = [b for b in branches if _matches(b, root, value)] or branches
    keys = set(value)
    best: dict[str, Any] = {}
    for branch in matching:
        props = branch["properties"]
        if len(keys & set(props)) > len(keys & set(best)):
            best = props
    return best


def _matches(branch: dict[str, Any], root: Any, value: Any) -> bool:
    scoped = {k: root[k] for k in ("definitions", "$defs", "$schema")
              if isinstance(root, dict) and k in root}
    try:
        valid: bool = validator_for({**scoped, **branch}).is_valid(value)
        return valid
    except Exception:  # noqa: BLE001 - a reference it cannot follow: no opinion
        return False


def _item_schema(schema: Any, root: Any, index: int) -> Any:
    for branch in _branches(schema, root):
        prefix = branch.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix):
            return prefix[index]
        items = branch.get("items")
        if isinstance(items, list):
            return items[index] if index < len(items) else branch.get("additionalItems", {})
        if isinstance(items, dict):
            return items
    return {}
