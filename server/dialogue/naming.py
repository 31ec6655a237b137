"""Which field a message means a value for: "make it 5 nights" ties 5 to `nights`, not to
`guests`; "сумма была 1 300,00" ties the amount. A field is named by its own words (its
key's parts, its description, its `About` texts in every language), stemmed per
language, and only by words no other field of the tool shares ("number" of nights and of
guests names neither), and never by words that are values themselves ("today"). A value is
tied to the field whose word is nearest to it within a few words of the same sentence, among
the fields that can take it ("Hotel" names the city, never the 3 of "3 nights")."""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.dialogue.language import identifier_words, words
from server.dialogue.marks import Marked, Path
from server.dialogue.reading import date_word

NEAR = 4  # words between a value and a field's word, at most
WINDOW = 240  # characters either side of a value that are read for the words naming it
_TOKEN = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?;]\s|\n")


# Words that start another event after a call ("one more", "и ещё одна", "noch eine").
NEW_INTENT = re.compile(
    r"(?i)\b(another|one more|a second|a new|new one|ещё|еще|другой|другая|другую|другое|"
    r"новый|новая|новую|новое|noch eine?|weitere|une autre|un autre|otro|otra)\b")
# A message that opens with another event ("One more:", «И ещё одна: ...», "Noch eine"):
# another intent even where nothing was filed yet (an unfinished first one's values stay
# behind). Only at the message's start: «я ещё не получил» is no new event.
OPENS_NEW_INTENT = re.compile(
    r"(?i)^\W*(?:(?:and|also|plus|и|а|ещё|еще|und|et|y)\W+)?(?:one more|another one|"
    r"another|a second one|ещё одн\w*|еще одн\w*|ещё один|еще один|noch eine?\w*|"
    r"une autre|un autre|otr[oa] más|otr[oa])\b"
    # ("Another thing: the amount was 1 300", «ещё один вопрос»: more of the same request.)
    r"(?!\W+(?:thing|question|detail|point|note|вопрос\w*|детал\w*|момент\w*|"
    r"уточнени\w*|frage|sache|detail\w*)\b)")
# "Not 4417 but 4471", «не 4417, а 4471», "nicht 4417, sondern 4471", "no 4417 sino 4471",
# and with the thing counted after the old value («не 3 ночи, а 4», "not 3 nights but 4"):
# the second value takes the first one's place, and its field (ending where the value starts).
_INSTEAD_OF = (r"(?i)\b(?:not|не|nicht|pas|no)\s+(?P<old>[\w.,-]*\w)(?:\s+[^\W\d_]+){0,2}?"
               r"\s*,?\s*(?:but(?: rather)?|а|sondern|mais|sino|ma)\s+")
_INSTEAD = re.compile(_INSTEAD_OF + "$")
_REPLACED = re.compile(_INSTEAD_OF + r"(?=\w)")


# The new value first: "4471 not 4417", «4471, а не 4417», "4471, nicht 4417" (values with
# digits only: «500, не помню когда» takes nothing back). Found from each "not" forward, and
# the value before it read backwards a word at most: linear in the message.
_NOT_THEN = re.compile(r"(?i)(?<![\w.-])(?:not|не|nicht|no|pas)\s+(?P<old>[\w.-]+)")
_AND = ("and", "а", "y", "und")
_LONGEST_VALUE = 40


def replaced(text: str) -> list[tuple[int, int]]:
    """The spans of values `text` takes back ("не 4417, а 4471": 4417), no value of it."""
    out = [m.span("old") for m in _REPLACED.finditer(text)]
    for found in _NOT_THEN.finditer(text):
        if any(c.isdigit() for c in found.group("old")) and _value_before(text, found.start()):
            out.append(found.span("old"))
    return out


def _value_before(text: str, end: int) -> bool:
    """Whether a value with digits ends just before `end` ("4471, а " before "не 4417")."""
    def skip_space(i: int) -> int:
        while i > 0 and text[i - 1].isspace():
            i -= 1
        return i

    def value_char(c: str) -> bool:
        return c.isalnum() or c in "_.-"

    i = skip_space(end)
    for word in _AND:
        start = i - len(word)
        if start >= 0 and text[start:i].casefold() == word and (
                start == 0 or not value_char(text[start - 1])):
            i = skip_space(start)
            break
    if i > 0 and text[i - 1] == ",":
        i = skip_space(i - 1)
    j = i
    while j > 0 and i - j <= _LONGEST_VALUE and value_char(text[j - 1]):
        j -= 1
    return i - j <= _LONGEST_VALUE and any(c.isdigit() for c in text[j:i])


# "The same card", "с той же карты", "dieselbe Karte", "la même carte".
_SAME = frozenset({"same", "же", "тот", "та", "той", "том", "тем", "того", "gleiche",
                   "gleichen", "selbe", "selben", "dieselbe", "denselben", "même", "mismo",
                   "misma"})


