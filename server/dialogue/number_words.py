"""Numbers written as words, read as digits ("на пять дней" -> "на 5 дней", "for three
nights" -> "for 3 nights", "für drei Nächte" -> "für 3 Nächte"): by number-parser where it
knows the language (English, Russian, Spanish, Ukrainian, Hindi), by text2num for the others
it knows (French, German, Italian, Portuguese, Dutch, Danish). The evidence gains the
rewritten message beside the one written (server/dialogue/evidence.py), so a count said in
words grounds like one said in digits, and the words themselves stay as they were."""

from __future__ import annotations

import logging
import re

log = logging.getLogger("strictcall.dialogue")
_NUMBER = re.compile(r"\d+")

NUMBER_PARSER = frozenset({"en", "ru", "es", "uk", "hi"})
TEXT2NUM = frozenset({"fr", "de", "it", "pt", "nl", "da"})


def in_digits(text: str, language: str) -> str | None:
    """`text` with its numbers in words written as digits, or None where it has none (or
    the language is one neither library reads)."""
    try:
        if language in NUMBER_PARSER:
            from number_parser import parse

            out = str(parse(text, language=language))
        elif language in TEXT2NUM:
            from text_to_num import alpha2digit

            out = str(alpha2digit(text, language))
        else:
            return None
    except Exception as exc:  # noqa: BLE001 - a library's failure costs the reading only
        log.debug("number words in %s text not read: %s", language, exc)
        return None
    if out == text or set(_NUMBER.findall(out)) - set(_NUMBER.findall(text)) <= {"1"}:
        return None  # ("one" is a pronoun as often as a count: "no, keep the old one")
    return out
