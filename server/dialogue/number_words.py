"""Numbers written as words, read as digits ("на пять дней" -> "на 5 дней", "for three
nights" -> "for 3 nights", "für drei Nächte" -> "für 3 Nächte"): by number-parser where it
knows the language (English, Russian, Spanish, Ukrainian, Hindi), by text2num for the others
it knows (French, German, Italian, Portuguese, Dutch, Danish), and Russian and Ukrainian
collective numerals («нас двое») from a table here, which neither reads. The evidence gains the
rewritten message beside the one written (server/dialogue/evidence.py), so a count said in
words grounds like one said in digits, and the words themselves stay as they were."""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter

log = logging.getLogger("strictcall.dialogue")
_NUMBER = re.compile(r"\d+")
_WORDS = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_JOINERS = frozenset({"and", "и", "y", "і"})  # "two hundred and five"
# "Those two", «эти две»: things already named, pointed at again, not a count said.
_POINTING = frozenset({"those", "these", "эти", "те", "этих", "тех", "этими", "теми", "ці",
                       "ті", "estos", "estas", "esos", "esas", "aquellos", "aquellas"})

# The most words one number is spelled in ("nine hundred and ninety-nine thousand nine
# hundred and ninety-nine": 10): a longer run of number words is read from its start in
# runs of this many at most, so a message of 3,000 number words costs per word, not per
# word squared (it took 78 s).
MAX_NUMBER_WORDS = 12
NUMBER_PARSER = frozenset({"en", "ru", "es", "uk", "hi"})
TEXT2NUM = frozenset({"fr", "de", "it", "pt", "nl", "da"})


def in_digits(text: str, language: str) -> str | None:
    """`text` with its numbers in words written as digits, or None where it has none (or
    the language is one neither library reads)."""
    try:
        if language in NUMBER_PARSER:
            out = _cardinals(_colloquial(text, language) if language in ("ru", "uk")
                             else text, language)
        elif language in TEXT2NUM:
            from text_to_num import alpha2digit

            out = str(alpha2digit(_together(text, language), language,
                                  threshold=2))  # ("ein": as "one" above)
        else:
            return None
    except Exception as exc:  # noqa: BLE001 - a library's failure costs the reading only
        log.debug("number words in %s text not read: %s", language, exc)
        return None
    added = Counter(_NUMBER.findall(out))
    added.subtract(_NUMBER.findall(text))
    if out == text or not {n for n, more in added.items() if more > 0} - {"1"}:
        return None  # ("one" is a pronoun as often as a count: "no, keep the old one")
    return out


def _cardinals(text: str, language: str) -> str:
    """`text` with each run of number words that spells one cardinal ("two hundred and
    five", "двадцать один") written as its digits. Ordinals stay words ("the second one" is
    no 2, nor 21), so does a number after a word pointing back ("those two", «эти две»:
    things named before), and two numbers side by side stay apart ("2, 3"): spaced digits
    read as one grouped number ("1 200")."""
    words = list(_WORDS.finditer(text))
    out, at, i, last_end = [], 0, 0, -1
    while i < len(words):
        j = i
        while j < len(words) and j - i < MAX_NUMBER_WORDS and (
                _number(words[j].group().casefold(), language) is not None
                or (j > i and words[j].group().casefold() in _JOINERS)):
            if j > i and text[words[j - 1].end():words[j].start()].strip():
                break  # (punctuation between: two numbers, not one)
            j += 1
        value = None
        while j > i and value is None:  # the longest run from i that spells one number
            if words[j - 1].group().casefold() not in _JOINERS:
                value = _number(text[words[i].start():words[j - 1].end()].casefold(),
                                language)
            if value is None:
                j -= 1
        pointed = i > 0 and words[i - 1].group().casefold() in _POINTING \
            and not text[words[i - 1].end():words[i].start()].strip()
        # A lone word for one is an article or a pronoun as often as a count ("apareció un
        # cargo", "no, keep the old one"): no 1, which would ground any count or amount.
        if value is None or pointed or value == 1 and j == i + 1:
            i = max(j, i + 1)
            continue
        start = words[i].start()
        out.append(text[at:start])
        if last_end >= 0 and not text[last_end:start].strip():
            out.append(", ")  # right after another number: kept apart
        out.append(str(value))
        if j == i + 1 and _counts_people(words[i].group().casefold(), language):
            out.append(" " + _PEOPLE_WORD[language])  # «нас двое»: «нас 2 человек»
        at, last_end, i = words[j - 1].end(), words[j - 1].end(), j
    out.append(text[at:])
    return "".join(out)


