"""Runs of words of a message, and the spans that claim some of them (a date, a time, an
amount with its currency), looked up by position.

A message is read as runs of one to a few words (`spans`), each `MAX_SPAN_CHARS` at most. A
run that lies within a claim, or reaches into one, is no value of its own (`claimed`). Both
are linear in the message: a message of thousands of numbers has thousands of claims, and
each run looks only at the claims that start near it (`Spans`), never at all of them."""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Iterator

# No value is read from a longer run of words (the longest date or amount people write is
# far shorter): a run of digits of megabytes is no amount, and the readers' caches
# (server/dialogue/reading.py) hold 16,384 runs at most, so at most this many characters each.
MAX_SPAN_CHARS = 96
_WORDS = re.compile(r"\S+")

Span = tuple[int, int]


class Spans:
    """Spans of one text, sorted by where they start; those that may overlap a given span
    are found by bisection, looking back `MAX_SPAN_CHARS` (a longer one, a pattern's match,
    is kept aside and always looked at: a text holds few of them)."""

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        self._spans: list[Span] = []
        self._starts: list[int] = []
        self._long: list[Span] = []
        for span in spans:
            self.add(span)

    def __bool__(self) -> bool:
        return bool(self._spans or self._long)

    def add(self, span: Span) -> None:
        if span[1] - span[0] > MAX_SPAN_CHARS:
            self._long.append(span)
            return
        at = bisect.bisect_right(self._spans, span)
        self._spans.insert(at, span)
        self._starts.insert(at, span[0])

    def near(self, start: int, end: int) -> Iterator[Span]:
        """Every span that overlaps or holds [start, end), and a few that do not."""
        yield from self._long
        i = bisect.bisect_left(self._starts, start - MAX_SPAN_CHARS)
        while i < len(self._spans) and self._starts[i] <= end:
            yield self._spans[i]
            i += 1


def within(span: Span, claims: Spans) -> bool:
    """Whether `span` lies within one of `claims`: a date or a part of one ("30.11" is no
    amount 30.11 nor card 3011; "$30.11" is an amount)."""
    start, end = span
    return any(s <= start and end <= e for s, e in claims.near(start, end))


def claimed(span: Span, claims: Spans) -> bool:
    """Whether `span` lies within one of `claims` or reaches into one from outside: "руб 28"
    of "1500,00 руб 28 ноября" is no amount 28 (the 28 is the date's); a span that holds a
    whole claim and more ("$30.11") is its own."""
    start, end = span
    return any(s < end and start < e and not (start <= s and e <= end and (s, e) != span)
               for s, e in claims.near(start, end))


def spans(text: str, longest: int) -> Iterator[Span]:
    """Every run of 1..`longest` words of `text` up to `MAX_SPAN_CHARS` characters, and each
    without punctuation at its edges ("yesterday," -> "yesterday")."""
    words = [m.span() for m in _WORDS.finditer(text)]
    for i in range(len(words)):
        for j in range(i, min(i + longest, len(words))):
            start, end = words[i][0], words[j][1]
            if end - start > MAX_SPAN_CHARS:
                break
            yield start, end
            trimmed = trim(text, start, end)
            if trimmed != (start, end) and trimmed[0] < trimmed[1]:
                yield trimmed


def trim(text: str, start: int, end: int) -> Span:
    """`text[start:end]` without punctuation or symbols at its edges, signs and currencies
    kept ("$30," -> "$30")."""
    while start < end and unicodedata.category(text[start])[0] in "PS" \
            and text[start] not in "+-$€£₽¥":
        start += 1
    while end > start and unicodedata.category(text[end - 1])[0] in "PS" \
            and text[end - 1] not in "$€£₽¥%":
        end -= 1
    return start, end
