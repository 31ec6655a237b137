"""How the user's answer to a confirmation question is read ("Earlier the amount was
1200.50; now you said 1300.00. Should I use 1300.00 instead of 1200.50?").

Read from the user's messages after the question, before any model sees them:
1. they state the new value again ("1 300,00 is right")  -> confirmed;
2. they state the old value (and not the new)            -> declined: the old one stays;
3. they state a third value                             -> superseded: that one is the
   next change to confirm;
4. else by meaning, in English, Russian or German: phrases first ("no problem", "не
   против", "go ahead", "keep the old one", "как было", and doubt: "not sure", "не
   знаю"), then single words ("yes", "ок", "угу", "нет", "cancel"). Only yes -> confirmed;
   only no -> declined; both ("yes, no wait"), doubt or neither -> unanswered: the change
   keeps waiting and the question is asked again. An irreversible call never goes out on
   a reply that says both.
The model never decides it: a 135M model's reading of "yes" is no ground for an
irreversible call."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

Verdict = Literal["confirmed", "declined", "superseded", "unanswered"]
Meaning = Literal["yes", "no", "unsure"]

# Phrases, longest first where they overlap; a word ending in "*" matches any word it
# starts (Russian's endings: "оставьте", "оставь", "оставить").
_PHRASES: tuple[tuple[str, Meaning], ...] = (
    # Doubt: whatever else the reply says, it is no answer yet
    ("not sure", "unsure"), ("don't know", "unsure"), ("do not know", "unsure"),
    ("no idea", "unsure"), ("maybe", "unsure"), ("not yet", "unsure"),
    ("не знаю", "unsure"), ("не уверен*", "unsure"), ("может быть", "unsure"),
    ("наверное", "unsure"), ("пока не", "unsure"), ("weiß nicht", "unsure"),
    ("nicht sicher", "unsure"), ("vielleicht", "unsure"),
    # English
    ("no problem", "yes"), ("no worries", "yes"), ("why not", "yes"), ("go ahead", "yes"),
    ("do it", "yes"), ("sounds good", "yes"), ("that's right", "yes"),
    ("that is right", "yes"), ("of course", "yes"), ("please do", "yes"),
    ("use the new", "yes"), ("not wrong", "yes"), ("keep the old", "no"),
    ("keep it", "no"), ("as it was", "no"), ("as before", "no"), ("leave it", "no"),
    ("never mind", "no"), ("do not", "no"), ("don't", "no"), ("not right", "no"),
    ("not correct", "no"),
    # Russian
    ("не против", "yes"), ("без проблем", "yes"), ("не вопрос", "yes"),
    ("так и есть", "yes"), ("всё верно", "yes"), ("все верно", "yes"),
    ("как было", "no"), ("как раньше", "no"), ("не надо", "no"), ("не нужно", "no"),
    ("не то", "no"), ("не верно", "no"), ("не так", "no"), ("не меняй*", "no"),
    # German
    ("kein problem", "yes"), ("in ordnung", "yes"), ("passt schon", "yes"),
    ("wie vorher", "no"), ("lass es", "no"), ("nicht ändern", "no"), ("nicht richtig", "no"),
)
# Single words, by what they say (English, Russian, German).
_WORD_LISTS: tuple[tuple[Meaning, str], ...] = (
    ("yes", """yes yeah yep yup yea sure ok okay k correct right confirm confirmed exactly
               indeed absolutely definitely fine agreed affirmative proceed
               да ага угу ок окей хорошо конечно верно правильно точно соглас* подтвержда*
               давай* ладно годится идёт идет разумеется именно меняй* используй*
               ja jawohl genau richtig stimmt klar gerne bestätige* einverstanden"""),
    ("no", """no nope nah cancel stop wrong incorrect keep
              нет неверно неправильно отмен* остав* стоп старое старую старый
              nein falsch abbrechen nicht behalten"""),
)
_WORDS: dict[str, Meaning] = {w: said for said, text in _WORD_LISTS for w in text.split()}
_TOKEN = re.compile(r"[\w']+", re.UNICODE)


def verdict(texts: Sequence[str], *, stated: Sequence[Any], old: Any, new: Any) -> Verdict:
    """`texts`: the user's messages since the question; `stated`: the values (normalized
    as the slot's) they give the field in question."""
    if new in stated:
        return "confirmed"
    if old in stated:
        return "declined"
    if stated:
        return "superseded"
    meanings = set()
    for text in texts:
        meanings |= meaning(text)
    if meanings == {"yes"}:
        return "confirmed"
    if meanings == {"no"}:
        return "declined"
    return "unanswered"


def meaning(text: str) -> set[Meaning]:
    """What a reply says: yes, no, both, or nothing."""
    tokens = [t.casefold() for t in _TOKEN.findall(text)]
    found: set[Meaning] = set()
    used = [False] * len(tokens)
    for phrase, said in _PHRASES:
        parts = phrase.split()
        for i in range(len(tokens) - len(parts) + 1):
            if not any(used[i:i + len(parts)]) and all(
                    _matches(p, t) for p, t in zip(parts, tokens[i:i + len(parts)],
                                                   strict=True)):
                found.add(said)
                used[i:i + len(parts)] = [True] * len(parts)
    for i, token in enumerate(tokens):
        if not used[i]:
            said_by = _word(token)
            if said_by is not None:
                found.add(said_by)
    return found


def _word(token: str) -> Meaning | None:
    if token in _WORDS:
        return _WORDS[token]
    return next((said for word, said in _WORDS.items()
                 if word.endswith("*") and token.startswith(word[:-1])), None)


def _matches(pattern: str, token: str) -> bool:
    return token.startswith(pattern[:-1]) if pattern.endswith("*") else token == pattern