# Colloquial Russian and Ukrainian number words number-parser does not read, as the words
# it does: «тыщу» (a thousand), «полторы тысячи» (one and a half thousand: 1500), «полтора
# миллиона», «полсотни».
_COLLOQUIAL = (
    (re.compile(r"(?i)\bтыщ(?=[аиуеы]?\b|ами?\b|ей\b)"), "тысяч"),
    (re.compile(r"(?i)\bполтор[аы]\s+(?:тысяч[иа]?|тисяч[іа]?)\b"), "1500"),
    (re.compile(r"(?i)\bполтор[аы]\s+(?:сотни|сотні)\b"), "150"),
    (re.compile(r"(?i)\bполтор[аы]\s+(?:миллиона|мільйона)\b"), "1500000"),
    (re.compile(r"(?i)\bпол(?:-|\s)?тысячи\b|\bпівтисячі\b"), "500"),
    (re.compile(r"(?i)\bполсотни\b"), "50"))


# «две с половиной тысячи» (two and a half thousand: 2500), «3 с половиной миллиона».
_AND_A_HALF = re.compile(r"(?i)\b(?P<n>\d+|[^\W\d_]+)\s+с\s+половиной\s+"
                         r"(?P<unit>тысяч[иа]?|тисяч[іа]?|миллиона?|мільйона?|сотни|сотні)\b")
_UNITS = {"тыс": 1000, "тис": 1000, "мил": 1_000_000, "мі": 1_000_000, "сот": 100}


def _colloquial(text: str, language: str) -> str:
    for pattern, instead in _COLLOQUIAL:
        text = pattern.sub(instead, text)

    def half(found: re.Match[str]) -> str:
        whole = found.group("n")
        n = int(whole) if whole.isdigit() else _number(whole.casefold(), language)
        unit = next(v for k, v in _UNITS.items() if found.group("unit").casefold().startswith(k))
        return found.group() if n is None else str(int((n + 0.5) * unit))
    return _AND_A_HALF.sub(half, text)


# Collective numerals in German and the like, said as a count of people: «zu zweit»,
# «zu dritt» (the two, three of us).
_TOGETHER_WORDS = {"de": re.compile(r"(?i)\bzu\s+(zweit|dritt|viert|fünft|sechst)\b")}
_TOGETHER_DE = {"zweit": 2, "dritt": 3, "viert": 4, "fünft": 5, "sechst": 6}


def _together(text: str, language: str) -> str:
    """«wir kommen zu zweit»: «wir kommen 2 Personen» (read as a count of people)."""
    pattern = _TOGETHER_WORDS.get(language)
    if pattern is None:
        return text
    return pattern.sub(lambda m: f"{_TOGETHER_DE[m.group(1).casefold()]} Personen", text)


# Collective numerals, which number-parser does not read: «нас двое» (two of us), «для
# троих», «на четверых»; Ukrainian «нас двоє». Each stem with its case endings.
_COLLECTIVE = {
    "ru": {"дво": 2, "тро": 3, "четвер": 4, "пятер": 5, "шестер": 6, "семер": 7},
    "uk": {"дво": 2, "тро": 3, "четвер": 4, "п'ятер": 5, "шістер": 6, "семер": 7}}
_COLLECTIVE_END = re.compile(r"(?:е|є|о|их|ых|им|ым|ими|ыми|ім|іма)")
# «вдвоём», «втроём», «вчетвером» (the two, three, four of us together); Ukrainian «удвох».
_TOGETHER = {"ru": re.compile(r"в(?:(?P<s>дво|тро)[её]м|(?P<l>четвер|пятер|шестер|семер)ом)"),
             "uk": re.compile(r"[ув](?:(?P<s>дв|тр)ох|трьох|(?P<l>чотир)ьох)")}
_TOGETHER_VALUE = {"дво": 2, "дв": 2, "тро": 3, "тр": 3, "четвер": 4, "чотир": 4, "пятер": 5,
                   "шестер": 6, "семер": 7}


_PEOPLE_WORD = {"ru": "человек", "uk": "людей"}


def _counts_people(word: str, language: str) -> bool:
    """Whether `word` is a collective numeral, which counts people («двое», «вдвоём»)."""
    together = _TOGETHER.get(language)
    return bool(together and together.fullmatch(word)) or any(
        word.startswith(stem) and _COLLECTIVE_END.fullmatch(word[len(stem):])
        for stem in _COLLECTIVE.get(language, {}))


@functools.lru_cache(maxsize=4096)
def _number(words: str, language: str) -> int | None:
    from number_parser import parse_number

    together = _TOGETHER.get(language)
    found_together = together.fullmatch(words) if together else None
    if found_together:
        stem = found_together.group("s") or found_together.group("l") or "тр"
        return _TOGETHER_VALUE[stem]
    for stem, value in _COLLECTIVE.get(language, {}).items():
        if words.startswith(stem) and _COLLECTIVE_END.fullmatch(words[len(stem):]):
            return value
    found = parse_number(words, language=language)
    return found if isinstance(found, int) else None
