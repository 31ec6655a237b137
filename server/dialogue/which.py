"""The words that say a field's thing, and whether a message says which one: "a file",
"some folder", «какой-нибудь файл» speak of a file without naming it; "the last several
lines" of a count without giving it. Read by the plain strings' reading (plain.py) and the
grounding of counts (grounding.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from server.dialogue.language import identifier_words, words

NEAR = 3  # tokens between an indefinite word and the field's word, at most
TOKEN = re.compile(r"\S+")
EDGE = "\"'«»“”„‘’`()[]{}<>,.;:!?"

# Words that speak of a thing without saying which ("a file", "some folder", "one of").
INDEFINITE = frozenset({
    "a", "an", "some", "any", "one", "certain", "specific", "particular", "different",
    "один", "одну", "одно", "одного", "одном", "одной", "некий", "некую", "некоем",
    "любой", "любую", "любом", "другой", "другую", "другое", "другом", "ein", "eine",
    "einen", "einem", "einer", "irgendein", "irgendeine", "irgendeinen", "un", "une", "uno",
    "una"})
# «какой-нибудь», «каком-то», «что-либо», «кое-какой»: every case of them.
_INDEFINITE_RU = re.compile(r"^(?:\w+-(?:нибудь|либо)|(?:как|ч|к)\w*-то|кое-\w+)$")
SOMEONE = frozenset({"someone", "somebody", "something", "anyone", "anything",
                      "кого-нибудь", "кого-то", "что-нибудь", "что-то", "кто-нибудь",
                      "jemanden", "jemand", "etwas", "quelqu'un", "alguien", "algo"})


# Words that speak of a number of things without saying how many ("the last several
# lines", "a few days", «несколько ночей»).
_VAGUE = frozenset({"several", "few", "some", "many", "couple", "multiple", "various",
                    "несколько", "пару", "пара", "немного", "много", "einige", "mehrere",
                    "paar", "quelques", "plusieurs", "varios", "varias", "algunos", "algunas"})


# Words for one kind of thing: "copy it into a folder" speaks of a destination "directory"
# without saying which.
_KINDS = tuple(frozenset(words(" ".join(group))) for group in (
    ("folder", "directory", "dir", "папка", "папку", "каталог", "директория", "ordner",
     "verzeichnis", "dossier", "répertoire", "carpeta", "directorio"),))


def kin(stems: frozenset[str] | set[str]) -> set[str]:
    """`stems` with the other words for the same kind of thing."""
    return set(stems).union(*(group for group in _KINDS if group & stems))


def thing_stems(field: str, names: Sequence[str] = ()) -> set[str]:
    """The stems that say a field's thing: its key's words and what it is called."""
    return {s for text in [" ".join(identifier_words(field)), *names] for s in words(text)}


def vague(text: str, stems: frozenset[str] | set[str]) -> bool:
    """Whether `text` speaks of how many of the field's thing without a number: a vague
    quantity word up to two tokens before the field's word ("the last several lines")."""
    tokens = [trim(t).casefold() for t in TOKEN.findall(text)]
    return any(stems & set(words(token)) and any(t in _VAGUE for t in tokens[max(0, i - 2):i])
               for i, token in enumerate(tokens))


def indefinite(text: str, stems: frozenset[str] | set[str]) -> bool:
    """Whether `text` speaks of the field (one of its `stems`) without saying which: an
    indefinite word up to `NEAR` tokens before the field's word ("one of my file", "a
    specific word"), or "someone", "something" right after it ("mention someone")."""
    tokens = [trim(t).casefold() for t in TOKEN.findall(text)]
    for i, token in enumerate(tokens):
        if not stems & set(words(token)):
            continue
        before = tokens[max(0, i - NEAR):i]
        if any(t in INDEFINITE or _INDEFINITE_RU.match(t) for t in before) \
                and (before[-1:] not in (["the"], ["that"], ["this"]) or before[-3:-1] in (
                    ["one", "of"], ["any", "of"], ["some", "of"], ["either", "of"])):
            return True  # ("a copy of the file" is that file; "one of the files" is none)
        if any(t in SOMEONE or _INDEFINITE_RU.match(t) for t in tokens[i + 1:i + 3]):
            return True
    return False


def trim(token: str) -> str:
    return token.strip(EDGE)
