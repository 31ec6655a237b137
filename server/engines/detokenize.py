"""Incremental detokenization for streaming: each new token costs a decode of a short window,
not of the whole output. The window starts a few tokens back (the prefix offset), so
tokenizers whose pieces depend on their neighbours (leading-space markers, multi-byte
characters split across tokens) still yield the same text as one full decode."""

from __future__ import annotations

from collections.abc import Callable, Sequence

Decode = Callable[[Sequence[int]], str]


class IncrementalDetokenizer:
    def __init__(self, decode: Decode) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._prefix = 0  # start of the window whose text is already in `text`
        self._read = 0    # end of that window
        self.text = ""

    def add(self, ids: Sequence[int]) -> str:
        """Append token ids; return the text so far (held back while a character is split)."""
        self._ids.extend(ids)
        known = self._decode(self._ids[self._prefix:self._read])
        window = self._decode(self._ids[self._prefix:])
        if len(window) > len(known) and not window.endswith("\ufffd"):
            self.text += window[len(known):]
            self._prefix, self._read = self._read, len(self._ids)
        return self.text
