"""The argument styles whose values nest: Cohere's XML (`<cofl:value name="k" type="raw|json|
dict|list">`), MiniMax M3's namespaced XML (`]<]minimax[>[<k>v]<]minimax[>[</k>`, arrays as
`<item>` elements) and Gemma 4's JSON-like syntax (unquoted keys, strings between `<|"|>`).
Each is read as the decode goes on (the XML ones a whole top-level parameter at a time,
Gemma's character by character) and written the way the family's chat template writes it."""

from __future__ import annotations

import json
import re
from typing import Any
from xml.sax.saxutils import escape, unescape

from server.formats.reading import ends_at, partial_suffix, skip_ws
from server.formats.syntax import CallSyntax
from server.formats.values import (
    as_text,
    dumps,
    items_schema,
    property_schema,
    string_value,
    typed,
    types_of,
)

_ENTITIES = {"&quot;": '"'}


class _Incomplete(Exception):
    """The text ends before the value does."""


def read(call: CallSyntax, text: str, start: int) -> tuple[str, int | None]:
    if call.style == "gemma":
        return _read_gemma(call, text, start)
    element = _cohere_element if call.style == "cohere_xml" else _m3_element
    parts: list[str] = []
    pos = start
    while True:
        closed = ends_at(text, pos, call.end)
        if closed is not None:
            return "{" + ", ".join(parts) + "}", closed
        pos = skip_ws(text, pos)
        try:
            name, value, pos = element(text, pos, call.schema, call.schema, named=True)
        except _Incomplete:
            return "{" + ", ".join(parts), None
        parts.append(f"{dumps(name)}: {dumps(value)}")


def write(call: CallSyntax, arguments: dict[str, Any]) -> str:
    if call.style == "gemma":
        return _gemma(arguments)
    if call.style == "cohere_xml":
        return "".join(_cohere(value, name) for name, value in arguments.items())
    return "".join(_m3(name, value) for name, value in arguments.items())


# -- Cohere ---------------------------------------------------------------------------
_COHERE_OPEN = re.compile(r'<cofl:value(?: name="([^"]*)")? type="(raw|json|dict|list)">')
_COHERE_CLOSE = "</cofl:value>"


def _cohere_element(text: str, pos: int, schema: Any, root: Any, *,
                    named: bool) -> tuple[str, Any, int]:
    """(its name, its value, where it ends) of the element at `pos`."""
    found = _COHERE_OPEN.match(text, pos)
    if found is None:
        raise _Incomplete
    name = unescape(found.group(1) or "", _ENTITIES)
    kind = found.group(2)
    inner = property_schema(schema, name, root) if named else schema
    pos = found.end()
    if kind in ("raw", "json"):
        end = text.find(_COHERE_CLOSE, pos)
        if end < 0:
            raise _Incomplete
        raw = text[pos:end]
        value = string_value(raw, inner) if kind == "raw" else typed(raw, inner,
                                                                     is_string=False)
        return name, value, end + len(_COHERE_CLOSE)
    out: Any = {} if kind == "dict" else []
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(_COHERE_CLOSE, pos):
            return name, out, pos + len(_COHERE_CLOSE)
        if kind == "dict":
            key, value, pos = _cohere_element(text, pos, inner, root, named=True)
            out[key] = value
        else:
            _, value, pos = _cohere_element(text, pos, items_schema(inner, root), root,
                                            named=False)
            out.append(value)


def _cohere(value: Any, name: str | None = None) -> str:
    head = "<cofl:value" + (f' name="{escape(name, {chr(34): "&quot;"})}"'
                            if name is not None else "")
    if isinstance(value, dict):
        body = "".join(_cohere(v, k) for k, v in value.items())
        return f'{head} type="dict">{body}{_COHERE_CLOSE}'
    if isinstance(value, list):
        return f'{head} type="list">{"".join(_cohere(v) for v in value)}{_COHERE_CLOSE}'
    kind = "raw" if isinstance(value, str) else "json"
    return f'{head} type="{kind}">{as_text(value)}{_COHERE_CLOSE}'


