"""Prometheus metrics, with prometheus_client, one registry per application.

Request metrics follow vLLM's names and labels (`vllm:e2e_request_latency_seconds` ->
`strictcall:e2e_request_latency_seconds`, label `model_name`), so dashboards built for vLLM
need only the prefix changed. The grammar-cache and rejection series keep the names they
had (`strictcall_grammar_*`, `strictcall_requests_rejected_total`). Values the engine and
the cache already count (running, waiting, hits, ...) are read at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
COMPILE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)
# vLLM's buckets for the same series.
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0)

_CACHE_COUNTERS = (("hits", "Grammar cache hits."), ("misses", "Grammar cache misses."),
                   ("evictions", "Grammars evicted from the cache."),
                   ("compiles", "Grammar compilations started."),
                   ("joined", "Misses that waited on a compilation in flight."),
                   ("disk_loads", "Misses answered from the on-disk grammar store."),
                   ("expired", "Grammars dropped after the time-to-live unused."))


@dataclass(frozen=True)
class Series:
    """One series as `GET /metrics` names it (a counter with its `_total`); the metrics
    reference page is generated from these (docsgen/reference.py)."""

    name: str
    kind: Literal["counter", "gauge", "histogram"]
    help: str
    labels: tuple[str, ...] = ()


class Metrics:
    def __init__(self, model_name: str = "") -> None:
        self.model_name = model_name
        self.registry = CollectorRegistry()
        self._series: list[Series] = []
        model = ("model_name",)
        self.compile_seconds = self._histogram(
            "strictcall_grammar_compile_seconds", "Time to compile one grammar.",
            buckets=COMPILE_BUCKETS)
        self._rejected = self._counter("strictcall_requests_rejected", "Requests answered with "
                                       "an error, by reason.", ("reason",))
        self._requests = self._counter("strictcall:requests", "Requests answered, by API, "
                                       "outcome and HTTP status.",
                                       ("model_name", "api", "outcome", "status"))
        self._e2e = self._histogram("strictcall:e2e_request_latency_seconds", "End-to-end "
                                    "request latency.", model, buckets=LATENCY_BUCKETS)
        self._ttft = self._histogram("strictcall:time_to_first_token_seconds", "Time to the "
                                     "first output token.", model, buckets=TTFT_BUCKETS)
        self._tpot = self._histogram("strictcall:time_per_output_token_seconds", "Time per "
                                     "output token after the first.", model,
                                     buckets=TPOT_BUCKETS)
        self._queue = self._histogram("strictcall:request_queue_time_seconds", "Time a decode "
                                      "waited for the engine.", model, buckets=LATENCY_BUCKETS)
        self._prompt = self._counter("strictcall:prompt_tokens", "Prompt tokens prefilled.",
                                     model)
        self._generated = self._counter("strictcall:generation_tokens", "Tokens generated.",
                                        model)
        self._finished = self._counter("strictcall:request_success", "Decodes finished, by "
                                       "finish reason.", ("model_name", "finished_reason"))
        self._repairs = self._counter("strictcall:contract_calls", "Contract calls, by tool "
                                      "and outcome (valid, repaired, needs_input, failed).",
                                      ("tool", "outcome"))
        self._first = self._counter("strictcall:contract_first_attempts", "Contract calls by "
                                    "whether the first decode was valid, per tool (the "
                                    "first-attempt valid rate is valid / all).",
                                    ("tool", "valid"))
        self._violations = self._counter("strictcall:contract_violations", "Contract "
                                         "violations found after decoding, by code.", ("code",))
        self._field_violations = self._counter(
            "strictcall:contract_field_violations", "Contract violations by tool and the "
            "field's JSON Pointer.", ("tool", "pointer", "code"))
        self._repair_tokens = self._counter("strictcall:repair_tokens", "Tokens prefilled and "
                                            "generated by repair decodes, per tool.", ("tool",))

    def _counter(self, name: str, help_: str, labels: tuple[str, ...] = ()) -> Counter:
        self._series.append(Series(name + "_total", "counter", help_, labels))
        return Counter(name, help_, labels, registry=self.registry)

    def _histogram(self, name: str, help_: str, labels: tuple[str, ...] = (), *,
                   buckets: tuple[float, ...]) -> Histogram:
        self._series.append(Series(name, "histogram", help_, labels))
        return Histogram(name, help_, labels, buckets=buckets, registry=self.registry)

    def series(self) -> list[Series]:
        """Every series this registry serves: its own, then those read at scrape time."""
        return [*self._series, *_Pulled.SERIES]

    def watch(self, *, cache: Callable[[], dict[str, int]],
              engine: Callable[[], dict[str, int]]) -> None:
        """Read the cache's and the engine's own counters at each scrape."""
        self.registry.register(_Pulled(self.model_name, cache, engine))

    def reject(self, reason: str) -> None:
        self._rejected.labels(reason).inc()

    def request(self, *, api: str, status: int, seconds: float) -> None:
        outcome = "success" if status < 400 else "client_error" if status < 500 else "error"
        self._requests.labels(self.model_name, api, outcome, str(status)).inc()
        self._e2e.labels(self.model_name).observe(seconds)

    def decode(self, *, prompt_tokens: int, generated: int, finish_reason: str,
               ttft_s: float | None, decode_s: float | None, queue_s: float | None) -> None:
        """One engine decode: tokens, finish reason and its timings where known."""
        m = self.model_name
        self._prompt.labels(m).inc(prompt_tokens)
        self._generated.labels(m).inc(generated)
        self._finished.labels(m, finish_reason).inc()
        if ttft_s is not None:
            self._ttft.labels(m).observe(ttft_s)
        if decode_s is not None and generated > 1:
            self._tpot.labels(m).observe(decode_s / (generated - 1))
        if queue_s is not None:
            self._queue.labels(m).observe(queue_s)

    def contract(self, *, tool: str, outcome: str, first_valid: bool,
                 violations: list[tuple[str, str]], repair_tokens: int) -> None:
        """One contract call's checks: its outcome, whether the first decode was valid,
        every attempt's violations as (code, pointer), and the tokens repair took."""
        self._repairs.labels(tool, outcome).inc()
        self._first.labels(tool, "true" if first_valid else "false").inc()
        for code, pointer in violations:
            self._violations.labels(code).inc()
            self._field_violations.labels(tool, pointer or "/", code).inc()
        if repair_tokens:
            self._repair_tokens.labels(tool).inc(repair_tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)


