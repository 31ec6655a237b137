"""Grounded candidates, found in the evidence as people write it: amounts and dates in
their many forms, ids inside compact JSON tool results, the system message (unless told
not to), nested and array-item fields, the contract's own validators run by pydantic; and
what is no value of a field ("30.11" is no card, "1" in "1 200,50" no amount)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from contracts import contract_of
from contracts.examples import BookHotel, BookTicket, CheckAccessRequestStatus, OpenDispute
from grammars import GROUNDED, narrowed_schema
from server.dialogue import Grounding, draft_lines, ground
from server.dialogue.evidence import evidence_of
from server.task import Turn

TODAY = dt.date(2026, 12, 2)
DISPUTE = contract_of(OpenDispute)


def _found(schema, contract, *turns: tuple[str, str], from_system=True) -> dict:
    evidence = evidence_of([Turn(role, text) for role, text in turns],
                           from_system=from_system, today=TODAY)
    return {"/".join(p): v for p, v in ground(schema, contract, evidence).candidates().items()}


def _dispute(*texts: str) -> dict:
    return _found(DISPUTE.schema(), DISPUTE, *(("user", t) for t in texts))


@pytest.mark.parametrize(("text", "field", "value"), [
    ("вчера с карты •• 4417 списали 1 200,50 ₽ дважды", "amount", "1200.50"),
    ("вчера с карты •• 4417 списали 1 200,50 ₽ дважды", "operation_date", "2026-12-01"),
    ("вчера с карты •• 4417 списали 1 200,50 ₽ дважды", "card_last4", "4417"),
    ("позавчера списали 2 450,00 ₽", "operation_date", "2026-11-30"),
    ("last Friday my card was charged $1,200.50", "operation_date", "2026-11-27"),
    ("last Friday my card was charged $1,200.50", "amount", "1200.50"),
    ("am 30.11 wurden €2.300,00 abgebucht", "operation_date", "2026-11-30"),
    ("am 30.11 wurden €2.300,00 abgebucht", "amount", "2300.00"),
    ("3 декабря списали 450", "operation_date", "2025-12-03"),  # not in the future
    ("сегодня с карты 5566 89,90 ₽ списали", "amount", "89.90"),  # no 556689.90
    ("The first one was OP-204518.", "original_operation_id", "OP-204518"),
])
def test_the_seeds_fields_ground_in_the_forms_people_write(text, field, value):
    assert value in _dispute(text)[field]


@pytest.mark.parametrize(("text", "field", "not_a_value"), [
    ("paid 1 200,50 ₽", "card_last4", "0050"),  # digits of an amount: no card
    ("paid 1 200,50 ₽", "amount", "1"),  # the longer run's number wins
    ("ref OP-204518 ok", "amount", "204518"),  # part of a longer word
    ("card 4417: 10 charged", "amount", "441710"),  # ":" parts two values
    ("on 30.11 I was charged", "card_last4", "3011"),  # a date is no card
])
def test_what_is_no_value_of_the_field(text, field, not_a_value):
    assert not_a_value not in _dispute(text)[field]


NUMBERS = {"type": "object", "properties": {
    "amount": {"type": ["number", "null"], "x-strictcall-grounded": True},
    "guests": {"type": "integer", "x-strictcall-grounded": True},
    "when": {"type": "string", "format": "date", "x-strictcall-grounded": True}}}


@pytest.mark.parametrize(("text", "amount"), [
    ("1 200,50 ₽", 1200.5), ("€2.300,00", 2300), ("$1,200.50", 1200.5), ("89,90 €", 89.9)])
def test_a_client_number_takes_an_amount_as_written(text, amount):
    found = _found(NUMBERS, None, ("user", f"I paid {text} yesterday, card 4417"))
    assert amount in found["amount"] and 1 not in found["amount"]


def test_a_client_date_field_reads_relative_dates():
    assert _found(NUMBERS, None, ("user", "позавчера, for 2 guests"))["when"] == \
        ("2026-11-30",)
    assert _found(NUMBERS, None, ("user", "we land at 7 am"))["guests"] == ()


def test_an_id_inside_compact_json_is_a_value():
    contract = contract_of(CheckAccessRequestStatus)
    found = _found(contract.schema(), contract, ("user", "is my request stuck?"),
                   ("tool", '{"id":"AR-004217","status":"pending","days":9}'))
    assert found["request_id"] == ("AR-004217",)


def test_the_system_message_is_evidence_unless_turned_off():
    profile = ("system", "Customer profile: cards •• 4417 (debit), •• 9921 (credit).")
    asked = ("user", "my debit card was charged twice yesterday")
    assert set(_found(DISPUTE.schema(), DISPUTE, profile, asked)["card_last4"]) == \
        {"4417", "9921"}
    assert _found(DISPUTE.schema(), DISPUTE, profile, asked,
                  from_system=False)["card_last4"] == ()


def test_the_system_message_states_the_conversations_date():
    evidence = evidence_of([Turn("system", "Today is 2026-11-20."), Turn("user", "вчера")])
    assert evidence.today == dt.date(2026, 11, 20)
    assert _found(DISPUTE.schema(), DISPUTE, ("system", "Сегодня 20.11.2026."),
                  ("user", "вчера списали"), from_system=False)["operation_date"] == \
        ("2026-11-19",)


def test_a_new_intent_looks_first_at_what_came_after_the_last_call():
    evidence = evidence_of([
        Turn("user", "card 4417 was charged 1 200,50 twice yesterday"),
        Turn("assistant", "", ()), Turn("user", "and 89,90 at the bookstore today too")],
        today=TODAY)
    found = ground(DISPUTE.schema(), DISPUTE, evidence, since=1).candidates()
    assert found[("amount",)] == ("89.90",)  # the newest words say it
    assert found[("card_last4",)] == ("4417",)  # "the same card": from before


def test_nested_and_array_item_fields_are_grounded():
    contract = contract_of(BookTicket)
    evidence = evidence_of([
        Turn("system", "Profile: Ivan Petrov, passport 4510 123456."),
        Turn("user", "Two tickets on the 752A for me and Anna Petrova, passport 4512 654321")],
        today=TODAY)
    grounding = ground(contract.schema(), contract, evidence)
    found = grounding.candidates()
    assert found[("train",)] == ("752A",)
    assert set(found[("passengers", "*", "passport")]) == {"4510 123456", "4512 654321"}
    names = next(f.candidates for f in grounding.fields if f.path[-1] == "full_name")
    assert set(names) == {"Anna Petrova", "Ivan Petrov"}  # ("Two", "Profile" open sentences)
    written = narrowed_schema(contract.schema(), [f.narrowing() for f in grounding.fields])
    item = written["properties"]["passengers"]["items"]
    assert item["properties"]["passport"]["anyOf"][0] == {
        "enum": list(found[("passengers", "*", "passport")])}
    assert "$ref" not in item and "Passenger" in written["$defs"]  # copied, not changed


FILES = {"type": "object", "properties": {
    "file_name": {"type": "string", GROUNDED: True},
    "folder": {"type": "string", GROUNDED: True, "description": "The folder to change to"}},
    "required": ["file_name"]}


def _plain(*turns: tuple[str, str]) -> dict[tuple[str, ...], tuple[Any, ...]]:
    evidence = evidence_of([Turn(role, text) for role, text in turns], today=TODAY)
    return ground(FILES, None, evidence).candidates()


def test_a_plain_string_takes_what_the_words_make_a_name_not_any_run_of_words():
    found = _plain(("user", "Yesterday I saved the report as 'Q3 summary.docx' in the "
                            "folder named archives, beside notes.txt; sort the file please"))
    assert set(found[("file_name",)]) == {"Q3 summary.docx", "archives", "notes.txt"}
    assert "file" not in found[("folder",)] and "please" not in found[("folder",)]
    assert _plain(("user", "Mind tallying up the words in the file for me?")) == {
        ("file_name",): (), ("folder",): ()}  # nothing names one: the model can only ask
    said = _plain(("user", "The file name is summary.txt"))
    assert said[("file_name",)] == ("summary.txt",)
    # The word after a quoted name is no name ("with the name 'x' nestled": BFCL).
    nestled = _plain(("user", "Find every file with the name 'test_document.txt' nestled "
                              "within the current directory."))
    assert nestled[("folder",)] == ("test_document.txt",)


def test_a_name_said_beside_another_tools_field_word_is_that_fields_not_this_ones():
    # BFCL's missing-parameter turns: "tag 'currenttechtrend'" gave a sort its file name,
    # "the 'ResearchDocs' directory" gave an echo its text.
    sort = {"type": "object", "properties": {"file_name": {"type": "string", GROUNDED: True}},
            "required": ["file_name"]}
    echo = {"type": "object", "properties": {
        "content": {"type": "string", GROUNDED: True, "description": "The content to write."},
        "file_name": {"type": "string", GROUNDED: True}}, "required": ["content"]}
    offered = frozenset({"file", "name", "tag", "content", "folder", "mention"})

    def found(schema, text, foreign=offered):
        evidence = evidence_of([Turn("user", text)], today=TODAY)
        return ground(schema, None, evidence, foreign=foreign).candidates()
    tweet = "Share the sorted result on social media; tag 'currenttechtrend' and mention me."
    assert found(sort, tweet)[("file_name",)] == ()
    assert found(sort, tweet, frozenset())[("file_name",)] == ("currenttechtrend",)
    tail = "Display the last lines of the 'report.csv' file in the 'ResearchDocs' directory."
    assert found(echo, tail)[("content",)] == ()  # a file's and a folder's names: no text
    assert found(echo, tail)[("file_name",)] == ("report.csv",)
    assert found(echo, "Write 'hello, world' to the file notes.txt.")[("content",)] == (
        "hello, world",)  # ("to" beside it: no other field's word)
    assert found(sort, "Sort the file 'report.txt', tag it later.")[("file_name",)] == (
        "report.txt",)  # (a field's own word beside it wins)


def test_a_field_spoken_of_without_saying_which_is_asked_even_if_a_name_was_said_before():
    found = _plain(("user", "Show me 'report.csv' please."),
                   ("tool", "{'current_directory_content': ['report.csv', 'log.txt']}"),
                   ("user", "How many words does one of my files contain?"))
    assert found[("file_name",)] == ()
    for newest in ("Move one of the files to temp.", "Sort it alphabetically, a file I made."):
        assert _plain(("user", "Show me 'report.csv' please."),
                      ("user", newest))[("file_name",)] == (), newest
    assert _plain(("user", "Make a copy of the file 'report.csv'."))[("file_name",)] == (
        "report.csv",)  # ("a copy of the file": that file)
    named = {**FILES, "properties": {"file_name": {
        "type": "string", GROUNDED: True, "description": "Имя файла"}}}
    evidence = evidence_of([Turn("user", "Открой «отчёт.pdf»."),
                            Turn("user", "Сколько слов в каком-нибудь файле?")], today=TODAY)
    assert ground(named, None, evidence).candidates() == {("file_name",): ()}
    hotel = contract_of(BookHotel)
    evidence = evidence_of([Turn("user", "Хочу в «Казань»."),
                            Turn("user", "Нет, лучше в каком-нибудь городе у моря.")],
                           today=TODAY)
    found = ground(hotel.schema(), hotel, evidence).candidates()
    assert found[("city",)] == ()  # («каком-нибудь городе»: which one is not said)


def test_a_tool_results_value_under_the_fields_key_and_a_short_reply_are_values():
    found = _plain(("tool", "{'folder': 'documents', 'size': 3}"),
                   ("user", "Move it there."))
    assert found[("folder",)] == ("documents",)  # (a Python literal, as str(result) is)
    assert _plain(("user", "Which one?"), ("user", "archives"))[("file_name",)] == (
        "archives",)

def test_drafts_are_the_candidates_as_a_call_writes_them():
    evidence = evidence_of([Turn("user", "вчера с карты •• 4417 списали 1 200,50 ₽")],
                           today=TODAY)
    lines = draft_lines({"open_dispute": ground(DISPUTE.schema(), DISPUTE, evidence)})
    assert '"amount":"1200.50"' in lines and '"amount": "1200.50"' in lines
    assert '"operation_date":"2026-12-01"' in lines
    assert not [line for line in lines if line.startswith('"original_operation_id"')]


def test_an_id_glued_to_a_key_is_a_value_and_one_inside_a_word_is_not():
    contract = contract_of(CheckAccessRequestStatus)
    found = _found(contract.schema(), contract,
                   ("user", "status? id=AR-004217; ref:AR-004218, not XAR-004219"))
    assert set(found["request_id"]) == {"AR-004217", "AR-004218"}


def test_a_value_said_of_another_field_is_not_this_ones():
    from contracts.examples import BookHotel

    named = {**FILES, "properties": {"file_name": {
        "type": "string", GROUNDED: True, "description": "Имя файла"}}}
    evidence = evidence_of([Turn("user", "Открой «отчёт.pdf»."),
                            Turn("user", "Сколько слов в каком-нибудь файле?")], today=TODAY)
    assert ground(named, None, evidence).candidates() == {("file_name",): ()}
    hotel = contract_of(BookHotel)
    found = _found(hotel.schema(), hotel,
                   ("user", "Забронируйте отель в Казани на 4 ночи для 2 гостей"))
    assert (found["nights"], found["guests"]) == ((4,), (2,))
    evidence = evidence_of([Turn("user", "5 nights, 2 guests")], today=TODAY)
    named = {f.path[-1]: f.named for f in ground(hotel.schema(), hotel, evidence).fields}
    assert named["nights"] and named["guests"]  # said of them: no null to choose


def test_a_new_intent_takes_nothing_a_tool_returned_for_the_last_one():
    evidence = evidence_of([
        Turn("user", "card 4417 was charged 1 200,50 twice yesterday"),
        Turn("tool", '{"original":"OP-204518"}'),
        Turn("assistant", "", ()), Turn("user", "one more: 89,90 today, same card")],
        today=TODAY)
    found = ground(DISPUTE.schema(), DISPUTE, evidence, since=2).candidates()
    assert found[("original_operation_id",)] == ()  # that dispute's, not this one's
    assert found[("card_last4",)] == ("4417",)  # what the user said still counts


def test_every_json_type_is_grounded():
    schema = {"type": "object", "properties": {
        "express": {"type": "boolean", "x-strictcall-grounded": True},
        "count": {"type": "integer", "x-strictcall-grounded": True},
        "price": {"type": ["number", "null"], "x-strictcall-grounded": True},
        "colour": {"type": "string", "enum": ["red", "dark_blue"],
                   "x-strictcall-grounded": True}}}
    found = _found(schema, None, ("user", "yes, 3 boxes in dark blue at 4,50 €"))
    assert found["express"] == (True,)
    assert found["count"] == (3,) and 4.5 in found["price"]
    assert found["colour"] == ("dark_blue",)


# Hostile conversations: what grounding reads is bounded (evidence.Bounds), newest first,
# and a client's pattern runs in RE2 (grammars/patterns.py).
CODE = {"type": "object", "properties": {"code": {
    "type": "string", "pattern": "^(a+)+$", "x-strictcall-grounded": True}}}


def test_a_backtracking_pattern_grounds_in_linear_time():
    from tests.grammars.test_patterns import finishes

    found = finishes(lambda: _found(CODE, None, ("user", "code " + "a" * 64 + "! or aaaa")))
    assert set(found["code"]) == {"aaaa", "a" * 64}  # ("!" is punctuation beside it)


def test_ten_thousand_messages_read_only_the_newest():
    from server.dialogue.evidence import Bounds

    turns = [Turn("user", f"card {1000 + i}") for i in range(10_000)]
    evidence = evidence_of(turns, today=TODAY, bounds=Bounds(messages=64))
    assert len(evidence.pieces) == 64
    assert evidence.pieces[-1].text == "card 10999" and evidence.pieces[-1].turn == 9_999
    assert evidence.pieces[0].turn == 10_000 - 64  # indices stay the conversation's


def test_a_long_message_is_cut_between_words_and_a_huge_word_is_no_value():
    from server.dialogue.evidence import Bounds

    bounds = Bounds(chars=40, words=5)
    evidence = evidence_of([Turn("user", "alpha beta gamma delta epsilon zeta eta")],
                           today=TODAY, bounds=bounds)
    assert evidence.texts == ["alpha beta gamma delta epsilon "]
    evidence = evidence_of([Turn("user", "amount 12 " + "7" * 2_000_000),
                            Turn("user", "card 4417")], today=TODAY, bounds=bounds)
    assert evidence.texts == ["amount 12", "card 4417"]  # newest first, within the chars
    digits = evidence_of([Turn("user", "9" * 10_000_000)], today=TODAY)
    assert digits.pieces == ()


@pytest.mark.parametrize(("text", "nights"), [
    ("Book the hotel in Oslo for three nights for two guests", 3),
    ("Забронируйте отель в Осло на пять ночей", 5),
    ("Hotel in Oslo für drei Nächte bitte", 3),
])
def test_numbers_written_as_words_ground(text, nights):
    found = _found(NIGHTS, None, ("user", text))
    assert nights in found["nights"]


NIGHTS = {"type": "object", "properties": {
    "nights": {"type": "integer", "minimum": 1, "maximum": 30,
               "x-strictcall-grounded": True}}}


def test_a_number_pointing_back_at_named_things_is_no_value():
    """ "Yes, those two" (the two operations a tool listed) is no amount, and the listed
    amount is the field's; «эти две операции» gives no 2 either, a count said still does."""
    found = _dispute_turns(
        ("user", "My card 4417 was charged twice yesterday, can you look?"),
        ("tool", "OP-300117 1200.50 coffee shop 09:12; OP-300118 1200.50 coffee shop 09:13"),
        ("user", "Yes, those two. The first is fine."))
    assert found["amount"] == ("1200.50",)
    assert 2 not in _found(NIGHTS, None, ("user", "эти две брони, на пять ночей"))["nights"]
    assert 5 in _found(NIGHTS, None, ("user", "эти две брони, на пять ночей"))["nights"]


