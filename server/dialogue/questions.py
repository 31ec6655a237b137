"""A question instead of an invented value. When a call needs what nobody gave (a grounded
or asked field "not given", a rule that needs a value not in the conversation), a value a
person must confirm broke a rule, or a changed value waits for a yes, the answer is not a
call: it asks, by meaning and in the user's language, and says what was collected so far.

The words: a field's own question (`Ask`, per language), else the server's message catalog
for the user's language (Babel reads `locales/<lang>/LC_MESSAGES/strictcall.po`; English
where there is none) around what the field is: its `About` text in that language, else its
description; never the bare field name."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any, Literal

from server.dialogue.language import identifier_words, language_of
from server.dialogue.marks import Path, pointer_of

Kind = Literal["missing", "confirm", "choose"]
LOCALES = FilePath(__file__).parent / "locales"


@dataclass(frozen=True)
class Question:
    field: str  # the field's JSON Pointer
    question: str
    kind: Kind = "missing"
    value: Any = None  # what to confirm, or the value whose field to choose
    fields: tuple[str, ...] = ()  # "choose": the fields it may belong to
    options: tuple[Any, ...] = ()  # "missing": the values the user's words gave it


@dataclass(frozen=True)
class NeedsInput:
    tool: str
    questions: tuple[Question, ...]
    collected: dict[str, Any] = field(default_factory=dict)  # the valid values so far
    language: str = "en"

    def text(self) -> str:
        return "\n".join(dict.fromkeys(q.question for q in self.questions))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tool": self.tool,
            "missing": [{"field": q.field, "question": q.question,
                         **({"options": list(q.options)} if q.options else {})}
                        for q in self.questions if q.kind == "missing"],
            "collected": self.collected, "language": self.language}
        confirm = [{"field": q.field, "value": q.value, "question": q.question}
                   for q in self.questions if q.kind == "confirm"]
        if confirm:
            out["confirm"] = confirm
        choose = [{"value": q.value, "fields": list(q.fields), "question": q.question}
                  for q in self.questions if q.kind == "choose"]
        if choose:
            out["choose"] = choose
        return out


@dataclass(frozen=True)
class Wording:
    """What questions about one tool's fields say, in one language."""

    language: str = "en"
    asks: dict[Path, dict[str, str]] = field(default_factory=dict)  # Ask, per language
    abouts: dict[Path, dict[str, str]] = field(default_factory=dict)  # About, per language
    descriptions: dict[Path, str] = field(default_factory=dict)
    # A field the user's words gave more than one value: which one (grounding's choices).
    choices: dict[Path, tuple[Any, ...]] = field(default_factory=dict)

    def missing(self, path: Path, *, at: str | None = None) -> Question:
        """`at`: the pointer the question is about (an array item's index filled in). A
        field with choices is asked which of them ("Which date: 29 November or 1
        December?"), never given one by the model."""
        options = self.choices.get(path, ())
        if options:
            return Question(at or pointer_of(path), self._say(
                "Which {about}: {options}?", about=self.about(path),
                options=self._either([self._shown(v) for v in options])), options=options)
        asked = self.asks.get(path, {}).get(self.language) or (
            self.asks.get(path, {}).get("en") if self.language not in _catalogued() else None)
        if asked is None:
            asked = self._say("Please tell me: {about}.", about=self.about(path))
        return Question(at or pointer_of(path), asked)

    def meant(self, at: str, phrase: str) -> Question:
        """One thing the user means and has not said ("a specific word"): which, in their
        own words (`at`: the field it is for, where one is; else empty)."""
        return Question(at, self._say("Which {phrase} do you mean?", phrase=phrase))

    def _either(self, named: list[str]) -> str:
        out = named[0]
        for other in named[1:]:
            out = self._say("{first} or {second}", first=out, second=other)
        return out

    def _shown(self, value: Any) -> str:
        """A value as the user reads it: a date in words of the user's language ("29
        November 2026", "29 ноября 2026 г."), a number or text as it is."""
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            import datetime as dt

            from babel.core import UnknownLocaleError
            from babel.dates import format_date
            try:
                return format_date(dt.date.fromisoformat(value), format="long",
                                   locale=self.language)
            except (ValueError, UnknownLocaleError):
                return value
        return str(value)

    def confirm(self, path: Path, value: Any) -> Question:
        return Question(pointer_of(path), self._say(
            "Please confirm the {about}: {value} - is that right, or what should it be?",
            about=self.about(path), value=value), "confirm", value)

    def changed(self, path: Path, old: Any, new: Any) -> Question:
        """A filled value the user changed, on a tool whose call cannot be undone: both
        values, and the user decides (server/dialogue/slots.py reads the answer)."""
        return Question(pointer_of(path), self._say(
            "Earlier the {about} was {old}; now you said {new}. Should I use {new} instead "
            "of {old}? Please answer yes or no.", about=self.about(path), old=old, new=new),
            "confirm", new)

    def filed_again(self, values: dict[str, Any]) -> Question:
        """A call with the same values as one this session already filed: not filed again."""
        shown = ", ".join(f"{self.about((k,))}: {self._shown(v)}" for k, v in values.items())
        return Question("", self._say(
            "This was already filed with the same values ({values}); it was not sent again. "
            "If this is another one, what differs?", values=shown), "confirm")

    def done_before(self, values: dict[str, Any]) -> Question:
        """A call that repeats, unasked, one an earlier exchange made with the same values
        (server/dialogue/repeats.py): again, or with which other values."""
        shown = ", ".join(f"{self.about((k,))}: {self._shown(v)}" for k, v in values.items())
        return Question("", self._say(
            "This was already done with the same values ({values}). Should I do it again, "
            "or with which other values?", values=shown), "confirm")

    def choose(self, value: Any, paths: list[Path]) -> Question:
        """One new value that could be any of several fields: which one the user meant."""
        fields = self._either([self.about(p) for p in paths])
        return Question(pointer_of(paths[0]), self._say(
            "Which did you mean by {value}: {fields}?", value=value, fields=fields),
            "choose", value, tuple(pointer_of(p) for p in paths))

    def about(self, path: Path) -> str:
        """What the field is, in words: its About text in the user's language, else its
        description's first sentence up to a clause or an example (the field's name
        spelled as words where it has none, or where the description is in another
        language than the user's and the catalog has words for the name)."""
        own = self.abouts.get(path, {})
        if self.language in own:
            return own[self.language]
        description = self.descriptions.get(path)
        if not description or (own and language_of(description) not in (None, self.language)):
            description = own.get("en") or description
        if not description:
            return readable(path[-1], self.language)
        if self.language != "en" and language_of(description) not in (None, self.language):
            # An English description in a Russian question: the catalog's words for the
            # field where it has them ("folder": «папка»), so the sentence is the user's.
            local = readable(path[-1], self.language)
            if local != readable(path[-1]):
                return local
        first = re.split(r"[;(:]| e\.g\.|[.!?](?:\s|$)", description,
                         maxsplit=1)[0].strip().rstrip(".,")
        if not first:
            return readable(path[-1], self.language)
        # Mid-sentence, a description's first letter is lower-cased ("Number of nights":
        # "number of nights"), but not a German noun ("Anzahl der Nächte") or an acronym.
        head = first.split()[0]
        if "de" in (self.language, language_of(first)) or (len(head) > 1 and head.isupper()):
            return first
        return first[:1].lower() + first[1:]

    def _say(self, message: str, **values: Any) -> str:
        return _catalog(self.language).get(message, message).format(**values)


