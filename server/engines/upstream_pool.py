"""The upstream vLLM servers behind `--engine upstream`, and which of them are in rotation,
as a load balancer keeps its endpoints (Envoy's outlier detection, nginx's max_fails).

Each --upstream URL is one endpoint, or with `resolve` one per address of its host name
(re-resolved every RESOLVE_EVERY_S). An endpoint leaves rotation on `eject_after`
consecutive failures (no first token in time, a 5xx, a malformed stream, a failed probe):
one slow request does not take out a server that answers the others. A refused
connection takes it out at once: nothing is listening. Out, it is probed again after
`cooldown_s`, then every second, and comes back when a probe passes
(server/engines/upstream_probe.py: what it serves, its tokenizer, a one-token decode),
re-warming its grammars (a restarted vLLM has lost them). Endpoints in rotation are
probed every few seconds too, so /health turns degraded when the last one dies even
while no request arrives. Requests go to the endpoint in rotation with the fewest in
flight (round robin among equals). What /health and clients see names endpoints by
number; their URLs are internal and go to the log only.

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

from server.engines.upstream_probe import Endpoint, Probe, ProbeSpec, endpoints, probe

log = logging.getLogger("strictcall.engine")
PROBE_EVERY_S = 1.0  # an upstream out of rotation, once its cooldown is over
CHECK_EVERY_S = 5.0  # an upstream in rotation
RESOLVE_EVERY_S = 30.0  # host names of --upstream, with resolve on
PROBE_THREAD = "strictcall-upstream-probe"


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
    consecutive: int = 0  # failures since its last success
    host: str | None = None  # the Host header, where `url` holds a resolved address
    source: str = ""  # the --upstream URL it stands for
    gone: bool = False  # its address no longer resolves: no new requests

    @property
    def name(self) -> str:
        return f"upstream {self.order + 1}"

    def endpoint(self) -> Endpoint:
        return Endpoint(self.url, self.host, self.source or self.url)

    def headers(self) -> dict[str, str]:
        return {"Host": self.host} if self.host else {}


class _QuietProbes(logging.Filter):
    """httpx logs every request at INFO; the prober's, every few seconds for each upstream,
    would bury the server's log. Failures are logged here instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != PROBE_THREAD


@dataclass(frozen=True)
class Health:
    """How endpoints are judged: see the module's docstring."""

    eject_after: int = 3
    cooldown_s: float = 5.0
    check_tokenizer: bool = True
    probe: ProbeSpec = ProbeSpec()
    decode_timeout_s: float = 10.0
    resolve: bool = False


