"""Client schema dialects -> JSON Schema.

BFCL (the Berkeley Function Calling Leaderboard) writes tool parameters in a Python-flavoured
dialect: ``dict``, ``float``, ``tuple``, ``any`` as types and ``optional`` on properties.
"""

from __future__ import annotations

import copy
from typing import Any

from grammars._walk import SUB_LIST, SUB_MAP, SUB_ONE
from grammars.errors import InvalidSchemaError

_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array"}
_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def bfcl_to_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a JSON Schema equivalent of a BFCL-dialect schema; standard schemas pass unchanged."""
    if not isinstance(schema, dict):
        raise InvalidSchemaError("a schema must be a JSON object", pointer="",
                                 hint='Send parameters as an object such as {"type": "object"}.')
    return _convert(copy.deepcopy(schema), "")


def _convert(node: dict[str, Any], pointer: str) -> dict[str, Any]:
    if "type" in node:
        node = _convert_type(node, pointer)
    optional = node.pop("optional", None)
    del optional  # BFCL marks optional properties on the property; `required` already says it
    for key in SUB_ONE:
        if isinstance(node.get(key), dict):
            node[key] = _convert(node[key], f"{pointer}/{key}")
    for key in SUB_LIST:
        if isinstance(node.get(key), list):
            node[key] = [_convert(s, f"{pointer}/{key}/{i}") if isinstance(s, dict) else s
                         for i, s in enumerate(node[key])]
    for key in SUB_MAP:
        if isinstance(node.get(key), dict):
            node[key] = {name: _convert(s, f"{pointer}/{key}/{name}") if isinstance(s, dict) else s
                         for name, s in node[key].items()}
    return node


def _convert_type(node: dict[str, Any], pointer: str) -> dict[str, Any]:
    raw = node["type"]
    names = raw if isinstance(raw, list) else [raw]
    if not all(isinstance(n, str) for n in names):
        raise InvalidSchemaError(f"'type' must be a string or a list of strings, got {raw!r}",
                                 pointer=f"{pointer}/type")
    if "any" in names:
        del node["type"]
        return node
    mapped = []
    for name in names:
        json_name = _BFCL_TYPES.get(name, name)
        if json_name not in _JSON_TYPES:
            raise InvalidSchemaError(
                f"unknown type {name!r}", pointer=f"{pointer}/type",
                hint=f"Use one of {sorted(_JSON_TYPES | set(_BFCL_TYPES) | {'any'})}.")
        mapped.append(json_name)
    node["type"] = mapped if isinstance(raw, list) else mapped[0]
    return node
