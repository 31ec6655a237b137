"""Grounded fields: the values a field may take, found in the conversation (what the user
wrote and what tools returned; never the system prompt or the model's own turns).

A field is grounded by a contract's `Grounded()` marker or a client schema's
`"x-strictcall-grounded": true`. Its candidates are spans of those texts (runs of one to
four words, and the matches of its `pattern`), each taken through the field's own
normalizing (a contract's before-validators; a client schema's type), kept where:
- the result is a value of the field (its type, pattern, format, enum);
- normalizing only took decoration off the span (spaces, currency signs, `•`, marks that
  group digits or set off decimals) and changed no letter or digit: "•• 4417" gives "4417",
  but the last four digits of "1 200,50" are no card number, and "4417: 10" no amount;
- no longer span around it gave the field another value ("1" inside "1 200,50 ₽").
A plain string (no pattern, format or enum) takes any run of up to `TEXT_WORDS` words.
The grammar then holds exactly the candidates, or null for "not given" (grammars.grounded).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contracts import Contract
from grammars import validator_for
from server.task import Turn

SPAN_WORDS = 4  # the longest run of words a value is looked for in
TEXT_WORDS = 8  # the longest run of words a plain grounded string takes
MAX_CANDIDATES = 256  # per field: past this, the most recent spans are kept
GROUNDED_KEY = "x-strictcall-grounded"
ASK_KEY = "x-strictcall-ask"
# What normalizing may take off a span: spaces, currency signs, marks that group digits or
# set off decimals, bullets, and the underscore an enum writes for a space. Not ":", "-",
# "/" and the like: "4417: 10" is two values, not one.
_DECORATION_CATEGORIES = {"Zs", "Sc", "Cc"}
_DECORATION_MARKS = frozenset(",.'\u2019\u2022\u00b7_")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class GroundedField:
    name: str
    candidates: tuple[Any, ...]  # the JSON values the model may write (besides null)


@dataclass(frozen=True)
class Grounding:
    """One tool's fields that must come from someone: grounded ones with their candidates,
    the questions for missing ones, the fields repair may not change."""

    fields: tuple[GroundedField, ...] = ()
    questions: dict[str, str] = field(default_factory=dict)  # field -> question
    confirmed: tuple[str, ...] = ()
    descriptions: dict[str, str] = field(default_factory=dict)

    @property
    def grounded(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def asked(self) -> tuple[str, ...]:
        """Fields that may be "not given": grounded ones, and those with a question."""
        return tuple(dict.fromkeys([*self.grounded, *self.questions]))

    def candidates(self) -> dict[str, tuple[Any, ...]]:
        return {f.name: f.candidates for f in self.fields}

    def report(self) -> dict[str, int]:
        """Candidates per grounded field (what the enforcement report says)."""
        return {f.name: len(f.candidates) for f in self.fields}

    def __bool__(self) -> bool:
        return bool(self.fields or self.questions or self.confirmed)


def draft_lines(groundings: Mapping[str, Grounding]) -> tuple[str, ...]:
    """Each grounded field's candidates written as a call writes them after the field's key
    (`"amount":1200.5`, and with a space after the colon), for prompt-lookup drafts
    (engines/drafts.py): a normalised value ("1 200,50" in the chat, 1200.5 in the call) is
    not in the prompt as the call writes it. A draft only stands where the model, under its
    mask, would have chosen the same tokens, so a wrong candidate costs a step, not a value."""
    lines = []
    for grounding in groundings.values():
        for grounded in grounding.fields:
            key = json.dumps(grounded.name, ensure_ascii=False)
            for value in grounded.candidates:
                written = json.dumps(value, ensure_ascii=False)
                lines += [f"{key}:{written}", f"{key}: {written}"]
    return tuple(dict.fromkeys(lines))


def evidence(turns: Sequence[Turn]) -> list[str]:
    """The texts a grounded value may come from, oldest first."""
    return [t.text for t in turns if t.role in ("user", "tool") and t.text]


def ground(schema: dict[str, Any], contract: Contract | None,
           texts: Sequence[str]) -> Grounding:
    """The grounding of one tool's arguments `schema` (a contract's, or a client's)."""
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(props, dict)
    if contract is not None:
        rules = contract.rules
        names, questions, confirmed = rules.grounded, dict(rules.questions), rules.confirmed
    else:
        names = tuple(n for n, p in props.items()
                      if isinstance(p, dict) and p.get(GROUNDED_KEY) is True)
        questions = {n: p[ASK_KEY] for n, p in props.items()
                     if isinstance(p, dict) and isinstance(p.get(ASK_KEY), str)}
        confirmed = ()
    descriptions = {n: p["description"] for n, p in props.items()
                    if isinstance(p, dict) and isinstance(p.get("description"), str)}
    fields = []
    for name in names:
        if name not in props:
            continue
        node = _resolved(schema, props[name])
        value_of = _contract_values(contract, name) if contract is not None \
            else _schema_values(node)
        fields.append(GroundedField(name, tuple(_candidates(node, value_of, texts))))
    return Grounding(tuple(fields), questions, tuple(confirmed), descriptions)


