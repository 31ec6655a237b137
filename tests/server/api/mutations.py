"""Hostile mutations of valid requests, for the mutation fuzz tier (test_mutation_fuzz.py).

A case is one valid seed request (every route and API, plain and streamed) with one to
three values replaced, dropped or added: null, wrong types, a dict inside `required`, lone
surrogates, a 100k string, deep nesting, huge numbers, NaN and Infinity, empty containers,
another part of the same request where this one belongs. schemathesis cannot make these:
in the OpenAPI document a schema, a tool's arguments or a message's content is an untyped
object, and what it generates inside one is anything or nothing. Pure: no I/O."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]

# Keys a mutation adds to an object: the ones readers look up, and some no reader knows.
ADDED_KEYS = ("type", "required", "properties", "items", "enum", "const", "anyOf", "oneOf",
              "allOf", "$ref", "$defs", "$schema", "pattern", "format", "minimum",
              "maxLength", "additionalProperties", "prefixItems", "not", "strict", "name",
              "description", "content", "role", "tool_choice", "stream", "arguments",
              "input_schema", "parameters", "strictcall", "", "\ud800", "x" * 300)


def _deep(levels: int, *, lists: bool) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value] if lists else {"a": value}
    return value


# What replaces a value, or is added: scalars at every edge, odd text, odd containers.
HOSTILE: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, -(10**30), 10**400,
    1.5, -0.0, 1e308, 5e-324, float("nan"), float("inf"), float("-inf"),
    "", " ", "x" * 100_000, "\ud800", "a\udfffb", "\udc00\ud800", "\x00", "\u202e\u200b",
    "\U0001f600", "null", "NaN", "Infinity", "true", "1", "{}", "[]", "<|im_end|>",
    "<tool_call>", "../../etc/passwd", "%s%n{0}", "object", "string", "dict", "any",
    [], {}, [{}], [[]], [None], [""], {"": None}, {"type": {}}, {"$ref": "#/nope"},
    {"type": "object", "required": [{}]}, list(range(10_000)), ["x"] * 2_000,
    # Deep ones are made fresh for each use (copying one would recurse as deep).
    lambda: _deep(100, lists=True), lambda: _deep(100, lists=False),
    lambda: _deep(500, lists=True), lambda: _deep(800, lists=False),
)
# Header values a mutation sends (bytes: latin-1 text the server decodes as such; none with
# the surrounding whitespace or control bytes no HTTP client sends).
HOSTILE_HEADERS: tuple[bytes, ...] = (
    b"", b"x" * 4_000, "\u00ff\u00fe".encode("latin-1"), b"\xed\xa0\x80",
    b"NaN", b"null", b"{}", b"idem-" + b"a" * 200, b"../../etc/passwd")
MUTATED_HEADERS = ("Idempotency-Key", "X-Request-Id", "X-Tenant-Id", "Content-Type",
                   "Authorization", "Accept")


@dataclass(frozen=True)
class Seed:
    name: str  # the API and form: "chat.tools.stream", "invoke.write", ...
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    seed: Seed
    body: Any
    headers: dict[str, bytes]
    mutations: tuple[str, ...]  # what was done, where: the case's reproduction

    @classmethod
    def unmutated(cls, seed: Seed) -> Case:
        return cls(seed, seed.body, {k: v.encode() for k, v in seed.headers.items()},
                   ("unmutated",))

    def content(self) -> bytes:
        """The body as sent: ASCII JSON (a lone surrogate as its escape), NaN and Infinity
        as Python writes them (no JSON has them; the server must say so)."""
        return json.dumps(self.body, allow_nan=True).encode()

    def describe(self) -> str:
        text = self.content().decode()
        shown = text if len(text) <= 600 else f"{text[:600]}... ({len(text)} bytes)"
        return f"{self.seed.name} POST {self.seed.path} [{'; '.join(self.mutations)}] {shown}"


_USER = [{"role": "user", "content": "What is the weather in Paris?"}]
_PARAMS = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20, "description": "City name"},
    "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"],
    "additionalProperties": False}
_ANSWER = {"type": "object", "required": ["ok"], "properties": {
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 5}}}}
_FN = {"name": "get_weather", "description": "Weather for a city", "parameters": _PARAMS}
_STREAMED = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def seeds(model: str, *, max_tokens: int) -> list[Seed]:
    """A valid request for every route and API (streamed forms too), small decodes. Shared
    parts: mutate() copies a seed before it changes anything."""
    out = [*_chat_seeds(model, max_tokens), *_responses_seeds(model, max_tokens),
           *_messages_seeds(model, max_tokens), *_other_seeds()]
    streamed = [Seed(f"{s.name}.stream", s.path, {**s.body, "stream": True}, s.headers)
                for s in out if s.path in _STREAMED]
    return out + streamed


def _chat_seeds(model: str, max_tokens: int) -> list[Seed]:
    chat, path = {"model": model, "messages": _USER, "max_tokens": max_tokens}, \
        "/v1/chat/completions"
    tool = {"type": "function", "function": _FN}
    contract = {"type": "function", "function": {"name": "search_products"}}
    return [
        Seed("chat.text", path, {**chat, "temperature": 0.5, "top_p": 0.9, "seed": 7,
                                 "stop": ["\n\n"]}),
        Seed("chat.tools", path, {**chat, "tools": [tool, contract], "tool_choice": "required",
                                  "parallel_tool_calls": False}),
        Seed("chat.named", path, {**chat, "tools": [tool], "tool_choice": {
            "type": "function", "function": {"name": "get_weather"}}}),
        Seed("chat.json", path, {**chat, "response_format": {"type": "json_schema",
                                                             "json_schema": {
            "name": "answer", "schema": _ANSWER, "strict": True}}}),
    ]


def _responses_seeds(model: str, max_tokens: int) -> list[Seed]:
    base, path = {"model": model, "max_output_tokens": max_tokens}, "/v1/responses"
    return [
        Seed("responses.text", path, {**base, "input": "Say hi", "instructions": "Be brief",
                                      "temperature": 0.2}),
        Seed("responses.tools", path, {**base, "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Paris?"}]}],
            "tools": [{"type": "function", **_FN}], "tool_choice": "required"}),
        Seed("responses.json", path, {**base, "input": "Answer", "text": {"format": {
            "type": "json_schema", "name": "answer", "schema": _ANSWER}}}),
    ]


def _messages_seeds(model: str, max_tokens: int) -> list[Seed]:
    base, path = {"model": model, "max_tokens": max_tokens}, "/v1/messages"
    call = {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"}
    return [
        Seed("messages.text", path, {**base, "system": "Be brief", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}),
        Seed("messages.tools", path, {**base, "messages": _USER, "tools": [
            {"name": "get_weather", "description": "Weather", "input_schema": _PARAMS}],
            "tool_choice": {"type": "any"}}),
        Seed("messages.turns", path, {**base, "messages": [
            *_USER, {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]}]}),
    ]


def _other_seeds() -> list[Seed]:
    return [
        Seed("compile", "/v1/grammars/compile", _PARAMS),
        Seed("validate", "/v1/contracts/reissue_card/validate", {"arguments": {
            "card_last4": "4417", "city": "Kazan", "branch_id": 3}}),
        Seed("invoke.read", "/v1/tools/check_access_request_status/invoke",
             {"arguments": {"request_id": "AR-004217"}}),
        Seed("invoke.write", "/v1/tools/open_urgent_ticket/invoke", {
            "arguments": {"request_id": "AR-004217", "summary": "Blocked on payroll"},
            "idempotency_key": "idem-fuzz-0001"}, {"X-Tenant-Id": "acme"}),
    ]


def mutate(seed: Seed, rng: random.Random) -> Case:
    """`seed` with one to three values replaced, dropped or added (and, one case in ten,
    a header set to an odd value)."""
    body = copy.deepcopy(seed.body)
    done = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        body, what = _mutate_once(body, rng)
        done.append(what)
    headers = {k: v.encode() for k, v in seed.headers.items()}
    if rng.random() < 0.1:
        name = rng.choice(MUTATED_HEADERS)
        headers[name] = rng.choice(HOSTILE_HEADERS)
        done.append(f"header {name}: {headers[name][:40]!r}")
    return Case(seed, body, headers, tuple(done))


def _mutate_once(body: Any, rng: random.Random) -> tuple[Any, str]:
    paths = [p for p in _paths(body) if p]
    if not paths:  # every key dropped already: add one
        name = rng.choice(ADDED_KEYS)
        body[name] = _hostile(body, rng)
        return body, f"add /{name[:20]} = {_short(body[name])}"
    path = rng.choice(paths)
    parent, key = _get(body, path[:-1]), path[-1]
    op = rng.choice(("replace", "replace", "replace", "drop", "add"))
    where = _pointer(path)
    if op == "drop":
        del parent[key]
        return body, f"drop {where}"
    value = _hostile(body, rng)
    if op == "add" and isinstance(parent[key], dict):
        name = rng.choice(ADDED_KEYS)
        parent[key][name] = value
        return body, f"add {where}/{name[:20]} = {_short(value)}"
    if op == "add" and isinstance(parent[key], list):
        parent[key].append(value)
        return body, f"append to {where}: {_short(value)}"
    parent[key] = value
    return body, f"replace {where} with {_short(value)}"


def _hostile(body: Any, rng: random.Random) -> Any:
    """An odd value; one time in six a copy of another part of the same body (a schema
    where a message belongs, a message list where a schema belongs)."""
    if rng.random() < 1 / 6:
        part = _get(body, rng.choice(_paths(body)))
        if _nesting(part) <= 50:  # a deep one is not copied (that recurses as deep)
            return copy.deepcopy(part)
    value = rng.choice(HOSTILE)
    return value() if callable(value) else copy.deepcopy(value)


def _nesting(value: Any) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else ()
        stack.extend((c, depth + 1) for c in children)
    return deepest


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path into `value`, the root (()) first; containers over 50 items sampled by
    their first 50 (a mutation's own 10k list is not walked item by item)."""
    out: list[Path] = [prefix]
    stack: list[tuple[Any, Path]] = [(value, prefix)]
    while stack:
        node, at = stack.pop()
        if len(at) >= 12:  # inside a deep value a mutation put there: its top is enough
            continue
        items = list(node.items())[:50] if isinstance(node, dict) else \
            list(enumerate(node))[:50] if isinstance(node, list) else []
        for key, sub in items:
            out.append((*at, key))
            stack.append((sub, (*at, key)))
    return out


def _get(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


def _pointer(path: Path) -> str:
    return "".join(f"/{str(p)[:30]}" for p in path) or "/"


def _short(value: Any) -> str:
    text = json.dumps(value, allow_nan=True)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} chars)"
