"""Compiled-grammar cache: a bounded LRU keyed by what determines the compiled result."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from grammars.backend import CompiledGrammar
from grammars.specs import GrammarSpec


class CompilingBackend(Protocol):
    name: str
    version: str
    tokenizer_fingerprint: str

    @property
    def options_key(self) -> str: ...

    def compile(self, spec: GrammarSpec) -> CompiledGrammar: ...


@dataclass(frozen=True)
class CacheKey:
    spec_key: str
    tokenizer_fingerprint: str
    backend: str
    backend_version: str
    options: str


@dataclass(frozen=True)
class Lookup:
    grammar: CompiledGrammar
    hit: bool
    seconds: float  # lookup time on a hit, lookup plus compile on a miss


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    evictions: int
    entries: int


class GrammarCache:
    def __init__(self, backend: CompilingBackend, *, max_entries: int = 512) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self._backend = backend
        self._max = max_entries
        self._entries: OrderedDict[CacheKey, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = 0

    def key_for(self, spec: GrammarSpec) -> CacheKey:
        b = self._backend
        return CacheKey(spec.key, b.tokenizer_fingerprint, b.name, b.version, b.options_key)

    def get(self, spec: GrammarSpec) -> Lookup:
        start = time.perf_counter()
        key = self.key_for(spec)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return Lookup(found, True, time.perf_counter() - start)
            self._misses += 1
        compiled = self._backend.compile(spec)  # outside the lock: hits never wait on a compile
        with self._lock:
            self._entries[key] = compiled
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
                self._evictions += 1
        return Lookup(compiled, False, time.perf_counter() - start)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries))
