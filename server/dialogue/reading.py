"""Values as people write them, read by kept libraries: numbers and amounts
(server/dialogue/amounts.py: "1 200,50 ₽", "€2.300,00", "$1,200.50"); dates by
dateparser, relative to the conversation's date ("позавчера", "last Friday", "30.11", "3
декабря", "vorgestern"); yes and no for booleans.

A reading is strict: the whole span must be the value (decoration aside), never a value
found somewhere inside it ("5 nights" is no number; "5" in it is). Spans that are dates or
times of day are *claims*: the numbers inside them ("30.11", "7 am") are no card digits,
amounts or counts."""

from __future__ import annotations

import datetime as dt
import functools
import re
from decimal import Decimal
from typing import Any

from contracts import clock
from server.dialogue import amounts
from server.dialogue.language import STOP_WORDS, script_of

# A range of days in one month: "с 28 по 30 декабря", "28-30 декабря", "from 28 to 30
# December", "vom 28. bis 30. Dezember".
_RANGE_WORDS = frozenset({"по", "до", "-", "–", "—", "to", "till", "until", "bis", "al",
                          "au", "a"})
# A month's name, a comma and a day or a word after it: what follows the comma is another
# thing ("6 January, 2 guests"; «30 декабря, один человек»), a year aside ("May 3, 2026").
_MONTH_THEN_COMMA = re.compile(r"(?i)(?P<month>[^\W\d_]+)\s*,\s*(?:\d{1,2}|[^\W\d_]+)\s*$")
_RANGE_END = re.compile(r"(?i)\b\d{1,2}\.?\s*(?:по|до|-|–|—|to|till|until|bis|al|au|a)\s*"
                        r"(?P<end>\d{1,2}\.?\s+(?P<month>[^\W\d_]+))")
_DAY_RANGE = re.compile(r"(?i)^(?:с|со|from|vom|del|du|de)?\s*(?P<first>\d{1,2})\.?\s*"
                        r"(?:по|до|-|–|—|to|till|until|bis|al|au|a)\s*\d{1,2}\.?\s+"
                        r"(?P<month>[^\W\d_]+)$")
_DIGIT_DATE = re.compile(r"^\d{1,4}[./-]\d{1,2}(?:[./-]\d{2,4})?\.?$")
_TIME = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?|h\b|uhr\b|ч\b|час\w*|утра|вечера)"
    r"|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_WORDS = re.compile(r"\S+")
# How many times a thing happened ("2 раза", "twice"'s "x2", "3 mal"): no amount or card.
_REPEATS = re.compile(r"(?i)\b\d{1,3}\s*(?:раза?|times|mal|veces|fois)\b|\bx\s?\d{1,2}\b"
                      r"|\b\d{1,2}x\b")
# A year said as one: "since 2019", «с 2019 года», "seit 2019", "desde 2019".
_YEAR = re.compile(r"(?i)\b(?:since|seit|desde|depuis)\s+(?:19|20)\d{2}\b"
                   r"|\b(?:19|20)\d{2}\s*(?:год\w*|г\.)")
_MONTH_LINKS = frozenset({"de", "of", "del"})  # "23 de diciembre", "the 3 of May"
_TRUE = frozenset({"yes", "true", "да", "ja", "oui", "sí", "si", "sim", "tak", "evet"})
_FALSE = frozenset({"no", "false", "нет", "nein", "non", "não", "nie", "hayır"})


