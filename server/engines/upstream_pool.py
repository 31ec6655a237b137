"""The upstream vLLM servers behind `--engine upstream`, and which of them are in rotation.

An upstream that refuses a connection, times out, answers 5xx or dies is taken out of
rotation for `cooldown_s`; a prober thread then asks it `GET /v1/models` every second
until it answers, and puts it back (re-warming its grammars: a restarted vLLM has lost
them). Upstreams in rotation are asked too, every few seconds, so /health turns degraded
when the last one dies even while no request arrives. Requests go to the upstream in
rotation with the fewest requests in flight (round robin among equals).

The state is touched from the event loop (choosing, marking) and from the prober thread:
one lock guards it. The prober uses its own synchronous client."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger("strictcall.engine")
PROBE_EVERY_S = 1.0  # an upstream out of rotation, once its cooldown is over
CHECK_EVERY_S = 5.0  # an upstream in rotation


@dataclass(eq=False)  # one upstream is itself, even if listed twice
class Upstream:
    url: str  # the server's root, e.g. http://vllm:8000 (no /v1)
    model: str | None  # its served model name: set, or learned from /v1/models
    up: bool = False
    max_model_len: int | None = None
    problem: str | None = "not probed yet"
    next_probe: float = 0.0  # monotonic
    inflight: int = 0
    failures: int = 0
    order: int = 0


@dataclass(frozen=True)
class Probe:
    """What `GET /v1/models` said: the model it serves and its context, or why not."""

    model: str | None
    max_model_len: int | None
    problem: str | None


class _QuietProbes(logging.Filter):
    """httpx logs every request at INFO; the prober's, every few seconds for each upstream,
    would bury the server's log. Failures are logged here instead."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self._probes = tuple(f"GET {url}/v1/models " for url in urls)

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(p in record.getMessage() for p in self._probes)


