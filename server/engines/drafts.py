"""Prompt-lookup drafts: tokens the model will likely write next because it is copying them
from the conversation (a tool call's arguments are mostly names, ids, cities and dates the
user wrote). The decode loop feeds a row's drafts with its next step and keeps those the
model, under its grammar mask, would have chosen itself (engines/decoding.py), so output is
the same with and without them; a draft saves a model step when it is right and costs about
one prefill token when it is not.

Whether a draft pays depends on the engine: a GPU feeds eight more tokens almost for free,
a CPU pays for each (on the embedded model under llama.cpp, a drafted token with its logits
costs more than a whole one-token step). So the engine says what a drafted token costs in
steps (`Speculation.token_cost`, measured at start-up where it is None), and each row drafts
only as far as it expects drafts to stand: token i of a draft stands with probability
odds**i (`DraftOdds`, from what this row's earlier drafts did) and is proposed only while
that is above its cost (`draft_length`). Where a drafted token costs a step or more, no
draft can pay and the engine drafts none.

Matching is on text, not token ids: a value copied into JSON is tokenized apart from the
words around it in the prompt (`"San` after a quote, ` San` in a sentence), so the ids of
the prompt and of the output differ where the text is the same. The output's last
characters are looked up in the prompt (its most recent occurrence of the longest suffix of
at least `min_match` characters) and what follows there is tokenized as the draft."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Encode = Callable[[str], Sequence[int]]


@dataclass(frozen=True)
class Speculation:
    """Prompt-lookup drafting (Settings: --speculate-tokens; 0 turns it off)."""

    max_tokens: int = 8
    min_match: int = 3
    # Model steps one drafted token (fed with its logits) costs; None: the engine measures.
    token_cost: float | None = None

    @property
    def pays(self) -> bool:
        """Whether any draft can save time: on, and a drafted token costs less than a step."""
        return self.max_tokens > 0 and (self.token_cost is None or self.token_cost < 1.0)


def draft_length(odds: float, cost: float, most: int) -> int:
    """How many tokens to draft: token i stands with probability odds**i (it needs those
    before it), saves a step when it does and costs `cost` steps either way; each is worth
    proposing while odds**i > cost."""
    n, stands = 0, odds
    while n < most and stands > cost:
        n, stands = n + 1, stands * odds
    return n


@dataclass
class DraftOdds:
    """One row's odds that its next drafted token stands: drafted tokens that stood over
    those tried (each draft tries its kept tokens and the one that failed), each draft's
    count weighing `decay` times the next one's. It starts from 0.8 over four tokens: copying
    from the prompt is what tool calls mostly do."""

    stood: float = 3.2
    tried: float = 4.0
    decay: float = 0.7

    @property
    def odds(self) -> float:
        return self.stood / self.tried

    def update(self, proposed: int, kept: int) -> None:
        self.stood = self.stood * self.decay + kept
        self.tried = self.tried * self.decay + kept + (1 if kept < proposed else 0)


class PromptLookup:
    """Drafts for one request, from its prompt's text and any further `sources` (values
    the request expects to be copied, such as a grounded field's candidates)."""

    def __init__(self, text: str, encode: Encode, *, max_tokens: int = 8,
                 min_match: int = 3, max_match: int = 32) -> None:
        self._text = text
        self._encode = encode
        self.max_tokens = max_tokens
        self.min_match = min_match
        self.max_match = max_match
        # A draft's text: about this many characters (a token is rarely longer than 8).
        self._span = max_tokens * 8

    def propose(self, tail: str, *, limit: int | None = None) -> list[int]:
        """Draft tokens to follow output ending in `tail` (its last characters), at most
        `limit` (default `max_tokens`); none when no suffix of `tail` of at least
        `min_match` characters occurs in the text, or nothing follows it there."""
        limit = self.max_tokens if limit is None else min(limit, self.max_tokens)
        if limit <= 0:
            return []
        follows = self._continuation(tail)
        if not follows:
            return []
        return list(self._encode(follows))[:limit]

    def _continuation(self, tail: str) -> str:
        """The text after the latest occurrence of `tail`'s longest suffix found."""
        tail = tail[-self.max_match:]
        for size in range(len(tail), self.min_match - 1, -1):
            at = self._text.rfind(tail[-size:])
            while at >= 0:
                start = at + size
                if start < len(self._text):
                    return self._text[start:start + self._span]
                # found only at the very end: an earlier occurrence may have a follow-up
                at = self._text.rfind(tail[-size:], 0, at + size - 1)
        return ""


def draft_source(prompt_text: str, extra: Sequence[str]) -> str:
    """The text drafts are looked up in: the prompt, then each extra source on its own line
    (latest wins, so the extras, listed last, are preferred where both match)."""
    return "\n".join([prompt_text, *extra]) if extra else prompt_text
