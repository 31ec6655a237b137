"""A call's arguments in each of xgrammar's argument styles (its json_schema `style`), read
back into JSON as the decode goes on and written the way the family's chat template
writes them. What a style looks like is taken from the grammar xgrammar builds for it.

Reading returns the arguments as JSON text that only grows: each parameter is added once
its closing tag is there, and a plain string parameter is streamed as it is written (held
back by what could still be its closing tag). The styles whose values nest (Cohere's and
MiniMax M3's XML, Gemma's JSON-like syntax) are in nested_arguments.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.formats import nested_arguments
from server.formats.reading import ends_at, partial_suffix, skip_ws
from server.formats.syntax import CallSyntax
from server.formats.values import (
    as_text,
    constrained,
    dumps,
    is_raw_string,
    property_schema,
    typed,
    types_of,
)

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class FlatStyle:
    """Parameters one after another, each an opening tag (naming it), its value as text
    and a closing tag: `<parameter=city>Paris</parameter>`."""

    opening: re.Pattern[str]  # groups: name, and kind where the tag says the value's type
    closing: str
    write_opening: str  # with {name} (and {kind})
    between: str = ""  # written after each parameter
    # kind -> whether the value is a string (None: the schema decides)
    string_kinds: tuple[str, ...] = ()
    write_kind: Callable[[Any], str] | None = None


def _kimi_k3_kind(value: Any) -> str:
    """Kimi K3's type attribute as xgrammar's grammar writes it (an integer is "number")."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


FLAT_STYLES: dict[str, FlatStyle] = {
    "qwen_xml": FlatStyle(re.compile(r"<parameter=([^>\n]+)>"), "</parameter>",
                          "<parameter={name}>", "\n"),
    "glm_xml": FlatStyle(re.compile(r"<arg_key>([^<]*)</arg_key>[ \t\r\n]*<arg_value>"),
                         "</arg_value>", "<arg_key>{name}</arg_key><arg_value>"),
    "minimax_xml": FlatStyle(re.compile(r'<parameter name="([^"]*)">'), "</parameter>",
                             '<parameter name="{name}">', "\n"),
    "deepseek_xml": FlatStyle(
        re.compile(r'<｜DSML｜parameter name="([^"]*)" string="(true|false)">'),
        "</｜DSML｜parameter>", '<｜DSML｜parameter name="{name}" string="{kind}">', "\n",
        ("true",), lambda v: "true" if isinstance(v, str) else "false"),
    "deepseek_v4_1_xml": FlatStyle(
        re.compile(r'<｜DSML｜ parameter name="([^"]*)" string="(true|false)">'),
        "</｜DSML｜ parameter>", '<｜DSML｜ parameter name="{name}" string="{kind}">', "\n",
        ("true",), lambda v: "true" if isinstance(v, str) else "false"),
    "kimi_k3_xml": FlatStyle(
        re.compile(r'<\|open\|>argument key="([^"]*)" type="([a-z]+)"<\|sep\|>'),
        "<|close|>argument<|sep|>", '<|open|>argument key="{name}" type="{kind}"<|sep|>',
        "", ("string",), _kimi_k3_kind),
}


def read_arguments(call: CallSyntax, text: str, start: int) -> tuple[str, int | None]:
    """(the arguments as JSON text so far, where the call's end marker ends or None)."""
    if call.style == "json":
        return _read_json(call, text, start)
    if call.style in FLAT_STYLES:
        return _read_flat(FLAT_STYLES[call.style], call, text, start)
    return nested_arguments.read(call, text, start)


def write_arguments(call: CallSyntax, arguments: Any) -> str:
    """The arguments as the family's chat template writes them."""
    if call.style == "json" or not isinstance(arguments, dict):
        return dumps(arguments)
    style = FLAT_STYLES.get(call.style)
    if style is None:
        return nested_arguments.write(call, arguments)
    out = []
    newlines = _newline_layout(call)
    for name, value in arguments.items():
        kind = style.write_kind(value) if style.write_kind else ""
        written = f"\n{as_text(value)}\n" if newlines else as_text(value)
        out.append(f"{style.write_opening.format(name=name, kind=kind)}{written}"
                   f"{style.closing}{style.between}")
    text = "".join(out)
    # Qwen's calls close with a newline of their own ("\n</function>"): no second one.
    return text[:-1] if newlines and text.endswith("\n") else text


def _read_json(call: CallSyntax, text: str, start: int) -> tuple[str, int | None]:
    rest = text[start:]
    try:
        _, length = _DECODER.raw_decode(rest)
    except json.JSONDecodeError:
        return rest, None  # not complete yet: the raw text is a prefix of the final JSON
    end = rest.find(call.end, length)
    return rest[:length], None if end < 0 else start + end + len(call.end)


def _newline_layout(call: CallSyntax) -> bool:
    """Qwen3-Coder's layout puts each value on lines of its own (`<parameter=k>\\nV\\n`):
    its calls open with a newline; MiMo's, written without them, do not."""
    return call.style == "qwen_xml" and call.begin.endswith("\n")


def _read_flat(style: FlatStyle, call: CallSyntax, text: str,
               start: int) -> tuple[str, int | None]:
    parts: list[str] = []
    pos = start
    while True:
        closed = ends_at(text, pos, call.end)
        if closed is not None:
            return "{" + ", ".join(parts) + "}", closed
        pos = skip_ws(text, pos)
        found = style.opening.match(text, pos)
        if found is None:  # an opening tag or the call's end not all written yet
            return "{" + ", ".join(parts), None
        name = found.group(1)
        kind = found.group(2) if style.opening.groups > 1 else None
        schema = property_schema(call.schema, name)
        is_string = None if kind is None else kind in style.string_kinds
        value, pos_after = _flat_value(style, call, text, found.end(), schema, is_string)
        if pos_after is None:
            if value is not None:
                parts.append(f"{dumps(name)}: {value}")
            return "{" + ", ".join(parts), None
        parts.append(f"{dumps(name)}: {value}")
        pos = pos_after


def _flat_value(style: FlatStyle, call: CallSyntax, text: str, start: int, schema: Any,
                is_string: bool | None) -> tuple[str | None, int | None]:
    """(the value's JSON text, or so much of a string as is certain; where its closing tag
    ends, None while it is not written)."""
    # (A type attribute is not enough: Kimi K3's grammar lets any type name stand before a
    # string a union schema takes.)
    if not _may_be_raw(schema):
        # A JSON value may hold the closing tag inside a string of its own: read it whole.
        try:
            _, after = _DECODER.raw_decode(text, skip_ws(text, start))
        except json.JSONDecodeError:
            return None, None
        end = text.find(style.closing, after)
    else:
        end = text.find(style.closing, start)
    if end < 0:
        raw = is_raw_string(schema) or (bool(is_string) and not constrained(schema))
        return (_partial_string(text[start:], style, call) if raw else None), None
    value = text[start:end]
    if _newline_layout(call):
        value = value.removeprefix("\n").removesuffix("\n")
    return dumps(typed(value, schema, is_string=is_string)), end + len(style.closing)


def _partial_string(written: str, style: FlatStyle, call: CallSyntax) -> str:
    """An open JSON string of the part of a raw string value that is certain."""
    keep = len(written) - partial_suffix(written, style.closing)
    if _newline_layout(call):
        written = written[:keep]
        if written.startswith("\n"):
            written = written[1:]
        elif written == "":
            return '"'
        keep = len(written) - (1 if written.endswith("\n") else 0)
    return dumps(written[:keep])[:-1]


def _may_be_raw(schema: Any) -> bool:
    kinds = types_of(schema)
    return not kinds or "string" in kinds
