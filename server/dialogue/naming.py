"""Which field a message means a value for: "make it 5 nights" ties 5 to `nights`, not to
`guests`; "сумма была 1 300,00" ties the amount. A field is named by its own words (its
key's parts, its description, its `About` texts in every language), stemmed per
language, and only by words no other field of the tool shares ("number" of nights and of
guests names neither). A value is tied to the named field nearest to it within a few
words of the same sentence."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from server.dialogue.language import identifier_words, words
from server.dialogue.marks import Path

NEAR = 4  # words between a value and a field's word, at most
_TOKEN = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?;]\s|\n")


@dataclass(frozen=True)
class FieldWords:
    """Each field's distinctive stems."""

    by_field: Mapping[Path, frozenset[str]]

    @classmethod
    def of(cls, texts: Mapping[Path, Sequence[str]]) -> FieldWords:
        """`texts`: per field, the words that describe it (any language)."""
        stems = {path: {s for t in ts for s in words(t) if len(s) > 1 and not s.isdigit()}
                 for path, ts in texts.items()}
        counts: dict[str, int] = {}
        for found in stems.values():
            for stem in found:
                counts[stem] = counts.get(stem, 0) + 1
        return cls({path: frozenset(s for s in found if counts[s] == 1)
                    for path, found in stems.items()})

    def tied(self, text: str, start: int, end: int) -> Path | None:
        """The field the value at text[start:end] is said of: the nearest named one in its
        sentence, within `NEAR` words (None: no field named there)."""
        sentence_start = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)),
                             default=0)
        stop = _SENTENCE_END.search(text, end)
        sentence_end = stop.start() if stop else len(text)
        tokens = [(m.start(), m.end(), m.group()) for m in
                  _TOKEN.finditer(text, sentence_start, sentence_end)]
        value_at = [i for i, (s, e, _) in enumerate(tokens) if s < end and e > start]
        if not value_at:
            return None
        first, last = value_at[0], value_at[-1]
        best: tuple[int, Path] | None = None
        for i, (_, _, token) in enumerate(tokens):
            if first <= i <= last:
                continue
            distance = first - i if i < first else i - last
            if distance > NEAR:
                continue
            stem = set(words(token))
            for path, names in self.by_field.items():
                if stem & names and (best is None or distance < best[0]):
                    best = (distance, path)
        return best[1] if best is not None else None


def describing_texts(path: Path, *, description: str | None,
                     about: Mapping[str, str]) -> list[str]:
    """The texts that say what a field is, for `FieldWords.of` (not its question, whose
    "please" and "tell me" name nothing)."""
    return [" ".join(identifier_words(path[-1])), *(t for t in (description,) if t),
            *about.values()]
