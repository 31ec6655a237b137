"""How the user's answer to a confirmation question is read ("Earlier the amount was
1200.50; now you said 1300.00. Should I use 1300.00 instead of 1200.50?").

Read from the user's messages after the question, before any model sees them, by rule:
1. they state the new value again ("1 300,00 is right")  -> confirmed;
2. they state the old value (and not the new)            -> declined: the old one stays;
3. they state a third value                             -> superseded: that one is the
   next change to confirm;
4. else a word: yes / correct / confirm / да / верно ... -> confirmed, unless a word of
   no / not / keep / cancel / нет / не ... is there too  -> declined (a "yes, no wait"
   keeps what the user first said: doing nothing new is the side a mistake can afford);
5. nothing of these                                     -> unanswered: the change keeps
   waiting, and the question is asked again.
The model never decides it: a 135M model's reading of "yes" is no ground for an
irreversible call."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

Verdict = Literal["confirmed", "declined", "superseded", "unanswered"]

_YES = frozenset({"yes", "yeah", "yep", "yup", "correct", "right", "confirm", "confirmed",
                  "sure", "ok", "okay", "exactly", "indeed", "affirmative", "да", "верно",
                  "подтверждаю", "правильно", "ага", "точно", "конечно"})
_NO = frozenset({"no", "nope", "not", "don't", "dont", "wrong", "cancel", "keep", "stop",
                 "нет", "не", "неверно", "отмена", "оставь", "оставьте"})
_WORD = re.compile(r"[\w']+")


def verdict(texts: Sequence[str], *, stated: Sequence[Any], old: Any, new: Any) -> Verdict:
    """`texts`: the user's messages since the question; `stated`: the values (normalized
    as the slot's) they give the field in question."""
    if new in stated:
        return "confirmed"
    if old in stated:
        return "declined"
    if stated:
        return "superseded"
    words = {w.casefold() for text in texts for w in _WORD.findall(text)}
    if words & _NO:
        return "declined"
    if words & _YES:
        return "confirmed"
    return "unanswered"
