"""Numbers and amounts as people write them: grouped and decimal marks by locale (babel),
a currency's sign, code or word (price-parser), thousands said short, roubles with kopecks.
(Dates: server/dialogue/reading.py; numbers in words: server/dialogue/number_words.py.)"""

from __future__ import annotations

import functools
import re
from decimal import Decimal

# The locales a number is read in after the conversation's own: the first that reads the
# whole span strictly wins ("1,200" is 1200 in English, 1.2 in Russian).
FALLBACK_LOCALES = ("en", "ru", "de", "fr", "de_CH")
_NUMBER = re.compile(r"^[+-]?\d[\d\s\u00a0\u202f.,'\u2019]*$")
# Thousands said short ("5к", "5k", "5 тыс.", "5 тыс. руб."), roubles with their kopecks.
_THOUSANDS = re.compile(r"(?i)^(?P<base>\d+(?:[.,]\d+)?)\s*(?:к|k|тыс\.?|тысяч\w*)"
                        r"(?:\s*(?:руб\w*\.?|р\.|₽|rub))?$")
_KOPECKS = re.compile(r"(?i)^(?P<whole>\d[\d\s\u00a0]*?)\s*(?:руб\w*\.?|р\.|₽)\s*"
                      r"(?P<cents>\d{1,2})\s*коп\w*\.?$")
# A mark with a space after it parts two numbers ("card 5566, 42.50"), never groups one.
_LIST_MARK = re.compile(r"[.,'\u2019][\s\u00a0\u202f]")
_SPACE_IN_NUMBER = re.compile(r"(?<=\d)[\s\u00a0\u202f]+(?=\d)")


@functools.lru_cache(maxsize=16384)
def number(span: str, language: str) -> Decimal | None:
    """The number `span` is written as ("1 200,50 ₽", "$1,200.50", "5к", "349 руб. 90
    коп."), in `language`'s way first; None where it is no one number."""
    if not any(c.isdigit() for c in span):
        return None
    kopecks = _KOPECKS.match(span.strip())  # "349 руб. 90 коп."
    if kopecks:
        whole = number(kopecks.group("whole"), language)
        return None if whole is None or whole % 1 else \
            Decimal(f"{int(whole)}.{int(kopecks.group('cents')):02d}")
    thousands = _THOUSANDS.match(span.strip())  # "5к", "5k", "5 тыс."
    if thousands:
        base = number(thousands.group("base"), language)
        return None if base is None else base * 1000
    text = _without_currency(span.strip())
    if not _NUMBER.match(text) or _LIST_MARK.search(text):
        return None
    for locale in _locales(language):
        value = _parse_decimal(text, locale)
        if value is not None:
            return value
    return None


def decimal_json(value: Decimal, *, integer: bool = False) -> int | float | None:
    """A number as JSON writes it: an integer where one is asked for and it is whole."""
    if integer or value == value.to_integral_value():
        if value != value.to_integral_value():
            return None
        return int(value)
    return float(value)


def has_currency(span: str) -> bool:
    """Whether `span` is written with a currency sign, code or word ("1500,00 руб", "$5")."""
    text = span.strip()
    return _without_currency(text) != text


def _without_currency(text: str) -> str:
    if not any(not c.isdigit() and not c.isspace() and c not in ".,'\u2019+-" for c in text):
        return text  # digits and marks only: no currency to look for
    from price_parser import Price

    currency = Price.fromstring(text).currency
    if not currency or currency not in text:
        return text
    # (The whole word: price-parser names "рублей" by its stem "руб".)
    word = r"\w*\.?" if currency[-1:].isalpha() else ""
    return re.sub(re.escape(currency) + word, " ", text, count=1).strip()


def _locales(language: str) -> list[str]:
    return list(dict.fromkeys([language, *FALLBACK_LOCALES]))


@functools.lru_cache(maxsize=4096)
def _parse_decimal(text: str, locale: str) -> Decimal | None:
    from babel import Locale, UnknownLocaleError
    from babel.numbers import NumberFormatError, get_group_symbol, parse_decimal

    try:
        Locale.parse(locale)
    except (UnknownLocaleError, ValueError):
        return None
    group = get_group_symbol(locale)
    spaced = _SPACE_IN_NUMBER.sub(group if group.isspace() else "\u00a0", text)
    if not group.isspace() and spaced != text:
        return None  # "1 200" in a locale whose digits group by "." or ","
    try:
        value = parse_decimal(spaced, locale=locale, strict=True)
    except (NumberFormatError, ValueError):
        return None
    return value if value.is_finite() else None
