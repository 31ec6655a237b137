"""The words that say a field's thing, and whether a message says which one: "a file",
"some folder", «какой-нибудь файл» speak of a file without naming it; "the last several
lines" of a count without giving it; "a specific word", «определённую операцию» of one
thing the user means and has not said. Read by the plain strings' reading (plain.py), the
grounding of counts (grounding.py) and the answer's check for what the user left unsaid
(unsaid.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from server.dialogue.language import identifier_words, words

NEAR = 3  # tokens between an indefinite word and the field's word, at most
TOKEN = re.compile(r"\S+")
EDGE = "\"'«»“”„‘’`()[]{}<>,.;:!?"
# A quoted text: a value as the user gives it ('TeamNotes.txt', «Отчёт», "Cheers!").
QUOTED = re.compile(
    r"(?<![\w'])'([^'\n]{1,200})'(?![\w'])|\"([^\"\n]{1,200})\"|«([^»\n]{1,200})»"
    r"|“([^”\n]{1,200})”|„([^“”\n]{1,200})[“”]|‘([^’\n]{1,200})’|`([^`\n]{1,200})`")

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


# Verbs of naming, which stem like a "name" field's word but say which thing it is.
_NAMING = frozenset({"named", "called", "titled", "labelled", "labeled", "naming"})


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
    quantity word up to two tokens before the field's word ("the last several lines"; "how
    many lines" asks for the number instead)."""
    tokens = [trim(t).casefold() for t in TOKEN.findall(text)]
    return any(stems & set(words(token)) and any(
        t in _VAGUE and not (t == "many" and tokens[j - 1:j] == ["how"])
        for j, t in enumerate(tokens[:i]) if j >= i - 2) for i, token in enumerate(tokens))


# Partitives: "one of the files" is none of them in particular; "a list of files" is a list.
_PARTITIVE = frozenset({"one", "any", "some", "either", "each"})
_DEFINITE = frozenset({"the", "that", "this", "these", "those"})


def indefinite(text: str, stems: frozenset[str] | set[str]) -> bool:
    """Whether `text` speaks of the field (one of its `stems`) without saying which: an
    indefinite word up to `NEAR` tokens before the field's word ("one of my file", "a
    specific word"), or "someone", "something" right after it ("mention someone"). Not:
    the head of another noun's phrase ("a list of files"), a definite one ("that specific
    message"), some of a plural ("some stocks", "any recent messages"), a name given ("a
    folder named backup"), or a word inside another ("a last-minute trip" is no "last")."""
    return indefinite_at(text, stems) is not None


def indefinite_at(text: str, stems: frozenset[str] | set[str]) -> int | None:
    """Where in `text` the first such phrase starts (`indefinite`), else None."""
    found = list(TOKEN.finditer(text))
    tokens = [trim(m.group()).casefold() for m in found]
    for i, token in enumerate(tokens):
        if token in _NAMING or not stems & set(said := words(token)) \
                or ("-" in token and not set(said) <= stems):
            continue  # ("a folder named backup" says which: no "name" without saying it)
        start = max(0, i - NEAR)
        at = next((j for j in range(i - 1, start - 1, -1)
                   if tokens[j] in INDEFINITE or _INDEFINITE_RU.match(tokens[j])), None)
        if at is not None and _unsaid(tokens, at, i):
            return found[at].start()
        if any(t in SOMEONE or _INDEFINITE_RU.match(t) for t in tokens[i + 1:i + 3]):
            return found[i].start()
    return None


def _unsaid(tokens: Sequence[str], at: int, i: int) -> bool:
    """Whether the indefinite word at `at` leaves the thing at `i` unsaid."""
    word, between = tokens[at], tokens[at + 1:i]
    if word in _PARTITIVE and between[:1] == ["of"]:
        return True  # "one of the files", "any of my folders"
    if "of" in between or (between and between[-1] in _DEFINITE) \
            or (at > 0 and tokens[at - 1] in _DEFINITE):
        return False  # "a list of files", "a copy of the file", "that specific message"
    plural = tokens[i].endswith("s") and not tokens[i].endswith("ss") and tokens[i].isascii()
    return not (word in ("some", "any") and plural)  # "some stocks": no one of them


