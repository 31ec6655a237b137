"""Which readings a field's schema can take (numbers, dates, yes and no, patterned text), and
whether it is a plain string of any words: the shape grounding reads a field's evidence
by (server/dialogue/grounding.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from grammars import ClientRegex, PatternError, client_regex


@dataclass(frozen=True)
class Shape:
    """Which readings a field's schema can take."""

    numbers: bool = False
    integer: bool = False  # numbers, but whole ones only
    dates: bool = False
    booleans: bool = False
    numeric_text: bool = False  # a string with a pattern ("^[0-9]+(\\.[0-9]{2})?$")
    patterns: tuple[ClientRegex, ...] = ()  # its string patterns, unanchored (in RE2)

    @classmethod
    def of(cls, node: dict[str, Any]) -> Shape:
        types: set[str] = set()
        formats: set[str] = set()
        patterns: list[ClientRegex] = []
        for branch in branches(node):
            kind = branch.get("type")
            types |= set(kind) if isinstance(kind, list) else {kind} if isinstance(
                kind, str) else set()
            if isinstance(branch.get("format"), str):
                formats.add(branch["format"])
            if isinstance(branch.get("pattern"), str):
                with contextlib.suppress(PatternError):  # (the planner refuses those)
                    patterns.append(client_regex(
                        branch["pattern"].removeprefix("^").removesuffix("$")))
            if isinstance(branch.get("enum"), list):
                types |= {json_type(v) for v in branch["enum"]}
        return cls(numbers=bool(types & {"number", "integer"}),
                   integer="integer" in types and "number" not in types,
                   dates="date" in formats, booleans="boolean" in types,
                   numeric_text="string" in types and bool(patterns),
                   patterns=tuple(patterns))


def plain_string(node: dict[str, Any]) -> bool:
    """A string of any words: no pattern, format, enum or const."""
    return node.get("type") == "string" and not any(
        k in node for k in ("pattern", "format", "enum", "const", "anyOf", "oneOf"))


def branches(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key) or ():
            if isinstance(branch, dict):
                yield from branches(branch)


def json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "null")
