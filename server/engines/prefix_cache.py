"""Prompt prefix reuse: the KV cache of earlier prompts, so a request whose prompt starts
with the same tokens (the system turn with the tool descriptions, repeated on every call of
an agent) prefills only the rest.

Entries are whole prompts' key/value tensors, keyed by their token ids, least recently used
first out, bounded by bytes. A lookup finds the entry sharing the longest prefix with the new
prompt; any prefix of an entry is usable, because a causal model's KV for the first n tokens
does not depend on what follows them. Tensors are never written in place (the decode loop
concatenates into new ones), so entries are kept without copying."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

Layers = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, heads, T, dim]


@dataclass(frozen=True)
class PrefixHit:
    tokens: int  # how many leading prompt tokens `layers` covers
    layers: Layers


class PrefixCache:
    def __init__(self, max_bytes: int, *, min_tokens: int = 16) -> None:
        self.max_bytes = max_bytes
        # Shorter shared prefixes (a chat template's first tokens) save less than a lookup.
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[torch.Tensor, Layers, int]] = (
            OrderedDict())
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, prompt: tuple[int, ...]) -> int:
        """How many leading tokens of `prompt` a `lookup` would give now (0: none)."""
        if not self.enabled or len(prompt) <= self.min_tokens:
            return 0
        ids = torch.tensor(prompt, dtype=torch.long)
        with self._lock:
            best = max((_common_prefix(stored, ids) for stored, _, _ in
                        self._entries.values()), default=0)
        best = min(best, len(prompt) - 1)
        return best if best >= self.min_tokens else 0

    def lookup(self, prompt: tuple[int, ...]) -> PrefixHit | None:
        """The longest cached prefix of `prompt`, at most all but its last token (whose
        logits the prefill must compute), or None when none reaches `min_tokens`."""
        if not self.enabled or len(prompt) <= self.min_tokens:
            return None
        ids = torch.tensor(prompt, dtype=torch.long)
        best_key, best = None, 0
        with self._lock:
            for key, (stored, _, _) in self._entries.items():
                n = _common_prefix(stored, ids)
                if n > best:
                    best_key, best = key, n
            best = min(best, len(prompt) - 1)
            if best_key is None or best < self.min_tokens:
                return None
            self._entries.move_to_end(best_key)
            layers = self._entries[best_key][1]
        return PrefixHit(best, [(k[:, :, :best], v[:, :, :best]) for k, v in layers])

    def store(self, prompt: tuple[int, ...], layers: Layers) -> None:
        """Keep the KV of a whole prompt (batch of one). Entries that are prefixes of it
        are dropped: it serves their lookups too."""
        if not self.enabled or len(prompt) < self.min_tokens:
            return
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size()
                   for k, v in layers)
        if size > self.max_bytes:
            return
        ids = torch.tensor(prompt, dtype=torch.long)
        with self._lock:
            for key in [k for k, (stored, _, _) in self._entries.items()
                        if len(k) <= len(prompt) and _common_prefix(stored, ids) == len(k)]:
                self._drop(key)
            self._entries[prompt] = (ids, layers, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        _, _, size = self._entries.pop(key)
        self._bytes -= size


def _common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    n = min(len(a), len(b))
    differ = (a[:n] != b[:n]).nonzero()
    return int(differ[0]) if len(differ) else n
