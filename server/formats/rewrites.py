"""What StrictCall changes in xgrammar's structural tag for a family before compiling it:
whitespace bounded, and a forced answer (tool_choice required or named) that must hold a
call, which xgrammar's tags do not always require."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# An answer that is a list of messages joined by a separator, calls and reasoning alike
# (harmony: `<|start|>assistant` between them), as xgrammar 0.2.9 writes it: the list, an
# optional list (one call), or a choice of lists (one call after any messages).
MESSAGE_LISTS = ("tags_with_separator", "optional", "or")


def tight(node: Any) -> Any:
    """The family's tag with whitespace inside JSON arguments bounded (one character in a
    row, xgrammar's least): unbounded, a model can loop on whitespace to max_tokens."""
    if isinstance(node, dict):
        if node.get("type") == "json_schema" and node.get("max_whitespace_cnt") is None:
            node["max_whitespace_cnt"] = 1
        for value in node.values():
            tight(value)
    elif isinstance(node, list):
        for value in node:
            tight(value)
    return node


# What a small model writes in an "auto" answer's text when it means a call without its
# format's opener (Qwen2.5-0.5B, asked to greet Anna with only a weather tool offered:
# `{"name": "say_hello", "arguments": {...}}` as the whole answer): kept out of the text,
# so a call is written in the format's syntax, under its grammar, or not at all. The
# excluded texts are strings, not patterns: the key names in quotes (a call's arguments
# under any spacing before its colon; the 1.5B writes `"arguments"  :`, the 0.5B after a
# tool result `{"name': 'get_weather', 'arguments': ...}`), and any object that opens with
# a quoted key under the spacings a model writes (`{\n  "name" :` in a ```json block, then
# `{"name}: get_weather", ...` once those were out): in an "auto" answer with tools, a JSON
# object is a call or nothing (a JSON answer is what `response_format` is for).
_OPENING_SPACES = ("", " ", "\n", "\n ", "\n  ", "\n   ", "\n    ", "\n\t", "\r\n",
                   "\r\n  ", "\r\n    ")
JSON_CALL_TEXTS = ('"arguments"', '"parameters"', "'arguments'", "\"arguments'",
                   '\\"arguments\\"', '{\\"',  # a call inside a string: ("{\"name\": ..."
                   *(f"{{{space}{quote}" for space in _OPENING_SPACES for quote in "\"'"))


def no_calls_in_text(tag: dict[str, Any], also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The "auto" tag with `JSON_CALL_TEXTS` (and `also`: the format's own markers that
    only its calls and tool results hold) excluded from the free text around the calls."""
    for node in _nodes(tag["format"]):
        if node.get("type") == "triggered_tags":
            node["excludes"] = list(dict.fromkeys(
                [*node.get("excludes", []), *JSON_CALL_TEXTS, *also]))
    return tag


# The first visible character of an "auto" answer's text: none that opens JSON, a code
# block, a quoted string or a bracket (`{`, `[`, a backtick, `"`, `'`, `(`) or a tag (`<`:
# the format's own call opener starts the other branch): the 0.5B on BFCL's multi-turn
# wrote `("{\"name\": \"cd\", ...}")`; after a tool result it answered with the call again
# as ```json {name: "get_weather", ...}``` once the quoted forms were excluded.
_TEXT_FIRST = "[ \\t\\n]*[^{\\[`<(\"' \\t\\n]"


def text_first_not_json(tag: dict[str, Any]) -> dict[str, Any]:
    """The "auto" tag with each free-text-and-calls node (`triggered_tags`) begun either by
    one of its calls or by a text whose first visible character opens no JSON, code block
    or tag: a call written as JSON in the text branch, with or without spacing or quotes, is
    impossible under the grammar, not only the spellings `JSON_CALL_TEXTS` lists. Where the
    family's call holds a JSON object with the tool's name (Qwen's `<tool_call>\n{"name":
    ...}`), an answer that opens with that object, bare or in a ```json block, is the same
    call (`json_opened`): a model that means a call but leaves out its opener writes it
    under the grammar, and it is read as a call.

    An answer that opens with a call holds no code block after it: the 0.5B wrote the call
    it had just made once more as text (```json {name: "find", ...}``` after
    `<tool_call>...</tool_call>`, BFCL multi-turn); where the answer holds one call at
    most, no call follows it either."""
    return {**tag, "format": _text_first(tag["format"])}


def text_without_calls(also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The tag of an "auto" answer's text alone (the answer after a repeated call was
    dropped, `Rendering.fallback`): the same text the "auto" grammar's text branch takes,
    no call written as text in it, so a model that wants to call again cannot write the
    call into the answer."""
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "regex", "pattern": _TEXT_FIRST},
        {"type": "any_text", "excludes": list(dict.fromkeys([*JSON_CALL_TEXTS, *also]))}]}}


