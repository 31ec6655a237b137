"""Per-key rate limits: the token buckets on a clock the test moves, and the 429 problem
(Anthropic's shape on /v1/messages) through the app over a ScriptedEngine. Keys off: no
limits at all."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from server.api.app import create_app
from server.engines.scripted import ScriptedEngine
from server.errors import RateLimited, problem_type
from server.identity import Identity, KeyFileError, KeyRing
from server.ratelimit import RateLimiter
from server.settings import Settings
from tests.scripted import assert_error, assert_problem

TOKENS_KEY = "sk-tokens-0123456789abcdef"
REQUESTS_KEY = "sk-requests-0123456789abcd"
FREE_KEY = "sk-free-0123456789abcdefgh"
KEY_FILE = f"""
keys:
  - {{key: {TOKENS_KEY}, name: tokens-key, tokens_per_minute: 10}}
  - {{key: {REQUESTS_KEY}, name: requests-key, requests_per_minute: 1}}
  - {{key: {FREE_KEY}, name: free-key, requests_per_minute: 0}}
"""
CHAT = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}


class Clock:
    """A monotonic clock the test moves by hand: no test waits for a bucket to refill."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def identity(name: str = "k", **limits) -> Identity:
    return Identity(name, None, ("chat",), **limits)


def test_request_bucket_allows_a_minute_at_once_then_the_rate():
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=2, tokens_per_minute=None, clock=clock)
    key = identity()
    limiter.admit(key)
    limiter.admit(key)
    with pytest.raises(RateLimited) as refused:
        limiter.admit(key)
    assert refused.value.retry_after_s == 30 and refused.value.status == 429
    assert refused.value.extensions["limit"] == "requests_per_minute"
    clock.now += 30  # one request's worth has refilled
    limiter.admit(key)
    with pytest.raises(RateLimited):
        limiter.admit(key)


def test_tokens_are_charged_after_and_refuse_only_an_empty_bucket():
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=None, tokens_per_minute=100, clock=clock)
    key = identity()
    limiter.admit(key)
    limiter.charge(key, 60)
    limiter.admit(key)  # 40 left: admitted, whatever this one will cost
    limiter.charge(key, 90)  # an answer larger than what was left: the bucket goes below 0
    with pytest.raises(RateLimited) as refused:
        limiter.admit(key)
    assert refused.value.extensions["limit"] == "tokens_per_minute"
    assert 30 <= refused.value.retry_after_s <= 31  # 50 tokens at 100 a minute
    clock.now += refused.value.retry_after_s
    limiter.admit(key)


def test_a_key_sets_its_own_limits_and_zero_means_none():
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=1, tokens_per_minute=None, clock=clock)
    own, unlimited, default = identity("own", requests_per_minute=3), \
        identity("free", requests_per_minute=0), identity("default")
    for _ in range(3):
        limiter.admit(own)
    for _ in range(50):
        limiter.admit(unlimited)
    limiter.admit(default)
    with pytest.raises(RateLimited):
        limiter.admit(default)
    with pytest.raises(RateLimited):
        limiter.admit(own)  # keys count apart
    assert limiter.limits_for(unlimited).requests_per_minute is None


def test_key_file_takes_limits_and_refuses_negative_ones(tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(KEY_FILE)
    ring = KeyRing.load(path)
    assert ring.identify(TOKENS_KEY).tokens_per_minute == 10
    assert ring.identify(REQUESTS_KEY).requests_per_minute == 1
    path.write_text(f"keys: [{{key: {TOKENS_KEY}, name: a, requests_per_minute: -1}}]")
    with pytest.raises(KeyFileError, match="requests_per_minute"):
        KeyRing.load(path)


@pytest.fixture()
def client(model_dir, tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(KEY_FILE)
    settings = Settings(served_model_name="scripted", api_keys_file=path,
                        requests_per_minute=1000)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda prompt: "Hello."))
    with TestClient(app) as c:
        c.clock = app.state.rate_limits.clock = Clock()
        yield c


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_over_its_tokens_a_key_gets_429_with_retry_after(client):
    first = client.post("/v1/chat/completions", json=CHAT, headers=bearer(TOKENS_KEY))
    assert first.status_code == 200 and first.json()["usage"]["total_tokens"] > 10
    refused = client.post("/v1/chat/completions", json=CHAT, headers=bearer(TOKENS_KEY))
    body = assert_problem(refused, 429, says="10 tokens per minute")
    assert body["type"] == problem_type("rate-limited")
    assert body["retryable"] is True and body["error"]["type"] == "rate_limit_error"
    wait = int(refused.headers["retry-after"])
    assert wait == body["retry_after"] and wait >= 60  # dozens of tokens at 10 a minute
    assert_error(client.post("/v1/messages", json={**CHAT, "max_tokens": 8},
                             headers={"x-api-key": TOKENS_KEY}), 429, kind="rate_limit_error")
    assert client.post("/v1/chat/completions", json=CHAT,
                       headers=bearer(REQUESTS_KEY)).status_code == 200  # keys count apart
    client.clock.now += wait
    assert client.post("/v1/chat/completions", json=CHAT,
                       headers=bearer(TOKENS_KEY)).status_code == 200


def test_over_its_requests_a_key_gets_429_on_every_chat_route(client):
    assert client.get("/v1/models", headers=bearer(REQUESTS_KEY)).status_code == 200
    refused = client.post("/v1/responses", json={"model": "scripted", "input": "hi"},
                          headers=bearer(REQUESTS_KEY))
    assert_problem(refused, 429, says="1 requests per minute")
    assert refused.headers["retry-after"] == "60"
    assert client.get("/health").status_code == 200  # open routes are never counted
    for _ in range(5):  # 0: this key has no request limit, whatever the server default
        assert client.get("/v1/models", headers=bearer(FREE_KEY)).status_code == 200


def test_without_keys_there_is_no_rate_limit(model_dir):
    settings = Settings(served_model_name="scripted", requests_per_minute=1,
                        tokens_per_minute=1)
    app = create_app(settings, lambda s: ScriptedEngine(model_dir, lambda prompt: "Hello."))
    with TestClient(app) as c:
        assert app.state.rate_limits is None
        for _ in range(3):
            assert c.post("/v1/chat/completions", json=CHAT).status_code == 200
