"""Prometheus text exposition, without a client library: a few counters and one histogram."""

from __future__ import annotations

import threading
from collections import Counter

COMPILE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self._counts = [0] * len(buckets)
        self._sum = 0.0
        self._n = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._sum += value
            self._n += 1
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    self._counts[i] += 1

    def render(self, name: str) -> list[str]:
        with self._lock:
            lines = [f'{name}_bucket{{le="{b:g}"}} {c}' for b, c in zip(self.buckets,
                                                                         self._counts)]
            lines.append(f'{name}_bucket{{le="+Inf"}} {self._n}')
            return [*lines, f"{name}_sum {self._sum:.6f}", f"{name}_count {self._n}"]


class Metrics:
    def __init__(self) -> None:
        self.compile_seconds = Histogram(COMPILE_BUCKETS)
        self.rejections: Counter[str] = Counter()
        self._lock = threading.Lock()

    def reject(self, reason: str) -> None:
        with self._lock:
            self.rejections[reason] += 1

    def render(self, *, cache: dict[str, int], engine: dict[str, int]) -> str:
        out: list[str] = []

        def metric(name: str, kind: str, help_: str, lines: list[str]) -> None:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *lines])

        metric("strictcall_grammar_compile_seconds", "histogram",
               "Time to compile one grammar.",
               self.compile_seconds.render("strictcall_grammar_compile_seconds"))
        for key, help_ in (("hits", "Grammar cache hits."), ("misses", "Grammar cache misses."),
                           ("evictions", "Grammars evicted from the cache."),
                           ("compiles", "Grammar compilations started."),
                           ("joined", "Misses that waited on a compilation in flight."),
                           ("disk_loads", "Misses answered from the on-disk grammar store."),
                           ("expired", "Grammars dropped after the time-to-live unused.")):
            name = f"strictcall_grammar_cache_{key}_total"
            metric(name, "counter", help_, [f"{name} {cache.get(key, 0)}"])
        metric("strictcall_grammar_cache_entries", "gauge", "Grammars in the cache.",
               [f"strictcall_grammar_cache_entries {cache.get('entries', 0)}"])
        metric("strictcall_grammar_cache_bytes", "gauge", "Memory held by cached grammars.",
               [f"strictcall_grammar_cache_bytes {cache.get('bytes', 0)}"])
        with self._lock:
            rejected = [f'strictcall_requests_rejected_total{{reason="{r}"}} {n}'
                        for r, n in sorted(self.rejections.items())]
        metric("strictcall_requests_rejected_total", "counter",
               "Requests answered with an error, by reason.", rejected)
        for key, value in sorted(engine.items()):
            kind = "gauge" if key in ("running", "queued") else "counter"
            name = f"strictcall_engine_{key}" + ("_total" if kind == "counter" else "")
            metric(name, kind, f"Engine {key.replace('_', ' ')}.", [f"{name} {value}"])
        return "\n".join(out) + "\n"