# -- MiniMax M3 -----------------------------------------------------------------------
M3_NAMESPACE = "]<]minimax[>["
_M3_OPEN = re.compile(re.escape(M3_NAMESPACE) + r"<([^<>/\n]+)>")


def _m3_element(text: str, pos: int, schema: Any, root: Any, *,
                named: bool) -> tuple[str, Any, int]:
    found = _M3_OPEN.match(text, pos)
    if found is None:
        raise _Incomplete
    name = found.group(1)
    inner = property_schema(schema, name, root) if named else schema
    close = f"{M3_NAMESPACE}</{name}>"
    pos = found.end()
    kinds = types_of(inner)
    end = text.find(M3_NAMESPACE, pos)  # a scalar's text never holds the namespace
    if end < 0 or (len(text) - end < len(close) and close.startswith(text[end:])):
        raise _Incomplete
    if text.startswith(close, end):
        raw = text[pos:end]
        empty: Any = [] if "array" in kinds else {} if "object" in kinds else None
        value = empty if not raw and empty is not None else typed(raw, inner)
        return name, value, end + len(close)
    is_list = "array" in kinds if kinds & {"array", "object"} \
        else text.startswith(f"{M3_NAMESPACE}<item>", end)
    out: Any = [] if is_list else {}
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(close, pos):
            return name, out, pos + len(close)
        if is_list:
            _, value, pos = _m3_element(text, pos, items_schema(inner, root), root,
                                        named=False)
            out.append(value)
        else:
            key, value, pos = _m3_element(text, pos, inner, root, named=True)
            out[key] = value


def _m3(name: str, value: Any) -> str:
    if isinstance(value, dict):
        body = "".join(_m3(k, v) for k, v in value.items())
    elif isinstance(value, list):
        body = "".join(_m3("item", v) for v in value)
    else:
        body = as_text(value)
    return f"{M3_NAMESPACE}<{name}>{body}{M3_NAMESPACE}</{name}>"


# -- Gemma 4 --------------------------------------------------------------------------
GEMMA_QUOTE = '<|"|>'
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _read_gemma(call: CallSyntax, text: str, start: int) -> tuple[str, int | None]:
    """Gemma's syntax to JSON, character by character: keys quoted, `<|"|>` strings
    escaped. What is held back: a `<|"|>` half written."""
    out: list[str] = []
    stack: list[str] = []  # "{" (expecting a key next: "k") or "["
    pos = skip_ws(text, start)
    key_next = False
    while pos < len(text):
        if text.startswith(GEMMA_QUOTE, pos):
            end = text.find(GEMMA_QUOTE, pos + len(GEMMA_QUOTE))
            body = text[pos + len(GEMMA_QUOTE): len(text) if end < 0 else end]
            if end < 0:
                keep = len(body) - partial_suffix(body, GEMMA_QUOTE)
                out.append(dumps(body[:keep])[:-1])
                return "".join(out), None
            out.append(dumps(body))
            pos = end + len(GEMMA_QUOTE)
            continue
        if GEMMA_QUOTE.startswith(text[pos:]):
            break  # a quote half written
        ch = text[pos]
        if key_next and _IDENT.match(ch):
            ident = _IDENT.match(text, pos)
            assert ident is not None
            word = ident.group()
            closed = ident.end() < len(text)
            out.append(dumps(word) if closed else dumps(word)[:-1])
            pos = ident.end()
            key_next = False
            continue
        if ch in "{[":
            stack.append(ch)
            key_next = ch == "{"
        elif ch in "}]":
            if stack:
                stack.pop()
            key_next = False
        elif ch == ",":
            key_next = bool(stack) and stack[-1] == "{"
        out.append(ch)
        pos += 1
        if not stack:
            tail = skip_ws(text, pos)
            if text.startswith(call.end, tail):
                return "".join(out), tail + len(call.end)
            return "".join(out), None
    return "".join(out), None


def _gemma(value: Any) -> str:
    if isinstance(value, dict):
        # Keys sorted, as Gemma 4's template writes them (`dictsort`).
        return "{" + ",".join(f"{k}:{_gemma(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma(v) for v in value) + "]"
    if isinstance(value, str):
        return f"{GEMMA_QUOTE}{value}{GEMMA_QUOTE}"
    return json.dumps(value)

