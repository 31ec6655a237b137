"""What a request constrains, read from its body, and whether the answer kept to it.

Every answer gets one outcome: "valid" (the calls or the JSON match their schemas),
"invalid", "cut_off" (ended at max_tokens: never valid, whatever its text), "no_call" (an
auto tool choice answered in text), "unchecked" (nothing to check: free text), or "error"
(an HTTP error or a broken stream). The three wire APIs say the same things in their own
words; `expect_of` reads each into one `Expect`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from grammars import InvalidSchemaError, bfcl_to_json_schema

Api = Literal["chat", "responses", "messages"]
APIS: tuple[Api, ...] = ("chat", "responses", "messages")
Outcome = Literal["valid", "invalid", "cut_off", "no_call", "unchecked", "error"]
OUTCOMES: tuple[Outcome, ...] = ("valid", "invalid", "cut_off", "no_call", "unchecked",
                                 "error")
CallChoice = Literal["none", "auto", "required"]
_DECODER = json.JSONDecoder()
_NOTHING = object()  # not JSON (JSON's own null is None)


@dataclass(frozen=True)
class Answer:
    """What a streamed answer came to, in any API: finish_reason in chat's words ("stop",
    "length", "tool_calls")."""

    content: str = ""
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, arguments text)
    finish_reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Expect:
    """What an answer must be. `functions`: the tools offered (name -> parameters schema);
    `call`: whether a call may come ("auto") or must ("required"); `forced`: the one tool
    a call must name; `text_schema`: what a text answer's JSON must match, with
    `text_lenient` the first JSON object in the text (an unconstrained answer)."""

    functions: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    call: CallChoice = "none"
    forced: str | None = None
    text_schema: dict[str, Any] | None = None
    text_lenient: bool = False


def judge(expect: Expect, answer: Answer) -> Outcome:
    if answer.error is not None:
        return "error"
    if answer.finish_reason == "length":
        return "cut_off"
    if answer.tool_calls:
        return "valid" if expect.call != "none" and all(
            _call_ok(expect, name, arguments) for name, arguments in answer.tool_calls) \
            else "invalid"
    if expect.call == "required":
        return "invalid"
    if expect.text_schema is not None:
        value = _first_object(answer.content) if expect.text_lenient \
            else _loads(answer.content)
        return "valid" if _matches(value, expect.text_schema) else "invalid"
    return "no_call" if expect.call == "auto" else "unchecked"


def _call_ok(expect: Expect, name: str, arguments: str) -> bool:
    if expect.forced is not None and name != expect.forced:
        return False
    value = _loads(arguments)
    return name in expect.functions and isinstance(value, dict) \
        and _matches(value, expect.functions[name])


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOTHING


def _first_object(text: str) -> Any:
    start = text.find("{")
    if start < 0:
        return _NOTHING
    try:
        return _DECODER.raw_decode(text, start)[0]
    except ValueError:
        return _NOTHING


def _matches(value: Any, schema: dict[str, Any]) -> bool:
    return value is not _NOTHING and jsonschema.Draft202012Validator(schema).is_valid(value)


class BodyError(ValueError):
    """A request body whose tools or schemas cannot be read; the message says where."""


def expect_of(api: Api, body: Mapping[str, Any]) -> Expect:
    """The constraints `body` puts on its answer, in `api`'s words; BFCL's Python-flavoured
    schemas (`dict`, `float`) are read as the JSON Schema they stand for."""
    if api == "chat":
        tools = {_name(t.get("function"), i): (t.get("function") or {}).get("parameters")
                 for i, t in enumerate(_list(body, "tools"))}
        forced = _forced(body.get("tool_choice"), lambda c: (c.get("function") or {}))
        text = _chat_format(body.get("response_format"))
    elif api == "responses":
        tools = {_name(t, i): t.get("parameters") for i, t in enumerate(_list(body, "tools"))
                 if t.get("type", "function") == "function"}
        forced = _forced(body.get("tool_choice"), lambda c: c)
        text = _json_schema_format((body.get("text") or {}).get("format"))
    else:
        tools = {_name(t, i): t.get("input_schema") for i, t in enumerate(_list(body,
                                                                                "tools"))}
        forced = _forced(body.get("tool_choice"), lambda c: c)
        text = _json_schema_format(body.get("output_format") or (
            body.get("output_config") or {}).get("format"))
    functions = {name: _schema(schema, f"tools[{name!r}]") for name, schema in tools.items()}
    call = _call_choice(body.get("tool_choice"), bool(functions))
    return Expect(functions=functions, call=call, forced=forced,
                  text_schema=None if text is None else _schema(text, "the answer's format"))


def _list(body: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BodyError(f"{key!r} must be a list of objects")
    return value


def _name(tool: Any, index: int) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None
    if not isinstance(name, str) or not name:
        raise BodyError(f"tools[{index}] has no name")
    return name


def _forced(choice: Any, where: Any) -> str | None:
    """The tool a tool_choice object names (chat: under "function"), if it names one."""
    if isinstance(choice, dict) and choice.get("type") in ("function", "tool"):
        name = where(choice).get("name")
        return name if isinstance(name, str) else None
    return None


def _call_choice(choice: Any, offered: bool) -> CallChoice:
    if not offered or choice == "none" or (isinstance(choice, dict)
                                           and choice.get("type") == "none"):
        return "none"
    if choice in ("required", "any") or (isinstance(choice, dict) and choice.get("type") in (
            "function", "tool", "any")):
        return "required"
    return "auto"


def _chat_format(fmt: Any) -> dict[str, Any] | None:
    """Chat's response_format: OpenAI's json_schema, json_object (any object), or
    llama.cpp's json_object with a schema."""
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema") or {}
    if fmt.get("type") == "json_object":
        return fmt.get("schema") or {"type": "object"}
    return None


def _json_schema_format(fmt: Any) -> dict[str, Any] | None:
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return fmt.get("schema") or {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "object"}
    return None


def _schema(schema: Any, where: str) -> dict[str, Any]:
    if schema is None:
        return {}
    try:
        converted = bfcl_to_json_schema(schema)
        jsonschema.Draft202012Validator.check_schema(converted)
    except (InvalidSchemaError, jsonschema.SchemaError) as exc:
        why = exc.message if isinstance(exc, jsonschema.SchemaError) else str(exc)
        raise BodyError(f"{where}: not a JSON Schema ({why})") from None
    return converted
