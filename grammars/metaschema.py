"""A client's JSON Schema checked before anything here reads it.

First as a JSON value: no lone UTF-16 surrogate (no encoder can write it), no NaN or
Infinity (Python's parser accepts them, JSON has neither), nested at most `MAX_NESTING`
deep (every reader after this one recurses). Then against its draft's metaschema: 2020-12,
unless `$schema` names another draft that jsonschema knows. jsonschema (Python) is the
authority on that check and words its errors; jsonschema-rs answers first whether there is
any (1.6 against 150 ms on a 156 kB Kubernetes schema), with Python's own checkers for the
formats the metaschemas name, so that the two give one verdict. Budgets, the keyword analysis
and the compilers may then trust the schema's shape (`required` a list of strings, `type`
a name or a list of names, ...) instead of each guarding against every odd value.

BFCL's dialect (`dict`, `float`, `tuple`, `any`, `optional`) is converted to JSON Schema
(dialect.py) between the two checks, so the metaschema sees standard types."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from typing import Any, Literal, TypeGuard

import jsonschema
import jsonschema_rs
from jsonschema.exceptions import best_match

from grammars.dialect import bfcl_to_json_schema
from grammars.errors import InvalidSchemaError
from grammars.json_value import has_surrogate, plain_json

# Containers inside containers. Generous next to the max_depth budget (10 subschemas, about
# 20-30 containers); jsonschema's own check recurses ~10 frames a level and meets Python's
# recursion limit near 100 nested subschemas.
MAX_NESTING = 64
Dialect = Literal["json-schema", "bfcl"]
_MESSAGE_CHARS = 300  # jsonschema quotes the offending value: a 100k string stays out


def checked_client_schema(schema: Any, *, where: str,
                          dialect: Dialect = "json-schema") -> dict[str, Any]:
    """`schema` as JSON Schema (converted from BFCL's dialect if `dialect` is "bfcl"), once
    it is a JSON object that its draft's metaschema accepts; InvalidSchemaError, naming the
    JSON Pointer inside the schema and what is wrong, if not."""
    if not isinstance(schema, dict):
        raise InvalidSchemaError(f"{where} must be a JSON object, got {_json_type(schema)}",
                                 hint="Send a JSON Schema object such as {\"type\": \"object\"}.")
    check_json_value(schema, where=where)
    checked: dict[str, Any] = bfcl_to_json_schema(schema) if dialect == "bfcl" else schema
    check_metaschema(checked, where=where)
    check_satisfiable(checked, where=where)
    return checked


def check_json_value(value: Any, *, where: str) -> None:
    """Refuse what parsed but is no JSON text: lone surrogates, NaN and infinities (also a
    number too large for a float), and nesting deeper than MAX_NESTING. Iterative: a deep
    value must not exhaust the stack of the check meant to refuse it. A value with none of
    these passes on a fast walk (grammars/json_value.py); only the others are walked here,
    to name the place."""
    if plain_json(value, MAX_NESTING):
        return
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        node, pointer, depth = stack.pop()
        if isinstance(node, (dict, list)) and depth > MAX_NESTING:
            raise InvalidSchemaError(
                f"{where} nests objects and arrays more than {MAX_NESTING} deep",
                pointer=pointer, hint="Flatten the schema, or move shared parts into $defs.")
        if isinstance(node, dict):
            for key, sub in node.items():
                child = f"{pointer}/{escape_pointer(key)}"
                if has_surrogate(key):
                    raise _surrogate(where, child, "a key")
                stack.append((sub, child, depth + 1))
        elif isinstance(node, list):
            stack.extend((sub, f"{pointer}/{i}", depth + 1) for i, sub in enumerate(node))
        elif isinstance(node, str) and has_surrogate(node):
            raise _surrogate(where, pointer, "a string")
        elif isinstance(node, float) and not math.isfinite(node):
            raise InvalidSchemaError(
                f"{where} holds {node!r} (NaN, Infinity or a number too large for a float), "
                "which JSON has no way to write", pointer=pointer,
                hint="Send a finite number, or leave the keyword out.")


# Where a subschema always applies to the value it describes (not a branch of a union, a
# condition or a definition that may go unused): an unsatisfiable node there is a client bug.
_ALWAYS_ONE = ("items", "additionalProperties")
_ALWAYS_LIST = ("allOf", "prefixItems")


def check_satisfiable(schema: dict[str, Any], *, where: str) -> None:
    """Refuse, before any decode, a node no value can match: a `type` no value of its
    `enum` or `const` has (BFCL's `live_simple` has `{"type": "array", "enum": ["a",
    "b"]}`), bounds that leave no room (`minimum > maximum`, `minItems > maxItems`), a
    `required` property that `additionalProperties: false` forbids. No output could be
    valid, so decoding would only end in a 422. Nodes under a union, a condition, `not` or a
    definition are left alone: another branch may be the one that is meant."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, pointer = stack.pop()
        if not isinstance(node, dict):
            continue
        _check_enum_type(node, pointer, where)
        _check_bounds(node, pointer, where)
        _check_required_allowed(node, pointer, where)
        for key in _ALWAYS_ONE:
            stack.append((node.get(key), f"{pointer}/{key}"))
        if isinstance(node.get("items"), list):  # draft-4 tuple form
            stack.extend((sub, f"{pointer}/items/{i}") for i, sub in enumerate(node["items"]))
        for key in _ALWAYS_LIST:
            if isinstance(node.get(key), list):
                stack.extend((sub, f"{pointer}/{key}/{i}") for i, sub in enumerate(node[key]))
        if isinstance(node.get("properties"), dict):
            stack.extend((sub, f"{pointer}/properties/{escape_pointer(name)}")
                         for name, sub in node["properties"].items())


def _check_enum_type(node: dict[str, Any], pointer: str, where: str) -> None:
    types = node.get("type")
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types:
        return
    for key in ("const", "enum"):
        if key not in node:
            continue
        values = [node["const"]] if key == "const" else node["enum"]
        if not isinstance(values, list) or not values:
            continue
        if not any(_json_type_is(value, kind) for value in values for kind in types):
            shown = json.dumps(values, ensure_ascii=False)
            if len(shown) > _MESSAGE_CHARS:
                shown = shown[:_MESSAGE_CHARS] + "..."
            named = " or ".join(str(kind) for kind in types)
            raise InvalidSchemaError(
                f"{where}: no value is valid here: 'type' is {named} and '{key}' holds no "
                f"{named} ({shown})", pointer=f"{pointer}/{key}",
                hint=(f"For an array of these values put the '{key}' under 'items'."
                      if types == ["array"] else
                      f"Make 'type' and the '{key}' values agree, or leave one out."))


# Bounds that no value of the node's type can meet: (lower, upper, the types they bind).
_LENGTH_BOUNDS = (("minLength", "maxLength", {"string"}), ("minItems", "maxItems", {"array"}),
                  ("minProperties", "maxProperties", {"object"}))


def _only(node: dict[str, Any], kinds: set[str]) -> bool:
    """Whether every value the node's `type` allows is one of `kinds` (no `type`: any)."""
    types = node.get("type")
    types = [types] if isinstance(types, str) else types
    return isinstance(types, list) and bool(types) and set(types) <= kinds


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_bounds(node: dict[str, Any], pointer: str, where: str) -> None:
    """`minimum` above `maximum` (or equal with either exclusive), `minItems` above
    `maxItems` and the like, on a node whose type they bind: nothing is valid there."""
    for low, high, kinds in _LENGTH_BOUNDS:
        lo, hi = node.get(low), node.get(high)
        if _number(lo) and _number(hi) and lo > hi and _only(node, kinds):
            raise InvalidSchemaError(
                f"{where}: no value is valid here: '{low}' {lo} is above '{high}' {hi}",
                pointer=f"{pointer}/{low}", hint=f"Make '{low}' at most '{high}'.")
    if not _only(node, {"number", "integer"}):
        return
    lows = [(node[k], k) for k in ("minimum", "exclusiveMinimum") if _number(node.get(k))]
    highs = [(node[k], k) for k in ("maximum", "exclusiveMaximum") if _number(node.get(k))]
    for lo, low in lows:
        for hi, high in highs:
            exclusive = low.startswith("exclusive") or high.startswith("exclusive")
            if lo > hi or (lo == hi and exclusive):
                raise InvalidSchemaError(
                    f"{where}: no number is valid here: '{low}' {lo} and '{high}' {hi} "
                    "leave no room", pointer=f"{pointer}/{low}",
                    hint=f"Make '{low}' {'below' if exclusive else 'at most'} '{high}'.")


def _check_required_allowed(node: dict[str, Any], pointer: str, where: str) -> None:
    """A `required` property that `additionalProperties: false` forbids (not among
    `properties`, matching no `patternProperties`) on an object node: nothing is valid."""
    if node.get("additionalProperties") is not False or not _only(node, {"object"}):
        return
    required, props = node.get("required"), node.get("properties") or {}
    patterns = node.get("patternProperties") or {}
    if not isinstance(required, list) or not isinstance(props, dict) or patterns:
        return  # with patternProperties, a name may match one: left to the validator
    missing = [name for name in required if isinstance(name, str) and name not in props]
    if missing:
        raise InvalidSchemaError(
            f"{where}: no object is valid here: '{missing[0]}' is required but "
            "'additionalProperties' is false and 'properties' does not list it",
            pointer=f"{pointer}/required",
            hint=f"Add '{missing[0]}' to 'properties', or take it out of 'required'.")


def _json_type_is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    kinds = {"string": str, "boolean": bool, "array": list, "object": dict,
             "null": type(None)}
    return kind in kinds and type(value) is kinds[kind]


def check_metaschema(schema: dict[str, Any], *, where: str) -> None:
    """Refuse a schema its draft's metaschema rejects (draft 2020-12 unless `$schema` names
    one jsonschema knows), naming the most relevant error's JSON Pointer."""
    problem = _PROBLEMS.get_or_find(schema)
    if problem is not None:
        pointer, message = problem
        raise InvalidSchemaError(f"{where} is not a valid JSON Schema: {message}",
                                 pointer=pointer)


def draft_for(schema: dict[str, Any]) -> type[jsonschema.protocols.Validator]:
    """The validator class of the schema's draft (2020-12 if `$schema` names none known).
    A `$schema` that is no string is left to the 2020-12 metaschema to refuse."""
    found: type[jsonschema.protocols.Validator] = jsonschema.Draft202012Validator
    if isinstance(schema.get("$schema", ""), str):
        found = jsonschema.validators.validator_for(schema, default=found)
    return found


def escape_pointer(token: str) -> str:
    """One reference token of a JSON Pointer (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _metaschema_problem(schema: dict[str, Any]) -> tuple[str, str] | None:
    """(pointer, message) of the most relevant metaschema error, or None."""
    cls = draft_for(schema)
    if _FAST.valid(cls, schema):
        return None
    meta = cls.META_SCHEMA
    checker = jsonschema.validators.validator_for(meta, default=cls)(
        meta, format_checker=cls.FORMAT_CHECKER)
    error = best_match(checker.iter_errors(schema))
    if error is None:
        return None
    pointer = "".join(f"/{escape_pointer(str(p))}" for p in error.absolute_path)
    message = error.message
    if len(message) > _MESSAGE_CHARS:
        message = message[:_MESSAGE_CHARS] + "..."
    return pointer, message


# The formats the drafts' metaschemas name (pattern: regex; $id, $ref: uri-reference;
# $schema: uri). The fast check asks Python's own checkers about them, never its own.
_META_FORMATS = ("regex", "uri", "uri-reference")


class _FastCheck:
    """Whether a schema is valid against its draft's metaschema, by jsonschema-rs: its
    structure in Rust, the metaschema's formats by the Python checkers jsonschema would use
    (where one is installed; else any string, as there). Only a "valid" is taken from it;
    an invalid schema, or any surprise here, goes to jsonschema for the verdict and the
    error's words. One validator per draft, built on first use (about 1 ms), offline."""

    def __init__(self) -> None:
        self._validators: dict[type[Any], Any] = {}
        self._lock = threading.Lock()

    def valid(self, cls: type[jsonschema.protocols.Validator], schema: dict[str, Any]
              ) -> bool:
        try:
            return bool(self._validator(cls).is_valid(schema))
        except Exception:  # noqa: BLE001 - e.g. an integer past 64 bits: jsonschema decides
            return False

    def _validator(self, cls: type[jsonschema.protocols.Validator]) -> Any:
        with self._lock:
            found = self._validators.get(cls)
            if found is None:
                checker = cls.FORMAT_CHECKER
                formats = {name: _conforms(checker, name) for name in _META_FORMATS}
                found = self._validators[cls] = jsonschema_rs.validator_for(
                    cls.META_SCHEMA, formats=formats, validate_formats=True, offline=True)
            return found


def _conforms(checker: jsonschema.FormatChecker, name: str) -> Any:
    if name not in checker.checkers:
        return lambda _value: True
    return lambda value: checker.conforms(value, name)


_FAST = _FastCheck()


class _ProblemCache:
    """Metaschema verdicts by the schema's digest: clients send the same tools with every
    request, and checking a large schema takes milliseconds. Keyed by 32 bytes, not by the
    schema's text, so a thousand large schemas do not stay in memory."""

    def __init__(self, max_entries: int) -> None:
        self._found: OrderedDict[bytes, tuple[str, str] | None] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    def get_or_find(self, schema: dict[str, Any]) -> tuple[str, str] | None:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            if digest in self._found:
                self._found.move_to_end(digest)
                return self._found[digest]
        problem = _metaschema_problem(schema)
        with self._lock:
            self._found[digest] = problem
            while len(self._found) > self._max:
                self._found.popitem(last=False)
        return problem


_PROBLEMS = _ProblemCache(max_entries=4096)


def _surrogate(where: str, pointer: str, what: str) -> InvalidSchemaError:
    return InvalidSchemaError(
        f"{where} holds {what} with a lone UTF-16 surrogate (\\ud800-\\udfff without its "
        "pair), which is not Unicode text", pointer=pointer,
        hint="Send the character it stands for, or remove it.")


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
