"""Pins: a filled tool's grammar, narrowed to what the user's newest message lets each
filled field be (server/dialogue/slots.py keeps the slots; this reads the message).

A filled field is *pinned* (its node becomes exactly its value), so no decode can empty it
or change it unseen. It moves only where the newest message states another value *for it*:
- the message names the field near the value ("make it 5 nights" names `nights`), or the
  value can be no other filled field's (an amount is no card number): the node holds only
  the new values, because it is the user who changed it;
- the value could be several fields' and the message names none: the node offers the kept
  value and the new one (`loose`), and the model chooses; one value written into two fields
  is neither: the user is asked which they meant;
- the message names another field, or restates another field's value: nothing changes.
A plain string (free text) no message can be read as changing: it stays pinned where the
tool is irreversible."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from contracts import ContractRegistry
from grammars import Narrowing
from server.dialogue.evidence import Evidence
from server.dialogue.finding import Found, values_of
from server.dialogue.marks import Marked
from server.dialogue.naming import FieldWords, closest, field_words
from server.dialogue.values import normal, reversible, same, valid_value

Span = tuple[int, int, int]  # (piece, start, end)


class Pins:
    """One tool's pins for one request: `fresh` is what the user wrote since the last
    answer; `loose`, after `narrowings`, the fields whose new values the model chooses
    between (with the kept one)."""

    def __init__(self, registry: ContractRegistry, tool: str, schema: dict[str, Any],
                 fresh: Evidence, today: dt.date, marks: Sequence[Marked] = ()) -> None:
        self.schema, self.fresh, self.today, self.marks = schema, fresh, today, marks
        self.contract = registry.get(tool)
        self.loose: dict[str, list[Any]] = {}

    @cached_property
    def words(self) -> FieldWords:
        return field_words(self.schema, self.marks)

    def narrowings(self, values: dict[str, Any]) -> list[Narrowing]:
        """Each filled field of `values` (the tool's slots) pinned, or opened to the values
        the newest message gives it."""
        schema, contract, props = self.schema, self.contract, self.schema["properties"]
        filled = {f: v for f, v in values.items() if f in props and valid_value(schema, f, v)}
        stated = {f: self.stated(f, filled, named=True) for f in filled}
        owners: dict[Span, set[str]] = {}
        for field, found in stated.items():
            for f in found or ():
                owners.setdefault((f.piece, f.start, f.end), set()).add(field)
        # The fields not filled yet that can take a span: one the message names beside it
        # ("гостей будет двое") makes it no filled field's (the nights keep their 3).
        takers = {span: set(fields) for span, fields in owners.items()}
        for field in props:
            finder = None if field in filled else values_of(schema, contract, (field,),
                                                            self.fresh)
            for f in finder.found(self.fresh.pieces) if finder is not None else ():
                if valid_value(schema, field, f.value):
                    takers.setdefault((f.piece, f.start, f.end), set()).add(field)
        # Fields whose filled value the message says again: "карта не 4417, а 4471" corrects
        # the card, whose 4417 it restates, and no other field that could take 4471.
        restated = {field for field in filled if any(
            same(normal(contract, field, f.value, today=self.today), filled[field])
            for f in self.stated(field, filled, own=True) or ())}
        out = []
        for field, old in filled.items():
            found = stated[field]
            if found is None:  # free text: no message can say it changed
                if not reversible(contract, schema):
                    out.append(Narrowing((field,), (old,), nullable=False))
                continue
            allowed = self._allowed(field, old, found, owners, restated, takers)
            out.append(Narrowing((field,), tuple(allowed), nullable=False))
        return out

    def _allowed(self, field: str, old: Any, found: list[Found], owners: dict[Span, set[str]],
                 restated: set[str], takers: dict[Span, set[str]]) -> list[Any]:
        """`owners`: the filled fields that can take each span; `takers`: every field."""
        tied: list[Any] = []
        loose: list[Any] = []
        for f in found:
            span = (f.piece, f.start, f.end)
            named = {p[0] for p in closest(
                self.words.naming(self.fresh.pieces[f.piece].text, f.start, f.end),
                [(o,) for o in takers.get(span, owners[span])])}
            corrected = owners[span] & restated  # (a value beside a filled one said again)
            if named and field not in named:
                continue  # said of another field, filled or not
            if named == {field} or not named and (
                    owners[span] == {field} or corrected == {field} and f.value != old):
                tied.append(f.value)
            elif not named and not corrected:
                loose.append(f.value)
        if field in restated and any(v != old for v in tied):
            tied = [v for v in tied if v != old]  # "not 4417 but 4471": the old one is out
        if tied:
            return _unique(tied)
        if loose:
            self.loose[field] = _unique(loose)
            return _unique([old, *loose])
        return [old]

    def stated(self, field: str, filled: dict[str, Any], *, own: bool = False,
                named: bool = False) -> list[Found] | None:
        """The new values the user's newest message gives `field`, where it says them: not
        its filled value (unless `own`), nor another filled field's ("card 4417, I said"
        restates the card, it does not make 4417 the amount) unless its words name this
        field beside it («2 ночи» filled, then «нас будет двое»: 2 guests). None: a plain
        string."""
        contract = self.contract
        finder = values_of(self.schema, contract, (field,), self.fresh)
        if finder is None:
            return None
        others = [v for f, v in filled.items() if f != field]
        out = []
        for found in finder.found(self.fresh.pieces):
            value = normal(contract, field, found.value, today=self.today)
            if (own or not same(value, filled[field])) \
                    and (not any(same(value, o) for o in others)
                         or named and self._named(found) == {(field,)}) \
                    and valid_value(self.schema, field, found.value):
                out.append(found)
        return out

    def _named(self, found: Found) -> set[tuple[str, ...]]:
        """The fields the words nearest to `found` name it for."""
        named = self.words.naming(self.fresh.pieces[found.piece].text, found.start, found.end)
        return closest(named, named)


def _unique(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not any(same(value, o) and type(value) is type(o) for o in out):
            out.append(value)
    return out
