"""What the load benchmark (bench/speed/load.py) counts, apart from the HTTP that produces it, so
that its classification is unit-tested without a server (tests/bench/test_load_bench.py).

Every request ends in exactly one category:
  answered      2xx, and the whole answer arrived (a stream: up to `data: [DONE]`)
  shed          429, or 503 with Retry-After: the server said "not now" (retry is correct);
                not an engine failure, though it is a 503 with Retry-After too
  disconnected  the client left on purpose (mid-stream, or before a non-streamed answer)
  refused       another 4xx (422: output failed validation, 400 ...): an answer, not a loss
  server_error  any other 5xx, or a stream that ended in an error event that is no shed
  lost          no answer at all: a connection error, a timeout, a stream cut before its end
And, across categories: duplicated, a response whose X-Request-Id is not the one sent, or
an id (request or completion) answered twice."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("answered", "shed", "disconnected", "refused", "server_error", "lost")


@dataclass
class Outcome:
    """One request as the client saw it."""

    kind: str  # tool | json | stream
    sent_id: str
    status: int | None = None  # None: no HTTP response at all
    retry_after: bool = False
    retry_after_s: float = 0.0  # what Retry-After asked for (a polite client waits)
    echoed_id: str | None = None
    completion_id: str | None = None  # the body's own id (chatcmpl-...), if any
    complete: bool = False  # the whole body (or stream) arrived
    disconnected: bool = False  # the client chose to leave
    stream_error_status: int | None = None  # a stream's final error event, if any
    problem: str = ""  # the error's problem slug (the `type` URI's #<slug>), if any
    seconds: float = 0.0
    error: str = ""


def classify(o: Outcome) -> str:
    if o.disconnected:
        return "disconnected"
    if o.status is None:
        return "lost"
    if o.status in (429, 503) and o.retry_after and o.problem != "engine-failure":
        return "shed"
    if o.status >= 500:
        return "server_error"
    if o.status >= 400:
        return "refused"
    if o.stream_error_status is not None:
        shed = o.stream_error_status in (429, 503) and o.problem != "engine-failure"
        return "shed" if shed else "server_error"
    return "answered" if o.complete else "lost"


@dataclass
class Tally:
    """Outcomes of one run, counted as they come in."""

    counts: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, category)
    latencies: list[float] = field(default_factory=list)
    duplicated: int = 0
    examples: dict[str, str] = field(default_factory=dict)  # category -> one error seen
    _request_ids: set[str] = field(default_factory=set)
    _completion_ids: set[str] = field(default_factory=set)

    def add(self, o: Outcome) -> str:
        category = classify(o)
        self.counts[category] += 1
        self.by_kind[(o.kind, category)] += 1
        if category == "answered":
            self.latencies.append(o.seconds)
        if category != "answered" and category != "disconnected" and o.error:
            self.examples.setdefault(category, o.error[:300])
        if o.status is not None and self._duplicate(o):
            self.duplicated += 1
            self.examples.setdefault("duplicated", f"sent {o.sent_id}, got {o.echoed_id} "
                                                   f"(completion {o.completion_id})")
        return category

    def _duplicate(self, o: Outcome) -> bool:
        """The response is not this request's, or an id came back a second time."""
        twice = o.echoed_id in self._request_ids or (
            o.completion_id is not None and o.completion_id in self._completion_ids)
        if o.echoed_id is not None:
            self._request_ids.add(o.echoed_id)
        if o.completion_id is not None:
            self._completion_ids.add(o.completion_id)
        return o.echoed_id != o.sent_id or twice

    @property
    def sent(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> dict[str, Any]:
        return {"sent": self.sent, **{c: self.counts.get(c, 0) for c in CATEGORIES},
                "duplicated": self.duplicated,
                "p50_s": percentile(self.latencies, 50),
                "p99_s": percentile(self.latencies, 99),
                "by_kind": {f"{k}/{c}": n for (k, c), n in sorted(self.by_kind.items())},
                "examples": dict(self.examples)}


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def table(rows: list[dict[str, Any]]) -> str:
    """One markdown row per run."""
    lines = ["| run | clients | s | sent | answered | shed | disconnected | refused (4xx) | "
             "lost | duplicated | 5xx | p50 s | p99 s | RSS start MiB | RSS end MiB | "
             "idle after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['clients']} | {r['seconds']:.0f} | {r['sent']} | "
            f"{r['answered']} | {r['shed']} | {r['disconnected']} | {r['refused']} | "
            f"{r['lost']} | {r['duplicated']} | {r['server_error']} | {_s(r['p50_s'])} | "
            f"{_s(r['p99_s'])} | {_mib(r['rss_start_kib'])} | {_mib(r['rss_end_kib'])} | "
            f"{'yes' if r['idle_after'] else 'NO'} |")
    return "\n".join(lines)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.0f}"