_PEOPLE = frozenset(words(
    "guest guests people person persons passenger passengers traveller travellers "
    "traveler travelers гость гостей гостя гости человек человека людей персон персоны "
    "пассажир пассажира пассажиров gast gäste personen reisende huésped huéspedes persona "
    "personas pasajero pasajeros invité invités personne personnes voyageurs"))


@dataclass(frozen=True)
class FieldWords:
    """Each field's distinctive stems."""

    by_field: Mapping[Path, frozenset[str]]

    @classmethod
    def of(cls, texts: Mapping[Path, Sequence[str]]) -> FieldWords:
        """`texts`: per field, the words that describe it (any language)."""
        stems = {path: {s for t in ts for w in _TOKEN.findall(t) if not date_word(w)
                        for s in words(w) if len(s) > 1 and not s.isdigit()}
                 for path, ts in texts.items()}
        # The one field that counts people (guests, passengers) is named by any word for
        # people: "3 people", «2 человека», "4 personas", and a collective numeral, which
        # number_words reads as that many «человек».
        people = [path for path, found in stems.items() if found & _PEOPLE]
        if len(people) == 1:
            stems[people[0]] = stems[people[0]] | _PEOPLE
        counts: dict[str, int] = {}
        for found in stems.values():
            for stem in found:
                counts[stem] = counts.get(stem, 0) + 1
        return cls({path: frozenset(s for s in found if counts[s] == 1)
                    for path, found in stems.items()})

    def referred_back(self, text: str) -> set[Path]:
        """The fields `text` refers back to, a field's word within `NEAR` words after
        "same" ("the same card", "с той же карты"): an earlier intent's value they may
        take."""
        tokens = _TOKEN.findall(text)
        out: set[Path] = set()
        for i, token in enumerate(tokens):
            if token.casefold() not in _SAME:
                continue
            for later in tokens[i + 1:i + 1 + NEAR]:
                stems = set(words(later))
                out.update(p for p, names in self.by_field.items() if stems & names)
        return out

    def naming(self, text: str, start: int, end: int) -> dict[Path, int]:
        """The fields the value at text[start:end] is said of. In the value's sentence,
        each word of a field names the run of digits nearest to it (within `NEAR` words):
        "card 4417 was charged 1 200,50" names 4417, not the amount, by the card; "5
        nights and 3 guests" gives each number its own field. Each with its word's distance
        from the value: the caller keeps the nearest of those that can take it (`closest`)."""
        # (The sentence within `WINDOW` characters of the value: a field's word names it
        # from `NEAR` words away at most. The message's words, runs of digits and sentence
        # ends are found once (`_Layout`); per value only the few words near it are looked
        # at, so a message of thousands of numbers costs no more per value than a short one.)
        layout = _layout(text)
        low, high = max(0, start - WINDOW), min(len(text), end + WINDOW)
        sentence_start, sentence_end = layout.sentence(low, start, end, high)
        ia, ib = layout.tokens_within(sentence_start, sentence_end)
        own = range(max(ia, bisect.bisect_right(layout.ends, start)),
                    min(ib, bisect.bisect_left(layout.starts, end)))
        run = functools.partial(layout.run, ia, ib)
        # A value said in words ("гостей будет двое") is a run of its own, which a field's
        # word names like digits.
        extra = (own[0], own[-1]) if own and not layout.digits[own[0]] else None
        valued = [r for r in [*(run(i) for i in own if layout.digits[i]), extra] if r]
        named: dict[Path, int] = {}
        if valued:
            first = max(ia, min(f for f, _ in valued) - NEAR)
            last = min(ib - 1, max(la for _, la in valued) + NEAR)
            for i in layout.worded(first, last):
                if i in own:
                    continue  # the value's own words ("OP" of OP-204518) name nothing
                stems = _stems(layout.tokens[i][2])
                fields = [p for p, names in self.by_field.items() if stems & names]
                if not fields:
                    continue
                near = {run(k) for k in range(max(ia, i - NEAR), min(ib, i + NEAR + 1))
                        if layout.digits[k]}
                nearest = _nearest(sorted(r for r in {*near, extra} if r), i, text,
                                   layout.tokens)
                if nearest is None:
                    continue
                distance, (f, la) = nearest
                if layout.tokens[f][0] < end and layout.tokens[la][1] > start:  # the value's
                    for field in fields:
                        named[field] = min(distance, named.get(field, distance))
        if not named:  # "карта не 4417, а 4471": the value replaces one named just before
            said = _INSTEAD.search(text, max(sentence_start, start - 60), start)
            if said is not None:
                return self.naming(text, *said.span("old"))
        return named


