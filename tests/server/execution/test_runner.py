"""The runner against an HTTP handler (httpx's in-process transport): each status class
maps to its outcome, and writes are never retried."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from contracts import ExecutionSpec, HttpHandler, ToolContext
from server.execution import Runner

CTX = ToolContext("t", "idem_abc", "acme", ("chat",), 1)


def run(answer, *, kind="read", retries=2):
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            spec = ExecutionSpec(HttpHandler("http://tools.test/run"), 2.0, retries)
            return await Runner(http).run(spec, {"a": 1}, kind=kind, context=CTX)
    return asyncio.run(go()), seen


def test_2xx_succeeds_and_sends_the_key():
    done, seen = run(lambda r: httpx.Response(200, json={"ok": True}), kind="write")
    assert (done.outcome, done.result, done.attempts) == ("succeeded", {"ok": True}, 1)
    assert seen[0].headers["Idempotency-Key"] == "idem_abc"


def test_partial_body_is_partial():
    done, _ = run(lambda r: httpx.Response(200, json={"status": "partial", "detail": "half"}))
    assert done.outcome == "partial" and done.problem["detail"] == "half"


def test_4xx_failed_without_acting():
    done, seen = run(lambda r: httpx.Response(404, text="no such order"), kind="write")
    assert done.outcome == "failed" and "404" in done.problem["detail"] and len(seen) == 1


@pytest.mark.parametrize(("kind", "outcome", "tries"), [("read", "failed", 3),
                                                       ("write", "side_effect_unknown", 1)])
def test_5xx_retries_reads_only(kind, outcome, tries):
    done, seen = run(lambda r: httpx.Response(502), kind=kind)
    assert (done.outcome, len(seen), done.attempts) == (outcome, tries, tries)


def _raises(error):
    def answer(request):
        raise error("boom", request=request)
    return answer


@pytest.mark.parametrize("error", [httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout])
def test_a_write_that_sent_nothing_failed_and_may_run_again(error):
    done, seen = run(_raises(error), kind="write")
    assert done.outcome == "failed" and done.problem["retryable"] and len(seen) == 1
    assert "nothing was sent" in done.problem["detail"]


def test_a_429_did_not_act_and_says_when_to_come_back():
    done, _ = run(lambda r: httpx.Response(429, headers={"Retry-After": "7"}), kind="write")
    assert done.outcome == "failed" and done.problem["retryable"]
    assert done.problem["retry_after"] == 7


def test_a_read_timeout_after_sending_may_have_acted():
    done, _ = run(_raises(httpx.ReadTimeout), kind="write")
    assert done.outcome == "side_effect_unknown" and not done.problem["retryable"]
