"""Compiled-grammar cache: a bounded LRU keyed by what determines the compiled result.

Compiles run on a small pool of their own threads, once per key however many requests ask
at the same time (single flight); callers wait on a future, with whatever timeout they like,
so a schema that compiles for minutes never holds anyone else up."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from grammars.backend import CompiledGrammar
from grammars.keywords import KeywordTable
from grammars.specs import GrammarSpec


class CompilingBackend(Protocol):
    name: str
    version: str
    tokenizer_fingerprint: str
    keywords: KeywordTable

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
    compiles: int = 0   # compilations started (misses that joined one in flight are not)
    joined: int = 0     # misses that waited on a compilation already in flight


class GrammarCache:
    def __init__(self, backend: CompilingBackend, *, max_entries: int = 512,
                 compile_workers: int = 2,
                 on_compile: Callable[[float], None] | None = None) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self._backend = backend
        self._on_compile = on_compile  # told each compile's duration in seconds (metrics)
        self._max = max_entries
        self._entries: OrderedDict[CacheKey, CompiledGrammar] = OrderedDict()
        self._inflight: dict[CacheKey, concurrent.futures.Future[Lookup]] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            compile_workers, thread_name_prefix="grammar-compile")
        self._hits = self._misses = self._evictions = self._compiles = self._joined = 0

    @property
    def backend(self) -> CompilingBackend:
        return self._backend

    def key_for(self, spec: GrammarSpec) -> CacheKey:
        b = self._backend
        return CacheKey(spec.key, b.tokenizer_fingerprint, b.name, b.version, b.options_key)

    def get(self, spec: GrammarSpec) -> Lookup:
        """Blocking lookup (startup warm-up, benchmarks)."""
        return self.submit(spec).result()

    def submit(self, spec: GrammarSpec) -> concurrent.futures.Future[Lookup]:
        """A future of the lookup: done at once on a hit; on a miss, the one compilation of
        this key, shared by every caller until it finishes. A failed compile is not cached."""
        start = time.perf_counter()
        key = self.key_for(spec)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                done: concurrent.futures.Future[Lookup] = concurrent.futures.Future()
                done.set_result(Lookup(found, True, time.perf_counter() - start))
                return done
            self._misses += 1
            running = self._inflight.get(key)
            if running is not None:
                self._joined += 1
                return running
            self._compiles += 1
            future = self._pool.submit(self._compile, key, spec, start)
            self._inflight[key] = future
            return future

    def _compile(self, key: CacheKey, spec: GrammarSpec, start: float) -> Lookup:
        try:
            compiled = self._backend.compile(spec)
        except BaseException:
            with self._lock:
                self._inflight.pop(key, None)
            raise
        if self._on_compile is not None:
            self._on_compile(compiled.compile_seconds)
        with self._lock:  # cached and no longer in flight in one step: no second compile
            self._inflight.pop(key, None)
            self._entries[key] = compiled
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
                self._evictions += 1
        return Lookup(compiled, False, time.perf_counter() - start)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries),
                              self._compiles, self._joined)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