_GAUGES = (("strictcall:num_requests_running", "running", "Requests decoding now."),
           ("strictcall:num_requests_waiting", "queued", "Requests waiting for the engine."),
           ("strictcall_engine_draft_cost_pct", "draft_cost_pct",
            "What a drafted token costs, in hundredths of a model step (-1: no drafts)."))


class _Pulled(Collector):
    """Gauges and counters whose values live in the engine and the grammar cache."""

    SERIES = (
        *(Series(f"strictcall_grammar_cache_{key}_total", "counter", help_)
          for key, help_ in _CACHE_COUNTERS),
        Series("strictcall_grammar_cache_entries", "gauge", "Grammars in the cache."),
        Series("strictcall_grammar_cache_bytes", "gauge", "Memory held by cached grammars."),
        *(Series(name, "gauge", help_, ("model_name",)) for name, _, help_ in _GAUGES),
        # One per counter the engine keeps (GET /health shows the same: prefills,
        # decode_steps, jump_forward_tokens, prefix_hits, hung_steps, ...).
        Series("strictcall_engine_<counter>_total", "counter", "One counter for each of the "
               "engine's own counters, as GET /health lists them."),
    )

    def __init__(self, model_name: str, cache: Callable[[], dict[str, int]],
                 engine: Callable[[], dict[str, int]]) -> None:
        self._model = model_name
        self._cache = cache
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        cache, engine = self._cache(), self._engine()
        for key, help_ in _CACHE_COUNTERS:
            yield CounterMetricFamily(f"strictcall_grammar_cache_{key}", help_,
                                      value=cache.get(key, 0))
        yield GaugeMetricFamily("strictcall_grammar_cache_entries", "Grammars in the cache.",
                                value=cache.get("entries", 0))
        yield GaugeMetricFamily("strictcall_grammar_cache_bytes",
                                "Memory held by cached grammars.", value=cache.get("bytes", 0))
        for name, key, help_ in _GAUGES:
            family = GaugeMetricFamily(name, help_, labels=["model_name"])
            family.add_metric([self._model], engine.get(key, 0))
            yield family
        gauges = {key for _, key, _ in _GAUGES}
        for key, value in sorted(engine.items()):
            if key not in gauges:
                yield CounterMetricFamily(f"strictcall_engine_{key}",
                                          f"Engine {key.replace('_', ' ')}.", value=value)


# Which API a route serves, for the request counter's `api` label.
API_ROUTES = {"/v1/chat/completions": "chat_completions", "/v1/responses": "responses",
              "/v1/messages": "messages"}


class RequestTimer:
    """ASGI middleware: counts each API request by outcome and status and times it to the
    last byte of its body, streams included, into the application's `Metrics`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        api = API_ROUTES.get(scope.get("path", "")) if scope["type"] == "http" else None
        if api is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def timed(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                metrics = getattr(scope["app"].state, "metrics", None)
                if metrics is not None:
                    metrics.request(api=api, status=status,
                                    seconds=time.perf_counter() - started)

        await self.app(scope, receive, timed)