class Reader:
    """Reads spans of one conversation, in its language and relative to its date."""

    def __init__(self, *, today: dt.date, language: str) -> None:
        self.today = today
        self.language = language

    def number(self, span: str) -> Decimal | None:
        """The number `span` spells, a currency sign or code around it allowed."""
        return amounts.number(span, self.language)

    def dates(self, span: str) -> list[dt.date]:
        return list(_dates(self, span))

    def _dates(self, span: str) -> list[dt.date]:
        """The days `span` may name: as of this period ("3 декабря" said on 2 December is
        this year's), then the nearest past and future ones, for a field that takes only
        past (or future) days."""
        day = _day_of_month(span)
        if day is not None:  # «3-го числа»: this month's, the latest past one, the next one
            days = [d for d in (_on_day(_month_shifted(self.today, n), day)
                                for n in range(-2, 3)) if d is not None]
            this = [d for d in days if (d.year, d.month) == (self.today.year, self.today.month)]
            past = [d for d in days if d <= self.today][-1:]
            later = [d for d in days if d >= self.today][:1]
            return list(dict.fromkeys([*this, *past, *later]))
        first = self.date(span)
        if first is None:
            return []
        text = span.strip().rstrip(",;")  # ("14.01," before ", 2 guests": as `date` reads it)
        if _DIGIT_DATE.match(text) and len(re.findall(r"\d+", text)) == 2:
            others = [_shifted(first, -1), _shifted(first, 1)]  # "30.11": which year
        else:
            others = [self.date(span, prefer=p) for p in ("past", "future")]
        return list(dict.fromkeys([first, *(d for d in others if d is not None)]))

    def date(self, span: str, *, prefer: str = "current_period") -> dt.date | None:
        """The day `span` names, relative to the conversation's date: a date in digits
        ("30.11", "2026-11-01") or words of dates (a month, a weekday, "позавчера", "in 2
        days"). None for a bare number (no year "5531"), a time of day, a month without a
        day ("at 7" is no 7th), or no date at all."""
        of_month = _day_of_month(span)
        if of_month is not None:
            return _on_day(self.today, of_month)
        text = _ORDINAL_BEFORE_MONTH.sub(r"\1", span.strip().rstrip(",;"))  # «5-го декабря»
        text = _PARTS_OF_DAYS.get(text.casefold(), text)  # "this morning": today
        ranged = _DAY_RANGE.match(text)  # "с 28 по 30 декабря": the range's first day
        if ranged:
            text = f"{ranged.group('first')} {ranged.group('month')}"
        parted = _MONTH_THEN_COMMA.search(text)  # "6 January, 2 guests": no 2 January
        if parted and parted.group("month").casefold() in _vocabulary(
                self.language, _MONTHS) | _vocabulary("en", _MONTHS):
            return None
        language = _language_of_span(text, self.language)
        if not (_DIGIT_DATE.match(text) or _date_words(text, language)):
            return None
        if any(c.isdigit() for c in text) and not (_DIGIT_DATE.match(text) or _date_words(
                text, language, _MONTHS + _UNITS)):
            return None  # digits no date word reads: "yesterday a $212.75" is no yesterday
        if _TIME.search(text):
            return None
        order = "MDY" if self.language == "en" and "/" in text else "DMY"
        # Digits with dots are a day and a month ("20.12"), which dateparser alone would
        # read as a time of day; digits no format reads are no date ("15.99" is an amount,
        # which dateparser would make 15 December 1999), and a German "15.01." ends in a dot.
        formats = None
        if _DIGIT_DATE.match(text):
            text, formats = text.rstrip("."), _DIGIT_FORMATS[order]
            if not any(_reads(text, f) for f in formats):
                return None
        found = _date_parser(language, order, self.today, prefer).get_date_data(
            text, date_formats=formats)
        if found.date_obj is None or found.period != "day":
            return None  # no date, a time of day, or a month but no day
        day: dt.date = found.date_obj.date()
        return day

    @staticmethod
    def boolean(span: str) -> bool | None:
        word = span.strip().strip(".,!?;:").casefold()
        return True if word in _TRUE else False if word in _FALSE else None

    def range_ends(self, text: str) -> list[tuple[int, int]]:
        """The last days of ranges of days ("30 декабря" of "с 28 по 30 декабря"): no day
        of their own for a date field, whose day is the range's first."""
        months = _vocabulary(self.language, _MONTHS) | _vocabulary("en", _MONTHS)
        return [m.span("end") for m in _RANGE_END.finditer(text)
                if m.group("month").casefold() in months]

    def claims(self, text: str) -> list[tuple[int, int]]:
        """The spans of `text` that are dates with digits or times of day: a date in digits
        ("30.11"), a day beside a month's name ("3 декабря", "May 3"), a relative day ("in
        2 days", "2 days ago"; "for 2 days" is a count, no date), a time ("7 am"), a year
        ("since 2019"), and how many times something happened ("2 раза", "x2")."""
        found = [m.span() for m in _TIME.finditer(text)]
        found += [m.span() for m in _REPEATS.finditer(text)]
        found += [m.span() for m in _YEAR.finditer(text)]
        words = [(m.start(), m.end(), m.group().strip(".,;:!?()").casefold())
                 for m in _WORDS.finditer(text)]
        months = _vocabulary(self.language, _MONTHS) | _vocabulary("en", _MONTHS)
        units = _vocabulary(self.language, _UNITS) | _vocabulary("en", _UNITS)
        relative = _vocabulary(self.language, _RELATIVE) | _vocabulary("en", _RELATIVE)
        for i, (start, end, word) in enumerate(words):
            if _DIGIT_DATE.match(word) and self.date(word) is not None:
                found.append((start, end))
            if not word.isdigit() or len(word) > 2:
                continue
            before = words[i - 1] if i > 0 else None
            after = words[i + 1] if i + 1 < len(words) else None
            if after is not None and after[2] in _MONTH_LINKS and i + 2 < len(words) \
                    and words[i + 2][2] in months:  # "23 de diciembre", "3 of May"
                found.append((start, words[i + 2][1]))
            for near in (before, after):
                if near is not None and near[2] in months and not (
                        near is before and text[near[0]:near[1]].endswith(",")):
                    # ("6 January, 2 guests": the 2 after the comma is a count)
                    found.append((min(start, near[0]), max(end, near[1])))
            # "с 28 по 30 декабря", "from 28 to 30 December": 28 is a day, no count
            if after is not None and i + 3 < len(words) and after[2] in _RANGE_WORDS \
                    and words[i + 2][2].isdigit() and words[i + 3][2] in months:
                found.append((start, words[i + 3][1]))
            if after is not None and after[2] in units and (
                    before is not None and before[2] in relative
                    or i + 2 < len(words) and words[i + 2][2] in relative):
                found.append((min(start, before[0] if before else start), after[1]))
        return found