CODE_FENCE = "```"
JSON_BLOCK = CODE_FENCE + "json\n"
_JSON_CALL = '{"name": '


def json_opened(begin: str, end: str) -> list[tuple[str, str]]:
    """The (begin, end) pairs of a call written without its family's opener and closer:
    the JSON object alone, and in a ```json block. None where the call's begin holds no
    such object or already starts with it (Llama's calls are the object itself)."""
    at = begin.find(_JSON_CALL)
    close = end.find("}")
    if at <= 0 or close < 0:
        return []
    bare, closed = begin[at:], end[:close + 1]
    return [(bare, closed), (JSON_BLOCK + bare, closed + "\n" + CODE_FENCE)]


def _text_first(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "triggered_tags" and node.get("tags"):
            opened = [{**t, "begin": b, "end": e} for t in node["tags"]
                      for b, e in json_opened(t["begin"], t["end"])]
            # After an answer's opening call: more calls where the answer may hold several,
            # and text (Gemma 4's template writes the content after the calls), but no code
            # block in it. (A text that opens the answer may hold code; its calls follow.)
            excludes = list(dict.fromkeys([*node.get("excludes", []), CODE_FENCE]))
            after = {"type": "any_text", "excludes": excludes} \
                if node.get("stop_after_first") else {**node, "excludes": excludes}
            return {"type": "or", "elements": [
                {"type": "sequence", "elements": [
                    {"type": "or", "elements": [*node["tags"], *opened]}, after]},
                {"type": "sequence", "elements": [
                    {"type": "regex", "pattern": _TEXT_FIRST}, node]}]}
        return {k: _text_first(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_text_first(v) for v in node]
    return node


def calls_only(tag: dict[str, Any], separator: str = "\n", *,
               parallel: bool = True) -> dict[str, Any]:
    """A forced answer's tag: the calls with nothing but the family's separator between
    them, where xgrammar's tag lets free text run around them (`triggered_tags`); and at
    least one call where the answer is a list of messages (harmony's)."""
    fmt = tag["format"]
    if fmt.get("type") in MESSAGE_LISTS:
        return {**tag, "format": reasoning_then_calls(fmt, parallel=parallel)}
    return {**tag, "format": _untriggered(fmt, separator)}


def _untriggered(node: Any, separator: str) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "triggered_tags":
            return {"type": "tags_with_separator",
                    "tags": _untriggered(node["tags"], separator),
                    "separator": separator, "at_least_one": True,
                    "stop_after_first": node.get("stop_after_first", False)}
        return {k: _untriggered(v, separator) for k, v in node.items()}
    if isinstance(node, list):
        return [_untriggered(v, separator) for v in node]
    return node


def reasoning_then_calls(fmt: dict[str, Any], *, parallel: bool) -> dict[str, Any]:
    """A message list that must hold a call. xgrammar's forced harmony tag lets it hold
    none (`at_least_one: false` beside the analysis message; with one call, the analysis
    alone is one of its choices), and with one call its choices repeat the analysis
    message, which a budget then caps in one of them only. Here: the reasoning message
    once, where the tag has one, then at least one call (one, if not `parallel`)."""
    lists = [n for n in _nodes(fmt) if n.get("type") == "tags_with_separator"]
    tags = list({json.dumps(t, sort_keys=True): t for n in lists for t in n["tags"]}.values())
    calls = [t for t in tags if t["content"].get("type") != "any_text"]
    messages = [t for t in tags if t["content"].get("type") == "any_text"]
    separator = lists[0]["separator"]
    listed = {"type": "tags_with_separator", "tags": calls, "separator": separator,
              "at_least_one": True, "stop_after_first": not parallel}
    if not messages:
        return listed
    if len(messages) > 1:
        raise ValueError(f"a forced answer's message list holds {len(messages)} kinds of "
                         "message besides calls; only a reasoning message is known")
    return {"type": "sequence", "elements": [
        messages[0], {"type": "const_string", "value": separator}, listed]}


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)

