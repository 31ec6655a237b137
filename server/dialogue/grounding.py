"""Grounded fields: the values a field may take, found in the conversation's evidence
(server/dialogue/evidence.py) as people write them.

A field's candidates are runs of one to `SPAN_WORDS` words of the evidence, each read every
way its schema allows (server/dialogue/reading.py): as it is, as a number ("1 200,50 ₽"), as
a date ("позавчера"), as yes or no; each reading taken through the field's own validators
(a contract's, by pydantic itself: contracts/fields.py) or the client schema's node, and
kept where:
- the result is a value of the field;
- read as it is, normalizing only took decoration off the span (spaces, currency signs,
  `•`, marks that group digits): "•• 4417" gives "4417", but the last four digits of
  "1 200,50" are no card number, and "4417: 10" no amount;
- no longer run of words around it gave the field another value ("1" in "1 200,50 ₽");
- it is no part of a date or a time of day, unless the field takes dates ("30.11" is no
  card 3011; "7 am" gives no count of 7).
A plain string (no pattern, format or enum) takes only what the words around it make the
user's answer (server/dialogue/plain.py): a quoted name, "named X", report.pdf, "the folder
temp", never any run of the conversation's words.

A tool's fields look first at what came after its last call (a new intent starts from the
conversation, and its newest words: "the same card" still finds the card said before, but
not what a tool returned for the intent before)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from contracts import Contract
from grammars import (
    Match,
    Narrowing,
    PatternTimeout,
    schema_pointer,
    validator_for,
)
from server.dialogue.evidence import Evidence, Piece
from server.dialogue.language import identifier_words, words
from server.dialogue.marks import (
    Marked,
    Path,
    marked_fields,
    pointer_of,
    resolved,
    top_descriptions,
)
from server.dialogue.naming import NEW_INTENT, FieldWords, field_words
from server.dialogue.plain import Plain, plain_values
from server.dialogue.reading import Reader, decimal_json, spans, within
from server.dialogue.shape import Shape, branches, plain_string

SPAN_WORDS = 4  # the longest run of words a value (not a plain string) is looked for in
MAX_CANDIDATES = 64  # per field: past this, the most recent are kept
NAME_WORDS = 3  # a description this short is the field's name
_DECORATION_CATEGORIES = {"Zs", "Sc", "Cc"}
_DECORATION_MARKS = frozenset(",.'\u2019\u2022\u00b7_")

ValueOf = Callable[[Any], tuple[bool, Any]]


@dataclass(frozen=True)
class Found:
    value: Any
    piece: int  # its index among the evidence's pieces
    start: int
    end: int
    named: bool = False  # the message names the field beside it


@dataclass(frozen=True)
class GroundedField:
    path: Path
    candidates: tuple[Any, ...] = ()  # the JSON values the model may write (besides null)
    # The message says these values of this very field ("4 nights"): given, so "not
    # given" is no choice (null is not offered).
    named: bool = False
    # More than one value the user's words give this field, where the user decides
    # (`ground`'s `ask_between`): the model may write none of them (only "not given"), and
    # the question names them (server/dialogue/questions.py Wording.missing).
    choices: tuple[Any, ...] = ()

    def narrowing(self) -> Narrowing:
        return Narrowing(self.path, self.candidates, nullable=not self.named)

    def count(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class Grounding:
    """One tool's fields that must come from someone: grounded ones with their candidates,
    and every marked field (questions, confirmations, what each is in words)."""

    fields: tuple[GroundedField, ...] = ()
    marks: tuple[Marked, ...] = ()
    language: str = "en"
    descriptions: Mapping[Path, str] = field(default_factory=dict)

    @property
    def grounded(self) -> tuple[Path, ...]:
        return tuple(f.path for f in self.fields)

    @property
    def asked(self) -> tuple[Path, ...]:
        """Fields that may be "not given": grounded ones, and those with a question."""
        return tuple(dict.fromkeys([*self.grounded, *(m.path for m in self.marks if m.ask)]))

    @property
    def confirmed(self) -> tuple[Path, ...]:
        return tuple(m.path for m in self.marks if m.confirm)

    def mark(self, path: Path) -> Marked | None:
        return next((m for m in self.marks if m.path == path), None)

    def candidates(self) -> dict[Path, tuple[Any, ...]]:
        return {f.path: f.candidates for f in self.fields}

    def report(self) -> dict[str, int]:
        """Per grounded field (its schema pointer): how many values."""
        return {schema_pointer(f.path): f.count() for f in self.fields}

    def counts(self) -> dict[str, int]:
        """Per grounded field (its value's JSON Pointer, `*` for array items): how many
        values."""
        return {pointer_of(f.path): f.count() for f in self.fields}

    def __bool__(self) -> bool:
        return bool(self.fields or self.marks)


def draft_lines(groundings: Mapping[str, Grounding]) -> tuple[str, ...]:
    """Each grounded field's candidates written as a call writes them after the field's key
    (`"amount":1200.5`, and with a space after the colon), for prompt-lookup drafts
    (engines/drafts.py): a normalised value ("1 200,50" in the chat, 1200.5 in the call) is
    not in the prompt as the call writes it. A draft only stands where the model, under its
    mask, would have chosen the same tokens, so a wrong candidate costs a step, not a value."""
    lines = []
    for grounding in groundings.values():
        for grounded in grounding.fields:
            key = json.dumps(grounded.path[-1], ensure_ascii=False)
            for value in grounded.candidates:
                written = json.dumps(value, ensure_ascii=False)
                lines += [f"{key}:{written}", f"{key}: {written}"]
    return tuple(dict.fromkeys(lines))


def ground(schema: dict[str, Any], contract: Contract | None, evidence: Evidence, *,
           since: int = -1, ask_between: bool = False) -> Grounding:
    """The grounding of one tool's arguments `schema` (a contract's, or a client's).
    `since`: the turn of the tool's last call; what came after it is looked at first.

    Each value is attributed to where it was said (`_attributed`): the user's own words for
    a field win over what a tool returned or the operator's messages say. `ask_between` (a
    write, or a request's `strictcall.ambiguity: "ask"`): where more than one value
    remains, the user chooses (the field's `choices`), not the model."""
    marks = marked_fields(schema)
    if not marks:  # nothing marked: nothing to read
        return Grounding(language=evidence.language, descriptions=top_descriptions(schema))
    finders = {m.path: ValueFinder(schema, m.path, m.node, contract, evidence)
               for m in marks if m.grounded and not plain_string(m.node)}
    words = field_words(schema, marks)
    # Before the last call, only what the user and the system said: what a tool returned
    # then (the first dispute's operation ids) was that intent's, not this one's.
    everything = _owned(finders, [p for p in evidence.pieces
                                  if p.turn > since or p.source != "tool"], words)
    recent = _owned(finders, evidence.after(since).pieces, words) if since >= 0 \
        else everything
    # After a call, words that start another event ("one more", "ещё одна") leave the
    # earlier intent's values behind, but those of the fields referred back to ("the same
    # card"): a new dispute never carries the first one's operation id.
    fresh = " ".join(evidence.user_after(since)) if since >= 0 else ""
    starts_new = bool(NEW_INTENT.search(fresh))
    back = words.referred_back(fresh) if starts_new else set()
    fields = []
    # What another field's reading takes ("752A" is the train's) is no plain string's.
    others = {json.dumps(f.value) if not isinstance(f.value, str) else f.value
              for fs in everything.values() for f in fs}
    for marked in (m for m in marks if m.grounded):
        if marked.path not in finders:  # a plain string: what the words make an answer
            fields.append(_plain_field(
                schema, marked, contract, evidence, words, since=since, others=others,
                behind=starts_new and marked.path not in back, ask_between=ask_between))
            continue
        found = recent.get(marked.path) or (
            [] if starts_new and marked.path not in back else everything[marked.path])
        one = "*" not in marked.path  # (an array's items each take their own value)
        if one:
            found = _attributed(found, evidence.pieces, marked.path)
        # Named beside every value the newest turns give it: no "not given" to choose.
        named = bool(recent.get(marked.path)) and all(f.named for f in found)
        values = tuple(_newest_values(found))
        if ask_between and one and len(values) > 1:
            fields.append(GroundedField(marked.path, choices=values[::-1]))  # as said
        else:
            fields.append(GroundedField(marked.path, values, named=named))
    descriptions = {**top_descriptions(schema),
                    **{m.path: m.description for m in marks if m.description}}
    return Grounding(tuple(fields), tuple(marks), evidence.language, descriptions)


class ValueFinder:
    """The values a conversation's pieces give one field, with where each was said."""

    def __init__(self, schema: dict[str, Any], path: Path, node: dict[str, Any],
                 contract: Contract | None, evidence: Evidence) -> None:
        self.node = node
        self.path = path
        self.shape = Shape.of(node)
        self.reader: Reader = evidence.reader
        self.all = evidence.pieces
        # Each piece's index (the first, for equal ones), looked up in constant time.
        self.index = {p: i for i, p in reversed(list(enumerate(self.all)))}
        self.value_of: ValueOf = _value_of(schema, node, path, contract, evidence)

    def values(self, pieces: Sequence[Piece]) -> list[Any]:
        """The distinct values, the most recent first."""
        return _newest_values(self.found(pieces))

    def found(self, pieces: Sequence[Piece]) -> list[Found]:
        """Every value found, with its span, in order of the pieces."""
        out: list[Found] = []
        for piece in pieces:
            out += self._in(piece.text, self.index.get(piece, -1))
        return out

    def _in(self, text: str, index: int) -> list[Found]:
        claims = [] if self.shape.dates else self.reader.claims(text)
        found: list[Found] = []
        numbers: list[tuple[int, int, Decimal]] = []  # spans that read as numbers
        for start, end in dict.fromkeys([*spans(text, SPAN_WORDS), *self._matches(text)]):
            if claims and within((start, end), claims):
                continue
            number = self.reader.number(text[start:end])
            if number is not None:
                numbers.append((start, end, number))
            for value in self._readings(text[start:end], number):
                found.append(Found(value, index, start, end))
        return _outermost(found, numbers)

    def _matches(self, text: str) -> Iterator[tuple[int, int]]:
        """Where the field's own `pattern` matches inside a longer word ("id=AR-004217;"),
        but not in one whose other letters or digits belong to it ("204518" of
        "OP-204518" is no value)."""
        for pattern in self.shape.patterns:
            for match in _within_budget(pattern.finditer(text)):
                start, end = match.span()
                left, right = start, end
                while left > 0 and not text[left - 1].isspace():
                    left -= 1
                while right < len(text) and not text[right].isspace():
                    right += 1
                before = re.split(r"[=:]", text[left:start])[-1]  # "id=", "ref:" name it
                if end > start and not any(c.isalnum() for c in before + text[end:right]):
                    yield start, end

    def _readings(self, raw: str, number: Decimal | None) -> Iterator[Any]:
        """The field's values `raw` stands for, each way it may be read (`number`: the
        number it spells, if it spells one)."""
        seen: list[Any] = []
        ok, value = self.value_of(raw)
        if ok and (_only_decoration_removed(raw, value) or self.shape.dates
                   and _is_iso_date(value)) and (number is None or number % 1 == 0
                                                 or _same_number(number, value)):
            seen.append(value)  # (the digits of "89,90" are no card 8990: it is 89.90)
        if number is not None and self.shape.numeric_text:
            ok, value = self.value_of(str(number))  # a string of digits: the same number
            if ok and _same_number(number, value):
                seen.append(value)
        if number is not None and self.shape.numbers:
            seen += self._taken([n for n in [decimal_json(number, integer=self.shape.integer)]
                                 if n is not None])
        if self.shape.dates:
            seen += self._taken([day.isoformat() for day in self.reader.dates(raw)])
        if self.shape.booleans:
            answer = self.reader.boolean(raw)
            if answer is not None:
                seen += self._taken([answer])
        yield from {json.dumps(v, sort_keys=True): v for v in seen}.values()

    def _taken(self, readings: Sequence[Any]) -> list[Any]:
        out = []
        for reading in readings:
            ok, value = self.value_of(reading)
            if ok:
                out.append(value)
                break
        return out


def _plain_field(schema: dict[str, Any], marked: Marked, contract: Contract | None,
                 evidence: Evidence, words: FieldWords, *, since: int, behind: bool,
                 others: set[str], ask_between: bool) -> GroundedField:
    """A plain string's field: the values the user's words give it (plain.py), those said
    since the tool's last call first; an earlier intent's only where the user did not start
    a new one (`behind`), less what another field's reading takes (`others`). Two or more
    said of this very field, where the user decides (`ask_between`): the field's
    `choices`."""
    value_of = _value_of(schema, marked.node, marked.path, contract, evidence)

    def accepts(raw: str) -> bool:
        ok, value = value_of(raw)
        return ok and value == raw and raw not in others
    own = words.by_field.get(marked.path, frozenset())
    # What the field is called: its `About` texts, and a description short enough to be
    # its name ("Имя файла"; "City of the hotel" is a sentence: "a hotel" is no city).
    names = (*marked.about.values(), *(d for d in (marked.description,)
                                       if d and len(d.split()) <= NAME_WORDS))
    found = plain_values(evidence.after(since).pieces, marked.path[-1], own, names=names,
                         described=marked.description,
                         accepts=accepts) if since >= 0 else Plain()
    if not found.values() and not behind:
        found = plain_values([p for p in evidence.pieces if p.turn > since
                              or p.source != "tool"], marked.path[-1], own, names=names,
                             described=marked.description, accepts=accepts)
    one = "*" not in marked.path
    if ask_between and one and len(found.own) > 1:
        return GroundedField(marked.path, choices=found.own[::-1])
    return GroundedField(marked.path, found.values() if one else found.each())


def _value_of(schema: dict[str, Any], node: dict[str, Any], path: Path,
              contract: Contract | None, evidence: Evidence) -> ValueOf:
    """A field's reading of a raw value: its contract's validators, or its client schema."""
    if contract is not None:
        context = {"today": evidence.today}
        return lambda raw: contract.fields.value(path, raw, context=context)
    return _schema_values(schema, node)


def _owned(finders: Mapping[Path, ValueFinder], pieces: Sequence[Piece],
           words: FieldWords) -> dict[Path, list[Found]]:
    """Each field's values in `pieces`, less those the message says of another field that
    takes them ("for 2 guests": 2 is no number of nights; "card •• 4417" no amount)."""
    found = {path: finder.found(pieces) for path, finder in finders.items()}
    spans = {path: {(f.piece, f.start, f.end) for f in fs} for path, fs in found.items()}
    out: dict[Path, list[Found]] = {}
    for path, fs in found.items():
        kept = []
        for f in fs:
            span = (f.piece, f.start, f.end)
            named = words.naming(finders[path].all[f.piece].text, f.start, f.end) \
                if len(path) == 1 else set()
            owners = {o for o in named if o == path or span in spans.get(o, ())}
            if owners == {path}:
                kept.append(replace(f, named=True))
            elif not owners:
                kept.append(f)  # (said of two fields that take it: of neither, dropped)
        out[path] = kept
    return out


def _attributed(found: Sequence[Found], pieces: Sequence[Piece], path: Path) -> list[Found]:
    """The values a field may take, by where they were said: the user's own words, where
    they give the field any (a date the system message states, a card a CRM profile lists,
    an id a tool returned are context: the user's answer wins over them); else a tool
    result's values under a key that shares a word with the field's name (`"original":
    "OP-204518"` for `original_operation_id`, beside `"duplicate": "OP-204519"`)."""
    users = [f for f in found if 0 <= f.piece < len(pieces)
             and pieces[f.piece].source == "user"]
    if users:
        return users
    own = {s for w in identifier_words(path[-1]) for s in words(w)}
    keyed = [f for f in found if 0 <= f.piece < len(pieces)
             and pieces[f.piece].source == "tool" and own & _key_stems(pieces[f.piece].text)]
    return keyed or list(found)  # a tool result's value under a key naming the field


def _key_stems(text: str) -> set[str]:
    """The stems of a tool result's key ("original" of "original: OP-204518")."""
    key, sep, _ = text.partition(": ")
    if not sep or len(key) > 64:
        return set()
    return {s for w in identifier_words(key) for s in words(w)}


def _newest_values(found: Sequence[Found]) -> list[Any]:
    """The distinct values, the most recent first."""
    out: dict[str, Any] = {}
    for one in reversed(found):
        out.setdefault(json.dumps(one.value, sort_keys=True), one.value)
    return list(out.values())[:MAX_CANDIDATES]


def _within_budget(found: Iterator[Match]) -> Iterator[Match]:
    """The matches of a pattern RE2 cannot run, up to its search budget (grammars/patterns:
    past it, no more of them; the validator says so of an output)."""
    try:
        yield from found
    except PatternTimeout:
        return


def _inside_another(f: Found, found: list[Found],
                    numbers: list[tuple[int, int, Decimal]]) -> bool:
    """A value inside a longer run that gave the field another value, or that spells
    another number ("1" in "1 200,50": no count of one)."""
    def strictly(start: int, end: int) -> bool:
        return start <= f.start and f.end <= end and (start, end) != (f.start, f.end)
    return any(strictly(o.start, o.end) and o.value != f.value for o in found) or any(
        strictly(start, end) and not _same_number(number, f.value)
        for start, end, number in numbers)


def _outermost(found: list[Found], numbers: list[tuple[int, int, Decimal]]) -> list[Found]:
    """`found` less the values `_inside_another` finds inside another, in linear time: a
    run is short (`MAX_SPAN_CHARS` at most, a pattern's match aside), so only runs that
    start that close before a value can hold it."""
    reach = max([o.end - o.start for o in found] + [end - start for start, end, _ in numbers],
                default=0)
    by_start: dict[int, list[Found]] = {}
    numbers_at: dict[int, list[tuple[int, int, Decimal]]] = {}
    for one in found:
        by_start.setdefault(one.start, []).append(one)
    for number in numbers:
        numbers_at.setdefault(number[0], []).append(number)
    def near(f: Found) -> tuple[list[Found], list[tuple[int, int, Decimal]]]:
        starts = range(max(0, f.start - reach), f.start + 1)
        return ([o for s in starts for o in by_start.get(s, ())],
                [n for s in starts for n in numbers_at.get(s, ())])
    return [f for f in found if not _inside_another(f, *near(f))]


def _same_number(number: Decimal, value: Any) -> bool:
    try:
        return Decimal(str(value)) == number
    except ArithmeticError:
        return False


def _is_iso_date(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-"


def _only_decoration_removed(raw: str, value: Any) -> bool:
    return _core(raw) == _core(value if isinstance(value, str) else json.dumps(value))


def _core(text: str) -> str:
    return "".join(c for c in text.casefold() if not c.isspace() and c not in _DECORATION_MARKS
                   and unicodedata.category(c) not in _DECORATION_CATEGORIES)


def _schema_values(schema: dict[str, Any], node: dict[str, Any]) -> ValueOf:
    """A client schema's field: the reading itself where the field's schema takes it; a
    string the enum holds matches whatever its case and spacing."""
    check = validator_for({**node, **{k: schema[k] for k in ("$defs", "definitions")
                                      if k in schema}})
    enum = [v for b in branches(node) if isinstance(b.get("enum"), list) for v in b["enum"]]

    def value_of(raw: Any) -> tuple[bool, Any]:
        options = [raw]
        if isinstance(raw, str) and enum:
            key = _core(raw)
            options = [v for v in enum if isinstance(v, str) and _core(v) == key] or options
        for value in options:
            if check.is_valid(value):
                return True, value
        return False, None
    return value_of


def values_of(schema: dict[str, Any], contract: Contract | None, path: Path,
              evidence: Evidence) -> ValueFinder | None:
    """The finder of one field's values (None: no such field, or a plain string, which any
    words could be)."""
    node: dict[str, Any] = schema
    for key in path:
        props = resolved(schema, node).get("properties")
        if not isinstance(props, dict) or not isinstance(props.get(key), dict):
            return None
        node = props[key]
    value = resolved(schema, node)
    if plain_string(value):
        return None
    return ValueFinder(schema, path, value, contract, evidence)