def _dispute_turns(*turns: tuple[str, str]) -> dict:
    return _found(DISPUTE.schema(), DISPUTE, *turns)


def test_the_users_words_win_over_the_systems_date_and_profile():
    """The system message's "today" is the conversation's date, no value of a field; where
    the user gives a field a value, a value from context is no candidate beside it."""
    found = _found(DISPUTE.schema(), DISPUTE,
                   ("system", "Bank assistant. Today is 2026-12-02. Cards: 4417, 9921."),
                   ("user", "позавчера с карты 9921 списали 500 ₽, это не я"))
    assert found["operation_date"] == ("2026-11-30",)
    assert found["card_last4"] == ("9921",)
    # No date from the user: still not the system's "today".
    assert _found(DISPUTE.schema(), DISPUTE, ("system", "Today is 2026-12-02."),
                  ("user", "card 4417 was charged 500 twice"))["operation_date"] == ()


def test_two_values_of_a_writes_field_are_the_users_to_choose():
    from server.dialogue.questions import Wording
    from server.dialogue.turn import wording_of

    evidence = evidence_of([Turn("user", "on 29.11 or on 1.12, I am not sure: card 4417 was "
                                         "charged 500 ₽, dispute it")], today=TODAY)
    grounding = ground(DISPUTE.schema(), DISPUTE, evidence, ask_between=True)
    (date,) = [f for f in grounding.fields if f.path == ("operation_date",)]
    assert date.candidates == () and set(date.choices) == {"2026-11-29", "2026-12-01"}
    question = wording_of(grounding, DISPUTE.schema()).missing(("operation_date",))
    assert question.question == \
        "Which date of the operation: November 29, 2026 or December 1, 2026?"
    assert question.options == ("2026-11-29", "2026-12-01")  # in the order they were said
    russian = Wording("ru", choices={("d",): ("2026-11-29", "2026-12-01")},
                      descriptions={("d",): "Дата операции"})
    assert russian.missing(("d",)).question.replace("\u202f", " ") == \
        "Какое значение выбрать (дата операции): 29 ноября 2026 г. или 1 декабря 2026 г.?"
    # A read (or `strictcall.ambiguity: "model"`): the model may write either.
    assert set(ground(DISPUTE.schema(), DISPUTE, evidence).candidates()[
        ("operation_date",)]) == {"2026-11-29", "2026-12-01"}


