"""Slow clients hold nothing for ever: a response whose client stopped reading is ended at
the write deadline and its admission place freed; a body that trickles in is a 408; a
connection whose request headers never come whole is closed (a real uvicorn on
127.0.0.1)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import SimpleNamespace

import uvicorn
from starlette.responses import PlainTextResponse, StreamingResponse

from server.api.gate import Gate
from server.api.serving import HeaderDeadline
from tests.real_servers import free_port


class Places:
    def __init__(self) -> None:
        self.inside = 0

    def enter(self) -> None:
        self.inside += 1

    def leave(self) -> None:
        self.inside -= 1


def _scope(places: Places) -> dict:
    state = SimpleNamespace(shutdown_deadline=None, rate_limits=None, admission=places)
    return {"type": "http", "path": "/v1/chat/completions", "method": "POST", "headers": [],
            "app": SimpleNamespace(state=state)}


async def _stream(scope, receive, send):
    async def events():
        for n in range(1000):
            yield f"data: {n}\n\n"
            await asyncio.sleep(0.01)
    await StreamingResponse(events(), media_type="text/event-stream")(scope, receive, send)


def test_a_stream_whose_client_stopped_reading_is_ended_and_frees_its_place():
    places = Places()
    gate = Gate(_stream, keys=None, metrics_auth=False, max_body_bytes=4096,
                read_timeout_s=5, write_timeout_s=0.3)
    taken = []

    async def receive():
        if not taken:
            taken.append("body")
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        taken.append(message["type"])
        if len(taken) > 4:
            await asyncio.sleep(3600)  # the client's buffers are full: it is not reading

    async def scenario() -> float:
        started = time.monotonic()
        await asyncio.wait_for(gate(_scope(places), receive, send), 10)
        return time.monotonic() - started

    elapsed = asyncio.run(scenario())
    assert elapsed < 2 and places.inside == 0
    assert taken[:2] == ["body", "http.response.start"]


def test_a_body_that_trickles_in_is_a_408_and_takes_no_place():
    places = Places()
    gate = Gate(_stream, keys=None, metrics_auth=False, max_body_bytes=4096,
                read_timeout_s=0.3, write_timeout_s=5)
    answered: list[dict] = []

    async def receive():
        await asyncio.sleep(0.2)  # a byte now and then, never the end
        return {"type": "http.request", "body": b" ", "more_body": True}

    async def send(message):
        answered.append(message)

    asyncio.run(asyncio.wait_for(gate(_scope(places), receive, send), 10))
    assert answered[0]["status"] == 408 and places.inside == 0
    assert b"did not arrive whole" in answered[1]["body"]


def test_a_connection_whose_headers_never_come_is_closed():
    async def hello(scope, receive, send):
        await PlainTextResponse("hi")(scope, receive, send)

    port = free_port()
    protocol = type("Bounded", (HeaderDeadline,), {"header_timeout_s": 0.5})
    server = uvicorn.Server(uvicorn.Config(hello, host="127.0.0.1", port=port, http=protocol,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as silent, \
                socket.create_connection(("127.0.0.1", port), timeout=5) as trickle:
            trickle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            started = time.monotonic()
            assert silent.recv(1) == b"" and trickle.recv(1) == b""  # closed by the server
            assert time.monotonic() - started < 3
        with socket.create_connection(("127.0.0.1", port), timeout=5) as prompt:
            prompt.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert prompt.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        server.should_exit = True
        thread.join(10)
