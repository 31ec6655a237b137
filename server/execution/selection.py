"""Tool selection: when a request offers more tools than fit, or names a catalog, only the
k most relevant enter the prompt and the grammar. Relevance is Okapi BM25 between the
conversation's user turns and each tool's name, description, parameter names and their
descriptions, in words of any script (names split at `_`, `.`, `-` and camelCase; each
word stemmed by its language's Snowball stemmer, server/dialogue/language.py), so a
Russian, German or Chinese request finds tools described in its language. Measured on
BFCL's `multiple` category by `strictcall-bench tool-selection` (README, "Tool
selection")."""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.dialogue.language import language_of
from server.dialogue.language import words as stemmed

_IDENTIFIER_SPLITS = ((re.compile(r"([a-z])([A-Z])"), r"\1 \2"),
                      (re.compile(r"([A-Z]+)([A-Z][a-z])"), r"\1 \2"),
                      (re.compile(r"([A-Za-z])([0-9])"), r"\1 \2"),
                      (re.compile(r"[_.\-/]+"), " "))


def words(text: str, *, language: str | None = None) -> list[str]:
    """`text`'s words in any script, lower-cased, function words left out, identifiers
    split into their parts (`getWeather`, `card_last4`), each word stemmed by a Snowball
    stemmer: Cyrillic by the Russian one, Latin by `language`'s (default: the language
    the text is in, English where it says too little), Han text as characters and pairs."""
    return list(_words(text, language or language_of(text) or "en"))


@functools.lru_cache(maxsize=8192)
def _words(text: str, language: str) -> tuple[str, ...]:
    for pattern, into in _IDENTIFIER_SPLITS:
        text = pattern.sub(into, text)
    return tuple(stemmed(text, language=language))


def tool_text(name: str, description: str | None, parameters: Any, *,
              parameter_descriptions: bool = True) -> str:
    """What a tool is matched on: its name, its description, its parameters' names (and
    descriptions: measured better on BFCL, see the module's docstring)."""
    return "\n".join([name, description or "", " ".join(
        _parameter_text(parameters, descriptions=parameter_descriptions))])


def _parameter_text(schema: Any, *, descriptions: bool) -> Iterable[str]:
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, sub in props.items():
                yield str(key)
                if descriptions and isinstance(sub, dict):
                    yield str(sub.get("description", ""))
                yield from _parameter_text(sub, descriptions=descriptions)
        for key in ("items", "additionalProperties"):
            yield from _parameter_text(schema.get(key), descriptions=descriptions)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _parameter_text(sub, descriptions=descriptions)


class Bm25:
    """Okapi BM25 over a fixed set of documents (k1 = 1.5, b = 0.75)."""

    def __init__(self, documents: Mapping[str, list[str]], *, k1: float = 1.5,
                 b: float = 0.75) -> None:
        self._terms = {name: Counter(doc) for name, doc in documents.items()}
        self._length = {name: len(doc) for name, doc in documents.items()}
        count = len(documents)
        self._average = sum(self._length.values()) / count if count else 0.0
        frequency = Counter(term for doc in self._terms.values() for term in doc)
        self._idf = {t: math.log(1 + (count - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}
        self._k1, self._b = k1, b

    def scores(self, query: Sequence[str]) -> dict[str, float]:
        out = {}
        for name, terms in self._terms.items():
            norm = self._k1 * (1 - self._b + self._b * self._length[name] / (self._average or 1))
            out[name] = sum(self._idf[t] * terms[t] * (self._k1 + 1) / (terms[t] + norm)
                            for t in set(query) if t in terms)
        return out


# The newest user message's score counts this many times beside the whole dialogue's
# (chosen on BFCL's multi-turn base category: `strictcall-bench tool-selection`, its
# multi-turn table). A reply naming no tool ("yes") leaves the dialogue's words to choose.
NEWEST_WEIGHT = 4.0


@dataclass(frozen=True)
class Selection:
    """The tools picked, best first, with their scores, out of how many."""

    visible: tuple[str, ...]
    scores: Mapping[str, float]
    k: int
    out_of: int
    reason: str  # "over_budget" or "catalog"

    def as_dict(self) -> dict[str, Any]:
        return {"method": "bm25", "reason": self.reason, "k": self.k, "out_of": self.out_of,
                "scores": {n: round(self.scores[n], 3) for n in self.visible}}


def select(tools: Mapping[str, str], query: str, *, k: int, reason: str,
           pinned: Iterable[str] = (), newest: str | None = None,
           newest_weight: float = NEWEST_WEIGHT) -> Selection:
    """The `k` tools of `tools` (name -> its text, `tool_text`, in offered order) that fit
    `query` best; `pinned` ones (a tool_choice's) are always kept. Ties keep the offered
    order. The query's language stems both sides alike (a German request and German
    descriptions by the German stemmer). `newest`: the user's newest message: in a
    dialogue, what the user asks now outweighs what they asked before (`newest_weight`
    times)."""
    language = language_of(query) or "en"
    bm25 = Bm25({n: words(t, language=language) for n, t in tools.items()})
    scores = bm25.scores(words(query, language=language))
    if newest and newest != query:
        now = bm25.scores(words(newest, language=language))
        scores = {n: score + newest_weight * now[n] for n, score in scores.items()}
    order = {name: i for i, name in enumerate(tools)}
    keep = [n for n in pinned if n in tools]
    ranked = sorted((n for n in tools if n not in keep),
                    key=lambda n: (-scores[n], order[n]))
    visible = tuple(keep + ranked)[: max(k, len(keep))]
    return Selection(visible, scores, k, len(tools), reason)
