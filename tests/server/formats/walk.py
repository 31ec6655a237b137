"""The grammar's own output: a random walk through a structural tag's grammar over a small
vocabulary (every printable character, and the format's markers as tokens of their own, as
a real vocabulary has them), each step a token the grammar's mask allows. A stand-in for a
random-weight model that needs no tokenizer: what it writes is noise, but every byte of it
comes through the family's grammar, so the reader must read every call back, valid."""

from __future__ import annotations

import random
import string
from collections.abc import Iterable

import numpy as np

_CLOSING = set('"}]>')
CHARACTERS = [c for c in string.printable if c not in "\x0b\x0c\r"] + ["é", "日"]


class GrammarWalk:
    def __init__(self, markers: Iterable[str], closers: Iterable[str] = ()) -> None:
        """`markers`: the format's strings, tokens of their own; `closers`: those that end
        something (a value, a call, a block), which a walk takes late, to end."""
        import xgrammar

        closers = [m for m in closers if m]
        markers = [m for m in [*markers, *closers] if m]
        # The markers' own characters too (DeepSeek's fullwidth bars), so that any marker
        # can also be spelt a character at a time, as byte-level vocabularies can.
        characters = sorted(set(CHARACTERS) | {c for m in markers for c in m})
        words = sorted({m for m in markers if len(m) > 1})
        self.vocab = ["</s>", *characters, *words]
        self._first_word = 1 + len(characters)
        self._closers = {self.vocab.index(m) if len(m) > 1 else 1 + characters.index(m)
                         for m in closers}
        info = xgrammar.TokenizerInfo(self.vocab, vocab_type=xgrammar.VocabType.RAW,
                                      stop_token_ids=[0])
        self._compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

    def run(self, tag: str, rng: random.Random, *, steps: int = 600) -> str:
        """A complete output of the grammar of `tag` (a structural tag's JSON text)."""
        import xgrammar

        matcher = xgrammar.GrammarMatcher(self._compiler.compile_structural_tag(tag))
        bitmask = xgrammar.allocate_token_bitmask(1, len(self.vocab))
        out: list[str] = []
        for step in range(steps):
            matcher.fill_next_token_bitmask(bitmask)
            allowed = _allowed(bitmask[0].numpy(), len(self.vocab))
            if 0 in allowed:
                return "".join(out)
            late = step > steps // 3
            token = self._leave(matcher, bitmask, allowed) if late or rng.random() < 0.1 \
                else None
            if token is None and late:  # between parts: end rather than go on
                token = next((t for t in allowed if t in self._closers), None)
            if token is None:
                token = self._choose(allowed, rng)
            assert matcher.accept_token(token), self.vocab[token]
            out.append(self.vocab[token])
        raise AssertionError(f"no end after {steps} steps: {''.join(out)[-600:]!r}")

    def _choose(self, allowed: list[int], rng: random.Random) -> int:
        """A marker more often than a character, so free text and values stay short."""
        words = [t for t in allowed if t >= self._first_word]
        if words and rng.random() < 0.35:
            return rng.choice(words)
        return rng.choice(allowed)

    def _leave(self, matcher, bitmask, allowed: list[int]) -> int | None:
        """In free text or a value (most tokens allowed), the closer after which the fewest
        tokens are: the one that ends it. None where the walk is not in one."""
        if len(allowed) < len(self.vocab) // 3:
            return None
        best: tuple[int, int] | None = None
        for token in (t for t in allowed if t in self._closers):
            matcher.accept_token(token)
            matcher.fill_next_token_bitmask(bitmask)
            after = len(_allowed(bitmask[0].numpy(), len(self.vocab)))
            matcher.rollback(1)
            if best is None or after < best[0]:
                best = (after, token)
        return None if best is None else best[1]


def _allowed(words: np.ndarray, size: int) -> list[int]:
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:size]
    return [int(i) for i in np.flatnonzero(bits)]
