"""Values as people write them: numbers and amounts in several locales (Babel, price-parser),
dates relative to the conversation's date in several languages (dateparser), the language
of a message (script, then lingua), and what is no value at all."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from server.dialogue.language import language_of, words
from server.dialogue.reading import Reader

TODAY = dt.date(2026, 12, 2)  # a Wednesday


@pytest.mark.parametrize(("language", "span", "number"), [
    ("ru", "1 200,50 ₽", Decimal("1200.50")),
    ("ru", "1 200,50", Decimal("1200.50")),
    ("de", "€2.300,00", Decimal("2300.00")),
    ("en", "$1,200.50", Decimal("1200.50")),
    ("en", "1,049.99", Decimal("1049.99")),
    ("en", "1,200", Decimal("1200")),
    ("ru", "1,200", Decimal("1.200")),  # the conversation's locale decides
    ("en", "4417", Decimal("4417")),
    ("en", "5 nights", None),
    ("en", "card 4417", None),
    ("en", "12%", None),
])
def test_numbers_in_the_forms_people_write(language, span, number):
    assert Reader(today=TODAY, language=language).number(span) == number


@pytest.mark.parametrize(("language", "span", "day"), [
    ("ru", "позавчера", dt.date(2026, 11, 30)),
    ("ru", "вчера", dt.date(2026, 12, 1)),
    ("en", "30.11", dt.date(2026, 11, 30)),
    ("en", "last Friday", dt.date(2026, 11, 27)),
    ("ru", "3 декабря", dt.date(2026, 12, 3)),
    ("de", "vorgestern", dt.date(2026, 11, 30)),
    ("de", "3. Dezember", dt.date(2026, 12, 3)),
    ("en", "in 2 days", dt.date(2026, 12, 4)),
    ("ru", "01.11.2026", dt.date(2026, 11, 1)),
    ("en", "позавчера", dt.date(2026, 11, 30)),  # a Russian word in an English chat
    ("en", "5531", None),  # a card number is no year
    ("en", "7 am", None),  # a time of day is no day
    ("en", "at 7", None),  # nor a short word and a number
    ("en", "we", None),  # nor two letters of a weekday
])
def test_dates_relative_to_the_conversation(language, span, day):
    assert Reader(today=TODAY, language=language).date(span) == day


def test_a_day_the_field_takes_may_be_last_years():
    """"3 декабря" said on 2 December is this year's; a field that takes only past days
    gets last year's from the readings in order."""
    assert Reader(today=TODAY, language="ru").dates("3 декабря") == [
        dt.date(2026, 12, 3), dt.date(2025, 12, 3)]


def test_dates_and_times_claim_the_numbers_inside_them():
    text = "we land at 7 am on 30.11, card 4417, make it 5 nights"
    claimed = [text[a:b] for a, b in Reader(today=TODAY, language="en").claims(text)]
    assert "7 am" in claimed and any("30.11" in c for c in claimed)
    assert not any("4417" in c or "5" in c.split() for c in claimed)


@pytest.mark.parametrize(("text", "language"), [
    ("угу", "ru"), ("ок", "ru"), ("Да, не против", "ru"), ("так, і", "uk"),
    ("Make it 5 nights", "en"), ("vorgestern habe ich bezahlt", "de"),
    ("我想订一个酒店", "zh"), ("yes", None), ("4417", None),
])
def test_the_language_of_a_message(text, language):
    assert language_of(text) == language


def test_words_are_stemmed_in_their_own_script():
    assert words("сумму суммы") == ["сумм", "сумм"]
    assert words("заблокировать заблокируйте") == ["заблок", "заблок"]
    assert words("nights guests", language="en") == ["night", "guest"]
    assert words("订酒店") == ["订", "酒", "店", "订酒", "酒店"]
    assert words("the amount of the card") == ["amount", "card"]  # function words out


@pytest.mark.parametrize(("text", "language", "digits"), [
    # (Each counts people, said after it: the field that counts people is named by it.)
    ("нас будет двое", "ru", "нас будет 2 человек"),
    ("номер на четверых", "ru", "номер на 4 человек"),
    ("для троих гостей", "ru", "для 3 человек гостей"), ("нас двоє", "uk", "нас 2 людей"),
    ("во дворе", "ru", None), ("тройка лидеров", "ru", None)])
def test_collective_numerals_are_read_as_counts(text, language, digits):
    from server.dialogue.number_words import in_digits

    assert in_digits(text, language) == digits


def test_digits_no_date_format_reads_are_no_date_and_a_german_date_ends_in_a_dot():
    import datetime as dt

    from server.dialogue.reading import Reader

    reader = Reader(today=dt.date(2026, 12, 7), language="de")
    assert reader.dates("15.99") == [] and reader.dates("31.11") == []
    assert dt.date(2027, 1, 15) in reader.dates("15.01.")