def field_values(schema: dict[str, Any], contract: Contract | None, name: str,
                 texts: Sequence[str]) -> tuple[Any, ...] | None:
    """The values `texts` give field `name` of a tool's arguments `schema`, found as a
    grounded field's candidates are (whether it is grounded or not): what a new message
    says a filled slot should now be (server/pipeline/slotting.py). None for a plain
    string, which any words could be."""
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    assert isinstance(props, dict)
    if name not in props:
        return ()
    node = _resolved(schema, props[name])
    if _plain_string(node):
        return None
    value_of = _contract_values(contract, name) if contract is not None \
        else _schema_values(node)
    return tuple(_candidates(node, value_of, texts))


# -- candidates -------------------------------------------------------------------------

ValueOf = Callable[[str], tuple[bool, Any]]


def _candidates(node: dict[str, Any], value_of: ValueOf, texts: Sequence[str]) -> list[Any]:
    free = _plain_string(node)
    found: list[tuple[int, int, int, Any]] = []  # (text, start, end, value)
    for t, text in enumerate(texts):
        for start, end in _spans(text, node, free):
            raw = text[start:end]
            ok, value = value_of(raw)
            if ok and (free or _only_decoration_removed(raw, value)):
                found.append((t, start, end, value))
    kept = [f for f in found if not any(
        o[0] == f[0] and o[1] <= f[1] and f[2] <= o[2] and (o[1], o[2]) != (f[1], f[2])
        and o[3] != f[3] for o in found)] if not free else found
    values: dict[str, Any] = {}
    for _, _, _, value in reversed(kept):  # the most recent first, when there are too many
        values.setdefault(repr(value), value)
    return list(values.values())[:MAX_CANDIDATES]


def _spans(text: str, node: dict[str, Any], free: bool) -> Iterator[tuple[int, int]]:
    words = [m.span() for m in _WORD.finditer(text)]
    longest = TEXT_WORDS if free else SPAN_WORDS
    for i in range(len(words)):
        for j in range(i, min(i + longest, len(words))):
            start, end = words[i][0], words[j][1]
            yield start, end
            trimmed = _trim(text, start, end)
            if trimmed != (start, end) and trimmed[0] < trimmed[1]:
                yield trimmed
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            found = list(re.finditer(pattern.removeprefix("^").removesuffix("$"), text))
        except re.error:
            found = []
        yield from (m.span() for m in found if m.end() > m.start()
                    and not _inside_a_word(text, m.start(), m.end()))


def _inside_a_word(text: str, start: int, end: int) -> bool:
    """A match that is part of a longer word ("204518" of "OP-204518") is no value: the
    rest of its word may hold punctuation, no letter or digit."""
    left = start
    while left > 0 and not text[left - 1].isspace():
        left -= 1
    right = end
    while right < len(text) and not text[right].isspace():
        right += 1
    return any(c.isalnum() for c in text[left:start] + text[end:right])


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without punctuation at its edges ("yesterday," -> "yesterday")."""
    while start < end and unicodedata.category(text[start])[0] in "PS":
        start += 1
    while end > start and unicodedata.category(text[end - 1])[0] in "PS":
        end -= 1
    return start, end


def _only_decoration_removed(raw: str, value: Any) -> bool:
    return _core(raw) == _core(value if isinstance(value, str) else str(value))


def _core(text: str) -> str:
    return "".join(c for c in text.casefold() if not c.isspace() and c not in _DECORATION_MARKS
                   and unicodedata.category(c) not in _DECORATION_CATEGORIES)


def _plain_string(node: dict[str, Any]) -> bool:
    return node.get("type") == "string" and not any(
        k in node for k in ("pattern", "format", "enum", "const"))


def _contract_values(contract: Contract, name: str) -> ValueOf:
    return lambda raw: contract.fields.value_of(name, raw)


def _schema_values(node: dict[str, Any]) -> ValueOf:
    """A client schema's field: the span itself (or the number it spells) where the
    field's schema takes it; enum values match whatever their case."""
    check = validator_for(node)
    enum = node.get("enum") if isinstance(node.get("enum"), list) else None

    def value_of(raw: str) -> tuple[bool, Any]:
        options: list[Any] = [raw]
        if enum is not None:
            options = [v for v in enum if isinstance(v, str) and v.casefold() == raw.casefold()]
        elif node.get("type") in ("integer", "number"):
            options = [_number(raw)]
        for value in options:
            if value is not None and check.is_valid(value):
                return True, value
        return False, None
    return value_of


def _number(raw: str) -> int | float | None:
    try:
        return int(raw)
    except ValueError:
        try:
            return float(raw.replace(",", "."))
        except ValueError:
            return None


def _resolved(schema: dict[str, Any], node: Any) -> dict[str, Any]:
    """A property's schema, through a local `$ref` and a nullable `anyOf` (the value, not
    its null branch, is what is grounded)."""
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        return _resolved(schema, target)
    branches = node.get("anyOf")
    if isinstance(branches, list):
        values = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(values) == 1:
            return {**{k: v for k, v in node.items() if k != "anyOf"},
                    **_resolved(schema, values[0])}
    return node
