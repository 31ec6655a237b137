"""The fields of a tool's arguments that must come from someone, found in its JSON Schema at
any depth: a property marked `x-strictcall-grounded` (a contract's `Grounded()` writes the
same key), `x-strictcall-ask` (a question, a string or one per language), `x-strictcall-
confirm`, `x-strictcall-about` (what the field is, in words, per language); in nested
objects and in array items' objects too, through local `$ref`s and nullable unions.

A path is the JSON keys from the arguments' root, `*` standing for any item of an array:
`("passengers", "*", "name")`."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts import ABOUT_KEY, ASK_KEY, CONFIRM_KEY, GROUNDED_KEY, ITEM

MAX_DEPTH = 8
Path = tuple[str, ...]
_KEYS = (GROUNDED_KEY, ASK_KEY, CONFIRM_KEY, ABOUT_KEY)


@dataclass(frozen=True)
class Marked:
    path: Path
    node: dict[str, Any]  # the value's schema: $ref followed, its null branch taken off
    grounded: bool = False
    ask: Mapping[str, str] = field(default_factory=dict)  # language -> the question
    about: Mapping[str, str] = field(default_factory=dict)  # language -> what it is
    confirm: bool = False
    description: str | None = None

    @property
    def pointer(self) -> str:
        return pointer_of(self.path)

    @property
    def asks(self) -> bool:
        """Whether it may be "not given" (and then asked for)."""
        return self.grounded or bool(self.ask)


def pointer_of(path: Path) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def marked_fields(schema: dict[str, Any]) -> list[Marked]:
    """Every marked property of a tool's arguments `schema`, outermost first."""
    return list(_walk(schema, schema, (), 0))


def top_descriptions(schema: dict[str, Any]) -> dict[Path, str]:
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(props, dict)
    return {(n,): text for n, p in props.items() if isinstance(p, dict)
            and isinstance(text := p.get("description") or p.get("title"), str)}


def _walk(root: dict[str, Any], node: Any, path: Path, depth: int) -> Iterator[Marked]:
    if depth > MAX_DEPTH:
        return
    node = resolved(root, node)
    props = node.get("properties")
    if isinstance(props, dict):
        for name, sub in props.items():
            if not isinstance(sub, dict):
                continue
            here = (*path, name)
            marks = {k: sub[k] for k in _KEYS if k in sub}
            value = resolved(root, sub)
            if marks:
                yield _marked(here, value, marks, sub)
            yield from _walk(root, value, here, depth + 1)
    items = node.get("items")
    if isinstance(items, dict):
        marks = {k: items[k] for k in _KEYS if k in items}
        if marks and path:  # each item of an array of plain values ("mentions": names),
            # said in words by the array's description where the items have none
            around = {k: node[k] for k in ("description", "title") if k in node}
            yield _marked((*path, ITEM), resolved(root, items), marks, {**around, **items})
        yield from _walk(root, items, (*path, ITEM), depth + 1)


def _marked(path: Path, value: dict[str, Any], marks: dict[str, Any],
            declared: dict[str, Any]) -> Marked:
    description = next((d for d in (declared.get("description"), value.get("description"),
                                    declared.get("title"), value.get("title"))
                        if isinstance(d, str) and d.strip()), None)
    return Marked(path, value, marks.get(GROUNDED_KEY) is True, _texts(marks.get(ASK_KEY)),
                  _texts(marks.get(ABOUT_KEY)), marks.get(CONFIRM_KEY) is True,
                  description if isinstance(description, str) else None)


def _texts(value: Any) -> dict[str, str]:
    """A text, or one per language: {"en": ..., "ru": ...} (a plain string is English)."""
    if isinstance(value, str) and value.strip():
        return {"en": value}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items() if isinstance(v, str) and v.strip()}
    return {}


def resolved(root: dict[str, Any], node: Any) -> dict[str, Any]:
    """A schema node through a local `$ref` and a nullable `anyOf`/`oneOf`/type list (the
    value, not its null branch, is what is grounded)."""
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        section, _, name = ref[2:].partition("/")
        target = root.get(section, {}).get(name)
        merged = {**{k: v for k, v in node.items() if k != "$ref"},
                  **(target if isinstance(target, dict) else {})}
        return resolved(root, merged)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            values = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(values) == 1 and len(values) < len(branches):
                rest = {k: v for k, v in node.items() if k != key}
                return resolved(root, {**rest, **values[0]})
    kind = node.get("type")
    if isinstance(kind, list) and "null" in kind:
        kinds = [k for k in kind if k != "null"]
        return {**node, "type": kinds[0] if len(kinds) == 1 else kinds}
    return node


def takes_null(root: dict[str, Any], node: Any) -> bool:
    """Whether the schema at `node` takes null."""
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or isinstance(kind, list) and "null" in kind:
        return True
    branches = [b for k in ("anyOf", "oneOf") for b in node.get(k) or [] if isinstance(b, dict)]
    return any(takes_null(root, b) for b in branches)


def nulls_at(arguments: Any, paths: Iterable[Path]) -> tuple[Any, list[tuple[Path, str]]]:
    """`arguments` without the null values at `paths` (a fresh copy), and where they were:
    (the path, the concrete JSON Pointer, an array item's index filled in)."""
    out = copy.deepcopy(arguments)
    found: list[tuple[Path, str]] = []
    for path in paths:
        for container, key, pointer in _places(out, path, ""):
            if container.get(key, ...) is None:
                del container[key]
                found.append((path, pointer))
    return out, found


def _places(value: Any, path: Path, at: str) -> Iterator[tuple[dict[str, Any], str, str]]:
    if not path or not isinstance(value, (dict, list)):
        return
    key, rest = path[0], path[1:]
    if key == ITEM:
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from _places(item, rest, f"{at}/{i}")
        return
    if not isinstance(value, dict):
        return
    here = f"{at}/{key.replace('~', '~0').replace('/', '~1')}"
    if not rest:
        yield value, key, here
    elif key in value:
        yield from _places(value[key], rest, here)


def path_of(pointer: str) -> Path:
    """A concrete JSON Pointer's path, array indices as `*` ("/a/0/b" -> ("a", "*", "b"))."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    return tuple(ITEM if p.isdigit() else p for p in parts)
