"""Loops the back-to-back repeat check (runaway.py) cannot see, because no two stretches of
tokens are identical, and the tokens that would carry them one step further:

- an array whose string items keep repeating earlier items, or the previous item with a
  changing tail (`"Stranger Things_2","Stranger Things_3",...`, `"minutes_rebounded",
  "points_rebounded","minutes_rebounded",...`): once SIMILAR_RUN items in a row do (or
  REPEAT_RUN in a row are exact copies of earlier ones), another
  item is not started (the separator tokens are avoided), so the model ends the array or
  its current item itself;
- an array writing the same number again and again (`[85,90,91,91,91,91,...`): the
  separator after its NUMBER_RUN-th time in a row is avoided;
- an object nesting the same key ever deeper (`{"gradeDict":{"type":{..},"gradeDict":{..`):
  a key already KEY_REPEATS times on the path of open objects is not written again.

Only tokens are avoided; nothing is written for the model. The thresholds stay above what
BFCL's gold values hold (`strictcall-bench runaway --thresholds` prints the measurements).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from server.engines.json_text import JsonLexer

# Items in a row, each an earlier item again or the previous one with a changed tail, and
# none found in the conversation, after which an array's string items count as a loop. High
# enough for a real list of a few such items (report_1 ... report_6, a week of dates); a
# loop goes on until max_tokens, so it is still stopped, a few items later.
SIMILAR_RUN = 6
# Items in a row, each exactly an earlier item again (copied from the conversation or not):
# sooner, since a real list rarely writes its items again, and where the grammar forces an
# enum item's text after its first token the back-to-back check would cut the decode at the
# fourth copy, before steering could end the list.
REPEAT_RUN = 2
# A shared prefix at least this long (characters, and half the shorter item) makes the
# next item a variant of the previous one.
MIN_PREFIX = 4
# Times a key may already stand on the path of open objects before it is not written again
# (a tree three levels deep is written whole).
KEY_REPEATS = 3
# The same number this many times in a row (`[85,90,91,91,91,91,...`) ends the array's
# items; fewer stay a real vector (BFCL's gold values hold at most 2; ten zeros pass).
NUMBER_RUN = 16

# A token that, written inside a string item, closes it and starts another item.
_CLOSES_AND_SEPARATES = re.compile(r'^(?:[^"\\]|\\.)*"\s*,')
# A token that, written after a complete item, starts another item.
_SEPARATES = re.compile(r"^\s*,")
# A token that, written inside a number item, ends it and starts another item.
_ENDS_AND_SEPARATES = re.compile(r"^[0-9.eE+-]*\s*,")


@dataclass
class _Open:
    """One open container of the JSON text."""

    kind: str  # "{" or "["
    items: list[str | None] = field(default_factory=list)  # an array's (None: not a string)
    key: str | None = None  # an object's key whose value is being written
    expect_key: bool = True  # an object waiting for a key (after `{` or `,`)
    scalar: bool = False  # an array's number/literal item is being written
    scalar_text: str = ""  # its text so far
    last_scalar: str | None = None  # the item before, when it was a number/literal
    scalar_run: int = 0  # how many times in a row `last_scalar` stands at the end

    def end_scalar(self) -> None:
        same = self.scalar_text == self.last_scalar
        self.scalar_run = self.scalar_run + 1 if same else 1
        self.last_scalar, self.scalar_text, self.scalar = self.scalar_text, "", False
        self.items.append(None)


class JsonShape:
    """The open containers of a JSON text read as it grows (never validated: the grammar
    does that), and where the text ends: inside a string (which one) or between values."""

    def __init__(self, evidence: str = "") -> None:
        self.evidence = evidence  # the conversation: an item found there is copied, not a loop
        self._reset()

    def _reset(self) -> None:
        self.text = ""
        self.stack: list[_Open] = []
        self.role = ""  # the open string's: "key", "item" or "value"
        self.buf = ""  # the open string's text so far
        self._lexer = JsonLexer()

    @property
    def in_string(self) -> bool:
        return self._lexer.in_string

    def update(self, text: str) -> None:
        if not text.startswith(self.text):
            self._reset()  # not a continuation (calls text rewritten): read it afresh
        for ch in text[len(self.text):]:
            self._feed(ch)
        self.text = text

    def _feed(self, ch: str) -> None:
        top = self.stack[-1] if self.stack else None
        kind = self._lexer.kind(ch)
        if kind == "char":  # an escaped character stands for itself in the string's text
            self.buf += ch
        elif kind == "escape":
            pass
        elif kind == "unquote":
            if top is not None and self.role == "item":
                top.items.append(self.buf)
            elif top is not None and self.role == "key":
                top.key = self.buf
        elif kind == "quote":
            if top is not None:
                top.last_scalar, top.scalar_run = None, 0
            self.buf = ""
            self.role = ("key" if top.kind == "{" and top.expect_key else "item"
                         if top.kind == "[" else "value") if top else "value"
        elif kind == "open":
            if top is not None and top.kind == "[":
                top.items.append(None)
                top.last_scalar, top.scalar_run = None, 0
            self.stack.append(_Open(ch))
        elif kind == "close":
            if top is not None and top.scalar:
                top.end_scalar()
            if self.stack:
                self.stack.pop()
        elif top is None:
            return
        elif kind == "colon":
            top.expect_key = False
        elif kind == "comma":
            if top.kind == "{":
                top.expect_key, top.key = True, None
            elif top.scalar:
                top.end_scalar()
        elif top.kind == "[" and kind == "scalar":
            top.scalar = True
            top.scalar_text += ch

    # -- what loops ------------------------------------------------------------------
    def items_loop(self) -> bool:
        """Whether the innermost array's string items loop (see SIMILAR_RUN), the item
        being written counted as it stands (one token may close it and start the next)."""
        top = self.stack[-1] if self.stack else None
        if top is None or top.kind != "[":
            return False
        if _looping(top.items, self.evidence):
            return True
        return self.in_string and self.role == "item" and \
            _looping([*top.items, self.buf], self.evidence)

    def numbers_loop(self) -> bool:
        """Whether the number being written (or just written) in the innermost array would
        be the same number NUMBER_RUN times in a row."""
        top = self.stack[-1] if self.stack else None
        if top is None or top.kind != "[" or self.in_string:
            return False
        if top.scalar:
            return top.scalar_text == top.last_scalar and top.scalar_run + 1 >= NUMBER_RUN
        return False

    def repeated_keys(self) -> set[str]:
        """Keys that may not be written as the open object's next key: those already
        KEY_REPEATS times on the path of open objects."""
        if not (self.in_string and self.role == "key") or len(self.stack) < 2:
            return set()
        path = [o.key for o in self.stack[:-1] if o.kind == "{" and o.key is not None]
        return {k for k in set(path) if path.count(k) >= KEY_REPEATS}


def _looping(items: Sequence[str | None], evidence: str) -> bool:
    return similar_run(items, evidence) >= SIMILAR_RUN or \
        similar_run(items, evidence, exact=True) >= REPEAT_RUN


def similar_run(items: Sequence[str | None], evidence: str = "", *,
                exact: bool = False) -> int:
    """How many items at the end of `items` in a row each repeat an earlier item, or vary
    the one before it (a shared prefix, a changed tail) without being found in `evidence`
    (the conversation: a variant copied from it is a list the user gave, not a loop; an item
    written again is a loop wherever it came from). `exact`: repeats only."""
    run = 0
    for i in range(len(items) - 1, 0, -1):
        item = items[i]
        if item is None:
            break
        repeated = item in items[:i]
        copied = bool(evidence) and item in evidence
        if not (repeated or (not exact and not copied and _variant(items[i - 1], item))):
            break
        run += 1
    return run


def _variant(before: str | None, item: str) -> bool:
    if before is None:
        return False
    shared = 0
    for a, b in zip(before, item, strict=False):
        if a != b:
            break
        shared += 1
    return shared >= MIN_PREFIX and shared * 2 >= min(len(before), len(item))


class Vocabulary:
    """The text of each token id, and the ids that start another array item."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.closes_and_separates = frozenset(
            i for i, t in enumerate(texts) if "," in t and _CLOSES_AND_SEPARATES.match(t))
        self.separates = frozenset(
            i for i, t in enumerate(texts) if "," in t and _SEPARATES.match(t))
        self.ends_and_separates = frozenset(
            i for i, t in enumerate(texts) if "," in t and _ENDS_AND_SEPARATES.match(t))

    def completing(self, written: str, keys: set[str]) -> set[int]:
        """Ids whose text, after a key's `written` part, writes the rest of one of `keys`
        (or closes it, once all of it is written)."""
        ends = tuple(k[len(written):] or '"' for k in keys if k.startswith(written))
        if not ends:
            return set()
        return {i for i, t in enumerate(self.texts) if t.startswith(ends)}


def item_steering(shape: JsonShape, vocabulary: Callable[[], Vocabulary]) -> set[int]:
    """The tokens to avoid next, given the JSON text's shape (the vocabulary is only
    needed, and built, once something loops)."""
    banned: set[int] = set()
    if shape.items_loop():
        vocab = vocabulary()
        banned |= vocab.closes_and_separates if shape.in_string else vocab.separates
    if shape.numbers_loop():
        banned |= vocabulary().ends_and_separates
    keys = shape.repeated_keys()
    if keys:
        banned |= vocabulary().completing(shape.buf, keys)
    return banned


_VOCABULARIES: weakref.WeakKeyDictionary[Any, Vocabulary] = weakref.WeakKeyDictionary()


def vocabulary_of(tokenizer: Any) -> Callable[[], Vocabulary]:
    """A lazy `Vocabulary` of a Hugging Face tokenizer, built once per tokenizer (a few
    tenths of a second) the first time a guard needs it."""
    def build() -> Vocabulary:
        vocab = _VOCABULARIES.get(tokenizer)
        if vocab is None:
            texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
            vocab = _VOCABULARIES[tokenizer] = Vocabulary(texts)
        return vocab
    return build
