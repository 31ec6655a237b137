"""`RedisRateLimiter`: the token buckets of server/ratelimit.py in Redis
(`--rate-limit-url redis://...`), so every replica counts against the same buckets: a key
allowed 60 requests a minute gets 60 however many replicas serve it.

Each check is one Lua script, run atomically by Redis: refill the key's buckets from the
time passed (Redis's clock, one for all replicas), refuse or take one request, and store
them. Charging a decode's tokens is a second script, sent without waiting. A bucket left
alone expires once it would have refilled: no record means a full bucket. Redis
unreachable: the request is refused with a 503 (the limits cannot be checked, so they are
not skipped)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from server.errors import Unavailable
from server.identity import Identity
from server.ratelimit import Limiter, Limits, refusal

log = logging.getLogger("strictcall.state")

_BUCKETS = """
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function load(key, rate, t)
  local v = redis.call('HMGET', key, 'level', 'at', 'rate')
  local level, at = tonumber(v[1]), tonumber(v[2])
  if level == nil or tonumber(v[3]) ~= rate then return rate end
  -- Redis's TIME is the wall clock, which can step back: no time, not negative time.
  return math.min(rate, level + math.max(0, t - at) * rate / 60)
end
local function save(key, rate, level, t)
  redis.call('HSET', key, 'level', tostring(level), 'at', tostring(t), 'rate', rate)
  redis.call('PEXPIRE', key, math.ceil((rate - level) * 60000 / rate) + 1000)
end
"""
# KEYS: the request bucket, the token bucket; ARGV: their rates (0: no such limit).
# Returns {1 admitted | 0 refused, seconds until the request bucket holds one (-1: it
# does), seconds until the token bucket is above zero (-1: it is)}.
ADMIT = _BUCKETS + """
local t = now()
local rrate, trate = tonumber(ARGV[1]), tonumber(ARGV[2])
local rlevel, tlevel
local rwait, twait = -1, -1
if rrate > 0 then
  rlevel = load(KEYS[1], rrate, t)
  if rlevel < 1 then rwait = (1 - rlevel) * 60 / rrate end
end
if trate > 0 then
  tlevel = load(KEYS[2], trate, t)
  if tlevel <= 0 then twait = (0 - tlevel) * 60 / trate + 0.001 end
end
local admitted = rwait < 0 and twait < 0
if rrate > 0 then
  if admitted then rlevel = rlevel - 1 end
  save(KEYS[1], rrate, rlevel, t)
end
if trate > 0 then save(KEYS[2], trate, tlevel, t) end
return {admitted and 1 or 0, tostring(rwait), tostring(twait)}
"""
# KEYS: the token bucket; ARGV: its rate, the tokens to take. Returns the new level.
CHARGE = _BUCKETS + """
local t = now()
local rate = tonumber(ARGV[1])
local level = load(KEYS[1], rate, t) - tonumber(ARGV[2])
save(KEYS[1], rate, level, t)
return tostring(level)
"""


class RedisRateLimiter(Limiter):
    def __init__(self, url: str, *, shown: str, requests_per_minute: int | None,
                 tokens_per_minute: int | None, prefix: str = "strictcall:rl:",
                 timeout_s: float = 1.0) -> None:
        import redis.asyncio

        self.defaults = Limits(requests_per_minute, tokens_per_minute)
        self.shown = shown  # the URL without its password, for messages
        self.prefix = prefix
        self._redis: Any = redis.asyncio.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self._admit = self._redis.register_script(ADMIT)
        self._charge = self._redis.register_script(CHARGE)
        self._charges: set[asyncio.Task[None]] = set()

    def keys(self, identity: Identity) -> list[str]:
        # One hash tag per key: both buckets in one Redis Cluster slot, as a script needs.
        return [f"{self.prefix}{{{identity.name}}}:requests",
                f"{self.prefix}{{{identity.name}}}:tokens"]

    async def acquire(self, identity: Identity) -> None:
        from redis.exceptions import RedisError

        limits = self.limits_for(identity)
        if limits.requests_per_minute is None and limits.tokens_per_minute is None:
            return
        try:
            admitted, request_wait, token_wait = await self._admit(
                keys=self.keys(identity), args=[limits.requests_per_minute or 0,
                                                limits.tokens_per_minute or 0])
        except RedisError as exc:
            raise self._unreachable(exc) from None
        if int(admitted):
            return
        waits = [(kind, rate, float(wait)) for kind, rate, wait in (
            ("requests", limits.requests_per_minute, request_wait),
            ("tokens", limits.tokens_per_minute, token_wait))
            if rate is not None and float(wait) >= 0]
        raise refusal(identity, waits)

    def charge(self, identity: Identity, tokens: int) -> None:
        rate = self.limits_for(identity).tokens_per_minute
        if rate is None or tokens <= 0:
            return
        task = asyncio.get_running_loop().create_task(self._charged(identity, rate, tokens))
        self._charges.add(task)  # held until done: a task nobody holds may be collected
        task.add_done_callback(self._charges.discard)

    async def _charged(self, identity: Identity, rate: int, tokens: int) -> None:
        from redis.exceptions import RedisError

        try:
            await self._charge(keys=self.keys(identity)[1:], args=[rate, tokens])
        except RedisError as exc:  # the answer is out; the next check will see Redis down
            log.warning("could not charge %d tokens to %r in %s: %s", tokens, identity.name,
                        self.shown, exc)

    def _unreachable(self, exc: Exception) -> Unavailable:
        log.warning("rate-limit store %s: %s", self.shown, exc)
        return Unavailable("the rate-limit store does not answer, so the key's limits "
                           "cannot be checked; retry after the Retry-After delay",
                           code="rate_limit_store_unavailable")

    async def aclose(self) -> None:
        if self._charges:
            await asyncio.gather(*self._charges, return_exceptions=True)
        await self._redis.aclose()
