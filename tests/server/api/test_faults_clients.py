"""Slow work and slow clients, injected against a real `strictcall serve` process on the
embedded model (the `replicas` tier, beside the other faults): 40 hung tool handlers
beside plain chat, and stalled stream readers beside new requests. Each prints its numbers
(tests/faults.py Tally: run with -s to see them)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from server.process import ServerProcess
from tests.faults import Tally, runs, starts, until

pytestmark = [pytest.mark.replicas, pytest.mark.slow]
MODEL = "smollm2-135m-instruct"


@pytest.fixture()
def runs_file(tmp_path) -> Iterator:
    path = tmp_path / "runs.log"
    os.environ["STRICTCALL_TEST_RUNS"] = str(path)  # the server inherits it
    yield path
    os.environ.pop("STRICTCALL_TEST_RUNS", None)


def test_forty_hung_handlers_beside_plain_chat(runs_file):
    """40 writes whose ledger hangs (4 s, past their 1 s limit) at once: 8 run and hold
    their owner's 8 threads, 32 are refused without running (retryable, not stored); plain
    chat answers beside them all along. Then the 32 run, once each."""
    writes, chats = Tally("40 hung handlers"), Tally("plain chat beside 40 hung handlers")
    keys = [f"idem_{uuid.uuid4().hex}" for _ in range(40)]
    slowest_chat = 0.0
    with ServerProcess("--contracts", "tests.server.state.replica_contracts",
                       "--handler-workers", "8", "--max-tokens-cap", "64") as server:
        async def scenario() -> list[httpx.Response]:
            nonlocal slowest_chat
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as client:
                hung = asyncio.gather(*(client.post(
                    "/v1/tools/post_ledger_entry/invoke", json={
                        "arguments": {"hold_s": 4}, "idempotency_key": k}) for k in keys))
                await asyncio.sleep(0.3)
                for _ in range(4):
                    started = time.monotonic()
                    answer = await client.post("/v1/chat/completions", json={
                        "model": MODEL, "max_tokens": 8,
                        "messages": [{"role": "user", "content": "Hello!"}]})
                    slowest_chat = max(slowest_chat, time.monotonic() - started)
                    chats.saw(answer.status_code)
                return list(await hung)
        answers = asyncio.run(scenario())
        for answer in answers:
            writes.saw(answer.status_code)
        outcomes = [a.json()["outcome"] for a in answers]
        assert outcomes.count("side_effect_unknown") == 8 and outcomes.count("failed") == 32
        held = [k for k, o in zip(keys, outcomes, strict=True) if o == "side_effect_unknown"]
        refused = [k for k in keys if k not in held]
        assert all(starts(runs_file, k) == 0 for k in refused)  # refused: nothing ran
        assert until(lambda: len([r for r in runs(runs_file) if r.startswith("done")]) == 8,
                     timeout_s=30)
        replays = [_invoke(server, k, 4) for k in held]  # their real outcomes were kept
        retried = [_invoke(server, k, 0) for k in refused]  # nothing stored: they may run
        for answer in replays + retried:
            writes.saw(answer.status_code)
    assert all(r.json()["replayed"] and r.json()["outcome"] == "succeeded" for r in replays)
    assert all(not r.json()["replayed"] and r.json()["outcome"] == "succeeded"
               for r in retried)
    writes.ran = sum(starts(runs_file, k) for k in keys)
    writes.lost = sum(r.json()["outcome"] != "succeeded" for r in replays)
    writes.report()
    chats.report()
    print(f"slowest chat beside them: {slowest_chat:.2f} s")
    assert [starts(runs_file, k) for k in keys] == [1] * 40  # each once, none twice
    assert writes.lost == 0 and writes.answered == writes.sent
    assert chats.statuses[200] == chats.sent == 4 and slowest_chat < 20


def _invoke(server: ServerProcess, key: str, hold_s: float) -> httpx.Response:
    return httpx.post(f"{server.base_url}/v1/tools/post_ledger_entry/invoke", timeout=60,
                      json={"arguments": {"hold_s": hold_s}, "idempotency_key": key})


def _stalled_stream(port: int) -> socket.socket:
    """A streamed request from a client that never reads (a small receive buffer, so the
    server's writes back up soon)."""
    body = json.dumps({"model": MODEL, "stream": True, "max_output_tokens": 2000,
                       "input": "Write a very long story about the sea."}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                 b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def _closed_by_server(sock: socket.socket, timeout_s: float) -> bool:
    """Read what is buffered; True when the server has closed the connection."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    return True


def test_stalled_stream_readers_beside_new_requests():
    """Two places (one decoding, one queued), both taken by streams whose clients stopped
    reading: once the server's writes to them back up past the write deadline, their
    decodes stop and their places go to new requests, which are answered."""
    stalled_tally, fresh = Tally("stalled stream readers"), Tally("new requests beside them")
    with ServerProcess("--max-batch", "1", "--max-queued", "1", "--send-buffer-bytes",
                       "16384", "--stream-write-timeout-s", "2",
                       "--max-tokens-cap", "2000") as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        stalled = [_stalled_stream(port) for _ in range(2)]
        stalled_tally.sent = len(stalled)
        time.sleep(1.0)
        started, first_ok = time.monotonic(), None
        while time.monotonic() - started < 180 and first_ok is None:
            answer = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=60, json={
                "model": MODEL, "max_tokens": 8,
                "messages": [{"role": "user", "content": "Hello!"}]})
            fresh.saw(answer.status_code)
            assert answer.status_code in (200, 429), answer.text
            if answer.status_code == 200:
                first_ok = time.monotonic() - started
            else:
                time.sleep(1.0)
        closed = [_closed_by_server(s, 10) for s in stalled]  # still connected until now
        stalled_tally.answered = sum(closed)
        log = server.log_path.read_text()
        for sock in stalled:
            sock.close()
    stalled_tally.report()
    fresh.report()
    print(f"first new request answered after {first_ok} s")
    assert first_ok is not None, "the stalled streams kept every place"
    assert fresh.statuses[429] >= 1  # both places were taken by the stalled streams
    assert closed == [True, True]  # the server ended both
    assert log.count("whose client took nothing") == 2
