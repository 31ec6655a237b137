"""Compiled-grammar cache: an LRU keyed by what determines the compiled result, bounded by
entries and by bytes, whose entries expire after a time unused; behind it, optionally, a
directory of serialized grammars that survives restarts.

Compiles (and disk loads) run on a small pool of their own threads, once per key however
many requests ask at the same time (single flight); callers wait on a future, with whatever
timeout they like, so a schema that compiles for minutes never holds anyone else up."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from grammars.backend_types import CompiledGrammar, GrammarBackend
from grammars.bridge import is_bridged
from grammars.diskstore import DiskStore
from grammars.specs import GrammarSpec

log = logging.getLogger("strictcall.grammars")


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

    @property
    def state(self) -> str:
        """"hit", "miss", or "bridged" (a cold compile bridged by llguidance's mask)."""
        return "hit" if self.hit else "bridged" if is_bridged(self.grammar) else "miss"


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    evictions: int
    entries: int
    compiles: int = 0   # compilations started (misses that joined one in flight are not)
    joined: int = 0     # misses that waited on a compilation already in flight
    disk_loads: int = 0  # misses answered from the disk store, without compiling
    expired: int = 0    # entries dropped for being unused longer than the TTL
    bytes: int = 0      # memory held by the cached grammars

# The largest compiled grammar the disk store takes (its size in memory).
MAX_DISK_GRAMMAR_BYTES = 8 * 2**20


# The longest a compile waits for the event it was submitted `after` (a bridge that did not
# end: the compile goes on without it).
AFTER_WAIT_S = 5.0


class GrammarCache:
    def __init__(self, backend: GrammarBackend, *, max_entries: int = 512,
                 max_bytes: int = 512 * 2**20, ttl_s: float | None = None,
                 disk: DiskStore | None = None, compile_workers: int = 2,
                 on_compile: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be >= 1")
        self._backend = backend
        self._on_compile = on_compile  # told each compile's duration in seconds (metrics)
        self._max = max_entries
        self._max_bytes = max_bytes
        self._ttl = ttl_s
        self._clock = clock
        # A backend that compiles elsewhere (vLLM), or whose grammars do not serialize
        # (outlines-core), has nothing to put on disk.
        self._disk = disk if backend.persistent else None
        # key -> (grammar, last used); oldest use first
        self._entries: OrderedDict[CacheKey, tuple[CompiledGrammar, float]] = OrderedDict()
        self._bytes = 0
        self._inflight: dict[CacheKey, concurrent.futures.Future[Lookup]] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            compile_workers, thread_name_prefix="grammar-compile")
        self._hits = self._misses = self._evictions = self._compiles = self._joined = 0
        self._disk_loads = self._expired = 0

    @property
    def backend(self) -> GrammarBackend:
        return self._backend

    def key_for(self, spec: GrammarSpec) -> CacheKey:
        b = self._backend
        return CacheKey(spec.key, b.tokenizer_fingerprint, b.name, b.version, b.options_key)

    def get(self, spec: GrammarSpec) -> Lookup:
        """Blocking lookup (startup warm-up, benchmarks)."""
        return self.submit(spec).result()

    def submit(self, spec: GrammarSpec, *, persist: bool = True,
               after: threading.Event | None = None) -> concurrent.futures.Future[Lookup]:
        """A future of the lookup: done at once on a hit; on a miss, the one load or
        compilation of this key, shared by every caller until it finishes. A failed compile
        is not cached. `persist=False`: a grammar of one conversation (its grounded values
        and spans): kept in memory only, never read from or written to the disk store.
        `after`: on a miss this call starts, the compile (not the disk load) waits for it
        to be set, at most `AFTER_WAIT_S` (a bridge that runs first, alone on the CPU)."""
        start = time.perf_counter()
        key = self.key_for(spec)
        with self._lock:
            now = self._clock()
            self._expire(now)
            found = self._entries.get(key)
            if found is not None:
                self._entries[key] = (found[0], now)
                self._entries.move_to_end(key)
                self._hits += 1
                done: concurrent.futures.Future[Lookup] = concurrent.futures.Future()
                done.set_result(Lookup(found[0], True, time.perf_counter() - start))
                return done
            self._misses += 1
            running = self._inflight.get(key)
            if running is not None:
                self._joined += 1
                return running
            future = self._pool.submit(self._fill, key, spec, start, persist, after)
            self._inflight[key] = future
            return future

    def _fill(self, key: CacheKey, spec: GrammarSpec, start: float,
              persist: bool = True, after: threading.Event | None = None) -> Lookup:
        try:
            compiled = self._from_disk(key, spec) if persist else None
            if compiled is None and after is not None:
                after.wait(AFTER_WAIT_S)
            if compiled is None:
                with self._lock:
                    self._compiles += 1
                compiled = self._backend.compile(spec)
                if self._on_compile is not None:
                    self._on_compile(compiled.compile_seconds)
                if persist:
                    self._to_disk(key, compiled)
        except BaseException:
            with self._lock:
                self._inflight.pop(key, None)
            raise
        with self._lock:  # cached and no longer in flight in one step: no second compile
            self._inflight.pop(key, None)
            self._entries[key] = (compiled, self._clock())
            self._bytes += compiled.size_bytes
            self._shrink()
        return Lookup(compiled, False, time.perf_counter() - start)

    def _from_disk(self, key: CacheKey, spec: GrammarSpec) -> CompiledGrammar | None:
        if self._disk is None:
            return None
        text = self._disk.load(key)
        if text is None:
            return None
        try:
            compiled = self._backend.deserialize(spec, text)
        except Exception as exc:  # noqa: BLE001 - any bad file is a miss, never a failure
            self._disk.discard(key, f"does not load: {exc!r}")
            return None
        with self._lock:
            self._disk_loads += 1
        return compiled

    def _to_disk(self, key: CacheKey, compiled: CompiledGrammar) -> None:
        if self._disk is None:
            return
        if compiled.size_bytes > MAX_DISK_GRAMMAR_BYTES:
            # Its JSON is many times its memory (xgrammar's token-mask caches written out
            # as numbers): a 75 MiB grammar took 12 GiB and minutes to write.
            log.info("a compiled grammar of %d MiB is kept in memory only (the disk store "
                     "takes up to %d MiB)", compiled.size_bytes >> 20,
                     MAX_DISK_GRAMMAR_BYTES >> 20)
            return
        try:
            self._disk.save(key, self._backend.serialize(compiled))
        except Exception:
            log.exception("could not store a compiled grammar on disk")

    def _expire(self, now: float) -> None:
        """Drop entries unused for longer than the TTL (the oldest use is first)."""
        if self._ttl is None:
            return
        while self._entries:
            key, (grammar, used) = next(iter(self._entries.items()))
            if now - used <= self._ttl:
                return
            self._drop(key)
            self._expired += 1

    def _shrink(self) -> None:
        # The newest entry stays even if it alone is over the byte bound.
        while len(self._entries) > 1 and (len(self._entries) > self._max
                                          or self._bytes > self._max_bytes):
            self._drop(next(iter(self._entries)))
            self._evictions += 1

    def _drop(self, key: CacheKey) -> None:
        grammar, _ = self._entries.pop(key)
        self._bytes -= grammar.size_bytes

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries),
                              self._compiles, self._joined, self._disk_loads, self._expired,
                              self._bytes)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