@pytest.mark.parametrize(("span", "number"), [
    ("5к", "5000"), ("5k", "5000"), ("5 тыс.", "5000"), ("2,5 тыс. руб.", "2500.0"),
    ("349 руб. 90 коп.", "349.90"), ("1 200 руб. 5 коп.", "1200.05"),
    ("5кг", None), ("5 км", None)])
def test_thousands_said_short_and_kopecks_are_read(span, number):
    import datetime as dt
    from decimal import Decimal

    from server.dialogue.reading import Reader

    found = Reader(today=dt.date(2026, 12, 7), language="ru").number(span)
    assert found == (Decimal(number) if number else None)
    assert number is None or str(found) == number


def test_a_range_of_days_is_its_first_day_and_a_comma_parts_a_month_from_a_count():
    import datetime as dt

    from server.dialogue.reading import Reader

    reader = Reader(today=dt.date(2026, 12, 7), language="ru")
    assert reader.dates("с 28 по 30 декабря")[0] == dt.date(2026, 12, 28)
    said = "отель с 28 по 30 декабря, 2 гостя"
    assert said.index("30 декабря") == reader.range_ends(said)[0][0]
    english = Reader(today=dt.date(2026, 12, 7), language="en")
    assert english.dates("January, 2") == [] and english.dates("May 3, 2027") == \
        [dt.date(2027, 5, 3)]


@pytest.mark.parametrize(("text", "language", "digits"), [
    ("сняли полторы тысячи", "ru", "сняли 1500"), ("списали тыщу рублей", "ru",
                                                  "списали 1000 рублей"),
    ("две тыщи", "ru", "2000"), ("полсотни", "ru", "50"),
    ("едем вдвоём с женой", "ru", "едем 2 человек с женой"), ("втроем", "ru", "3 человек"),
    ("їдемо удвох", "uk", "їдемо 2 людей"),
    # The same number in digits before it: the word is read all the same.
    ("на 3 ночи, нас трое", "ru", "на 3 ночи, нас 3 человек"),
    # A lone word for one is an article or a pronoun: no 1 beside the 3 read.
    ("Hace tres días apareció un cargo", "es", "Hace 3 días apareció un cargo"),
    ("for one guest and two nights", "en", "for one guest and 2 nights"),
    ("списали 2 раза по две с половиной тысячи", "ru", "списали 2 раза по 2500"),
    ("Wir kommen zu zweit", "de", "Wir kommen 2 Personen")])
def test_colloquial_numbers_and_no_one_from_an_article(text, language, digits):
    from server.dialogue.number_words import in_digits

    assert in_digits(text, language) == digits


@pytest.mark.parametrize(("language", "span", "days"), [
    # A day of the month alone: this month's, the latest past one, the next one.
    ("ru", "3-го числа", [dt.date(2026, 12, 3), dt.date(2027, 1, 3)]),
    ("ru", "25-го числа", [dt.date(2026, 12, 25), dt.date(2026, 11, 25)]),
    ("ru", "3-го", []),  # («3-го этажа»: a floor)
    ("en", "3rd", []),
    ("en", "yesterday a $212.75", []),  # digits no date word reads: no yesterday
    ("ru", "31-го числа", [dt.date(2026, 12, 31), dt.date(2026, 10, 31)]),
    ("en", "the 3rd", [dt.date(2026, 12, 3), dt.date(2027, 1, 3)]),
    ("ru", "5-го декабря", [dt.date(2026, 12, 5), dt.date(2027, 12, 5)]),
    ("en", "this morning", [dt.date(2026, 12, 7)]),
    ("en", "last night", [dt.date(2026, 12, 6)]),
    ("es", "anoche", [dt.date(2026, 12, 6)])])
def test_a_day_of_the_month_and_a_part_of_a_day(language, span, days):
    assert Reader(today=dt.date(2026, 12, 7), language=language).dates(span) == days


def test_a_day_before_its_month_with_a_word_between_and_a_currency_before_it_is_claimed():
    from server.dialogue.spans import Spans, claimed

    reader = Reader(today=dt.date(2026, 12, 7), language="es")
    text = "llegamos el 23 de diciembre"
    assert [text[a:b] for a, b in reader.claims(text)] == ["23 de diciembre"]
    russian = "списали 1500,00 руб 28 ноября"
    claims = Reader(today=dt.date(2026, 12, 7), language="ru").claims(russian)
    at = russian.index("руб 28")
    assert claimed((at, at + len("руб 28")), Spans(claims))  # reaches into the date: no amount 28
    dollars = "$30.11"
    assert not claimed((0, 6), Spans(Reader(today=TODAY, language="en").claims(dollars)))


def test_how_many_times_and_a_year_claim_their_numbers():
    reader = Reader(today=dt.date(2026, 12, 7), language="ru")
    for text, claim in [("списали 2 раза по 2500", "2 раза"), ("charged x2, 63.40 each", "x2"),
                        ("with you since 2019, card 7264", "since 2019"),
                        ("клиент с 2019 года, карта 4417", "2019 года")]:
        assert [text[a:b] for a, b in reader.claims(text)] == [claim]
