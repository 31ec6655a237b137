"""Questions by meaning: a field is named by its description, else its title, else its
identifier read as words; never the raw identifier where the schema says what it is."""

from __future__ import annotations

from server.dialogue.grounding import Grounding
from server.dialogue.questions import readable
from server.dialogue.turn import wording_of

SCHEMA = {"type": "object", "required": ["checkInDate", "nights", "numGuests"], "properties": {
    "checkInDate": {"type": "string", "format": "date", "title": "Arrival day"},
    "nights": {"type": "integer", "description": "How many nights to stay (1 to 30)"},
    "numGuests": {"type": "integer"}}}


def test_a_question_names_the_field_by_its_description_or_title():
    wording = wording_of(Grounding(language="en"), SCHEMA)
    asked = [wording.missing((f,)).question for f in ("checkInDate", "nights", "numGuests")]
    assert asked == ["Please tell me: arrival day.", "Please tell me: how many nights to stay.",
                     "Please tell me: number of guests."]
    assert not any(raw in q for q in asked for raw in ("checkInDate", "numGuests"))
    russian = wording_of(Grounding(language="ru"), {**SCHEMA, "properties": {
        **SCHEMA["properties"], "nights": {"type": "integer", "title": "Количество ночей"}}})
    assert russian.missing(("nights",)).question == "Уточните, пожалуйста: количество ночей."


def test_an_identifier_reads_as_words():
    assert [readable(n) for n in ("check_in_date", "checkInDate", "numGuests", "order_id")] \
        == ["check in date", "check in date", "number of guests", "order ID"]