def readable(name: str, language: str = "en") -> str:
    """A field's identifier as words, where its schema says nothing of it: `check_in_date`,
    `checkInDate` and `check-in-date` read "check in date"; `numGuests` "number of guests".
    In another language, those words as its catalog gives them (msgctxt "field": «дата
    заезда», "Anreisedatum"); English words where it has none for them."""
    words = [_ABBREVIATIONS.get(w.lower(), w.lower()) for w in identifier_words(name)]
    english = " ".join(words) or name
    if language == "en":
        return english
    glossary = _field_words(language)
    return glossary.get(english) or glossary.get(english.casefold()) or english


_ABBREVIATIONS = {"num": "number of", "qty": "quantity", "amt": "amount", "dt": "date",
                  "id": "ID", "no": "number", "addr": "address", "tel": "phone"}


@functools.cache
def _catalogued() -> frozenset[str]:
    return frozenset(p.name for p in LOCALES.iterdir() if p.is_dir())


def _catalog(language: str) -> dict[str, str]:
    """msgid -> translation for `language` (empty: English, the msgids themselves)."""
    return _entries(language, None)


def _field_words(language: str) -> dict[str, str]:
    """A field's identifier words (English, as `readable` spells them) -> this language's
    words for the same field: the catalog's msgctxt "field" entries."""
    return _entries(language, "field")


@functools.cache
def _entries(language: str, context: str | None) -> dict[str, str]:
    """msgid -> translation of `language`'s catalog entries of one msgctxt (None: the
    messages); empty where the language has no catalog."""
    from babel.messages.pofile import read_po

    path = LOCALES / language / "LC_MESSAGES" / "strictcall.po"
    if not path.is_file():
        return {}
    with path.open("rb") as f:
        catalog = read_po(f, locale=language)
    return {str(m.id): str(m.string) for m in catalog
            if m.id and m.string and m.context == context}


def unique(questions: list[Question]) -> list[Question]:
    seen: dict[str, Question] = {}
    for q in questions:
        seen.setdefault(q.field, q)
    return list(seen.values())
