"""Which language a person wrote in, offline: the script first (Cyrillic, Han, kana, Hangul
tell most of it even for "ок" or "угу"), then `lingua` for Latin-script text of a few
words, among the languages listed here. Short replies ("yes", "ja", "ok") say little: where
neither is sure, the answer is None and the caller keeps the conversation's earlier
language.

Words are stemmed (for matching a message against a field's or a tool's words) with the
Snowball stemmer of their language (PyStemmer); Han text is cut into characters and pairs,
as search engines index Chinese."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

# The languages told apart among Latin-script texts (ISO 639-1). Each costs lingua a model
# in memory (low-accuracy mode: trigrams only, a few MiB in all).
LATIN = ("en", "de", "fr", "es", "it", "pt", "nl", "pl", "tr")
MIN_LATIN_WORDS = 2  # fewer words than this: no guess
MIN_CONFIDENCE = 0.5
# Russian's Snowball stems keep verbs' aspects apart ("заблокировать" -> "заблокирова",
# "заблокируйте" -> "заблокир"): the stem's first letters are the word.
CYRILLIC_STEM = 6
_STEMMERS = {"en": "english", "ru": "russian", "uk": "russian", "de": "german",
             "fr": "french", "es": "spanish", "it": "italian", "pt": "portuguese",
             "nl": "dutch", "pl": "polish", "tr": "turkish"}
_UKRAINIAN_LETTERS = frozenset("іїєґІЇЄҐ")
# Function words, which say nothing of which field or tool a text is about.
_STOP_TEXT = """
le la les un une des du de et ou est pour avec el los las una y o es por con para del al
also any some all each just like know tell show let make sure
a an and are as at be by can could do does for from get give has have how i in into is
it its me my need of on or our please set should so that the their then there this to
use using want was we what when where which who will with would you your e.g и в во на с
со к по за из от до о об у а но или что это как так же бы ли не ни да мне мой моя мое
мои ваш ваша ваше ваши пожалуйста нужно надо для при der die das ein eine einen und oder
ist sind zu mit von für auf im in an bitte ich mein meine sie ihr ihre es
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
_WORD = re.compile(r"\w+", re.UNICODE)


def script_of(char: str) -> str | None:
    """"latin", "cyrillic", "han", "kana", "hangul", another script's name, or None for a
    character that is no letter."""
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    if name.startswith("CJK") or "IDEOGRAPH" in name:
        return "han"
    for script in ("LATIN", "CYRILLIC", "HIRAGANA", "KATAKANA", "HANGUL", "GREEK", "ARABIC",
                   "HEBREW"):
        if name.startswith(script):
            return {"HIRAGANA": "kana", "KATAKANA": "kana"}.get(script, script.lower())
    return "other"


def language_of(text: str) -> str | None:
    """The language `text` is written in, or None where it says too little."""
    scripts: dict[str, int] = {}
    for char in text:
        script = script_of(char)
        if script is not None:
            scripts[script] = scripts.get(script, 0) + 1
    if not scripts:
        return None
    main = max(scripts, key=lambda s: scripts[s])
    if main == "cyrillic":
        return "uk" if any(c in _UKRAINIAN_LETTERS for c in text) else "ru"
    if main == "han":
        return "ja" if scripts.get("kana") else "zh"
    if main == "kana":
        return "ja"
    if main == "hangul":
        return "ko"
    if main != "latin" or len(_WORD.findall(text)) < MIN_LATIN_WORDS:
        return None
    return _latin(text)


def conversation_language(newest_first: Iterable[str], *, default: str = "en") -> str:
    """The language of the newest text that tells one, else `default`."""
    for text in newest_first:
        found = language_of(text)
        if found is not None:
            return found
    return default


def _latin(text: str) -> str | None:
    detector = _detector()
    values = detector.compute_language_confidence_values(text)
    if not values or values[0].value < MIN_CONFIDENCE:
        return None
    code: str = values[0].language.iso_code_639_1.name.lower()
    return code


@functools.cache
def _detector() -> Any:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, c.upper()))
                 for c in LATIN]
    return LanguageDetectorBuilder.from_languages(*languages).with_low_accuracy_mode().build()


# -- words, for matching ------------------------------------------------------------------

def words(text: str, *, language: str | None = None) -> list[str]:
    """`text`'s words less function words, lower-cased and stemmed, each by its own
    script: Cyrillic words by the Russian stemmer (Ukrainian's nearest in Snowball), cut
    to `CYRILLIC_STEM` letters, Latin words by `language`'s (English by default), Han runs
    as characters and their pairs; digits as they are."""
    out: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group().casefold()
        if word in STOP_WORDS:
            continue
        script = next((s for c in word if (s := script_of(c)) is not None), None)
        if script == "han":
            out += _han(word)
        elif script == "cyrillic":  # verbs' many forms share no Snowball stem: a prefix
            out.append(_stem("ru", word)[:CYRILLIC_STEM])
        elif script == "latin":
            out.append(_stem(language if language in _STEMMERS else "en", word))
        else:
            out.append(word)
    return out


def _han(run: str) -> list[str]:
    chars = [c for c in run if script_of(c) == "han"]
    return chars + [a + b for a, b in zip(chars, chars[1:], strict=False)]


def _stem(language: str, word: str) -> str:
    stemmed: str = _stemmer(_STEMMERS.get(language, "english")).stemWord(word)
    return stemmed


@functools.cache
def _stemmer(algorithm: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(algorithm)


def identifier_words(name: str) -> list[str]:
    """An identifier's words: `card_last4` -> card last 4, `maxPrice` -> max price."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Za-z])([0-9])", r"\1 \2", spaced)
    return [w for w in re.split(r"[\s_.\-/]+", spaced) if w]


def stems(texts: Sequence[str], *, language: str | None = None) -> set[str]:
    return {w for text in texts for w in words(text, language=language)}


def warm() -> None:
    """Build the language detector and the stemmers before the first request needs them."""
    language_of("the first request should not wait for this")
    words("сумма Betrag amount", language="de")
