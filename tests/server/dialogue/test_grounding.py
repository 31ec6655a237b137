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
from server.dialogue import draft_lines, ground
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


def _dispute_turns(*turns: tuple[str, str]) -> dict:
    return _found(DISPUTE.schema(), DISPUTE, *turns)


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
    # Of a quantified thing, "is" says what it is like, not its name (BFCL base multi-turn).
    ticket = "If the character count of any file is greater than 20, set the priority to 3."
    assert "greater" not in _plain(("user", ticket))[("file_name",)]
    assert _plain(("user", "Each file is notes.txt or a copy"))[("file_name",)] == (
        "notes.txt",)  # (a word shaped like a name still is one)
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
    ("Ein Hotel in Oslo für zwei Nächte bitte", 2),  # (text2num's default skips "zwei")
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


@pytest.mark.parametrize(("text", "card", "amount"), [
    # 75.00 is the amount's one value: the card's is 6120, never the digits 7500
    ("On 1 December I was charged 75.00 on card 6120", "6120", "75.00"),
    # 4021 is the card's one value (named by nothing): the amount's is 1250.00
    ("Ayer me cobraron 1.250,00 € en la tarjeta que termina en 4021", "4021", "1250.00"),
    # «две тысячи рублей» is the amount's one value: the card's is 7731
    ("Три дня назад с карты, последние цифры 7731, сняли две тысячи рублей", "7731", "2000"),
])
def test_a_value_one_field_alone_can_take_is_left_to_it(text, card, amount):
    found = _dispute(text)
    assert (found["card_last4"], found["amount"]) == ((card,), (amount,))


def test_an_amounts_cents_are_never_digits_of_a_string():
    assert "7500" not in _dispute("I was charged 75.00")["card_last4"]
    assert "8990" not in _dispute("списали 89,90 ₽")["card_last4"]
    assert "4417" in _dispute("card 4417")["card_last4"]  # (no cents: still a card)


def test_the_nearest_fields_word_names_a_number_and_collective_numerals_count():
    hotel = contract_of(BookHotel)
    # "guest" is three words off the 2 and "one" no digits: 2 is the nights' alone
    found = _found(hotel.schema(), hotel, ("user", "Rome for 2 nights for one guest"))
    assert found["nights"] == (2,)
    # "four of us" names no field, but the guests take only it: the nights keep their 3
    found = _found(hotel.schema(), hotel,
                   ("user", "A hotel in Porto for three nights? There are four of us."))
    assert (found["nights"], found["guests"]) == ((3,), (4,))
    found = _found(hotel.schema(), hotel, ("user", "Сочи, на пять ночей, нас двое"))
    assert (found["nights"], found["guests"]) == ((5,), (2,))


def test_a_check_in_without_a_year_is_the_next_such_day():
    """Said on 2 December, "14.01" is next January's (a check-in in the past breaks the
    contract, and of a date's readings the first the field takes is the value)."""
    hotel = contract_of(BookHotel)
    found = _found(hotel.schema(), hotel, ("user", "Rome, 2 nights from 14.01, 2 guests"))
    assert found["check_in"] == ("2027-01-14",)
    found = _found(hotel.schema(), hotel, ("user", "Rome, 2 nights from 20.12, 2 guests"))
    assert found["check_in"] == ("2026-12-20",)


def test_two_numbers_a_comma_apart_are_two_values_and_an_amount_is_no_date():
    found = _dispute("Card 5566, 42.50 yesterday, I did not make it")
    assert (found["card_last4"], found["amount"]) == (("5566",), ("42.50",))
    found = _dispute("card 3308, from the 3rd of December", "It was 15.99")
    assert found["amount"] == ("15.99",) and "1999-12-15" not in found["operation_date"]


def test_a_value_taken_back_is_none_and_its_replacement_takes_its_field():
    from server.dialogue.naming import FieldWords, replaced

    said = "Простите, карта не 4417, а 4471"
    assert [said[a:b] for a, b in replaced(said)] == ["4417"]
    words = FieldWords.of({("card",): ["card", "карта"], ("amount",): ["amount", "сумма"]})
    at = said.index("4471")
    assert set(words.naming(said, at, at + 4)) == {("card",)}
    found = _dispute(said)
    assert found["card_last4"] == ("4471",) and "4471" not in found["amount"]
    assert _dispute("the card is not 5566 but 5576")["card_last4"] == ("5576",)
    # The thing counted after the value taken back names the field of its replacement.
    corrected = "ой, не 3 ночи, а 4"
    assert [corrected[a:b] for a, b in replaced(corrected)] == ["3"]
    nights = FieldWords.of({("nights",): ["nights", "ночи"], ("guests",): ["guests",
                                                                          "гостей"]})
    at = corrected.index("4")
    assert set(nights.naming(corrected, at, at + 1)) == {("nights",)}
    # The new value first: the one after "not" is taken back.
    for said in ("sorry, the card is 4471 not 4417", "карта 4471, а не 4417",
                 "4471, nicht 4417"):
        assert [said[a:b] for a, b in replaced(said)] == ["4417"]
    assert replaced("списали 500, не помню когда") == []


