"""A field's values in the conversation's evidence (server/dialogue/evidence.py), as
people write them, with where each was said.

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
A plain string (no pattern, format or enum) is not read here: server/dialogue/plain.py."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from contracts import Contract
from grammars import Match, PatternTimeout, validator_for
from server.dialogue.amounts import decimal_json, has_currency
from server.dialogue.evidence import Evidence, Piece
from server.dialogue.marks import Path, resolved
from server.dialogue.reading import Reader
from server.dialogue.shape import Shape, branches, plain_string
from server.dialogue.spans import Spans, claimed, spans, within

SPAN_WORDS = 4  # the longest run of words a value (not a plain string) is looked for in
MAX_CANDIDATES = 64  # per field: past this, the most recent are kept
_DECORATION_CATEGORIES = {"Zs", "Sc", "Cc"}
_DECORATION_MARKS = frozenset(",.'\u2019\u2022\u00b7_")

_TRAILING = " ,.;:!?\u2026"

ValueOf = Callable[[Any], tuple[bool, Any]]


@dataclass(frozen=True)
class Found:
    value: Any
    piece: int  # its index among the evidence's pieces
    start: int
    end: int
    named: bool = False  # the message names the field beside it
    money: bool = False  # written with a currency ("1500,00 руб", "$349.00")



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
        self.value_of: ValueOf = value_reader(schema, node, path, contract, evidence)
        # A field that takes an amount with cents: where some of its values were written
        # with a currency, the others are not amounts (an order's number, a phone's digits).
        self.amounts = not self.shape.integer and (self.shape.numbers or (
            self.shape.numeric_text and _same_number(Decimal("12.50"),
                                                     self.value_of("12.50")[1])))

    def values(self, pieces: Sequence[Piece]) -> list[Any]:
        """The distinct values, the most recent first."""
        return newest_values(self.found(pieces))

    def found(self, pieces: Sequence[Piece]) -> list[Found]:
        """Every value found, with its span, in order of the pieces."""
        out: list[Found] = []
        for piece in pieces:
            out += self._in(piece.text, self.index.get(piece, -1))
        if self.amounts and any(f.money for f in out):
            paid = {_key(f.value) for f in out if f.money}
            out = [f for f in out if _key(f.value) in paid]
        return out

    def _in(self, text: str, index: int) -> list[Found]:
        claims = Spans([] if self.shape.dates else self.reader.claims(text))
        ends = Spans(self.reader.range_ends(text) if self.shape.dates else [])
        found: list[Found] = []
        numbers: list[tuple[int, int, Decimal]] = []  # spans that read as numbers
        paid = Spans()  # those written with a currency
        for start, end in dict.fromkeys([*spans(text, SPAN_WORDS), *self._matches(text)]):
            if claims and claimed((start, end), claims) or ends and within((start, end), ends):
                continue
            # (Punctuation after a run is no part of its number: "89,90 ₽," is 89.90, and
            # its digits no card 8990.)
            number = self.reader.number(text[start:end].rstrip(_TRAILING))
            if number is not None:
                numbers.append((start, end, number))
            # (A sign between two numbers is the first one's: "120,00 € 2 veces" is no €2.)
            money = number is not None and has_currency(text[start:end]) and not any(
                s < start < e for s, e in paid.near(start, start))
            if money:
                paid.add((start, end))
            for value in self._readings(text[start:end], number):
                found.append(Found(value, index, start, end, money=money))
        if paid and not self.amounts:  # an amount's digits are no card, count or id
            found = [f for f in found if not within((f.start, f.end), paid)]
        return _outermost(found, numbers)

    def _matches(self, text: str) -> Iterator[tuple[int, int]]:
        """Where the field's own `pattern` matches inside a longer word ("id=AR-004217;"),
        but not in one whose other letters or digits belong to it ("204518" of
        "OP-204518" is no value)."""
        around: _Around | None = None
        for pattern in self.shape.patterns:
            for match in _within_budget(pattern.finditer(text)):
                start, end = match.span()
                around = around or _Around(text)
                if end > start and around.alone(start, end):
                    yield start, end

    def _readings(self, raw: str, number: Decimal | None) -> Iterator[Any]:
        """The field's values `raw` stands for, each way it may be read (`number`: the
        number it spells, if it spells one)."""
        seen: list[Any] = []
        ok, value = self.value_of(raw)
        if ok and not _cents_dropped(raw, value) and not _TWO_NUMBERS.search(raw) and (
                _only_decoration_removed(raw, value) or self.shape.dates
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
        yield from {_key(v): v for v in seen}.values()

    def _taken(self, readings: Sequence[Any]) -> list[Any]:
        out = []
        for reading in readings:
            ok, value = self.value_of(reading)
            if ok:
                out.append(value)
                break
        return out


class _Around:
    """What stands beside a match inside its word, answered in constant time (a word of
    20,000 digits has 5,000 matches of four; walking to each one's word ends was 9 s)."""

    def __init__(self, text: str) -> None:
        n = len(text)
        self.alnum = [0] * (n + 1)  # letters and digits before each position
        self.stop = [0] * (n + 1)  # where the run a match may follow starts: after the
        self.word_end = [n] * (n + 1)  # last space, "=" or ":" ("id=", "ref:" name it)
        for i, c in enumerate(text):
            self.alnum[i + 1] = self.alnum[i] + c.isalnum()
            self.stop[i + 1] = i + 1 if c.isspace() or c in "=:" else self.stop[i]
        for i in range(n - 1, -1, -1):
            self.word_end[i] = i if text[i].isspace() else self.word_end[i + 1]

    def alone(self, start: int, end: int) -> bool:
        """No letter or digit between the word's start (or its "=", ":") and `start`, nor
        between `end` and the word's end."""
        right = self.word_end[end]
        return self.alnum[start] == self.alnum[self.stop[start]] and \
            self.alnum[right] == self.alnum[end]



def value_reader(schema: dict[str, Any], node: dict[str, Any], path: Path,
              contract: Contract | None, evidence: Evidence) -> ValueOf:
    """A field's reading of a raw value: its contract's validators, or its client schema."""
    if contract is not None:
        context = {"today": evidence.today}
        return lambda raw: contract.fields.value(path, raw, context=context)
    return _schema_values(schema, node)



def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def newest_values(found: Sequence[Found]) -> list[Any]:
    """The distinct values, the most recent first."""
    out: dict[str, Any] = {}
    for one in reversed(found):
        out.setdefault(_key(one.value), one.value)
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



# Digits, a mark and a space, digits: two values ("card 5566, 42.50"), never one 556642.50.
_TWO_NUMBERS = re.compile(r"\d[.,;:][\s\u00a0\u202f]+[-+]?\d")
# A number written with one or two decimals ("75.00", "89,90 €"): an amount's cents.
_CENTS = re.compile(r"\d[.,](\d{1,2})[^\w]*$")


def _cents_dropped(raw: str, value: Any) -> bool:
    """Whether reading `raw` as `value` made its cents digits of a string: "75.00" is no
    card ending 7500 (the amount it is takes it)."""
    cents = _CENTS.search(raw.strip())
    return cents is not None and isinstance(value, str) and \
        re.search(rf"[.,]{cents.group(1)}\D*$", value) is None


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
