"""Which parts of a contract's arguments are redacted (`Redact` fields, however nested),
and a value with those parts replaced. Paths are JSON Pointers whose `*` stands for any
array index or object key: "/card_number", "/payer/iban", "/cards/*/pan"."""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from contracts.markers import Redact

REDACTED = "[redacted]"


def redacted_paths(model: type[BaseModel]) -> tuple[str, ...]:
    """The paths of `model`'s fields marked `Redact`, by the names the model writes."""
    return tuple(dict.fromkeys(_fields(model, "", frozenset())))


def _fields(model: type[BaseModel], prefix: str, seen: frozenset[type]) -> list[str]:
    if model in seen:  # a recursive model: its fields were walked higher up
        return []
    out: list[str] = []
    for name, info in model.model_fields.items():
        keys = dict.fromkeys([info.alias or name, name])  # the schema writes the alias
        for key in keys:
            path = f"{prefix}/{_escape(key)}"
            if any(isinstance(m, Redact) for m in info.metadata):
                out.append(path)
            else:
                out += _walk(info.annotation, path, seen | {model})
    return out


def _walk(annotation: Any, path: str, seen: frozenset[type]) -> list[str]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        if any(isinstance(m, Redact) for m in annotation.__metadata__):
            return [path]
        return _walk(args[0], path, seen)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _fields(annotation, path, seen)
    if origin in (typing.Union, types.UnionType):
        return [p for arg in args for p in _walk(arg, path, seen)]
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return _walk(args[1], f"{path}/*", seen) if len(args) == 2 else []
    if isinstance(origin, type) and issubclass(origin, (Sequence, set, frozenset)) \
            and not issubclass(origin, str):
        return [p for arg in args if arg is not Ellipsis for p in _walk(arg, f"{path}/*", seen)]
    return []


def redact(value: Any, paths: Sequence[str], *, at: str = "") -> Any:
    """`value`, found at pointer `at` of a call's arguments, with every part under a
    redacted path replaced by "[redacted]". A copy: `value` itself is left as it was."""
    if not paths:
        return value
    where = _parts(at)
    out = value
    copied = False
    for path in paths:
        want = _parts(path)
        if not all(w == "*" or w == a for w, a in zip(want, where, strict=False)):
            continue
        if len(where) >= len(want):
            return REDACTED  # `value` is a redacted field, or inside one
        if not copied:
            out, copied = copy.deepcopy(value), True
        out = _replace(out, want[len(where):])
    return out


def _replace(value: Any, rest: list[str]) -> Any:
    if not rest:
        return REDACTED
    head, tail = rest[0], rest[1:]
    if isinstance(value, dict):
        for key in list(value) if head == "*" else [k for k in value if _escape(k) == head]:
            value[key] = _replace(value[key], tail)
    elif isinstance(value, list):
        for index in range(len(value)):
            if head == "*" or head == str(index):
                value[index] = _replace(value[index], tail)
    return value


def _parts(pointer: str) -> list[str]:
    return pointer.split("/")[1:] if pointer else []


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
