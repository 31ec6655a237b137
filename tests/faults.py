"""What the fault tests share (the `replicas` tier, tests/server/*/test_faults_*.py): the
tally each fault reports (requests sent, answered, writes that ran, outcomes lost), the
count of handler runs every replica wrote down, a delaying TCP proxy in front of a real
server (a slow backend), and a partner's HTTP endpoint on a port a test opens late."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.real_servers import free_port


@dataclass
class Tally:
    """One fault's numbers, printed for the run's log (-s) and asserted by the test."""

    fault: str
    sent: int = 0  # HTTP requests made
    answered: int = 0  # of them, answered with a status (not a hang, not a dropped socket)
    ran: int = 0  # write handler runs, over every replica
    lost: int = 0  # writes that ran and whose outcome no replica can give back
    statuses: Counter[int] = field(default_factory=Counter)

    def saw(self, status: int | None) -> None:
        self.sent += 1
        if status is not None:
            self.answered += 1
            self.statuses[status] += 1

    def report(self) -> str:
        line = (f"FAULT {self.fault}: sent {self.sent}, answered {self.answered}, ran "
                f"{self.ran}, lost {self.lost}; statuses {dict(sorted(self.statuses.items()))}")
        print(f"\n{line}")
        return line


def runs(path: Path, key: str | None = None) -> list[str]:
    """The lines handlers wrote (`start KEY PID`, `done KEY PID`), of one key or all."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if key is None or f" {key} " in line]


def starts(path: Path, key: str) -> int:
    return sum(1 for line in runs(path, key) if line.startswith("start "))


class SlowProxy:
    """A TCP proxy on 127.0.0.1 in front of `target` (host, port) that holds back the
    answer to each streamed `/v1/completions` request for `delay_s` (a backend slow on the
    requests that matter while it answers its probes at once). Run in its own thread."""

    def __init__(self, target_port: int, *, delay_s: float) -> None:
        self.target_port, self.delay_s = target_port, delay_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.delayed = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="slow-proxy")

    def __enter__(self) -> SlowProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        # Stopped: close what is still open (a held answer, a connection mid-stream), so no
        # task, socket or loop is left for the garbage collector to warn about.
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.run_until_complete(asyncio.sleep(0))  # transports finish closing
        self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        hold = asyncio.Event()  # set: the next answer bytes wait delay_s
        await asyncio.gather(self._pump(reader, up_writer, hold, watch=True),
                             self._pump(up_reader, writer, hold, watch=False),
                             return_exceptions=True)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    hold: asyncio.Event, *, watch: bool) -> None:
        asked = bytearray()  # the request so far (its head and body may come apart)
        try:
            while chunk := await source.read(65536):
                if watch:
                    asked += chunk
                    if b"POST /v1/completions" in asked and (
                            b'"stream":true' in asked or b'"stream": true' in asked):
                        hold.set()
                        asked.clear()
                    del asked[:-4096]
                if not watch and hold.is_set():
                    hold.clear()
                    self.delayed += 1
                    await asyncio.sleep(self.delay_s)
                sink.write(chunk)
                await sink.drain()
        finally:
            with contextlib.suppress(Exception):
                sink.close()


class Partner:
    """A partner's HTTP endpoint on `port`, counting the requests that reached it: started
    late, to turn a closed port into an open one."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.received: list[dict] = []
        partner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                partner.received.append(json.loads(body))
                answer = json.dumps({"notified": len(partner.received)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Partner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def until(check, *, timeout_s: float, every_s: float = 0.25) -> bool:
    """Poll `check` until it is true or `timeout_s` passed; whether it became true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every_s)
    return bool(check())
