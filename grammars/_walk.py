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
        present = _SUBSCHEMA_KEYS.intersection(node)
        if not present:  # most nodes: a leaf (one set intersection, not 21 lookups)
            continue
        children: list[tuple[dict[str, Any], str]] = []
        for key in present if len(present) == 1 else _in_order(present, node):
            value = node[key]
            if key in SUB_MAP:
                if isinstance(value, dict):
                    children.extend((sub, f"{pointer}/{key}/{_escape(name)}")
                                    for name, sub in value.items() if isinstance(sub, dict))
            elif isinstance(value, dict) and key in SUB_ONE:
                children.append((value, f"{pointer}/{key}"))
            elif isinstance(value, list) and (key in SUB_LIST or key == "items"):
                # (`items` as a list: draft 4's tuple form)
                children.extend((sub, f"{pointer}/{key}/{i}") for i, sub in enumerate(value)
                                if isinstance(sub, dict))
        stack.extend(reversed(children))


# Subschemas are walked in this order: SUB_ONE's, `items` as a list, SUB_LIST's, SUB_MAP's.
_ORDER = {key: i for i, key in enumerate((*SUB_ONE, "items[]", *SUB_LIST, *SUB_MAP))}
_SUBSCHEMA_KEYS = frozenset((*SUB_ONE, *SUB_LIST, *SUB_MAP))


def _in_order(keys: frozenset[str], node: dict[str, Any]) -> list[str]:
    return sorted(keys, key=lambda k: _ORDER["items[]" if k == "items"
                                             and isinstance(node[k], list) else k])


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