class UpstreamPool:
    def __init__(self, urls: list[str], *, model: str | None, cooldown_s: float,
                 connect_timeout_s: float,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not urls:
            raise ValueError("--engine upstream needs at least one --upstream URL")
        self.upstreams = [Upstream(u.rstrip("/").removesuffix("/v1"), model, order=i)
                          for i, u in enumerate(urls)]
        self._wanted_model = model
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._http = httpx.Client(timeout=httpx.Timeout(connect_timeout_s + 2,
                                                        connect=connect_timeout_s),
                                  transport=transport)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Called (from the prober thread) with an upstream that came back into rotation.
        self.on_back: Callable[[Upstream], None] = lambda upstream: None
        self._quiet = _QuietProbes([u.url for u in self.upstreams])
        logging.getLogger("httpx").addFilter(self._quiet)

    # -- requests ---------------------------------------------------------------------------
    def choose(self, tried: list[Upstream]) -> Upstream | None:
        """The upstream in rotation, not tried yet by this request, with the fewest requests
        in flight; None when there is none. The caller pairs it with `release`."""
        with self._lock:
            free = [u for u in self.upstreams if u.up and u not in tried]
            if not free:
                return None
            turn = next(self._turn)
            chosen = min(free, key=lambda u: (u.inflight,
                                              (u.order - turn) % len(self.upstreams)))
            chosen.inflight += 1
            return chosen

    def release(self, upstream: Upstream) -> None:
        with self._lock:
            upstream.inflight -= 1

    def fail(self, upstream: Upstream, why: str) -> None:
        """Out of rotation for the cooldown, then probed."""
        with self._lock:
            was_up = upstream.up
            upstream.up, upstream.problem = False, why
            upstream.failures += 1
            upstream.next_probe = time.monotonic() + self.cooldown_s
        if was_up:
            log.warning("upstream %s out of rotation for %.0f s: %s", upstream.url,
                        self.cooldown_s, why)

    # -- state ------------------------------------------------------------------------------
    def any_up(self) -> bool:
        with self._lock:
            return any(u.up for u in self.upstreams)

    def problem(self) -> str | None:
        with self._lock:
            if any(u.up for u in self.upstreams):
                return None
            why = "; ".join(f"{u.url}: {u.problem}" for u in self.upstreams)
        return f"no upstream vLLM server answers ({why})"

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"upstreams": len(self.upstreams),
                    "upstreams_up": sum(u.up for u in self.upstreams),
                    "upstream_failures": sum(u.failures for u in self.upstreams)}

    def smallest_context(self) -> int | None:
        with self._lock:
            known = [u.max_model_len for u in self.upstreams if u.max_model_len]
        return min(known) if known else None

    # -- probing ----------------------------------------------------------------------------
    def probe_all(self) -> None:
        """Probe every upstream now (at startup, before the first request)."""
        for upstream in self.upstreams:
            self._probe(upstream)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="strictcall-upstream-probe",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._http.close()
        logging.getLogger("httpx").removeFilter(self._quiet)

    def post(self, upstream: Upstream, path: str, body: dict[str, Any],
             timeout_s: float) -> httpx.Response:
        """A plain POST from the prober's thread (re-warming grammars)."""
        return self._http.post(f"{upstream.url}{path}", json=body, timeout=timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S / 4):
            now = time.monotonic()
            for upstream in self.upstreams:
                if upstream.next_probe <= now and not self._stop.is_set():
                    self._probe(upstream)

    def _probe(self, upstream: Upstream) -> None:
        found = self._ask_models(upstream)
        with self._lock:
            was_up = upstream.up
            came_back = found.problem is None and not upstream.up
            if found.problem is None:
                upstream.up, upstream.problem = True, None
                upstream.model = found.model
                upstream.max_model_len = found.max_model_len or upstream.max_model_len
            else:
                if upstream.up:
                    upstream.failures += 1
                upstream.up, upstream.problem = False, found.problem
            upstream.next_probe = time.monotonic() + (CHECK_EVERY_S if upstream.up
                                                      else PROBE_EVERY_S)
        if came_back:
            log.info("upstream %s in rotation (model %r, max_model_len %s)", upstream.url,
                     upstream.model, upstream.max_model_len)
            self.on_back(upstream)
        elif found.problem is not None and was_up:
            log.warning("upstream %s out of rotation: %s", upstream.url, found.problem)

    def _ask_models(self, upstream: Upstream) -> Probe:
        try:
            response = self._http.get(f"{upstream.url}/v1/models")
        except httpx.HTTPError as exc:
            return Probe(None, None, describe(exc))
        if response.status_code != 200:
            return Probe(None, None, f"GET /v1/models answered {response.status_code}")
        try:
            cards = response.json()["data"]
        except (ValueError, KeyError, TypeError):
            return Probe(None, None, "GET /v1/models did not answer a model list")
        return served(cards, self._wanted_model)


def served(cards: list[dict[str, Any]], wanted: str | None) -> Probe:
    """The model card StrictCall sends requests for: the one named `wanted`, else the
    first (a vLLM server serves one model)."""
    names = [str(card.get("id")) for card in cards if isinstance(card, dict)]
    if not names:
        return Probe(None, None, "it serves no model")
    if wanted is not None and wanted not in names:
        return Probe(None, None, f"it serves {names}, not the --upstream-model {wanted!r}")
    card = cards[names.index(wanted)] if wanted is not None else cards[0]
    length = card.get("max_model_len")
    return Probe(names[names.index(wanted)] if wanted else names[0],
                 length if isinstance(length, int) else None, None)


def describe(exc: BaseException) -> str:
    """An httpx failure in a few words, for logs and /health."""
    kinds = ((httpx.ConnectTimeout, "connect timed out"), (httpx.ConnectError,
             "connection refused"), (httpx.ReadTimeout, "no answer in time"),
             (httpx.RemoteProtocolError, "the connection closed mid-answer"),
             (httpx.ReadError, "the connection broke"))
    for kind, words in kinds:
        if isinstance(exc, kind):
            return words
    return f"{type(exc).__name__}: {exc}"[:200]
