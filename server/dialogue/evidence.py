"""What a grounded value may be copied from, and what the conversation says of itself.

Evidence is what the user wrote, what tools returned and, unless the server is told
otherwise (`--no-ground-from-system`), the system and developer messages (a CRM profile, a
customer's cards); never the model's own turns. A tool result written as JSON
(`{"id":"AR-004217","status":"pending"}`) gives each of its values as a text of its own,
after its key ("id: AR-004217"), so an id inside compact JSON is a value like any other,
and its key says which field it is for.

The conversation's date, which relative dates are read against ("позавчера", "last
Friday"), is a date the system message states ("Today is 2026-12-02"), else the day the
request came. Its language, which questions are asked in, is the newest user message's that
tells one (server/dialogue/language.py).

What is read is bounded (`Bounds`), newest first: the readers (numbers, dates, languages)
cost per word, so a conversation of 10,000 messages, or one message of megabytes, costs no
more than the bounds allow. An older message past them, or the end of a long one, is not
evidence (a value there is asked for again, never invented)."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

from contracts import clock
from server.dialogue.language import conversation_language
from server.dialogue.number_words import in_digits
from server.dialogue.reading import Reader
from server.task import Turn

Source = Literal["user", "tool", "system"]
_STATED_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}\.\d{1,2}\.\d{4}\b"
    r"|\b\d{1,2}\.?\s+[^\W\d]{3,}\.?\s+\d{4}\b|\b[^\W\d]{3,}\.?\s+\d{1,2},?\s+\d{4}\b")


_WORD = re.compile(r"\S+")
# Words that say a date is the conversation's own ("today is", "current date:").
_TODAY = re.compile(r"(?i)\b(today|current date|date today|сегодня|текущая дата|heute|"
                    r"aujourd'hui|hoy|oggi|hoje)\b")


@dataclass(frozen=True)
class Bounds:
    """How much of a conversation grounding reads, newest message first (Settings'
    grounding_max_*)."""

    messages: int = 64
    chars: int = 24_000
    words: int = 3_000


@dataclass(frozen=True)
class Piece:
    text: str
    source: Source
    turn: int  # the turn's index in the conversation


@dataclass(frozen=True)
class Evidence:
    pieces: tuple[Piece, ...]
    today: dt.date  # the conversation's date
    language: str  # the user's, as of the newest message that tells it

    @cached_property
    def reader(self) -> Reader:
        return Reader(today=self.today, language=self.language)

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.pieces]

    def after(self, turn: int) -> Evidence:
        """The pieces of the turns after `turn`."""
        return replace(self, pieces=tuple(p for p in self.pieces if p.turn > turn))

    def user_after(self, turn: int) -> list[str]:
        return [p.text for p in self.pieces if p.turn > turn and p.source == "user"]


def evidence_of(turns: Sequence[Turn], *, from_system: bool = True,
                today: dt.date | None = None, bounds: Bounds = Bounds()) -> Evidence:
    """The evidence of a conversation. `today`: the request's date, where the system
    message states none."""
    read = _read(turns, bounds)
    users = [text for i, text in sorted(read.items(), reverse=True)
             if turns[i].role == "user"]
    language = conversation_language(users)
    pieces: list[Piece] = []
    for i, text in sorted(read.items()):
        role = turns[i].role
        if role == "user":
            pieces.append(Piece(text, "user", i))
            digits = in_digits(text, language)  # "пять дней" read as "5 дней" too
            if digits is not None:
                pieces.append(Piece(digits, "user", i))
        elif role == "tool":
            pieces += [Piece(text, "tool", i) for text in _result_texts(text)]
        elif role == "system" and from_system:
            pieces.append(Piece(text, "system", i))
    systems = [(i, text) for i, text in sorted(read.items()) if turns[i].role == "system"]
    stated = _stated_date(systems)
    if stated is not None:  # the conversation's date is context, no value of any field
        day, turn, (start, end) = stated
        pieces = [replace(p, text=p.text[:start] + " " * (end - start) + p.text[end:])
                  if p.turn == turn and p.source == "system" else p for p in pieces]
    return Evidence(tuple(pieces), stated[0] if stated else today or clock.today(), language)


def _read(turns: Sequence[Turn], bounds: Bounds) -> dict[int, str]:
    """The texts read (by turn index), newest first within `bounds`; a long one is cut
    between words. (The model's own turns are no evidence and cost nothing.)"""
    out: dict[int, str] = {}
    chars, words = bounds.chars, bounds.words
    for i in range(len(turns) - 1, -1, -1):
        if len(out) >= bounds.messages or chars <= 0 or words <= 0:
            break
        if not turns[i].text or turns[i].role not in ("user", "tool", "system"):
            continue
        text = _clipped(turns[i].text, chars, words)
        if text:
            out[i] = text
            chars -= len(text)
            words -= sum(1 for _ in _WORD.finditer(text))
    return out


def _clipped(text: str, chars: int, words: int) -> str:
    """`text`'s start, up to `chars` characters and `words` words, cut between words (a
    single word longer than that is no value: nothing is kept of it)."""
    if len(text) > chars:
        head = text[:chars + 1]
        cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        text = head[:cut] if cut > 0 else ""
    for n, word in enumerate(_WORD.finditer(text)):
        if n == words:
            return text[:word.start()]
    return text


def _result_texts(text: str) -> list[str]:
    """A tool result: its JSON values one by one (or a Python literal's, as agent code that
    returns `str(result)` writes it: `{'folder': 'documents'}`), or the text itself."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(stripped)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return [text]
        return list(dict.fromkeys(_leaves(value))) or [text]
    return [text]


def _leaves(value: Any, key: str | None = None) -> Iterator[str]:
    """Each scalar of a JSON value as a text, after its key where it has one ("original:
    OP-204518"): the key names the field a value is for, as words around it do."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _leaves(item, name if isinstance(name, str) else None)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, key)
    elif isinstance(value, str):
        if value.strip():
            yield f"{key}: {value}" if key else value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield f"{key}: {json.dumps(value)}" if key else json.dumps(value)


def _stated_date(texts: Sequence[tuple[int, str]]
                 ) -> tuple[dt.date, int, tuple[int, int]] | None:
    """The date the system messages give as today's ("Today is 2026-12-02", "Сегодня
    02.12.2026"), else the first full date (with its year) they state: the day, its
    message's turn, and its span there."""
    from server.dialogue.language import language_of

    dates: list[tuple[bool, int, int, tuple[int, int], dt.date]] = []
    for order, (turn, text) in enumerate(texts):
        for match in _STATED_DATE.finditer(text):
            span = match.group()
            try:
                day: dt.date | None = dt.date.fromisoformat(span)
            except ValueError:
                day = Reader(today=clock.today(), language=language_of(text) or "en").date(span)
            if day is not None:
                before = max(0, match.start() - 40)
                said = _TODAY.search(text, before, match.start())
                # "Today is" goes with the date: no field's value either.
                start = said.start() if said else match.start()
                dates.append((not said, order, turn, (start, match.end()), day))
    if not dates:
        return None
    _, _, turn, where, day = min(dates, key=lambda d: (d[0], d[1], d[3]))
    return day, turn, where