# (The readers' caches below hold 16,384 runs at most, each of `MAX_SPAN_CHARS` at most:
# server/dialogue/spans.py.)
@functools.lru_cache(maxsize=16384)
def _dates_of(span: str, language: str, today: dt.date) -> tuple[dt.date, ...]:
    return tuple(Reader(today=today, language=language)._dates(span))


def _dates(reader: Reader, span: str) -> tuple[dt.date, ...]:
    return _dates_of(span, reader.language, reader.today)


# -- the libraries ------------------------------------------------------------------------

_DIGIT_FORMATS = {
    "DMY": ["%d.%m", "%d.%m.%Y", "%d.%m.%y", "%d/%m", "%d/%m/%Y", "%Y-%m-%d"],
    "MDY": ["%m/%d", "%m/%d/%Y", "%d.%m", "%d.%m.%Y", "%Y-%m-%d"]}


def _reads(text: str, format: str) -> bool:
    try:  # (a leap year, for "29.02" without one)
        dt.datetime.strptime(text if "%Y" in format or "%y" in format else f"{text}.2000",
                             format if "%Y" in format or "%y" in format else f"{format}.%Y")
    except ValueError:
        return False
    return True


# A day of the month alone: «3-го числа», "the 3rd" (not «3-го» alone: «3-го этажа» is a
# floor, nor "3rd": "the 3rd floor" has its "the"... and a floor after it); before a month's
# name, the
# ordinal's ending is left out («5-го декабря»: 5 декабря).
_DAY_OF_MONTH = re.compile(r"(?i)^(?:(\d{1,2})(?:-?(?:го|ого|е))?\s+числа"
                           r"|the\s+(\d{1,2})(?:st|nd|rd|th))$")
_ORDINAL_BEFORE_MONTH = re.compile(r"(?i)\b(\d{1,2})-?(?:го|ого|е)(?=\s+[^\W\d_]{3,})")
# A part of a day said without the day's own word: the day it is in.
_PARTS_OF_DAYS = {"this morning": "today", "this afternoon": "today", "this evening": "today",
                  "tonight": "today", "earlier today": "today", "last night": "yesterday",
                  "esta mañana": "hoy", "esta tarde": "hoy", "esta noche": "hoy",
                  "anoche": "ayer", "heute früh": "heute", "gestern abend": "gestern"}


