"""A call the conversation already made, made again without being asked: the same tool
with the same values as a call of an exchange before the user's newest message, where
that message restates none of the values and asks for nothing again.

A model that lacks a value the user's newest request needs often writes the call it
already made instead (BFCL's missing-parameter turns: `authenticate_twitter` with the
credentials of two turns before, while the user asked for something else). The answer
asks instead (`Wording.done_before`): do it again, or with what other values. It is
made where:

- the user's newest message restates one of its values and speaks of the tool's action
  (a word of its name, or of its description that no other offered tool's has: "grep
  'error' in log.txt" twice; "put numbers into 'DataSet1.csv'" names the file a `touch`
  created, not another `touch`), or asks for it again ("again", "once more", «ещё раз»,
  "nochmal", "is it there now?");
- the user answers yes to that very question;
- the tool reads (a contract's kind `read`, a client tool's `x-strictcall-kind: read`):
  asking for a repeated read is a poll; or the call has no values ("list the files");
- the call follows the newest message inside the agent loop's own turn (a retry after a
  tool's error is the loop's to make)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from server.dialogue.language import identifier_words, words
from server.dialogue.replies import meaning
from server.dialogue.values import leaves
from server.task import Turn

# Asked again: "again", "once more", "retry", «ещё раз», «снова», "nochmal", "erneut"; and
# "now" or "still" inside a question ("Is it there now?"), not a request's opening "Now,".
AGAIN = re.compile(
    r"(?i)\b(?:again|once more|one more time|re-?try|re-?run|re-?do|repeat|refresh|"
    r"ещё раз|еще раз|снова|опять|повтор\w*|заново|обнови\w*|"
    r"erneut|nochmal|noch einmal|wieder\w*|wiederhol\w*|aktualisier\w*|"
    r"de nouveau|encore|otra vez|de nuevo)\b"
    r"|(?<=\w)\W+(?:now|yet|still|сейчас|теперь|уже|jetzt|schon|noch)\b")


def made_before(turns: Sequence[Turn], name: str, arguments: dict[str, Any], *,
                action: Callable[[], frozenset[str]] | None = None
                ) -> dict[str, Any] | None:
    """The values of an earlier exchange's call that `name(arguments)` repeats, where the
    user's newest message neither restates one of them (with a word of the tool's
    `action`, its stems, read only where a value is restated; None: unknown, a restated
    value is enough) nor asks again (None: not such a repeat)."""
    values = {k: v for k, v in arguments.items() if v is not None}
    if not values:
        return None
    newest = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), -1)
    if newest < 0:
        return None
    same = _canonical(values)
    if not any(c.name == name and isinstance(c.arguments, dict)
               and _canonical({k: v for k, v in c.arguments.items() if v is not None}) == same
               for t in turns[:newest] if t.role == "assistant" for c in t.calls):
        return None
    said = turns[newest].text
    if AGAIN.search(said):
        return None
    if any(_says(said, v) for v in leaves(values)) \
            and (action is None or action() & set(words(said))):
        return None
    return values


def action_words(name: str, description: str | None, others: Sequence[str]) -> frozenset[str]:
    """The stems that say a tool's action: its name's words, and its description's words
    that none of `others` (the other offered tools' names and descriptions) has."""
    shared = {w for text in others for w in words(" ".join(identifier_words(text)))}
    own = set(words(" ".join(identifier_words(name))))
    return frozenset(own | (set(words(description or "")) - shared))


def answered_yes(turns: Sequence[Turn], question: str) -> bool:
    """Whether the user's newest message says yes to `question`, asked just before it."""
    newest = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"), -1)
    asked = next((t for t in reversed(turns[:max(newest, 0)]) if t.role == "assistant"), None)
    return (newest >= 0 and asked is not None and question.strip() in asked.text
            and meaning(turns[newest].text) == {"yes"})


def _canonical(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"))



def _says(text: str, value: Any) -> bool:
    """Whether `text` writes `value`: a string as written (any case), a number's digits."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        digits = f"{value:g}" if isinstance(value, float) else str(value)
        return re.search(rf"(?<![\d.,]){re.escape(digits)}(?![\d]|[.,]\d)", text) is not None
    shown = str(value).strip().casefold()
    return len(shown) > 1 and shown in text.casefold()
