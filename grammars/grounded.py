"""Grounded fields in a schema: a property, at any depth (nested objects, array items), that
may only take values found for it in a conversation (found by the server), or null for
"not given": the node becomes exactly those values (an `enum`), or null. A value the
server fills in by itself (a session's slot) is the same narrowing without the null:
`Narrowing(path, values, nullable=False)`.

Narrowed properties become required, so the model always says which. A path is the JSON
keys from the root, `*` standing for any item of an array; a `$ref` on the way is copied in
place before it is narrowed, so other uses of the definition keep their schema."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grammars.keywords import KeywordUse

GROUNDED = "x-strictcall-grounded"
NOT_GIVEN: dict[str, Any] = {"type": "null"}
ITEM = "*"
_KEPT = ("minLength", "maxLength", "description")


@dataclass(frozen=True)
class Narrowing:
    path: tuple[str, ...]
    values: tuple[Any, ...] = ()  # the values it may take
    nullable: bool = True  # "not given" (null) allowed besides


def narrowed_schema(schema: dict[str, Any], narrowings: Iterable[Narrowing], *,
                    nullable: Sequence[tuple[str, ...]] = (),
                    required: Sequence[tuple[str, ...]] = ()) -> dict[str, Any]:
    """`schema` with each narrowing applied, each path in `nullable` widened by null, and
    each path in `required` made required (an array the user asked for: the model writes
    it, empty where nothing was given). The rest is unchanged (a fresh copy)."""
    out = copy.deepcopy(schema)
    for path in required:
        _at(out, path, lambda old: old, required=True)
    done: set[tuple[str, ...]] = set()
    for narrowing in narrowings:
        if narrowing.path[-1:] == (ITEM,):
            _at(out, narrowing.path[:-1], lambda old, n=narrowing: _items(old, n),
                required=None)
        else:
            _at(out, narrowing.path, lambda old, n=narrowing: _narrow(old, n))
        done.add(narrowing.path)
    for path in nullable:
        if path not in done:
            _at(out, path, lambda old: {"anyOf": [old, NOT_GIVEN]})
    return out


def optional_at(schema: dict[str, Any], paths: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """`schema` with each path's property no longer required in its object (a fresh copy):
    a field left "not given" is a question, not a schema error."""
    out = copy.deepcopy(schema)
    for path in paths:
        _at(out, path, lambda old: old, required=False)
    return out


def required_at(schema: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the property at `path` is required in its object."""
    found = [False]

    def seen(old: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
        found[0] = path[-1] in (parent.get("required") or ())
        return old
    _at(copy.deepcopy(schema), path, seen, required=None, with_parent=True)
    return found[0]


def _narrow(old: dict[str, Any], narrowing: Narrowing) -> dict[str, Any]:
    kept = {k: old[k] for k in _KEPT if k in old}
    branches: list[dict[str, Any]] = []
    if narrowing.values:
        branches.append({"enum": list(narrowing.values)})
    if narrowing.nullable:
        branches.append(NOT_GIVEN)
    described = {"description": kept["description"]} if "description" in kept else {}
    if len(branches) == 1:
        return {**described, **branches[0]}
    return {**described, "anyOf": branches}


def _items(old: dict[str, Any], narrowing: Narrowing) -> dict[str, Any]:
    """An array whose items are each one of the values; with none, it stays empty (an
    empty array is its "not given": no item is null)."""
    out = dict(old)
    if narrowing.values:
        kept = out.get("items")
        described = kept.get("description") if isinstance(kept, dict) else None
        out["items"] = {**({"description": described} if described else {}),
                        "enum": list(narrowing.values)}
    else:
        out["maxItems"] = 0
        out.pop("minItems", None)
    return out


def _at(root: dict[str, Any], path: tuple[str, ...], change: Any, *,
        required: bool | None = True, with_parent: bool = False) -> None:
    """Replace the node at `path` by `change(node)` (`change(node, its object)` with
    `with_parent`), and make it required in its object (`required=False`: not required;
    None: as it was)."""
    node = root
    for i, key in enumerate(path):
        node = _inlined(root, node)
        if key == ITEM:
            items = node.get("items")
            if not isinstance(items, dict):
                return
            node["items"] = _inlined(root, items)
            node = node["items"]
            continue
        props = node.get("properties")
        if not isinstance(props, dict) or not isinstance(props.get(key), dict):
            return
        if i == len(path) - 1:
            props[key] = change(props[key], node) if with_parent else change(props[key])
            if required is True:
                node["required"] = [n for n in props if n in {*node.get("required", ()), key}]
            elif required is False and key in (node.get("required") or ()):
                node["required"] = [n for n in node["required"] if n != key]
            return
        props[key] = _inlined(root, props[key])
        node = props[key]


def _inlined(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with a local `$ref` (or a nullable union around one) replaced, in place, by a
    copy of its target, so narrowing it leaves the definition as it is."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        section, _, name = ref[2:].partition("/")
        target = root.get(section, {}).get(name)
        if isinstance(target, dict):
            del node["$ref"]
            for key, value in copy.deepcopy(target).items():
                node.setdefault(key, value)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            values = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
            if len(values) == 1:
                return _inlined(root, values[0])
    return node


def grounding_uses(counts: Mapping[str, int], *, prefix: str = ""
                   ) -> tuple[KeywordUse, ...]:
    """The enforcement report's lines: each grounded property (by its schema pointer), and
    how many values it had to choose from."""
    return tuple(KeywordUse(f"{prefix}{pointer}", GROUNDED, "grammar",
                            f"{n} value(s) from the conversation, or not given")
                 for pointer, n in counts.items())


def schema_pointer(path: Sequence[str]) -> str:
    """The schema pointer of a value path: ("a", "*", "b") -> /properties/a/items/properties/b."""
    return "".join("/items" if p == ITEM else "/properties/" + p.replace("~", "~0")
                   .replace("/", "~1") for p in path)
