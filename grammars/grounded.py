"""Grounded fields in a schema: a property, at any depth (nested objects, array items), that
may only take values found for it in a conversation (found by the server), or null for
"not given". Two kinds of narrowing:
- values: the node becomes exactly those values (an `enum`), or null;
- spans: a plain string becomes a string that is a run of words the conversation holds
  (`span_pattern`: a regular expression over the evidence, which every backend enforces as
  a JSON Schema `pattern`), its length bounds kept, or null.
A value the server fills in by itself (a session's slot) is the same narrowing without the
null: `Narrowing(path, values, nullable=False)`.

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
SPAN_WORDS = 10  # the longest run of words a grounded plain string takes
# A regex per word is linear in the evidence, and xgrammar's compile time is linear in the
# regex: only the newest texts up to this many characters are spans to copy from.
SPAN_CHARS = 2400
_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")
_KEPT = ("minLength", "maxLength", "description")


@dataclass(frozen=True)
class Narrowing:
    path: tuple[str, ...]
    values: tuple[Any, ...] = ()  # the values it may take
    spans: str | None = None  # or: a pattern of the spans it may copy (plain strings)
    nullable: bool = True  # "not given" (null) allowed besides


def narrowed_schema(schema: dict[str, Any], narrowings: Iterable[Narrowing], *,
                    nullable: Sequence[tuple[str, ...]] = ()) -> dict[str, Any]:
    """`schema` with each narrowing applied, and each path in `nullable` widened by null.
    The rest is unchanged (a fresh copy)."""
    out = copy.deepcopy(schema)
    done: set[tuple[str, ...]] = set()
    for narrowing in narrowings:
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
    if narrowing.spans is not None:  # (its length bounds are in the pattern: span_pattern)
        branches.append({"type": "string", "pattern": narrowing.spans})
    elif narrowing.values:
        branches.append({"enum": list(narrowing.values)})
    if narrowing.nullable:
        branches.append(NOT_GIVEN)
    described = {"description": kept["description"]} if "description" in kept else {}
    if len(branches) == 1:
        return {**described, **branches[0]}
    return {**described, "anyOf": branches}


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


def span_pattern(texts: Sequence[str], *, max_words: int = SPAN_WORDS,
                 max_chars: int = SPAN_CHARS, min_length: int = 1,
                 max_length: int | None = None) -> str | None:
    """A regular expression that matches exactly the runs of 1..`max_words` words of
    `texts` (words joined by one space; a run may leave off punctuation at its ends) that
    are `min_length`..`max_length` characters long, over the newest texts up to
    `max_chars` characters. None: no such run."""
    trie: dict[str, Any] = {}
    bounds = (max(min_length, 1), max_length)
    for words in _newest_words(texts, max_chars):
        for i in range(len(words)):
            _add_runs(trie, words, i, max_words, bounds)
    alternation = _alternation(trie)
    return "^(?:" + alternation + ")$" if alternation else None


def _newest_words(texts: Sequence[str], max_chars: int) -> list[list[str]]:
    out: list[list[str]] = []
    left = max_chars
    for text in reversed(texts):
        words = text.split()
        if not words or left <= 0:
            continue
        kept: list[str] = []
        for word in reversed(words):
            if left - len(word) - 1 < 0:
                break
            kept.append(word)
            left -= len(word) + 1
        out.append(list(reversed(kept)))
    return out


def _add_runs(trie: dict[str, Any], words: list[str], start: int, max_words: int,
              bounds: tuple[int, int | None]) -> None:
    """Add the runs starting at word `start`; a node's "" key marks a run that may end
    there (one within the length `bounds`)."""
    node, length = trie, 0
    low, high = bounds
    first = _trimmed_start(words[start])
    for j in range(start, min(start + max_words, len(words))):
        word = words[j] if j > start else first
        if not word:
            return
        space = " " if j > start else ""
        end = _trimmed_end(word)
        if end and end != word and low <= length + len(space + end) <= (high or 10**9):
            node.setdefault(space + end, {}).setdefault("", {})  # without its punctuation
        length += len(space + word)
        if high is not None and length > high:
            return
        node = node.setdefault(space + word, {})
        if length >= low:
            node.setdefault("", {})


def _trimmed_start(word: str) -> str:
    i = 0
    while i < len(word) and not word[i].isalnum() and word[i] not in "+-$€£₽¥#@":
        i += 1
    return word[i:]


def _trimmed_end(word: str) -> str:
    i = len(word)
    while i > 0 and not word[i - 1].isalnum() and word[i - 1] not in "$€£₽¥%":
        i -= 1
    return word[:i]


def _alternation(node: Mapping[str, Any]) -> str:
    branches = []
    for piece, child in node.items():
        if piece == "":
            continue
        rest = _alternation(child)
        if rest:
            branches.append(_escaped(piece) + f"(?:{rest})" + ("?" if "" in child else ""))
        elif "" in child:  # (a run too short to end here, with nothing after it: none)
            branches.append(_escaped(piece))
    return "|".join(branches)


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


def grounding_uses(counts: Mapping[str, int | str], *, prefix: str = ""
                   ) -> tuple[KeywordUse, ...]:
    """The enforcement report's lines: each grounded property (by its schema pointer), and
    how many values it had to choose from ("spans": a run of the conversation's words)."""
    return tuple(KeywordUse(f"{prefix}{pointer}", GROUNDED, "grammar",
                            "spans of the conversation's words, or not given"
                            if n == "spans" else
                            f"{n} value(s) from the conversation, or not given")
                 for pointer, n in counts.items())


def schema_pointer(path: Sequence[str]) -> str:
    """The schema pointer of a value path: ("a", "*", "b") -> /properties/a/items/properties/b."""
    return "".join("/items" if p == ITEM else "/properties/" + p.replace("~", "~0")
                   .replace("/", "~1") for p in path)