def _day_of_month(span: str) -> int | None:
    found = _DAY_OF_MONTH.match(span.strip().rstrip(",;."))
    return int(found.group(1) or found.group(2)) if found else None


def _month_shifted(day: dt.date, months: int) -> dt.date:
    """The first day of the month `months` from `day`'s."""
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


def _on_day(month: dt.date, day: int) -> dt.date | None:
    try:
        return month.replace(day=day)
    except ValueError:  # the 31st of a month of 30 days
        return None


def _shifted(day: dt.date, years: int) -> dt.date | None:
    try:
        return day.replace(year=day.year + years)
    except ValueError:  # 29 February
        return None


def _language_of_span(text: str, language: str) -> str:
    """A span's own script over the conversation's language: "позавчера" in an English
    chat is still Russian."""
    scripts = {script_of(c) for c in text} - {None}
    if "cyrillic" in scripts:
        return "uk" if language == "uk" else "ru"
    if "han" in scripts:
        return "ja" if "kana" in scripts else "zh"
    return language


def date_word(word: str) -> bool:
    """Whether `word` is a word of dates itself ("today", "вчера", "Friday"): a value,
    not a name of one."""
    folded = word.casefold()
    return any(folded in _vocabulary(language) for language in ("en", "ru", "de", "fr", "es"))


def _date_words(text: str, language: str, keys: tuple[str, ...] | None = None) -> bool:
    """Whether `text` holds a word of dates in its language or English (dateparser's own
    vocabulary: months, weekdays, relative days, units with "in" and "ago"), spelled out:
    abbreviations of two letters ("we", "вт") would read "we" as Wednesday."""
    words = {w.casefold() for w in re.findall(r"[^\W\d_]{3,}", text)} - STOP_WORDS
    keys = keys or (*_MONTHS, *_UNITS, *_DAYS)
    return bool(words & (_vocabulary(language, keys) | _vocabulary("en", keys)))


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_UNITS = ("day", "week")
_RELATIVE = ("in", "ago")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
         "ago", "in", "relative-type")


@functools.cache
def _vocabulary(language: str, keys: tuple[str, ...] = (*_MONTHS, *_UNITS, *_DAYS)
                ) -> frozenset[str]:
    """Words of dates in `language`, from dateparser's own data (the `keys` of its
    locale: months, units, weekdays, relative days)."""
    from dateparser.languages.loader import default_loader

    try:
        info = default_loader.get_locale(language).info
    except (KeyError, ValueError):
        return frozenset()
    phrases = [p for k in keys if k != "relative-type" for p in info.get(k, ())]
    if "relative-type" in keys:
        phrases += [p for forms in (info.get("relative-type") or {}).values() for p in forms]
    return frozenset(w.casefold() for p in phrases for w in re.findall(r"[^\W\d_]{3,}", p))


@functools.lru_cache(maxsize=64)
def _date_parser(language: str, order: str, today: dt.date,
                 prefer: str = "current_period") -> Any:
    from dateparser.date import DateDataParser

    from server.dialogue.language import LATIN

    languages = [language] if language in (*LATIN, "ru", "uk", "zh", "ja") else []
    return DateDataParser(languages=list(dict.fromkeys([*languages, "en"])), settings={
        "PREFER_DATES_FROM": prefer, "DATE_ORDER": order,
        "RETURN_TIME_AS_PERIOD": True, "PREFER_DAY_OF_MONTH": "first",
        "RELATIVE_BASE": dt.datetime.combine(today, dt.time())})


def warm() -> None:
    """Load what the first reading would (dateparser's languages, Babel's locales)."""
    reader = Reader(today=clock.today(), language="ru")
    for span in ("позавчера", "30.11", "3 декабря", "last Friday", "vorgestern"):
        reader.dates(span)
    for span in ("1 200,50 ₽", "$1,200.50", "€2.300,00"):
        reader.number(span)
