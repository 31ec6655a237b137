"""How a schema is written into the prompt: the grammar already enforces it, so the prompt
only has to tell the model what to write. Three renderings, measured against each other
(bench/accuracy/schema_prompt.py):

- raw: the JSON Schema itself (long for generated schemas; it eats context and prefill);
- compact: a TypeScript-like line per object, with field names, types, allowed values,
  required marks and descriptions (`{city: string /* The city */, unit?: "c" | "f"}`);
- none: nothing about the schema (JSON answers), or tool names and descriptions only.
"""

from __future__ import annotations

import json
from typing import Any

from server.options import SchemaPrompt

_MAX_DEPTH = 4


def render(schema: Any, style: SchemaPrompt) -> str | None:
    """The schema as the prompt shows it; None when nothing is shown."""
    if style == "none":
        return None
    if style == "raw":
        return json.dumps(schema, ensure_ascii=False)
    return compact(schema, schema if isinstance(schema, dict) else {})


def compact(node: Any, root: dict[str, Any], depth: int = 0) -> str:
    if not isinstance(node, dict):
        return "any"
    if "$ref" in node and isinstance(node["$ref"], str):
        target = _resolve(node["$ref"], root)
        return compact(target, root, depth + 1) if target is not None and depth < _MAX_DEPTH \
            else "object"
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if isinstance(node.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            return " | ".join(compact(b, root, depth + 1) for b in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(compact({**node, "type": k}, root, depth) for k in kind)
    if kind == "object" or "properties" in node:
        return _object(node, root, depth)
    if kind == "array":
        return f"{compact(node.get('items', {}), root, depth + 1)}[]"
    return _scalar(node, kind)


def _object(node: dict[str, Any], root: dict[str, Any], depth: int) -> str:
    props = node.get("properties") or {}
    if not props or depth >= _MAX_DEPTH:
        return "object"
    required = set(node.get("required") or [])
    fields = []
    for name, sub in props.items():
        mark = "" if name in required else "?"
        text = f"{name}{mark}: {compact(sub, root, depth + 1)}"
        note = sub.get("description") if isinstance(sub, dict) else None
        if isinstance(note, str) and note.strip():
            text += f" /* {' '.join(note.split())[:120]} */"
        fields.append(text)
    return "{" + ", ".join(fields) + "}"


def _scalar(node: dict[str, Any], kind: Any) -> str:
    name = {"integer": "integer", "number": "number", "string": "string",
            "boolean": "boolean", "null": "null"}.get(kind, "any")
    details = [f"format {node['format']}"] if isinstance(node.get("format"), str) else []
    for key, word in (("minimum", ">="), ("maximum", "<="), ("maxLength", "max length")):
        if isinstance(node.get(key), (int, float)) and not isinstance(node.get(key), bool):
            details.append(f"{word} {node[key]}")
    return f"{name} ({', '.join(details)})" if details else name


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
