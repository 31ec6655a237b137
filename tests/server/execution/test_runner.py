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


def test_one_owners_hanging_endpoint_holds_only_its_own_connections():
    """Each owner has its own client: with the hanging owner's one connection taken, its
    next write waits for a connection and is "nothing was sent" (a retry may get through),
    never "side effect unknown"; another owner's tool is not held up at all."""
    from server.execution import OwnerClients

    async def go():
        import uvicorn

        release = asyncio.Event()

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            if scope["path"] == "/hang":
                await release.wait()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"ok": true}'})

        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                               log_level="error"))
        serving = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        clients = OwnerClients(connections=1)
        runner = Runner(clients, workers_per_owner=1)
        hang = ExecutionSpec(HttpHandler(f"http://127.0.0.1:{port}/hang"), 2.0, 0)
        fine = ExecutionSpec(HttpHandler(f"http://127.0.0.1:{port}/ok"), 2.0, 0)
        first = asyncio.ensure_future(runner.run(hang, {}, kind="write", context=CTX,
                                                 owner="payments"))
        await asyncio.sleep(0.2)  # the payments connection is taken
        second = await runner.run(hang, {}, kind="write", context=CTX, owner="payments")
        other = await runner.run(fine, {}, kind="write", context=CTX, owner="shipping")
        release.set()
        await first
        await clients.aclose()
        server.should_exit = True
        await serving
        return second, other

    second, other = asyncio.run(go())
    assert second.outcome == "failed" and "nothing was sent" in second.problem["detail"]
    assert other.outcome == "succeeded"