def test_a_stay_from_one_day_to_another_checks_in_on_the_first_and_counts_apart():
    hotel = contract_of(BookHotel)
    found = _found(hotel.schema(), hotel,
                   ("user", "Hotel in Rome from 3 to 6 January, 2 guests"))
    assert (found["city"], found["check_in"], found["guests"]) == \
        (("Rome",), ("2027-01-03",), (2,))  # no city "January", no 2 January, no 3 nights
    found = _found(hotel.schema(), hotel, ("user", "Отель в Питере с 28 по 30 декабря"))
    assert found["check_in"] == ("2026-12-28",) and found["nights"] == ()


@pytest.mark.parametrize(("text", "amount", "card"), [
    # Where an amount is written with its currency, numbers without one are no amount: an
    # order's number, a phone's digits; and an amount's digits are no card.
    ("Заказ №48213 не привезли, а деньги списали: 1500,00 руб 28 ноября, карта 7719",
     ("1500.00",), ("7719",)),
    ("Мне позвонили с номера +7 916 204-81-37, и с карты ушло 12 000 руб.", ("12000",), ()),
    ("Vorgestern wurden 39,95 € abgebucht, Karte 5817, Bestellnummer 771204",
     ("39.95",), ("5817",)),
    ("3-го числа с карты *5208 списали 2 500 р. в магазине", ("2500",), ("5208",)),
    ("El 2026-11-26 me cobraron 120,00 € dos veces, tarjeta 3344", ("120.00",), ("3344",)),
    ("последние 4 цифры — 3382, списали тыщу рублей", ("1000",), ("3382",)),
    # No currency anywhere: every reading stays, and the user chooses.
    ("I bought 2 coffees for 7.80, card 6631 got charged 78.00", ("78.00", "7.80", "2"),
     ("6631",)),
])
def test_an_amount_written_with_its_currency_outranks_other_numbers(text, amount, card):
    found = _dispute(text)
    assert found["amount"] == amount and found["card_last4"] == card


def test_a_count_is_never_read_from_an_article_nor_a_day_before_its_month():
    hotel = contract_of(BookHotel)
    found = _found(hotel.schema(), hotel, ("user", "Quiero reservar un hotel en Valencia "
                                           "para 2 personas, 4 noches; llegamos el 23 de "
                                           "diciembre a las 21:00"))
    assert found["nights"] == (4,) and found["guests"] == (2,)
    assert found["check_in"] == ("2026-12-23",)
    assert "1" not in _dispute("Hace tres días apareció un cargo en mi tarjeta 6402")["amount"]


def test_the_field_that_counts_people_is_named_by_any_word_for_people():
    from server.dialogue.naming import FieldWords

    hotel = FieldWords.of({("nights",): ["nights", "количество ночей"],
                           ("guests",): ["guests", "количество гостей", "personas"]})
    for said in ("Заезд 10 января. И нас будет 2 человек.", "2 nights, 3 people",
                 "4 noches, 2 personas"):
        for value in {"2", "3"} & set(said.split()):
            at = said.index(value + " ")
            owner = "nights" if said[at + 2:].startswith(("nights", "noches")) else "guests"
            assert set(hotel.naming(said, at, at + 1)) == {(owner,)}, said
    # Two fields that count people: neither is named by a word both share.
    two = FieldWords.of({("passengers",): ["passengers"], ("guests",): ["guests"]})
    assert two.naming("3 people", 0, 1) == {}
    hotel_ = contract_of(BookHotel)
    found = _found(hotel_.schema(), hotel_, ("user", "Отель в Калининграде, 2 ночи"),
                   ("user", "Заезд 10 января. И нас будет двое."))
    assert found["guests"] == (2,)


def test_a_value_taken_back_is_found_in_linear_time_on_hostile_text():
    import time

    from server.dialogue.naming import replaced

    for text in ("1" * 20000, "1." * 10000, "1 not 1 " * 2500, ("1" * 40 + " не ") * 500):
        started = time.perf_counter()
        replaced(text)
        # (A pattern with a value on both sides of "not" took 26 s on 1,000 digits.)
        assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("unit", [
    "1 ", "5 руб ", "вчера 3-го числа 12.11 ", "двадцать пять тысяч ", "1-",
    "card 4417 paid $212.75 on 2026-11-30, not 4471 "])
def test_a_message_of_thousands_of_numbers_grounds_in_linear_time(unit):
    """24,000 characters (the default bound on what grounding reads) of numbers, dates and
    corrections: each value's words, claims and currency signs are looked up near it, not
    in the whole message (these took 8-20 s; now about 1 s)."""
    from tests.grammars.test_patterns import finishes

    text = unit * (24_000 // len(unit))
    found = finishes(lambda: _dispute(text), within=6.0)
    if unit.startswith("card"):
        assert "4417" in found["card_last4"] and "212.75" in found["amount"]


def test_a_name_said_hundreds_of_times_is_judged_once_per_value():
    """A plain string said beside another tool's field word ("the file report.pdf") is
    that field's: each distinct value's places are read once (each place of each value was
    read once per place: 2.4 s on 24,000 characters; now 0.1 s)."""
    from tests.grammars.test_patterns import finishes

    schema = {"type": "object", "properties": {"customer": {
        "type": "string", "x-strictcall-grounded": True}}}
    said = 'named "Quarterly Report" the file report.pdf for Anna Petrova order ORD-1 '
    evidence = evidence_of([Turn("user", said * (24_000 // len(said)))], today=TODAY)
    found = finishes(lambda: ground(schema, None, evidence,
                                    foreign=frozenset({"file", "order", "report"})), within=1.5)
    assert "report.pdf" not in found.candidates()[("customer",)]
