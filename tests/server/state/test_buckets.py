"""The rate-limit buckets in a real Redis (the `replicas` tier): a burst admits one
minute's allowance and no more, across every limiter that shares the Redis (replicas);
the refusal is the same 429 with Retry-After as in memory; charged tokens push the bucket
below zero; Redis gone is a 503, not a free pass."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from server.errors import RateLimited, Unavailable
from server.identity import Identity
from server.state.buckets import RedisRateLimiter

pytestmark = [pytest.mark.replicas, pytest.mark.slow]


def key(**limits) -> Identity:
    return Identity(f"k-{uuid.uuid4().hex[:8]}", None, ("chat",), **limits)


def limiter(url: str, **defaults) -> RedisRateLimiter:
    defaults.setdefault("requests_per_minute", None)
    defaults.setdefault("tokens_per_minute", None)
    return RedisRateLimiter(url, shown=url, **defaults)


async def admitted(limiters: list[RedisRateLimiter], who: Identity, tries: int) -> list[object]:
    async def one(i: int) -> object:
        try:
            await limiters[i % len(limiters)].acquire(who)
            return "ok"
        except RateLimited as exc:
            return exc
    return list(await asyncio.gather(*(one(i) for i in range(tries))))


def test_replicas_sharing_redis_admit_one_minute_of_requests_between_them(redis_server):
    async def run() -> list[object]:
        replicas = [limiter(redis_server.url), limiter(redis_server.url)]
        try:
            return await admitted(replicas, key(requests_per_minute=10), 30)
        finally:
            for replica in replicas:
                await replica.aclose()

    results = asyncio.run(run())
    assert results.count("ok") == 10
    refused = [r for r in results if isinstance(r, RateLimited)]
    assert len(refused) == 20
    assert all(r.status == 429 and 1 <= r.retry_after_s <= 6 for r in refused)
    assert refused[0].extensions == {"limit": "requests_per_minute", "limit_value": 10}


def test_charged_tokens_refuse_the_next_request_until_the_bucket_refills(redis_server):
    async def run() -> tuple[RateLimited, int]:
        shared = limiter(redis_server.url)
        who = key(tokens_per_minute=600)
        try:
            await shared.acquire(who)
            shared.charge(who, 606)  # 6 over: at 10 tokens a second, 0.6 s below zero
            await asyncio.gather(*shared._charges)
            with pytest.raises(RateLimited) as refused:
                await shared.acquire(who)
            return refused.value, len(await shared._redis.keys(f"*{who.name}*"))
        finally:
            await shared.aclose()

    refused, buckets = asyncio.run(run())
    assert refused.extensions["limit"] == "tokens_per_minute"
    assert refused.retry_after_s == 1
    assert buckets == 1  # the token bucket; no request limit, no request bucket


def test_server_defaults_apply_and_a_key_of_zero_is_unlimited(redis_server):
    async def run() -> list[object]:
        shared = limiter(redis_server.url, requests_per_minute=2)
        try:
            free = await admitted([shared], key(requests_per_minute=0), 5)
            limited = await admitted([shared], key(), 3)
            return [*free, *limited]
        finally:
            await shared.aclose()

    results = asyncio.run(run())
    assert results[:5] == ["ok"] * 5  # 0: no limit for this key
    limited = results[5:]  # the server's 2 a minute: two of three, whichever came first
    assert limited.count("ok") == 2 and sum(isinstance(r, RateLimited) for r in limited) == 1


def test_redis_unreachable_is_a_503_with_retry_after():
    from tests.real_servers import free_port

    async def run() -> Unavailable:
        gone = limiter(f"redis://127.0.0.1:{free_port()}/0", requests_per_minute=5)
        try:
            with pytest.raises(Unavailable) as refused:
                await gone.acquire(key())
            return refused.value
        finally:
            await gone.aclose()

    refused = asyncio.run(run())
    assert refused.status == 503 and refused.retryable
    assert "rate-limit store" in refused.detail
