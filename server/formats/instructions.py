"""Prompt text that holds no family's syntax: a JSON answer's schema, and the tools listed
for a system turn. The formats wrap these in their own instructions, which show their call
syntax."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from server.formats.schema_text import render
from server.options import SchemaPrompt, ToolStyle

JSON_INSTRUCTIONS = """Answer only with JSON that matches this JSON Schema:
{schema}"""
COMPACT_JSON_INSTRUCTIONS = """Answer only with a JSON value of this shape:
{schema}"""


def json_instructions(schema: Any, style: SchemaPrompt = "raw") -> str | None:
    """What the system turn says about a JSON answer's schema (`style`: schema_text)."""
    text = render(schema, style)
    if text is None:
        return None
    return (JSON_INSTRUCTIONS if style == "raw" else COMPACT_JSON_INSTRUCTIONS).format(
        schema=text)


def tool_lines(tools: Sequence[dict[str, Any]]) -> str:
    """Each tool ({name, description, parameters}) as one JSON line."""
    return "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)


def tool_list(tools: Sequence[dict[str, Any]], style: ToolStyle) -> str:
    """The tools as JSON lines ("full"), or as a list of names and descriptions, with the
    arguments' shape ("compact") or without ("none")."""
    if style == "full":
        return tool_lines(tools)
    lines = []
    for tool in tools:
        about = f": {tool['description']}" if tool.get("description") else ""
        lines.append(f"- {tool['name']}{about}")
        if style == "compact":
            lines.append(f"  arguments: {render(tool['parameters'], 'compact')}")
    return "\n".join(lines)
