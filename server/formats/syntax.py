"""A model family's output syntax, read from the structural tag xgrammar builds for it
(`xgrammar.get_model_structural_tag`): where a call to each tool begins and ends and how its
arguments are written, and the reasoning block's markers. One source for the grammar and
the reader, so the two cannot disagree; nothing here is hand-written per family."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# How a family writes a call's arguments (xgrammar's json_schema `style`): each one the
# reader turns back into JSON (server/formats/arguments.py).
READ_STYLES = ("json", "qwen_xml", "glm_xml", "minimax_xml", "deepseek_xml",
               "deepseek_v4_1_xml", "kimi_k3_xml", "cohere_xml", "minimax_m3_xml", "gemma")


@dataclass(frozen=True)
class CallSyntax:
    tool: str
    begin: str
    end: str
    style: str
    schema: dict[str, Any]
    # A number written after `begin` (Kimi's `functions.NAME:0`, Cohere's `id="0"`): its
    # pattern, and what follows it before the arguments. None: the header is `begin` alone.
    index: str | None = None
    then: str = ""


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
    # The calls are triggered in free text (no list of their own): the text between two
    # calls is the format's choice, not the grammar's.
    free_between: bool = False
    # The reasoning block's own opening marker, for a prompt that does not open it.
    think_open: str | None = None
    # What the grammar writes first when reasoning is off (MiniMax's empty think block).
    preamble: str = ""
    # What closes a whole answer after its calls (Kimi K3's message end).
    tail: str = ""
    # With reasoning off, the block the grammar starts inside, which the generation prompt
    # opens (Kimi K3's `<|open|>response<|sep|>`): a prompt without it must write it.
    answer_open: str = ""
    # Calls read but never written: an "auto" answer's call opened by its JSON object
    # without the family's opener (rewrites.json_opened).
    also_read: tuple[CallSyntax, ...] = ()

    @property
    def read_calls(self) -> tuple[CallSyntax, ...]:
        return (*self.calls, *self.also_read)

    @property
    def styles(self) -> set[str]:
        return {c.style for c in self.calls}


def structural_tag(family: str, tools: Sequence[Any], *, tool_choice: Any,
                   reasoning: bool | Literal["auto"], parallel: bool) -> dict[str, Any]:
    """xgrammar's structural tag for `family` (a JSON-ready dict); `reasoning` True/False,
    or xgrammar's "auto" (an optional reasoning block)."""
    from grammars import get_model_structural_tag

    mode: Literal["enabled", "disabled", "auto"] = "auto" if reasoning == "auto" \
        else "enabled" if reasoning else "disabled"
    tag = get_model_structural_tag(
        family, tools=list(tools), tool_choice=tool_choice, reasoning=mode,
        parallel_tool_calls=parallel)
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
    return _cached_syntax(family, json.dumps(tools, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _cached_syntax(family: str, tools_json: str) -> FamilySyntax:
    """Built once per family and tool list: a request's render reads it several times."""
    tools: list[tuple[str, dict[str, Any]]] = [(n, s) for n, s in json.loads(tools_json)]
    calls: list[CallSyntax] = []
    noise: set[str] = set()
    wrap: tuple[str, str, str] | None = None
    tail = ""
    for name, schema in tools:
        one = [function_tool(name, schema)]
        for choice in ("required", "auto"):
            tag = structural_tag(family, one, tool_choice=choice, reasoning=True,
                                 parallel=True)
            for node in _tags(tag["format"]):
                call = _call(name, schema, node)
                if call is not None:
                    if choice == "required":
                        calls.append(call)
                elif node["content"].get("type") != "any_text":
                    noise.update(s for s in (node["begin"], *_ends(node["end"])) if s)
            noise.update(_consts(tag["format"]) - _call_consts(tag["format"]))
            if choice == "required" and wrap is None:
                wrap = _wrap(tag["format"])
                tail = _tail(tag["format"])
    probe = structural_tag(family, [], tool_choice="auto", reasoning=True, parallel=True)
    noise.update(_separators(probe["format"]))
    begin, end, then = _reasoning(probe["format"])
    texts = tuple((n["begin"], _ends(n["end"])) for n in _tags(probe["format"])
                  if n["content"].get("type") == "any_text" and n["begin"]
                  and n["begin"] != begin)
    off = structural_tag(family, [], tool_choice="auto", reasoning=False, parallel=True)
    calls_begin, calls_end, separator = wrap or ("", "", "\n")
    # Calls after a text block the reasoning opens (Kimi K3's response): the block closes
    # before the calls do.
    block_ends = [ends[0] for block, ends in texts if block == then and wrap is not None]
    calls_begin = "".join(block_ends) + calls_begin
    noise -= {begin or "", end or "", then, ""}
    return FamilySyntax(tuple(calls), tuple(sorted(noise, key=len, reverse=True)),
                        begin, end, then, texts, calls_begin, calls_end, separator,
                        free_between=wrap is None, think_open=begin or _opener(family, end),
                        preamble="".join(_leading_consts(off["format"])), tail=tail,
                        answer_open=_answer_open(off["format"], texts))


def _call(tool: str, schema: dict[str, Any], node: dict[str, Any]) -> CallSyntax | None:
    """The call a tag holds: its content is the arguments (json_schema), or a number, a
    string and the arguments (a sequence: Kimi, Kimi K3, Cohere)."""
    content = node["content"]
    if content.get("type") == "json_schema":
        return CallSyntax(tool, node["begin"], _one(node["end"]),
                          content.get("style", "json"), schema)
    elements = content.get("elements") or []
    if content.get("type") == "sequence" and len(elements) == 3 \
            and [e.get("type") for e in elements] == ["regex", "const_string", "json_schema"]:
        return CallSyntax(tool, node["begin"], _one(node["end"]),
                          elements[2].get("style", "json"), schema,
                          index=elements[0]["pattern"], then=elements[1]["value"])
    return None


def _wrap(fmt: dict[str, Any]) -> tuple[str, str, str] | None:
    """(what opens the call list, what closes it, what stands between calls) where the
    family has a list of calls (a tags_with_separator in a tag or between two strings)."""
    for node in _nodes(fmt):
        if node.get("type") == "tag" and node["content"].get("type") == "tags_with_separator":
            return node["begin"], _one(node["end"]), node["content"].get("separator", "")
        elements: list[dict[str, Any]] = node.get("elements") or [] \
            if node.get("type") == "sequence" else []
        for i, element in enumerate(elements):
            if element.get("type") == "tags_with_separator" and 0 < i < len(elements) - 1 \
                    and elements[i - 1].get("type") == "const_string" \
                    and elements[i + 1].get("type") == "const_string":
                return (elements[i - 1]["value"], elements[i + 1]["value"],
                        element.get("separator", ""))
    # Calls one after another with no list around them (harmony's messages).
    return next((("", "", n.get("separator", "")) for n in _nodes(fmt)
                 if n.get("type") == "tags_with_separator"), None)


def _tail(fmt: dict[str, Any]) -> str:
    """The strings that close the top-level sequence after its last non-string element."""
    elements = fmt.get("elements") if fmt.get("type") == "sequence" else None
    out: list[str] = []
    for element in reversed(elements or []):
        if element.get("type") != "const_string":
            break
        out.insert(0, element["value"])
    return "".join(out)


def _leading_consts(fmt: dict[str, Any]) -> Iterator[str]:
    elements = fmt.get("elements") if fmt.get("type") == "sequence" else None
    for element in elements or []:
        if element.get("type") != "const_string":
            return
        yield element["value"]


def _answer_open(fmt: dict[str, Any], texts: Sequence[tuple[str, tuple[str, ...]]]) -> str:
    """The opening of the text block a reasoning-off tag starts inside (its first element
    is that block's body and end, with no begin), or ""."""
    first = fmt["elements"][0] if fmt.get("type") == "sequence" else fmt
    if first.get("type") != "tag" or first["begin"] \
            or first["content"].get("type") != "any_text":
        return ""
    ends = set(_ends(first["end"]))
    return next((begin for begin, closers in texts if ends & set(closers)), "")


def _opener(family: str, end: str | None) -> str | None:
    """The reasoning block's opening marker: the block's begin when it is optional
    (reasoning "auto"), where a prompt that opens it does not write it."""
    if end is None:
        return None
    try:
        tag = structural_tag(family, [], tool_choice="auto", reasoning="auto", parallel=True)
    except (ValueError, RuntimeError):  # a family with no optional reasoning block
        return None
    return next((n["begin"] for n in _tags(tag["format"])
                 if n["content"].get("type") == "any_text" and end in _ends(n["end"])
                 and n["begin"]), None)


def _reasoning(fmt: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """The reasoning tag: the first any_text tag that opens the output (a sequence's first
    element), or harmony's analysis channel. What follows it is a string the grammar
    writes, or the opening of a text block (Kimi K3's response)."""
    first = fmt
    then = ""
    while first.get("type") == "sequence":
        elements = first["elements"]
        if len(elements) > 1:
            after = elements[1]
            if after.get("type") == "const_string" and first is not fmt:
                then = after["value"]
            elif after.get("type") == "tag" and after["content"].get("type") == "any_text":
                then = after["begin"]
        first = elements[0]
    if first.get("type") == "tag" and first["content"].get("type") == "any_text":
        return first["begin"], _one(first["end"]), then
    for node in _tags(fmt):
        if node["content"].get("type") == "any_text" and "analysis" in node["begin"]:
            return node["begin"], _one(node["end"]), ""
    return None, None, ""


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _tags(node: Any) -> Iterator[dict[str, Any]]:
    return (n for n in _nodes(node) if n.get("type") == "tag")


def _consts(node: Any) -> set[str]:
    """The strings a format writes between its parts (not whitespace alone)."""
    return {n["value"] for n in _nodes(node)
            if n.get("type") == "const_string" and n["value"].strip()}


def _call_consts(node: Any) -> set[str]:
    """The strings inside calls (Kimi's argument marker): part of a call, not noise."""
    return {c for n in _tags(node) if n["content"].get("type") == "sequence"
            and n["content"]["elements"][-1:] and
            n["content"]["elements"][-1].get("type") == "json_schema"
            for c in _consts(n["content"])}


def _separators(node: Any) -> Iterator[str]:
    return (n["separator"] for n in _nodes(node)
            if n.get("type") == "tags_with_separator" and n.get("separator"))


def _ends(end: str | list[str]) -> tuple[str, ...]:
    return (end,) if isinstance(end, str) else tuple(end)


def _one(end: str | list[str]) -> str:
    return _ends(end)[0]
