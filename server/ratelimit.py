"""Per-key rate limits: token buckets in requests per minute and tokens per minute.

Each API key has up to two buckets, each holding at most one minute's allowance and
refilling continuously, so a key may burst its whole minute at once and then runs at the
rate. A request takes one request token up front. Tokens (prompt + completion) are only
known after the decode, so they are charged then, and the bucket may go below zero: one
large answer is not cut short, the key's next requests wait until the bucket is above zero
again. Refusing up front on an estimate would refuse requests that fit.

`RateLimiter` keeps the buckets in memory, per process: replicas each count on their
own, and a restart forgets. Buckets are touched from the event loop (admit) and from
decode completions (charge), hence the lock. Replicas share them in Redis instead
(`--rate-limit-url`, server/state/buckets.py): the same buckets behind the same
`Limiter` interface."""

from __future__ import annotations

import abc
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from server.errors import RateLimited
from server.identity import Identity


@dataclass
class Bucket:
    """`rate` tokens per minute; holds at most `rate`; may go negative when charged."""

    rate: int
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(float(self.rate), self.level + (now - self.at) * self.rate / 60.0)
        self.at = now

    def seconds_until(self, level: float) -> float:
        """How long until the bucket holds `level` (0 when it already does)."""
        return max(0.0, (level - self.level) * 60.0 / self.rate)


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int | None
    tokens_per_minute: int | None


class Limiter(abc.ABC):
    """Server defaults for keys that set no limit of their own; a key's 0 means none."""

    defaults: Limits

    @abc.abstractmethod
    async def acquire(self, identity: Identity) -> None:
        """Take one request, or raise RateLimited (429) with when to retry."""

    @abc.abstractmethod
    def charge(self, identity: Identity, tokens: int) -> None:
        """Count `tokens` a decode took against the key's token bucket (if it has one)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook: memory holds nothing
        """Release connections."""

    def limits_for(self, identity: Identity) -> Limits:
        def pick(own: int | None, default: int | None) -> int | None:
            value = default if own is None else own
            return value or None  # 0: this key has no limit

        return Limits(pick(identity.requests_per_minute, self.defaults.requests_per_minute),
                      pick(identity.tokens_per_minute, self.defaults.tokens_per_minute))


class RateLimiter(Limiter):
    """The buckets in this process's memory."""

    def __init__(self, *, requests_per_minute: int | None, tokens_per_minute: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.defaults = Limits(requests_per_minute, tokens_per_minute)
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], Bucket] = {}

    async def acquire(self, identity: Identity) -> None:
        self.admit(identity)

    def admit(self, identity: Identity) -> None:
        """Take one request, or raise RateLimited (429) with when to retry. Refused when
        the request bucket holds less than one, or the token bucket nothing."""
        limits = self.limits_for(identity)
        with self._lock:
            now = self.clock()
            requests = self._bucket(identity, "requests", limits.requests_per_minute, now)
            tokens = self._bucket(identity, "tokens", limits.tokens_per_minute, now)
            waits = []
            if requests is not None and requests.level < 1:
                waits.append(("requests", requests.rate, requests.seconds_until(1)))
            if tokens is not None and tokens.level <= 0:
                # Above zero, not just at it: a bucket exactly empty still refuses.
                waits.append(("tokens", tokens.rate, tokens.seconds_until(0) + 0.001))
            if not waits:
                if requests is not None:
                    requests.level -= 1
                return
        raise refusal(identity, waits)

    def charge(self, identity: Identity, tokens: int) -> None:
        rate = self.limits_for(identity).tokens_per_minute
        if rate is None or tokens <= 0:
            return
        with self._lock:
            bucket = self._bucket(identity, "tokens", rate, self.clock())
            assert bucket is not None
            bucket.level -= tokens

    def _bucket(self, identity: Identity, kind: str, rate: int | None,
                now: float) -> Bucket | None:
        if rate is None:
            return None
        bucket = self._buckets.get((identity.name, kind))
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[(identity.name, kind)] = Bucket(rate, float(rate), now)
        bucket.refill(now)
        return bucket


def refusal(identity: Identity, waits: list[tuple[str, int, float]]) -> RateLimited:
    """The 429 for a key whose buckets (kind, rate, seconds until it may pass) refuse it:
    the longest wait decides the Retry-After."""
    kind, rate, wait = max(waits, key=lambda w: w[2])
    retry = max(1, math.ceil(wait))
    return RateLimited(f"the key {identity.name!r} is over its limit of {rate} {kind} per "
                       f"minute; retry after {retry} s", retry_after_s=retry,
                       extensions={"limit": f"{kind}_per_minute", "limit_value": rate})
