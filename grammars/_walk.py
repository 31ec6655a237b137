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
    """Yield every schema object in `node` with its JSON Pointer, the root first, each node's
    subschemas in keyword order after it (depth first). A node's subschemas are read after it
    was yielded, so a caller may edit a node before its children are walked. One explicit
    stack, not a generator per level: large schemas (Kubernetes', thousands of nodes) are
    walked on the cold-compile path."""
    if not isinstance(node, dict):
        return
    stack: list[tuple[dict[str, Any], str]] = [(node, pointer)]
    while stack:
        node, pointer = stack.pop()
        yield node, pointer
        children: list[tuple[dict[str, Any], str]] = []
        for key in SUB_ONE:
            sub = node.get(key)
            if isinstance(sub, dict):
                children.append((sub, f"{pointer}/{key}"))
        items = node.get("items")
        if isinstance(items, list):  # draft-4 tuple form
            children.extend((sub, f"{pointer}/items/{i}") for i, sub in enumerate(items)
                            if isinstance(sub, dict))
        for key in SUB_LIST:
            value = node.get(key)
            if isinstance(value, list):
                children.extend((sub, f"{pointer}/{key}/{i}") for i, sub in enumerate(value)
                                if isinstance(sub, dict))
        for key in SUB_MAP:
            value = node.get(key)
            if isinstance(value, dict):
                children.extend((sub, f"{pointer}/{key}/{_escape(name)}")
                                for name, sub in value.items() if isinstance(sub, dict))
        stack.extend(reversed(children))


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