# Words that say the user means one thing and has not said which: "a specific word",
# "a certain file", «определённую операцию», «конкретный счёт», "eine bestimmte Datei".
_MEANT = frozenset({"specific", "certain", "particular", "special", "précis", "précise",
                    "cierto", "cierta", "específico", "específica", "concreto", "concreta"})
_MEANT_RU_DE = re.compile(r"^(?:(?:определ[её]нн|конкретн)(?:ый|ая|ое|ую|ого|ой|ом|ому|ые"
                          r"|ых|ым|ыми)|bestimmte[nmrs]?)$")
# After these, "certain" and "specific" mean one thing the user has in mind; "certain" with
# none before it is sure ("I am certain").
_ONE_OF = frozenset({"a", "an", "some", "one", "ein", "eine", "einen", "einem", "einer",
                     "un", "une", "una", "uno"})
# Before the qualifier, these say which thing it is already ("the specific file", "my
# particular case", "no specific order").
_KNOWN = frozenset({"the", "this", "that", "these", "those", "my", "your", "its", "his",
                    "her", "our", "their", "no", "without", "same", "der", "die", "das",
                    "den", "dem", "le", "la", "les", "el", "los", "las", "этот", "эту",
                    "это", "этой", "том", "той", "тот", "ту", "без"})
# After the thing's word, these give it ("a specific word: goal", "a certain file named
# notes.txt", "a particular user, Anna").
_GIVEN_AFTER = frozenset({"named", "called", "titled", "labelled", "labeled", "saying",
                          "is", "like", "namely", "e.g.", "i.e.", "такой", "такое", "такая",
                          "под", "с", "genannt", "namens", "nommé", "nommée", "llamado",
                          "llamada"})


def meant_unsaid(text: str) -> tuple[str, int] | None:
    """The words of `text` that speak of one thing the user means without saying it ("a
    specific word", "some particular file", «определённую операцию»), as written (the
    qualifier and the word after it), and where in `text` they end; None where there is
    none, or where the message gives it right after ("a specific word: 'goal'", "a certain
    file named notes.txt", "a particular user, Anna")."""
    unquoted = QUOTED.sub(lambda m: " " * len(m.group()), text)  # (a value, as said)
    found = list(TOKEN.finditer(unquoted))
    raw = [m.group() for m in found]
    tokens = [trim(t).casefold() for t in raw]
    for i, token in enumerate(tokens[:-1]):
        if not (token in _MEANT or _MEANT_RU_DE.match(token)) or raw[i][-1:] in EDGE:
            continue  # ("in particular, ...": no thing follows)
        before = tokens[i - 1] if i else ""
        if token.isascii() and before not in _ONE_OF:
            continue  # ("specific attributes", "I am certain": no one thing meant)
        if before in _KNOWN:
            continue
        thing = raw[i + 1].strip(EDGE)
        if not thing or not any(c.isalpha() for c in thing) \
                or _gives(TOKEN.findall(text[found[i + 1].start():])[:4]):
            continue
        return f"{trim(raw[i])} {thing}", found[i + 1].end()
    return None


def _gives(after: Sequence[str]) -> bool:
    """Whether the tokens from the thing's word on give the thing: a quoted or name-shaped
    value, a number, a colon after the thing's word, or a word that names it."""
    if not after:
        return False
    if after[0].rstrip().endswith((":", "=")):
        return True
    for token in after[1:]:
        bare = trim(token)
        if token[:1] in "\"'«“„‘`" or bare.casefold() in _GIVEN_AFTER \
                or any(c.isdigit() for c in bare) or re.search(r"\w[._/@]\w|\w_\w", bare):
            return True
        if after[0].rstrip().endswith(",") and bare[:1].isupper():
            return True  # "a particular user, Anna"
    return False


def trim(token: str) -> str:
    return token.strip(EDGE)
