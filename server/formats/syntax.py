"""A model family's output syntax, read from the structural tag xgrammar builds for it
(`xgrammar.get_model_structural_tag`): where a call to each tool begins and ends and how its
arguments are written, and the reasoning block's markers. One source for the grammar and
the reader, so the two cannot disagree; nothing here is hand-written per family."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# How a family writes a call's arguments (xgrammar's json_schema `style`): the ones the
# reader turns back into JSON. The others (gemma, glm_xml, deepseek_xml, minimax_xml and the
# families whose call content is a sequence) are refused by name at startup.
READ_STYLES = ("json", "qwen_xml")


@dataclass(frozen=True)
class CallSyntax:
    tool: str
    begin: str
    end: str
    style: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class FamilySyntax:
    calls: tuple[CallSyntax, ...]
    # Strings around or between calls that are not content (a call list's own begin and
    # end, a separator).
    noise: tuple[str, ...] = ()
    # The reasoning block: its opening (empty when the prompt opens it) and closing marker.
    think_begin: str | None = None
    think_end: str | None = None
    # After the closing marker, what the grammar writes before the answer.
    think_then: str = ""
    # Blocks of free text that are content (harmony's final channel): begin -> ends.
    text_blocks: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Around and between the calls of one answer (DeepSeek's call list), where the family
    # has them: how a whole answer is written.
    calls_begin: str = ""
    calls_end: str = ""
    separator: str = "\n"

    @property
    def styles(self) -> set[str]:
        return {c.style for c in self.calls}


def structural_tag(family: str, tools: Sequence[Any], *, tool_choice: Any,
                   reasoning: bool, parallel: bool) -> dict[str, Any]:
    """xgrammar's structural tag for `family` (a JSON-ready dict)."""
    import xgrammar

    tag = xgrammar.get_model_structural_tag(
        family, tools=list(tools), tool_choice=tool_choice,
        reasoning="enabled" if reasoning else "disabled", parallel_tool_calls=parallel)
    out: dict[str, Any] = json.loads(tag.model_dump_json())
    return out


def function_tool(name: str, schema: dict[str, Any],
                  description: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": schema}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}


def family_syntax(family: str, tools: list[tuple[str, dict[str, Any]]]) -> FamilySyntax:
    """The syntax of `family` for these (name, schema) tools, reasoning on."""
    calls: list[CallSyntax] = []
    noise: set[str] = set()
    wrap = ("", "", "\n")
    for name, schema in tools:
        tag = structural_tag(family, [function_tool(name, schema)], tool_choice="required",
                             reasoning=True, parallel=True)
        for node in _tags(tag["format"]):
            content = node["content"]
            if content.get("type") == "json_schema":
                calls.append(CallSyntax(name, node["begin"], _one(node["end"]),
                                        content.get("style", "json"), schema))
            elif content.get("type") in ("tags_with_separator", "sequence"):
                noise.update(s for s in (node["begin"], *_ends(node["end"])) if s)
                if content.get("type") == "tags_with_separator":
                    wrap = (node["begin"], _one(node["end"]), content.get("separator", ""))
    probe = structural_tag(family, [], tool_choice="auto", reasoning=True, parallel=True)
    noise.update(_separators(probe["format"]))
    begin, end, then = _reasoning(probe["format"])
    texts = tuple((n["begin"], _ends(n["end"])) for n in _tags(probe["format"])
                  if n["content"].get("type") == "any_text" and n["begin"]
                  and n["begin"] != begin)
    return FamilySyntax(tuple(calls), tuple(sorted(noise, key=len, reverse=True)),
                        begin, end, then, texts, *wrap)


def _reasoning(fmt: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """The reasoning tag: the first any_text tag that opens the output (a sequence's first
    element), or harmony's analysis channel."""
    first = fmt
    then = ""
    while first.get("type") == "sequence":
        elements = first["elements"]
        if len(elements) > 1 and elements[1].get("type") == "const_string" \
                and first is not fmt:
            then = elements[1]["value"]
        first = elements[0]
    if first.get("type") == "tag" and first["content"].get("type") == "any_text":
        return first["begin"], _one(first["end"]), then
    for node in _tags(fmt):
        if node["content"].get("type") == "any_text" and "analysis" in node["begin"]:
            return node["begin"], _one(node["end"]), ""
    return None, None, ""


def _tags(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "tag":
            yield node
        for value in node.values():
            yield from _tags(value)
    elif isinstance(node, list):
        for value in node:
            yield from _tags(value)


def _separators(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if node.get("type") == "tags_with_separator" and node.get("separator"):
            yield node["separator"]
        for value in node.values():
            yield from _separators(value)
    elif isinstance(node, list):
        for value in node:
            yield from _separators(value)


def _ends(end: str | list[str]) -> tuple[str, ...]:
    return (end,) if isinstance(end, str) else tuple(end)


def _one(end: str | list[str]) -> str:
    return _ends(end)[0]