class UpstreamPool:
    def __init__(self, urls: list[str], *, model: str | None, cooldown_s: float,
                 connect_timeout_s: float, health: Health | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not urls:
            raise ValueError("--engine upstream needs at least one --upstream URL")
        self.health = health or Health(cooldown_s=cooldown_s)
        self.cooldown_s = self.health.cooldown_s
        self._sources = list(urls)
        self.upstreams = [Upstream(e.url, model, order=i, host=e.host, source=e.source)
                          for i, e in enumerate(endpoints(urls, resolve=self.health.resolve))]
        self._wanted_model = model
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._http = httpx.Client(timeout=httpx.Timeout(connect_timeout_s + 2,
                                                        connect=connect_timeout_s),
                                  transport=transport)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resolved_at = time.monotonic()
        # Called (from the prober thread) with an upstream that came back into rotation.
        self.on_back: Callable[[Upstream], None] = lambda upstream: None
        self._quiet = _QuietProbes()
        logging.getLogger("httpx").addFilter(self._quiet)

    # -- requests ---------------------------------------------------------------------------
    def choose(self, tried: list[Upstream]) -> Upstream | None:
        """The upstream in rotation, not tried yet by this request, with the fewest requests
        in flight; None when there is none. The caller pairs it with `release`."""
        with self._lock:
            free = [u for u in self.upstreams if u.up and not u.gone and u not in tried]
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

    def succeeded(self, upstream: Upstream) -> None:
        with self._lock:
            upstream.consecutive = 0

    def fail(self, upstream: Upstream, why: str, *, at_once: bool = False,
             keep_last: bool = False) -> None:
        """One more failure; out of rotation for the cooldown (then probed) once they are
        `eject_after` in a row, or `at_once` (nothing listens). `keep_last`: not if it is
        the last upstream in rotation (a failure a request may have caused)."""
        with self._lock:
            upstream.failures += 1
            upstream.consecutive += 1
            out = upstream.up and (at_once or upstream.consecutive >= self.health.eject_after)
            if out and keep_last and not any(u.up and not u.gone and u is not upstream
                                             for u in self.upstreams):
                out = False
                log.warning("upstream %s kept in rotation after %d slow answers in a row: "
                            "it is the last one", upstream.url, upstream.consecutive)
            if out:
                upstream.up, upstream.problem = False, why
                upstream.next_probe = time.monotonic() + self.cooldown_s
        if out:
            log.warning("upstream %s out of rotation for %.0f s after %d failure(s) in a row: "
                        "%s", upstream.url, self.cooldown_s, upstream.consecutive, why)

    # -- state ------------------------------------------------------------------------------
    def any_up(self) -> bool:
        with self._lock:
            return any(u.up and not u.gone for u in self.upstreams)

    def problem(self) -> str | None:
        with self._lock:
            if any(u.up and not u.gone for u in self.upstreams):
                return None
            why = "; ".join(f"{u.name}: {u.problem}" for u in self.upstreams if not u.gone)
        return f"no upstream vLLM server answers ({why})"

    def counts(self) -> dict[str, int]:
        with self._lock:
            live = [u for u in self.upstreams if not u.gone]
            return {"upstreams": len(live), "upstreams_up": sum(u.up for u in live),
                    "upstream_failures": sum(u.failures for u in self.upstreams)}

    def smallest_context(self) -> int | None:
        with self._lock:
            known = [u.max_model_len for u in self.upstreams if u.max_model_len and not u.gone]
        return min(known) if known else None

    # -- probing ----------------------------------------------------------------------------
    def probe_all(self) -> None:
        """Probe every upstream now (at startup, before the first request)."""
        for upstream in list(self.upstreams):
            self._probe(upstream)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=PROBE_THREAD, daemon=True)
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
        return self._http.post(f"{upstream.url}{path}", json=body, timeout=timeout_s,
                               headers=upstream.headers())

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S / 4):
            now = time.monotonic()
            if self.health.resolve and now - self._resolved_at > RESOLVE_EVERY_S:
                self._refresh()
            for upstream in list(self.upstreams):
                if upstream.next_probe <= now and not upstream.gone \
                        and not self._stop.is_set():
                    self._probe(upstream)

    def _refresh(self) -> None:
        """The host names resolved again: new addresses join (after a probe), vanished
        ones take no new requests."""
        self._resolved_at = time.monotonic()
        found = {e.url: e for e in endpoints(self._sources, resolve=True)}
        with self._lock:
            known = {u.url for u in self.upstreams}
            for upstream in self.upstreams:
                upstream.gone = upstream.url not in found
            for url, e in found.items():
                if url not in known:
                    self.upstreams.append(Upstream(e.url, self._wanted_model,
                                                   order=len(self.upstreams), host=e.host,
                                                   source=e.source))
                    log.info("upstream %s: a new address of %s", e.url, e.source)

    def _probe(self, upstream: Upstream) -> None:
        found = probe(self._http, upstream.endpoint(), wanted=self._wanted_model,
                      spec=self.health.probe, decode_timeout_s=self.health.decode_timeout_s,
                      check_tokenizer=self.health.check_tokenizer and not upstream.up)
        with self._lock:
            was_up, before = upstream.up, upstream.problem
            came_back = found.problem is None and not upstream.up
            if found.problem is None:
                if not upstream.up:  # back: its failures are behind it
                    upstream.up, upstream.problem, upstream.consecutive = True, None, 0
                # (In rotation, a passing probe does not clear a run of failed requests:
                # a server slow on real requests can be quick on a probe.)
                upstream.model = found.model
                upstream.max_model_len = found.max_model_len or upstream.max_model_len
            else:
                self._probe_failed(upstream, found)
            upstream.next_probe = time.monotonic() + (CHECK_EVERY_S if upstream.up
                                                      else PROBE_EVERY_S)
        if came_back:
            log.info("upstream %s in rotation (model %r, max_model_len %s)", upstream.url,
                     upstream.model, upstream.max_model_len)
            self.on_back(upstream)
        elif found.problem is not None and was_up and not upstream.up:
            log.warning("upstream %s out of rotation: %s", upstream.url, found.problem)
        elif found.problem is not None and not upstream.up and found.problem != before:
            log.log(logging.ERROR if "tokenizer differs" in found.problem else logging.INFO,
                    "upstream %s not in rotation: %s", upstream.url, found.problem)

    def _probe_failed(self, upstream: Upstream, found: Probe) -> None:
        """Under the lock: a failed probe counts as a failed request does."""
        if upstream.up:
            upstream.failures += 1
            upstream.consecutive += 1
            if found.connect_failed or upstream.consecutive >= self.health.eject_after:
                upstream.up = False
        if not upstream.up:
            upstream.problem = found.problem