def test_a_new_intent_leaves_the_earlier_ones_values_but_those_referred_back_to():
    """After a call, "one more" starts another event: the first dispute's operation id
    (said by the user) is no candidate of the second; "the same card" still finds the
    card. Without such words (a correction), the earlier values stay candidates."""
    turns = [Turn("user", "card 4417 was charged 1 200,50 twice, the first was OP-204518"),
             Turn("assistant", "", ())]
    def second(text: str) -> dict:
        evidence = evidence_of([*turns, Turn("user", text)], today=TODAY)
        return {p[-1]: v for p, v in
                ground(DISPUTE.schema(), DISPUTE, evidence, since=1).candidates().items()}
    new = second("one more, the same card: 89,90 on 30.11 that I never made")
    assert new["original_operation_id"] == () and new["card_last4"] == ("4417",)
    other = second("ещё одна операция: карта 5555, 89,90 30.11")
    assert other["card_last4"] == ("5555",) and other["original_operation_id"] == ()
    corrected = second("sorry, the amount was 1 300,00")
    assert corrected["original_operation_id"] == ("OP-204518",)
    assert corrected["card_last4"] == ("4417",)


def test_a_related_thing_without_saying_which_leaves_only_the_newest_messages_values():
    schema = {"type": "object", "properties": {"destination": {
        "type": "string", GROUNDED: True, "description": "The directory to copy the file to"}}}
    evidence = evidence_of([Turn("user", "Look in 'archive' first."),
                            Turn("user", "Copy it to a directory inside the 'Docs' folder.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("destination",): ("Docs",)}
    # "A folder" is a directory too (BFCL's cp: 'test' of an earlier search was copied to).
    evidence = evidence_of([Turn("user", "Find files with 'test' in their name."),
                            Turn("user", "Copy them safely into a folder right here.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("destination",): ()}
    russian = evidence_of([Turn("user", "Найди файлы с 'test' в имени."),
                           Turn("user", "Скопируй их в какую-нибудь папку.")], today=TODAY)
    assert ground(schema, None, russian).candidates() == {("destination",): ()}
    hotel = contract_of(BookHotel)  # ("City of the hotel": "a hotel in Paris" gives Paris)
    evidence = evidence_of([Turn("user", "A hotel in Paris for 2 nights, 2 guests")],
                           today=TODAY)
    assert ground(hotel.schema(), hotel, evidence).candidates()[("city",)] == ("Paris",)


def test_a_word_after_a_description_word_is_no_value_unless_it_looks_like_one():
    """BFCL's sort: "sort it alphabetically" gave the file "alphabetically" (after "sort", a
    word of the field's description, and "it"); a plain word there is no name."""
    schema = {"type": "object", "properties": {"file_name": {
        "type": "string", GROUNDED: True,
        "description": "The name of the file appeared at current directory to sort"}}}
    evidence = evidence_of([Turn("user", "Within a different file file, display the content "
                                         "and sort it alphabetically by line.")], today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("file_name",): ()}


def test_a_vague_count_is_no_count_whatever_numbers_came_before():
    """BFCL's tail: "the last several lines" gave the count 10 from a tool result's "Line
    10:"; several is no number, so the count is asked for (or the default left to it)."""
    schema = {"type": "object", "properties": {
        "lines": {"type": "integer", GROUNDED: True, "minimum": 1}}}
    said = "Display the last several lines of the file."
    evidence = evidence_of([Turn("tool", "Line 9: Overview Line 10: Final"),
                            Turn("user", said)], today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("lines",): ()}
    hotel = contract_of(BookHotel)
    evidence = evidence_of([Turn("user", "Отель в Казани на 3 ночи"),
                            Turn("user", "Нет, на несколько ночей больше.")], today=TODAY)
    assert ground(hotel.schema(), hotel, evidence).candidates()[("nights",)] == ()
    evidence = evidence_of([Turn("user", "Show the last 5 lines, several lines at most.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("lines",): (5,)}


def test_an_amount_before_a_comma_is_no_card_number():
    """«списали 89,90 ₽, это был не я»: the run "89,90 ₽," is the amount 89.90, never the
    card 8990 (the comma after it hid the number, and the card got a second candidate)."""
    found = _found(DISPUTE.schema(), DISPUTE,
                   ("user", "сегодня с карты 5566 списали 89,90 ₽, это был не я"))
    assert found["card_last4"] == ("5566",) and found["amount"] == ("89.90",)


def test_a_named_count_made_vague_leaves_not_given_in_the_grammar():
    """BFCL's tail: a tool result's "Line 10:" names a count of lines, then the user says
    "several lines": no value, so "not given" must stay in the grammar (it was left out,
    and the schema became an empty `anyOf`, a 400 blaming the client's tool)."""
    schema = {"type": "object", "properties": {
        "lines": {"type": "integer", GROUNDED: True, "minimum": 1}}, "required": ["lines"]}
    evidence = evidence_of([Turn("user", "Find the overview lines."), Turn("assistant", ""),
                            Turn("tool", "Line 9: Overview Line 10: Final"),
                            Turn("user", "Display the last several lines.")], today=TODAY)
    grounding = ground(schema, None, evidence, since=1)
    (field,) = grounding.fields
    assert field.candidates == () and not field.named
    written = narrowed_schema(schema, [field.narrowing()])
    assert written["properties"]["lines"] == {"type": "null"}


TAIL = {"type": "object", "required": ["file_name"], "properties": {
    "file_name": {"type": "string", GROUNDED: True, "description":
                  "The name of the file to display. You can only perform on file at local "
                  "directory."},
    "lines": {"type": "integer", GROUNDED: True,
              "description": "The number of lines to display from the end of the file."}}}


def test_a_count_asked_for_vaguely_is_a_question_even_where_it_is_optional():
    """BFCL's tail: "the last several lines" with `lines` optional; the model left it out
    and showed 10 lines nobody asked for. The user wants a count and gave none: the field is
    `wanted`, so its "not given" is a question (server/pipeline/checking/calls.py)."""
    evidence = evidence_of([Turn("user", "Investigate within 'log.txt' for 'Error'."),
                            Turn("user", "Finally, show the last several lines the file.")],
                           today=TODAY)
    grounding = ground(TAIL, None, evidence)
    assert grounding.wanted == (("lines",),)
    assert grounding.candidates()[("lines",)] == ()
    said = evidence_of([Turn("user", "Show the last 5 lines of 'log.txt'.")], today=TODAY)
    assert ground(TAIL, None, said).wanted == ()  # a count given
    plain = evidence_of([Turn("user", "Show the end of 'log.txt'.")], today=TODAY)
    assert ground(TAIL, None, plain).wanted == ()  # no count asked for: the default


def test_a_value_said_of_the_fields_thing_wins_over_one_said_of_another():
    """BFCL: "the 'report.csv' file in the 'ResearchDocs' directory" gave the file
    "ResearchDocs" (a tool result's "current_working_directory: ResearchDocs" matched the
    description's "directory"). A quoted name before the field's word is said of it; a key
    holding only the description's words is of a related thing, below what the user said."""
    evidence = evidence_of([
        Turn("tool", "current_working_directory: ResearchDocs"),
        Turn("user", "Extract the last 3 lines from the 'report.csv' file in the "
                     "'ResearchDocs' directory.")], today=TODAY)
    assert ground(TAIL, None, evidence).candidates()[("file_name",)] == ("report.csv",)
    # "one of the 'log.txt' files into a new directory 'archive'": log.txt is the file's.
    evidence = evidence_of([
        Turn("user", "Move one of the 'log.txt' files into a new directory 'archive'."),
        Turn("tool", "current_working_directory: archive"),
        Turn("user", "Show the last 3 lines of the file.")], today=TODAY)
    assert ground(TAIL, None, evidence).candidates()[("file_name",)] == ("log.txt",)
    # Where the user's words name nothing, the related key still gives its value.
    listed = evidence_of([Turn("tool", "current_directory_content: report.txt"),
                          Turn("user", "Show me the last 3 lines.")], today=TODAY)
    assert ground(TAIL, None, listed).candidates()[("file_name",)] == ("report.txt",)


def test_a_comma_after_the_fields_word_ends_what_names_it():
    """BFCL's find: "a specific word in its file name, ensuring comprehensive coverage" gave
    the name "ensuring" ("name" read as "is named")."""
    schema = {"type": "object", "properties": {"name": {
        "type": "string", GROUNDED: True, "description": "The name of the file to find."}}}
    evidence = evidence_of([Turn("user", "List every project that has a specific word in its "
                                         "file name, ensuring comprehensive coverage.")],
                           today=TODAY)
    assert "ensuring" not in ground(schema, None, evidence).candidates()[("name",)]


MOVE = {"type": "object", "properties": {
    "source": {"type": "string", GROUNDED: True, "description": "Name of the file to move"},
    "destination": {"type": "string", GROUNDED: True,
                    "description": "The directory to move the file to"}},
        "required": ["source", "destination"]}


def test_one_saying_of_a_value_fills_one_field_of_a_call():
    evidence = evidence_of([Turn("user", "Move one file to temp, then compare it with "
                                         "'previous_report.pdf'.")], today=TODAY)
    grounding = ground(MOVE, None, evidence)
    assert grounding.said["previous_report.pdf"] == 1
    twice = {"source": "previous_report.pdf", "destination": "previous_report.pdf"}
    assert grounding.repeated(twice) == (("destination",),)  # asked, not read twice
    assert grounding.repeated({"source": "previous_report.pdf", "destination": "temp"}) == ()
    evidence = evidence_of([Turn("user", "Copy 'a.txt' over 'a.txt' again, I know.")],
                           today=TODAY)
    said_twice = {"source": "a.txt", "destination": "a.txt"}
    assert ground(MOVE, None, evidence).repeated(said_twice) == ()


FIND = {"type": "object", "properties": {
    "path": {"type": "string", GROUNDED: True, "description": "The directory to search"},
    "name": {"type": "string", GROUNDED: True, "description": "The name to look for"}}}


def _find_grounding(*turns: Turn) -> Grounding:
    from server.dialogue.earlier import EarlierValues

    evidence = evidence_of(list(turns), today=TODAY)
    earlier = EarlierValues.of([(i, c.arguments) for i, t in enumerate(turns)
                                for c in t.calls], evidence)
    return ground(FIND, None, evidence, earlier=earlier)


def _find(*turns: Turn) -> dict:
    return _find_grounding(*turns).candidates()


def test_a_users_value_an_earlier_call_used_for_another_field_stays_that_fields():
    from server.task import EarlierCall

    made = (Turn("user", "Open academic_venture and make a folder; its name should be "
                         "academic_hub"),
            Turn("assistant", "", (EarlierCall("1", "mkdir", {"dir_name": "academic_hub"}),)),
            Turn("tool", "None"))
    found = _find(*made, Turn("user", "Within academic_venture, list every project that "
                                      "has a specific word in its name."))
    assert "academic_hub" not in found[("name",)]  # the folder's name, not the search's
    again = _find(*made, Turn("user", "Now find academic_hub there."))
    assert "academic_hub" in again[("name",)]  # said again: this field may take it
    same_key = (Turn("user", "Search for the name 'notes'"),
                Turn("assistant", "", (EarlierCall("1", "search", {"name": "notes"}),)),
                Turn("tool", "[]"), Turn("user", "Look in the archive too."))
    assert "notes" in _find(*same_key)[("name",)]  # used for a field of the same name
    one_turn = (Turn("user", "Make the folder 'temp' and find the file named temp there"),
                Turn("assistant", "", (EarlierCall("1", "mkdir", {"dir_name": "temp"}),)),
                Turn("tool", "None"))
    assert "temp" in _find(*one_turn)[("name",)]  # an agent loop's own turn


def test_a_saying_an_earlier_exchanges_call_used_is_not_this_requests():
    from server.task import EarlierCall

    grounding = _find_grounding(
        Turn("user", "Directly open the academic_venture folder"),
        Turn("assistant", "", (EarlierCall("1", "cd", {"folder": "academic_venture"}),)),
        Turn("tool", "None"),
        Turn("user", "Within academic_venture, list every project with a word in its name"))
    assert grounding.said["academic_venture"] == 1  # the first was the cd's
    assert grounding.repeated({"path": "academic_venture", "name": "academic_venture"}) == (
        ("name",),)


def test_a_message_opening_another_event_leaves_an_unfinished_ones_values_behind():
    """No call was made for the first dispute (the model asked, or failed): "и ещё одна:"
    still starts another one, whose operation id is not the first's; "the same card" is
    still found, and a message that only says «ещё» mid-sentence starts nothing."""
    first = Turn("user", "вчера с карты 4417 дважды списали 1 200,50 ₽, первая операция "
                         "OP-204518")
    def found(text: str) -> dict:
        evidence = evidence_of([first, Turn("assistant", "Уточните причину."),
                                Turn("user", text)], today=TODAY)
        return {p[-1]: v for p, v in ground(DISPUTE.schema(), DISPUTE, evidence)
                .candidates().items()}
    new = found("и ещё одна: сегодня с карты 5566 списали 89,90 ₽, это был не я")
    assert new["original_operation_id"] == () and new["card_last4"] == ("5566",)
    assert new["amount"] == ("89.90",)
    same_card = found("One more, the same card: 89,90 today")
    assert same_card["card_last4"] == ("4417",) and same_card["original_operation_id"] == ()
    answer = found("я ещё не получил товар")  # an answer to the question: nothing new
    assert answer["original_operation_id"] == ("OP-204518",)
    worded = found("и ещё одна: сегодня списали пять тысяч рублей с карты 5566")
    assert worded["original_operation_id"] == ()  # (its number-words copy says «ещё 1»)
    more = found("ещё один вопрос: сумма 89,90")  # more of the same request
    assert more["original_operation_id"] == ("OP-204518",)
    assert found("Another thing: the amount was 89,90")["original_operation_id"] == (
        "OP-204518",)


def test_a_key_names_a_plain_field_by_its_last_word():
    """A tool result's "file_content" is a file's text, no file name, and a text under a
    key only the description relates ("sorted_content") is none either; "customer_name" is
    a name."""
    found = _plain(("tool", "{'file_content': 'Initial report content Unsorted data'}"),
                   ("user", "Sort it please."))
    assert "Initial report content Unsorted data" not in found[("file_name",)]
    sorting = {"type": "object", "properties": {"file_name": {
        "type": "string", GROUNDED: True,
        "description": "The name of the file appeared at current directory to sort."}}}
    evidence = evidence_of([Turn("tool", '{"sorted_content": "Initial report content '
                                         'Unsorted data More unsorted data"}'),
                            Turn("tool", '{"current_directory_content": ["report.txt"]}'),
                            Turn("user", "Share the sorted result.")], today=TODAY)
    assert ground(sorting, None, evidence).candidates()[("file_name",)] == ("report.txt",)
    named = {"type": "object", "properties": {"name": {"type": "string", GROUNDED: True}}}
    evidence = evidence_of([Turn("tool", '{"customer_name": "Anna Petrova"}'),
                            Turn("user", "Book it for her.")], today=TODAY)
    assert ground(named, None, evidence).candidates()[("name",)] == ("Anna Petrova",)


def test_earlier_calls_are_read_newest_first_and_bounded():
    """A request whose earlier calls hold 20,000 values (hostile, or a long agent loop)
    keeps the newest MAX_VALUES of them, none longer than a plain value can be, and looks
    each up in the user's words once."""
    from server.dialogue.earlier import MAX_VALUES, EarlierValues
    from server.dialogue.plain import MAX_VALUE_CHARS

    many = {"long": "x" * (MAX_VALUE_CHARS + 1), **{f"k{i}": f"v{i}" for i in range(20_000)}}
    evidence = evidence_of([Turn("user", "v1 and v2"), Turn("user", "now 'a.txt'")],
                           today=TODAY)
    earlier = EarlierValues.of([(0, {"old": "first"}), (2, many)], evidence)
    assert len(earlier.used) == MAX_VALUES
    assert {turn for turn, _, _ in earlier.used} == {2}  # the newest call's, "first" not
    assert all(len(v) <= MAX_VALUE_CHARS for _, _, v in earlier.used)
    assert earlier.said_in["v1"] == (0,) and earlier.said_in["v9"] == ()


def test_one_value_the_users_words_give_a_required_field_is_given():
    """"Charged 1 200,50" names no amount, but it is the one amount the user gave, and the
    dispute needs one: no "not given" to choose (before, the model left it null 30 times of
    87 on the grounding bench, and the user was asked for the amount they had just said)."""
    def fields(*turns: Turn) -> dict:
        evidence = evidence_of(list(turns), today=TODAY)
        return {f.path[-1]: f for f in ground(DISPUTE.schema(), DISPUTE, evidence).fields}

    said = fields(Turn("user", "yesterday card 4417 was charged 1 200,50 twice"))
    assert said["amount"].candidates == ("1200.50",) and said["amount"].named
    assert said["operation_date"].named and said["card_last4"].named
    # Two amounts: the user's to choose, never forced. An optional field: not forced.
    two = fields(Turn("user", "card 4417 was charged 1 200,50 or maybe 1 300, twice"))
    assert not two["amount"].named
    assert not said["original_operation_id"].named
    # A value only a tool returned is context, not the user's answer: "not given" stays.
    tool = fields(Turn("user", "card 4417 was charged twice yesterday"),
                  Turn("tool", '{"total": "1200.50"}'))
    assert tool["amount"].candidates == ("1200.50",) and not tool["amount"].named


def test_a_tool_selection_left_out_still_says_whose_a_name_is():
    from contracts import ContractRegistry
    from server.dialogue.turn import DialogueTurn
    from server.task import Task, ToolDef
    sort = {"type": "object", "properties": {"file_name": {"type": "string", GROUNDED: True}},
            "required": ["file_name"]}
    post = ToolDef("post_tweet", "Post a tweet.", {"type": "object", "properties": {
        "content": {"type": "string"}, "tags": {"type": "array"}}})
    turns = (Turn("user", "Post the sorted lines and tag 'currenttechtrend'."),)
    for left_out, given in (((post,), ()), ((), ("currenttechtrend",))):
        task = Task(model="m", turns=turns, tools=(ToolDef("sort", None, sort),),
                    left_out=left_out)
        dialogue = DialogueTurn(task, evidence_of(turns, today=TODAY), ContractRegistry(), None)
        found = dialogue.tool("sort", sort, None, grounded=True).grounding.candidates()
        assert found[("file_name",)] == given, left_out