class _Layout:
    """A message's words (with which hold digits, and the runs those make) and its
    sentence ends, found once and looked up by position."""

    def __init__(self, text: str) -> None:
        self.tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text)]
        self.starts = [s for s, _, _ in self.tokens]
        self.ends = [e for _, e, _ in self.tokens]
        self.digits = [any(c.isdigit() for c in t) for _, _, t in self.tokens]
        # Words with a letter: only these can be a field's word.
        self.lettered = [i for i, (_, _, t) in enumerate(self.tokens) if not t.isdigit()]
        self.run_first = list(range(len(self.tokens)))
        self.run_last = list(range(len(self.tokens)))
        for i in range(1, len(self.tokens)):
            if self.digits[i] and self.digits[i - 1]:
                self.run_first[i] = self.run_first[i - 1]
        for i in range(len(self.tokens) - 2, -1, -1):
            if self.digits[i] and self.digits[i + 1]:
                self.run_last[i] = self.run_last[i + 1]
        stops = list(_SENTENCE_END.finditer(text))
        self.stop_starts = [m.start() for m in stops]
        self.stop_ends = [m.end() for m in stops]

    def sentence(self, low: int, start: int, end: int, high: int) -> tuple[int, int]:
        """The sentence around text[start:end], within [low, high)."""
        before = bisect.bisect_right(self.stop_ends, start) - 1
        first = self.stop_ends[before] if before >= 0 and \
            self.stop_starts[before] >= low else low
        after = bisect.bisect_left(self.stop_starts, end)
        last = self.stop_starts[after] if after < len(self.stop_starts) and \
            self.stop_ends[after] <= high else high
        return first, last

    def tokens_within(self, start: int, end: int) -> tuple[int, int]:
        """The indices [ia, ib) of the words that lie within text[start:end]."""
        ia, ib = bisect.bisect_left(self.starts, start), bisect.bisect_left(self.starts, end)
        while ib > ia and self.ends[ib - 1] > end:
            ib -= 1
        return ia, ib

    def run(self, ia: int, ib: int, i: int) -> tuple[int, int]:
        """The run of digit-holding words word `i` is in, within words [ia, ib)."""
        return max(ia, self.run_first[i]), min(ib - 1, self.run_last[i])

    def worded(self, first: int, last: int) -> list[int]:
        """The words with a letter among words first..last."""
        lo = bisect.bisect_left(self.lettered, first)
        hi = bisect.bisect_right(self.lettered, last)
        return self.lettered[lo:hi]


@functools.lru_cache(maxsize=32)
def _layout(text: str) -> _Layout:
    return _Layout(text)


@functools.lru_cache(maxsize=16_384)
def _stems(token: str) -> frozenset[str]:
    """A token's stems (a value's sentence is read once per value near it: each word's
    stems are worked out once)."""
    return frozenset(words(token))


def closest(named: Mapping[Path, int], takers: Iterable[Path]) -> set[Path]:
    """Of the fields `named` names a value for (with their words' distances), those of
    `takers` (the fields that can take it) whose word is nearest: "for 2 nights for one
    guest" gives 2 to the nights ("guest" is three words off, and "one" no digits it could
    name), not to both (then to neither)."""
    near = {path: d for path, d in named.items() if path in set(takers)}
    best = min(near.values(), default=0)
    return {path for path, d in near.items() if d == best}


def _nearest(runs: list[tuple[int, int]], at: int, text: str,
             tokens: list[tuple[int, int, str]]) -> tuple[int, tuple[int, int]] | None:
    """The run of digits nearest to token `at`, with its distance; a comma or colon between
    them counts as more words ("card 4417, amount 1 200,50": the amount is the second
    run's)."""
    best: tuple[int, tuple[int, int]] | None = None
    for first, last in runs:
        distance = first - at if at < first else at - last if at > last else 0
        if distance > NEAR:
            continue
        left, right = (tokens[at][1], tokens[first][0]) if at < first else \
            (tokens[last][1], tokens[at][0])
        distance += 2 * sum(text[left:right].count(c) for c in ",;:(")
        if best is None or distance < best[0]:
            best = (distance, (first, last))
    return best


def describing_texts(path: Path, *, description: str | None,
                     about: Mapping[str, str]) -> list[str]:
    """The texts that say what a field is, for `FieldWords.of` (not its question, whose
    "please" and "tell me" name nothing)."""
    return [" ".join(identifier_words(path[-1])), *(t for t in (description,) if t),
            *about.values()]


def field_words(schema: dict[str, Any], marks: Sequence[Marked]) -> FieldWords:
    """The distinctive words of a tool's top-level fields."""
    props = schema.get("properties") or {}
    about = {m.path: m.about for m in marks}
    texts: dict[Path, list[str]] = {}
    for name, node in props.items():
        description = node.get("description") if isinstance(node, dict) else None
        texts[(name,)] = describing_texts(
            (name,), description=description if isinstance(description, str) else None,
            about=about.get((name,), {}))
    return FieldWords.of(texts)
