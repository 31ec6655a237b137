"""The dialogue layer's message catalogs (server/dialogue/locales/<lang>/LC_MESSAGES/
strictcall.po): every message the code asks with is in the English catalog, every other
catalog translates every one of them, a translation keeps exactly its message's
{placeholders} (a dropped one loses what the question is about; an added one is a KeyError
when the question is asked), and a German user is asked in the German catalog's words."""

from __future__ import annotations

import ast
import string
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from server.dialogue import questions
from server.dialogue.grounding import Grounding
from server.dialogue.questions import LOCALES, Wording
from server.dialogue.turn import wording_of

OTHERS = sorted(p.name for p in LOCALES.iterdir() if p.is_dir() and p.name != "en")


def messages(language: str) -> dict[str, str]:
    """msgid -> msgstr of a catalog, as Babel reads it (the header left out)."""
    path = LOCALES / language / "LC_MESSAGES" / "strictcall.po"
    with path.open("rb") as f:
        catalog = read_po(f, locale=language)
    return {str(m.id): str(m.string) for m in catalog if m.id and m.context is None}


def field_words(language: str) -> dict[str, str]:
    """The catalog's words for fields named only by their identifiers (msgctxt "field")."""
    path = LOCALES / language / "LC_MESSAGES" / "strictcall.po"
    with path.open("rb") as f:
        catalog = read_po(f, locale=language)
    return {str(m.id): str(m.string) for m in catalog if m.id and m.context == "field"}


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def said_in_code() -> set[str]:
    """The messages server/dialogue's code formats through the catalog: `_say("...")`."""
    said = set()
    for source in Path(questions.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "_say" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                said.add(node.args[0].value)
    return said


def test_german_and_russian_catalogs_are_there():
    assert {"de", "ru"} <= set(OTHERS)


def test_every_message_the_code_says_is_in_the_english_catalog():
    said = said_in_code()
    assert len(said) >= 7  # the walk found the calls
    assert said <= set(messages("en")), said - set(messages("en"))


@pytest.mark.parametrize("language", OTHERS)
def test_every_english_message_is_translated(language):
    english, translated = set(messages("en")), messages(language)
    assert english - set(translated) == set(), "messages the catalog lacks"
    assert [m for m in english if not translated[m].strip()] == [], "empty translations"
    assert set(translated) - english == set(), "messages English does not have"


@pytest.mark.parametrize("language", OTHERS)
def test_each_translation_keeps_exactly_its_messages_placeholders(language):
    for message, translation in messages(language).items():
        assert placeholders(translation) == placeholders(message), (message, translation)
        values = dict.fromkeys(placeholders(message), "X")
        translation.format(**values)  # no stray brace nor positional field


def test_a_german_user_is_asked_for_a_missing_field_in_german():
    schema = {"type": "object", "required": ["nights"], "properties": {
        "nights": {"type": "integer", "description": "How many nights to stay (1 to 30)"}}}
    wording = wording_of(Grounding(language="de"), schema)
    asked = wording.missing(("nights",)).question
    assert asked.startswith("Bitte nennen Sie mir: ")
    assert "Please tell me" not in asked
    english = wording_of(Grounding(language="en"), schema).missing(("nights",)).question
    assert english == "Please tell me: how many nights to stay."


def test_each_german_question_is_the_german_catalogs():
    nights, arrival = ("nights",), ("arrival",)
    wording = Wording("de", abouts={nights: {"de": "Anzahl der Nächte", "en": "nights"},
                                    arrival: {"de": "Anreisedatum"}},
                      choices={arrival: ("2026-11-29", "2026-12-01")})
    assert wording.missing(nights).question == "Bitte nennen Sie mir: Anzahl der Nächte."
    assert wording.missing(arrival).question == (
        "Welcher Wert (Anreisedatum): 29. November 2026 oder 1. Dezember 2026?")
    assert wording.confirm(nights, 3).question == (
        "Bitte bestätigen Sie: Anzahl der Nächte — 3. Stimmt das, oder was ist richtig?")
    assert wording.changed(nights, 3, 4).question == (
        "Vorhin war angegeben: Anzahl der Nächte — 3; jetzt haben Sie 4 gesagt. Soll ich 4 "
        "statt 3 verwenden? Bitte antworten Sie mit Ja oder Nein.")
    assert wording.choose(3, [nights, arrival]).question == (
        "Worauf bezieht sich 3: Anzahl der Nächte oder Anreisedatum?")
    assert wording.filed_again({"nights": 3}).question.startswith(
        "Das wurde mit denselben Werten bereits eingereicht (Anzahl der Nächte: 3)")


def test_an_english_only_ask_gives_way_to_the_german_catalog():
    """A field's own question only in English is not put to a German user: German has a
    catalog, so the catalog's German question is asked; a language without a catalog
    (French) gets the field's English question."""
    asks = {("x",): {"en": "Which room would you like?"}}
    abouts = {("x",): {"de": "Zimmer", "fr": "chambre"}}
    assert Wording("de", asks, abouts).missing(("x",)).question == \
        "Bitte nennen Sie mir: Zimmer."
    assert "fr" not in OTHERS
    assert Wording("fr", asks, abouts).missing(("x",)).question == "Which room would you like?"


def test_a_german_description_keeps_its_nouns_capitalised():
    """A field described only in German ("Anzahl der Nächte") is asked as written: German
    nouns are capitalised; an English description is lower-cased mid-sentence, an acronym
    is not."""
    nights, iban = ("nights",), ("iban",)
    german = Wording("de", descriptions={nights: "Anzahl der Nächte"})
    assert german.missing(nights).question == "Bitte nennen Sie mir: Anzahl der Nächte."
    english = Wording("en", descriptions={nights: "Number of nights",
                                          iban: "IBAN of the account"})
    assert english.missing(nights).question == "Please tell me: number of nights."
    assert english.missing(iban).question == "Please tell me: IBAN of the account."


@pytest.mark.parametrize("language", OTHERS)
def test_every_field_word_is_translated_and_read_from_identifiers(language):
    """Each catalog names the same fields (msgctxt "field"), each with words of its own, and
    an identifier `readable` spells as one of them is asked in those words."""
    words = field_words(language)
    assert len(words) >= 40 and set(words) == set(field_words(OTHERS[0]))
    assert [k for k, v in words.items() if not v.strip() or placeholders(v)] == []
    assert questions.readable("numGuests", language) == words["number of guests"]
    assert questions.readable("check_in_date", language) == words["check in date"]
    assert questions.readable("fooBar", language) == "foo bar"  # none: English words


def test_a_russian_user_is_asked_for_an_undescribed_field_in_russian():
    schema = {"type": "object", "required": ["numGuests", "checkInDate"], "properties": {
        "numGuests": {"type": "integer"}, "checkInDate": {"type": "string"}}}
    wording = wording_of(Grounding(language="ru"), schema)
    assert wording.missing(("numGuests",)).question == \
        "Уточните, пожалуйста: количество гостей."
    assert wording.missing(("checkInDate",)).question == "Уточните, пожалуйста: дата заезда."
    german = wording_of(Grounding(language="de"), schema).missing(("checkInDate",)).question
    assert german == "Bitte nennen Sie mir: Anreisedatum."
