"""Where subschemas live inside a JSON Schema, so that walkers never mistake a property
*name* (say, a property called "type") for a keyword."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

SUB_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else",
           "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems")
SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
           "dependencies")


def iter_schema_nodes(node: Any, pointer: str = "") -> Iterator[tuple[dict[str, Any], str]]:
    """Yield every schema object in `node` with its JSON Pointer, the root first."""
    if not isinstance(node, dict):
        return
    yield node, pointer
    for key in SUB_ONE:
        yield from iter_schema_nodes(node.get(key), f"{pointer}/{key}")
    if isinstance(node.get("items"), list):  # draft-4 tuple form
        for i, sub in enumerate(node["items"]):
            yield from iter_schema_nodes(sub, f"{pointer}/items/{i}")
    for key in SUB_LIST:
        value = node.get(key)
        if isinstance(value, list):
            for i, sub in enumerate(value):
                yield from iter_schema_nodes(sub, f"{pointer}/{key}/{i}")
    for key in SUB_MAP:
        value = node.get(key)
        if isinstance(value, dict):
            for name, sub in value.items():
                yield from iter_schema_nodes(sub, f"{pointer}/{key}/{_escape(name)}")


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
